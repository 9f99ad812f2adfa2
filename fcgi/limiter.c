/*
 * limiter: a batch of requests in, their verdicts out. The batch's rules
 * become one FCALL <library>_decide per group of keys that may share a
 * call (redis_key_group(): every key on one node, a hash slot in a
 * cluster), each request all or nothing in it; the calls go out in one
 * redis_run(). The deny cache answers in front of Redis, and an undo round
 * keeps a request's rules all-or-nothing when they live in several calls.
 * Which node a call goes to, and what to do when it is down, is the Redis
 * layer's business (redis.c).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "denycache.h"
#include "limiter.h"
#include "limiter_int.h"
#include "local.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "scripts.h"

#define QUIET_LOG_MS		10000	/* a line per burst: ignored
					 * overrides, failed undos */

/*
 * FCALL <library>_decide N K1..KN VERSION NOW_US, then per rule its
 * signature, one argument: "ALGORITHM FLAGS COST LIMIT WINDOW_MS BURST
 * PRECISION_MS" joined by single spaces (lua/decide.lua; one argument and
 * not 7: Redis's cost is per argument), flag n on the first rule of each
 * request after the first. A rule takes at most 2 keys and 1 argument;
 * its bytes are one key buffer (the override key, whose beginning is the
 * state key) and its signature: an algorithm's name and flags (SIG_WORDS:
 * at most 14 and 4), 6 spaces, 5 numbers and the NUL. The undo round
 * takes no more: 4 arguments a call, 3 a rule, a number a call.
 */
#define CALL_ARGS		5
#define RULE_ARGS		3
#define NUM_SIZE		24
#define SIG_WORDS		32
#define SIG_SIZE		(SIG_WORDS + 5 * NUM_SIZE)
#define RULE_BYTES		(RLG_REDIS_KEY_SIZE + SIG_SIZE)

/* One request to decide: its matches, and its verdicts (in l->verdicts). */
struct limiter_request {
	const struct match *m;		/* m[0..n): its rules, file order */
	size_t		 n;
	struct verdict	*v;		/* out: v[0..n) */
};

/* A part of a round's call: the rules of one request whose keys are in
 * one group (all of them, but for a cluster's hash slots). A call holds
 * every part of the batch in its group. */
struct call_info {
	size_t		 req;		/* index in the batch */
	size_t		 first;		/* its rules: rix[first .. first+n) */
	size_t		 n;
	int		 grp;		/* its keys' group (redis_key_group) */
	size_t		 call;		/* its call, in l->calls */
	size_t		 at;		/* its counted in the call's reply */
};

struct limiter {
	struct redis	*redis;
	struct metrics_worker *metrics;	/* the loop's counters, or NULL */
	int		 err;		/* the last limiter_decide() left
					 * rules to on_error */
	char		 errstr[256];
	/* One limiter_decide()'s requests and their verdicts, kept to be
	 * reused: rcap requests, vcap verdicts. */
	struct limiter_request *reqs;
	size_t		 rcap;
	struct verdict	*verdicts;
	size_t		 vcap;
	/* Scratch for one limiter_decide(), kept to be reused, sized for
	 * cap rules (room()). */
	size_t		 cap;
	struct redis_call *calls;	/* both rounds */
	struct call_info *info;
	size_t		*rix;		/* rule indexes, call by call */
	const char	**state_key;	/* per rix entry: its state key */
	size_t		*state_len;
	const char	**undo;		/* per rix entry: its undo token (in
					 * the reply), or NULL */
	size_t		*undo_len;
	const char	**argv;
	size_t		*argvlen;
	char		*bytes;
};

/* Shared by the loops of the process: the rate of some log lines. */
static atomic_llong	ignored_logged_ms;	/* last "ignored" line */
static atomic_long	ignored_quiet;		/* ignored since, not logged */
static atomic_llong	undo_logged_ms;		/* last failed-undo line */
static atomic_llong	wait_logged_ms;		/* last unreplicated line */
static atomic_long	wait_quiet;		/* unreplicated since */

struct limiter *
limiter_new(struct redis *r)
{
	struct limiter *l = calloc(1, sizeof(*l));

	if (l != NULL)
		l->redis = r;
	return l;
}

void
limiter_free(struct limiter *l)
{
	if (l == NULL)
		return;
	free(l->calls);
	free(l->info);
	free(l->rix);
	free(l->state_key);
	free(l->state_len);
	free(l->undo);
	free(l->undo_len);
	free(l->argv);
	free(l->argvlen);
	free(l->bytes);
	free(l->reqs);
	free(l->verdicts);
	free(l);
}

void
limiter_set_metrics(struct limiter *l, struct metrics_worker *w)
{
	l->metrics = w;
	redis_set_metrics(l->redis, w);
}

/* May a request's keys need several calls (the Redis layer says)? */
static int
clustered(const struct conf *c)
{
	return !redis_keys_together(c);
}

size_t
limiter_key(const struct conf *c, const struct rule *ru, const char *key,
    size_t keylen, int override, char *out, size_t outlen)
{
	size_t n = (size_t)snprintf(out, outlen, "%s{%s:", c->key_prefix,
	    ru->name);
	const char *tail = override ? "}" RLG_OVERRIDE_SUFFIX : "}";
	size_t tlen = strlen(tail);

	if (n + keylen + tlen < outlen) {
		memcpy(out + n, key, keylen);
		memcpy(out + n + keylen, tail, tlen + 1);
	}
	return n + keylen + tlen;
}

/* *p resized to n elements of size; *ok cleared when that fails. */
static void
resize(void *pp, size_t n, size_t size, int *ok)
{
	void **p = pp, *bigger;

	if ((bigger = realloc(*p, n * size)) == NULL)
		*ok = 0;
	else
		*p = bigger;
}

/* Room for a batch of nrules rules sent to Redis. Returns 0 or -1. */
static int
room(struct limiter *l, size_t nrules)
{
	size_t cap = l->cap ? l->cap : 16;
	int ok = 1;

	if (nrules <= l->cap)
		return 0;
	while (cap < nrules)
		cap *= 2;
	/* Calls: one per rule at most in each round. Arguments: round one
	 * takes CALL_ARGS per call and RULE_ARGS per rule, round two no more.
	 * Bytes: RULE_BYTES per rule, a number per call in each round. */
	resize(&l->calls, 2 * cap, sizeof(*l->calls), &ok);
	resize(&l->info, 2 * cap, sizeof(*l->info), &ok);
	resize(&l->rix, cap, sizeof(*l->rix), &ok);
	resize(&l->state_key, cap, sizeof(*l->state_key), &ok);
	resize(&l->state_len, cap, sizeof(*l->state_len), &ok);
	resize(&l->undo, cap, sizeof(*l->undo), &ok);
	resize(&l->undo_len, cap, sizeof(*l->undo_len), &ok);
	resize(&l->argv, 2 * (CALL_ARGS + RULE_ARGS) * cap,
	    sizeof(*l->argv), &ok);
	resize(&l->argvlen, 2 * (CALL_ARGS + RULE_ARGS) * cap,
	    sizeof(*l->argvlen), &ok);
	resize(&l->bytes, cap * (RULE_BYTES + 2 * NUM_SIZE), 1, &ok);
	if (!ok)
		return -1;
	l->cap = cap;
	return 0;
}

/* The rule's own parameters: what a verdict says until Redis says
 * otherwise (an override), and all it says when Redis cannot answer. */
static void
rule_params(struct verdict *v, const struct rule *ru)
{
	v->limit = ru->limit;
	v->window_ms = ru->window_ms;
	v->burst = conf_capacity(ru, ru->limit);
	v->override = RLG_OVERRIDE_NONE;
}

static int
dry(const struct conf *c, const struct rule *ru)
{
	return ru->dry_run || c->dry_run;
}

/* Rules in dry run never deny, so nothing of theirs is remembered; nor
 * of a rule whose limit Redis may raise (conf refuses the pair anyway). */
static int
cacheable(const struct conf *c, const struct rule *ru)
{
	return ru->deny_cache && !dry(c, ru) && !ru->overrides;
}

/* Fills v from the deny cache when it remembers m denied. Returns 1 then. */
static int
cached(const struct conf *c, const struct match *m, long long now,
    struct verdict *v)
{
	const struct rule *ru = m->rule;
	struct denial dn;

	if (!cacheable(c, ru) || !denycache_get(c, ru->name, m->key,
	    m->key_len, m->cost, now, &dn))
		return 0;
	v->answered = 1;
	v->allowed = 0;
	v->local = 1;
	v->remaining = dn.remaining;
	v->limit = dn.limit;
	/* Rounded up like the library's own: never early. */
	v->retry_after_ms = (dn.until_us - now + 999) / 1000;
	v->reset_ms = dn.reset_at_us > now ? (dn.reset_at_us - now + 999) /
	    1000 : 0;
	v->now_us = dn.now_us + (now - dn.at_us);	/* on Redis's clock */
	v->delay_ms = 0;
	return 1;
}

/*
 * Remembers a denial Redis gave. sent is when the call was sent: Redis
 * decided later, so the entry ends no later than retry_after says.
 */
static void
remember(const struct conf *c, const struct match *m, const struct verdict *v,
    long long sent)
{
	struct denial dn;

	if (!cacheable(c, m->rule) || !v->answered || v->allowed ||
	    v->local || v->retry_after_ms <= 0)
		return;
	dn.cost = m->cost;
	dn.remaining = v->remaining;
	dn.limit = v->limit;
	dn.until_us = sent + v->retry_after_ms * 1000;
	dn.reset_at_us = sent + v->reset_ms * 1000;
	dn.now_us = v->now_us;
	dn.at_us = sent;
	denycache_put(c, m->rule->name, m->key, m->key_len, &dn);
}

/*
 * Rate-limits a log line process-wide, one per QUIET_LOG_MS: returns 1
 * when it may be written now (then *held, if given, is how many were held
 * back since, counted in *quiet), else 0.
 */
static int
may_log(atomic_llong *last_ms, atomic_long *quiet, long *held)
{
	long long now = mono_ms(), last = atomic_load(last_ms);

	if ((last != 0 && now - last < QUIET_LOG_MS) ||
	    !atomic_compare_exchange_strong(last_ms, &last, now)) {
		if (quiet != NULL)
			atomic_fetch_add(quiet, 1);
		return 0;
	}
	if (held != NULL)
		*held = quiet != NULL ? atomic_exchange(quiet, 0) : 0;
	return 1;
}

/* An ignored override: its sentence, rate-limited process-wide. */
static void
log_ignored(const struct match *m, const char *why, size_t whylen)
{
	long quiet = 0;

	if (!may_log(&ignored_logged_ms, &ignored_quiet, &quiet))
		return;
	log_warn("rule %s key %.*s: %.*s; the rule's own limit applies (%ld "
	    "more ignored overrides not logged in the last %d s)",
	    m->rule->name, (int)m->key_len, m->key, (int)whylen, why, quiet,
	    QUIET_LOG_MS / 1000);
}

/* A decimal into the byte buffer at *pos; returns it and its length. */
static const char *
put_num(struct limiter *l, size_t *pos, long long v, size_t *len)
{
	char *s = l->bytes + *pos;
	int n = snprintf(s, NUM_SIZE, "%lld", v);

	*len = (size_t)n;
	*pos += (size_t)n + 1;
	return s;
}

/*
 * Writes the <library>_decide call of the parts info[0..nparts) of the batch
 * r into call, number ncall: its arguments from *a on (argv, argvlen), its
 * bytes from *pos on; the keys are group()'s. Each part is one request
 * (flag n on its first rule, after the call's first); each part's place in
 * the reply is noted.
 */
static void
build_decide(struct limiter *l, const struct conf *c,
    const struct limiter_request *r, struct call_info *info, size_t nparts,
    struct redis_call *call, size_t ncall, size_t *a, size_t *pos)
{
	/* [dry run][override key][undo token: only where a request's rules
	 * may be counted in several calls][another request begins], the
	 * letters in the order lua/decide.lua reads them */
	static const char *const flags[2][2][2][2] = {
		{ { { "-", "n" }, { "u", "un" } }, { { "o", "on" }, { "ou", "oun" } } },
		{ { { "d", "dn" }, { "du", "dun" } }, { { "do", "don" }, { "dou", "doun" } } } };
	const char **argv = l->argv + *a;
	size_t *alen = l->argvlen + *a, nkeys = 0, i, k, p, at = 0;
	const struct limiter_request *rq;
	const struct call_info *ci;
	const struct match *m;
	int o;

	argv[0] = "FCALL";
	alen[0] = strlen(argv[0]);
	argv[1] = rlg_fn_decide;
	alen[1] = strlen(argv[1]);
	/* argv[2], the key count, once it is known. */
	k = 3;
	for (p = 0; p < nparts; p++) {
		ci = &info[p];
		rq = &r[ci->req];
		info[p].call = ncall;
		info[p].at = at;
		at += 1 + ci->n;
		for (i = 0; i < ci->n; i++) {
			m = &rq->m[l->rix[ci->first + i]];
			o = m->rule->overrides ? 1 : 0;
			argv[k] = l->state_key[ci->first + i];
			alen[k++] = l->state_len[ci->first + i];
			if (o) {	/* the same bytes, with its suffix */
				argv[k] = argv[k - 1];
				alen[k] = alen[k - 1] +
				    sizeof(RLG_OVERRIDE_SUFFIX) - 1;
				k++;
			}
			nkeys += 1 + (size_t)o;
		}
	}
	argv[2] = put_num(l, pos, (long long)nkeys, &alen[2]);
	argv[k] = rlg_library_version;
	alen[k++] = strlen(rlg_library_version);
	argv[k] = "";			/* now: Redis TIME, one clock */
	alen[k++] = 0;
	for (p = 0; p < nparts; p++) {
		ci = &info[p];
		rq = &r[ci->req];
		for (i = 0; i < ci->n; i++) {
			const struct rule *ru;
			char *sig = l->bytes + *pos;
			int n;

			m = &rq->m[l->rix[ci->first + i]];
			ru = m->rule;
			/* "%.0lld" of 0 is "": an empty BURST or PRECISION_MS
			 * (the algorithm's default). */
			n = snprintf(sig, SIG_SIZE, "%s %s %lld %lld %lld %.0lld "
			    "%.0lld", conf_algorithm_name(ru->algorithm),
			    flags[dry(c, ru)][ru->overrides ? 1 : 0]
			    [clustered(c)][p > 0 && i == 0], m->cost, ru->limit,
			    ru->window_ms, ru->burst > 0 ? ru->burst : 0,
			    ru->precision_ms > 0 ? ru->precision_ms : 0);
			argv[k] = sig;
			alen[k++] = (size_t)n;
			*pos += (size_t)n + 1;
		}
	}
	memset(call, 0, sizeof(*call));
	call->key = l->state_key[info[0].first];
	call->keylen = l->state_len[info[0].first];
	call->argc = (int)k;
	call->argv = argv;
	call->argvlen = alen;
	call->node = -1;
	/* It counts when it admits: [redis] replicas must hold that. */
	call->wait = 1;
	*a += k;
}

static int
is_int(const redisReply *r)
{
	return r != NULL && r->type == REDIS_REPLY_INTEGER;
}

/*
 * The field of a row at *p (before end) up to the next space, as an
 * integer in [min, max]; *p moves past the space. Returns 0 or -1. (The
 * copy: conf_parse_int reads a terminated string, as slot.c's num(); a
 * NUL inside the field would end it early.)
 */
static int
row_int(const char **p, const char *end, long long min, long long max,
    long long *out)
{
	const char *sp = memchr(*p, ' ', (size_t)(end - *p)), *errstr;
	char buf[24];
	size_t n;

	if (sp == NULL || (n = (size_t)(sp - *p)) == 0 || n >= sizeof(buf) ||
	    memchr(*p, '\0', n) != NULL)
		return -1;
	memcpy(buf, *p, n);
	buf[n] = '\0';
	if (conf_parse_int(buf, min, max, out, &errstr) == -1)
		return -1;
	*p = sp + 1;
	return 0;
}

int
limiter_row(const char *s, size_t len, struct limiter_row *row)
{
	const char *p = s, *end = s + len, *sp;
	long long min, max;
	int k;

	if (s == NULL)
		return -1;
	for (k = 0; k < RLG_DECIDE_ROW_UNDO; k++) {
		min = -RLG_EXACT;
		max = RLG_EXACT;
		if (k == RLG_DECIDE_ROW_ALLOWED)
			min = 0, max = 1;
		else if (k == RLG_DECIDE_ROW_OVERRIDE)
			min = RLG_OVERRIDE_NONE, max = RLG_OVERRIDE_IGNORED;
		if (row_int(&p, end, min, max, &row->f[k]) == -1)
			return -1;
	}
	if ((sp = memchr(p, ' ', (size_t)(end - p))) == NULL)
		return -1;
	row->undo = p;
	row->undo_len = (size_t)(sp - p);
	row->why = sp + 1;
	row->why_len = (size_t)(end - sp - 1);
	return 0;
}

/*
 * A call that counted on a master where fewer than [redis] replicas
 * acknowledged in time: counted, and said once per QUIET_LOG_MS
 * process-wide; where none was waited for (fewer were connected), the
 * Redis layer said so once.
 */
static void
unreplicated(struct limiter *l, const struct conf *c,
    const struct redis_call *call, const struct limiter_request *rq,
    const struct call_info *ci)
{
	long quiet = 0;

	metrics_replica_timeout(l->metrics);
	if (!call->waited || !may_log(&wait_logged_ms, &wait_quiet, &quiet))
		return;
	log_warn("rule %s: redis %s: %d of %d replicas acknowledged within "
	    "%lld ms (WAIT); the request follows on_error, as when Redis "
	    "cannot answer (%ld more not logged in the last %d s)",
	    rq->m[l->rix[ci->first]].rule->name, redis_node_address(l->redis,
	    call->node), call->acked < 0 ? 0 : call->acked, c->redis_replicas,
	    c->redis_timeout_ms / 2, quiet, QUIET_LOG_MS / 1000);
}

/*
 * Reads part ci's place in the reply of its call into its rules' verdicts
 * (and the undo strings into l->undo). Returns 0; -1 when the call failed
 * (the Redis layer logged and counted that); -2 when Redis answered with
 * an error (a bad argument: the call's, logged for its first part, or the
 * part's own) or with what the library does not give (logged here); -3
 * when it counted the request but fewer than c's replicas acknowledged the
 * call (logged and counted here): a failover now could lose that count, so
 * the decision does not stand (a denial wrote nothing and stands). The
 * verdicts of a part that did not return 0 stay unanswered.
 */
static int
read_decide(struct limiter *l, const struct conf *c,
    const struct redis_call *call, const struct call_info *ci,
    const struct limiter_request *rq)
{
	const redisReply *rep = call->reply, *ri, *err = NULL;
	struct limiter_row rows[RLG_MAX_MATCHES], *row;
	const struct match *m;
	struct verdict *v;
	size_t i, j;
	int counted;

	if (call->status != RLG_CALL_OK || rep == NULL)
		return -1;
	if (rep->type == REDIS_REPLY_ERROR)
		err = ci->at == 0 ? rep : NULL;
	else if (rep->type == REDIS_REPLY_ARRAY && rep->elements > ci->at &&
	    rep->element[ci->at]->type == REDIS_REPLY_ERROR)
		err = rep->element[ci->at];
	if (err != NULL || rep->type == REDIS_REPLY_ERROR) {
		/* "rlgate: rule I (ALGORITHM): ...": I counts from 1 in the
		 * request; the log names the rule. */
		if (err != NULL) {
			i = sscanf(err->str, "rlgate: rule %zu", &j) == 1 &&
			    j >= 1 && j <= ci->n ? j - 1 : 0;
			log_error("rule %s: redis: %s",
			    rq->m[l->rix[ci->first + i]].rule->name, err->str);
		}
		return -2;
	}
	if (rep->type != REDIS_REPLY_ARRAY ||
	    rep->elements < ci->at + 1 + ci->n || ci->n > RLG_MAX_MATCHES ||
	    !is_int(rep->element[ci->at]))
		goto bad;
	/* Every row is read before any verdict is written: one bad row
	 * and the part is an error as a whole. */
	for (i = 0; i < ci->n; i++) {
		ri = rep->element[ci->at + 1 + i];
		if (ri->type != REDIS_REPLY_STRING ||
		    limiter_row(ri->str, ri->len, &rows[i]) == -1)
			goto bad;
	}
	counted = rep->element[ci->at]->integer != 0;
	if (counted && c->redis_replicas > 0 &&
	    call->acked < c->redis_replicas) {
		unreplicated(l, c, call, rq, ci);
		return -3;
	}
	for (i = 0; i < ci->n; i++) {
		j = l->rix[ci->first + i];
		m = &rq->m[j];
		v = &rq->v[j];
		row = &rows[i];
		v->allowed = row->f[RLG_DECIDE_ROW_ALLOWED] != 0;
		v->remaining = row->f[RLG_DECIDE_ROW_REMAINING];
		v->limit = row->f[RLG_DECIDE_ROW_LIMIT];
		v->reset_ms = row->f[RLG_DECIDE_ROW_RESET_MS];
		v->retry_after_ms = row->f[RLG_DECIDE_ROW_RETRY_AFTER_MS];
		v->now_us = row->f[RLG_DECIDE_ROW_NOW_US];
		v->delay_ms = row->f[RLG_DECIDE_ROW_DELAY_MS];
		v->answered = 1;
		v->counted = counted && v->allowed;
		v->window_ms = row->f[RLG_DECIDE_ROW_WINDOW_MS];
		v->burst = conf_algorithm_has_burst(m->rule->algorithm) ?
		    row->f[RLG_DECIDE_ROW_BURST] : conf_capacity(m->rule, v->limit);
		v->override = (enum rlg_override)row->f[RLG_DECIDE_ROW_OVERRIDE];
		if (v->override == RLG_OVERRIDE_IGNORED)
			log_ignored(m, row->why_len > 0 ? row->why :
			    "override ignored", row->why_len > 0 ?
			    row->why_len : strlen("override ignored"));
		l->undo[ci->first + i] = v->counted && row->undo_len > 0 ?
		    row->undo : NULL;
		l->undo_len[ci->first + i] = row->undo_len;
	}
	return 0;
bad:
	log_error("rule %s: redis: the reply of %s is not %zu "
	    "rules' verdicts (is the library lua/decide.lua loaded?)",
	    rq->m[l->rix[ci->first]].rule->name, rlg_fn_decide, ci->n);
	return -2;
}

/*
 * Would the request's verdicts so far deny it? A rule not in dry run that
 * denied, or that Redis could not decide and that denies on_error.
 */
static int
request_denied(const struct conf *c, const struct limiter_request *rq)
{
	const struct rule *ru;
	size_t i;

	for (i = 0; i < rq->n; i++) {
		ru = rq->m[i].rule;
		if (dry(c, ru))
			continue;
		if (rq->v[i].answered ? !rq->v[i].allowed :
		    conf_on_error(c, ru) == RLG_ON_ERROR_DENY)
			return 1;
	}
	return 0;
}

/*
 * Writes the rlgate_undo call taking back what call ci counted into
 * *call: FCALL rlgate_undo N K1..KN NOW_US, then ALGORITHM UNDO per rule.
 * Returns 0 when ci counted nothing (no call written).
 */
static int
build_undo(struct limiter *l, const struct limiter_request *rq,
    const struct call_info *ci, struct redis_call *call, size_t *a,
    size_t *pos)
{
	const char **argv = l->argv + *a;
	size_t *alen = l->argvlen + *a, i, k, n = 0;

	for (i = 0; i < ci->n; i++)
		n += l->undo[ci->first + i] != NULL;
	if (n == 0)
		return 0;
	argv[0] = "FCALL";
	alen[0] = strlen(argv[0]);
	argv[1] = rlg_fn_undo;
	alen[1] = strlen(argv[1]);
	argv[2] = put_num(l, pos, (long long)n, &alen[2]);
	for (i = 0, k = 3; i < ci->n; i++)
		if (l->undo[ci->first + i] != NULL) {
			argv[k] = l->state_key[ci->first + i];
			alen[k++] = l->state_len[ci->first + i];
		}
	argv[k] = "";
	alen[k++] = 0;
	for (i = 0; i < ci->n; i++) {
		if (l->undo[ci->first + i] == NULL)
			continue;
		argv[k] = conf_algorithm_name(
		    rq->m[l->rix[ci->first + i]].rule->algorithm);
		alen[k] = strlen(argv[k]);
		k++;
		argv[k] = l->undo[ci->first + i];
		alen[k++] = l->undo_len[ci->first + i];
	}
	/* No WAIT: an undo a failover loses leaves a count behind, less
	 * admitted, never more. */
	memset(call, 0, sizeof(*call));
	call->key = argv[3];
	call->keylen = alen[3];
	call->argc = (int)k;
	call->argv = argv;
	call->argvlen = alen;
	call->node = -1;
	*a += k;
	return 1;
}

/*
 * Sends the undo calls of the requests that round one counted in some
 * calls and denied in others (a cluster only: a request is one part
 * elsewhere), and marks their rules not counted once undone. A failed
 * undo leaves the count where it is (a request denied yet counted: less
 * admitted, never more), said in the log and the rule's verdict.
 */
static void
undo_round(struct limiter *l, const struct conf *c,
    struct limiter_request *r, size_t nparts, size_t *a, size_t *pos)
{
	struct redis_call *undo = l->calls + nparts;
	struct call_info *uinfo = l->info + nparts;
	const redisReply *rep;
	size_t i, k, nu = 0;

	for (k = 0; k < nparts; k++) {
		const struct call_info *ci = &l->info[k];

		if (request_denied(c, &r[ci->req]) &&
		    build_undo(l, &r[ci->req], ci, &undo[nu], a, pos))
			uinfo[nu++] = *ci;
	}
	if (nu == 0)
		return;
	redis_run(l->redis, c, undo, nu);
	for (k = 0; k < nu; k++) {
		rep = undo[k].reply;
		if (undo[k].status == RLG_CALL_OK && rep != NULL &&
		    rep->type == REDIS_REPLY_INTEGER) {
			for (i = 0; i < uinfo[k].n; i++) {
				size_t j = l->rix[uinfo[k].first + i];
				struct verdict *v = &r[uinfo[k].req].v[j];

				if (l->undo[uinfo[k].first + i] == NULL)
					continue;
				/* What is left is what was before. */
				v->counted = 0;
				v->remaining += r[uinfo[k].req].m[j].cost;
			}
		} else {
			if (undo[k].status == RLG_CALL_OK)
				metrics_redis_error(l->metrics);
			if (may_log(&undo_logged_ms, NULL, NULL))
				log_warn("rule %s: a request another rule "
				    "denied stays counted here: its undo "
				    "failed (%s)", r[uinfo[k].req].m[l->rix[
				    uinfo[k].first]].rule->name, rep != NULL &&
				    rep->type == REDIS_REPLY_ERROR ? rep->str :
				    "no answer");
		}
		freeReplyObject(undo[k].reply);
		undo[k].reply = NULL;
	}
}

/*
 * Puts request rq's rules rix[*nrix..) in parts, one per group of keys
 * that may share a call (redis_key_group(): one in single and Sentinel
 * modes, a cluster's hash slot), and writes each rule's keys into the
 * byte buffer from *pos on (state_key, state_len). Returns the number of
 * parts made.
 */
static size_t
group(struct limiter *l, const struct conf *c, size_t req,
    const struct limiter_request *rq, size_t *nrix, struct call_info *info,
    size_t *pos)
{
	const char *key[RLG_MAX_MATCHES];
	size_t len[RLG_MAX_MATCHES], i, j, n, nparts = 0;
	int grp[RLG_MAX_MATCHES];
	unsigned char done[RLG_MAX_MATCHES];

	for (i = 0; i < rq->n; i++) {
		const struct match *m = &rq->m[i];
		int o = m->rule->overrides ? 1 : 0;

		/* Both keys in one buffer: the state key is the override
		 * key's beginning (counted, not terminated: keys may hold
		 * any byte). */
		key[i] = l->bytes + *pos;
		n = limiter_key(c, m->rule, m->key, m->key_len, o,
		    l->bytes + *pos, RLG_REDIS_KEY_SIZE);
		*pos += n + 1;
		len[i] = n - (o ? sizeof(RLG_OVERRIDE_SUFFIX) - 1 : 0);
		grp[i] = redis_key_group(c, key[i], len[i]);
		done[i] = 0;
	}
	for (i = 0; i < rq->n; i++) {
		if (done[i])
			continue;
		info[nparts].req = req;
		info[nparts].first = *nrix;
		info[nparts].n = 0;
		info[nparts].grp = grp[i];
		for (j = i; j < rq->n; j++)
			if (!done[j] && grp[j] == grp[i]) {
				done[j] = 1;
				l->state_key[*nrix] = key[j];
				l->state_len[*nrix] = len[j];
				l->rix[(*nrix)++] = j;
				info[nparts].n++;
			}
		nparts++;
	}
	return nparts;
}

/* Parts by group, and in the order they were made within one. */
static int
by_group(const void *a, const void *b)
{
	const struct call_info *x = a, *y = b;

	if (x->grp != y->grp)
		return x->grp < y->grp ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/*
 * Writes the round's calls: one per group, holding every part of the
 * batch in it, so that a call, its TIME and its round of replies are
 * paid once per group and batch. Returns the number of calls.
 */
static size_t
build_calls(struct limiter *l, const struct conf *c,
    const struct limiter_request *r, size_t nparts, size_t *a, size_t *pos)
{
	size_t k, first, ncalls = 0;

	qsort(l->info, nparts, sizeof(*l->info), by_group);
	for (first = 0; first < nparts; first = k) {
		for (k = first + 1; k < nparts &&
		    l->info[k].grp == l->info[first].grp; k++)
			;
		build_decide(l, c, r, &l->info[first], k - first,
		    &l->calls[ncalls], ncalls, a, pos);
		ncalls++;
	}
	return ncalls;
}

/*
 * Asks Redis for the verdicts of r[0..nr): one <library>_decide call per
 * request, all sent in one round trip (redis_run). With Redis Cluster a
 * request's keys may fall in several slots: one call per slot, sent at
 * once; when one slot's rules deny (or cannot be decided and deny
 * on_error) the others' counts are taken back with rlgate_undo in a second
 * round trip, so that nothing is ever over-admitted. Until that undo has
 * run, a concurrent request may find those counts and be denied: a window
 * of one round trip, where Redis on one node would admit it.
 *
 * A rule with deny_cache (not in dry run) is first looked up in the
 * process's deny cache: a remembered denial decides its request without
 * Redis (local = 1), the request's other rules are then skipped (not
 * counted); denials Redis gives such rules are remembered until their
 * retry_after. A rule with overrides = redis passes its override hash in
 * the same call; an ignored (invalid) override is logged, at most once
 * per 10 s per process. A call that failed (no answer, not sent, or an
 * error reply) leaves its rules unanswered. So does a call that counted
 * its request on a master where, with [redis] replicas = N > 0, fewer
 * than N replicas acknowledged it in time (WAIT after the call in the same
 * pipeline): it stays counted there (less admitted, never more), is
 * logged at most once per 10 s and counted in /metrics; a call that only
 * denied wrote nothing and stands. Returns the number of calls that
 * failed, or -1 when out of memory (nothing asked).
 */
static long
ask_redis(struct limiter *l, const struct conf *c,
    struct limiter_request *r, size_t nr)
{
	size_t i, k, nparts = 0, ncalls, nrix = 0, nrules = 0, a = 0, pos = 0;
	long long sent;
	long failed = 0;
	int local, e;

	sent = mono_us();
	for (k = 0; k < nr; k++) {
		struct limiter_request *rq = &r[k];

		memset(rq->v, 0, rq->n * sizeof(*rq->v));
		local = 0;
		for (i = 0; i < rq->n; i++) {
			rule_params(&rq->v[i], rq->m[i].rule);
			/* A remembered denial decides the request: no
			 * round trip. */
			local |= cached(c, &rq->m[i], sent, &rq->v[i]);
		}
		if (local) {
			for (i = 0; i < rq->n; i++)
				rq->v[i].skipped = !rq->v[i].answered;
			continue;
		}
		nrules += rq->n;
	}
	if (nrules == 0)
		return 0;
	if (room(l, nrules) == -1)
		return -1;
	for (k = 0; k < nr; k++) {
		/* Decided by the deny cache: answered or skipped already. */
		if (r[k].n == 0 || r[k].v[0].answered || r[k].v[0].skipped)
			continue;
		nparts += group(l, c, k, &r[k], &nrix, l->info + nparts,
		    &pos);
	}
	/* Nothing to undo but what read_decide() finds counted. */
	for (i = 0; i < nrix; i++)
		l->undo[i] = NULL;
	ncalls = build_calls(l, c, r, nparts, &a, &pos);
	/* The layer counts the round trip and the calls that failed. */
	redis_run(l->redis, c, l->calls, ncalls);
	for (k = 0; k < nparts; k++) {
		const struct call_info *ci = &l->info[k];

		if ((e = read_decide(l, c, &l->calls[ci->call], ci,
		    &r[ci->req])) == -2)
			metrics_redis_error(l->metrics);
		if (e != 0)
			failed++;
	}
	/* Only a cluster splits a request: elsewhere a denied request
	 * counted nothing, and this finds nothing to undo. */
	undo_round(l, c, r, nparts, &a, &pos);
	for (k = 0; k < nparts; k++) {
		const struct call_info *ci = &l->info[k];

		for (i = 0; i < ci->n; i++)
			remember(c, &r[ci->req].m[l->rix[ci->first + i]],
			    &r[ci->req].v[l->rix[ci->first + i]], sent);
	}
	for (k = 0; k < ncalls; k++) {
		freeReplyObject(l->calls[k].reply);
		l->calls[k].reply = NULL;
	}
	/* Counted with nothing to take back (an unlimited override), in a
	 * request that another rule denied: not counted either. */
	for (k = 0; k < nr; k++)
		if (r[k].n > 0 && request_denied(c, &r[k]))
			for (i = 0; i < r[k].n; i++)
				if (r[k].v[i].override ==
				    RLG_OVERRIDE_UNLIMITED)
					r[k].v[i].counted = 0;
	return failed;
}

/*
 * on_error = local: the rules Redis could not decide are decided in this
 * process's memory on [redis] local_share of their limits (local.h), at
 * CLOCK_REALTIME in ms. Only while Redis fails: the next call it answers
 * is Redis's again.
 */
static void
decide_locally(const struct conf *c, struct limiter_request *r, size_t nr)
{
	long long now = wall_ms();
	size_t i, k;

	for (i = 0; i < nr; i++)
		for (k = 0; k < r[i].n; k++) {
			const struct rule *ru = r[i].m[k].rule;
			struct verdict *v = &r[i].v[k];

			if (v->answered || v->skipped ||
			    conf_on_error(c, ru) != RLG_ON_ERROR_LOCAL)
				continue;
			local_decide(&r[i].m[k], c->local_share_num,
			    c->local_share_den, now, v);
		}
}

/* Room for nr requests and nv verdicts. Returns 0 or -1. */
static int
room_requests(struct limiter *l, size_t nr, size_t nv)
{
	int ok = 1;

	if (nr > l->rcap) {
		resize(&l->reqs, nr * 2, sizeof(*l->reqs), &ok);
		if (ok)
			l->rcap = nr * 2;
	}
	if (ok && nv > l->vcap) {
		resize(&l->verdicts, nv * 2, sizeof(*l->verdicts), &ok);
		if (ok)
			l->vcap = nv * 2;
	}
	return ok ? 0 : -1;
}

/*
 * The deny cache answers first; then Redis, in one round trip for the
 * batch, each request all-or-nothing (with a cluster's undo round when its
 * keys span slots); rules Redis could not answer follow on_error (local:
 * local.h).
 */
int
limiter_decide(struct limiter *l, const struct conf *c,
    struct decision *const *d, size_t nd)
{
	static const struct verdict unasked[RLG_MAX_MATCHES];
	size_t k, nr = 0, nv = 0;
	long failed = 0;

	l->err = 0;
	l->errstr[0] = '\0';
	for (k = 0; k < nd; k++)
		nv += d[k]->bad_detail == NULL ? d[k]->n : 0;
	if (room_requests(l, nd, nv > 0 ? nv : 1) == -1)
		failed = -1;
	for (k = 0, nv = 0; k < nd; k++) {
		/* Out of memory: nothing asked, every rule to on_error. */
		d[k]->v = failed == -1 ? unasked : l->verdicts + nv;
		if (failed == -1)
			continue;
		if (d[k]->bad_detail != NULL || d[k]->n == 0)
			continue;
		l->reqs[nr].m = d[k]->m;
		l->reqs[nr].n = d[k]->n;
		l->reqs[nr++].v = l->verdicts + nv;
		nv += d[k]->n;
	}
	if (nr > 0)
		failed = ask_redis(l, c, l->reqs, nr);
	if (failed != 0) {
		l->err = 1;
		if (failed == -1)
			snprintf(l->errstr, sizeof(l->errstr), "limiter: out "
			    "of memory; the batch's rules follow on_error");
		else
			snprintf(l->errstr, sizeof(l->errstr), "limiter: %ld "
			    "Redis calls failed; their rules follow on_error",
			    failed);
		decide_locally(c, l->reqs, nr);
	}
	for (k = 0; k < nd; k++)
		decision_settle(d[k]);
	return failed != 0 ? -1 : 0;
}

const char *
limiter_errstr(const struct limiter *l)
{
	return l->errstr;
}
