/*
 * rowscan: rlg_rows read by several threads, taken in id order.
 *
 * Decoding a row's columns is most of what a report costs, and SQLite
 * does it on one core per connection. Here the ids from the first row to
 * the last are cut into chunks of CHUNK_IDS ids; thread t of n decodes
 * chunks t, t + n, t + 2n ... on its own connection, into a ring of 2n
 * slots, so each thread fills a second chunk while the reader works on
 * the first. The reader takes chunk 0, 1, 2 ... in order, so it sees the
 * rows as a single scan would. With one job there is no thread: the
 * reader decodes the next CHUNK_IDS rows itself, on the file's own
 * connection, when it asks for them; rowscan_run's rows go from SQLite's
 * step straight to its function, with no slot.
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

#include "rowscan.h"

/*
 * Ids a chunk covers (rows, without threads): enough rows that its seek
 * and its handover are nothing beside them, few enough that 2 slots a
 * thread stay small (a slot holds CHUNK_IDS rows of up to 17 integers:
 * 1 MB).
 */
#define CHUNK_IDS	8192

struct slot {
	int64_t		 chunk;		/* the chunk it holds or may take */
	int		 ready;		/* filled: the reader's turn */
	size_t		 n;		/* rows */
	int64_t		*v;		/* n rows of stride integers */
};

/*
 * A connection that decodes chunks: a thread's, or the file's own. What
 * it writes a row lives here, on cache lines of its own (FILLER_ALIGN),
 * not in the slot or the scan another core reads.
 */
#define FILLER_ALIGN	64
struct filler {
	struct rowscan	*rs;
	struct rdb	 d;
	sqlite3_stmt	*st;
	int64_t		*out, *end;	/* the slot being filled: next row, end */
	int		 stride;	/* the scan's, here to be read a row */
	rowscan_fn	 fn;		/* the scan's */
	void		*arg;
	int64_t		 last_id;	/* of the last row it took */
	int		 full;		/* the slot filled up and stopped the scan */
	pthread_t	 tid;
	int		 index;
} __attribute__((aligned(FILLER_ALIGN)));

struct rowscan {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct slot	*slot;
	size_t		 nslot;
	int		 stop;		/* an error, or the reader closed */
	char		 err[512];	/* a thread's first error, under mu */
	const struct filter *f;
	const char	*cols;
	char		*where;		/* by chunk: ids ?5 to ?6 */
	int		 ncols, stride, nthreads, started;
	int64_t		 lo, nchunk;
	int64_t		 next;		/* the chunk the reader takes next */
	int64_t		 from;		/* without threads: the next id */
	int		 done;		/* without threads: no rows after */
	rowscan_fn	 fn;		/* rowscan_run's, without threads */
	void		*arg;
	int		 stopped;	/* fn said stop */
	struct slot	*held;		/* the reader's, until the next call */
	struct filler	*fl;		/* nthreads, or the file's own one */
};

/*
 * A filler's aggregate step, rlg_rowscan(id, cols): the row, as stride
 * integers (the NULL mask, then the columns), into the slot it fills. A
 * full slot stops the scan (an error SQLite returns, which fill() knows).
 * For rowscan_run without threads, rlg_rowscan(cols): the row to its
 * function.
 */
static void
collect_row(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct filler *fl = sqlite3_user_data(ctx);
	int64_t own[ROWSCAN_MAXCOLS + 1];
	int64_t *out = fl->fn != NULL ? own : fl->out;
	int k = fl->fn == NULL;		/* argv[0] is the id */
	uint32_t nulls = 0;

	if (k)
		fl->last_id = sqlite3_value_int64(argv[0]);
	for (int i = k; i < argc; i++)
		/* NULL reads 0: only a 0 may be one. */
		if ((out[i - k + 1] = sqlite3_value_int64(argv[i])) == 0 &&
		    sqlite3_value_type(argv[i]) == SQLITE_NULL)
			nulls |= 1u << (i - k);
	out[0] = nulls;
	if (fl->fn != NULL) {
		if (fl->fn(fl->arg, out + 1, nulls) != 0) {
			fl->rs->stopped = 1;
			sqlite3_result_error(ctx, "stopped", -1);
		}
	} else if ((fl->out += fl->stride) == fl->end) {
		fl->full = 1;
		sqlite3_result_error(ctx, "a full slot", -1);
	}
}

static void
collect_done(sqlite3_context *ctx)
{
	sqlite3_result_null(ctx);
}

/* Prepares fl's statement on its connection. 0, or -1 with err set. */
static int
filler_prepare(struct filler *fl, char *err, size_t errlen)
{
	struct rowscan *rs = fl->rs;
	struct filter times = { NULL, NULL, rs->f->since_ms, rs->f->until_ms };
	char sel[512];

	if (sqlite3_create_function(fl->d.db, "rlg_rowscan", rs->ncols +
	    (rs->fn == NULL), SQLITE_UTF8, fl, NULL, collect_row,
	    collect_done) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", fl->d.path,
		    sqlite3_errmsg(fl->d.db));
		return -1;
	}
	snprintf(sel, sizeof(sel), "rlg_rowscan(%s%s)", rs->fn == NULL ?
	    "id, " : "", rs->cols);
	fl->st = db_select_from(&fl->d, &times, sel, "rlg_rows", "", "",
	    rs->where, err, errlen);
	return fl->st == NULL ? -1 : 0;
}

/* Decodes the rows of ids from to to (without threads: from on), up to a
 * full slot, into s. 0, or -1 with err set. */
static int
fill(struct filler *fl, struct slot *s, int64_t from, int64_t to, char *err,
    size_t errlen)
{
	int rc;

	fl->out = s->v;
	fl->end = s->v + CHUNK_IDS * (size_t)fl->stride;
	fl->full = 0;
	sqlite3_bind_int64(fl->st, 5, from);
	if (fl->rs->nthreads > 0)
		sqlite3_bind_int64(fl->st, 6, to);
	while ((rc = sqlite3_step(fl->st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE && !fl->full && !fl->rs->stopped)
		db_read_error(&fl->d, err, errlen);
	sqlite3_reset(fl->st);
	s->n = (size_t)(fl->out - s->v) / (size_t)fl->stride;
	return rc == SQLITE_DONE || fl->full || fl->rs->stopped ? 0 : -1;
}

/* Decodes chunk c (its CHUNK_IDS ids) into s. */
static int
fill_chunk(struct filler *fl, struct slot *s, int64_t c, char *err,
    size_t errlen)
{
	int64_t from = fl->rs->lo + c * CHUNK_IDS;

	return fill(fl, s, from, from > INT64_MAX - (CHUNK_IDS - 1) ?
	    INT64_MAX : from + (CHUNK_IDS - 1), err, errlen);
}

/* Stops every thread, keeping the first error. Called with mu held. */
static void
stop_locked(struct rowscan *rs, const char *msg)
{
	if (!rs->stop && msg != NULL)
		snprintf(rs->err, sizeof(rs->err), "%s", msg);
	rs->stop = 1;
	pthread_cond_broadcast(&rs->cv);
}

static void *
filler_main(void *arg)
{
	struct filler *fl = arg;
	struct rowscan *rs = fl->rs;
	char err[512] = "";

	if (db_connect(fl->d.path, &fl->d.db, err, sizeof(err)) == -1 ||
	    filler_prepare(fl, err, sizeof(err)) == -1)
		goto out;
	for (int64_t c = fl->index; c < rs->nchunk; c += rs->nthreads) {
		struct slot *s = &rs->slot[c % (int64_t)rs->nslot];
		int stop;

		pthread_mutex_lock(&rs->mu);
		while (!rs->stop && s->chunk != c)
			pthread_cond_wait(&rs->cv, &rs->mu);
		stop = rs->stop;
		pthread_mutex_unlock(&rs->mu);
		if (stop || fill_chunk(fl, s, c, err, sizeof(err)) == -1)
			break;
		pthread_mutex_lock(&rs->mu);
		s->ready = 1;
		pthread_cond_broadcast(&rs->cv);
		pthread_mutex_unlock(&rs->mu);
	}
out:
	if (err[0] != '\0') {
		pthread_mutex_lock(&rs->mu);
		stop_locked(rs, err);
		pthread_mutex_unlock(&rs->mu);
	}
	return NULL;
}

/*
 * The first and last ids of d's rlg_rows, and the file's size in bytes;
 * 0, 1 when it has no row, or -1 with err set.
 */
static int
id_range(struct rdb *d, int64_t *lo, int64_t *hi, int64_t *bytes, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	/* Two subqueries: min() and max() together would scan the table. */
	if ((st = db_prepare(d, "SELECT (SELECT min(id) FROM rlg_rows), "
	    "(SELECT max(id) FROM rlg_rows), (SELECT page_count * page_size "
	    "FROM pragma_page_count(), pragma_page_size())", err,
	    errlen)) == NULL)
		return -1;
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return db_read_error(d, err, errlen);
	}
	rc = sqlite3_column_type(st, 0) == SQLITE_NULL;
	*lo = sqlite3_column_int64(st, 0);
	*hi = sqlite3_column_int64(st, 1);
	*bytes = sqlite3_column_int64(st, 2);
	sqlite3_finalize(st);
	return rc;
}

/*
 * The chunks for jobs threads, or none (a scan without threads). Ids are
 * cut into chunks only where there are fewer than one for each 16 KB of
 * the file (a row takes more than 2 bytes), so that few chunks are empty:
 * a hand-made file whose ids leap to 2^62 is read without threads, by rows.
 */
static void
plan(struct rowscan *rs, int64_t hi, int64_t bytes, int jobs)
{
	uint64_t span = (uint64_t)hi - (uint64_t)rs->lo;

	if (jobs < 2 || bytes < 0 || span > (uint64_t)bytes / 2)
		return;
	rs->nchunk = (int64_t)(span / CHUNK_IDS) + 1;
	if (rs->nchunk > 1)
		rs->nthreads = rs->nchunk < jobs ? (int)rs->nchunk : jobs;
}

/* The slots, and the threads or the file's own filler. 0, or -1. */
static int
rowscan_start(struct rowscan *rs, struct rdb *d, char *err, size_t errlen)
{
	int n = rs->nthreads > 0 ? rs->nthreads : 1;

	rs->nslot = rs->nthreads > 0 ? 2 * (size_t)rs->nthreads : 1;
	if ((rs->slot = calloc(rs->nslot, sizeof(*rs->slot))) == NULL ||
	    (rs->fl = aligned_alloc(FILLER_ALIGN, (size_t)n *
	    sizeof(*rs->fl))) == NULL)
		goto oom;
	for (int i = 0; i < n; i++)
		rs->fl[i] = (struct filler){ .rs = rs, .d = { d->path, NULL,
		    d->layout, 0 }, .stride = rs->stride, .fn = rs->fn,
		    .arg = rs->arg, .index = i };
	for (size_t i = 0; i < rs->nslot; i++) {
		rs->slot[i].chunk = (int64_t)i;
		if ((rs->slot[i].v = malloc(CHUNK_IDS * sizeof(int64_t) *
		    (size_t)rs->stride)) == NULL)
			goto oom;
	}
	if (rs->nthreads == 0) {
		rs->fl[0].d = *d;
		return filler_prepare(&rs->fl[0], err, errlen);
	}
	for (; rs->started < rs->nthreads; rs->started++)
		if (pthread_create(&rs->fl[rs->started].tid, NULL, filler_main,
		    &rs->fl[rs->started]) != 0) {
			snprintf(err, errlen, "cannot start a thread");
			return -1;
		}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* rowscan_open, and for rowscan_run its function fn (NULL: none). */
static struct rowscan *
scan_open(struct rdb *d, const struct rowids *x, const struct filter *f,
    const char *cols, int ncols, const char *where, int jobs, rowscan_fn fn,
    void *arg, char *err, size_t errlen)
{
	struct rowscan *rs;
	char *ids;
	int64_t hi = 0, bytes = 0;
	int rc;

	if (ncols > ROWSCAN_MAXCOLS) {
		snprintf(err, errlen, "a scan of more than %d columns",
		    ROWSCAN_MAXCOLS);
		return NULL;
	}
	if ((rs = calloc(1, sizeof(*rs))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&rs->mu, NULL);
	pthread_cond_init(&rs->cv, NULL);
	rs->f = f;
	rs->fn = fn;
	rs->arg = arg;
	rs->cols = cols;
	rs->ncols = ncols;
	rs->stride = ncols + 1;
	if ((rc = id_range(d, &rs->lo, &hi, &bytes, err, errlen)) == -1)
		goto fail;
	rs->from = rs->lo;
	rs->done = rc == 1;
	if (rc == 0)
		plan(rs, hi, bytes, jobs);
	if (rs->nthreads > 0)
		rs->fn = NULL;	/* the threads fill slots, rowscan_run reads them */
	if ((ids = rowids_filter_sql(x, f)) == NULL ||
	    asprintf(&rs->where, "id >= ?5%s AND (%s)%s", rs->nthreads > 0 ?
	    " AND id <= ?6" : "", where, ids) == -1) {
		rs->where = NULL;
		free(ids);
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	free(ids);
	if (rowscan_start(rs, d, err, errlen) == 0)
		return rs;
fail:
	rowscan_close(rs);
	return NULL;
}

struct rowscan *
rowscan_open(struct rdb *d, const struct rowids *x, const struct filter *f,
    const char *cols, int ncols, const char *where, int jobs, char *err,
    size_t errlen)
{
	return scan_open(d, x, f, cols, ncols, where, jobs, NULL, NULL, err,
	    errlen);
}

/* Gives the reader's slot back to the threads. */
static void
release(struct rowscan *rs)
{
	if (rs->held == NULL)
		return;
	if (rs->nthreads > 0) {
		pthread_mutex_lock(&rs->mu);
		rs->held->chunk += (int64_t)rs->nslot;
		rs->held->ready = 0;
		pthread_cond_broadcast(&rs->cv);
		pthread_mutex_unlock(&rs->mu);
	}
	rs->held = NULL;
}

/* Waits for chunk c in its slot. The slot, or NULL with err set. */
static struct slot *
wait_chunk(struct rowscan *rs, int64_t c, char *err, size_t errlen)
{
	struct slot *s = &rs->slot[c % (int64_t)rs->nslot];

	pthread_mutex_lock(&rs->mu);
	while (!rs->stop && !(s->chunk == c && s->ready))
		pthread_cond_wait(&rs->cv, &rs->mu);
	if (rs->stop) {
		snprintf(err, errlen, "%s", rs->err);
		s = NULL;
	}
	pthread_mutex_unlock(&rs->mu);
	return s;
}

/* Without threads: the next CHUNK_IDS rows into the one slot. */
static struct slot *
next_rows(struct rowscan *rs, char *err, size_t errlen)
{
	struct filler *fl = &rs->fl[0];

	if (fill(fl, &rs->slot[0], rs->from, INT64_MAX, err, errlen) == -1)
		return NULL;
	rs->done = !fl->full || fl->last_id == INT64_MAX;
	rs->from = fl->last_id + !rs->done;
	return &rs->slot[0];
}

int
rowscan_next(struct rowscan *rs, const int64_t **rows, size_t *n, char *err,
    size_t errlen)
{
	release(rs);
	while (rs->nthreads > 0 ? rs->next < rs->nchunk : !rs->done) {
		if (rs->nthreads == 0)
			rs->held = next_rows(rs, err, errlen);
		else
			rs->held = wait_chunk(rs, rs->next++, err, errlen);
		if (rs->held == NULL)
			return -1;
		if (rs->held->n > 0) {
			*rows = rs->held->v;
			*n = rs->held->n;
			return 1;
		}
		release(rs);
	}
	*n = 0;
	return 0;
}

int
rowscan_threads(const struct rowscan *rs)
{
	return rs->nthreads;
}

void
rowscan_close(struct rowscan *rs)
{
	if (rs == NULL)
		return;
	pthread_mutex_lock(&rs->mu);
	stop_locked(rs, NULL);
	pthread_mutex_unlock(&rs->mu);
	for (int i = 0; i < rs->started; i++) {
		pthread_join(rs->fl[i].tid, NULL);
		sqlite3_finalize(rs->fl[i].st);
		sqlite3_close(rs->fl[i].d.db);
	}
	if (rs->nthreads == 0 && rs->fl != NULL) {
		/* The file's own connection: the statement and function go. */
		sqlite3_finalize(rs->fl[0].st);
		if (rs->fl[0].d.db != NULL)
			sqlite3_create_function(rs->fl[0].d.db, "rlg_rowscan",
			    rs->ncols + (rs->fn == NULL), SQLITE_UTF8, NULL,
			    NULL, NULL, NULL);
	}
	for (size_t i = 0; rs->slot != NULL && i < rs->nslot; i++)
		free(rs->slot[i].v);
	free(rs->slot);
	free(rs->fl);
	free(rs->where);
	pthread_cond_destroy(&rs->cv);
	pthread_mutex_destroy(&rs->mu);
	free(rs);
}

int
rowscan_run(struct rdb *d, const struct rowids *x, const struct filter *f,
    const char *cols, int ncols, const char *where, int jobs, rowscan_fn fn,
    void *arg, char *err, size_t errlen)
{
	struct rowscan *rs;
	const int64_t *rows;
	size_t n;
	int rc;

	if ((rs = scan_open(d, x, f, cols, ncols, where, jobs, fn, arg, err,
	    errlen)) == NULL)
		return -1;
	if (rs->fn != NULL) {
		rc = rs->done ? 0 : fill(&rs->fl[0], &rs->slot[0], rs->from,
		    INT64_MAX, err, errlen);
		rc = rs->stopped ? 1 : rc;
		rowscan_close(rs);
		return rc;
	}
	while ((rc = rowscan_next(rs, &rows, &n, err, errlen)) == 1)
		for (size_t i = 0; i < n; i++) {
			const int64_t *row = rows + i * (size_t)(ncols + 1);

			if (fn(arg, row + 1, (uint32_t)row[0]) != 0) {
				rc = 1;
				goto out;
			}
		}
out:
	rowscan_close(rs);
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
