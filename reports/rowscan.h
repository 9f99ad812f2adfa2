/*
 * rowscan: the rows of a second-layout file's rlg_rows, decoded by several
 * threads at once and handed to one reader, on the calling thread, in id
 * order, chunk by chunk: every row once, as integers. Each thread reads
 * ranges of ids on its own read-only connection. Not here: what a row
 * means (the readers: agg.c, top.c, verify_load.c, whatif_read.c).
 */
#ifndef RLG_REPORT_ROWSCAN_H
#define RLG_REPORT_ROWSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "rowids.h"

/* The most columns a scan hands over (bits of a row's NULL mask). */
#define ROWSCAN_MAXCOLS	16

struct rowscan;

/*
 * A scan of d's rows that pass where and f (f's rule and key found by id
 * in x), of the ncols columns cols names. jobs threads decode; with 1 the
 * calling thread decodes each chunk as it asks for it. Returns NULL with
 * a sentence in err.
 */
struct rowscan	*rowscan_open(struct rdb *d, const struct rowids *x,
		    const struct filter *f, const char *cols, int ncols,
		    const char *where, int jobs, char *err, size_t errlen);

/*
 * The next rows, in id order: *rows points at *n rows of 1 + ncols
 * integers each, the row's NULL mask (bit i: column i is NULL, and reads
 * 0) and then its columns; valid until the next call. Returns 1, 0 at the
 * end, or -1 with a sentence in err naming the file.
 */
int		 rowscan_next(struct rowscan *rs, const int64_t **rows,
		    size_t *n, char *err, size_t errlen);

/* The threads decoding for rs: 0 when the reader decodes alone. */
int		 rowscan_threads(const struct rowscan *rs);

/* Stops the threads and frees rs (NULL is fine). */
void		 rowscan_close(struct rowscan *rs);

/* One row for rowscan_run: 0 to go on, 1 to stop the scan. */
typedef int	(*rowscan_fn)(void *arg, const int64_t *v, uint32_t nulls);

/*
 * Calls fn for each row of such a scan, v at its columns. Returns 0, 1
 * when fn stopped it, or -1 with a sentence in err.
 */
int		 rowscan_run(struct rdb *d, const struct rowids *x,
		    const struct filter *f, const char *cols, int ncols,
		    const char *where, int jobs, rowscan_fn fn, void *arg,
		    char *err, size_t errlen);

/* The decoding threads a scan uses unless told: the online processors. */
int		 rowscan_default_jobs(void);

#endif
