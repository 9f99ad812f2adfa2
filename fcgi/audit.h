/*
 * audit: every decision, one row per applied rule per request, written to
 * SQLite by one writer thread in batches. Workers hand rows over with
 * audit_push(); nothing is dropped: a full queue makes them wait, a failing
 * database is retried (and reported once per episode), shutdown flushes.
 */
#ifndef RLG_AUDIT_H
#define RLG_AUDIT_H

#include <stdint.h>

/* The schema every audit database has; reports/ reads it. */
#define RLG_AUDIT_SCHEMA \
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
 * One decision. Strings may be NULL (stored as NULL); integers below 0 in
 * the nullable columns (cost .. delay_ms, status, latency_us) are stored
 * as NULL. The row is copied by audit_push(): the caller keeps its strings.
 */
struct audit_row {
	int64_t		 ts_ms;
	const char	*request_id;
	const char	*rule;
	const char	*key;
	const char	*algorithm;
	int		 allowed;
	const char	*reason;	/* limit unmatched redis_error dry_run bad_request */
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
 * memory at most; a batch is written every flush_interval_ms or when batch
 * rows are waiting. Returns NULL with a sentence in errbuf on failure.
 */
struct audit	*audit_open(const char *path, int queue_max, int batch,
		    long long flush_interval_ms, char *errbuf, size_t errlen);

/*
 * Queues a copy of row. Blocks while the queue is full (back-pressure,
 * never a drop). Thread safe. Returns 0, or -1 if a is closing.
 */
int		 audit_push(struct audit *a, const struct audit_row *row);

/*
 * Stops taking rows, writes every queued row (retrying a failing database
 * until it succeeds or give_up_ms passes), stops the writer and frees a.
 * Returns the number of rows that could not be written (0 is the goal).
 * Accepts NULL.
 */
long long	 audit_close(struct audit *a, long long give_up_ms);

/* Counters for tests and logs. Thread safe. */
struct audit_stats {
	long long	 queued;	/* rows currently waiting */
	long long	 written;	/* rows committed so far */
	long long	 failures;	/* failed write attempts so far */
};
void		 audit_stats(struct audit *a, struct audit_stats *st);

#endif
