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
#include "rowids.h"
#include "rowscan.h"
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

/* One row as the verifier reads it, from either layout. */
struct lrow {
	const char	*rule, *key, *alg;
	const char	*proc;		/* a local row's process, else NULL */
	int64_t		 ts, cost, limit, window, burst, delay, retry;
	int		 allowed, unchecked;
	int		 has_cost, has_limit, has_window, has_burst, has_delay;
};

/*
 * Whether r is left out before its key is interned: a denial of any
 * algorithm but sliding_window, or parameters that are missing or out of
 * range (counted as skipped). Fills r's defaults otherwise.
 */
static int
row_skip(struct ctx *c, struct lrow *r)
{
	if (!r->allowed && (r->alg == NULL || strcmp(r->alg, "sliding_window") != 0))
		return 1;
	if (r->alg == NULL || !r->has_limit || !r->has_window) {
		c->v->skipped += r->allowed && (!r->unchecked || c->strict);
		return 1;
	}
	r->cost = r->has_cost ? r->cost : 1;
	r->burst = r->has_burst ? r->burst : r->limit;
	r->delay = r->has_delay ? r->delay : 0;
	if (r->cost < 0 || r->cost > UINT32_MAX || r->limit < 1 || r->window < 1 ||
	    r->burst < 0 || r->delay < 0 || r->limit > (1LL << 40) ||
	    r->burst > (1LL << 40) || r->window > (1LL << 40)) {
		c->v->skipped += r->allowed && (!r->unchecked || c->strict);
		return 1;
	}
	return 0;
}

/* Adds r, of key kid, to c->p. 0, or -1 with err set. */
static int
row_add(struct ctx *c, const struct lrow *r, uint32_t kid, char *err,
    size_t errlen)
{
	struct priv *pv = c->p;
	struct kcache *kc;
	struct rec rec;
	uint32_t pid;

	if (kid >= pv->kcap && grow_kcache(pv, kid) == -1)
		goto oom;
	/* A key keeps its parameters until a reload: cache them per key. */
	kc = &pv->kcache[kid];
	if (kc->alg == NULL || strcmp(r->alg, kc->alg) != 0 || r->limit != kc->limit ||
	    r->window != kc->window || r->burst != kc->burst) {
		if ((pid = param_id(pv, r->rule, r->alg, r->limit, r->window,
		    r->burst)) == RLG_INTERN_FAIL)
			goto oom;
		*kc = (struct kcache){ pv->pi[pid].algname, r->limit, r->window,
		    r->burst, pid };
	}
	pid = kc->pid;
	if (r->unchecked) {
		if (r->ts >= c->f->since_ms && r->ts < c->f->until_ms)
			pv->pi[pid].unchecked++;
		if (!c->strict)
			return 0;
	}
	if (!r->allowed) {
		if (r->retry > 0)
			pv->pi[pid].retry_gcd = conf_gcd(pv->pi[pid].retry_gcd,
			    r->ts + r->retry);
		return 0;
	}
	if (pv->seq >= UINT32_MAX) {
		snprintf(err, errlen, "more than %u admitted decisions: verify "
		    "fewer at once (-r RULE)", UINT32_MAX);
		return -1;
	}
	rec = (struct rec){ r->ts, kid, pid, (uint32_t)pv->seq++,
	    (uint32_t)r->cost, r->delay };
	if (pv->nparts > 0) {
		if (fwrite_unlocked(&rec, sizeof(rec), 1,
		    pv->part[kid % pv->nparts]) != 1) {
			snprintf(err, errlen, "cannot write a temporary file: %s",
			    strerror(errno));
			return -1;
		}
		return 0;
	}
	if (pv->n == pv->cap) {
		size_t ncap = pv->cap ? pv->cap * 2 : 65536;
		struct rec *x;

		if ((x = realloc(pv->recs, ncap * sizeof(*x))) == NULL)
			goto oom;
		pv->recs = x;
		pv->cap = ncap;
	}
	pv->recs[pv->n++] = rec;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* A local row's key id, under its per-process names. */
static uint32_t
local_kid(struct priv *pv, struct lrow *r)
{
	/* Static: the names live on in r past this call. */
	static char lrule[256], lkey[1024];

	verify_local_names(r->rule, r->key, r->proc, lrule, sizeof(lrule), lkey,
	    sizeof(lkey));
	r->rule = lrule;
	r->key = lkey;
	return intern_pair(&pv->keys, lrule, lkey);
}

/*
 * The rows verify reads, of the whole history: a window or a bucket may
 * start before --since. Denials come along only for sliding_window's
 * precision (see infer_precision); everything else replays admissions.
 * Admitted by on_error = allow (reason redis_error): counted by no limit;
 * counted here, replayed as admissions only with --strict.
 */
static void
load_filter(const struct ctx *c, struct filter *f)
{
	*f = *c->f;
	f->since_ms = INT64_MIN;
	f->until_ms = INT64_MAX;
}

/* Rows through decisions: a first-layout file, or one rowids cannot index. */
static int
load_view(struct ctx *c, struct rdb *d, char *err, size_t errlen)
{
	struct priv *pv = c->p;
	struct filter f;
	const char *last_rule = NULL, *last_key = NULL;
	struct db_str rb = { 0 }, kb = { 0 };
	uint32_t kid = 0;
	sqlite3_stmt *st;
	int rc, ret = -1;

	load_filter(c, &f);
	if ((st = db_select(d, &f, "rule, key, algorithm, ts_ms, cost, "
	    "limit_value, window_ms, burst, delay_ms, allowed, retry_after_ms, "
	    "reason = 'redis_error', " VERIFY_LOCAL_PROCESS, "(reason = 'limit' "
	    "OR " VERIFY_LOCAL_REASON " OR (reason = 'redis_error' AND "
	    "allowed = 1)) AND rule IS NOT NULL", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct lrow r = {
			.rule = db_column_str(st, 0, &rb),
			.key = db_column_str(st, 1, &kb),
			.alg = (const char *)sqlite3_column_text(st, 2),
			.proc = (const char *)sqlite3_column_text(st, 12),
			.ts = sqlite3_column_int64(st, 3),
			.cost = sqlite3_column_int64(st, 4),
			.limit = sqlite3_column_int64(st, 5),
			.window = sqlite3_column_int64(st, 6),
			.burst = sqlite3_column_int64(st, 7),
			.delay = sqlite3_column_int64(st, 8),
			.retry = sqlite3_column_int64(st, 10),
			.allowed = sqlite3_column_int(st, 9) != 0,
			.unchecked = sqlite3_column_int(st, 11) != 0,
			.has_cost = sqlite3_column_type(st, 4) != SQLITE_NULL,
			.has_limit = sqlite3_column_type(st, 5) != SQLITE_NULL,
			.has_window = sqlite3_column_type(st, 6) != SQLITE_NULL,
			.has_burst = sqlite3_column_type(st, 7) != SQLITE_NULL,
			.has_delay = sqlite3_column_type(st, 8) != SQLITE_NULL,
		};

		if (row_skip(c, &r))
			continue;
		/* on_error = local: per process, apart from Redis's. */
		if (r.proc != NULL && r.rule != NULL) {
			if ((kid = local_kid(pv, &r)) == RLG_INTERN_FAIL)
				goto oom;
			last_rule = NULL;
		/* Rows of one key and one rule come in runs: skip the hashes then. */
		} else if (last_rule == NULL || strcmp(r.rule, last_rule) != 0 ||
		    (r.key == NULL) != (last_key == NULL) ||
		    (r.key != NULL && strcmp(r.key, last_key) != 0)) {
			if ((kid = intern_pair(&pv->keys, r.rule, r.key)) == RLG_INTERN_FAIL)
				goto oom;
			intern_pair_get(&pv->keys, kid, &last_rule, &last_key);
		}
		if (row_add(c, &r, kid, err, errlen) == -1)
			goto out;
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

/* What verify does with an outcome id (load_filter's reasons). */
#define W_READ		1	/* limit, local, or admitted redis_error */
#define W_LOCAL		2	/* on_error = local */
#define W_UNCHECKED	4	/* redis_error */

/*
 * The W_ flags of each outcome id. Returns the array (the caller frees it),
 * or NULL out of memory.
 */
static unsigned char *
outcome_wanted(const struct rowids *x)
{
	unsigned char *w = calloc(x->noutcome + 1, 1);

	for (size_t i = 0; w != NULL && i < x->noutcome; i++) {
		const struct rowids_outcome *o = rowids_outcome(x, (int64_t)i);

		if (o == NULL)
			continue;
		if (strcmp(o->reason, "local") == 0)
			w[i] = W_READ | W_LOCAL;
		else if (strcmp(o->reason, "limit") == 0)
			w[i] = W_READ;
		else if (strcmp(o->reason, "redis_error") == 0)
			w[i] = W_UNCHECKED | (o->allowed == 1 ? W_READ : 0);
	}
	return w;
}

/*
 * The rows load_ids keeps, as a condition SQLite tests before a row leaves
 * the scan (a row costs most in being handed over): admissions of a wanted
 * outcome, and sliding_window's denials of one, as bit masks of ids. It
 * only narrows: load_ids tests every row it gets again. "1" when an id
 * passes a mask's 63 bits.
 */
static void
ids_where(const struct rowids *x, const unsigned char *wanted, char *buf,
    size_t len)
{
	uint64_t adm = 0, den = 0, sw = 0;

	snprintf(buf, len, "1");
	if (x->noutcome > 63 || x->nrule > 63)
		return;
	for (size_t i = 0; i < x->noutcome; i++) {
		const struct rowids_outcome *o = rowids_outcome(x, (int64_t)i);

		if (o == NULL || !(wanted[i] & W_READ))
			continue;
		if (o->allowed)
			adm |= 1ULL << i;
		else
			den |= 1ULL << i;
	}
	for (size_t i = 0; i < x->nrule; i++) {
		const struct rowids_rule *r = rowids_rule(x, (int64_t)i);

		if (r != NULL && r->algorithm != NULL &&
		    strcmp(r->algorithm, "sliding_window") == 0)
			sw |= 1ULL << i;
	}
	/* Parenthesized: the filter's clauses are ANDed after it. */
	snprintf(buf, len, "((%llu >> outcome) & 1 OR ((%llu >> outcome) & 1 "
	    "AND (%llu >> rule) & 1))", (unsigned long long)adm,
	    (unsigned long long)den, (unsigned long long)sw);
}

/*
 * A local row's process: its request_id's prefix, which the view builds
 * from two columns; asked of the view by id (local rows are few).
 */
static const char *
local_proc(sqlite3_stmt *pst, int64_t id)
{
	sqlite3_reset(pst);
	sqlite3_bind_int64(pst, 1, id);
	if (sqlite3_step(pst) != SQLITE_ROW)
		return NULL;
	return (const char *)sqlite3_column_text(pst, 0);
}

/* The state of one scan by ids, for load_row(). */
struct scan {
	struct ctx		*c;
	const struct rowids	*x;
	const unsigned char	*wanted;	/* outcome_wanted() */
	sqlite3_stmt		*pst;		/* local_proc()'s */
	struct rowids_memo	 memo;
	int64_t			 last_rule, last_key;
	uint32_t		 kid;
	char			*err;
	size_t			 errlen;
};

/* The columns load_row() takes, in rowscan's order. */
#define LOAD_COLS	"id, rule, key, outcome, ts_ms, cost, delay_ms, " \
			"retry_after_ms"
#define LOAD_NCOLS	8

/* Row v of LOAD_COLS with its rule ru and outcome o of flags w. */
static void
ids_row(const int64_t *v, uint32_t nulls, const struct rowids *x,
    const struct rowids_rule *ru, const struct rowids_outcome *o,
    unsigned char w, struct lrow *r)
{
	*r = (struct lrow){
		.rule = ru->name,
		.key = !(nulls & 1u << 2) && v[2] >= 0 ? rowids_text(x, v[2]) :
		    NULL,
		.alg = ru->algorithm,
		.ts = v[4],
		.cost = v[5],
		.limit = ru->limit_value,
		.window = ru->window_ms,
		.burst = ru->burst,
		.delay = v[6],
		.allowed = o->allowed != 0,
		.unchecked = (w & W_UNCHECKED) != 0,
		.has_cost = !(nulls & 1u << 5),
		.has_limit = ru->has_limit,
		.has_window = ru->has_window,
		.has_burst = ru->has_burst,
		.has_delay = !(nulls & 1u << 6),
	};
	/* The retry time only matters for a denial. */
	if (!r->allowed)
		r->retry = v[7];
}

/*
 * One row of rlg_rows (LOAD_COLS) from rowscan. A run of one (rule id,
 * key id) is interned once. Returns 1 (stop) with err set.
 */
static int
load_row(void *arg, const int64_t *v, uint32_t nulls)
{
	struct scan *s = arg;
	const struct rowids *x = s->x;
	int64_t oid = v[3], rule = v[1];
	const struct rowids_rule *ru;
	struct lrow r;

	if (oid < 0 || (size_t)oid >= x->noutcome ||
	    !(s->wanted[oid] & W_READ) || (ru = rowids_rule(x, rule)) == NULL ||
	    ru->name == NULL)
		return 0;
	ids_row(v, nulls, x, ru, rowids_outcome(x, oid), s->wanted[oid], &r);
	if (row_skip(s->c, &r))
		return 0;
	if ((s->wanted[oid] & W_LOCAL) && (r.proc = local_proc(s->pst,
	    v[0])) != NULL) {
		if ((s->kid = local_kid(s->c->p, &r)) == RLG_INTERN_FAIL)
			goto oom;
		s->last_rule = -1;
	} else {
		int64_t key = nulls & 1u << 2 ? -1 : v[2];

		if (s->kid == RLG_INTERN_FAIL || rule != s->last_rule ||
		    key != s->last_key) {
			if ((s->kid = rowids_pair(&s->memo, &s->c->p->keys, x, rule,
			    key)) == RLG_INTERN_FAIL)
				goto oom;
			s->last_rule = rule;
			s->last_key = key;
		}
	}
	return row_add(s->c, &r, s->kid, s->err, s->errlen) == -1;
oom:
	snprintf(s->err, s->errlen, "out of memory");
	return 1;
}

/*
 * A second-layout file: rlg_rows' integers, rules, outcomes and names by
 * id (rowids.h), each row through load_row().
 */
static int
load_ids(struct ctx *c, struct rdb *d, const struct rowids *x, int jobs,
    char *err, size_t errlen)
{
	struct scan s = { c, x, NULL, NULL, { 0 }, -1, -1, RLG_INTERN_FAIL,
	    err, errlen };
	unsigned char *wanted;
	struct filter f;
	char where[256];
	int ret = -1;

	load_filter(c, &f);
	if ((wanted = outcome_wanted(x)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	s.wanted = wanted;
	ids_where(x, wanted, where, sizeof(where));
	if ((s.pst = db_prepare(d, "SELECT " VERIFY_LOCAL_PROCESS " FROM "
	    "decisions WHERE id = ?1", err, errlen)) == NULL)
		goto out;
	/* 1: load_row stopped with err set. */
	ret = rowscan_run(d, x, &f, LOAD_COLS, LOAD_NCOLS, where, jobs, load_row,
	    &s, err, errlen) == 0 ? 0 : -1;
out:
	sqlite3_finalize(s.pst);
	rowids_memo_free(&s.memo);
	free(wanted);
	return ret;
}

/* One database, read by ids when its layout allows. */
static int
load_one(struct ctx *c, struct rdb *d, int jobs, char *err, size_t errlen)
{
	struct rowids x;
	int rc;

	if (d->layout < 2)
		return load_view(c, d, err, errlen);
	if ((rc = rowids_load(d, &x, err, errlen)) == 0)
		rc = load_ids(c, d, &x, jobs, err, errlen);
	else if (rc == 1)
		rc = load_view(c, d, err, errlen);
	rowids_free(&x);
	return rc;
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

/*
 * Groups the records by key (stable: load order, which is seq order), then
 * orders each key by time. Records come mostly in time order already, so a
 * key's run is sorted only when it is not. A part holds the keys of one
 * residue mod nparts: kid / nparts numbers them densely, and the count per
 * key costs each part its own keys only.
 */
int
verify_sort_records(struct priv *pv)
{
	size_t step = pv->nparts > 0 ? pv->nparts : 1;
	size_t nb = pv->keys.n / step + 1, *start, cap;
	struct rec *out;

	if (pv->n == 0)
		return 0;
	if ((start = calloc(nb + 1, sizeof(*start))) == NULL)
		return -1;
	/* The parts reuse one scratch array: no new pages to fault in. */
	if (pv->scap < pv->n) {
		free(pv->scratch);
		pv->scap = 0;
		if ((pv->scratch = malloc(pv->n * sizeof(*out))) == NULL) {
			free(start);
			return -1;
		}
		pv->scap = pv->n;
	}
	out = pv->scratch;
	for (size_t i = 0; i < pv->n; i++)
		start[pv->recs[i].kid / step + 1]++;
	for (size_t k = 0; k < nb; k++)
		start[k + 1] += start[k];
	for (size_t i = 0; i < pv->n; i++)
		out[start[pv->recs[i].kid / step]++] = pv->recs[i];
	pv->scratch = pv->recs;
	pv->recs = out;
	cap = pv->scap;
	pv->scap = pv->cap;
	pv->cap = cap;
	free(start);
	for (size_t i = 0, j; i < pv->n; i = j) {
		int sorted = 1;

		for (j = i + 1; j < pv->n && pv->recs[j].kid == pv->recs[i].kid; j++)
			if (sorted && cmp_rec_time(&pv->recs[j - 1], &pv->recs[j]) > 0)
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
	size_t bufsz;

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
	/* The buffers take no more than the records in memory do, and at
	 * most 256 KB each: one write(2) per 256 KB rather than per 4 KB. */
	bufsz = PART_BYTES / pv->nparts;
	bufsz = bufsz > (256u << 10) ? 256u << 10 : bufsz;
	if ((pv->part = calloc(pv->nparts, sizeof(*pv->part))) == NULL ||
	    (pv->partbuf = malloc(pv->nparts * bufsz)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < pv->nparts; k++) {
		if ((pv->part[k] = tmpfile()) == NULL) {
			snprintf(err, errlen, "cannot create a temporary file: %s",
			    strerror(errno));
			return -1;
		}
		setvbuf(pv->part[k], pv->partbuf + k * bufsz, _IOFBF, bufsz);
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
		if (load_one(c, &dbs->v[i], dbs->jobs, err, errlen) == -1)
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
