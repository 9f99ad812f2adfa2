/*
 * audit: the SQLite writer. Workers copy rows into a bounded queue with
 * audit_push(); one thread per process writes them in batches, one
 * BEGIN IMMEDIATE ... COMMIT per batch, and a row leaves the queue only
 * when the transaction holding it has committed. Copying the WAL back
 * into the database (a checkpoint, 16 MB at a time) is another thread's
 * job: it is work the file needs sooner or later, not work a row waits
 * for. Both threads run at the process's priority, which is the
 * operator's to set. Not for reading the database: reports/ does that;
 * which file a dated name means, and retention, are audit_files.c's.
 */
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <time.h>

#include <sqlite3.h>

#include "audit.h"
#include "audit_files.h"
#include "clock.h"
#include "log.h"

/* A write waits this long for another writer's lock; opening (schema,
 * switch to WAL) may wait longer. */
#define AUDIT_BUSY_MS		250
#define AUDIT_OPEN_BUSY_MS	2000
/* Retries after a failed write: the first after MIN, never further apart
 * than MAX. */
#define AUDIT_BACKOFF_MIN_MS	25
#define AUDIT_BACKOFF_MAX_MS	1000
/* Rows per transaction at most (or batch if larger), and held no longer
 * than AUDIT_TXN_MS: other processes wait AUDIT_BUSY_MS. */
#define AUDIT_TXN_ROWS		16384
#define AUDIT_TXN_MS		100
/* The checkpointer has not kept up (starved by a busy machine, or failing):
 * the writer checkpoints itself, so that the WAL stays bounded. */
#define AUDIT_CHECKPOINT_MAX	(4 * AUDIT_CHECKPOINT_PAGES)
#define AUDIT_CACHE_KB		16384	/* the indexes' hot pages stay */
#define AUDIT_WAL_LIMIT		(64 << 20)	/* bytes; above the fallback's
						 * 4 x 4000 frames */
/* CGI mode: each process is the first connection, which reads the whole
 * WAL to rebuild its index; a short WAL keeps that read short. */
#define AUDIT_INLINE_WAL_PAGES	256
#define AUDIT_GAP_US		2000	/* between back-to-back commits */
#define AUDIT_BUSY_REPORT_MS	1000	/* another writer's lock is logged */
/* Longer strings are cut: a row SQLite refuses would block the queue. */
#define AUDIT_TEXT_MAX		65536

/*
 * The INSERT of n rows: INSERT_HEAD, then n INSERT_ROWs less the last comma;
 * each "?" takes the next number, AUDIT_ROW_PARAMS to a row. OR FAIL: a
 * refused row ends the statement without undoing the rows it already wrote,
 * so SQLite keeps no statement journal (a copy of every page a statement of
 * several rows changes, to undo it); write_rows() rolls the whole
 * transaction back after any failure.
 */
#define INSERT_HEAD \
	"INSERT OR FAIL INTO decisions (ts_ms, request_id, rule, key, " \
	"algorithm, allowed, reason, cost, limit_value, window_ms, burst, " \
	"remaining, retry_after_ms, delay_ms, method, path, client_ip, " \
	"status, latency_us) VALUES "
#define INSERT_ROW		"(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?),"
#define AUDIT_ROW_PARAMS	19

/* The strings of a row, in the order they are packed. */
enum {
	T_REQUEST_ID, T_RULE, T_KEY, T_ALGORITHM, T_REASON, T_METHOD, T_PATH,
	T_CLIENT_IP, T_COUNT
};

/*
 * A queued row: one malloc'd block, the copy of the caller's row followed
 * by its strings. r's pointers point into text[]. Owned by the queue from
 * audit_push() until the writer has committed it.
 */
struct qrow {
	struct audit_row	 r;
	int			 len[T_COUNT];
	char			 text[];
};

struct audit {
	/* The database file in use; the writer changes it (under mu) when
	 * a dated name's period turns. */
	char			 path[PATH_MAX];
	char			*pattern;	/* the dated name, or NULL */
	long long		 period_start_ms, period_end_ms; /* path's */
	int			 inline_mode;	/* audit_open_inline(): no threads */

	/* Writer thread only (and audit_open() before the thread starts). */
	sqlite3			*db;		/* NULL: reopen first */
	sqlite3_stmt		*insert;	/* one row */
	sqlite3_stmt		*insert_group;	/* AUDIT_INSERT_ROWS rows */
	sqlite3_stmt		*begin, *commit, *rollback;
	int			 busy_ms;	/* a lock is waited for */
	long long		 busy_since;	/* monotonic ms, busy_wait() */
	int			 err_busy;	/* failed on another's lock */
	int			 err_full;	/* failed for want of space */
	int			 truncate_wal;	/* checkpoint and truncate the WAL
						 * before the next write */
	int			 wal_frames;	/* WAL size after last commit */
	int			 writer_ckpt_failing; /* said so already */
	struct qrow		**txn;		/* rows being written */
	size_t			 txn_max;
	char			 err[512];	/* why the last write failed */

	/* Everything below is guarded by mu. */
	pthread_mutex_t		 mu;
	/* wake: the writer, for rows or closing (CLOCK_MONOTONIC). */
	pthread_cond_t		 wake;
	struct qrow		**ring;		/* the queue: count from head */
	size_t			 cap;
	size_t			 head;
	size_t			 count;
	size_t			 batch;
	long long		 flush_interval_ms;
	int			 writer_waiting; /* signal wake only then */
	int			 stopping;	/* audit_push() refuses rows */
	int			 closing;	/* writer drains, then ends */
	long long		 give_up_at;	/* monotonic ms, once closing */
	long long		 written;
	long long		 failures;
	long long		 lost;		/* rows refused: queue full */
	long long		 lost_logged;	/* lost when last logged */
	long long		 lost_log_at;	/* monotonic ms of that line */
	long long		 keep_ms;	/* dated files older: deleted */
	int			 swept;		/* writer: old files looked for */
	void			(*on_write)(void);	/* audit_on_write() */
	/* ckpt: the checkpointer, for a checkpoint or for closing. */
	pthread_cond_t		 ckpt;
	int			 ckpt_wanted;

	pthread_t		 thread;
	pthread_t		 ckpt_thread;
	int			 ckpt_failing;	/* checkpointer only: said so */
	int			 ckpt_started;
};

static void
wait_until(pthread_cond_t *c, pthread_mutex_t *m, long long at_ms)
{
	struct timespec ts;

	ts.tv_sec = at_ms / 1000;
	ts.tv_nsec = (at_ms % 1000) * 1000000;
	pthread_cond_timedwait(c, m, &ts);
}

/*
 * SQLite's message for the failure rc, with the extended code and the
 * system's reason when the file system said no: "disk I/O error (code
 * 4874: File too large)".
 */
static void
err_from_db(sqlite3 *db, int rc, char *buf, size_t len)
{
	int e = sqlite3_system_errno(db);

	switch (rc & 0xff) {
	case SQLITE_IOERR:
	case SQLITE_FULL:
	case SQLITE_CANTOPEN:
	case SQLITE_READONLY:
		snprintf(buf, len, "%s (code %d%s%s)", sqlite3_errmsg(db), rc,
		    e != 0 ? ": " : "", e != 0 ? strerror(e) : "");
		break;
	default:
		snprintf(buf, len, "%s", sqlite3_errmsg(db));
		break;
	}
}

/*
 * SQLite's busy handler: polls every millisecond, not at SQLite's default
 * 1, 2, 5 ... 100 ms steps, so that a writer waiting for another process
 * gets the lock in the short gap between that process's transactions
 * instead of being starved by it.
 */
static int
busy_wait(void *arg, int calls)
{
	struct audit *a = arg;
	struct timespec ts = { 0, 1000000 };
	long long now = mono_ms();

	if (calls == 0)
		a->busy_since = now;
	if (now - a->busy_since >= a->busy_ms)
		return 0;
	nanosleep(&ts, NULL);
	return 1;
}

/* SQLite's WAL hook, called after each commit: remember the WAL size. */
static int
wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct audit *a = arg;

	(void)db;
	(void)name;
	a->wal_frames = frames;
	return SQLITE_OK;
}

static void
db_close(struct audit *a)
{
	sqlite3_finalize(a->insert);
	sqlite3_finalize(a->insert_group);
	sqlite3_finalize(a->begin);
	sqlite3_finalize(a->commit);
	sqlite3_finalize(a->rollback);
	a->insert = a->insert_group = NULL;
	a->begin = a->commit = a->rollback = NULL;
	sqlite3_close(a->db);
	a->db = NULL;
}

/* Prepares the INSERT of rows rows into *st; returns SQLite's code. */
static int
prepare_insert(sqlite3 *db, int rows, sqlite3_stmt **st)
{
	char sql[sizeof(INSERT_HEAD) + AUDIT_INSERT_ROWS * sizeof(INSERT_ROW)];
	size_t len = sizeof(INSERT_HEAD) - 1;
	int i;

	memcpy(sql, INSERT_HEAD, len);
	for (i = 0; i < rows; i++) {
		memcpy(sql + len, INSERT_ROW, sizeof(INSERT_ROW) - 1);
		len += sizeof(INSERT_ROW) - 1;
	}
	sql[len - 1] = '\0';	/* the last row's comma */
	return sqlite3_prepare_v3(db, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
	    st, NULL);
}

/*
 * The last connection to close keeps the -wal (emptied) and -shm files:
 * a report reader of the files' group, who may not create files in the
 * directory, can open a WAL database only where they exist.
 */
static void
keep_wal(sqlite3 *db)
{
	int persist = 1;

	sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
}

/*
 * Creates path, empty, RLG_AUDIT_FILE_MODE whatever the umask, unless it
 * exists (then it keeps the mode it has: the operator's). SQLite gives
 * the -wal, -shm and journal files it creates the mode of the database
 * file, so they are private too. Returns 0, or -1 with errno set.
 */
static int
db_create(const char *path)
{
	int fd, saved;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    RLG_AUDIT_FILE_MODE);
	if (fd == -1)
		return errno == EEXIST ? 0 : -1;
	if (fchmod(fd, RLG_AUDIT_FILE_MODE) == -1) {
		saved = errno;
		close(fd);
		unlink(path);
		errno = saved;
		return -1;
	}
	close(fd);
	return 0;
}

/*
 * Opens a->path in WAL mode with the schema and prepares the statements.
 * Used at start and again by the writer when the file was replaced or a
 * write failed in a way the connection may not survive. Returns 0, or -1
 * with errbuf set and a->err_busy when another connection's lock was in
 * the way.
 */
static int
db_open(struct audit *a, char *errbuf, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	const char *mode;
	char sql[128], msg[400];
	int rc, busy = 0;

	if (db_create(a->path) == -1) {
		snprintf(errbuf, errlen, "%s: cannot create: %s", a->path,
		    strerror(errno));
		a->err_busy = 0;
		return -1;
	}
	rc = sqlite3_open_v2(a->path, &a->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		goto fail;
	sqlite3_extended_result_codes(a->db, 1);
	a->busy_ms = AUDIT_OPEN_BUSY_MS;
	sqlite3_busy_handler(a->db, busy_wait, a);
	/* SQLite falls back to read-only without a word; writes would fail
	 * later. */
	if (sqlite3_db_readonly(a->db, "main") == 1) {
		snprintf(errbuf, errlen, "%s: the database file is read-only",
		    a->path);
		goto fail_msg;
	}
	if (sqlite3_prepare_v2(a->db, "PRAGMA journal_mode=WAL", -1, &st,
	    NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
		goto fail;
	mode = (const char *)sqlite3_column_text(st, 0);
	if (mode == NULL || strcasecmp(mode, "wal") != 0) {
		snprintf(errbuf, errlen, "%s: journal_mode stays \"%s\", not "
		    "wal (is the file on a network filesystem?)", a->path,
		    mode != NULL ? mode : "");
		goto fail_msg;
	}
	sqlite3_finalize(st);
	st = NULL;
	/* In WAL mode NORMAL loses no committed row on a crash, only on
	 * power loss. */
	/* A WAL that an outage made larger than the writer's own fallback
	 * lets it grow is cut back when it starts again from its
	 * beginning. */
	snprintf(sql, sizeof(sql), "PRAGMA synchronous=NORMAL; "
	    "PRAGMA cache_size=-%d; PRAGMA journal_size_limit=%d",
	    AUDIT_CACHE_KB, AUDIT_WAL_LIMIT);
	if (sqlite3_exec(a->db, sql, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(a->db, RLG_AUDIT_SCHEMA, NULL, NULL, NULL) !=
	    SQLITE_OK)
		goto fail;
	if (prepare_insert(a->db, 1, &a->insert) != SQLITE_OK ||
	    prepare_insert(a->db, AUDIT_INSERT_ROWS, &a->insert_group) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "BEGIN IMMEDIATE", -1, &a->begin,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "COMMIT", -1, &a->commit, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "ROLLBACK", -1, &a->rollback, NULL) !=
	    SQLITE_OK)
		goto fail;
	a->busy_ms = AUDIT_BUSY_MS;
	keep_wal(a->db);
	/* One connection a CGI request: closing the last one would copy the
	 * WAL into the database and delete it, with a sync each time.
	 * write_rows() checkpoints when the WAL is due instead. */
	if (a->inline_mode)
		sqlite3_db_config(a->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
		    NULL);
	/*
	 * Checkpoints are run by write_rows(), not inside COMMIT: a failing
	 * auto-checkpoint makes a successful COMMIT return an error, and the
	 * rows would then be written twice.
	 */
	sqlite3_wal_hook(a->db, wal_hook, a);
	a->wal_frames = 0;
	return 0;
fail:
	if (a->db == NULL)
		snprintf(errbuf, errlen, "%s: %s", a->path, sqlite3_errstr(rc));
	else {
		rc = sqlite3_errcode(a->db);
		err_from_db(a->db, rc, msg, sizeof(msg));
		snprintf(errbuf, errlen, "%s: %s", a->path, msg);
	}
	busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
fail_msg:
	a->err_busy = busy;
	sqlite3_finalize(st);
	db_close(a);
	return -1;
}

static int
bind_text(sqlite3_stmt *st, int col, const char *s, int len)
{
	/* SQLITE_STATIC: the row outlives the statement's use of it. */
	if (s == NULL)
		return sqlite3_bind_null(st, col);
	return sqlite3_bind_text(st, col, s, len, SQLITE_STATIC);
}

static int
bind_opt(sqlite3_stmt *st, int col, int64_t v)
{
	if (v < 0)
		return sqlite3_bind_null(st, col);
	return sqlite3_bind_int64(st, col, v);
}

/* Binds q to the parameters of st that follow parameter p. */
static int
bind_row(sqlite3_stmt *st, int p, const struct qrow *q)
{
	const struct audit_row *r = &q->r;
	int rc = 0;

	/* Every parameter is bound for every row: none keeps a freed row's
	 * pointer in use. */
	rc |= sqlite3_bind_int64(st, p + 1, r->ts_ms);
	rc |= bind_text(st, p + 2, r->request_id, q->len[T_REQUEST_ID]);
	rc |= bind_text(st, p + 3, r->rule, q->len[T_RULE]);
	rc |= bind_text(st, p + 4, r->key, q->len[T_KEY]);
	rc |= bind_text(st, p + 5, r->algorithm, q->len[T_ALGORITHM]);
	rc |= sqlite3_bind_int(st, p + 6, r->allowed);
	rc |= bind_text(st, p + 7, r->reason, q->len[T_REASON]);
	rc |= bind_opt(st, p + 8, r->cost);
	rc |= bind_opt(st, p + 9, r->limit_value);
	rc |= bind_opt(st, p + 10, r->window_ms);
	rc |= bind_opt(st, p + 11, r->burst);
	rc |= bind_opt(st, p + 12, r->remaining);
	rc |= bind_opt(st, p + 13, r->retry_after_ms);
	rc |= bind_opt(st, p + 14, r->delay_ms);
	rc |= bind_text(st, p + 15, r->method, q->len[T_METHOD]);
	rc |= bind_text(st, p + 16, r->path, q->len[T_PATH]);
	rc |= bind_text(st, p + 17, r->client_ip, q->len[T_CLIENT_IP]);
	rc |= bind_opt(st, p + 18, r->status);
	rc |= bind_opt(st, p + 19, r->latency_us);
	return rc;
}

/*
 * Inserts rows[0..n), n being 1 or AUDIT_INSERT_ROWS, with one statement:
 * what a statement costs besides its rows (step, reset, halt) is paid once
 * for the group. Returns SQLITE_OK, or SQLite's code with the statement
 * left for write_rows() to reset.
 */
static int
insert_rows(struct audit *a, struct qrow **rows, size_t n)
{
	sqlite3_stmt *st = n == 1 ? a->insert : a->insert_group;
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = bind_row(st, (int)i * AUDIT_ROW_PARAMS, rows[i])) !=
		    SQLITE_OK)
			return rc;
	if ((rc = sqlite3_step(st)) != SQLITE_DONE)
		return rc;
	sqlite3_reset(st);
	return SQLITE_OK;
}

/*
 * A PASSIVE checkpoint of db: it never waits for readers or for the other
 * checkpointer, and a later one finishes what it left. rc is SQLITE_OK, or
 * why db could not be opened. A failure is said once, until one succeeds:
 * the rows are safe in the WAL, only the WAL grows. The checkpointer and
 * the writer's fallback each have a flag of their own: the fallback's
 * success does not end the checkpointer's failure, nor the other way round.
 */
static void
checkpoint(struct audit *a, const char *file, sqlite3 *db, int rc,
    int by_writer)
{
	int *failing = by_writer ? &a->writer_ckpt_failing : &a->ckpt_failing;
	char why[512];

	/* Inline (CGI): the next process rebuilds the WAL's index from the
	 * file, as if nothing were copied yet; only an empty file is short
	 * to read. */
	if (rc == SQLITE_OK)
		rc = sqlite3_wal_checkpoint_v2(db, NULL, a->inline_mode ?
		    SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE,
		    NULL, NULL);
	if (rc == SQLITE_OK || rc == SQLITE_BUSY) {
		if (*failing)
			log_info("audit: %s: %s checkpoints again", file,
			    by_writer ? "the writer" : "the checkpointer");
		*failing = 0;
		return;
	}
	if (!*failing) {
		err_from_db(db, rc, why, sizeof(why));
		if (by_writer)
			log_warn("audit: %s: checkpoint failed: %s; the WAL "
			    "grows until one succeeds", file, why);
		else	/* 4 KiB pages, 250 a megabyte */
			log_warn("audit: %s: checkpoint failed: %s; the writer "
			    "checkpoints when the WAL reaches %d MB", file,
			    why, AUDIT_CHECKPOINT_MAX / 250);
	}
	*failing = 1;
}

/*
 * The checkpointer: on its own connection, opened for each checkpoint (so a database the writer has replaced is the one it
 * checkpoints, and one that is gone is not recreated).
 */
static void *
ckpt_main(void *arg)
{
	struct audit *a = arg;
	char file[PATH_MAX];
	sqlite3 *db;
	int rc;

	pthread_setname_np(pthread_self(), "audit-ckpt");
	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->ckpt_wanted && !a->closing)
			pthread_cond_wait(&a->ckpt, &a->mu);
		if (a->closing)
			break;
		a->ckpt_wanted = 0;
		/* The writer may move to the next dated file meanwhile. */
		memcpy(file, a->path, sizeof(file));
		pthread_mutex_unlock(&a->mu);
		/* A connection knows the file is in WAL mode only once it
		 * has read it: before that a checkpoint does nothing. */
		db = NULL;
		if ((rc = sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE |
		    SQLITE_OPEN_NOMUTEX, NULL)) == SQLITE_OK) {
			keep_wal(db);
			rc = sqlite3_exec(db, "SELECT 1 FROM sqlite_schema "
			    "LIMIT 1", NULL, NULL, NULL);
		}
		checkpoint(a, file, db, rc, 0);
		sqlite3_close(db);
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/*
 * Is the free space on the database's file system less than twice what
 * the WAL holds? A checkpoint copies the WAL's pages into the database
 * file, which may need that much room: past that point the WAL could fill
 * the disk and no checkpoint could ever give its space back. So on a
 * small or filling disk the writer checkpoints at once, whatever the
 * WAL's size.
 */
static int
low_on_space(struct audit *a)
{
	struct statvfs fs;

	if (a->wal_frames == 0 || statvfs(a->path, &fs) == -1)
		return 0;
	return (long long)fs.f_bavail * (long long)fs.f_frsize <
	    2LL * a->wal_frames * (4096 + 24);
}

/* The files of a's dated name past [audit] keep (see audit_files.h). */
static void
delete_old_files(struct audit *a)
{
	long long keep;

	pthread_mutex_lock(&a->mu);
	keep = a->keep_ms;
	pthread_mutex_unlock(&a->mu);
	if (a->pattern != NULL)
		audit_files_delete_old(a->pattern, a->path, keep, wall_ms());
}

/*
 * The rows of a dated name go to the file of their own time (Redis TIME,
 * which every gateway shares): moves a to the file of time ms. The first
 * to a new file deletes the files past keep.
 */
static int
move_to(struct audit *a, long long ms)
{
	char file[PATH_MAX];
	long long start, end;
	struct stat st;

	if (audit_files_for(a->pattern, ms, file, sizeof(file), &start, &end) == -1) {
		snprintf(a->err, sizeof(a->err), "%s: the name is too long",
		    a->pattern);
		return -1;
	}
	if (strcmp(file, a->path) != 0)
		db_close(a);
	pthread_mutex_lock(&a->mu);
	memcpy(a->path, file, sizeof(file));
	a->period_start_ms = start;
	a->period_end_ms = end;
	pthread_mutex_unlock(&a->mu);
	if (stat(file, &st) == -1 && errno == ENOENT)
		delete_old_files(a);
	return 0;
}

/*
 * Writes the first rows of rows[0..n) in one transaction, as many as fit
 * in AUDIT_TXN_MS. Returns how many were committed (at least 1), or -1
 * with a->err set and nothing written (the transaction is rolled back).
 */
static long long
write_rows(struct audit *a, struct qrow **rows, size_t n)
{
	long long stop;
	size_t i, step, check_at = 1023;
	int rc, e, moved = 0;

	if (a->pattern != NULL) {
		if ((rows[0]->r.ts_ms < a->period_start_ms ||
		    rows[0]->r.ts_ms >= a->period_end_ms) &&
		    move_to(a, rows[0]->r.ts_ms) == -1) {
			a->err_busy = a->err_full = 0;
			return -1;
		}
		/* One transaction, one file: the rows of its period. */
		for (i = 1; i < n && rows[i]->r.ts_ms >= a->period_start_ms &&
		    rows[i]->r.ts_ms < a->period_end_ms; i++)
			;
		n = i;
		if (!a->swept && !a->inline_mode) {
			delete_old_files(a);
			a->swept = 1;
		}
	}
	/*
	 * Removed or renamed (rotated) under us: writes would go to a file
	 * nobody can read any more. Write to a new one at the path instead.
	 */
	if (a->db != NULL && sqlite3_file_control(a->db, "main",
	    SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
		log_warn("audit: %s: the database file was removed or "
		    "replaced; writing to a new one", a->path);
		db_close(a);
	}
	/* Reopening on another's lock is a busy failure like any other. */
	if (a->db == NULL && db_open(a, a->err, sizeof(a->err)) == -1)
		return -1;
	/*
	 * After a full disk: the WAL has taken the space, and a checkpoint
	 * is what gives it back (it needs room in the database file for
	 * the pages it copies, which freeing space provides).
	 */
	if (a->truncate_wal && sqlite3_wal_checkpoint_v2(a->db, NULL,
	    SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) == SQLITE_OK) {
		log_info("audit: %s: the WAL is checkpointed and truncated",
		    a->path);
		a->truncate_wal = 0;
	}

	if ((rc = sqlite3_step(a->begin)) != SQLITE_DONE)
		goto fail;
	stop = mono_ms() + AUDIT_TXN_MS;
	for (i = 0; i < n; i += step) {
		/* Commit early rather than make another process time out;
		 * the clock is read every 1024 rows or so. */
		if (i >= check_at) {
			if (mono_ms() >= stop)
				break;
			check_at += 1024;
		}
		step = n - i >= AUDIT_INSERT_ROWS ? AUDIT_INSERT_ROWS : 1;
		if ((rc = insert_rows(a, rows + i, step)) != SQLITE_OK)
			goto fail;
	}
	if ((rc = sqlite3_step(a->commit)) != SQLITE_DONE)
		goto fail;
	sqlite3_reset(a->begin);
	sqlite3_reset(a->commit);

	/* Once the WAL is checkpointed, the next commit starts it again
	 * from its beginning, and wal_frames falls. */
	if (a->wal_frames >= AUDIT_CHECKPOINT_MAX || (!a->ckpt_started &&
	    a->wal_frames >= (a->inline_mode ? AUDIT_INLINE_WAL_PAGES :
	    AUDIT_CHECKPOINT_PAGES)) || low_on_space(a))
		checkpoint(a, a->path, a->db, SQLITE_OK, 1);
	else if (a->wal_frames >= AUDIT_CHECKPOINT_PAGES) {
		pthread_mutex_lock(&a->mu);
		a->ckpt_wanted = 1;
		pthread_cond_signal(&a->ckpt);
		pthread_mutex_unlock(&a->mu);
	}
	return (long long)i;
fail:
	err_from_db(a->db, rc, a->err, sizeof(a->err));
	sqlite3_reset(a->insert);
	sqlite3_reset(a->insert_group);
	sqlite3_reset(a->begin);
	sqlite3_reset(a->commit);
	if (!sqlite3_get_autocommit(a->db)) {
		sqlite3_step(a->rollback);
		sqlite3_reset(a->rollback);
	}
	/*
	 * Another writer's lock passes; after an I/O error, a full disk or a
	 * read-only file, start again from a fresh connection.
	 */
	a->err_busy = (rc & 0xff) == SQLITE_BUSY ||
	    (rc & 0xff) == SQLITE_LOCKED;
	e = sqlite3_system_errno(a->db);
	a->err_full = (rc & 0xff) == SQLITE_FULL || e == ENOSPC ||
	    e == EDQUOT || e == EFBIG;
	if (a->err_full)
		a->truncate_wal = 1;
	if (!a->err_busy)
		db_close(a);
	return -1;
}

/*
 * The rows audit_push() could not queue since the last such line, in one
 * line a second at most (force: now, at the end). Under mu.
 */
static void
log_lost(struct audit *a, int force)
{
	long long now = mono_ms();

	if (a->lost == a->lost_logged ||
	    (!force && now - a->lost_log_at < 1000))
		return;
	log_error("audit: %s: the queue is full (%zu rows): %lld rows not "
	    "recorded since the last line, %lld in all", a->path, a->cap,
	    a->lost - a->lost_logged, a->lost);
	a->lost_logged = a->lost;
	a->lost_log_at = now;
}

static void *
writer_main(void *arg)
{
	struct audit *a = arg;
	struct timespec gap = { 0, AUDIT_GAP_US * 1000 };
	long long now, due, at, retry_at = 0, backoff = 0, done;
	long long attempt_at, failing_since = 0;
	size_t n, i, most = a->txn_max;
	int failing = 0, reported = 0;

	pthread_setname_np(pthread_self(), "audit-writer");
	pthread_mutex_lock(&a->mu);
	due = mono_ms() + a->flush_interval_ms;
	for (;;) {
		log_lost(a, 0);
		if (a->count == 0) {
			if (a->closing)
				break;
			a->writer_waiting = 1;
			pthread_cond_wait(&a->wake, &a->mu);
			a->writer_waiting = 0;
			due = mono_ms() + a->flush_interval_ms;
			continue;
		}
		now = mono_ms();
		if (failing) {
			at = retry_at;
			if (a->closing && a->give_up_at < at)
				at = a->give_up_at;
		} else if (a->closing || a->count >= a->batch)
			at = now;
		else
			at = due;
		if (now < at) {
			/* Backing off, pushes need not wake the writer. */
			a->writer_waiting = !failing;
			wait_until(&a->wake, &a->mu, at);
			a->writer_waiting = 0;
			continue;
		}

		/*
		 * Only the writer removes rows and pushers only append, so
		 * the n oldest stay put while the lock is released.
		 */
		n = a->count < most ? a->count : most;
		for (i = 0; i < n; i++)
			a->txn[i] = a->ring[(a->head + i) % a->cap];
		pthread_mutex_unlock(&a->mu);

		attempt_at = mono_ms();
		if ((done = write_rows(a, a->txn, n)) > 0) {
			n = (size_t)done;
			/* Out of the ring first: audit_stats() reads its
			 * head. */
			pthread_mutex_lock(&a->mu);
			a->head = (a->head + n) % a->cap;
			a->count -= n;
			a->written += done;
			pthread_mutex_unlock(&a->mu);
			for (i = 0; i < n; i++)
				free(a->txn[i]);
			if (a->on_write != NULL)
				a->on_write();
			pthread_mutex_lock(&a->mu);
			if (reported)
				log_info("audit: %s: recovered, %zu rows "
				    "written, %zu waiting", a->path, n,
				    a->count);
			failing = reported = 0;
			if ((most *= 2) > a->txn_max)
				most = a->txn_max;
			due = mono_ms() + a->flush_interval_ms;
			if (a->count >= a->batch ||
			    (a->closing && a->count > 0)) {
				/*
				 * Back to back, our BEGIN would follow our
				 * COMMIT within microseconds, and a writer in
				 * another process, polling for the lock,
				 * would starve.
				 */
				pthread_mutex_unlock(&a->mu);
				nanosleep(&gap, NULL);
				pthread_mutex_lock(&a->mu);
			}
			continue;
		}

		pthread_mutex_lock(&a->mu);
		a->failures++;
		/* Little room: fewer rows a transaction, down to one, so that
		 * what space there is gets used. */
		if (a->err_full && (most /= 2) == 0)
			most = 1;
		if (a->on_write != NULL) {
			pthread_mutex_unlock(&a->mu);
			a->on_write();
			pthread_mutex_lock(&a->mu);
		}
		now = mono_ms();
		if (!failing) {
			failing = 1;
			failing_since = attempt_at;
			backoff = AUDIT_BACKOFF_MIN_MS;
		} else if ((backoff *= 2) > AUDIT_BACKOFF_MAX_MS)
			backoff = AUDIT_BACKOFF_MAX_MS;
		/* Other writers' short turns are normal; a lock held for long
		 * is not. */
		if (!reported && (!a->err_busy ||
		    now - failing_since >= AUDIT_BUSY_REPORT_MS)) {
			reported = 1;
			log_error("audit: %s: cannot write: %s; %zu rows "
			    "waiting, kept and retried", a->path, a->err,
			    a->count);
		}
		retry_at = now + backoff;
		if (a->closing && now >= a->give_up_at) {
			log_error("audit: %s: giving up at shutdown: %s; "
			    "%zu rows not written", a->path, a->err, a->count);
			break;
		}
	}
	log_lost(a, 1);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/*
 * An inline handle's rows, written by the caller's thread in as few
 * transactions as they fit, retried as the writer would until
 * a->give_up_at. What is left is counted by audit_close().
 */
static void
write_inline(struct audit *a)
{
	long long done, backoff = AUDIT_BACKOFF_MIN_MS;
	size_t n, i;

	while (a->count > 0) {
		n = a->count < a->txn_max ? a->count : a->txn_max;
		for (i = 0; i < n; i++)
			a->txn[i] = a->ring[(a->head + i) % a->cap];
		if ((done = write_rows(a, a->txn, n)) > 0) {
			for (i = 0; i < (size_t)done; i++)
				free(a->txn[i]);
			a->head = (a->head + (size_t)done) % a->cap;
			a->count -= (size_t)done;
			a->written += done;
			continue;
		}
		a->failures++;
		if (mono_ms() + backoff > a->give_up_at) {
			log_error("audit: %s: cannot write: %s; %zu rows not "
			    "written", a->path, a->err, a->count);
			break;
		}
		sleep_ms(backoff);
		if ((backoff *= 2) > AUDIT_BACKOFF_MAX_MS)
			backoff = AUDIT_BACKOFF_MAX_MS;
	}
}

/* audit_open(), or with inline_mode set audit_open_inline(). */
static struct audit *
open_handle(const char *path, int queue_max, int batch,
    long long flush_interval_ms, int inline_mode, char *errbuf,
    size_t errlen)
{
	struct audit *a = NULL;
	pthread_condattr_t ca;
	sigset_t all, old;
	char dummy[1];
	long long deadline;
	int mu_ok = 0, wake_ok = 0, ckpt_ok = 0;

	if (errbuf == NULL || errlen == 0) {
		errbuf = dummy;
		errlen = sizeof(dummy);
	}
	if (path == NULL || *path == '\0') {
		snprintf(errbuf, errlen, "audit: no database path");
		return NULL;
	}
	if (queue_max < 1 || batch < 1 || flush_interval_ms < 0) {
		snprintf(errbuf, errlen, "%s: queue (%d) and batch (%d) must "
		    "be at least 1, flush interval (%lld ms) at least 0",
		    path, queue_max, batch, flush_interval_ms);
		return NULL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		goto fail_errno;
	if (strchr(path, '%') != NULL && (a->pattern = strdup(path)) == NULL)
		goto fail_errno;
	if (a->pattern != NULL ? audit_files_for(path, wall_ms(), a->path,
	    sizeof(a->path), &a->period_start_ms, &a->period_end_ms) == -1 :
	    snprintf(a->path, sizeof(a->path), "%s", path) >=
	    (int)sizeof(a->path)) {
		errno = ENAMETOOLONG;
		goto fail_errno;
	}
	a->cap = (size_t)queue_max;
	a->batch = (size_t)batch < a->cap ? (size_t)batch : a->cap;
	/* Beyond an hour it means "only full batches"; and no overflow. */
	a->flush_interval_ms = flush_interval_ms < 3600000 ? flush_interval_ms :
	    3600000;
	a->txn_max = a->batch > AUDIT_TXN_ROWS ? a->batch : AUDIT_TXN_ROWS;
	if (a->txn_max > a->cap)
		a->txn_max = a->cap;
	if ((a->ring = calloc(a->cap, sizeof(*a->ring))) == NULL ||
	    (a->txn = calloc(a->txn_max, sizeof(*a->txn))) == NULL)
		goto fail_errno;

	if ((errno = pthread_mutex_init(&a->mu, NULL)) != 0)
		goto fail_errno;
	mu_ok = 1;
	if ((errno = pthread_condattr_init(&ca)) != 0)
		goto fail_errno;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	errno = pthread_cond_init(&a->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (errno != 0)
		goto fail_errno;
	wake_ok = 1;
	if ((errno = pthread_cond_init(&a->ckpt, NULL)) != 0)
		goto fail_errno;
	ckpt_ok = 1;
	/* The database is opened by audit_close(), after the reply. */
	if ((a->inline_mode = inline_mode))
		return a;

	/*
	 * Processes that create the file at once can deadlock on the switch
	 * to WAL mode; SQLite then answers BUSY to one of them without
	 * waiting, so the open is retried until AUDIT_OPEN_BUSY_MS.
	 */
	deadline = mono_ms() + AUDIT_OPEN_BUSY_MS;
	while (db_open(a, errbuf, errlen) == -1) {
		if (!a->err_busy || mono_ms() >= deadline)
			goto fail;
		sleep_ms(1 + getpid() % 10);	/* apart: forked alike */
	}
	/* Signals are for the threads that serve; the writer only writes. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* Without a checkpointer the writer checkpoints itself. */
	a->ckpt_started = pthread_create(&a->ckpt_thread, NULL, ckpt_main,
	    a) == 0;
	errno = pthread_create(&a->thread, NULL, writer_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (errno != 0)
		goto fail_errno;
	return a;

fail_errno:
	snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
fail:
	if (a != NULL) {
		if (a->ckpt_started) {
			pthread_mutex_lock(&a->mu);
			a->closing = 1;
			pthread_cond_signal(&a->ckpt);
			pthread_mutex_unlock(&a->mu);
			pthread_join(a->ckpt_thread, NULL);
		}
		db_close(a);
		if (ckpt_ok)
			pthread_cond_destroy(&a->ckpt);
		if (wake_ok)
			pthread_cond_destroy(&a->wake);
		if (mu_ok)
			pthread_mutex_destroy(&a->mu);
		free(a->txn);
		free(a->ring);
		free(a->pattern);
		free(a);
	}
	return NULL;
}

struct audit *
audit_open(const char *path, int queue_max, int batch,
    long long flush_interval_ms, char *errbuf, size_t errlen)
{
	return open_handle(path, queue_max, batch, flush_interval_ms, 0,
	    errbuf, errlen);
}

struct audit *
audit_open_inline(const char *path, int queue_max, char *errbuf,
    size_t errlen)
{
	return open_handle(path, queue_max, queue_max, 0, 1, errbuf, errlen);
}

int
audit_push(struct audit *a, const struct audit_row *row)
{
	const char *src[T_COUNT];
	const char **dst[T_COUNT];
	size_t len[T_COUNT], size = 0;
	struct qrow *q;
	char *p;
	int i;

	if (a == NULL || row == NULL || row->request_id == NULL ||
	    row->reason == NULL) {
		errno = EINVAL;
		return -1;
	}
	src[T_REQUEST_ID] = row->request_id;
	src[T_RULE] = row->rule;
	src[T_KEY] = row->key;
	src[T_ALGORITHM] = row->algorithm;
	src[T_REASON] = row->reason;
	src[T_METHOD] = row->method;
	src[T_PATH] = row->path;
	src[T_CLIENT_IP] = row->client_ip;
	for (i = 0; i < T_COUNT; i++) {
		len[i] = src[i] != NULL ? strnlen(src[i], AUDIT_TEXT_MAX) : 0;
		size += len[i] + 1;
	}

	/* The copy is made before taking the lock: the writer waits less. */
	if ((q = malloc(sizeof(*q) + size)) == NULL)
		return -1;
	q->r = *row;
	q->r.allowed = row->allowed != 0;
	dst[T_REQUEST_ID] = &q->r.request_id;
	dst[T_RULE] = &q->r.rule;
	dst[T_KEY] = &q->r.key;
	dst[T_ALGORITHM] = &q->r.algorithm;
	dst[T_REASON] = &q->r.reason;
	dst[T_METHOD] = &q->r.method;
	dst[T_PATH] = &q->r.path;
	dst[T_CLIENT_IP] = &q->r.client_ip;
	p = q->text;
	for (i = 0; i < T_COUNT; i++) {
		q->len[i] = (int)len[i];
		if (src[i] == NULL) {
			*dst[i] = NULL;
			continue;
		}
		memcpy(p, src[i], len[i]);
		p[len[i]] = '\0';
		*dst[i] = p;
		p += len[i] + 1;
	}

	pthread_mutex_lock(&a->mu);
	if (a->stopping) {
		pthread_mutex_unlock(&a->mu);
		free(q);
		errno = EPIPE;
		return -1;
	}
	/* A request never waits for the disk: a row that finds no room is
	 * lost, counted, and logged by the writer. */
	if (a->count == a->cap) {
		a->lost++;
		pthread_mutex_unlock(&a->mu);
		free(q);
		errno = ENOSPC;
		return -1;
	}
	a->ring[(a->head + a->count) % a->cap] = q;
	a->count++;
	if (a->writer_waiting && (a->count == 1 || a->count >= a->batch))
		pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

void
audit_stop(struct audit *a)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->stopping = 1;
	pthread_mutex_unlock(&a->mu);
}

long long
audit_close(struct audit *a, long long give_up_ms)
{
	long long lost;
	size_t i;

	if (a == NULL)
		return 0;
	pthread_mutex_lock(&a->mu);
	a->stopping = 1;
	a->closing = 1;
	a->give_up_at = mono_ms() + (give_up_ms > 0 ? give_up_ms : 0);
	pthread_cond_broadcast(&a->wake);
	pthread_cond_signal(&a->ckpt);
	pthread_mutex_unlock(&a->mu);
	if (a->inline_mode)
		write_inline(a);
	else {
		pthread_join(a->thread, NULL);
		if (a->ckpt_started)
			pthread_join(a->ckpt_thread, NULL);
	}

	lost = (long long)a->count;
	for (i = 0; i < a->count; i++)
		free(a->ring[(a->head + i) % a->cap]);
	db_close(a);
	pthread_cond_destroy(&a->ckpt);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->mu);
	free(a->txn);
	free(a->ring);
	free(a->pattern);
	free(a);
	return lost;
}

void
audit_on_write(struct audit *a, void (*fn)(void))
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->on_write = fn;
	pthread_mutex_unlock(&a->mu);
}

void
audit_keep(struct audit *a, long long keep_ms)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->keep_ms = keep_ms;
	pthread_mutex_unlock(&a->mu);
}

int
audit_full(struct audit *a)
{
	int full;

	if (a == NULL)
		return 0;
	pthread_mutex_lock(&a->mu);
	full = a->count == a->cap;
	pthread_mutex_unlock(&a->mu);
	return full;
}

void
audit_stats(struct audit *a, struct audit_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	st->queued = (long long)a->count;
	st->written = a->written;
	st->failures = a->failures;
	st->lost = a->lost;
	if (a->count > 0)
		st->oldest_ts_ms = a->ring[a->head]->r.ts_ms;
	pthread_mutex_unlock(&a->mu);
}
