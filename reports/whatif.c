/*
 * whatif: the replay of --what-if (whatif.h). Each recorded request is
 * decided again by the C twin (fcgi/algo.h), check then commit, all or
 * nothing as lua/decide.lua does, on a table of per-key states that drops
 * a key once algo_idle_us() says it is as good as gone. Counts go to the
 * rules' windows and to the keys whose fate changed. Not here: reading
 * rows (whatif_read.c), NEW.ini (whatif_conf.c), formats (whatif_out.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "intern.h"
#include "rule.h"
#include "whatif.h"
#include "whatif_int.h"
#include "whatif_read.h"
#include "window.h"

#define NONE		UINT32_MAX
#define ENTRIES_MIN	8	/* sliding_* entries a new key starts with */

/* A key in flight: its state and its counts since it came. */
struct wkey {
	char		*key;
	const char	*seen;		/* the text it was last found by */
	uint64_t	 hash;
	uint32_t	 rule;		/* result rule */
	uint32_t	 hnext;		/* bucket chain: index + 1 */
	uint32_t	 prev, next;	/* by last use: index + 1 */
	long long	 idle_us;	/* from then on it is as good as gone */
	struct algo_state st;
	int64_t		 rec_denied, wi_denied, nd, na;
};

/* algo_params of a rule's last (parameter set, cost). */
struct pcache {
	uint32_t	 pid;
	long long	 cost;
	int		 ok;
	struct algo_params p;
};

/* Per result rule, what the replay needs beside the counts. */
struct rrule {
	const struct rule *ru;		/* NEW.ini's, or NULL */
	int		 conf_i;	/* its index in NEW.ini, or -1 */
	int		 dry;		/* recorded: a dry_run row was seen */
	struct pcache	 pc;
	uint32_t	 last_pid;	/* the recorded parameters, latest */
};

/* One rule's attempt in a request. */
struct attempt {
	uint32_t	 rule;
	const struct wrow *row;		/* NULL: a NEW.ini rule the record lacks */
	const char	*key;
	int		 stable;	/* key is the row's text (key_get()) */
	long long	 cost;
	const struct algo_params *p;	/* &pv, or NULL: the parameters refuse it */
	struct algo_params pv;		/* a copy: c->rr moves as rules come */
	int		 dry;
	uint32_t	 k;		/* key entry */
	struct algo_decision d;
	int		 allowed;
};

struct changed {
	int64_t		 rec_denied, wi_denied, nd, na;
	uint32_t	 rule;		/* result rule */
};

struct ctx {
	struct whatif		*w;
	const struct whatif_conf *wc;
	const struct filter	*f;
	struct wreader		*rd;
	struct rrule		*rr;		/* by result rule */
	uint32_t		*g2r;		/* reader rule id -> result rule */
	size_t			 ng2r;
	uint32_t		*c2r;		/* NEW.ini rule -> result rule */
	/* NEW.ini's rules that may apply where no row names them: match
	 * and key of the kept fields, a fixed cost (attempts_new()) */
	uint32_t		*fresh;
	size_t			 nfresh;
	/* keys in flight */
	struct wkey		*keys;
	size_t			 nkeys, kcap, live;
	uint32_t		 free_k;	/* index + 1 */
	uint32_t		*buckets;	/* index + 1 */
	size_t			 bcap;
	uint32_t		 lru_head, lru_tail;
	/* keys whose fate changed, by (rule, key) */
	struct intern		 cid;
	struct changed		*cv;
	size_t			 ccap;
	struct request		 req;
	int			 fields;	/* NEW.ini needs req's fields */
	int			 req_admitted;	/* as recorded */
	unsigned char		 seen[RLG_MAX_RULES];
	struct attempt		 at[RLG_MAX_MATCHES + RLG_MAX_RULES];
	char			 kbuf[RLG_MAX_MATCHES + RLG_MAX_RULES][RLG_MAX_KEY];
};

static int
oom(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
	return -1;
}

static uint32_t
add_rule(struct ctx *c, const char *name, int conf_i)
{
	struct whatif *w = c->w;
	struct whatif_rule *r;
	struct rrule *rr;

	if ((r = realloc(w->rules, (w->nrules + 1) * sizeof(*r))) == NULL)
		return NONE;
	w->rules = r;
	if ((rr = realloc(c->rr, (w->nrules + 1) * sizeof(*rr))) == NULL)
		return NONE;
	c->rr = rr;
	r = &w->rules[w->nrules];
	rr = &c->rr[w->nrules];
	memset(r, 0, sizeof(*r));
	memset(rr, 0, sizeof(*rr));
	r->recorded = (struct params){ NULL, -1, -1, -1 };
	r->what_if = r->recorded;
	rr->conf_i = conf_i;
	rr->pc.pid = NONE;
	rr->last_pid = NONE;
	if ((r->rule = strdup(name)) == NULL)
		return NONE;
	if (conf_i >= 0) {
		const struct rule *ru = &c->wc->c->rules[conf_i];

		rr->ru = ru;
		r->in_conf = 1;
		r->what_if = (struct params){ (char *)(uintptr_t)
		    conf_algorithm_name(ru->algorithm), ru->limit, ru->window_ms,
		    conf_algorithm_has_burst(ru->algorithm) ?
		    conf_capacity(ru, ru->limit) : -1 };
		r->precision_ms = ru->algorithm == RLG_SLIDING_WINDOW ?
		    ru->precision_ms : 0;
		c->c2r[conf_i] = (uint32_t)w->nrules;
	}
	return (uint32_t)w->nrules++;
}

/* The result rule of the reader's rule gid, made on first sight. */
static uint32_t
rule_of(struct ctx *c, uint32_t gid)
{
	const char *name;
	int conf_i = -1;
	uint32_t r;

	if (gid < c->ng2r && c->g2r[gid] != NONE)
		return c->g2r[gid];
	if (gid >= c->ng2r) {
		size_t nc = gid + 64;
		uint32_t *v = realloc(c->g2r, nc * sizeof(*v));

		if (v == NULL)
			return NONE;
		for (size_t i = c->ng2r; i < nc; i++)
			v[i] = NONE;
		c->g2r = v;
		c->ng2r = nc;
	}
	name = whatif_rule_name(c->rd, gid);
	for (size_t i = 0; i < c->wc->c->nrules; i++)
		if (strcmp(c->wc->c->rules[i].name, name) == 0)
			conf_i = (int)i;
	if (conf_i >= 0 && c->c2r[conf_i] != NONE)
		r = c->c2r[conf_i];
	else if ((r = add_rule(c, name, conf_i)) == NONE)
		return NONE;
	c->w->rules[r].in_audit = 1;
	c->g2r[gid] = r;
	return r;
}

/* The twin's parameters of an attempt, cached per rule. NULL when they
 * refuse it (as the Lua would: an error, not a decision). */
static const struct algo_params *
params_for(struct ctx *c, uint32_t r, const struct wparams *wp, uint32_t pid,
    long long cost)
{
	struct rrule *rr = &c->rr[r];
	struct pcache *pc = &rr->pc;
	const struct rule *ru = rr->ru;
	int alg = -1;

	if (pc->pid == pid && pc->cost == cost)
		return pc->ok ? &pc->p : NULL;
	pc->pid = pid;
	pc->cost = cost;
	if (ru != NULL) {
		pc->ok = algo_params(&pc->p, ru->algorithm, cost, ru->limit,
		    ru->window_ms, ru->burst > 0 ? ru->burst : RLG_PARAM_UNSET,
		    ru->precision_ms > 0 ? ru->precision_ms : RLG_PARAM_UNSET,
		    NULL, 0) == 0;
		return pc->ok ? &pc->p : NULL;
	}
	for (int a = 0; wp->algorithm != NULL && a < RLG_ALGORITHM_COUNT; a++)
		if (strcmp(wp->algorithm, conf_algorithm_name(a)) == 0)
			alg = a;
	pc->ok = alg >= 0 && wp->limit > 0 && wp->window_ms > 0 &&
	    algo_params(&pc->p, alg, cost, wp->limit, wp->window_ms,
	    conf_algorithm_has_burst(alg) && wp->burst > 0 ? wp->burst :
	    RLG_PARAM_UNSET, alg == RLG_SLIDING_WINDOW ?
	    conf_default_precision(wp->window_ms) : RLG_PARAM_UNSET, NULL,
	    0) == 0;
	return pc->ok ? &pc->p : NULL;
}

/* ---- keys in flight ---------------------------------------------------- */

static uint64_t
key_hash(uint32_t rule, const char *key)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ rule;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return h ^ (h >> 31);
}

static void
lru_unlink(struct ctx *c, uint32_t i)
{
	struct wkey *k = &c->keys[i];

	if (k->prev)
		c->keys[k->prev - 1].next = k->next;
	else
		c->lru_head = k->next;
	if (k->next)
		c->keys[k->next - 1].prev = k->prev;
	else
		c->lru_tail = k->prev;
	k->prev = k->next = 0;
}

static void
lru_append(struct ctx *c, uint32_t i)
{
	struct wkey *k = &c->keys[i];

	k->prev = c->lru_tail;
	k->next = 0;
	if (c->lru_tail)
		c->keys[c->lru_tail - 1].next = i + 1;
	else
		c->lru_head = i + 1;
	c->lru_tail = i + 1;
}

static int
buckets_grow(struct ctx *c)
{
	size_t nc = c->bcap ? c->bcap * 2 : 1024;
	uint32_t *b = calloc(nc, sizeof(*b));

	if (b == NULL)
		return -1;
	free(c->buckets);
	c->buckets = b;
	c->bcap = nc;
	for (size_t i = 0; i < c->nkeys; i++) {
		struct wkey *k = &c->keys[i];

		if (k->key == NULL)
			continue;
		k->hnext = b[k->hash & (nc - 1)];
		b[k->hash & (nc - 1)] = (uint32_t)i + 1;
	}
	return 0;
}

/* Folds a key's counts into the changed keys: those with a denial. */
static int
key_fold(struct ctx *c, struct wkey *k)
{
	uint32_t id;
	struct changed *v;

	if (k->rec_denied == 0 && k->wi_denied == 0 && k->nd == 0 && k->na == 0)
		return 0;
	if ((id = intern_pair(&c->cid, c->w->rules[k->rule].rule, k->key)) ==
	    RLG_INTERN_FAIL)
		return -1;
	if (id >= c->ccap) {
		size_t nc = c->ccap ? c->ccap * 2 : 256;

		while (nc <= id)
			nc *= 2;
		if ((v = realloc(c->cv, nc * sizeof(*v))) == NULL)
			return -1;
		memset(v + c->ccap, 0, (nc - c->ccap) * sizeof(*v));
		c->cv = v;
		c->ccap = nc;
	}
	v = &c->cv[id];
	v->rule = k->rule;
	v->rec_denied += k->rec_denied;
	v->wi_denied += k->wi_denied;
	v->nd += k->nd;
	v->na += k->na;
	return 0;
}

/* Drops key i: its counts folded, its memory freed. */
static int
key_drop(struct ctx *c, uint32_t i)
{
	struct wkey *k = &c->keys[i];
	uint32_t *p = &c->buckets[k->hash & (c->bcap - 1)];

	if (key_fold(c, k) == -1)
		return -1;
	while (*p != i + 1)
		p = &c->keys[*p - 1].hnext;
	*p = k->hnext;
	lru_unlink(c, i);
	free(k->key);
	free(k->st.e);
	memset(k, 0, sizeof(*k));
	k->hnext = c->free_k;
	c->free_k = i + 1;
	c->live--;
	return 0;
}

/* Drops the keys idle at now_us, the least recently used first. */
static int
keys_expire(struct ctx *c, long long now_us)
{
	while (c->lru_head && c->keys[c->lru_head - 1].idle_us <= now_us)
		if (key_drop(c, c->lru_head - 1) == -1)
			return -1;
	return 0;
}

/* The entry of (rule, key), made when new; NONE out of memory. stable:
 * key is a file's text, whose pointer says which key it is. */
static uint32_t
key_get(struct ctx *c, uint32_t rule, const char *key, int stable)
{
	uint64_t h = key_hash(rule, key);
	uint32_t i;
	struct wkey *k;

	if (c->bcap > 0)
		for (i = c->buckets[h & (c->bcap - 1)]; i; i = c->keys[i - 1].hnext) {
			k = &c->keys[i - 1];
			/* A file's texts stay put: the same pointer is the
			 * same key, no compare. */
			if (k->hash == h && k->rule == rule && ((stable &&
			    k->seen == key) || strcmp(k->key, key) == 0)) {
				k->seen = stable ? key : NULL;
				lru_unlink(c, i - 1);
				lru_append(c, i - 1);
				return i - 1;
			}
		}
	if ((c->live + 1) * 2 > c->bcap && buckets_grow(c) == -1)
		return NONE;
	if (c->free_k) {
		i = c->free_k - 1;
		c->free_k = c->keys[i].hnext;
	} else {
		if (c->nkeys == c->kcap) {
			size_t nc = c->kcap ? c->kcap * 2 : 1024;

			if ((k = realloc(c->keys, nc * sizeof(*k))) == NULL)
				return NONE;
			c->keys = k;
			c->kcap = nc;
		}
		i = (uint32_t)c->nkeys++;
	}
	k = &c->keys[i];
	memset(k, 0, sizeof(*k));
	if ((k->key = strdup(key)) == NULL) {
		k->hnext = c->free_k;
		c->free_k = i + 1;
		return NONE;
	}
	k->hash = h;
	k->rule = rule;
	k->seen = stable ? key : NULL;
	k->idle_us = LLONG_MIN;
	algo_state_init(&k->st, NULL, 0);
	k->hnext = c->buckets[h & (c->bcap - 1)];
	c->buckets[h & (c->bcap - 1)] = i + 1;
	lru_append(c, i);
	if ((int64_t)++c->live > c->w->keys_peak)
		c->w->keys_peak = (int64_t)c->live;
	return i;
}

/* Room for one more entry in a sliding_* state: exact decisions. */
static int
key_room(struct wkey *k, const struct algo_params *p)
{
	struct algo_entry *e, *old = k->st.e;
	size_t nc;

	/* Only the sliding_* algorithms keep entries (algo_entries()). */
	if ((p->alg != RLG_SLIDING_LOG && p->alg != RLG_SLIDING_WINDOW) ||
	    (k->st.cap > 0 && !algo_state_full(&k->st)))
		return 0;
	nc = k->st.cap ? k->st.cap * 2 : ENTRIES_MIN;
	if ((e = calloc(nc, sizeof(*e))) == NULL)
		return -1;
	if (k->st.cap == 0)
		algo_state_init(&k->st, e, nc);
	else
		algo_state_grow(&k->st, e, nc);
	free(old);
	return 0;
}

/* ---- counting ---------------------------------------------------------- */

static struct whatif_win *
win_at(struct whatif_rule *r, int64_t start)
{
	size_t i;

	if (r->nwins > 0 && r->wins[r->nwins - 1].start_ms == start)
		return &r->wins[r->nwins - 1];
	for (i = r->nwins; i > 0 && r->wins[i - 1].start_ms > start; i--)
		;
	if (i > 0 && r->wins[i - 1].start_ms == start)
		return &r->wins[i - 1];
	if (r->nwins == r->wcap) {
		size_t nc = r->wcap ? r->wcap * 2 : 64;
		struct whatif_win *v = realloc(r->wins, nc * sizeof(*v));

		if (v == NULL)
			return NULL;
		r->wins = v;
		r->wcap = nc;
	}
	memmove(&r->wins[i + 1], &r->wins[i], (r->nwins - i) * sizeof(*r->wins));
	memset(&r->wins[i], 0, sizeof(*r->wins));
	r->wins[i].start_ms = start;
	r->nwins++;
	return &r->wins[i];
}

static int
undecided(const struct wrow *row)
{
	return row->reason == WR_REDIS_ERROR || row->reason == WR_LOCAL ||
	    row->reason == WR_LOCAL_CACHE || row->reason == WR_OTHER;
}

/*
 * Counts one rule's outcome in a request: row (recorded; NULL for none)
 * and the what-if's (wi: 1 admitted, 0 denied, -1 not applied), with key
 * entry k (NONE: none) and its key.
 */
static int
tally(struct ctx *c, uint32_t r, const struct wrow *row, int64_t ts, int wi,
    uint32_t k, const char *key)
{
	struct whatif *w = c->w;
	struct whatif_rule *res = &w->rules[r];
	const struct filter *f = c->f;
	struct whatif_win *win;

	if (ts < f->since_ms || ts >= f->until_ms ||
	    (f->rule != NULL && strcmp(f->rule, res->rule) != 0) ||
	    (f->key != NULL && (key == NULL || strcmp(f->key, key) != 0)))
		return 0;
	if ((win = win_at(res, window_start(ts, w->width_ms))) == NULL)
		return -1;
	if (w->rows == 0 || ts < w->first_ms)
		w->first_ms = ts;
	if (w->rows == 0 || ts > w->last_ms)
		w->last_ms = ts;
	w->rows++;
	if (row != NULL) {
		win->rec_allowed += row->allowed;
		win->rec_denied += !row->allowed;
		res->rec_allowed += row->allowed;
		res->rec_denied += !row->allowed;
	}
	if (wi >= 0) {
		win->wi_allowed += wi;
		win->wi_denied += !wi;
		res->wi_allowed += wi;
		res->wi_denied += !wi;
	}
	if (row != NULL && wi >= 0 && row->allowed != wi) {
		res->differ++;
		w->differ++;
		w->differ_undecided += undecided(row);
	}
	if (k != NONE) {
		struct wkey *e = &c->keys[k];

		e->rec_denied += row != NULL && !row->allowed;
		e->wi_denied += wi == 0;
		/* A rule the record lacks: the request's recorded fate. */
		int rec = row != NULL ? row->allowed : c->req_admitted;

		e->nd += rec && wi == 0;
		e->na += !rec && wi == 1;
	}
	return 0;
}

/* ---- one request ------------------------------------------------------- */

/* The request's fields the audit keeps, for NEW.ini's matches and keys. */
static void
request_fields(struct ctx *c, const struct wrow *row)
{
	const char *m = whatif_text(c->rd, row->src, row->method);
	const char *p = whatif_text(c->rd, row->src, row->path);
	const char *ip = whatif_text(c->rd, row->src, row->ip);

	c->req.method = m ? m : "GET";
	snprintf(c->req.path, sizeof(c->req.path), "%s", p ? p : "");
	snprintf(c->req.ip, sizeof(c->req.ip), "%s", ip ? ip : "");
	c->req.host[0] = '\0';
}

static void
attempt_params(struct attempt *a, const struct algo_params *p)
{
	a->p = NULL;
	if (p != NULL) {
		a->pv = *p;
		a->p = &a->pv;
	}
}

/*
 * The attempt of recorded row for its rule under NEW.ini, into a: 1, 0
 * when NEW.ini's rule does not apply to the request, -1 when the row
 * cannot be replayed (counted in skipped).
 */
static int
attempt_of_row(struct ctx *c, const struct wrow *row, uint32_t r,
    struct attempt *a, char *kbuf)
{
	const struct rrule *rr = &c->rr[r];
	const struct rule *ru = rr->ru;
	const char *key = whatif_text(c->rd, row->src, row->key);
	long long cost = row->cost >= 0 ? row->cost : 1;

	/* Fields set below on every path that returns 1; decide() sets the
	 * rest (k, d, allowed). */
	a->rule = r;
	a->row = row;
	if (ru == NULL) {
		if (key == NULL)
			return -1;
		a->key = key;
		a->stable = 1;
		a->cost = cost;
		a->dry = rr->dry;
		attempt_params(a, params_for(c, r, whatif_params(c->rd, row),
		    row->params, cost));
		return whatif_params(c->rd, row)->algorithm == NULL ? -1 : 1;
	}
	c->seen[rr->conf_i] = 1;
	if (c->wc->match_kept[rr->conf_i] && !rule_fits(ru, &c->req))
		return 0;
	a->stable = 1;
	if (c->wc->key_kept[rr->conf_i]) {
		if (rule_expand(&ru->key, ru, &c->req, kbuf, RLG_MAX_KEY) < 0)
			return 0;
		key = kbuf;
		a->stable = 0;
	}
	if (key == NULL)
		return -1;
	a->key = key;
	a->cost = ru->cost_tmpl.nparts == 0 ? ru->cost : cost;
	a->dry = ru->dry_run || c->wc->c->dry_run;
	attempt_params(a, params_for(c, r, NULL, 0, a->cost));
	return 1;
}

/* NEW.ini's rules that no row of the request names, where the record
 * tells whether and how they apply; appended to c->at from *np on. A rule
 * of the record no row has named yet is made here. 0, or -1 out of
 * memory. */
static int
attempts_new(struct ctx *c, size_t *np)
{
	const struct conf *cf = c->wc->c;
	size_t n = *np;

	for (size_t j = 0; j < c->nfresh && n < sizeof(c->at) / sizeof(c->at[0]); j++) {
		uint32_t i = c->fresh[j];
		const struct rule *ru = &cf->rules[i];
		struct attempt *a = &c->at[n];

		if (c->seen[i] || !rule_fits(ru, &c->req) ||
		    rule_expand(&ru->key, ru, &c->req, c->kbuf[n], RLG_MAX_KEY) < 0)
			continue;
		if (c->c2r[i] == NONE && add_rule(c, ru->name, (int)i) == NONE)
			return -1;
		memset(a, 0, sizeof(*a));
		a->rule = c->c2r[i];
		a->key = c->kbuf[n];
		a->cost = ru->cost;
		a->dry = ru->dry_run || cf->dry_run;
		attempt_params(a, params_for(c, a->rule, NULL, 0, a->cost));
		n++;
	}
	*np = n;
	return 0;
}

/* Decides the attempts at[0..n) all or nothing, as lua/decide.lua. */
static int
decide(struct ctx *c, size_t n, int64_t ts)
{
	long long now_us = (long long)ts * 1000;
	int admitted = 1;

	for (size_t i = 0; i < n; i++) {
		struct attempt *a = &c->at[i];
		long long t = a->row ? (long long)a->row->ts_ms * 1000 : now_us;

		if ((a->k = key_get(c, a->rule, a->key, a->stable)) == NONE)
			return -1;
		if (a->p == NULL) {
			c->w->bad++;
			a->allowed = 0;
		} else {
			if (key_room(&c->keys[a->k], a->p) == -1)
				return -1;
			algo_check(a->p, &c->keys[a->k].st, t, &a->d);
			a->allowed = a->d.allowed;
		}
		if (!a->allowed && !a->dry)
			admitted = 0;
	}
	for (size_t i = 0; i < n; i++) {
		struct attempt *a = &c->at[i];
		struct wkey *k = &c->keys[a->k];
		long long t = a->row ? (long long)a->row->ts_ms * 1000 : now_us;

		a->allowed = admitted && a->allowed;
		if (!a->allowed)
			continue;
		algo_commit(a->p, &k->st, t, &a->d);
		k->idle_us = algo_idle_us(a->p, &k->st);
	}
	return 0;
}

/* Replays one request: its rows rows[0..n). */
static int
replay(struct ctx *c, const struct wrow *const *rows, size_t n)
{
	struct whatif *w = c->w;
	size_t na = 0;
	int64_t ts = rows[0]->ts_ms;

	/* A bad request (400) was never decided: recorded only. */
	for (size_t i = 0; i < n; i++)
		if (rows[i]->reason == WR_BAD_REQUEST) {
			for (size_t k = 0; k < n; k++) {
				uint32_t r = rule_of(c, rows[k]->rule);

				if (r == NONE || tally(c, r, rows[k], rows[k]->ts_ms,
				    -1, NONE, whatif_text(c->rd, rows[k]->src,
				    rows[k]->key)) == -1)
					return -1;
			}
			w->skipped += (int64_t)n;
			return 0;
		}
	if (c->wc->c->nrules > 0)
		memset(c->seen, 0, c->wc->c->nrules);
	if (c->fields)
		request_fields(c, rows[0]);
	c->req_admitted = 1;
	for (size_t i = 0; i < n; i++)
		if (!rows[i]->allowed && rows[i]->reason != WR_DRY_RUN)
			c->req_admitted = 0;
	for (size_t i = 0; i < n; i++) {
		const struct wrow *row = rows[i];
		uint32_t r = rule_of(c, row->rule);
		int rc;

		if (r == NONE)
			return -1;
		if (row->reason == WR_DRY_RUN)
			c->rr[r].dry = 1;
		if (row->reason != WR_BAD_REQUEST && row->params != NONE)
			c->rr[r].last_pid = row->params;
		if (row->reason == WR_UNLIMITED) {
			/* An override in Redis exempts the key: it stays. */
			if (tally(c, r, row, row->ts_ms, 1, NONE, NULL) == -1)
				return -1;
			continue;
		}
		rc = attempt_of_row(c, row, r, &c->at[na], c->kbuf[na]);
		w->skipped += rc == -1;
		/* Not replayed: counted as recorded only. */
		if (rc <= 0 && tally(c, r, row, row->ts_ms, -1, NONE,
		    whatif_text(c->rd, row->src, row->key)) == -1)
			return -1;
		if (rc == 1) {
			w->undecided += undecided(row);
			na++;
		}
	}
	if (attempts_new(c, &na) == -1)
		return -1;
	if (na == 0)
		return 0;
	/* Keys idle by now go before this request's come. */
	if (keys_expire(c, (long long)ts * 1000) == -1 || decide(c, na, ts) == -1)
		return -1;
	if (ts >= c->f->since_ms && ts < c->f->until_ms)
		w->requests++;
	for (size_t i = 0; i < na; i++) {
		const struct attempt *a = &c->at[i];

		if (tally(c, a->rule, a->row, a->row ? a->row->ts_ms : ts,
		    a->allowed, a->k, a->key) == -1)
			return -1;
	}
	return 0;
}

/* ---- results ----------------------------------------------------------- */

static int
cmp_changed(const void *x, const void *y)
{
	const struct whatif_key *a = x, *b = y;
	int64_t da = llabs(a->wi_denied - a->rec_denied);
	int64_t db = llabs(b->wi_denied - b->rec_denied);

	if (da != db)
		return da > db ? -1 : 1;
	if (a->newly_denied + a->newly_admitted != b->newly_denied + b->newly_admitted)
		return a->newly_denied + a->newly_admitted >
		    b->newly_denied + b->newly_admitted ? -1 : 1;
	return strcmp(a->key, b->key);
}

/* Each rule's changed keys, counted and the top ntop kept. */
static int
results(struct ctx *c, size_t ntop)
{
	struct whatif *w = c->w;
	size_t *nv;

	for (size_t i = c->lru_head; i; ) {
		size_t next = c->keys[i - 1].next;

		if (key_drop(c, (uint32_t)(i - 1)) == -1)
			return -1;
		i = next;
	}
	/* The changed keys, each to its rule's list: counted, then placed
	 * (the keys borrowed from c->cid until the top ones are copied). */
	if ((nv = calloc(w->nrules + 1, sizeof(*nv))) == NULL)
		return -1;
	for (size_t i = 0; i < c->cid.n; i++) {
		struct changed *ch = &c->cv[i];
		struct whatif_rule *res = &w->rules[ch->rule];

		res->newly_denied_keys += ch->nd > 0;
		res->newly_admitted_keys += ch->na > 0;
		nv[ch->rule] += ch->nd > 0 || ch->na > 0;
	}
	for (size_t r = 0; r < w->nrules; r++)
		if ((w->rules[r].top = calloc(nv[r] + 1,
		    sizeof(*w->rules[r].top))) == NULL)
			goto oom;
	memset(nv, 0, (w->nrules + 1) * sizeof(*nv));
	for (size_t i = 0; i < c->cid.n; i++) {
		struct changed *ch = &c->cv[i];
		const char *rule, *key;

		if (ch->nd == 0 && ch->na == 0)
			continue;
		intern_pair_get(&c->cid, (uint32_t)i, &rule, &key);
		w->rules[ch->rule].top[nv[ch->rule]++] = (struct whatif_key){
		    (char *)(uintptr_t)key, ch->rec_denied, ch->wi_denied, ch->nd,
		    ch->na };
	}
	for (size_t r = 0; r < w->nrules; r++) {
		struct whatif_rule *res = &w->rules[r];

		if (c->rr[r].last_pid != NONE) {
			const struct wparams *p = whatif_params(c->rd, &(struct wrow){
			    .params = c->rr[r].last_pid });

			const char *alg = NULL;

			/* The names outlive the reader: the static ones. */
			for (int a = 0; p->algorithm && a < RLG_ALGORITHM_COUNT; a++)
				if (strcmp(p->algorithm, conf_algorithm_name(a)) == 0)
					alg = conf_algorithm_name(a);
			res->recorded = (struct params){ (char *)(uintptr_t)alg,
			    p->limit, p->window_ms, p->burst };
			if (!res->in_conf)
				res->what_if = res->recorded;
		}
		if (nv[r] > 0)
			qsort(res->top, nv[r], sizeof(*res->top), cmp_changed);
		for (size_t i = 0; i < nv[r] && i < ntop; i++) {
			if ((res->top[i].key = strdup(res->top[i].key)) == NULL)
				goto oom;
			res->ntop = i + 1;
		}
	}
	free(nv);
	return 0;
oom:
	free(nv);
	return -1;
}

static int
cmp_rule(const void *x, const void *y)
{
	return strcmp(((const struct whatif_rule *)x)->rule,
	    ((const struct whatif_rule *)y)->rule);
}

static void
ctx_free(struct ctx *c)
{
	for (size_t i = 0; i < c->nkeys; i++) {
		free(c->keys[i].key);
		free(c->keys[i].st.e);
	}
	free(c->keys);
	free(c->buckets);
	free(c->cv);
	intern_free(&c->cid);
	free(c->rr);
	free(c->g2r);
	free(c->c2r);
	free(c->fresh);
	whatif_read_free(c->rd);
}

/* Does the replay need the rows' path, address and method? */
static int
needs_fields(const struct whatif_conf *wc)
{
	for (size_t i = 0; i < wc->c->nrules; i++) {
		const struct rule *ru = &wc->c->rules[i];

		if (wc->match_kept[i] && (ru->path_kind != RLG_PATH_ANY ||
		    ru->methods != NULL))
			return 1;
		for (size_t k = 0; wc->key_kept[i] && k < ru->key.nparts; k++)
			if (ru->key.parts[k].kind != RLG_PART_LITERAL &&
			    ru->key.parts[k].kind != RLG_PART_RULE)
				return 1;
	}
	return 0;
}

int
whatif_run(struct whatif *w, const struct whatif_conf *wc, struct rdbs *dbs,
    const struct filter *f, int64_t width_ms, size_t ntop, char *err,
    size_t errlen)
{
	struct ctx *c;
	const struct wrow **rows;
	size_t n;
	int rc = -1;

	w->width_ms = width_ms;
	w->conf_path = wc->c->path;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return oom(err, errlen);
	c->w = w;
	c->wc = wc;
	c->f = f;
	if ((c->c2r = malloc((wc->c->nrules + 1) * sizeof(*c->c2r))) == NULL)
		goto oom;
	if ((c->fresh = malloc((wc->c->nrules + 1) * sizeof(*c->fresh))) == NULL)
		goto oom;
	for (size_t i = 0; i < wc->c->nrules; i++) {
		c->c2r[i] = NONE;
		if (wc->match_kept[i] && wc->key_kept[i] &&
		    wc->c->rules[i].cost_tmpl.nparts == 0)
			c->fresh[c->nfresh++] = (uint32_t)i;
	}
	/* NEW.ini's rules the record lacks come last, in file order. */
	c->fields = needs_fields(wc);
	c->req.method = "GET";
	if ((c->rd = whatif_read_open(dbs, f->until_ms, c->fields, err,
	    errlen)) == NULL)
		goto out;
	for (size_t i = 0; i < wc->c->nrules; i++)
		if (!wc->in_audit[i] && add_rule(c, wc->c->rules[i].name,
		    (int)i) == NONE)
			goto oom;
	while ((rc = whatif_read_next(c->rd, &rows, &n, err, errlen)) == 1)
		if (replay(c, rows, n) == -1)
			goto oom;
	if (rc == -1)
		goto out;
	w->late = whatif_late(c->rd);
	if (results(c, ntop) == -1)
		goto oom;
	if (w->nrules > 1)
		qsort(w->rules, w->nrules, sizeof(*w->rules), cmp_rule);
	rc = 0;
	goto out;
oom:
	rc = oom(err, errlen);
out:
	ctx_free(c);
	free(c);
	return rc;
}

void
whatif_free(struct whatif *w)
{
	for (size_t r = 0; r < w->nrules; r++) {
		for (size_t i = 0; i < w->rules[r].ntop; i++)
			free(w->rules[r].top[i].key);
		free(w->rules[r].top);
		free(w->rules[r].wins);
		free(w->rules[r].rule);
	}
	free(w->rules);
	memset(w, 0, sizeof(*w));
}
