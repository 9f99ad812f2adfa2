/*
 * audit_db: the writer's SQLite connection to the audit file of the
 * present: creating the file with its mode, opening it in WAL mode with
 * the pragmas, the schema and the prepared statements, and one
 * transaction of rows. Not which file (audit_writer.c, audit_files.c),
 * nor when to retry (audit_writer.c) or checkpoint (audit_ckpt.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit_files.h"
#include "audit_int.h"
#include "clock.h"
#include "log.h"

#define AUDIT_CACHE_KB		16384	/* the indexes' hot pages stay */

/*
 * The INSERT of n rows: INSERT_HEAD, then n INSERT_ROWs less the last comma;
 * each "?" takes the next number, AUDIT_ROW_PARAMS to a row. OR FAIL: a
 * refused row ends the statement without undoing the rows it already wrote,
 * so SQLite keeps no statement journal (a copy of every page a statement of
 * several rows changes, to undo it); audit_db_write() rolls the whole
 * transaction back after any failure.
 */
#define INSERT_HEAD \
	"INSERT OR FAIL INTO rlg_rows (ts_ms, rq, rn, rule, key, outcome, " \
	"cost, remaining, retry_after_ms, delay_ms, path, client_ip, " \
	"latency_us) VALUES "
#define INSERT_ROW		"(?,?,?,?,?,?,?,?,?,?,?,?,?),"
#define AUDIT_ROW_PARAMS	13

/* The page size of a new file: rows of a few dozen bytes, and small
 * tables that each take at least a page. */
#define AUDIT_PAGE_SIZE		4096

void
audit_db_err(sqlite3 *db, int rc, char *buf, size_t len)
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
 * SQLite's busy handler: polls every AUDIT_BUSY_POLL_MS, not at SQLite's
 * default 1, 2, 5 ... 100 ms steps, so that a writer waiting for another
 * process gets the lock in the short gap between that process's
 * transactions instead of being starved by it.
 */
static int
busy_wait(void *arg, int calls)
{
	struct audit *a = arg;
	struct timespec ts = { 0, AUDIT_BUSY_POLL_MS * 1000000L };
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

void
audit_db_close(struct audit *a)
{
	audit_ids_close(a);
	audit_counts_close(a);
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

void
audit_db_keep_wal(sqlite3 *db)
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
 * A step of audit_db_open() failed with SQLite's code rc (the
 * connection's own when there is one): the sentence into errbuf, and
 * whether another's lock was the cause into a->err_busy. Returns -1.
 */
static int
open_failed(struct audit *a, int rc, char *errbuf, size_t errlen)
{
	char msg[400];

	if (a->db == NULL)
		snprintf(errbuf, errlen, "%s: %s", a->path, sqlite3_errstr(rc));
	else {
		rc = sqlite3_errcode(a->db);
		audit_db_err(a->db, rc, msg, sizeof(msg));
		snprintf(errbuf, errlen, "%s: %s", a->path, msg);
	}
	a->err_busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
	return -1;
}

/* The connection, waiting up to AUDIT_OPEN_BUSY_MS for locks, and
 * writable. 0, or -1 as audit_db_open(). */
static int
db_connect(struct audit *a, char *errbuf, size_t errlen)
{
	int rc;

	rc = sqlite3_open_v2(a->path, &a->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return open_failed(a, rc, errbuf, errlen);
	sqlite3_extended_result_codes(a->db, 1);
	a->busy_ms = AUDIT_OPEN_BUSY_MS;
	sqlite3_busy_handler(a->db, busy_wait, a);
	/* SQLite falls back to read-only without a word; writes would fail
	 * later. */
	if (sqlite3_db_readonly(a->db, "main") == 1) {
		snprintf(errbuf, errlen, "%s: the database file is read-only",
		    a->path);
		a->err_busy = 0;
		return -1;
	}
	return 0;
}

/* A new file's page size, which the switch to WAL mode fixes (an existing
 * file keeps its own). 0, or -1 as audit_db_open(). */
static int
page_size(struct audit *a, char *errbuf, size_t errlen)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "PRAGMA page_size=%d", AUDIT_PAGE_SIZE);
	if (sqlite3_exec(a->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return open_failed(a, SQLITE_OK, errbuf, errlen);
	return 0;
}

/* The switch to WAL mode, which a file on a network filesystem refuses.
 * 0, or -1 as audit_db_open(). */
static int
use_wal(struct audit *a, char *errbuf, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	const char *mode;

	if (sqlite3_prepare_v2(a->db, "PRAGMA journal_mode=WAL", -1, &st,
	    NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		open_failed(a, SQLITE_OK, errbuf, errlen);
		sqlite3_finalize(st);
		return -1;
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	if (mode == NULL || strcasecmp(mode, "wal") != 0) {
		snprintf(errbuf, errlen, "%s: journal_mode stays \"%s\", not "
		    "wal (is the file on a network filesystem?)", a->path,
		    mode != NULL ? mode : "");
		sqlite3_finalize(st);
		a->err_busy = 0;
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

/*
 * What the file at a->path holds, read inside the open transaction: the
 * layout rlgate writes (0), nothing yet (1), the first layout (2), or
 * something else (-1 with a sentence in errbuf; nothing is written into
 * such a file).
 */
static int
layout(struct audit *a, char *errbuf, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	long long app = 0, ver = 0, objects = 0, old = 0;
	int rc;

	rc = sqlite3_prepare_v2(a->db, "SELECT (SELECT application_id FROM "
	    "pragma_application_id), (SELECT user_version FROM "
	    "pragma_user_version), (SELECT count(*) FROM sqlite_schema), "
	    "(SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
	    "name = 'decisions')", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		app = sqlite3_column_int64(st, 0);
		ver = sqlite3_column_int64(st, 1);
		objects = sqlite3_column_int64(st, 2);
		old = sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return open_failed(a, SQLITE_OK, errbuf, errlen);
	a->err_busy = 0;
	if (app == RLG_AUDIT_APP_ID && ver == RLG_AUDIT_LAYOUT)
		return 0;
	if (app == 0 && objects == 0)
		return 1;
	if (app == 0 && old)
		return 2;
	if (app == RLG_AUDIT_APP_ID)
		snprintf(errbuf, errlen, "%s: an audit database of layout %lld, "
		    "which this rlgate (layout %d) does not write", a->path,
		    ver, RLG_AUDIT_LAYOUT);
	else if (old)
		snprintf(errbuf, errlen, "%s: an audit database of the first "
		    "layout, which this rlgate does not write into", a->path);
	else
		snprintf(errbuf, errlen, "%s: not an rlgate audit database "
		    "(it holds other tables); nothing is written into it",
		    a->path);
	return -1;
}

/*
 * The layout, checked, written into an empty file, or migrated from the
 * first, in one transaction: processes that open a new file at once create
 * it once, and a migration is whole or not at all. 0, or -1 as
 * audit_db_open().
 */
static int
schema(struct audit *a, char *errbuf, size_t errlen)
{
	int l;

	a->migrated = -1;
	if (sqlite3_exec(a->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK)
		return open_failed(a, SQLITE_OK, errbuf, errlen);
	if ((l = layout(a, errbuf, errlen)) == 1 &&
	    sqlite3_exec(a->db, RLG_AUDIT_SCHEMA, NULL, NULL, NULL) !=
	    SQLITE_OK) {
		open_failed(a, SQLITE_OK, errbuf, errlen);
		l = -1;
	}
	if (l == 2 && audit_migrate(a, errbuf, errlen) == -1)
		l = -1;
	if (l == -1) {
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
		audit_counts_reset(a);
		return -1;
	}
	if (sqlite3_exec(a->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		open_failed(a, SQLITE_OK, errbuf, errlen);
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
		audit_ids_forget(a);
		return -1;
	}
	if (a->migrated >= 0)
		log_info("audit: %s: the first layout's %lld rows moved to "
		    "the second, ids and values kept", a->path, a->migrated);
	return 0;
}

/* The pragmas, the schema (created or migrated when new_schema) and the
 * statements. 0, or -1 as audit_db_open(). */
static int
prepare(struct audit *a, int new_schema, char *errbuf, size_t errlen)
{
	char sql[128];

	/* In WAL mode NORMAL loses no committed row on a crash, only on
	 * power loss. */
	/* A WAL that an outage made larger than the writer's own fallback
	 * lets it grow is cut back when it starts again from its
	 * beginning. */
	snprintf(sql, sizeof(sql), "PRAGMA synchronous=NORMAL; "
	    "PRAGMA cache_size=-%d; PRAGMA journal_size_limit=%d",
	    AUDIT_CACHE_KB, AUDIT_WAL_LIMIT);
	if (sqlite3_exec(a->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return open_failed(a, SQLITE_OK, errbuf, errlen);
	if (new_schema && schema(a, errbuf, errlen) == -1)
		return -1;
	if (prepare_insert(a->db, 1, &a->insert) != SQLITE_OK ||
	    prepare_insert(a->db, AUDIT_INSERT_ROWS, &a->insert_group) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "BEGIN IMMEDIATE", -1, &a->begin,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "COMMIT", -1, &a->commit, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "ROLLBACK", -1, &a->rollback, NULL) !=
	    SQLITE_OK || audit_ids_open(a) != SQLITE_OK ||
	    audit_counts_open(a) != SQLITE_OK)
		return open_failed(a, SQLITE_OK, errbuf, errlen);
	return 0;
}

/* The connection's settings for writing, once it is open. */
static void
set_writing(struct audit *a)
{
	a->busy_ms = AUDIT_BUSY_MS;
	audit_db_keep_wal(a->db);
	/* One connection a CGI request: closing the last one would copy the
	 * WAL into the database and delete it, with a sync each time.
	 * audit_ckpt_after_commit() checkpoints when the WAL is due
	 * instead. */
	if (a->inline_mode)
		sqlite3_db_config(a->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
		    NULL);
	/*
	 * Checkpoints are run by audit_ckpt.c, not inside COMMIT: a failing
	 * auto-checkpoint makes a successful COMMIT return an error, and the
	 * rows would then be written twice.
	 */
	sqlite3_wal_hook(a->db, wal_hook, a);
	a->wal_frames = 0;
}

int
audit_db_open(struct audit *a, char *errbuf, size_t errlen)
{
	int l;

	if (audit_files_trust(a->path, errbuf, errlen) == -1) {
		a->err_busy = 0;
		return -1;
	}
	if (db_create(a->path) == -1) {
		snprintf(errbuf, errlen, "%s: cannot create: %s", a->path,
		    strerror(errno));
		a->err_busy = 0;
		return -1;
	}
	/* A file of no layout rlgate knows is refused before the switch to
	 * WAL, its first write; one of the layout rlgate writes needs no
	 * transaction to check it again (a CGI request opens it each time). */
	if (db_connect(a, errbuf, errlen) == -1 ||
	    page_size(a, errbuf, errlen) == -1 ||
	    (l = layout(a, errbuf, errlen)) == -1 ||
	    use_wal(a, errbuf, errlen) == -1 ||
	    prepare(a, l != 0, errbuf, errlen) == -1) {
		audit_db_close(a);
		return -1;
	}
	set_writing(a);
	return 0;
}

int
audit_db_ready(struct audit *a)
{
	int moved = 0;

	/*
	 * Removed or renamed (rotated) under us: writes would go to a file
	 * nobody can read any more. Write to a new one at the path instead.
	 */
	if (a->db != NULL && sqlite3_file_control(a->db, "main",
	    SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
		log_warn("audit: %s: the database file was removed or "
		    "replaced; writing to a new one", a->path);
		audit_db_close(a);
	}
	/* Reopening on another's lock is a busy failure like any other. */
	if (a->db == NULL && audit_db_open(a, a->err, sizeof(a->err)) == -1)
		return -1;
	return 0;
}

/*
 * Inserts rows[0..n), n being 1 or AUDIT_INSERT_ROWS, with one statement:
 * what a statement costs besides its rows (step, reset, halt) is paid once
 * for the group. Returns SQLITE_OK, or SQLite's code with the statement
 * left for txn_failed() to reset.
 */
static int
insert_rows(struct audit *a, struct qrow **rows, size_t n)
{
	sqlite3_stmt *st = n == 1 ? a->insert : a->insert_group;
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = audit_ids_bind_row(a, st, (int)i * AUDIT_ROW_PARAMS,
		    rows[i])) !=
		    SQLITE_OK)
			return rc;
	if ((rc = sqlite3_step(st)) != SQLITE_DONE)
		return rc;
	sqlite3_reset(st);
	return SQLITE_OK;
}

/*
 * The transaction failed with rc: why into a->err, the statements reset,
 * the transaction rolled back, and what kind of failure it was. Returns -1.
 */
static long long
txn_failed(struct audit *a, int rc)
{
	int e;

	audit_db_err(a->db, rc, a->err, sizeof(a->err));
	audit_ids_forget(a);
	audit_counts_reset(a);
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
	if (!a->err_busy)
		audit_db_close(a);
	return -1;
}

long long
audit_db_write(struct audit *a, struct qrow **rows, size_t n)
{
	long long stop;
	size_t i, step, check_at = 1023;
	int rc;

	if ((rc = sqlite3_step(a->begin)) != SQLITE_DONE)
		return txn_failed(a, rc);
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
			return txn_failed(a, rc);
	}
	if ((rc = audit_counts_flush(a)) != SQLITE_OK ||
	    (rc = sqlite3_step(a->commit)) != SQLITE_DONE)
		return txn_failed(a, rc);
	sqlite3_reset(a->begin);
	sqlite3_reset(a->commit);
	return (long long)i;
}

void
audit_db_drop_rows(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	long long n = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK)
		goto out;
	sqlite3_busy_timeout(db, AUDIT_OPEN_BUSY_MS);
	/* Only the layout rlgate writes, and only when rows are left. */
	if (sqlite3_prepare_v2(db, "SELECT (SELECT application_id FROM "
	    "pragma_application_id) = ?1 AND (SELECT user_version FROM "
	    "pragma_user_version) = ?2 AND EXISTS (SELECT 1 FROM rlg_rows)",
	    -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_int64(st, 1, RLG_AUDIT_APP_ID);
	sqlite3_bind_int(st, 2, RLG_AUDIT_LAYOUT);
	if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int(st, 0) == 0)
		goto out;
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_exec(db, "DELETE FROM rlg_rows", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		log_warn("audit: %s: cannot delete the rows past [audit] "
		    "keep_rows: %s", path, sqlite3_errmsg(db));
		goto out;
	}
	n = sqlite3_changes64(db);
	/* The space back; the summaries are a small part of the file. */
	sqlite3_exec(db, "VACUUM", NULL, NULL, NULL);
	audit_db_keep_wal(db);
	log_info("audit: %s: %lld rows deleted, their period ended more than "
	    "[audit] keep_rows ago; the per-second summaries stay", path, n);
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
}
