/*
 * audit: every decision, one row per applied rule per request, written to
 * SQLite by one writer thread in batches. Workers hand rows over with
 * audit_push(), which never waits: a failing database is retried (and
 * reported once per episode) while rows wait in the queue; a row that
 * finds the queue full is lost and counted; shutdown flushes. How the
 * writer batches, retries, checkpoints and reports: audit_int.h.
 */
#ifndef RLG_AUDIT_H
#define RLG_AUDIT_H

#include <stdint.h>

/*
 * The mode of the audit files rlgate creates, whatever the umask: the
 * database, dated or not, and so SQLite's -wal, -shm and journal beside
 * it. Rows hold client addresses and keys: the owner writes, the group
 * (report readers) reads, others nothing.
 */
#define RLG_AUDIT_FILE_MODE	0640

/*
 * The layout of the audit databases rlgate writes (the second; the first was
 * RLG_AUDIT_SCHEMA_V1's one table), marked in the file's header by
 * PRAGMA application_id and user_version. Each repeated value is stored
 * once, in a small table whose ids the writer keeps in memory: a rule with
 * its parameters (rlg_rules), what was answered (rlg_outcomes: allowed,
 * reason, method, status), and every text (rlg_texts: keys, paths, client
 * addresses, the request ids' per-process prefix; h is the text's 64-bit
 * FNV-1a, its only index). A row of rlg_rows holds integers only; the
 * request id "P-N" (N hex) is rq (the text "P-") and rn (N); 16 hex digits
 * alone are rn with rq NULL; any other id is rq alone. rlg_rows has no
 * index but its rowid: readers scan it in insertion order. rlg_counts
 * sums the rows per second (sec: ts_ms / 1000, floored) and rlg_rules id:
 * allowed, denied, unchecked (allowed with reason redis_error), the
 * first and last ms within the second, and the key's id when every row
 * had the same (else NULL); written with the rows, it equals
 * them until [audit] keep_rows deletes rows, and answers throughput
 * reports without reading rows. The view
 * decisions gives every row as the first layout's table did: the same
 * columns, names, order and values; it is read-only.
 */
#define RLG_AUDIT_APP_ID	0x726c6761	/* "rlga" */
#define RLG_AUDIT_LAYOUT	2
#define RLG_AUDIT_SCHEMA \
	"PRAGMA application_id = 1919706977;\n" \
	"PRAGMA user_version = 2;\n" \
	"CREATE TABLE rlg_rules (\n" \
	"  id INTEGER PRIMARY KEY, name TEXT, algorithm TEXT,\n" \
	"  limit_value INTEGER, window_ms INTEGER, burst INTEGER);\n" \
	"CREATE TABLE rlg_outcomes (\n" \
	"  id INTEGER PRIMARY KEY, allowed INTEGER NOT NULL,\n" \
	"  reason TEXT NOT NULL, method TEXT, status INTEGER);\n" \
	"CREATE TABLE rlg_texts (\n" \
	"  id INTEGER PRIMARY KEY, h INTEGER NOT NULL, s TEXT NOT NULL);\n" \
	"CREATE INDEX rlg_texts_h ON rlg_texts(h);\n" \
	"CREATE TABLE rlg_rows (\n" \
	"  id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, rq INTEGER,\n" \
	"  rn INTEGER, rule INTEGER NOT NULL, key INTEGER,\n" \
	"  outcome INTEGER NOT NULL, cost INTEGER, remaining INTEGER,\n" \
	"  retry_after_ms INTEGER, delay_ms INTEGER, path INTEGER,\n" \
	"  client_ip INTEGER, latency_us INTEGER);\n" \
	"CREATE TABLE rlg_counts (\n" \
	"  sec INTEGER NOT NULL, rule INTEGER NOT NULL,\n" \
	"  allowed INTEGER NOT NULL, denied INTEGER NOT NULL,\n" \
	"  unchecked INTEGER NOT NULL, first_ms INTEGER NOT NULL,\n" \
	"  last_ms INTEGER NOT NULL, key INTEGER,\n" \
	"  PRIMARY KEY (sec, rule)) WITHOUT ROWID;\n" \
	"CREATE VIEW decisions AS SELECT\n" \
	"  d.id AS id, d.ts_ms AS ts_ms,\n" \
	"  CASE WHEN d.rn IS NULL THEN q.s\n" \
	"    WHEN d.rq IS NULL THEN printf('%016x', d.rn)\n" \
	"    ELSE q.s || printf('%x', d.rn) END AS request_id,\n" \
	"  r.name AS rule, k.s AS key, r.algorithm AS algorithm,\n" \
	"  o.allowed AS allowed, o.reason AS reason, d.cost AS cost,\n" \
	"  r.limit_value AS limit_value, r.window_ms AS window_ms,\n" \
	"  r.burst AS burst, d.remaining AS remaining,\n" \
	"  d.retry_after_ms AS retry_after_ms, d.delay_ms AS delay_ms,\n" \
	"  o.method AS method, p.s AS path, c.s AS client_ip,\n" \
	"  o.status AS status, d.latency_us AS latency_us\n" \
	"FROM rlg_rows d\n" \
	"  LEFT JOIN rlg_rules r ON r.id = d.rule\n" \
	"  LEFT JOIN rlg_outcomes o ON o.id = d.outcome\n" \
	"  LEFT JOIN rlg_texts q ON q.id = d.rq\n" \
	"  LEFT JOIN rlg_texts k ON k.id = d.key\n" \
	"  LEFT JOIN rlg_texts p ON p.id = d.path\n" \
	"  LEFT JOIN rlg_texts c ON c.id = d.client_ip;\n"

/*
 * The first layout (releases before the second one): one table, every
 * string in every row. rlgate-report still reads it.
 */
#define RLG_AUDIT_SCHEMA_V1 \
	"CREATE TABLE IF NOT EXISTS decisions (\n" \
	"  id             INTEGER PRIMARY KEY,\n" \
	"  ts_ms          INTEGER NOT NULL,\n" \
	"  request_id     TEXT NOT NULL,\n" \
	"  rule           TEXT,\n" \
	"  key            TEXT,\n" \
	"  algorithm      TEXT,\n" \
	"  allowed        INTEGER NOT NULL,\n" \
	"  reason         TEXT NOT NULL,\n" \
	"  cost           INTEGER,\n" \
	"  limit_value    INTEGER,\n" \
	"  window_ms      INTEGER,\n" \
	"  burst          INTEGER,\n" \
	"  remaining      INTEGER,\n" \
	"  retry_after_ms INTEGER,\n" \
	"  delay_ms       INTEGER,\n" \
	"  method         TEXT,\n" \
	"  path           TEXT,\n" \
	"  client_ip      TEXT,\n" \
	"  status         INTEGER,\n" \
	"  latency_us     INTEGER\n" \
	");\n" \
	"CREATE INDEX IF NOT EXISTS decisions_ts ON decisions(ts_ms);\n" \
	"CREATE INDEX IF NOT EXISTS decisions_rule_key_ts ON decisions(rule, key, ts_ms);\n"

/*
 * One decision. Strings may be NULL (stored as NULL), except request_id
 * and reason, which the schema requires. Integers below 0 in the nullable
 * columns (cost .. delay_ms, status, latency_us) are stored as NULL; 0 is
 * stored as 0. allowed is stored as 0 or 1. The row is copied by
 * audit_push(): the caller keeps its strings. Strings longer than
 * AUDIT_TEXT_MAX bytes are cut there (a row SQLite would refuse must never
 * block the queue).
 */
#define AUDIT_TEXT_MAX		65536
struct audit_row {
	int64_t		 ts_ms;
	const char	*request_id;
	const char	*rule;
	const char	*key;
	const char	*algorithm;
	int		 allowed;
	/* limit, unmatched, redis_error, dry_run, bad_request, local_cache
	 * (the deny cache denied), unlimited (an override said so),
	 * other_rule (this rule would admit; another denied, so not counted)
	 * or local (decided in memory on local_share while Redis could not
	 * answer): respond.h's enum rlg_reason */
	const char	*reason;
	int64_t		 cost;
	int64_t		 limit_value;
	int64_t		 window_ms;
	int64_t		 burst;
	int64_t		 remaining;
	int64_t		 retry_after_ms;
	int64_t		 delay_ms;
	const char	*method;
	const char	*path;
	const char	*client_ip;
	int64_t		 status;
	int64_t		 latency_us;
};

struct audit;

/*
 * Opens (creating if needed) the database at path in WAL mode with the
 * schema above, and starts the writer thread. queue_max rows are held in
 * memory at most; a batch of rows (at most queue_max) is written as soon as
 * it waits, or flush_interval_ms (0: at once) after the first row came. The
 * opening waits up to AUDIT_OPEN_BUSY_MS for another process's lock
 * (schema, the switch to WAL). path may be a dated name (audit_keep()): the
 * file of the present is opened. Returns NULL with a sentence naming path
 * in errbuf on failure (bad arguments, cannot open or create, not a
 * database, read-only, WAL refused, not to be trusted: audit_trusted()).
 * Each handle has its own connection and writer thread.
 */
#define AUDIT_OPEN_BUSY_MS	2000
struct audit	*audit_open(const char *path, int queue_max, int batch,
		    long long flush_interval_ms, char *errbuf, size_t errlen);

/*
 * For CGI mode, one request a process: a handle with no thread that does
 * not touch the disk until audit_close(), which writes the queued rows on
 * the caller's thread (after the reply has gone), in one transaction as a
 * rule, with no sync (WAL, synchronous = NORMAL: a crash of the machine
 * may lose the last rows, a crash of the process none) and no checkpoint
 * unless the WAL is due: at AUDIT_INLINE_WAL_PAGES (each process, the
 * first connection, reads the whole WAL to rebuild its index: a short WAL
 * keeps that read short), or with little free space. Returns NULL with a
 * sentence in errbuf on bad arguments or no memory.
 */
#define AUDIT_INLINE_WAL_PAGES	256
struct audit	*audit_open_inline(const char *path, int queue_max,
		    char *errbuf, size_t errlen);

/*
 * Whether the database path (a dated name: its file of now) and its
 * directory may be trusted as audit_open() would check them: this user's,
 * writable by no one else (README "What rlgate trusts"); an own file that
 * others may read is narrowed to RLG_AUDIT_FILE_MODE. For a reload, which
 * keeps the running configuration when a new one names a file that the
 * next start would refuse. 0 (also for a NULL path), or -1 with a sentence
 * in errbuf.
 */
int		 audit_trusted(const char *path, char *errbuf, size_t errlen);

/*
 * Queues a copy of row (one allocation; the queue owns it until it is
 * written). Never waits for the writer. Thread safe. Returns 0, or -1 with
 * errno set: EINVAL (a, row, request_id or reason NULL), ENOMEM, ENOSPC
 * when the queue is full (the row is lost and counted in
 * audit_stats().lost), or EPIPE when audit_stop() or audit_close() has
 * begun.
 */
int		 audit_push(struct audit *a, const struct audit_row *row);

/*
 * Queues the rows of one settled decision (limiter_decide() done;
 * latency_us set): one per rule it matched, or one with no rule when it
 * is a bad request or matched none (and [audit] unmatched = yes). The one
 * place a decision becomes rows. Thread safe; accepts a NULL a (no audit).
 * Returns 0, or -1 as audit_push() does for the first row it lost.
 */
struct decision;
int		 audit_record(struct audit *a, const struct decision *d);

/*
 * With a dated database name (strftime %Y %m %d %H, e.g. audit-%Y-%m-%d.db:
 * each row goes to the file of its ts_ms, in UTC, so that every process
 * agrees), files whose period ended more than keep_ms ago are deleted
 * (with their -wal and -shm) by the writer: at its first write, and by
 * whichever process creates the file of a new period. 0: none is
 * deleted (the default). May change at any time (a reload). Thread safe;
 * accepts NULL.
 */
void		 audit_keep(struct audit *a, long long keep_ms);

/*
 * With a dated name: the rows of files whose period ended more than
 * keep_rows_ms ago are deleted (and the file vacuumed) when old files are
 * looked for (see audit_keep()), their per-second summaries kept until
 * [audit] keep deletes the file. 0: rows stay (the default). Thread safe;
 * accepts NULL.
 */
void		 audit_keep_rows(struct audit *a, long long keep_rows_ms);

/* Whether the queue is full now (the next push would be lost). Thread
 * safe; a NULL gives 0. */
int		 audit_full(struct audit *a);

/*
 * Stops taking rows: every later audit_push() returns -1 (EPIPE). The
 * writer keeps writing what is queued. Thread safe. Accepts NULL.
 */
void		 audit_stop(struct audit *a);

/*
 * Stops taking rows, writes every queued row (retrying a failing database
 * until it succeeds or give_up_ms passes; 0 or less: no retry),
 * stops the writer, closes the database and frees a. Returns the number of
 * rows that could not be written (0 is the goal), and logs it when not 0.
 * Pushes racing with it return -1; none may start after it has returned.
 * Accepts NULL (returns 0).
 */
long long	 audit_close(struct audit *a, long long give_up_ms);

/*
 * fn is called by a's writer thread after each write attempt, committed or
 * failed, without a's lock (it may call audit_stats()). Set it before rows
 * come. Accepts NULL a.
 */
void		 audit_on_write(struct audit *a, void (*fn)(void));

/* Counters for tests and logs. Thread safe. a NULL gives zeros. */
struct audit_stats {
	long long	 queued;	/* rows currently waiting */
	long long	 written;	/* rows committed so far */
	long long	 failures;	/* failed write attempts so far */
	long long	 lost;		/* rows refused, the queue full */
	long long	 oldest_ts_ms;	/* oldest row waiting; 0: none */
};
void		 audit_stats(struct audit *a, struct audit_stats *st);

#endif
