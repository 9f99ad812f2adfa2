/*
 * verify_load: the verifier's loader: reads the admitted decisions (and
 * sliding_window's denials, for its precision) of every database into one
 * array of compact records, or into temporary parts when they are many,
 * interns keys and parameter sets, and orders the records per key and
 * time. Not here: the checks of each algorithm's promise (verify.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "intern.h"
#include "verify_int.h"
#include "verify_local.h"

int64_t
verify_default_precision(int64_t window_ms)
{
	return conf_default_precision(window_ms);
}

/* The parameter set of a row, interned with its rule; NULL params: UINT32_MAX. */
static uint32_t
param_id(struct priv *pv, const char *rule, const char *alg, int64_t limit,
    int64_t window_ms, int64_t burst)
{
	char buf[1024];
	int len;
	uint32_t id;

	len = snprintf(buf, sizeof(buf), "%s%c%s%c%lld%c%lld%c%lld", rule, 0, alg, 0,
	    (long long)limit, 0, (long long)window_ms, 0, (long long)burst);
	if (len < 0 || (size_t)len >= sizeof(buf))
		len = sizeof(buf) - 1;
	if ((id = intern_id(&pv->params, buf, (size_t)len)) == RLG_INTERN_FAIL)
		return RLG_INTERN_FAIL;
	if (id == pv->npi) {
		struct pinfo *pi;
		const char *b = intern_bytes(&pv->params, id);

		if (pv->npi == pv->pcap) {
			size_t ncap = pv->pcap ? pv->pcap * 2 : 16;

			if ((pi = realloc(pv->pi, ncap * sizeof(*pi))) == NULL)
				return RLG_INTERN_FAIL;
			pv->pi = pi;
			pv->pcap = ncap;
		}
		pi = &pv->pi[pv->npi++];
		memset(pi, 0, sizeof(*pi));
		pi->rule = b;
		pi->algname = b + strlen(b) + 1;
		pi->alg = -1;
		for (int a = 0; a < RLG_ALGORITHM_COUNT; a++)
			if (strcmp(pi->algname, conf_algorithm_name(a)) == 0)
				pi->alg = a;
		pi->limit = limit;
		pi->window_ms = window_ms;
		pi->burst = burst;
		pi->last_kid = UINT32_MAX;
	}
	return id;
}

static int
grow_kcache(struct priv *pv, uint32_t kid)
{
	size_t ncap = pv->kcap ? pv->kcap : 1024;
	struct kcache *k;

	while (ncap <= kid)
		ncap *= 2;
	if ((k = realloc(pv->kcache, ncap * sizeof(*k))) == NULL)
		return -1;
	memset(k + pv->kcap, 0, (ncap - pv->kcap) * sizeof(*k));
	pv->kcache = k;
	pv->kcap = ncap;
	return 0;
}

static int
load_one(struct ctx *c, struct rdb *d, char *err, size_t errlen)
{
	struct priv *pv = c->p;
	struct filter f = *c->f;
	/*
	 * Denials come along only for sliding_window's precision (see
	 * infer_precision); everything else replays admissions.
	 */
	const char *last_rule = NULL, *last_key = NULL;
	static char lrule[256], lkey[1024];	/* local rows' names */
	struct kcache *kc;
	struct db_str rb = { 0 }, kb = { 0 };
	uint32_t kid = 0, pid = 0;
	sqlite3_stmt *st;
	int rc, ret = -1;

	/* The whole history: a window or a bucket may start before --since. */
	f.since_ms = INT64_MIN;
	f.until_ms = INT64_MAX;
	/* Admitted by on_error = allow (reason redis_error): counted by no
	 * limit. Counted here; replayed as admissions only with --strict. */
	if ((st = db_select(d, &f, "rule, key, algorithm, ts_ms, cost, "
	    "limit_value, window_ms, burst, delay_ms, allowed, retry_after_ms, "
	    "reason = 'redis_error', " VERIFY_LOCAL_PROCESS, "(reason = 'limit' "
	    "OR " VERIFY_LOCAL_REASON " OR (reason = 'redis_error' AND "
	    "allowed = 1)) AND rule IS NOT NULL", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *rule = db_column_str(st, 0, &rb);
		const char *key = db_column_str(st, 1, &kb);
		const char *proc = (const char *)sqlite3_column_text(st, 12);
		const char *alg = (const char *)sqlite3_column_text(st, 2);
		int64_t cost, limit, window, burst, delay;
		int allowed = sqlite3_column_int(st, 9) != 0;
		int unchecked = sqlite3_column_int(st, 11) != 0;
		int64_t ts = sqlite3_column_int64(st, 3);
		struct rec *x, rec;

		if (!allowed && (alg == NULL || strcmp(alg, "sliding_window") != 0))
			continue;
		if (alg == NULL || sqlite3_column_type(st, 5) == SQLITE_NULL ||
		    sqlite3_column_type(st, 6) == SQLITE_NULL) {
			c->v->skipped += allowed && (!unchecked || c->strict);
			continue;
		}
		cost = sqlite3_column_type(st, 4) == SQLITE_NULL ? 1 : sqlite3_column_int64(st, 4);
		limit = sqlite3_column_int64(st, 5);
		window = sqlite3_column_int64(st, 6);
		burst = sqlite3_column_type(st, 7) == SQLITE_NULL ? limit :
		    sqlite3_column_int64(st, 7);
		delay = sqlite3_column_type(st, 8) == SQLITE_NULL ? 0 :
		    sqlite3_column_int64(st, 8);
		if (cost < 0 || cost > UINT32_MAX || limit < 1 || window < 1 ||
		    burst < 0 || delay < 0 || limit > (1LL << 40) || burst > (1LL << 40) ||
		    window > (1LL << 40)) {
			c->v->skipped += allowed && (!unchecked || c->strict);
			continue;
		}
		/* on_error = local: per process, apart from Redis's. */
		if (proc != NULL && rule != NULL) {
			verify_local_names(rule, key, proc, lrule,
			    sizeof(lrule), lkey, sizeof(lkey));
			rule = lrule;
			key = lkey;
		}
		/* Rows of one key and one rule come in runs: skip the hashes then. */
		if (last_rule == NULL || strcmp(rule, last_rule) != 0 ||
		    (key == NULL) != (last_key == NULL) ||
		    (key != NULL && strcmp(key, last_key) != 0)) {
			if ((kid = intern_pair(&pv->keys, rule, key)) == RLG_INTERN_FAIL)
				goto oom;
			intern_pair_get(&pv->keys, kid, &last_rule, &last_key);
			if (kid >= pv->kcap && grow_kcache(pv, kid) == -1)
				goto oom;
		}
		/* A key keeps its parameters until a reload: cache them per key. */
		kc = &pv->kcache[kid];
		if (kc->alg == NULL || strcmp(alg, kc->alg) != 0 || limit != kc->limit ||
		    window != kc->window || burst != kc->burst) {
			if ((pid = param_id(pv, rule, alg, limit, window, burst)) ==
			    RLG_INTERN_FAIL)
				goto oom;
			*kc = (struct kcache){ pv->pi[pid].algname, limit, window, burst, pid };
		}
		pid = kc->pid;
		if (unchecked) {
			if (ts >= c->f->since_ms && ts < c->f->until_ms)
				pv->pi[pid].unchecked++;
			if (!c->strict)
				continue;
		}
		if (!allowed) {
			int64_t retry = sqlite3_column_int64(st, 10);

			if (retry > 0)
				pv->pi[pid].retry_gcd = conf_gcd(
				    pv->pi[pid].retry_gcd,
				    sqlite3_column_int64(st, 3) + retry);
			continue;
		}
		if (pv->seq >= UINT32_MAX) {
			snprintf(err, errlen, "more than %u admitted decisions: verify "
			    "fewer at once (-r RULE)", UINT32_MAX);
			goto out;
		}
		rec = (struct rec){ sqlite3_column_int64(st, 3), kid, pid,
		    (uint32_t)pv->seq++, (uint32_t)cost, delay };
		if (pv->nparts > 0) {
			if (fwrite(&rec, sizeof(rec), 1, pv->part[kid % pv->nparts]) != 1) {
				snprintf(err, errlen, "cannot write a temporary file: %s",
				    strerror(errno));
				goto out;
			}
			continue;
		}
		if (pv->n == pv->cap) {
			size_t ncap = pv->cap ? pv->cap * 2 : 65536;

			if ((x = realloc(pv->recs, ncap * sizeof(*x))) == NULL)
				goto oom;
			pv->recs = x;
			pv->cap = ncap;
		}
		pv->recs[pv->n++] = rec;
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
 * The block width of a sliding_window rule. Each denial's retry time is a
 * block boundary (ts_ms + retry_after_ms exactly, as blocks start on whole
 * ms), so the precision divides their gcd; gcd(that, window) is then the
 * precision or a multiple of it that still divides the window, and runs of
 * such coarser blocks are runs of true blocks: checking them never reports
 * a false violation. Without denials: the gateway's default.
 */
static void
infer_precision(struct pinfo *pi)
{
	if (pi->retry_gcd != 0) {
		pi->precision_ms = conf_gcd(pi->retry_gcd, pi->window_ms);
		pi->precision_from = "denials";
	} else {
		pi->precision_ms = verify_default_precision(pi->window_ms);
		pi->precision_from = "default";
	}
}

static int
cmp_rec_time(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static int
cmp_rec_key_time(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	if (a->kid != b->kid)
		return a->kid < b->kid ? -1 : 1;
	return cmp_rec_time(x, y);
}

/*
 * Groups the records by key (stable: load order), then orders each key by
 * time. A part of the keys is sorted whole: a count per key of every key
 * would cost each part the number of keys.
 */
int
verify_sort_records(struct priv *pv)
{
	size_t nk = pv->keys.n, *start;
	struct rec *out;

	if (pv->n == 0)
		return 0;
	if (pv->nparts > 0) {
		qsort(pv->recs, pv->n, sizeof(*pv->recs), cmp_rec_key_time);
		return 0;
	}
	if ((start = calloc(nk + 1, sizeof(*start))) == NULL)
		return -1;
	if ((out = malloc(pv->n * sizeof(*out))) == NULL) {
		free(start);
		return -1;
	}
	for (size_t i = 0; i < pv->n; i++)
		start[pv->recs[i].kid + 1]++;
	for (size_t k = 0; k < nk; k++)
		start[k + 1] += start[k];
	for (size_t i = 0; i < pv->n; i++)
		out[start[pv->recs[i].kid]++] = pv->recs[i];
	free(pv->recs);
	pv->recs = out;
	pv->cap = pv->n;
	free(start);
	for (size_t i = 0, j; i < pv->n; i = j) {
		int sorted = 1;

		for (j = i + 1; j < pv->n && pv->recs[j].kid == pv->recs[i].kid; j++)
			if (cmp_rec_time(&pv->recs[j - 1], &pv->recs[j]) > 0)
				sorted = 0;
		if (!sorted)
			qsort(pv->recs + i, j - i, sizeof(*pv->recs), cmp_rec_time);
	}
	return 0;
}

/* Reads part k's spilled records into memory (and closes its file). */
int
verify_load_part(struct priv *pv, size_t k, char *err, size_t errlen)
{
	FILE *f = pv->part[k];
	long end;

	pv->part[k] = NULL;
	pv->n = 0;
	if (fflush(f) == EOF || (end = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) == -1)
		goto fail;
	pv->n = (size_t)end / sizeof(struct rec);
	if (pv->n > pv->cap) {
		struct rec *x = realloc(pv->recs, pv->n * sizeof(*x));

		if (x == NULL) {
			fclose(f);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		pv->recs = x;
		pv->cap = pv->n;
	}
	if (pv->n > 0 && fread(pv->recs, sizeof(struct rec), pv->n, f) != pv->n)
		goto fail;
	fclose(f);
	return 0;
fail:
	snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
	fclose(f);
	return -1;
}

/*
 * Spills records to nparts temporary files when the databases hold more
 * rows than PART_BYTES of records (max(id) over-counts: it is an estimate).
 */
static int
plan_parts(struct priv *pv, struct rdbs *dbs, char *err, size_t errlen)
{
	uint64_t rows = 0;

	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_stmt *st = db_prepare(&dbs->v[i], "SELECT max(id) FROM decisions",
		    err, errlen);

		if (st == NULL)
			return -1;
		if (sqlite3_step(st) == SQLITE_ROW)
			rows += (uint64_t)sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (rows * sizeof(struct rec) <= PART_BYTES)
		return 0;
	pv->nparts = (size_t)((rows * sizeof(struct rec) + PART_BYTES - 1) / PART_BYTES);
	if (pv->nparts > MAX_PARTS)
		pv->nparts = MAX_PARTS;
	if ((pv->part = calloc(pv->nparts, sizeof(*pv->part))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < pv->nparts; k++)
		if ((pv->part[k] = tmpfile()) == NULL) {
			snprintf(err, errlen, "cannot create a temporary file: %s",
			    strerror(errno));
			return -1;
		}
	return 0;
}

int
verify_load(struct ctx *c, struct rdbs *dbs, int64_t precision_ms,
    char *err, size_t errlen)
{
	struct priv *pv = c->p;

	if (plan_parts(pv, dbs, err, errlen) == -1)
		return -1;
	for (size_t i = 0; i < dbs->n; i++)
		if (load_one(c, &dbs->v[i], err, errlen) == -1)
			return -1;
	for (size_t i = 0; i < pv->npi; i++) {
		if (pv->pi[i].alg != RLG_SLIDING_WINDOW)
			continue;
		if (precision_ms > 0) {
			pv->pi[i].precision_ms = precision_ms;
			pv->pi[i].precision_from = "--precision";
		} else
			infer_precision(&pv->pi[i]);
	}
	return 0;
}
