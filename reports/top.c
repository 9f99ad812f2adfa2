/*
 * top: denials per (rule, key), counted in one pass over every database and
 * sorted. Rows that no rule matched have no key and are left out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "rowids.h"
#include "rowscan.h"
#include "top.h"

struct count {
	int64_t		 denied;
	int64_t		 total;
	uint32_t	 id;
};

static int
cmp_count(const void *x, const void *y, void *arg)
{
	const struct count *a = x, *b = y;
	const struct intern *ids = arg;
	const char *ar, *ak, *br, *bk;
	int c;

	if (a->denied != b->denied)
		return a->denied > b->denied ? -1 : 1;
	/* Higher ratio first: a.d / a.t > b.d / b.t, in integers. */
	if ((__int128)a->denied * b->total != (__int128)b->denied * a->total)
		return (__int128)a->denied * b->total > (__int128)b->denied * a->total ? -1 : 1;
	intern_pair_get(ids, a->id, &ar, &ak);
	intern_pair_get(ids, b->id, &br, &bk);
	if ((c = strcmp(ar, br)) != 0)
		return c;
	return strcmp(ak ? ak : "", bk ? bk : "");
}

struct counts {
	struct count	*v;		/* by pair id */
	size_t		 cap;
};

/* Room for pair id in c. 0, or -1 out of memory. */
static int
counts_reserve(struct counts *c, uint32_t id)
{
	size_t nc = c->cap ? c->cap * 2 : 1024;
	struct count *v;

	if (id < c->cap)
		return 0;
	while (nc <= id)
		nc *= 2;
	if ((v = realloc(c->v, nc * sizeof(*v))) == NULL)
		return -1;
	memset(v + c->cap, 0, (nc - c->cap) * sizeof(*v));
	c->v = v;
	c->cap = nc;
	return 0;
}

/* Rows through decisions: a first-layout file, or one rowids cannot index. */
static int
scan_view(struct rdb *d, const struct filter *f, struct intern *ids,
    struct counts *cnt, char *err, size_t errlen)
{
	const char *last_rule = NULL, *last_key = NULL;
	struct db_str rb = { 0 }, kb = { 0 };
	uint32_t id = 0;
	sqlite3_stmt *st;
	int rc, ret = -1;

	if ((st = db_select(d, f, "rule, key, allowed", "rule IS NOT NULL", err,
	    errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *rule = db_column_str(st, 0, &rb);
		const char *key = db_column_str(st, 1, &kb);

		if (last_rule == NULL || strcmp(rule, last_rule) != 0 ||
		    (key == NULL) != (last_key == NULL) ||
		    (key && strcmp(key, last_key) != 0)) {
			if ((id = intern_pair(ids, rule, key)) == RLG_INTERN_FAIL ||
			    counts_reserve(cnt, id) == -1)
				goto oom;
			intern_pair_get(ids, id, &last_rule, &last_key);
		}
		cnt->v[id].total++;
		cnt->v[id].denied += sqlite3_column_int(st, 2) == 0;
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

/* The state of one scan by ids, for count_row(). */
struct scan {
	const struct rowids	*x;
	struct intern		*ids;
	struct counts		*cnt;
	struct rowids_memo	 memo;
	int64_t			 last_rule, last_key;
	uint32_t		 id;
};

/*
 * One row (rule, key, outcome) of rowscan. A run of one (rule id, key id)
 * costs two integer compares a row.
 */
static int
count_row(void *arg, const int64_t *v, uint32_t nulls)
{
	struct scan *s = arg;
	int64_t rule = v[0], key = nulls & 2 ? -1 : v[1];
	const struct rowids_outcome *o;
	const struct rowids_rule *r;

	if (s->id == RLG_INTERN_FAIL || rule != s->last_rule || key != s->last_key) {
		/* The view's "rule IS NOT NULL": a rule row with a name. */
		if ((r = rowids_rule(s->x, rule)) == NULL || r->name == NULL)
			return 0;
		if ((s->id = rowids_pair(&s->memo, s->ids, s->x, rule, key)) ==
		    RLG_INTERN_FAIL || counts_reserve(s->cnt, s->id) == -1) {
			s->id = RLG_INTERN_FAIL;
			return 1;
		}
		s->last_rule = rule;
		s->last_key = key;
	}
	o = rowids_outcome(s->x, v[2]);
	s->cnt->v[s->id].total++;
	s->cnt->v[s->id].denied += o == NULL || o->allowed == 0;
	return 0;
}

/* A second-layout file: rlg_rows' integers, names by id (rowids.h). */
static int
scan_ids(struct rdb *d, const struct rowids *x, const struct filter *f,
    int jobs, struct intern *ids, struct counts *cnt, char *err,
    size_t errlen)
{
	struct scan s = { x, ids, cnt, { 0 }, -1, -1, RLG_INTERN_FAIL };
	int rc;

	rc = rowscan_run(d, x, f, "rule, key, outcome", 3, "1", jobs, count_row,
	    &s, err, errlen);
	if (rc == 1)
		snprintf(err, errlen, "out of memory");
	rowids_memo_free(&s.memo);
	return rc == 0 ? 0 : -1;
}

/* One database, read by ids when its layout allows. */
static int
scan_one(struct rdb *d, const struct filter *f, int jobs, struct intern *ids,
    struct counts *cnt, char *err, size_t errlen)
{
	struct rowids x;
	int rc;

	if (d->layout < 2)
		return scan_view(d, f, ids, cnt, err, errlen);
	if ((rc = rowids_load(d, &x, err, errlen)) == 0)
		rc = scan_ids(d, &x, f, jobs, ids, cnt, err, errlen);
	else if (rc == 1)
		rc = scan_view(d, f, ids, cnt, err, errlen);
	rowids_free(&x);
	return rc;
}

int
top_run(struct top *t, struct rdbs *dbs, const struct filter *f, size_t n,
    char *err, size_t errlen)
{
	struct intern ids = { 0 };
	struct counts counts = { NULL, 0 };
	struct count *cnt;
	int ret = -1;

	for (size_t i = 0; i < dbs->n; i++)
		if (scan_one(&dbs->v[i], f, dbs->jobs, &ids, &counts, err,
		    errlen) == -1)
			goto out;
	cnt = counts.v;
	t->keys = (int64_t)ids.n;
	for (size_t i = 0; i < ids.n; i++) {
		cnt[i].id = (uint32_t)i;
		t->keys_denied += cnt[i].denied > 0;
	}
	if (ids.n > 0)
		qsort_r(cnt, ids.n, sizeof(*cnt), cmp_count, &ids);
	if ((t->v = calloc(n < ids.n ? n : ids.n + 1, sizeof(*t->v))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < ids.n && t->n < n && cnt[i].denied > 0; i++) {
		const char *rule, *key;
		struct top_row *r = &t->v[t->n];

		intern_pair_get(&ids, cnt[i].id, &rule, &key);
		if ((r->rule = strdup(rule)) == NULL || (key && (r->key = strdup(key)) == NULL)) {
			free(r->rule);
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		r->denied = cnt[i].denied;
		r->total = cnt[i].total;
		t->n++;
	}
	ret = 0;
out:
	free(counts.v);
	intern_free(&ids);
	return ret;
}

void
top_free(struct top *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].rule);
		free(t->v[i].key);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}
