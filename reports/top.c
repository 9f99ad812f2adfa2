/*
 * top: denials per (rule, key), counted in one pass over every database and
 * sorted. Rows that no rule matched have no key and are left out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
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

int
top_run(struct top *t, struct rdbs *dbs, const struct filter *f, size_t n,
    char *err, size_t errlen)
{
	struct intern ids = { 0 };
	struct count *cnt = NULL;
	struct db_str rb = { 0 }, kb = { 0 };
	size_t ccap = 0;
	int ret = -1;

	for (size_t i = 0; i < dbs->n; i++) {
		const char *last_rule = NULL, *last_key = NULL;
		uint32_t id = 0;
		sqlite3_stmt *st;
		int rc;

		if ((st = db_select(&dbs->v[i], f, "rule, key, allowed",
		    "rule IS NOT NULL", err, errlen)) == NULL)
			goto out;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *rule = db_column_str(st, 0, &rb);
			const char *key = db_column_str(st, 1, &kb);

			if (last_rule == NULL || strcmp(rule, last_rule) != 0 ||
			    (key == NULL) != (last_key == NULL) ||
			    (key && strcmp(key, last_key) != 0)) {
				if ((id = intern_pair(&ids, rule, key)) == RLG_INTERN_FAIL)
					break;
				intern_pair_get(&ids, id, &last_rule, &last_key);
				if (id >= ccap) {
					size_t nc = ccap ? ccap * 2 : 1024;
					struct count *c2 = realloc(cnt, nc * sizeof(*c2));

					if (c2 == NULL) {
						id = RLG_INTERN_FAIL;
						break;
					}
					memset(c2 + ccap, 0, (nc - ccap) * sizeof(*c2));
					cnt = c2;
					ccap = nc;
				}
			}
			cnt[id].total++;
			cnt[id].denied += sqlite3_column_int(st, 2) == 0;
		}
		if (id == RLG_INTERN_FAIL) {
			sqlite3_finalize(st);
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		if (rc != SQLITE_DONE) {
			snprintf(err, errlen, "%s: cannot read: %s", dbs->v[i].path,
			    sqlite3_errmsg(dbs->v[i].db));
			sqlite3_finalize(st);
			goto out;
		}
		sqlite3_finalize(st);
	}
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
	free(cnt);
	free(rb.buf);
	free(kb.buf);
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
