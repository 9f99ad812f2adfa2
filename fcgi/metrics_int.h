/*
 * metrics_int: what of metrics.c a test reaches beyond metrics.h, for
 * tests/fuzz/fuzz_metrics.c (which links metrics.c built with a smaller
 * table: MAX_WORKERS, MAX_PROCS, RLG_METRICS_RULES; the Makefile). Never
 * called by the gateway.
 */
#ifndef RLG_METRICS_INT_H
#define RLG_METRICS_INT_H

#include <stddef.h>

/*
 * Overwrites this process's counter table (made, private, when there is
 * none) with data[0..size) repeated over all of it, then takes process
 * entry data[0] % MAX_PROCS as this process's. Returns 0, or -1 when size
 * is 0 or there is no memory. Not thread-safe: call before any
 * worker counts.
 */
int	metrics_fill_table(const unsigned char *data, size_t size);

/* 1 while this process has an entry in the table, 0 after
 * metrics_unshare(). */
int	metrics_sharing(void);

#endif
