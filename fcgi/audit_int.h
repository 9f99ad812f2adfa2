/*
 * audit_int: what the pieces of the audit writer share, and only they:
 * the handle and its queued rows (audit.c), the SQLite connection, schema
 * and statements (audit_db.c), the ids of repeated values (audit_ids.c),
 * the writer thread (audit_writer.c) and the checkpoints (audit_ckpt.c). Not a contract for anything outside
 * audit*.c: audit.h is. None of these functions takes a->mu unless it
 * says so.
 */
#ifndef RLG_AUDIT_INT_H
#define RLG_AUDIT_INT_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "audit.h"

/*
 * How the writer behaves (DESIGN.md section 7; the numbers are the
 * constants below; test_audit.c checks them):
 *
 * - One writer thread per struct audit (all signals blocked in it). Rows
 *   wait in a queue of queue_max rows. They are written as soon as batch
 *   rows wait, or flush_interval_ms after the first of them arrived (plus
 *   the time of the write in progress). One transaction (BEGIN IMMEDIATE
 *   ... COMMIT) takes every row waiting, up to AUDIT_TXN_ROWS rows (or
 *   batch, if larger) or about AUDIT_TXN_MS of work, so that other
 *   processes sharing the file (each with its own writer; WAL) get the
 *   lock in time. A writer waits up to AUDIT_BUSY_MS for the lock,
 *   polling every AUDIT_BUSY_POLL_MS, and leaves AUDIT_GAP_US between
 *   back-to-back transactions, so that busy writers take turns instead of
 *   one starving the others.
 * - A row leaves the queue only when its transaction has committed. When a
 *   write fails (locked by another writer for longer than the busy
 *   timeout, read-only, disk full, I/O error, directory gone), the
 *   transaction is rolled back, the rows stay queued, and the write is
 *   retried with a backoff that doubles from AUDIT_BACKOFF_MIN_MS up to
 *   AUDIT_BACKOFF_MAX_MS; after any failure but a lock the connection is
 *   reopened. An episode is logged once (log_error: the path, SQLite's
 *   message and code, the rows waiting): at its first failure, or, for
 *   another writer's lock, once that has lasted AUDIT_BUSY_REPORT_MS
 *   (shorter waits are other writers' turns); the first success after it
 *   is logged with log_info ("recovered, N rows written"). A write that
 *   failed for want of space (disk full, quota, file-size limit) is
 *   retried with half the rows, down to one, and first checkpoints and
 *   truncates the WAL, which gives its space back once there is room for
 *   the pages it copies: freeing space is enough to recover.
 *   journal_size_limit cuts a WAL that grew past AUDIT_WAL_LIMIT back to
 *   that.
 * - A database file removed or renamed (rotated) while open is noticed
 *   before the next write (log_warn), and the rows go to a new file
 *   created at the path.
 * - No request waits for the disk: while the database stays unwritable
 *   the queue fills (queue_max rows of memory, each about 200 bytes plus
 *   its strings, is the time it buys), and then audit_push() refuses
 *   rows: they are lost, counted (audit_stats()), and logged by the writer
 *   in one line every AUDIT_LOST_LOG_MS at most. Whether such requests are
 *   served is the caller's choice (audit_full(); [audit] on_full).
 * - Checkpoints (PASSIVE, when the WAL passes AUDIT_CHECKPOINT_PAGES) are
 *   run by a thread of their own, on its own connection, never inside a
 *   COMMIT; the writer checkpoints itself when the WAL reaches
 *   AUDIT_CHECKPOINT_MAX (a starved or failing checkpointer), and after
 *   any commit that leaves less free space on the file system than twice
 *   the WAL: the room a checkpoint may need is kept.
 */
#define AUDIT_TXN_ROWS		16384
#define AUDIT_TXN_MS		100
#define AUDIT_BUSY_MS		250
#define AUDIT_BUSY_POLL_MS	1
#define AUDIT_GAP_US		2000
#define AUDIT_BACKOFF_MIN_MS	25
#define AUDIT_BACKOFF_MAX_MS	1000
#define AUDIT_BUSY_REPORT_MS	1000
#define AUDIT_LOST_LOG_MS	1000
#define AUDIT_WAL_LIMIT		(64 << 20)	/* bytes: above AUDIT_CHECKPOINT_MAX */
#define AUDIT_CHECKPOINT_PAGES	4000	/* WAL pages (16 MB) */
#define AUDIT_CHECKPOINT_MAX	(4 * AUDIT_CHECKPOINT_PAGES)
/* Rows written by one INSERT statement; a transaction's rows after its last
 * full group go one to a statement. */
#define AUDIT_INSERT_ROWS	16


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
	struct audit_ids	*ids;		/* audit_ids.c's */
	long long		 migrated;	/* rows audit_migrate() moved;
						 * -1: none at this open */
	sqlite3_stmt		*count_put;	/* audit_counts.c's */
	struct audit_count	*counts;	/* AUDIT_COUNTS of them */
	size_t			 ncounts;
	int			 busy_ms;	/* a lock is waited for */
	long long		 busy_since;	/* monotonic ms, the busy handler */
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
	long long		 keep_rows_ms;	/* their rows older: deleted */
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

/* ---- audit_db.c: the connection to a->path --------------------------- */

/*
 * Opens a->path (creating it, RLG_AUDIT_FILE_MODE) in WAL mode with the
 * schema and prepares the statements. Used at start and again by the
 * writer when the file was replaced or a write failed in a way the
 * connection may not survive. Returns 0, or -1 with errbuf set, a->db
 * NULL, and a->err_busy when another connection's lock was in the way.
 */
int	audit_db_open(struct audit *a, char *errbuf, size_t errlen);

/* Finalizes the statements and closes a->db; a->db NULL does nothing. */
void	audit_db_close(struct audit *a);

/*
 * Before a write: closes a connection whose file was removed or renamed
 * (rotated) under it, and opens a->path when none is open. Returns 0, or
 * -1 with a->err and a->err_busy set as audit_db_open() sets them.
 */
int	audit_db_ready(struct audit *a);

/*
 * Writes the first rows of rows[0..n) into the open a->db in one
 * transaction, as many as fit in AUDIT_TXN_MS. Returns how many were
 * committed (at least 1), or -1 with a->err, a->err_busy and a->err_full
 * set, the transaction rolled back, and the connection closed unless
 * another's lock was the cause.
 */
long long audit_db_write(struct audit *a, struct qrow **rows, size_t n);

/*
 * Binds q to the 13 parameters of st (an INSERT into rlg_rows) that follow
 * parameter p, its repeated values as their ids, found or added first
 * inside the open transaction. Returns SQLite's code.
 */
int	audit_ids_bind_row(struct audit *a, sqlite3_stmt *st, int p,
	    const struct qrow *q);

/*
 * [audit] keep_rows: deletes the rows of the audit file at path, of the
 * second layout, keeping its summaries, and vacuums it; logs it (and a
 * failure) once. A file without rows, or of another layout, is left as it
 * is. Its own connection: any thread.
 */
void	audit_db_drop_rows(const char *path);

/*
 * SQLite's message for the failure rc of db into buf, with the extended
 * code and the system's reason when the file system said no: "disk I/O
 * error (code 4874: File too large)".
 */
void	audit_db_err(sqlite3 *db, int rc, char *buf, size_t len);

/*
 * The last connection to close keeps the -wal (emptied) and -shm files:
 * a report reader of the files' group, who may not create files in the
 * directory, can open a WAL database only where they exist.
 */
void	audit_db_keep_wal(sqlite3 *db);

/* ---- audit_ids.c: the ids of the values rows repeat ------------------- */

/* The ids a row of rlg_rows holds (RLG_AUDIT_SCHEMA); AUDIT_IDS_NULL:
 * stored as NULL. rn, any value, only when has_rn. */
#define AUDIT_IDS_NULL	INT64_MIN
struct audit_row_ids {
	int64_t		 rq, rn, rule, key, outcome, path, client_ip;
	int		 has_rn;
};

/*
 * Prepares the lookups on the open a->db (allocating a->ids the first
 * time). Returns SQLite's code.
 */
int	audit_ids_open(struct audit *a);

/*
 * The ids of q's values, found in the file or added to it inside the
 * transaction open on a->db. Returns SQLite's code; on failure the
 * transaction is to be rolled back, and then audit_ids_forget() called.
 */
int	audit_ids_row(struct audit *a, const struct qrow *q,
	    struct audit_row_ids *o);

/* Forgets the ids kept in memory: a rolled-back transaction's new ids are
 * not in the file. */
void	audit_ids_forget(struct audit *a);

/* Finalizes the lookups and forgets the ids (another file comes); accepts
 * a->ids NULL. audit_ids_free() also frees the memory. */
void	audit_ids_close(struct audit *a);
void	audit_ids_free(struct audit *a);

/* ---- audit_counts.c: the per-second summaries ------------------------ */

/* A second's and rule's rows, added up before they are written. */
#define AUDIT_COUNTS	256
struct audit_count {
	int64_t		 sec, rule, allowed, denied, unchecked;
	int64_t		 key;			/* AUDIT_IDS_NULL: several */
	int		 first_ms, last_ms;	/* within the second */
};

/* Prepares the upsert on the open a->db (once). SQLite's code. */
int	audit_counts_open(struct audit *a);
void	audit_counts_close(struct audit *a);

/*
 * Adds q (its rlg_rules id rule, its key's rlg_texts id key) to the
 * counts of the transaction open on a->db, writing them first when
 * AUDIT_COUNTS are held.
 * audit_counts_flush() writes what is held, before COMMIT;
 * audit_counts_reset() forgets it (the transaction rolled back). SQLite's
 * code.
 */
int	audit_counts_add(struct audit *a, const struct qrow *q, int64_t rule,
	    int64_t key);
int	audit_counts_flush(struct audit *a);
void	audit_counts_reset(struct audit *a);

/* ---- audit_migrate.c: the first layout into the second --------------- */

/*
 * Inside the transaction open on a->db, on a file of the first layout:
 * creates the second layout and moves every row into it, keeping ids and
 * values, and drops the first layout's table; a->migrated is the number of
 * rows. Returns 0, or -1 with a sentence in errbuf (the caller rolls back:
 * the file stays as it was).
 */
int	audit_migrate(struct audit *a, char *errbuf, size_t errlen);

/* ---- audit_ckpt.c: copying the WAL back into the database ------------- */

/* The checkpointer thread's body (arg: the struct audit); ends once
 * a->closing is set and a->ckpt signalled. */
void	*audit_ckpt_main(void *arg);

/*
 * After a commit (writer thread, or the caller's for an inline handle):
 * checkpoints on the writer's connection when the WAL is past what the
 * checkpointer should have kept it to, or there is no checkpointer, or
 * space is low; else asks the checkpointer (takes a->mu) when one is due.
 */
void	 audit_ckpt_after_commit(struct audit *a);

/*
 * After a write that failed for want of space (a->truncate_wal): the WAL
 * has taken the space and a TRUNCATE checkpoint on the open a->db gives it
 * back; clears a->truncate_wal when it worked.
 */
void	 audit_ckpt_truncate(struct audit *a);

/* ---- audit_writer.c: writing the queue -------------------------------- */

/* The writer thread's body (arg: the struct audit); ends once closing and
 * the queue is written, or given up (a->give_up_at). */
void	*audit_writer_main(void *arg);

/*
 * An inline handle's rows, written by the caller's thread (audit_close())
 * in as few transactions as they fit, retried as the writer would until
 * a->give_up_at. What is left stays queued.
 */
void	 audit_write_inline(struct audit *a);

#endif
