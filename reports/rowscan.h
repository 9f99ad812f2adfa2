/*
 * rowscan: the rows of a second-layout file's rlg_rows, decoded by several
 * threads at once and handed to one consumer, on the calling thread, in id
 * order: every row once, as integers. Each thread reads ranges of ids on
 * its own read-only connection. Not here: what a row means (the readers:
 * top.c, verify_load.c).
 */
#ifndef RLG_REPORT_ROWSCAN_H
#define RLG_REPORT_ROWSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

/* The most columns a scan hands over (bits of a row's NULL mask). */
#define ROWSCAN_MAXCOLS	16

/*
 * One row: v[i] is column i (0 where NULL), bit i of nulls is set where
 * column i is NULL. Returns 0 to go on, 1 to stop the scan.
 */
typedef int	(*rowscan_fn)(void *arg, const int64_t *v, uint32_t nulls);

/*
 * Calls fn for each row of d's rlg_rows that passes where and f (as
 * rowids_select), with the ncols columns cols names. jobs threads decode
 * (1: the calling thread alone, inside SQLite's scan). Returns 0, 1 when
 * fn stopped the scan, or -1 with a sentence in err naming the file.
 */
int		 rowscan_run(struct rdb *d, const struct filter *f,
		    const char *cols, int ncols, const char *where, int jobs,
		    rowscan_fn fn, void *arg, char *err, size_t errlen);

/* The decoding threads a scan uses unless told: the online processors. */
int		 rowscan_default_jobs(void);

#endif
