/*
 * rowids: the second layout's interned tables as arrays by id, and a
 * filter's names as ids. The arrays reproduce the view's LEFT JOINs: an
 * id that no row of a table holds reads as NULL. Not here: the scan of
 * the rows (rowscan.c), what a reader does with a row (agg.c, top.c,
 * verify_load.c, whatif_read.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rowids.h"

/*
 * Ids are the writer's rowids, dense from 1; arrays span max(id). A table
 * whose max(id) passes this many times its rows (plus some) is not
 * indexed: its file is read through the view.
 */
#define SPARSE_FACTOR	4
#define SPARSE_SLACK	65536

/* max(id) and count(*) of table t, into *n (max + 1); 1 when too sparse. */
static int
table_span(struct rdb *d, const char *t, size_t *n, char *err, size_t errlen)
{
	char sql[128];
	sqlite3_stmt *st;
	int64_t max = 0, rows = 0;

	snprintf(sql, sizeof(sql), "SELECT max(id), count(*) FROM %s", t);
	if ((st = db_prepare(d, sql, err, errlen)) == NULL)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		max = sqlite3_column_int64(st, 0);
		rows = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	if (max < 0 || max > rows * SPARSE_FACTOR + SPARSE_SLACK)
		return 1;
	*n = (size_t)max + 1;
	return 0;
}

static char *
dup_column(sqlite3_stmt *st, int col, struct db_str *sb)
{
	const char *s = db_column_str(st, col, sb);

	return s != NULL ? strdup(s) : NULL;
}

/* A load's rc when a copy ran out of memory: no SQLite result code. */
#define LOAD_OOM	(-1)

/*
 * Ends a load: finalizes st; 0 when its last step's rc was SQLITE_DONE,
 * else -1 with why in err ("out of memory" for LOAD_OOM).
 */
static int
load_end(struct rdb *d, sqlite3_stmt *st, int rc, char *err, size_t errlen)
{
	sqlite3_finalize(st);
	if (rc == LOAD_OOM) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (rc != SQLITE_DONE) {
		db_read_error(d, err, errlen);
		return -1;
	}
	return 0;
}

/* Every statement below selects id first; rows with other ids are skipped. */
static int
load_rules(struct rdb *d, struct rowids *x, struct db_str *sb, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = db_prepare(d, "SELECT id, name, algorithm, limit_value, "
	    "window_ms, burst FROM rlg_rules", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		struct rowids_rule *r;

		if (id < 0 || (size_t)id >= x->nrule)
			continue;
		r = &x->rule[id];
		r->present = 1;
		if (sqlite3_column_type(st, 1) != SQLITE_NULL &&
		    (r->name = dup_column(st, 1, sb)) == NULL) {
			rc = LOAD_OOM;
			break;
		}
		/* Readers take the algorithm as a C string, cut at a NUL. */
		if (sqlite3_column_type(st, 2) != SQLITE_NULL &&
		    (r->algorithm = strdup((const char *)
		    sqlite3_column_text(st, 2))) == NULL) {
			rc = LOAD_OOM;
			break;
		}
		r->has_limit = sqlite3_column_type(st, 3) != SQLITE_NULL;
		r->limit_value = sqlite3_column_int64(st, 3);
		r->has_window = sqlite3_column_type(st, 4) != SQLITE_NULL;
		r->window_ms = sqlite3_column_int64(st, 4);
		r->has_burst = sqlite3_column_type(st, 5) != SQLITE_NULL;
		r->burst = sqlite3_column_int64(st, 5);
	}
	return load_end(d, st, rc, err, errlen);
}

static int
load_outcomes(struct rdb *d, struct rowids *x, struct db_str *sb, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = db_prepare(d, "SELECT id, allowed, reason FROM rlg_outcomes",
	    err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		struct rowids_outcome *o;

		if (id < 0 || (size_t)id >= x->noutcome)
			continue;
		o = &x->outcome[id];
		o->allowed = sqlite3_column_int(st, 1);
		/* reason is NOT NULL: a NULL one reads as the empty string. */
		o->reason = dup_column(st, 2, sb);
		if (o->reason == NULL && (o->reason = strdup("")) == NULL) {
			rc = LOAD_OOM;
			break;
		}
	}
	return load_end(d, st, rc, err, errlen);
}

static int
load_texts(struct rdb *d, struct rowids *x, struct db_str *sb, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = db_prepare(d, "SELECT id, s FROM rlg_texts", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);

		if (id < 0 || (size_t)id >= x->ntext ||
		    sqlite3_column_type(st, 1) == SQLITE_NULL)
			continue;
		if ((x->text[id] = dup_column(st, 1, sb)) == NULL) {
			rc = LOAD_OOM;
			break;
		}
	}
	return load_end(d, st, rc, err, errlen);
}

int
rowids_load(struct rdb *d, struct rowids *x, char *err, size_t errlen)
{
	struct db_str sb = { 0 };
	int rc;

	memset(x, 0, sizeof(*x));
	if ((rc = table_span(d, "rlg_rules", &x->nrule, err, errlen)) != 0 ||
	    (rc = table_span(d, "rlg_outcomes", &x->noutcome, err, errlen)) != 0 ||
	    (rc = table_span(d, "rlg_texts", &x->ntext, err, errlen)) != 0)
		return rc;
	x->rule = calloc(x->nrule, sizeof(*x->rule));
	x->outcome = calloc(x->noutcome, sizeof(*x->outcome));
	x->text = calloc(x->ntext, sizeof(*x->text));
	if (x->rule == NULL || x->outcome == NULL || x->text == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	} else if (load_rules(d, x, &sb, err, errlen) == -1 ||
	    load_outcomes(d, x, &sb, err, errlen) == -1 ||
	    load_texts(d, x, &sb, err, errlen) == -1)
		rc = -1;
	free(sb.buf);
	return rc;
}

void
rowids_free(struct rowids *x)
{
	for (size_t i = 0; x->rule != NULL && i < x->nrule; i++) {
		free((char *)x->rule[i].name);
		free((char *)x->rule[i].algorithm);
	}
	for (size_t i = 0; x->outcome != NULL && i < x->noutcome; i++)
		free((char *)x->outcome[i].reason);
	for (size_t i = 0; x->text != NULL && i < x->ntext; i++)
		free(x->text[i]);
	free(x->rule);
	free(x->outcome);
	free(x->text);
	memset(x, 0, sizeof(*x));
}

const struct rowids_rule *
rowids_rule(const struct rowids *x, int64_t id)
{
	if (id < 0 || (size_t)id >= x->nrule || !x->rule[id].present)
		return NULL;
	return &x->rule[id];
}

const struct rowids_outcome *
rowids_outcome(const struct rowids *x, int64_t id)
{
	if (id < 0 || (size_t)id >= x->noutcome || x->outcome[id].reason == NULL)
		return NULL;
	return &x->outcome[id];
}

const char *
rowids_text(const struct rowids *x, int64_t id)
{
	return id >= 0 && (size_t)id < x->ntext ? x->text[id] : NULL;
}

/* " AND col IN (ids)" into m: the ids below n whose name(x, id) is want;
 * " AND 0" for none. */
static void
print_ids(FILE *m, const char *col, const struct rowids *x, size_t n,
    const char *(*name)(const struct rowids *, int64_t), const char *want)
{
	size_t found = 0;

	for (size_t id = 0; id < n; id++) {
		const char *s = name(x, (int64_t)id);

		if (s == NULL || strcmp(s, want) != 0)
			continue;
		if (found++ == 0)
			fprintf(m, " AND %s IN (", col);
		else
			fputs(", ", m);
		fprintf(m, "%zu", id);
	}
	fputs(found ? ")" : " AND 0", m);
}

static const char *
rule_name(const struct rowids *x, int64_t id)
{
	const struct rowids_rule *r = rowids_rule(x, id);

	return r != NULL ? r->name : NULL;
}

char *
rowids_filter_sql(const struct rowids *x, const struct filter *f)
{
	char *sql = NULL;
	size_t len;
	FILE *m;
	int bad;

	if ((m = open_memstream(&sql, &len)) == NULL)
		return NULL;
	if (f->rule != NULL)
		print_ids(m, "rule", x, x->nrule, rule_name, f->rule);
	if (f->key != NULL)
		print_ids(m, "key", x, x->ntext, rowids_text, f->key);
	bad = ferror(m);
	if (fclose(m) == EOF || bad) {
		free(sql);
		return NULL;
	}
	return sql;
}

uint32_t
rowids_pair(struct rowids_memo *m, struct intern *in, const struct rowids *x,
    int64_t rule_id, int64_t key_id)
{
	const struct rowids_rule *r = rowids_rule(x, rule_id);
	const char *key = key_id >= 0 ? rowids_text(x, key_id) : NULL;
	size_t slot = key != NULL ? (size_t)key_id + 1 : 0;
	uint32_t id;

	/* A rule id past 32 bits is never remembered: it only costs a hash. */
	if (slot < m->cap && rule_id >= 0 && rule_id <= UINT32_MAX &&
	    m->v[slot] != 0 && m->v[slot] >> 32 == (uint64_t)rule_id)
		return (uint32_t)(m->v[slot] & UINT32_MAX) - 1;
	id = intern_pair(in, r != NULL ? r->name : NULL, key);
	if (id == RLG_INTERN_FAIL || rule_id < 0 || rule_id > UINT32_MAX)
		return id;
	if (slot >= m->cap) {
		size_t cap = x->ntext + 1;
		uint64_t *v = calloc(cap, sizeof(*v));

		if (v == NULL)
			return id;	/* unremembered: every row hashes */
		free(m->v);
		m->v = v;
		m->cap = cap;
	}
	m->v[slot] = (uint64_t)rule_id << 32 | ((uint64_t)id + 1);
	return id;
}

void
rowids_memo_free(struct rowids_memo *m)
{
	free(m->v);
	m->v = NULL;
	m->cap = 0;
}
