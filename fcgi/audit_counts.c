/*
 * audit_counts: the per-second summaries (rlg_counts, RLG_AUDIT_SCHEMA):
 * per second and rule (with its parameters), the rows allowed, denied and
 * admitted without a count, the first and last ms, and the key when there
 * was one (so that a report knows a rule with one key), added up in memory
 * while a transaction's rows are bound and written into the same
 * transaction before its COMMIT, so that they always equal the rows. Not
 * the rows (audit_db.c) nor their ids (audit_ids.c).
 */
#include <string.h>

#include <sqlite3.h>

#include "audit_int.h"

#define UPSERT \
	"INSERT INTO rlg_counts (sec, rule, allowed, denied, unchecked, " \
	"first_ms, last_ms, key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) " \
	"ON CONFLICT (sec, rule) DO UPDATE SET " \
	"allowed = allowed + excluded.allowed, " \
	"denied = denied + excluded.denied, " \
	"unchecked = unchecked + excluded.unchecked, " \
	"first_ms = min(first_ms, excluded.first_ms), " \
	"last_ms = max(last_ms, excluded.last_ms), " \
	"key = CASE WHEN key = excluded.key THEN key END"

int
audit_counts_open(struct audit *a)
{
	a->ncounts = 0;
	if (a->count_put != NULL)
		return SQLITE_OK;
	return sqlite3_prepare_v3(a->db, UPSERT, -1,
	    SQLITE_PREPARE_PERSISTENT, &a->count_put, NULL);
}

void
audit_counts_close(struct audit *a)
{
	sqlite3_finalize(a->count_put);
	a->count_put = NULL;
	a->ncounts = 0;
}

void
audit_counts_reset(struct audit *a)
{
	a->ncounts = 0;
}

int
audit_counts_flush(struct audit *a)
{
	struct audit_count *c;
	size_t i;
	int rc = SQLITE_OK;

	for (i = 0; i < a->ncounts && rc == SQLITE_OK; i++) {
		c = &a->counts[i];
		sqlite3_bind_int64(a->count_put, 1, c->sec);
		sqlite3_bind_int64(a->count_put, 2, c->rule);
		sqlite3_bind_int64(a->count_put, 3, c->allowed);
		sqlite3_bind_int64(a->count_put, 4, c->denied);
		sqlite3_bind_int64(a->count_put, 5, c->unchecked);
		sqlite3_bind_int(a->count_put, 6, c->first_ms);
		sqlite3_bind_int(a->count_put, 7, c->last_ms);
		if (c->key == AUDIT_IDS_NULL)
			sqlite3_bind_null(a->count_put, 8);
		else
			sqlite3_bind_int64(a->count_put, 8, c->key);
		rc = sqlite3_step(a->count_put);
		sqlite3_reset(a->count_put);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	a->ncounts = 0;
	return rc;
}

/* Floor division: a second holds ms [sec * 1000, sec * 1000 + 1000). */
static int64_t
second_of(int64_t ms)
{
	return ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
}

int
audit_counts_add(struct audit *a, const struct qrow *q, int64_t rule,
    int64_t key)
{
	int64_t sec = second_of(q->r.ts_ms);
	int ms = (int)(q->r.ts_ms - sec * 1000);
	struct audit_count *c = NULL;
	size_t i;
	int rc;

	/* A transaction's rows mostly share a few seconds: the latest
	 * first. */
	for (i = a->ncounts; i-- > 0;)
		if (a->counts[i].sec == sec && a->counts[i].rule == rule) {
			c = &a->counts[i];
			break;
		}
	if (c == NULL) {
		if (a->ncounts == AUDIT_COUNTS &&
		    (rc = audit_counts_flush(a)) != SQLITE_OK)
			return rc;
		c = &a->counts[a->ncounts++];
		memset(c, 0, sizeof(*c));
		c->sec = sec;
		c->rule = rule;
		c->first_ms = c->last_ms = ms;
		c->key = key;
	}
	/* One key for the second's rows, or none said (NULL). */
	if (c->key != key)
		c->key = AUDIT_IDS_NULL;
	if (q->r.allowed) {
		c->allowed++;
		/* on_error = allow: admitted, counted by no limit. */
		c->unchecked += strcmp(q->r.reason, "redis_error") == 0;
	} else
		c->denied++;
	if (ms < c->first_ms)
		c->first_ms = ms;
	if (ms > c->last_ms)
		c->last_ms = ms;
	return SQLITE_OK;
}
