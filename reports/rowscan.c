/*
 * rowscan: rlg_rows read by several threads, taken in id order.
 *
 * Decoding a row's columns is most of what a report costs, and SQLite
 * does it on one core per connection. Here the ids from the first row to
 * the last are cut into chunks of CHUNK_IDS; thread t of n decodes chunks
 * t, t + n, t + 2n ... on its own connection, into a ring of 2n slots, so
 * each thread fills a second chunk while the reader works on the first.
 * The reader takes chunk 0, 1, 2 ... in order, so it sees the rows as a
 * single scan would. With one job there is no thread: the reader decodes
 * each chunk itself, on the file's own connection, when it asks for it.
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
 * Ids a chunk covers: enough rows that its seek and its handover are
 * nothing beside them, few enough that 2 slots a thread stay small (a
 * slot holds CHUNK_IDS rows of up to 17 integers: 1 MB).
 */
#define CHUNK_IDS	8192

struct slot {
	int64_t		 chunk;		/* the chunk it holds or may take */
	int		 ready;		/* filled: the reader's turn */
	size_t		 n;		/* rows */
	int64_t		*v;		/* n rows of stride integers */
};

/* A connection that decodes chunks: a thread's, or the file's own. */
struct filler {
	struct rowscan	*rs;
	struct rdb	 d;
	sqlite3_stmt	*st;
	struct slot	*fill;		/* the slot being filled */
	pthread_t	 tid;
	int		 index;
};

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
	struct slot	*held;		/* the reader's, until the next call */
	struct filler	*fl;		/* nthreads, or the file's own one */
};

/* A filler's aggregate step: the row, as stride integers (the NULL mask,
 * then the columns), into the slot it fills. */
static void
collect_row(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct filler *fl = sqlite3_user_data(ctx);
	struct slot *s = fl->fill;
	int64_t *out;
	uint32_t nulls = 0;

	if (s->n == CHUNK_IDS) {	/* ids are unique: never */
		sqlite3_result_error(ctx, "more rows than ids in a chunk", -1);
		return;
	}
	out = s->v + s->n++ * (size_t)fl->rs->stride;
	for (int i = 0; i < argc; i++) {
		if (sqlite3_value_type(argv[i]) == SQLITE_NULL) {
			nulls |= 1u << i;
			out[i + 1] = 0;
		} else
			out[i + 1] = sqlite3_value_int64(argv[i]);
	}
	out[0] = nulls;
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

	if (sqlite3_create_function(fl->d.db, "rlg_rowscan", rs->ncols,
	    SQLITE_UTF8, fl, NULL, collect_row, collect_done) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", fl->d.path,
		    sqlite3_errmsg(fl->d.db));
		return -1;
	}
	snprintf(sel, sizeof(sel), "rlg_rowscan(%s)", rs->cols);
	fl->st = db_select_from(&fl->d, &times, sel, "rlg_rows", "", "",
	    rs->where, err, errlen);
	return fl->st == NULL ? -1 : 0;
}

/* Decodes chunk c into slot s. 0, or -1 with err set. */
static int
fill_chunk(struct filler *fl, struct slot *s, int64_t c, char *err,
    size_t errlen)
{
	int64_t from = fl->rs->lo + c * CHUNK_IDS;
	int rc;

	fl->fill = s;
	s->n = 0;
	sqlite3_bind_int64(fl->st, 5, from);
	sqlite3_bind_int64(fl->st, 6, from + CHUNK_IDS);
	while ((rc = sqlite3_step(fl->st)) == SQLITE_ROW)
		;
	sqlite3_reset(fl->st);
	return rc == SQLITE_DONE ? 0 : db_read_error(&fl->d, err, errlen);
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

/* The first and last ids of d's rlg_rows; 0, 1 when it is empty, or -1. */
static int
id_range(struct rdb *d, int64_t *lo, int64_t *hi, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	/* Two subqueries: min() and max() together would scan the table. */
	if ((st = db_prepare(d, "SELECT (SELECT min(id) FROM rlg_rows), "
	    "(SELECT max(id) FROM rlg_rows)", err, errlen)) == NULL)
		return -1;
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return db_read_error(d, err, errlen);
	}
	rc = sqlite3_column_type(st, 0) == SQLITE_NULL;
	*lo = sqlite3_column_int64(st, 0);
	*hi = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	return rc;
}

/* The slots, and the threads or the file's own filler. 0, or -1. */
static int
rowscan_start(struct rowscan *rs, struct rdb *d, char *err, size_t errlen)
{
	int n = rs->nthreads > 0 ? rs->nthreads : 1;

	rs->nslot = rs->nthreads > 0 ? 2 * (size_t)rs->nthreads : 1;
	if ((rs->slot = calloc(rs->nslot, sizeof(*rs->slot))) == NULL ||
	    (rs->fl = calloc((size_t)n, sizeof(*rs->fl))) == NULL)
		goto oom;
	for (size_t i = 0; i < rs->nslot; i++) {
		rs->slot[i].chunk = (int64_t)i;
		if ((rs->slot[i].v = malloc(CHUNK_IDS * sizeof(int64_t) *
		    (size_t)rs->stride)) == NULL)
			goto oom;
	}
	for (int i = 0; i < n; i++)
		rs->fl[i] = (struct filler){ rs, { d->path, NULL, d->layout, 0 },
		    NULL, NULL, 0, i };
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

struct rowscan *
rowscan_open(struct rdb *d, const struct rowids *x, const struct filter *f,
    const char *cols, int ncols, const char *where, int jobs, char *err,
    size_t errlen)
{
	struct rowscan *rs;
	char *ids;
	int64_t hi = 0;
	int rc;

	if ((rs = calloc(1, sizeof(*rs))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&rs->mu, NULL);
	pthread_cond_init(&rs->cv, NULL);
	rs->f = f;
	rs->cols = cols;
	rs->ncols = ncols;
	rs->stride = ncols + 1;
	if ((rc = id_range(d, &rs->lo, &hi, err, errlen)) == -1)
		goto fail;
	rs->nchunk = rc == 1 ? 0 : (hi - rs->lo) / CHUNK_IDS + 1;
	if (jobs > 1 && rs->nchunk > 1)
		rs->nthreads = rs->nchunk < jobs ? (int)rs->nchunk : jobs;
	if ((ids = rowids_filter_sql(x, f)) == NULL ||
	    asprintf(&rs->where, "id >= ?5 AND id < ?6 AND (%s)%s", where,
	    ids) == -1) {
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

int
rowscan_next(struct rowscan *rs, const int64_t **rows, size_t *n, char *err,
    size_t errlen)
{
	while (rs->next < rs->nchunk) {
		int64_t c = rs->next++;

		release(rs);
		if (rs->nthreads == 0) {
			if (fill_chunk(&rs->fl[0], &rs->slot[0], c, err,
			    errlen) == -1)
				return -1;
			rs->held = &rs->slot[0];
		} else if ((rs->held = wait_chunk(rs, c, err, errlen)) == NULL)
			return -1;
		if (rs->held->n > 0) {
			*rows = rs->held->v;
			*n = rs->held->n;
			return 1;
		}
	}
	release(rs);
	*n = 0;
	return 0;
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
			    rs->ncols, SQLITE_UTF8, NULL, NULL, NULL, NULL);
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

	if ((rs = rowscan_open(d, x, f, cols, ncols, where, jobs, err,
	    errlen)) == NULL)
		return -1;
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
