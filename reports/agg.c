/*
 * agg: counts allowed and denied decisions per series and window in one
 * streaming pass per database (so several databases simply add up), then
 * sorts. Grouping happens here rather than in SQL: a GROUP BY over ten
 * million rows makes SQLite sort them all, a hash of windows does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "intern.h"
#include "window.h"

struct cell {
	uint32_t	 sid;
	int64_t		 start_ms;
	int64_t		 allowed;
	int64_t		 denied;
	int64_t		 unchecked;
};

struct cells {
	uint32_t	*slots;		/* index + 1; 0 = empty */
	size_t		 cap;
	struct cell	*v;
	size_t		 n;
	size_t		 vcap;
};

static uint64_t
cell_hash(uint32_t sid, int64_t start_ms)
{
	uint64_t h = (uint64_t)start_ms * 0x9e3779b97f4a7c15ULL ^ sid * 0xc2b2ae3d27d4eb4fULL;

	return h ^ (h >> 29);
}

static int
cells_grow(struct cells *c)
{
	size_t cap = c->cap ? c->cap * 2 : 4096;
	uint32_t *slots = calloc(cap, sizeof(*slots));

	if (slots == NULL)
		return -1;
	for (size_t k = 0; k < c->n; k++) {
		size_t i = cell_hash(c->v[k].sid, c->v[k].start_ms) & (cap - 1);

		while (slots[i] != 0)
			i = (i + 1) & (cap - 1);
		slots[i] = (uint32_t)k + 1;
	}
	free(c->slots);
	c->slots = slots;
	c->cap = cap;
	return 0;
}

static struct cell *
cells_get(struct cells *c, uint32_t sid, int64_t start_ms)
{
	size_t i;

	if ((c->n + 1) * 2 > c->cap && cells_grow(c) == -1)
		return NULL;
	for (i = cell_hash(sid, start_ms) & (c->cap - 1); c->slots[i] != 0;
	    i = (i + 1) & (c->cap - 1)) {
		struct cell *e = &c->v[c->slots[i] - 1];

		if (e->sid == sid && e->start_ms == start_ms)
			return e;
	}
	if (c->n == c->vcap) {
		size_t vcap = c->vcap ? c->vcap * 2 : 4096;
		struct cell *v = realloc(c->v, vcap * sizeof(*v));

		if (v == NULL)
			return NULL;
		c->v = v;
		c->vcap = vcap;
	}
	c->v[c->n] = (struct cell){ sid, start_ms, 0, 0, 0 };
	c->slots[i] = (uint32_t)c->n + 1;
	return &c->v[c->n++];
}

static void
cells_free(struct cells *c)
{
	free(c->slots);
	free(c->v);
}

static int
cmp_cell(const void *x, const void *y)
{
	const struct cell *a = x, *b = y;

	if (a->sid != b->sid)
		return a->sid < b->sid ? -1 : 1;
	return (a->start_ms > b->start_ms) - (a->start_ms < b->start_ms);
}

/* NULL sorts first ("no rule"), then byte order. */
static int
cmp_opt(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

static int
cmp_series(const void *x, const void *y)
{
	const struct series *a = x, *b = y;
	int c = cmp_opt(a->rule, b->rule);

	return c ? c : cmp_opt(a->key, b->key);
}

static int
scan_one(struct rdb *d, const struct filter *f, struct agg *a,
    struct intern *ids, struct cells *cells, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	const char *last_rule = NULL, *last_key = NULL;
	uint32_t sid = 0;
	struct cell *last = NULL;
	struct db_str rb = { 0 }, kb = { 0 };
	int rc, ret = -1;

	/* Column 2: admitted without a count (Redis did not decide it). */
	if ((st = db_select(d, f, a->by_key ? "ts_ms, allowed, "
	    "reason = 'redis_error', rule, key" : "ts_ms, allowed, "
	    "reason = 'redis_error', rule", "1", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t ts = sqlite3_column_int64(st, 0);
		int allowed = sqlite3_column_int(st, 1) != 0;
		int unchecked = allowed && sqlite3_column_int(st, 2) != 0;
		const char *rule = db_column_str(st, 3, &rb);
		const char *key = a->by_key ? db_column_str(st, 4, &kb) : NULL;
		int64_t start = window_start(ts, a->width_ms);

		/* Rows of one rule (and key) come in runs: skip the hash then. */
		if (last == NULL || cmp_opt(rule, last_rule) != 0 ||
		    (a->by_key && cmp_opt(key, last_key) != 0)) {
			sid = intern_pair(ids, rule, a->by_key ? key : NULL);
			if (sid == RLG_INTERN_FAIL)
				goto oom;
			/* The interned copies outlive this row's column texts. */
			intern_pair_get(ids, sid, &last_rule, &last_key);
			last = NULL;
		}
		if (last == NULL || last->sid != sid || last->start_ms != start) {
			if ((last = cells_get(cells, sid, start)) == NULL)
				goto oom;
		}
		if (allowed)
			last->allowed++;
		else
			last->denied++;
		last->unchecked += unchecked;
		if (a->rows == 0 || ts < a->first_ms)
			a->first_ms = ts;
		if (a->rows == 0 || ts > a->last_ms)
			a->last_ms = ts;
		a->rows++;
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s: cannot read: %s", d->path, sqlite3_errmsg(d->db));
		goto out;
	}
	ret = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	sqlite3_finalize(st);
	free(rb.buf);
	free(kb.buf);
	return ret;
}

/*
 * Does the rule have a single key in every database? min(key) and
 * max(key) are two index lookups each.
 */
static int
one_key(struct rdbs *dbs, const char *rule, char *err, size_t errlen)
{
	char *lo = NULL, *hi = NULL;
	int same = 1;

	for (size_t i = 0; i < dbs->n && same; i++) {
		for (int m = 0; m < 2 && same; m++) {
			sqlite3_stmt *st = db_prepare(&dbs->v[i], m == 0 ?
			    "SELECT min(key) FROM decisions WHERE rule = ?1" :
			    "SELECT max(key) FROM decisions WHERE rule = ?1", err, errlen);
			const char *k;
			char **slot = m == 0 ? &lo : &hi;

			if (st == NULL) {
				same = -1;
				break;
			}
			sqlite3_bind_text(st, 1, rule, -1, SQLITE_STATIC);
			if (sqlite3_step(st) == SQLITE_ROW &&
			    (k = (const char *)sqlite3_column_text(st, 0)) != NULL) {
				if (*slot == NULL)
					*slot = strdup(k);
				else if (strcmp(*slot, k) != 0)
					same = 0;
			}
			sqlite3_finalize(st);
		}
	}
	if (same == 1 && (lo == NULL || hi == NULL || strcmp(lo, hi) != 0))
		same = 0;
	free(lo);
	free(hi);
	return same;
}

/*
 * The parameters stored in the latest row of the series, over every
 * database. A key's latest row is one step down the (rule, key, ts_ms)
 * index; a rule's is searched in the series' last window through the
 * ts_ms index, which the rule index would make a scan of all its rows.
 */
static int
read_params(struct rdbs *dbs, struct series *s, int64_t width_ms, char *err,
    size_t errlen)
{
	static const char *const sql[] = {
		"SELECT ts_ms, algorithm, limit_value, window_ms, burst FROM decisions "
		"WHERE rule = ?1 AND key = ?2 ORDER BY ts_ms DESC LIMIT 1",
		"SELECT ts_ms, algorithm, limit_value, window_ms, burst FROM decisions "
		"INDEXED BY decisions_ts WHERE rule = ?1 AND ts_ms >= ?3 AND ts_ms < ?4 "
		"ORDER BY ts_ms DESC LIMIT 1",
		"SELECT ts_ms, algorithm, limit_value, window_ms, burst FROM decisions "
		"WHERE rule = ?1 AND ts_ms >= ?3 AND ts_ms < ?4 ORDER BY ts_ms DESC LIMIT 1",
	};
	int64_t best_ts = INT64_MIN, last = s->wins[s->nwins - 1].start_ms;

	s->params = (struct params){ NULL, -1, -1, -1 };
	if (s->rule == NULL)
		return 0;
	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_stmt *st = NULL;
		int q = s->key ? 0 : 1;

		/* Without the gateway's ts_ms index, the plain query. */
		if (q == 1 && sqlite3_prepare_v2(dbs->v[i].db, sql[1], -1, &st, NULL) != SQLITE_OK)
			q = 2;
		if (st == NULL && (st = db_prepare(&dbs->v[i], sql[q], err, errlen)) == NULL)
			return -1;
		sqlite3_bind_text(st, 1, s->rule, -1, SQLITE_STATIC);
		if (s->key)
			sqlite3_bind_text(st, 2, s->key, -1, SQLITE_STATIC);
		else {
			sqlite3_bind_int64(st, 3, last);
			sqlite3_bind_int64(st, 4, last + width_ms);
		}
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > best_ts) {
			const char *alg = (const char *)sqlite3_column_text(st, 1);

			best_ts = sqlite3_column_int64(st, 0);
			free(s->params.algorithm);
			s->params.algorithm = alg ? strdup(alg) : NULL;
			for (int c = 2; c <= 4; c++) {
				int64_t v = sqlite3_column_type(st, c) == SQLITE_NULL ? -1 :
				    sqlite3_column_int64(st, c);

				if (c == 2)
					s->params.limit = v;
				else if (c == 3)
					s->params.window_ms = v;
				else
					s->params.burst = v;
			}
		}
		sqlite3_finalize(st);
	}
	return 0;
}

int
agg_run(struct agg *a, struct rdbs *dbs, const struct filter *f,
    int64_t width_ms, int by_key, char *err, size_t errlen)
{
	struct intern ids = { 0 };
	struct cells cells = { 0 };
	int ret = -1;

	a->width_ms = width_ms;
	a->by_key = by_key;
	for (size_t i = 0; i < dbs->n; i++)
		if (scan_one(&dbs->v[i], f, a, &ids, &cells, err, errlen) == -1)
			goto out;
	if (ids.n > 0 && (a->series = calloc(ids.n, sizeof(*a->series))) == NULL)
		goto oom;
	a->nseries = ids.n;
	qsort(cells.v, cells.n, sizeof(*cells.v), cmp_cell);
	for (size_t k = 0, j; k < cells.n; k = j) {
		struct series *s = &a->series[cells.v[k].sid];
		const char *rule, *key;

		for (j = k; j < cells.n && cells.v[j].sid == cells.v[k].sid; j++)
			;
		intern_pair_get(&ids, cells.v[k].sid, &rule, &key);
		if ((rule && (s->rule = strdup(rule)) == NULL) ||
		    (key && (s->key = strdup(key)) == NULL) ||
		    (s->wins = calloc(j - k, sizeof(*s->wins))) == NULL)
			goto oom;
		for (size_t c = k; c < j; c++) {
			s->wins[s->nwins++] = (struct win){ cells.v[c].start_ms,
			    cells.v[c].allowed, cells.v[c].denied,
			    cells.v[c].unchecked };
			s->allowed += cells.v[c].allowed;
			s->denied += cells.v[c].denied;
			s->unchecked += cells.v[c].unchecked;
			a->unchecked += cells.v[c].unchecked;
		}
	}
	qsort(a->series, a->nseries, sizeof(*a->series), cmp_series);
	for (size_t i = 0; i < a->nseries; i++) {
		struct series *s = &a->series[i];

		if (read_params(dbs, s, a->width_ms, err, errlen) == -1)
			goto out;
		if (s->key != NULL)
			s->one_key = 1;
		else if (s->rule != NULL && (s->one_key = one_key(dbs, s->rule, err,
		    errlen)) == -1)
			goto out;
	}
	ret = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	intern_free(&ids);
	cells_free(&cells);
	return ret;
}

void
agg_free(struct agg *a)
{
	for (size_t i = 0; i < a->nseries; i++) {
		free(a->series[i].rule);
		free(a->series[i].key);
		free(a->series[i].params.algorithm);
		free(a->series[i].wins);
	}
	free(a->series);
	a->series = NULL;
	a->nseries = 0;
}

double
agg_per_second(int64_t allowed, int64_t width_ms)
{
	return (double)allowed * 1000.0 / (double)width_ms;
}
