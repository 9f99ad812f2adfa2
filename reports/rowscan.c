/*
 * rowscan: rlg_rows read by several threads, consumed in id order.
 *
 * Decoding a row's columns is most of what a report costs, and SQLite
 * does it on one core per connection. Here the ids from the first row to
 * the last are cut into chunks of CHUNK_IDS; thread t of n decodes chunks
 * t, t + n, t + 2n ... on its own connection, into a ring of 2n slots, so
 * each thread fills a second chunk while the first waits for the consumer.
 * The consumer takes chunk 0, 1, 2 ... in order, so it sees the rows as a
 * single scan would.
 *
 * A file being written: the scan reads the ids that were in the file when
 * it began, as a single scan would; rows that [audit] keep_rows deletes
 * while it runs may be read or not, as each connection reads its own
 * snapshot.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rowids.h"
#include "rowscan.h"

/*
 * Ids a chunk covers: enough rows that its seek and its handover are
 * nothing beside them, few enough that 2 slots a thread stay small (a
 * slot holds CHUNK_IDS rows of up to 17 integers: 1 MB).
 */
#define CHUNK_IDS	8192

struct slot {
	int64_t		 chunk;		/* the chunk it holds or may take */
	int		 ready;		/* filled: the consumer's turn */
	size_t		 n;		/* rows */
	int64_t		*v;		/* n rows of stride integers */
};

struct shared {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct slot	*slot;
	size_t		 nslot;
	int		 stop;		/* an error, or the consumer stopped */
	char		*err;		/* the first error, under mu */
	size_t		 errlen;
	/* Fixed once the threads start: */
	struct rdb	*d;
	const struct filter *f;
	const char	*cols, *where;
	int		 ncols, stride, nthreads;
	int64_t		 lo, nchunk;
};

struct worker {
	struct shared	*sh;
	pthread_t	 tid;
	int		 index;
	struct slot	*fill;		/* the slot being filled */
};

/* The row of argv as stride integers: the NULL mask, then the columns. */
static void
decode(int ncols, sqlite3_value **argv, int64_t *out)
{
	uint32_t nulls = 0;

	for (int i = 0; i < ncols; i++) {
		if (sqlite3_value_type(argv[i]) == SQLITE_NULL) {
			nulls |= 1u << i;
			out[i + 1] = 0;
		} else
			out[i + 1] = sqlite3_value_int64(argv[i]);
	}
	out[0] = nulls;
}

/* A worker's aggregate step: the row into the slot it fills. */
static void
collect_row(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct worker *w = sqlite3_user_data(ctx);
	struct slot *s = w->fill;

	if (s->n == CHUNK_IDS) {	/* ids are unique: never */
		sqlite3_result_error(ctx, "more rows than ids in a chunk", -1);
		return;
	}
	decode(argc, argv, s->v + s->n++ * (size_t)w->sh->stride);
}

/* The calling thread's aggregate step: the row straight to the consumer. */
struct inline_scan {
	rowscan_fn	 fn;
	void		*arg;
	int		 stopped;
};

static void
inline_row(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct inline_scan *s = sqlite3_user_data(ctx);
	int64_t row[ROWSCAN_MAXCOLS + 1];

	if (s->stopped)
		return;
	decode(argc, argv, row);
	if (s->fn(s->arg, row + 1, (uint32_t)row[0]) != 0) {
		s->stopped = 1;
		sqlite3_result_error(ctx, "stopped", -1);
	}
}

static void
scan_done(sqlite3_context *ctx)
{
	sqlite3_result_null(ctx);
}

/* "SELECT rlg_rowscan(cols) FROM rlg_rows WHERE where ..." on d's db. */
static sqlite3_stmt *
prepare(struct rdb *d, const struct filter *f, const char *cols,
    const char *where, void (*step)(sqlite3_context *, int, sqlite3_value **),
    void *arg, int ncols, char *err, size_t errlen)
{
	char sel[512];

	if (sqlite3_create_function(d->db, "rlg_rowscan", ncols, SQLITE_UTF8,
	    arg, NULL, step, scan_done) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", d->path, sqlite3_errmsg(d->db));
		return NULL;
	}
	snprintf(sel, sizeof(sel), "rlg_rowscan(%s)", cols);
	return rowids_select(d, f, sel, where, err, errlen);
}

/* The scan on the calling thread alone. */
static int
run_inline(struct rdb *d, const struct filter *f, const char *cols,
    int ncols, const char *where, rowscan_fn fn, void *arg, char *err,
    size_t errlen)
{
	struct inline_scan s = { fn, arg, 0 };
	sqlite3_stmt *st;
	int rc;

	if ((st = prepare(d, f, cols, where, inline_row, &s, ncols, err,
	    errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (!s.stopped && rc != SQLITE_DONE)
		db_read_error(d, err, errlen);
	sqlite3_finalize(st);
	sqlite3_create_function(d->db, "rlg_rowscan", ncols, SQLITE_UTF8,
	    NULL, NULL, NULL, NULL);
	return s.stopped ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Stops every thread, keeping the first error. Called with mu held. */
static void
fail_locked(struct shared *sh, const char *msg)
{
	if (!sh->stop && msg != NULL)
		snprintf(sh->err, sh->errlen, "%s", msg);
	sh->stop = 1;
	pthread_cond_broadcast(&sh->cv);
}

/* Decodes chunk c into its slot; 0, or -1 with err set. */
static int
fill_chunk(struct worker *w, sqlite3_stmt *st, int64_t c, struct rdb *wd,
    char *err, size_t errlen)
{
	struct shared *sh = w->sh;
	int64_t from = sh->lo + c * CHUNK_IDS;
	int rc;

	w->fill->n = 0;
	sqlite3_bind_int64(st, 5, from);
	sqlite3_bind_int64(st, 6, from + CHUNK_IDS);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return db_read_error(wd, err, errlen);
	return 0;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	struct rdb wd = { sh->d->path, NULL, sh->d->layout, 0 };
	char err[512] = "", where[384];
	sqlite3_stmt *st = NULL;

	snprintf(where, sizeof(where), "id >= ?5 AND id < ?6 AND (%s)",
	    sh->where);
	if (db_connect(wd.path, &wd.db, err, sizeof(err)) == -1 ||
	    (st = prepare(&wd, sh->f, sh->cols, where, collect_row, w,
	    sh->ncols, err, sizeof(err))) == NULL)
		goto out;
	for (int64_t c = w->index; c < sh->nchunk; c += sh->nthreads) {
		struct slot *s = &sh->slot[c % (int64_t)sh->nslot];

		int stop;

		pthread_mutex_lock(&sh->mu);
		while (!sh->stop && s->chunk != c)
			pthread_cond_wait(&sh->cv, &sh->mu);
		stop = sh->stop;
		pthread_mutex_unlock(&sh->mu);
		if (stop)
			break;
		w->fill = s;
		if (fill_chunk(w, st, c, &wd, err, sizeof(err)) == -1)
			break;
		pthread_mutex_lock(&sh->mu);
		s->ready = 1;
		pthread_cond_broadcast(&sh->cv);
		pthread_mutex_unlock(&sh->mu);
	}
out:
	if (err[0] != '\0') {
		pthread_mutex_lock(&sh->mu);
		fail_locked(sh, err);
		pthread_mutex_unlock(&sh->mu);
	}
	sqlite3_finalize(st);
	sqlite3_close(wd.db);
	return NULL;
}

/* Hands every chunk's rows to fn in order. Returns 0, 1 (fn stopped) or -1. */
static int
consume(struct shared *sh, rowscan_fn fn, void *arg)
{
	for (int64_t c = 0; c < sh->nchunk; c++) {
		struct slot *s = &sh->slot[c % (int64_t)sh->nslot];
		int stopped = 0, stop;

		pthread_mutex_lock(&sh->mu);
		while (!sh->stop && !(s->chunk == c && s->ready))
			pthread_cond_wait(&sh->cv, &sh->mu);
		stop = sh->stop;
		pthread_mutex_unlock(&sh->mu);
		if (stop)
			return -1;
		for (size_t i = 0; i < s->n && !stopped; i++) {
			const int64_t *row = s->v + i * (size_t)sh->stride;

			stopped = fn(arg, row + 1, (uint32_t)row[0]);
		}
		pthread_mutex_lock(&sh->mu);
		if (stopped)
			fail_locked(sh, NULL);
		s->chunk = c + (int64_t)sh->nslot;
		s->ready = 0;
		pthread_cond_broadcast(&sh->cv);
		pthread_mutex_unlock(&sh->mu);
		if (stopped)
			return 1;
	}
	return 0;
}

/* The first and last ids of d's rlg_rows; 0, 1 when it is empty, or -1. */
static int
id_range(struct rdb *d, int64_t *lo, int64_t *hi, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = db_prepare(d, "SELECT (SELECT min(id) FROM rlg_rows), "
	    "(SELECT max(id) FROM rlg_rows)", err,
	    errlen)) == NULL)
		return -1;
	if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return db_read_error(d, err, errlen);
	}
	rc = sqlite3_column_type(st, 0) == SQLITE_NULL;
	*lo = sqlite3_column_int64(st, 0);
	*hi = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	return rc;
}

/* Starts the threads, consumes, joins. */
static int
run_threads(struct shared *sh, rowscan_fn fn, void *arg)
{
	struct worker *w;
	int started = 0, ret;

	if ((w = calloc((size_t)sh->nthreads, sizeof(*w))) == NULL) {
		snprintf(sh->err, sh->errlen, "out of memory");
		return -1;
	}
	for (; started < sh->nthreads; started++) {
		w[started] = (struct worker){ sh, 0, started, NULL };
		if (pthread_create(&w[started].tid, NULL, worker_main,
		    &w[started]) != 0)
			break;
	}
	if (started < sh->nthreads) {
		pthread_mutex_lock(&sh->mu);
		fail_locked(sh, "cannot start a thread");
		pthread_mutex_unlock(&sh->mu);
		ret = -1;
	} else
		ret = consume(sh, fn, arg);
	for (int i = 0; i < started; i++)
		pthread_join(w[i].tid, NULL);
	free(w);
	return ret;
}

int
rowscan_run(struct rdb *d, const struct filter *f, const char *cols,
    int ncols, const char *where, int jobs, rowscan_fn fn, void *arg,
    char *err, size_t errlen)
{
	struct shared sh = { .d = d, .f = f, .cols = cols, .where = where,
	    .ncols = ncols, .stride = ncols + 1, .err = err, .errlen = errlen };
	int64_t hi = 0;
	int rc;

	if (jobs <= 1)
		return run_inline(d, f, cols, ncols, where, fn, arg, err, errlen);
	if ((rc = id_range(d, &sh.lo, &hi, err, errlen)) != 0)
		return rc == 1 ? 0 : -1;
	sh.nchunk = (hi - sh.lo) / CHUNK_IDS + 1;
	if (sh.nchunk < 2)
		return run_inline(d, f, cols, ncols, where, fn, arg, err, errlen);
	sh.nthreads = sh.nchunk < jobs ? (int)sh.nchunk : jobs;
	sh.nslot = 2 * (size_t)sh.nthreads;
	if ((sh.slot = calloc(sh.nslot, sizeof(*sh.slot))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = 0;
	for (size_t i = 0; i < sh.nslot; i++) {
		sh.slot[i].chunk = (int64_t)i;
		if ((sh.slot[i].v = malloc(CHUNK_IDS * sizeof(int64_t) *
		    (size_t)sh.stride)) == NULL)
			rc = -1;
	}
	if (rc == -1)
		snprintf(err, errlen, "out of memory");
	else {
		pthread_mutex_init(&sh.mu, NULL);
		pthread_cond_init(&sh.cv, NULL);
		rc = run_threads(&sh, fn, arg);
		pthread_cond_destroy(&sh.cv);
		pthread_mutex_destroy(&sh.mu);
	}
	for (size_t i = 0; i < sh.nslot; i++)
		free(sh.slot[i].v);
	free(sh.slot);
	return rc;
}

/*
 * At most MAX_DEFAULT_JOBS unless -j asks for more: a thread's two slots
 * take up to 2 MB, and a many-core machine is seldom the report's alone.
 */
#define MAX_DEFAULT_JOBS	16

int
rowscan_default_jobs(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > MAX_DEFAULT_JOBS ? MAX_DEFAULT_JOBS : (int)n;
}
