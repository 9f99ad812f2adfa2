/*
 * agg: counts allowed and denied decisions per series and window in one
 * streaming pass per database (so several databases simply add up), then
 * sorts. Grouping happens here rather than in SQL: a GROUP BY over ten
 * million rows makes SQLite sort them all, a hash of windows does not. A
 * file of the second layout answers a report of every rule in whole
 * seconds from its per-second summaries, without reading a row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "intern.h"
#include "rowids.h"
#include "rowscan.h"
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

/*
 * The parameters of each series' latest row (by ts_ms; the later one read
 * on a tie), gathered in the scan: what the report shows for the series.
 */
struct latest {
	int64_t		 ts;		/* INT64_MIN: none yet */
	char		 algorithm[32];	/* "": NULL */
	int64_t		 limit, window_ms, burst;
};

struct latests {
	struct latest	*v;
	size_t		 n;
};

/*
 * Notes the parameters alg (NULL), limit, window_ms, burst (-1: NULL) for
 * series sid at ts.
 */
static int
latest_set(struct latests *l, uint32_t sid, int64_t ts, const char *alg,
    int64_t limit, int64_t window_ms, int64_t burst)
{
	struct latest *e;

	if (sid >= l->n) {
		size_t n = l->n ? l->n * 2 : 64;
		struct latest *v;

		while (n <= sid)
			n *= 2;
		if ((v = realloc(l->v, n * sizeof(*v))) == NULL)
			return -1;
		for (size_t i = l->n; i < n; i++) {
			v[i].ts = INT64_MIN;
			v[i].algorithm[0] = '\0';
		}
		l->v = v;
		l->n = n;
	}
	e = &l->v[sid];
	if (ts < e->ts)
		return 0;
	e->ts = ts;
	/* Rows come in time order: most notes only confirm the last. */
	if (strcmp(e->algorithm, alg ? alg : "") != 0)
		snprintf(e->algorithm, sizeof(e->algorithm), "%s",
		    alg ? alg : "");
	e->limit = limit;
	e->window_ms = window_ms;
	e->burst = burst;
	return 0;
}

/* latest_set() of the parameters in columns c..c+3 of st. */
static int
latest_note(struct latests *l, uint32_t sid, int64_t ts, sqlite3_stmt *st,
    int c)
{
	return latest_set(l, sid, ts, (const char *)sqlite3_column_text(st, c),
	    sqlite3_column_type(st, c + 1) == SQLITE_NULL ? -1 :
	    sqlite3_column_int64(st, c + 1),
	    sqlite3_column_type(st, c + 2) == SQLITE_NULL ? -1 :
	    sqlite3_column_int64(st, c + 2),
	    sqlite3_column_type(st, c + 3) == SQLITE_NULL ? -1 :
	    sqlite3_column_int64(st, c + 3));
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

/* Counts one row of series sid in *last (found again when NULL). */
static int
count_row(struct agg *a, struct cells *cells, struct cell **last,
    uint32_t sid, int64_t ts, int allowed, int unchecked)
{
	int64_t start = window_start(ts, a->width_ms);

	if (*last == NULL || (*last)->sid != sid || (*last)->start_ms != start) {
		if ((*last = cells_get(cells, sid, start)) == NULL)
			return -1;
	}
	if (allowed)
		(*last)->allowed++;
	else
		(*last)->denied++;
	(*last)->unchecked += unchecked;
	if (a->rows == 0 || ts < a->first_ms)
		a->first_ms = ts;
	if (a->rows == 0 || ts > a->last_ms)
		a->last_ms = ts;
	a->rows++;
	return 0;
}

/* Rows through decisions: a first-layout file, or one rowids cannot index. */
static int
scan_view(struct rdb *d, const struct filter *f, struct agg *a,
    struct intern *ids, struct cells *cells, struct latests *lt, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	const char *last_rule = NULL, *last_key = NULL;
	uint32_t sid = 0;
	struct cell *last = NULL;
	struct db_str rb = { 0 }, kb = { 0 };
	int rc, ret = -1;

	/* Column 2: admitted without a count (Redis did not decide it). */
	if ((st = db_select(d, f, "ts_ms, allowed, reason = 'redis_error', "
	    "rule, algorithm, limit_value, window_ms, burst, key", "1", err,
	    errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t ts = sqlite3_column_int64(st, 0);
		int allowed = sqlite3_column_int(st, 1) != 0;
		int unchecked = allowed && sqlite3_column_int(st, 2) != 0;
		const char *rule = db_column_str(st, 3, &rb);
		const char *key = a->by_key ? db_column_str(st, 8, &kb) : NULL;

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
		if (latest_note(lt, sid, ts, st, 4) == -1 ||
		    count_row(a, cells, &last, sid, ts, allowed, unchecked) == -1)
			goto oom;
	}
	if (rc != SQLITE_DONE) {
		db_read_error(d, err, errlen);
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

/* The state of one scan by ids, for ids_row(). */
struct scan {
	const struct rowids	*x;
	struct agg		*a;
	struct intern		*ids;
	struct cells		*cells;
	struct latests		*lt;
	struct rowids_memo	 memo;
	int64_t			 last_rule, last_key;
	uint32_t		 sid;
	struct cell		*last;
};

/*
 * One row (ts_ms, rule, key, outcome) of rowscan. A run of one (rule id,
 * key id) is interned once. Returns 1 (stop) out of memory.
 */
static int
ids_row(void *arg, const int64_t *v, uint32_t nulls)
{
	struct scan *s = arg;
	int64_t ts = v[0], rule = v[1];
	int64_t key = s->a->by_key && !(nulls & 4) ? v[2] : -1;
	const struct rowids_outcome *o = rowids_outcome(s->x, v[3]);
	const struct rowids_rule *r = rowids_rule(s->x, rule);
	int allowed = o != NULL && o->allowed != 0;
	/* Admitted without a count (Redis did not decide it). */
	int unchecked = allowed && strcmp(o->reason, "redis_error") == 0;

	if (s->sid == RLG_INTERN_FAIL || rule != s->last_rule ||
	    key != s->last_key) {
		if ((s->sid = rowids_pair(&s->memo, s->ids, s->x, rule, key)) ==
		    RLG_INTERN_FAIL)
			return 1;
		s->last_rule = rule;
		s->last_key = key;
		s->last = NULL;
	}
	return latest_set(s->lt, s->sid, ts, r != NULL ? r->algorithm : NULL,
	    r != NULL && r->has_limit ? r->limit_value : -1,
	    r != NULL && r->has_window ? r->window_ms : -1,
	    r != NULL && r->has_burst ? r->burst : -1) == -1 ||
	    count_row(s->a, s->cells, &s->last, s->sid, ts, allowed,
	    unchecked) == -1;
}

/* A second-layout file: rlg_rows' integers, names and parameters by id
 * (rowids.h). */
static int
scan_ids(struct rdb *d, int jobs, const struct rowids *x,
    const struct filter *f, struct agg *a, struct intern *ids,
    struct cells *cells, struct latests *lt, char *err, size_t errlen)
{
	struct scan s = { x, a, ids, cells, lt, { 0 }, -1, -1,
	    RLG_INTERN_FAIL, NULL };
	int rc;

	rc = rowscan_run(d, x, f, "ts_ms, rule, key, outcome", 4, "1", jobs,
	    ids_row, &s, err, errlen);
	if (rc == 1)
		snprintf(err, errlen, "out of memory");
	rowids_memo_free(&s.memo);
	return rc == 0 ? 0 : -1;
}

/* One database's rows, read by ids when its layout allows. */
static int
scan_rows(struct rdb *d, int jobs, const struct filter *f, struct agg *a,
    struct intern *ids, struct cells *cells, struct latests *lt, char *err,
    size_t errlen)
{
	struct rowids x;
	int rc;

	if (d->layout < 2)
		return scan_view(d, f, a, ids, cells, lt, err, errlen);
	if ((rc = rowids_load(d, &x, err, errlen)) == 0)
		rc = scan_ids(d, jobs, &x, f, a, ids, cells, lt, err, errlen);
	else if (rc == 1)
		rc = scan_view(d, f, a, ids, cells, lt, err, errlen);
	rowids_free(&x);
	return rc;
}

/*
 * Whether d's per-second summaries answer this report: a file of the
 * second layout, every rule (no key series), windows and the time range in
 * whole seconds.
 */
static int
counts_answer(const struct rdb *d, const struct filter *f, const struct agg *a)
{
	return d->layout >= 2 && !a->by_key && f->key == NULL &&
	    a->width_ms % 1000 == 0 &&
	    (f->since_ms == INT64_MIN || f->since_ms % 1000 == 0) &&
	    (f->until_ms == INT64_MAX || f->until_ms % 1000 == 0);
}

/* As scan_view(), from rlg_counts: one row a second and rule. */
static int
scan_counts(struct rdb *d, const struct filter *f, struct agg *a,
    struct intern *ids, struct cells *cells, struct latests *lt, char *err,
    size_t errlen)
{
	char sql[400];
	sqlite3_stmt *st;
	struct db_str rb = { 0 };
	int rc;

	snprintf(sql, sizeof(sql), "SELECT c.sec, c.allowed, c.denied, "
	    "c.unchecked, c.first_ms, c.last_ms, r.name, r.algorithm, "
	    "r.limit_value, r.window_ms, r.burst FROM rlg_counts c "
	    "JOIN rlg_rules r ON r.id = c.rule WHERE 1%s%s%s",
	    f->rule ? " AND r.name = ?1" : "",
	    f->since_ms != INT64_MIN ? " AND c.sec >= ?3" : "",
	    f->until_ms != INT64_MAX ? " AND c.sec < ?4" : "");
	if ((st = db_prepare(d, sql, err, errlen)) == NULL)
		return -1;
	if (f->rule)
		sqlite3_bind_text(st, 1, f->rule, -1, SQLITE_STATIC);
	if (f->since_ms != INT64_MIN)
		sqlite3_bind_int64(st, 3, f->since_ms / 1000);
	if (f->until_ms != INT64_MAX)
		sqlite3_bind_int64(st, 4, f->until_ms / 1000);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t sec = sqlite3_column_int64(st, 0);
		int64_t allowed = sqlite3_column_int64(st, 1);
		int64_t denied = sqlite3_column_int64(st, 2);
		int64_t lo = sec * 1000 + sqlite3_column_int64(st, 4);
		int64_t hi = sec * 1000 + sqlite3_column_int64(st, 5);
		uint32_t sid = intern_pair(ids, db_column_str(st, 6, &rb), NULL);
		struct cell *c;

		if (sid == RLG_INTERN_FAIL ||
		    (c = cells_get(cells, sid, window_start(sec * 1000,
		    a->width_ms))) == NULL ||
		    latest_note(lt, sid, hi, st, 7) == -1) {
			snprintf(err, errlen, "out of memory");
			rc = SQLITE_NOMEM;
			break;
		}
		c->allowed += allowed;
		c->denied += denied;
		c->unchecked += sqlite3_column_int64(st, 3);
		if (a->rows == 0 || lo < a->first_ms)
			a->first_ms = lo;
		if (a->rows == 0 || hi > a->last_ms)
			a->last_ms = hi;
		a->rows += allowed + denied;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_NOMEM)
		db_read_error(d, err, errlen);
	sqlite3_finalize(st);
	free(rb.buf);
	if (rc != SQLITE_DONE)
		return -1;
	a->from_counts++;
	return 0;
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

	/* The first layout's (rule, key, ts_ms) index makes each one
	 * lookup; the second's summaries know a second's key when it had
	 * one (NULL otherwise, which min() and max() skip: counted). */
	static const char *const sql[2][2] = {
		{ "SELECT min(key) FROM decisions WHERE rule = ?1",
		  "SELECT max(key) FROM decisions WHERE rule = ?1" },
		{ "SELECT (SELECT s FROM rlg_texts WHERE id = m) FROM (SELECT "
		  "CASE WHEN count(*) = count(c.key) THEN min(c.key) END AS m "
		  "FROM rlg_counts c JOIN rlg_rules r ON r.id = c.rule WHERE "
		  "r.name = ?1)",
		  "SELECT (SELECT s FROM rlg_texts WHERE id = m) FROM (SELECT "
		  "CASE WHEN count(*) = count(c.key) THEN max(c.key) END AS m "
		  "FROM rlg_counts c JOIN rlg_rules r ON r.id = c.rule WHERE "
		  "r.name = ?1)" },
	};

	for (size_t i = 0; i < dbs->n && same; i++) {
		for (int m = 0; m < 2 && same; m++) {
			sqlite3_stmt *st = db_prepare(&dbs->v[i],
			    sql[dbs->v[i].layout >= 2][m], err, errlen);
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

int
agg_run(struct agg *a, struct rdbs *dbs, const struct filter *f,
    int64_t width_ms, int by_key, char *err, size_t errlen)
{
	struct intern ids = { 0 };
	struct cells cells = { 0 };
	struct latests lt = { NULL, 0 };
	int ret = -1;

	a->width_ms = width_ms;
	a->by_key = by_key;
	for (size_t i = 0; i < dbs->n; i++) {
		struct rdb *d = &dbs->v[i];

		if ((counts_answer(d, f, a) ? scan_counts(d, f, a, &ids, &cells,
		    &lt, err, errlen) : scan_rows(d, dbs->jobs, f, a, &ids,
		    &cells, &lt, err, errlen)) == -1)
			goto out;
	}
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
		/* The parameters stored in the series' latest row. */
		s->params = (struct params){ NULL, -1, -1, -1 };
		if (s->rule != NULL && cells.v[k].sid < lt.n) {
			const struct latest *e = &lt.v[cells.v[k].sid];

			if (e->algorithm[0] != '\0' &&
			    (s->params.algorithm = strdup(e->algorithm)) == NULL)
				goto oom;
			s->params.limit = e->limit;
			s->params.window_ms = e->window_ms;
			s->params.burst = e->burst;
		}
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
	free(lt.v);
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
