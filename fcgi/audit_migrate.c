/*
 * audit_migrate: turns a file of the first audit layout (one decisions
 * table, RLG_AUDIT_SCHEMA_V1) into the second (RLG_AUDIT_SCHEMA) in
 * place, inside the transaction audit_db.c has opened: every row keeps its
 * id and values, written through the writer's own ids (audit_ids.c) and
 * summed into its summaries (audit_counts.c), and the old table goes. Not
 * when it runs, nor what a failure means (audit_db.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit_int.h"

#define OLD_TABLE	"rlg_first_layout"

/* The columns of the first layout's rows, in struct audit_row's order. */
#define SELECT_OLD \
	"SELECT id, ts_ms, request_id, rule, key, algorithm, allowed, " \
	"reason, cost, limit_value, window_ms, burst, remaining, " \
	"retry_after_ms, delay_ms, method, path, client_ip, status, " \
	"latency_us FROM " OLD_TABLE " ORDER BY id"
#define INSERT_ONE \
	"INSERT INTO rlg_rows (ts_ms, rq, rn, rule, key, outcome, cost, " \
	"remaining, retry_after_ms, delay_ms, path, client_ip, latency_us, " \
	"id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

/* Text column c of st into q's string t (NULL for SQL NULL). */
static const char *
col_text(sqlite3_stmt *st, int c, struct qrow *q, int t)
{
	const char *s = (const char *)sqlite3_column_text(st, c);

	q->len[t] = s != NULL ? sqlite3_column_bytes(st, c) : 0;
	return s;
}

/* Integer column c of st, below 0 for SQL NULL as struct audit_row says. */
static int64_t
col_opt(sqlite3_stmt *st, int c)
{
	return sqlite3_column_type(st, c) == SQLITE_NULL ? -1 :
	    sqlite3_column_int64(st, c);
}

/* The current row of st (SELECT_OLD) into q. */
static void
read_row(sqlite3_stmt *st, struct qrow *q)
{
	struct audit_row *r = &q->r;

	r->ts_ms = sqlite3_column_int64(st, 1);
	r->request_id = col_text(st, 2, q, T_REQUEST_ID);
	r->rule = col_text(st, 3, q, T_RULE);
	r->key = col_text(st, 4, q, T_KEY);
	r->algorithm = col_text(st, 5, q, T_ALGORITHM);
	r->allowed = sqlite3_column_int(st, 6) != 0;
	r->reason = col_text(st, 7, q, T_REASON);
	r->cost = col_opt(st, 8);
	r->limit_value = col_opt(st, 9);
	r->window_ms = col_opt(st, 10);
	r->burst = col_opt(st, 11);
	r->remaining = col_opt(st, 12);
	r->retry_after_ms = col_opt(st, 13);
	r->delay_ms = col_opt(st, 14);
	r->method = col_text(st, 15, q, T_METHOD);
	r->path = col_text(st, 16, q, T_PATH);
	r->client_ip = col_text(st, 17, q, T_CLIENT_IP);
	r->status = col_opt(st, 18);
	r->latency_us = col_opt(st, 19);
}

/* Every row of OLD_TABLE into rlg_rows. Returns SQLite's code. */
static int
copy_rows(struct audit *a, long long *n)
{
	sqlite3_stmt *get = NULL, *put = NULL;
	struct qrow *q;
	int rc;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return SQLITE_NOMEM;
	if ((rc = sqlite3_prepare_v2(a->db, SELECT_OLD, -1, &get, NULL)) !=
	    SQLITE_OK || (rc = sqlite3_prepare_v2(a->db, INSERT_ONE, -1, &put,
	    NULL)) != SQLITE_OK)
		goto out;
	while ((rc = sqlite3_step(get)) == SQLITE_ROW) {
		read_row(get, q);
		/* NOT NULL in the first layout: a NULL is a damaged file. */
		if (q->r.request_id == NULL || q->r.reason == NULL) {
			rc = SQLITE_CORRUPT;
			goto out;
		}
		if ((rc = audit_ids_bind_row(a, put, 0, q)) != SQLITE_OK ||
		    (rc = sqlite3_bind_int64(put, 14,
		    sqlite3_column_int64(get, 0))) != SQLITE_OK ||
		    (rc = sqlite3_step(put)) != SQLITE_DONE)
			goto out;
		sqlite3_reset(put);
		(*n)++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
out:
	sqlite3_finalize(get);
	sqlite3_finalize(put);
	free(q);
	return rc;
}

int
audit_migrate(struct audit *a, char *errbuf, size_t errlen)
{
	long long n = 0;
	int rc;

	if ((rc = sqlite3_exec(a->db, "ALTER TABLE decisions RENAME TO "
	    OLD_TABLE, NULL, NULL, NULL)) != SQLITE_OK ||
	    (rc = sqlite3_exec(a->db, RLG_AUDIT_SCHEMA, NULL, NULL, NULL)) !=
	    SQLITE_OK || (rc = audit_ids_open(a)) != SQLITE_OK ||
	    (rc = audit_counts_open(a)) != SQLITE_OK ||
	    (rc = copy_rows(a, &n)) != SQLITE_OK ||
	    (rc = audit_counts_flush(a)) != SQLITE_OK ||
	    (rc = sqlite3_exec(a->db, "DROP TABLE " OLD_TABLE, NULL, NULL,
	    NULL)) != SQLITE_OK) {
		snprintf(errbuf, errlen, "%s: cannot migrate the first audit "
		    "layout: %s", a->path, rc == SQLITE_CORRUPT ?
		    "a row without request_id or reason" :
		    sqlite3_errmsg(a->db));
		/* The caller rolls back: the ids of this transaction go. */
		audit_ids_forget(a);
		return -1;
	}
	a->migrated = n;
	return 0;
}
