/*
 * lua_check: drives the six Redis scripts in lua/ on a real redis-server with a
 * virtual clock (ARGV[1]) and checks every reply against hand-computed
 * numbers, against the C twin of the algorithms (fcgi/algo.c; tests/it/it_twin.sh
 * compares the two on random batches), and against each algorithm's promise
 * as rlgate-report --verify checks it (reports/verify_api.h). It is not a benchmark (tests/bench/bench_lua.sh).
 *
 *   lua_check PORT fcall|decide [SEED]
 *
 * fcall calls FCALL rlgate_<algorithm>, decide FCALL rlgate_decide with one
 * rule, both from the library this build embeds (fcgi/scripts.h).
 *
 * Prints "ok - ..." / "not ok - ..." per check, then "N passed, M failed";
 * exits 1 when a check failed. Keys are "lua_check:<pid>:..." and are deleted
 * at the end.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "algo.h"
#include "limiter.h"
#include "limiter_int.h"
#include "scripts.h"
#include "tool.h"
#include "../../reports/verify_api.h"

typedef __int128 i128;

/* The algorithms in enum rlg_algorithm's order. */
enum alg { FIXED, SWINDOW, SLOG, TOKEN, GCRA, LEAKY, NALG };

/* Reply fields, in the scripts' order. */
enum {
	ALLOWED = RLG_REPLY_ALLOWED, REMAINING = RLG_REPLY_REMAINING,
	LIMIT = RLG_REPLY_LIMIT, RESET = RLG_REPLY_RESET_MS,
	RETRY = RLG_REPLY_RETRY_AFTER_MS, NOW = RLG_REPLY_NOW_US,
	DELAY = RLG_REPLY_DELAY_MS, NFIELDS = ALGO_NFIELDS
};

#define EMPTY	RLG_PARAM_UNSET	/* an argument sent as "" */

struct params {
	long long	limit, window_ms, burst, precision_ms;	/* EMPTY allowed for the last two */
};

/* What a reply should be: the C twin's decisions on a key of its own. */
struct twin {
	enum alg		 a;
	struct params		 p;
	struct algo_state	 st;
};

static const char *const alg_names[NALG] = {
	"fixed_window", "sliding_window", "sliding_log", "token_bucket", "gcra",
	"leaky_bucket"
};

static const char *const field_names[NFIELDS] = {
	"allowed", "remaining", "limit", "reset_ms", "retry_after_ms", "now_us",
	"delay_ms"
};

#define T0	1700000000000000LL	/* virtual time origin, us, block-aligned */

/* With an override key (KEYS[2]), fields 8-11 of the reply (facts.h's
 * RLG_REPLY_WINDOW_MS to _OVERRIDE, from x[0]), and the 12th. */
enum {
	XWINDOW = RLG_REPLY_WINDOW_MS - NFIELDS,
	XBURST = RLG_REPLY_BURST - NFIELDS,
	XPRECISION = RLG_REPLY_PRECISION_MS - NFIELDS,
	XOVERRIDE = RLG_REPLY_OVERRIDE - NFIELDS,
	NEXT
};
static const char *const ext_names[NEXT] = {
	"window_ms", "burst", "precision_ms", "override"
};

struct reply {
	long long	v[NFIELDS];
	long long	x[NEXT];	/* with KEYS[2] only */
	char		why[256];	/* the 12th field, when override is 3 */
	long long	pttl;		/* after the call */
	int		changed;	/* DUMP before != DUMP after */
	int		is_err;
	char		err[256];
};

static redisContext	*rc;
static struct {
	char	*str;
	size_t	 len;
}			 pre_dump;	/* DUMP of the key before the last call */
static int		 reruns;	/* steps run again after Redis stalled */
static char		 prefix[64];
static int		 passed, failed;
static uint64_t		 rng;

static void
ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", cond ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (cond)
		passed++;
	else
		failed++;
}

static void
note(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static uint64_t
rnd(void)
{
	return tool_rnd(&rng);
}

/* Uniform in [lo, hi]. */
static long long
rnd_between(long long lo, long long hi)
{
	return tool_between(&rng, lo, hi);
}

static long long
real_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
fatal(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "lua_check: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	printf("%d passed, %d failed\n", passed, failed + 1);
	exit(1);
}

static void
twin_init(struct twin *m, enum alg a, const struct params *p)
{
	m->a = a;
	m->p = *p;
	algo_state_init(&m->st, NULL, 0);
}

static void
twin_free(struct twin *m)
{
	free(m->st.e);
	m->st.e = NULL;
}

/* Fills v[NFIELDS] with the twin's reply to a request of cost at now (us)
 * and counts it when admitted. Exits on arguments the twin refuses. */
static void
twin_decide(struct twin *m, long long now, long long cost, long long *v)
{
	struct algo_params ap;
	char err[256];

	if (algo_params(&ap, (enum rlg_algorithm)m->a, cost, m->p.limit,
	    m->p.window_ms, m->p.burst, m->p.precision_ms, err, sizeof(err)) == -1)
		fatal("the twin refuses %s's arguments: %s", alg_names[m->a], err);
	/* Grown before it is full: every decision exact. */
	if (algo_state_full(&m->st)) {
		size_t cap = m->st.cap ? 2 * m->st.cap : 64;
		struct algo_entry *old = m->st.e, *e = malloc(cap * sizeof(*e));

		if (e == NULL)
			fatal("out of memory");
		algo_state_grow(&m->st, e, cap);
		free(old);
	}
	algo_decide(&ap, &m->st, now, v);
}

static redisReply *
command(const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(rc, fmt, ap);
	va_end(ap);
	if (r == NULL)
		fatal("redis: %s", rc->errstr);
	return r;
}

static void
fmt_arg(char *buf, size_t len, long long v)
{
	if (v == EMPTY)
		buf[0] = '\0';
	else
		snprintf(buf, len, "%lld", v);
}

/*
 * How a decision is called: FCALL rlgate_<algorithm> (the standalone
 * functions), FCALL rlgate_decide with this one rule (its reply mapped back
 * to the standalone one).
 */
enum via { VIA_FCALL, VIA_DECIDE };
static enum via	via;
static const char *const via_names[] = { "fcall", "decide" };

/* The command of one decision (argv of at least 16), its argc; argv
 * holds until the next call (rlgate_decide's signature is kept here). */
static int
decision_argv(const char **argv, char *fname, size_t flen, enum alg a,
    const char *key, const char *okey, const char *now, const char *cost,
    const char *limit, const char *window, const char *burst,
    const char *precision)
{
	static char sig[512];
	const char *args[6] = { now, cost, limit, window, burst, precision };
	int n = 0, i;

	snprintf(fname, flen, "%s_%s", rlg_library_name, via == VIA_DECIDE ? "decide" : alg_names[a]);
	argv[n++] = "FCALL";
	argv[n++] = fname;
	argv[n++] = okey == NULL ? "1" : "2";
	argv[n++] = key;
	if (okey != NULL)
		argv[n++] = okey;
	if (via == VIA_DECIDE) {	/* VERSION NOW_US "ALGORITHM FLAGS COST ..." */
		argv[n++] = rlg_library_version;
		argv[n++] = now;
		/* with undo tokens */
		snprintf(sig, sizeof(sig), "%s %s %s %s %s %s %s", alg_names[a],
		    okey == NULL ? "u" : "ou", cost, limit, window, burst, precision);
		argv[n++] = sig;
		return n;
	}
	for (i = 0; i < 6; i++)
		argv[n++] = args[i];
	return n;
}

/*
 * rlgate_decide's reply {counted, ROW} (read with the gateway's limiter_row()) as the standalone one: 7 integers, then with
 * okey the 4 more and the sentence when override is 3. Its own promises
 * are checked here: counted = allowed, undo given exactly when the rule
 * was counted (admitted, not unlimited), why "" unless override is 3.
 * Returns NULL (and says why in err) when it is not so.
 */
static redisReply *
decide_as_standalone(redisReply *e, const char *okey, char *err, size_t errlen)
{
	static redisReply out, el[RLG_REPLY_FIELDS], *elp[RLG_REPLY_FIELDS];
	struct limiter_row row;
	size_t i, n = okey == NULL ? NFIELDS : NFIELDS + NEXT;
	long long ov;

	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
	    e->element[0]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->type != REDIS_REPLY_STRING) {
		snprintf(err, errlen, "rlgate_decide: not {counted, row}");
		return NULL;
	}
	if (limiter_row(e->element[1]->str, e->element[1]->len, &row) == -1) {
		snprintf(err, errlen, "rlgate_decide: not a row: \"%s\"",
		    e->element[1]->str);
		return NULL;
	}
	ov = row.f[RLG_DECIDE_ROW_OVERRIDE];
	if (e->element[0]->integer != row.f[ALLOWED] ||
	    (row.undo_len > 0) != (row.f[ALLOWED] == 1 && ov != 2) ||
	    (row.why_len > 0) != (ov == 3)) {
		snprintf(err, errlen, "rlgate_decide: counted %lld, row \"%s\"",
		    e->element[0]->integer, e->element[1]->str);
		return NULL;
	}
	if (okey == NULL && ov != 0) {
		snprintf(err, errlen, "rlgate_decide: override %lld without an override key",
		    ov);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		memset(&el[i], 0, sizeof(el[i]));
		el[i].type = REDIS_REPLY_INTEGER;
		el[i].integer = row.f[i];
		elp[i] = &el[i];
	}
	if (okey != NULL && ov == 3) {
		memset(&el[n], 0, sizeof(el[n]));
		el[n].type = REDIS_REPLY_STRING;
		el[n].str = (char *)(uintptr_t)row.why;	/* the row's tail: terminated */
		el[n].len = row.why_len;
		elp[n] = &el[n];
		n++;
	}
	memset(&out, 0, sizeof(out));
	out.type = REDIS_REPLY_ARRAY;
	out.elements = n;
	out.element = elp;
	return &out;
}

/*
 * One decision in a transaction: DUMP, the call, DUMP, PTTL, PERSIST. Inside
 * MULTI/EXEC Redis freezes the clock for expiry, and PERSIST keeps the state
 * for the next virtual-time call however slowly real time passes: decisions
 * depend on stored times only, and PTTL shows the TTL the script set.
 * now == EMPTY sends "" (Redis TIME).
 */
static void
call_eval(enum alg a, const char *key, const char *okey, const char *now,
    const char *cost, const char *limit, const char *window, const char *burst,
    const char *precision, struct reply *out)
{
	const char *argv[16];
	char fname[64];
	int argc = decision_argv(argv, fname, sizeof(fname), a, key, okey, now,
	    cost, limit, window, burst, precision);
	size_t want = okey == NULL ? NFIELDS : NFIELDS + NEXT;
	redisReply *r, *e;
	int i;

	memset(out, 0, sizeof(*out));
	redisAppendCommand(rc, "MULTI");
	redisAppendCommand(rc, "DUMP %s", key);
	redisAppendCommandArgv(rc, argc, argv, NULL);
	redisAppendCommand(rc, "DUMP %s", key);
	redisAppendCommand(rc, "PTTL %s", key);
	redisAppendCommand(rc, "PERSIST %s", key);
	redisAppendCommand(rc, "EXEC");
	for (i = 0; i < 6; i++) {
		if (redisGetReply(rc, (void **)&r) != REDIS_OK)
			fatal("redis: %s", rc->errstr);
		freeReplyObject(r);
	}
	if (redisGetReply(rc, (void **)&r) != REDIS_OK)
		fatal("redis: %s", rc->errstr);
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 5)
		fatal("EXEC: unexpected reply");
	e = r->element[1];
	if (via == VIA_DECIDE && e->type != REDIS_REPLY_ERROR &&
	    (e = decide_as_standalone(e, okey, out->err, sizeof(out->err))) == NULL) {
		out->is_err = 1;
	} else if (e->type == REDIS_REPLY_ERROR) {
		out->is_err = 1;
		snprintf(out->err, sizeof(out->err), "%s", e->str);
	} else if (e->type != REDIS_REPLY_ARRAY || (e->elements != want &&
	    (okey == NULL || e->elements != want + 1))) {
		out->is_err = 1;
		snprintf(out->err, sizeof(out->err), "not an array of %zu", want);
	} else {
		for (i = 0; i < (int)want; i++) {
			if (e->element[i]->type != REDIS_REPLY_INTEGER) {
				out->is_err = 1;
				snprintf(out->err, sizeof(out->err), "field %d not an integer", i);
			}
			if (i < NFIELDS)
				out->v[i] = e->element[i]->integer;
			else
				out->x[i - NFIELDS] = e->element[i]->integer;
		}
		/* The 12th field: the sentence, exactly when the override was ignored. */
		if (okey != NULL && (e->elements == want + 1) != (out->x[XOVERRIDE] == 3)) {
			out->is_err = 1;
			snprintf(out->err, sizeof(out->err), "%zu fields with override %lld",
			    e->elements, out->x[XOVERRIDE]);
		} else if (e->elements == want + 1) {
			if (e->element[want]->type != REDIS_REPLY_STRING) {
				out->is_err = 1;
				snprintf(out->err, sizeof(out->err), "field 12 not a string");
			} else
				snprintf(out->why, sizeof(out->why), "%s", e->element[want]->str);
		}
	}
	{
		redisReply *d0 = r->element[0], *d1 = r->element[2];

		if (d0->type != d1->type)
			out->changed = 1;
		else if (d0->type == REDIS_REPLY_STRING &&
		    (d0->len != d1->len || memcmp(d0->str, d1->str, d0->len) != 0))
			out->changed = 1;
		free(pre_dump.str);
		pre_dump.str = NULL;
		pre_dump.len = 0;
		if (d0->type == REDIS_REPLY_STRING) {
			if ((pre_dump.str = malloc(d0->len)) == NULL)
				fatal("out of memory");
			memcpy(pre_dump.str, d0->str, d0->len);
			pre_dump.len = d0->len;
		}
	}
	out->pttl = r->element[3]->integer;
	freeReplyObject(r);
}

/* The key as it was before the last call_raw, to run a step again. */
static void
restore_before(const char *key)
{
	if (pre_dump.str)
		freeReplyObject(command("RESTORE %s 0 %b REPLACE", key, pre_dump.str, pre_dump.len));
	else
		freeReplyObject(command("DEL %s", key));
}

static void
call_raw(enum alg a, const char *key, const char *now, const char *cost,
    const char *limit, const char *window, const char *burst,
    const char *precision, struct reply *out)
{
	call_eval(a, key, NULL, now, cost, limit, window, burst, precision, out);
}

/* One decision; with okey, KEYS[2] is the override hash okey. */
static void
call_k(enum alg a, const char *key, const char *okey, long long now,
    long long cost, const struct params *p, struct reply *out)
{
	char n[32], c[32], l[32], w[32], b[32], pr[32];

	fmt_arg(n, sizeof(n), now);
	fmt_arg(c, sizeof(c), cost);
	fmt_arg(l, sizeof(l), p->limit);
	fmt_arg(w, sizeof(w), p->window_ms);
	fmt_arg(b, sizeof(b), p->burst);
	fmt_arg(pr, sizeof(pr), p->precision_ms);
	call_eval(a, key, okey, n, c, l, w, b, pr, out);
	/*
	 * The script sets PTTL reset_ms + 1 against Redis's real clock, but
	 * the test's clock is virtual: if the machine stalls for longer than a
	 * short TTL, the key expires under us. The step depends only on the
	 * state before it and its arguments, so it is run again from there.
	 */
	for (int i = 0; i < 5 && !out->is_err && out->v[ALLOWED] == 1 &&
	    (out->pttl < out->v[RESET] - 1 || out->pttl > out->v[RESET] + 2); i++) {
		reruns++;
		restore_before(key);
		call_eval(a, key, okey, n, c, l, w, b, pr, out);
	}
}

static void
call(enum alg a, const char *key, long long now, long long cost,
    const struct params *p, struct reply *out)
{
	call_k(a, key, NULL, now, cost, p, out);
}

/* LIB_peek's reply (facts.h's RLG_PEEK_*): fields 1-11 as a decision's
 * (remaining and reset_ms of the state as it is), then why, ttl_ms, state. */

/*
 * FCALL_RO LIB_peek at now with call_k's arguments, into pk (its integer
 * fields). Returns 0, or -1 with why in err.
 */
static int
peek_k(enum alg a, const char *key, const char *okey, long long now,
    long long cost, const struct params *p, long long pk[RLG_PEEK_FIELDS],
    char *err, size_t errlen)
{
	char fname[64], v[6][32];
	const char *argv[13];
	redisReply *r;
	int n = 0, i;

	snprintf(fname, sizeof(fname), "%s_peek", rlg_library_name);
	fmt_arg(v[0], sizeof(v[0]), now);
	fmt_arg(v[1], sizeof(v[1]), cost);
	fmt_arg(v[2], sizeof(v[2]), p->limit);
	fmt_arg(v[3], sizeof(v[3]), p->window_ms);
	fmt_arg(v[4], sizeof(v[4]), p->burst);
	fmt_arg(v[5], sizeof(v[5]), p->precision_ms);
	argv[n++] = "FCALL_RO";
	argv[n++] = fname;
	argv[n++] = okey == NULL ? "1" : "2";
	argv[n++] = key;
	if (okey != NULL)
		argv[n++] = okey;
	argv[n++] = alg_names[a];
	for (i = 0; i < 6; i++)
		argv[n++] = v[i];
	if ((r = redisCommandArgv(rc, n, argv, NULL)) == NULL)
		fatal("redis: %s", rc->errstr);
	if (r->type != REDIS_REPLY_ARRAY || r->elements != RLG_PEEK_FIELDS) {
		if (r->type == REDIS_REPLY_ERROR)
			snprintf(err, errlen, "%s: %s", fname, r->str);
		else
			snprintf(err, errlen, "%s: not an array of %d", fname,
			    (int)RLG_PEEK_FIELDS);
		freeReplyObject(r);
		return -1;
	}
	for (i = 0; i < RLG_PEEK_FIELDS; i++) {
		int str = i == RLG_PEEK_WHY || i == RLG_PEEK_STATE;

		if (r->element[i]->type != (str ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER)) {
			snprintf(err, errlen, "%s: field %d of the wrong type", fname, i + 1);
			freeReplyObject(r);
			return -1;
		}
		pk[i] = str ? 0 : r->element[i]->integer;
	}
	freeReplyObject(r);
	return 0;
}

/*
 * Whether peek pk, made just before decision r at the same now (cost, with
 * an override key when ext), agrees with it: the same allowed, limit,
 * retry_after_ms, now_us, delay_ms (and fields 8-11); when denied or
 * unlimited the same remaining and reset_ms; when counted, remaining less
 * cost (at least 0) is the decision's. The number of fields that differ,
 * the first noted.
 */
static int
peek_agrees(const char *what, size_t step, const long long pk[RLG_PEEK_FIELDS],
    const struct reply *r, long long cost, int ext)
{
	static const int same[] = { ALLOWED, LIMIT, RETRY, NOW, DELAY };
	long long want;
	size_t i;
	int bad = 0, as_is = r->v[ALLOWED] == 0 || (ext && r->x[XOVERRIDE] == 2);

	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		if (pk[same[i]] != r->v[same[i]] && bad++ == 0)
			note("%s step %zu: peek's %s %lld, the decision's %lld", what, step,
			    field_names[same[i]], pk[same[i]], r->v[same[i]]);
	want = as_is ? pk[REMAINING] : pk[REMAINING] - cost < 0 ? 0 : pk[REMAINING] - cost;
	if (want != r->v[REMAINING] && bad++ == 0)
		note("%s step %zu: peek's remaining %lld%s, the decision's %lld", what, step,
		    pk[REMAINING], as_is ? "" : " less the cost", r->v[REMAINING]);
	if (as_is && pk[RESET] != r->v[RESET] && bad++ == 0)
		note("%s step %zu: peek's reset_ms %lld, the decision's %lld", what, step,
		    pk[RESET], r->v[RESET]);
	for (i = 0; ext && i < NEXT; i++)
		if (pk[RLG_PEEK_WINDOW_MS + i] != r->x[i] && bad++ == 0)
			note("%s step %zu: peek's %s %lld, the decision's %lld", what, step,
			    ext_names[i], pk[RLG_PEEK_WINDOW_MS + i], r->x[i]);
	return bad;
}

static void
make_key(char *buf, size_t len, const char *what, enum alg a, int n)
{
	snprintf(buf, len, "%s{%s:%s:%d}", prefix, alg_names[a], what, n);
}

/* ---------------------------------------------------------------------
 * Hand-computed sequences: exact numbers worked out on paper, in the
 * header comments' terms.
 */

struct step {
	long long	t_us;		/* from T0 */
	long long	cost;
	long long	allowed, remaining, reset, retry, delay;
};

static int
run_steps(enum alg a, const char *what, const struct params *p,
    const struct step *s, size_t n)
{
	char key[128], pwhat[160], perr[256];
	long long pk[RLG_PEEK_FIELDS];
	struct reply r;
	size_t i;
	int bad = 0, pbad = 0;

	snprintf(key, sizeof(key), "%s{%s:hand:%s}", prefix, alg_names[a], what);
	snprintf(pwhat, sizeof(pwhat), "%s %s", alg_names[a], what);
	for (i = 0; i < n; i++) {
		long long want[NFIELDS] = { s[i].allowed, s[i].remaining, p->limit,
		    s[i].reset, s[i].retry, T0 + s[i].t_us, s[i].delay };
		int f;

		if (peek_k(a, key, NULL, T0 + s[i].t_us, s[i].cost, p, pk, perr,
		    sizeof(perr)) == -1) {
			ok(0, "%s %s step %zu: peek: %s", alg_names[a], what, i + 1, perr);
			return -1;
		}
		call(a, key, T0 + s[i].t_us, s[i].cost, p, &r);
		if (r.is_err) {
			ok(0, "%s %s step %zu: error %s", alg_names[a], what, i + 1, r.err);
			return -1;
		}
		pbad += peek_agrees(pwhat, i + 1, pk, &r, s[i].cost, 0);
		for (f = 0; f < NFIELDS; f++)
			if (r.v[f] != want[f]) {
				if (!bad)
					note("%s %s step %zu (t=%lld us, cost %lld): %s is %lld, expected %lld",
					    alg_names[a], what, i + 1, s[i].t_us, s[i].cost,
					    field_names[f], r.v[f], want[f]);
				bad++;
			}
		if (r.v[ALLOWED] == 1 && (r.pttl < r.v[RESET] - 1 || r.pttl > r.v[RESET] + 2)) {
			note("%s %s step %zu: PTTL %lld after admission, reset_ms %lld",
			    alg_names[a], what, i + 1, r.pttl, r.v[RESET]);
			bad++;
		}
		if (r.v[ALLOWED] == 0 && (r.changed || r.pttl != -1)) {
			note("%s %s step %zu: a denied request changed the key", alg_names[a], what, i + 1);
			bad++;
		}
	}
	ok(bad == 0, "%s: hand-computed sequence \"%s\" (%zu requests, exact replies, TTL = reset_ms + 1)",
	    alg_names[a], what, n);
	ok(pbad == 0, "%s: %s_peek before each step of \"%s\" agrees with the decision that follows "
	    "(allowed, remaining, reset_ms, retry_after_ms, delay_ms)", alg_names[a], rlg_library_name, what);
	return bad ? -1 : 0;
}

#define MS	1000LL
#define NSTEPS(s)	(sizeof(s) / sizeof((s)[0]))

/* Hand-computed sequences, as each lua/<algorithm>.lua comment words it. */
/* limit 3 per 1000 ms. */
static const struct step hand_fixed[] = {
	{ 0,		1, 1, 2, 1000, 0, 0 },
	{ 0,		1, 1, 1, 1000, 0, 0 },
	{ 400 * MS,	1, 1, 0, 600, 0, 0 },
	{ 400 * MS,	1, 0, 0, 600, 600, 0 },
	{ 999999,	1, 0, 0, 1, 1, 0 },	/* 1 us before the end: 1 ms, rounded up */
	{ 1000 * MS,	2, 1, 1, 1000, 0, 0 },	/* opens [1000, 2000) */
	{ 1500 * MS,	2, 0, 1, 500, 500, 0 },
	{ 1500 * MS,	1, 1, 0, 500, 0, 0 },
	{ 5000 * MS,	3, 1, 0, 1000, 0, 0 },	/* opens at 5000, not at a multiple */
	{ 5999 * MS,	1, 0, 0, 1, 1, 0 },
	{ 6000 * MS,	1, 1, 2, 1000, 0, 0 },
};
/* limit 7 per 1000 ms, burst 3: a token every 142857.142857 us. */
static const struct step hand_token[] = {
	{ 0,		1, 1, 2, 143, 0, 0 },
	{ 0,		1, 1, 1, 286, 0, 0 },
	{ 0,		1, 1, 0, 429, 0, 0 },
	{ 0,		1, 0, 0, 429, 143, 0 },
	{ 142 * MS,	1, 0, 0, 287, 1, 0 },	/* 0.994 tokens, 858 us short */
	{ 142857,	1, 0, 0, 286, 1, 0 },	/* 0.999999 tokens: 1 us short */
	{ 142858,	1, 1, 0, 429, 0, 0 },	/* 1.000006 tokens */
	{ 1142 * MS,	3, 1, 0, 429, 0, 0 },	/* full again */
	{ 1142 * MS,	1, 0, 0, 429, 143, 0 },
};
/* limit 10 per 1000 ms, burst empty (= 10), cost 4. */
static const struct step hand_token_cost[] = {
	{ 0,		4, 1, 6, 400, 0, 0 },
	{ 0,		4, 1, 2, 800, 0, 0 },
	{ 0,		4, 0, 2, 800, 200, 0 },
	{ 199999,	4, 0, 3, 601, 1, 0 },	/* 3.99999 tokens */
	{ 200 * MS,	4, 1, 0, 1000, 0, 0 },
	{ 10000 * MS,	1, 1, 9, 100, 0, 0 },
};
/*
 * redis-cell's README: CL.THROTTLE user123 15 30 60 1 (max_burst 15,
 * 30 per 60 s) answers allowed, limit 16, remaining 15, reset after 2 s.
 * Its capacity is max_burst + 1: here burst = 16.
 */
static const struct step hand_cell[] = {
	{ 0, 1, 1, 15, 2000, 0, 0 },  { 0, 1, 1, 14, 4000, 0, 0 },
	{ 0, 1, 1, 13, 6000, 0, 0 },  { 0, 1, 1, 12, 8000, 0, 0 },
	{ 0, 1, 1, 11, 10000, 0, 0 }, { 0, 1, 1, 10, 12000, 0, 0 },
	{ 0, 1, 1, 9, 14000, 0, 0 },  { 0, 1, 1, 8, 16000, 0, 0 },
	{ 0, 1, 1, 7, 18000, 0, 0 },  { 0, 1, 1, 6, 20000, 0, 0 },
	{ 0, 1, 1, 5, 22000, 0, 0 },  { 0, 1, 1, 4, 24000, 0, 0 },
	{ 0, 1, 1, 3, 26000, 0, 0 },  { 0, 1, 1, 2, 28000, 0, 0 },
	{ 0, 1, 1, 1, 30000, 0, 0 },  { 0, 1, 1, 0, 32000, 0, 0 },
	{ 0, 1, 0, 0, 32000, 2000, 0 },
	{ 1999 * MS, 1, 0, 0, 30001, 1, 0 },
	{ 2000 * MS, 1, 1, 0, 32000, 0, 0 },
	{ 2000 * MS, 1, 0, 0, 32000, 2000, 0 },
	{ 3999999, 1, 0, 0, 30001, 1, 0 },	/* TAT 34 s: 1 us short */
	{ 4000 * MS, 1, 1, 0, 32000, 0, 0 },
	{ 12000 * MS, 5, 0, 4, 24000, 2000, 0 },	/* 4 tokens back, not 5 */
	{ 12000 * MS, 4, 1, 0, 32000, 0, 0 },
	{ 70000 * MS, 16, 1, 0, 32000, 0, 0 },	/* full: the whole burst at once */
};
/* limit 1 per 1000 ms, burst 3: one request leaves per second. */
static const struct step hand_leaky[] = {
	{ 0,		1, 1, 3, 1000, 0, 0 },		/* idle: leaves at once */
	{ 0,		1, 1, 2, 2000, 0, 1000 },
	{ 0,		1, 1, 1, 3000, 0, 2000 },
	{ 0,		1, 1, 0, 4000, 0, 3000 },	/* burst 3 waiting */
	{ 0,		1, 0, 0, 4000, 1000, 0 },
	{ 500 * MS,	1, 0, 0, 3500, 500, 0 },
	{ 999 * MS,	1, 0, 0, 3001, 1, 0 },
	{ 1000 * MS,	1, 1, 0, 4000, 0, 3000 },
	{ 3500 * MS,	2, 1, 0, 3500, 0, 1500 },	/* cost 2 holds the outlet 2 s */
	{ 3500 * MS,	1, 0, 0, 3500, 500, 0 },
	{ 6500 * MS,	1, 1, 2, 1500, 0, 500 },
	{ 10000 * MS,	1, 1, 3, 1000, 0, 0 },		/* idle again */
};
/* limit 3 per 1000 ms, burst empty (= 3): one every 333333.333 us. */
static const struct step hand_leaky_frac[] = {
	{ 0,		1, 1, 3, 334, 0, 0 },
	{ 0,		1, 1, 2, 667, 0, 334 },
	{ 0,		1, 1, 1, 1000, 0, 667 },
	{ 0,		1, 1, 0, 1334, 0, 1000 },
	{ 0,		1, 0, 0, 1334, 334, 0 },
	{ 333333,	1, 0, 0, 1001, 1, 0 },		/* wait 1000000.33 us > 1 s */
	{ 333334,	1, 1, 0, 1334, 0, 1000 },	/* wait 999999.33 us */
};
/* limit 3 per 1000 ms. */
static const struct step hand_slog[] = {
	{ 0,		1, 1, 2, 1000, 0, 0 },
	{ 0,		1, 1, 1, 1000, 0, 0 },
	{ 100 * MS,	1, 1, 0, 1000, 0, 0 },
	{ 100 * MS,	1, 0, 0, 1000, 900, 0 },
	{ 200 * MS,	1, 0, 0, 900, 800, 0 },
	{ 999 * MS,	1, 0, 0, 101, 1, 0 },
	{ 999999,	1, 0, 0, 101, 1, 0 },
	{ 1000 * MS,	1, 1, 1, 1000, 0, 0 },	/* both at 0 left: (0, 1000] */
	{ 1001 * MS,	1, 1, 0, 1000, 0, 0 },
	{ 1100 * MS,	1, 1, 0, 1000, 0, 0 },
	{ 1100 * MS,	1, 0, 0, 1000, 900, 0 },
	{ 1100 * MS,	3, 0, 0, 1000, 1000, 0 },	/* all three must leave */
	{ 2100 * MS,	2, 1, 1, 1000, 0, 0 },
	{ 2100 * MS,	2, 0, 1, 1000, 1000, 0 },
};
/* limit 3 per 1000 ms, precision 100 ms (10 blocks); T0 is block-aligned. */
static const struct step hand_swin[] = {
	{ 0,		1, 1, 2, 1000, 0, 0 },
	{ 0,		1, 1, 1, 1000, 0, 0 },
	{ 100 * MS,	1, 1, 0, 1000, 0, 0 },
	{ 100 * MS,	1, 0, 0, 1000, 900, 0 },
	{ 250 * MS,	1, 0, 0, 850, 750, 0 },
	{ 999999,	1, 0, 0, 101, 1, 0 },
	{ 1000 * MS,	1, 1, 1, 1000, 0, 0 },	/* block 0 dropped out */
	{ 1050 * MS,	1, 1, 0, 950, 0, 0 },
	{ 1050 * MS,	1, 0, 0, 950, 50, 0 },
	{ 1100 * MS,	2, 0, 1, 900, 900, 0 },	/* block 10 (2) must go */
	{ 1100 * MS,	1, 1, 0, 1000, 0, 0 },
};
static void
test_hand(void)
{
	struct params p;
	redisReply *h;
	char key[128];

	p = (struct params){ 3, 1000, EMPTY, EMPTY };
	run_steps(FIXED, "3 per 1000 ms", &p, hand_fixed, NSTEPS(hand_fixed));
	p = (struct params){ 7, 1000, 3, EMPTY };
	run_steps(TOKEN, "7 per 1000 ms, burst 3", &p, hand_token, NSTEPS(hand_token));
	run_steps(GCRA, "7 per 1000 ms, burst 3", &p, hand_token, NSTEPS(hand_token));
	p = (struct params){ 10, 1000, EMPTY, EMPTY };
	run_steps(TOKEN, "10 per 1000 ms, cost 4", &p, hand_token_cost, NSTEPS(hand_token_cost));
	run_steps(GCRA, "10 per 1000 ms, cost 4", &p, hand_token_cost, NSTEPS(hand_token_cost));
	p = (struct params){ 30, 60000, 16, EMPTY };
	run_steps(GCRA, "redis-cell CL.THROTTLE 15 30 60", &p, hand_cell, NSTEPS(hand_cell));
	run_steps(TOKEN, "redis-cell CL.THROTTLE 15 30 60", &p, hand_cell, NSTEPS(hand_cell));
	p = (struct params){ 1, 1000, 3, EMPTY };
	run_steps(LEAKY, "1 per 1000 ms, burst 3", &p, hand_leaky, NSTEPS(hand_leaky));
	p = (struct params){ 3, 1000, EMPTY, EMPTY };
	run_steps(LEAKY, "3 per 1000 ms", &p, hand_leaky_frac, NSTEPS(hand_leaky_frac));
	run_steps(SLOG, "3 per 1000 ms", &p, hand_slog, NSTEPS(hand_slog));
	p = (struct params){ 3, 1000, EMPTY, 100 };
	run_steps(SWINDOW, "3 per 1000 ms, precision 100", &p, hand_swin, NSTEPS(hand_swin));

	/* The blocks that dropped out were deleted, the live ones kept. */
	snprintf(key, sizeof(key), "%s{%s:hand:%s}", prefix, alg_names[SWINDOW],
	    "3 per 1000 ms, precision 100");
	h = command("HGETALL %s", key);
	{
		long long j = T0 / 100000;
		char want[128], got[128] = "";
		size_t i;

		snprintf(want, sizeof(want), "%lld=2 %lld=1 ", j + 10, j + 11);
		for (i = 0; i + 1 < h->elements; i += 2) {
			size_t len = strlen(got);

			snprintf(got + len, sizeof(got) - len, "%s=%s ", h->element[i]->str,
			    h->element[i + 1]->str);
		}
		ok(strcmp(want, got) == 0, "sliding_window: dropped blocks deleted, live ones kept (%s)", got);
	}
	freeReplyObject(h);

	/* The seeds' load test: 110 requests at once against 100 per second. */
	{
		int admitted = 0, last_denied_retry = -1, i;
		struct reply r;

		p = (struct params){ 100, 1000, EMPTY, EMPTY };
		snprintf(key, sizeof(key), "%s{fixed_window:ab}", prefix);
		for (i = 0; i < 110; i++) {
			call(FIXED, key, T0 + i, 1, &p, &r);
			admitted += r.v[ALLOWED] == 1;
			if (r.v[ALLOWED] == 0)
				last_denied_retry = (int)r.v[RETRY];
		}
		ok(admitted == 100 && last_denied_retry == 1000,
		    "fixed_window: 110 requests within 110 us against 100 per second: %d admitted, %d denied",
		    admitted, 110 - admitted);
	}
}

/* ---------------------------------------------------------------------
 * Randomised sequences against the model, and the promises.
 */

struct run {
	long long	*t, *cost, *delay;	/* admitted requests */
	size_t		 n, cap;
};

static void
run_push(struct run *x, long long t, long long cost, long long delay)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 1024;
		x->t = realloc(x->t, x->cap * sizeof(*x->t));
		x->cost = realloc(x->cost, x->cap * sizeof(*x->cost));
		x->delay = realloc(x->delay, x->cap * sizeof(*x->delay));
		if (!x->t || !x->cost || !x->delay)
			fatal("out of memory");
	}
	x->t[x->n] = t;
	x->cost[x->n] = cost;
	x->delay[x->n] = delay;
	x->n++;
}

static void
run_free(struct run *x)
{
	free(x->t);
	free(x->cost);
	free(x->delay);
	memset(x, 0, sizeof(*x));
}

/* Largest cost admitted in any interval (t - len, t], len in us. */
static long long
max_in_interval(const struct run *x, long long len)
{
	long long sum = 0, best = 0;
	size_t i, j = 0;

	for (i = 0; i < x->n; i++) {
		sum += x->cost[i];
		while (j < i && x->t[j] <= x->t[i] - len)
			sum -= x->cost[j++];
		if (sum > best)
			best = sum;
	}
	return best;
}

/* verify_admissions() on a[0..n) of a run of a, p: its violations (-1:
 * an error, in err). */
static long long
promise_violations(enum alg a, const struct params *p,
    const struct verify_admission *adm, size_t n, char *err, size_t len)
{
	struct verify v = { 0 };
	long long burst = p->burst == EMPTY ? p->limit : p->burst, nv;
	long long prec = a != SWINDOW ? 0 : p->precision_ms == EMPTY ?
	    conf_default_precision(p->window_ms) : p->precision_ms;

	nv = verify_admissions(&v, (enum rlg_algorithm)a, p->limit, p->window_ms,
	    a == TOKEN || a == GCRA || a == LEAKY ? burst : p->limit, prec, adm,
	    n, err, len) == -1 ? -1 : (long long)v.nv;
	if (nv > 0)
		snprintf(err, len, "%s", v.v[0].detail);
	verify_free(&v);
	return nv;
}

/*
 * The promise of each algorithm over the admitted requests of one run, as
 * rlgate-report --verify checks an audit database: the times as the
 * gateway writes them (now_us / 1000), the same slack for them. Then the
 * same with 2 x max(limit, burst) + 3 more admissions at the last one's
 * ms, which break every promise: the check must see it.
 */
static void
check_promise(enum alg a, const struct params *p, const struct run *x, const char *what)
{
	long long burst = p->burst == EMPTY ? p->limit : p->burst, nv;
	size_t i, extra = (size_t)(2 * (burst > p->limit ? burst : p->limit) + 3);
	struct verify_admission *adm = calloc(x->n + extra + 1, sizeof(*adm));
	char err[320] = "";

	if (adm == NULL)
		fatal("out of memory");
	for (i = 0; i < x->n; i++)
		adm[i] = (struct verify_admission){ x->t[i] / 1000, x->cost[i],
		    x->delay[i] };
	nv = promise_violations(a, p, adm, x->n, err, sizeof(err));
	ok(nv == 0, "%s %s: rlgate-report's promise check passes the %zu "
	    "admissions (%lld violations%s%s)", alg_names[a], what, x->n, nv,
	    nv ? ": " : "", err);
	for (i = 0; i < extra; i++)
		adm[x->n + i] = (struct verify_admission){ x->n ? adm[x->n - 1].ts_ms :
		    T0 / 1000, 1, 0 };
	err[0] = '\0';
	nv = promise_violations(a, p, adm, x->n + extra, err, sizeof(err));
	ok(nv > 0, "%s %s: and finds %zu more admissions in one ms a violation (%lld)",
	    alg_names[a], what, extra, nv);
	free(adm);
}

static long long
capacity(enum alg a, const struct params *p)
{
	long long b = p->burst == EMPTY ? p->limit : p->burst;

	if (a == TOKEN || a == GCRA)
		return b;
	if (a == LEAKY)
		return 5;
	return p->limit;
}

static void
describe(char *buf, size_t len, enum alg a, const struct params *p)
{
	int n = snprintf(buf, len, "%lld per %lld ms", p->limit, p->window_ms);

	if (a == TOKEN || a == GCRA || a == LEAKY) {
		if (p->burst == EMPTY)
			snprintf(buf + n, len - (size_t)n, ", burst empty (%lld)", p->limit);
		else
			snprintf(buf + n, len - (size_t)n, ", burst %lld", p->burst);
	} else if (a == SWINDOW) {
		if (p->precision_ms == EMPTY)
			snprintf(buf + n, len - (size_t)n, ", precision empty (%lld ms)",
			    conf_default_precision(p->window_ms));
		else
			snprintf(buf + n, len - (size_t)n, ", precision %lld ms", p->precision_ms);
	}
}

/*
 * count requests with random costs and gaps; each reply is compared field by
 * field with the model, every admission's TTL with reset_ms, every denial
 * must leave the key untouched. The admitted requests go to *x.
 */
static void
random_run(enum alg a, const struct params *p, int count, int idx, struct run *x)
{
	struct twin m;
	struct reply r;
	char key[128], what[96];
	long long now = T0 + rnd_between(0, 999999), want[NFIELDS], cap = capacity(a, p);
	long long typ_gap = p->window_ms * 1000 / p->limit + 1, last_retry = 0;
	int i, f, mismatches = 0, ttl_bad = 0, deny_bad = 0, admitted = 0;

	twin_init(&m, a, p);
	make_key(key, sizeof(key), "random", a, idx);
	describe(what, sizeof(what), a, p);
	for (i = 0; i < count; i++) {
		unsigned k = (unsigned)(rnd() % 100);
		long long cost;

		/* Gaps: simultaneous, around the rate, long, or exactly the
		 * last retry_after (and 1 ms or 1 us short of it). */
		if (k < 30)
			;
		else if (k < 65)
			now += rnd_between(1, 2 * typ_gap);
		else if (k < 80)
			now += rnd_between(1, p->window_ms * 1000 / 4 + 1);
		else if (k < 85)
			now += rnd_between(1, 3 * p->window_ms * 1000);
		else if (k < 95 && last_retry > 0)
			now += last_retry * 1000 - (k < 90 ? 0 : k < 93 ? 1000 : 1);
		else
			now += rnd_between(0, 3) * 1000;
		k = (unsigned)(rnd() % 100);
		cost = k < 70 ? 1 : k < 97 ? rnd_between(1, cap < 5 ? cap : 5) : cap;

		twin_decide(&m, now, cost, want);
		call(a, key, now, cost, p, &r);
		if (r.is_err) {
			ok(0, "%s random %s: error at request %d: %s", alg_names[a], what, i, r.err);
			twin_free(&m);
			return;
		}
		for (f = 0; f < NFIELDS; f++)
			if (r.v[f] != want[f]) {
				if (mismatches < 3)
					note("%s request %d (now %lld, cost %lld): %s is %lld, model says %lld",
					    alg_names[a], i, now, cost, field_names[f], r.v[f], want[f]);
				mismatches++;
				break;
			}
		if (r.v[ALLOWED] == 1) {
			admitted++;
			run_push(x, now, cost, r.v[DELAY]);
			if (r.pttl < r.v[RESET] - 1 || r.pttl > r.v[RESET] + 2 || r.pttl < 0) {
				if (ttl_bad < 3)
					note("%s request %d: PTTL %lld after admission, reset_ms %lld",
					    alg_names[a], i, r.pttl, r.v[RESET]);
				ttl_bad++;
			}
			last_retry = 0;
		} else {
			if (r.changed || r.pttl != -1)
				deny_bad++;
			last_retry = r.v[RETRY];
		}
	}
	ok(mismatches == 0, "%s random %s: %d requests (%d admitted) match the model request by request (%d mismatches)",
	    alg_names[a], what, count, admitted, mismatches);
	ok(ttl_bad == 0, "%s random %s: every admission sets PTTL = reset_ms + 1 (%d wrong)",
	    alg_names[a], what, ttl_bad);
	ok(deny_bad == 0, "%s random %s: every denial leaves the key as it was (%d changed)",
	    alg_names[a], what, deny_bad);
	check_promise(a, p, x, what);
	twin_free(&m);
}

static void
test_random(int count)
{
	static const struct {
		enum alg	a;
		struct params	p;
	} sets[] = {
		{ FIXED,   { 5, 1000, EMPTY, EMPTY } },
		{ FIXED,   { 100, 1000, EMPTY, EMPTY } },
		{ FIXED,   { 7, 3, EMPTY, EMPTY } },
		{ SWINDOW, { 5, 1000, EMPTY, EMPTY } },
		{ SWINDOW, { 20, 3000, EMPTY, 300 } },
		{ SWINDOW, { 3, 7, EMPTY, 1 } },
		{ SWINDOW, { 10, 1000, EMPTY, 1000 } },
		{ SLOG,    { 5, 1000, EMPTY, EMPTY } },
		{ SLOG,    { 50, 3000, EMPTY, EMPTY } },
		{ SLOG,    { 3, 7, EMPTY, EMPTY } },
		{ TOKEN,   { 7, 1000, 3, EMPTY } },
		{ TOKEN,   { 100, 1000, EMPTY, EMPTY } },
		{ TOKEN,   { 3, 7, 5, EMPTY } },
		{ TOKEN,   { 30, 60000, 16, EMPTY } },
		{ TOKEN,   { 13, 1000, 1, EMPTY } },
		{ TOKEN,   { 1000, 86400000, 50, EMPTY } },
		{ GCRA,    { 7, 1000, 3, EMPTY } },
		{ GCRA,    { 100, 1000, EMPTY, EMPTY } },
		{ GCRA,    { 3, 7, 5, EMPTY } },
		{ GCRA,    { 30, 60000, 16, EMPTY } },
		{ GCRA,    { 13, 1000, 1, EMPTY } },
		{ GCRA,    { 1000, 86400000, 50, EMPTY } },
		{ LEAKY,   { 1, 1000, 3, EMPTY } },
		{ LEAKY,   { 3, 1000, EMPTY, EMPTY } },
		{ LEAKY,   { 7, 13, 0, EMPTY } },
		{ LEAKY,   { 100, 1000, 10, EMPTY } },
	};
	size_t i;

	for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		struct run x = { 0 };

		random_run(sets[i].a, &sets[i].p, count, (int)i, &x);
		run_free(&x);
	}
}

/* gcra and token_bucket: the same decisions for the same arrivals. */
static void
test_gcra_equals_token(int count)
{
	static const struct params ps[] = {
		{ 7, 1000, 3, EMPTY }, { 999, 60000, 17, EMPTY }, { 1, 1, 1, EMPTY },
		{ 5, 3000, 40, EMPTY },
	};
	size_t k;

	for (k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		char kt[128], kg[128];
		struct reply rt, rg;
		long long now = T0, b = ps[k].burst;
		int i, diff = 0, admitted = 0;

		make_key(kt, sizeof(kt), "same", TOKEN, (int)k);
		make_key(kg, sizeof(kg), "same", GCRA, (int)k);
		for (i = 0; i < count; i++) {
			long long cost = rnd() % 4 ? 1 : rnd_between(1, b);

			now += rnd() % 3 ? (long long)(rnd() % (uint64_t)(2 * ps[k].window_ms * 1000 / ps[k].limit + 2)) : 0;
			call(TOKEN, kt, now, cost, &ps[k], &rt);
			call(GCRA, kg, now, cost, &ps[k], &rg);
			if (rt.is_err || rg.is_err || memcmp(rt.v, rg.v, sizeof(rt.v)) != 0)
				diff++;
			admitted += rt.v[ALLOWED] == 1;
		}
		ok(diff == 0, "gcra = token_bucket, limit %lld per %lld ms, burst %lld: %d requests (%d admitted), %d replies differ",
		    ps[k].limit, ps[k].window_ms, b, count, admitted, diff);
	}
}

/*
 * rlgate_undo: an extra request on key at t (rlgate_decide, one rule), then
 * rlgate_undo of what it counted at undo_at, each in a transaction with
 * PERSIST (virtual time). Returns what rlgate_undo replied (rules undone), or
 * -1 when the extra request was not counted (no token).
 */
static long long
extra_and_undo(enum alg a, const char *key, long long t, long long cost,
    const struct params *p, long long undo_at)
{
	char n[32], c[32], l[32], w[32], b[32], pr[32], u[32], tok[256], sig[256];
	const char *argv[16] = { "FCALL", rlg_fn_decide, "1", key, "", n, sig };
	const char *uargv[8] = { "FCALL", rlg_fn_undo, "1", key, u, alg_names[a], tok };
	struct limiter_row row;
	redisReply *r, *e;
	long long undone;
	int i;

	snprintf(n, sizeof(n), "%lld", t);
	snprintf(c, sizeof(c), "%lld", cost);
	snprintf(l, sizeof(l), "%lld", p->limit);
	snprintf(w, sizeof(w), "%lld", p->window_ms);
	fmt_arg(b, sizeof(b), p->burst);
	fmt_arg(pr, sizeof(pr), p->precision_ms);
	snprintf(u, sizeof(u), "%lld", undo_at);
	snprintf(sig, sizeof(sig), "%s u %s %s %s %s %s", alg_names[a], c, l, w, b, pr);
	for (int step = 0; step < 2; step++) {
		redisAppendCommand(rc, "MULTI");
		if (step == 0)
			redisAppendCommandArgv(rc, 7, argv, NULL);
		else
			redisAppendCommandArgv(rc, 7, uargv, NULL);
		redisAppendCommand(rc, "PERSIST %s", key);
		redisAppendCommand(rc, "EXEC");
		for (i = 0; i < 3; i++) {
			if (redisGetReply(rc, (void **)&r) != REDIS_OK)
				fatal("redis: %s", rc->errstr);
			freeReplyObject(r);
		}
		if (redisGetReply(rc, (void **)&r) != REDIS_OK)
			fatal("redis: %s", rc->errstr);
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
			fatal("EXEC: unexpected reply");
		e = r->element[0];
		if (step == 0) {
			if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
			    e->element[1]->type != REDIS_REPLY_STRING ||
			    limiter_row(e->element[1]->str, e->element[1]->len, &row) == -1)
				fatal("rlgate_decide: %s", e->type == REDIS_REPLY_ERROR ? e->str : "bad reply");
			snprintf(tok, sizeof(tok), "%.*s", (int)row.undo_len, row.undo);
			freeReplyObject(r);
			if (tok[0] == '\0')
				return -1;
			continue;
		}
		if (e->type != REDIS_REPLY_INTEGER)
			fatal("rlgate_undo: %s", e->type == REDIS_REPLY_ERROR ? e->str : "bad reply");
		undone = e->integer;
		freeReplyObject(r);
		return undone;
	}
	return 0;
}

/*
 * A request decided and then undone leaves the key as if it had never been
 * sent: key x gets random extra requests, each undone before the next real
 * one (after a random wait), and twin key y none; every real request gets
 * the same reply on both.
 */
static void
test_undo_twin(int count)
{
	static const struct {
		enum alg	a;
		struct params	p;
	} sets[] = {
		{ FIXED,   { 5, 1000, EMPTY, EMPTY } },
		{ FIXED,   { 7, 3, EMPTY, EMPTY } },
		{ SWINDOW, { 5, 1000, EMPTY, EMPTY } },
		{ SWINDOW, { 20, 3000, EMPTY, 300 } },
		{ SLOG,    { 5, 1000, EMPTY, EMPTY } },
		{ SLOG,    { 3, 7, EMPTY, EMPTY } },
		{ TOKEN,   { 7, 1000, 3, EMPTY } },
		{ TOKEN,   { 3, 7, 5, EMPTY } },
		{ GCRA,    { 7, 1000, 3, EMPTY } },
		{ GCRA,    { 3, 7, 5, EMPTY } },
		{ LEAKY,   { 3, 1000, EMPTY, EMPTY } },
		{ LEAKY,   { 7, 13, 2, EMPTY } },
	};
	size_t k;

	for (k = 0; k < sizeof(sets) / sizeof(sets[0]); k++) {
		const struct params *p = &sets[k].p;
		enum alg a = sets[k].a;
		long long max_cost = p->limit, now = T0, gap = 2 * p->window_ms * 1000 / p->limit + 2;
		char kx[128], ky[128];
		struct reply rx, ry;
		int i, diff = 0, extras = 0, undone = 0, admitted = 0;

		if ((a == TOKEN || a == GCRA) && p->burst != EMPTY)
			max_cost = p->burst;
		if (a == LEAKY)
			max_cost = 3;
		make_key(kx, sizeof(kx), "undo:x", a, (int)k);
		make_key(ky, sizeof(ky), "undo:y", a, (int)k);
		for (i = 0; i < count; i++) {
			long long cost = rnd() % 4 ? 1 : rnd_between(1, max_cost);

			now += rnd() % 3 ? (long long)(rnd() % (uint64_t)gap) : 0;
			if (rnd() % 3 == 0) {
				long long u, t = now;

				/* undone at once, or a little later */
				now += rnd() % 2 ? 0 : (long long)(rnd() % (uint64_t)(gap / 2 + 1));
				u = extra_and_undo(a, kx, t, rnd() % 2 ? 1 : rnd_between(1, max_cost), p, now);
				if (u >= 0)
					extras++;
				undone += u == 1;
			}
			call(a, kx, now, cost, p, &rx);
			call(a, ky, now, cost, p, &ry);
			if (rx.is_err || ry.is_err || memcmp(rx.v, ry.v, sizeof(rx.v)) != 0) {
				if (diff++ < 3)
					note("%s step %d: x %lld %lld %lld %lld %lld, twin %lld %lld %lld %lld %lld",
					    alg_names[a], i, rx.v[ALLOWED], rx.v[REMAINING], rx.v[RESET],
					    rx.v[RETRY], rx.v[DELAY], ry.v[ALLOWED], ry.v[REMAINING],
					    ry.v[RESET], ry.v[RETRY], ry.v[DELAY]);
			}
			admitted += ry.v[ALLOWED] == 1;
		}
		ok(diff == 0 && undone > 0 && admitted < count,
		    "%s, limit %lld per %lld ms: %d requests (%d admitted) with %d extra ones counted "
		    "and undone (%d took something back): %d replies differ from the twin's",
		    alg_names[a], p->limit, p->window_ms, count, admitted, extras, undone, diff);
	}
}

/*
 * retry_after_ms never rounds down: after each denial, a request sent 1 ms
 * before retry_after_ms is denied and one sent exactly then is admitted
 * (the state is put back with RESTORE between the two branches).
 */
static void
test_retry(int count)
{
	static const struct {
		enum alg	a;
		struct params	p;
	} sets[] = {
		{ FIXED,   { 5, 1000, EMPTY, EMPTY } },
		{ SWINDOW, { 5, 1000, EMPTY, EMPTY } },
		{ SLOG,    { 5, 1000, EMPTY, EMPTY } },
		{ TOKEN,   { 7, 1000, 3, EMPTY } },
		{ GCRA,    { 7, 1000, 3, EMPTY } },
		{ LEAKY,   { 3, 1000, 2, EMPTY } },
	};
	size_t s;

	for (s = 0; s < sizeof(sets) / sizeof(sets[0]); s++) {
		enum alg a = sets[s].a;
		const struct params *p = &sets[s].p;
		long long now = T0 + 7, cap = capacity(a, p);
		int denials = 0, early_admitted = 0, exact_denied = 0, zero = 0, i;
		char key[128];
		struct reply r, r1;

		make_key(key, sizeof(key), "retry", a, 0);
		for (i = 0; i < count && denials < count / 4; i++) {
			long long cost = rnd() % 3 ? 1 : rnd_between(1, cap);
			redisReply *d;

			now += rnd() % 2 ? 0 : rnd_between(1, 400000);
			call(a, key, now, cost, p, &r);
			if (r.is_err || r.v[ALLOWED] == 1)
				continue;
			denials++;
			if (r.v[RETRY] < 1) {
				zero++;
				continue;
			}
			d = command("DUMP %s", key);
			call(a, key, now + (r.v[RETRY] - 1) * 1000, cost, p, &r1);
			early_admitted += r1.v[ALLOWED] == 1;
			if (r1.v[ALLOWED] == 1) {
				freeReplyObject(command("RESTORE %s 0 %b REPLACE", key, d->str, d->len));
			}
			call(a, key, now + r.v[RETRY] * 1000, cost, p, &r1);
			exact_denied += r1.v[ALLOWED] == 0;
			freeReplyObject(command("RESTORE %s 0 %b REPLACE", key, d->str, d->len));
			freeReplyObject(d);
		}
		ok(denials > 50 && zero == 0 && exact_denied == 0,
		    "%s: after %d denials, waiting exactly retry_after_ms admits every time (%d denied, %d zero)",
		    alg_names[a], denials, exact_denied, zero);
		ok(denials > 50 && early_admitted == 0,
		    "%s: after %d denials, waiting 1 ms less never admits (%d admitted)",
		    alg_names[a], denials, early_admitted);
	}
}

/*
 * The seeds' boundary problem: 1000 per 3 s. An attacker sends one request,
 * then 1100 just before the window closes and 1100 just after.
 */
static void
test_boundary(void)
{
	static const struct params p = { 1000, 3000, EMPTY, 300 };
	static const enum alg algs[] = { FIXED, SLOG, SWINDOW };
	size_t k;

	for (k = 0; k < 3; k++) {
		enum alg a = algs[k];
		struct run x = { 0 };
		struct reply r;
		char key[128];
		long long t;
		int i;

		make_key(key, sizeof(key), "boundary", a, 0);
		/* A request every 100 ms for 9 s, and 1100 in the last ms of
		 * each 3 s and in the first ms of the next. */
		for (t = 0; t < 9000; t += 1) {
			long long now = T0 + t * 1000;
			int n = (t % 3000 == 2999 || (t > 0 && t % 3000 == 0)) ? 1100 : (t % 100 == 0);

			for (i = 0; i < n; i++) {
				call(a, key, now, 1, &p, &r);
				if (r.v[ALLOWED] == 1)
					run_push(&x, now, 1, 0);
			}
		}
		switch (a) {
		case FIXED:
			t = max_in_interval(&x, 3000000);
			ok(t > 1900 && t <= 2000,
			    "boundary: fixed_window 1000 per 3 s admits %lld in some 3 s (up to 2 x limit across a boundary)", t);
			t = max_in_interval(&x, 2000);
			ok(t > 1900, "boundary: fixed_window admits %lld within 2 ms", t);
			break;
		case SLOG:
			t = max_in_interval(&x, 3000000);
			ok(t == 1000, "boundary: sliding_log 1000 per 3 s admits at most %lld in any 3 s", t);
			break;
		default:
			t = max_in_interval(&x, 3000000 - 300000);
			ok(t <= 1000, "boundary: sliding_window 1000 per 3 s, precision 300 ms: at most %lld in any 2.7 s (bound 1000)", t);
			{
				long long w3 = max_in_interval(&x, 3000000);

				ok(w3 <= 2000, "boundary: sliding_window: at most %lld in any 3 s (bound 2 x limit, only across window - precision)", w3);
				t = max_in_interval(&x, 2000);
				ok(t <= 1000, "boundary: sliding_window: at most %lld within 2 ms (fixed_window: ~2000)", t);
			}
			break;
		}
		run_free(&x);
	}
}

/* Every argument error is a Redis error "rlgate: <sentence>", no key made. */
static void
test_errors(void)
{
	static const struct {
		unsigned	algs;		/* bit per alg */
		const char	*args[6];	/* now cost limit window burst precision */
		const char	*says;		/* part of the sentence */
	} cases[] = {
		{ 0x3f, { "", "1", "0", "1000", "", "" }, "limit must be at least 1" },
		{ 0x3f, { "", "1", "-5", "1000", "", "" }, "limit must be at least 1" },
		{ 0x3f, { "", "1", "ten", "1000", "", "" }, "limit must be an integer" },
		{ 0x3f, { "", "1", "10", "0", "", "" }, "window_ms must be at least 1" },
		{ 0x3f, { "", "1", "10", "0.5", "", "" }, "window_ms must be an integer" },
		{ 0x3f, { "", "0", "10", "1000", "", "" }, "cost must be at least 1" },
		{ 0x3f, { "", "1.5", "10", "1000", "", "" }, "cost must be an integer" },
		{ 0x3f, { "", "", "10", "1000", "", "" }, "cost is missing" },
		{ 0x3f, { "", "1", "10", "", "", "" }, "window_ms is missing" },
		{ 0x3f, { "yesterday", "1", "10", "1000", "", "" }, "now (microseconds) must be an integer" },
		{ 0x3f, { "-1", "1", "10", "1000", "", "" }, "now (microseconds) must be at least 0" },
		{ 0x3f, { "", "1", "10", "1000000000000", "", "" }, "window_ms must be at most" },
		{ 1 << FIXED | 1 << SWINDOW | 1 << SLOG, { "", "11", "10", "1000", "", "" },
		    "cost 11 is above limit 10" },
		{ 1 << TOKEN | 1 << GCRA, { "", "11", "10", "1000", "", "" }, "cost 11 is above burst 10" },
		{ 1 << TOKEN | 1 << GCRA, { "", "6", "10", "1000", "5", "" }, "cost 6 is above burst 5" },
		{ 1 << TOKEN | 1 << GCRA, { "", "1", "10", "1000", "0", "" }, "burst must be at least 1" },
		{ 1 << LEAKY, { "", "1", "10", "1000", "-1", "" }, "burst must be at least 0" },
		{ 1 << TOKEN | 1 << GCRA, { "", "1", "999983", "86400000", "", "" },
		    "must stay below 2^53" },
		{ 1 << SWINDOW, { "", "1", "10", "1000", "", "300" }, "precision_ms 300 does not divide window_ms 1000" },
		{ 1 << SWINDOW, { "", "1", "10", "1000", "", "0" }, "precision_ms must be at least 1" },
		{ 1 << SWINDOW, { "", "1", "10", "15", "", "" }, "is not a multiple of 10" },
		{ 1 << SWINDOW, { "", "1", "10", "86400000", "", "1" }, "more than 10000 blocks" },
		{ 1 << SLOG, { "", "1", "100001", "1000", "", "" }, "limit must be at most 100000" },
	};
	size_t i;
	int a;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (a = 0; a < NALG; a++) {
			struct reply r;
			char key[128];
			redisReply *e;
			int good;

			if (!(cases[i].algs & (1u << a)))
				continue;
			make_key(key, sizeof(key), "error", (enum alg)a, (int)i);
			call_raw((enum alg)a, key, cases[i].args[0], cases[i].args[1],
			    cases[i].args[2], cases[i].args[3], cases[i].args[4],
			    cases[i].args[5], &r);
			e = command("EXISTS %s", key);
			good = r.is_err && strncmp(r.err, "rlgate: ", 8) == 0 &&
			    strstr(r.err, cases[i].says) != NULL && strlen(r.err) > 30 &&
			    strchr(r.err, '\n') == NULL && e->integer == 0;
			ok(good, "%s: error \"%s\"", alg_names[a], r.is_err ? r.err : "(none)");
			freeReplyObject(e);
		}
	}
}

/* With ARGV[1] empty the scripts use Redis TIME, and keys really expire. */
static void
test_time_and_expiry(void)
{
	char key[NALG][128];
	long long reset[NALG];
	int a;

	for (a = 0; a < NALG; a++) {
		redisReply *r = NULL, *t = NULL, *whole;
		char err[256];
		long long before, now, after;
		const char *argv[16];
		char fname[64];
		int argc;

		/* 10 per second: a TTL of 1 s, or 100 ms for the buckets. The
		 * call and PTTL go in one round trip. */
		make_key(key[a], sizeof(key[a]), "expiry", a, 0);
		argc = decision_argv(argv, fname, sizeof(fname), (enum alg)a, key[a], NULL,
		    "", "1", "10", "1000", "", "");
		before = real_now_us();
		redisAppendCommandArgv(rc, argc, argv, NULL);
		redisAppendCommand(rc, "PTTL %s", key[a]);
		if (redisGetReply(rc, (void **)&r) != REDIS_OK ||
		    redisGetReply(rc, (void **)&t) != REDIS_OK)
			fatal("redis: %s", rc->errstr);
		after = real_now_us();
		whole = r;
		if (via == VIA_DECIDE && r->type != REDIS_REPLY_ERROR)
			r = decide_as_standalone(r, NULL, err, sizeof(err));	/* 7 fields */
		if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != NFIELDS) {
			ok(0, "%s: call with Redis TIME (%s)", alg_names[a],
			    r == NULL ? err : "not 7 fields");
			freeReplyObject(whole);
			freeReplyObject(t);
			reset[a] = 0;
			continue;
		}
		now = r->element[NOW]->integer;
		reset[a] = r->element[RESET]->integer;
		ok(r->element[ALLOWED]->integer == 1 && now >= before - 1000 && now <= after + 1000,
		    "%s: ARGV[1] empty uses Redis TIME (now_us %lld, local clock %lld..%lld)",
		    alg_names[a], now, before, after);
		ok(t->integer > 0 && t->integer <= reset[a] + 2 &&
		    t->integer >= reset[a] - 1 - (after - before) / 1000,
		    "%s: TTL %lld ms set for reset_ms %lld", alg_names[a], t->integer, reset[a]);
		freeReplyObject(whole);
		freeReplyObject(t);
	}
	usleep(1300 * 1000);
	for (a = 0; a < NALG; a++) {
		redisReply *e = command("EXISTS %s", key[a]);

		ok(e->integer == 0, "%s: key gone 1.3 s later (reset_ms was %lld)", alg_names[a], reset[a]);
		freeReplyObject(e);
	}
}

/*
 * A key left by another algorithm (a rule changed its algorithm on reload)
 * is not an error: the script starts afresh, as with a missing key.
 */
static void
test_foreign_state(void)
{
	static const struct params p = { 5, 1000, EMPTY, EMPTY };
	static const char *const kinds[] = { "string", "list", "hash", "zset" };
	int a, k, bad = 0, n = 0;

	for (a = 0; a < NALG; a++) {
		for (k = 0; k < 4; k++) {
			struct twin m;
			struct reply r;
			long long want[NFIELDS];
			char key[128];

			make_key(key, sizeof(key), kinds[k], (enum alg)a, 0);
			switch (k) {
			case 0: freeReplyObject(command("SET %s junk", key)); break;
			case 1: freeReplyObject(command("RPUSH %s x", key)); break;
			case 2: freeReplyObject(command("HSET %s start 5 count 999 tokens 0 ts 5 17000 3", key)); break;
			default: freeReplyObject(command("ZADD %s 5 5:0", key)); break;
			}
			twin_init(&m, (enum alg)a, &p);
			twin_decide(&m, T0, 2, want);
			twin_free(&m);
			call((enum alg)a, key, T0, 2, &p, &r);
			n++;
			if (r.is_err || memcmp(r.v, want, sizeof(want)) != 0) {
				note("%s on a %s key: %s", alg_names[a], kinds[k], r.is_err ? r.err : "not a fresh decision");
				bad++;
			}
		}
	}
	ok(bad == 0, "a key of another type or another algorithm's hash is replaced: %d of %d fresh decisions",
	    n - bad, n);

	/* sliding_window after its precision grew: the old block indexes lie
	 * far ahead and must not be counted (nor keep the key alive). */
	{
		static const struct params p100 = { 5, 1000, EMPTY, 100 }, p1000 = { 5, 1000, EMPTY, 1000 };
		struct reply r;
		char key[128];

		make_key(key, sizeof(key), "precision", SWINDOW, 0);
		call(SWINDOW, key, T0, 5, &p100, &r);
		call(SWINDOW, key, T0, 1, &p1000, &r);
		ok(r.v[ALLOWED] == 1 && r.v[REMAINING] == 4 && r.v[RESET] == 1000,
		    "sliding_window: blocks written with another precision are dropped (remaining %lld, reset_ms %lld)",
		    r.v[REMAINING], r.v[RESET]);
	}
}

/* sliding_log: members stay unique with many requests in one microsecond. */
static void
test_log_members(void)
{
	static const struct params p = { 1000, 1000, EMPTY, EMPTY };
	struct reply r;
	char key[128];
	redisReply *c;
	int i, admitted = 0;

	make_key(key, sizeof(key), "members", SLOG, 0);
	for (i = 0; i < 300; i++) {
		call(SLOG, key, T0, 3, &p, &r);
		admitted += r.v[ALLOWED] == 1;
	}
	c = command("ZCARD %s", key);
	ok(admitted == 300 && c->integer == 900 && r.v[REMAINING] == 100,
	    "sliding_log: 300 requests of cost 3 in one microsecond: %lld members, remaining %lld",
	    c->integer, r.v[REMAINING]);
	freeReplyObject(c);
	call(SLOG, key, T0, 101, &p, &r);
	ok(r.v[ALLOWED] == 0 && r.v[RETRY] == 1000, "sliding_log: cost 101 of 100 left waits the whole window (%lld ms)",
	    r.v[RETRY]);
}

/* ---------------------------------------------------------------------
 * Overrides: KEYS[2] is a hash whose fields stand in for ARGV[3..6]
 * (limit, window_ms, burst, precision_ms), or unlimited = 1.
 */

/* DEL okey, then (fields not NULL and not "") HSET okey with "f v f v...". */
static void
set_override(const char *okey, const char *fields)
{
	const char *argv[16];
	char buf[256], *save = NULL, *t;
	redisReply *rep;
	int n = 2;

	freeReplyObject(command("DEL %s", okey));
	if (fields == NULL || fields[0] == '\0')
		return;
	argv[0] = "HSET";
	argv[1] = okey;
	snprintf(buf, sizeof(buf), "%s", fields);
	for (t = strtok_r(buf, " ", &save); t != NULL && n < 16; t = strtok_r(NULL, " ", &save))
		argv[n++] = t;
	if ((rep = redisCommandArgv(rc, n, argv, NULL)) == NULL)
		fatal("redis: %s", rc->errstr);
	freeReplyObject(rep);
}

/* The parameters a script resolves from p: burst (0: none), precision (0: none). */
static long long
burst_of(enum alg a, const struct params *p)
{
	if (a != TOKEN && a != GCRA && a != LEAKY)
		return 0;
	return p->burst == EMPTY ? p->limit : p->burst;
}

static long long
precision_of(enum alg a, const struct params *p)
{
	if (a != SWINDOW)
		return 0;
	return p->precision_ms == EMPTY ? conf_default_precision(p->window_ms) :
	    p->precision_ms;
}

struct ostep {
	const char	*set;		/* NULL: leave the override; "": delete it;
					 * else replace it with these fields */
	long long	 t_us, cost;
	long long	 allowed, remaining, limit, reset, retry, delay;
	long long	 window, burst, precision, code;	/* fields 8-11 */
	const char	*why;		/* code 3: part of the 12th field */
};

static void
run_osteps(enum alg a, const char *what, const struct params *p,
    const struct ostep *s, size_t n)
{
	char key[160], okey[180], pwhat[200], perr[256];
	long long pk[RLG_PEEK_FIELDS];
	struct reply r;
	size_t i;
	int bad = 0, pbad = 0, f;

	snprintf(key, sizeof(key), "%s{%s:override:%s}", prefix, alg_names[a], what);
	snprintf(okey, sizeof(okey), "%s:override", key);
	freeReplyObject(command("DEL %s %s", key, okey));
	snprintf(pwhat, sizeof(pwhat), "%s override %s", alg_names[a], what);
	for (i = 0; i < n; i++) {
		long long want[NFIELDS] = { s[i].allowed, s[i].remaining, s[i].limit,
		    s[i].reset, s[i].retry, T0 + s[i].t_us, s[i].delay };
		long long wantx[NEXT] = { s[i].window, s[i].burst, s[i].precision, s[i].code };

		if (s[i].set != NULL)
			set_override(okey, s[i].set);
		if (peek_k(a, key, okey, T0 + s[i].t_us, s[i].cost, p, pk, perr,
		    sizeof(perr)) == -1) {
			ok(0, "%s override \"%s\" step %zu: peek: %s", alg_names[a], what, i + 1, perr);
			return;
		}
		call_k(a, key, okey, T0 + s[i].t_us, s[i].cost, p, &r);
		if (r.is_err) {
			ok(0, "%s override \"%s\" step %zu: error %s", alg_names[a], what, i + 1, r.err);
			return;
		}
		pbad += peek_agrees(pwhat, i + 1, pk, &r, s[i].cost, 1);
		for (f = 0; f < NFIELDS; f++)
			if (r.v[f] != want[f]) {
				note("%s override \"%s\" step %zu (t=%lld us, cost %lld, set \"%s\"): %s is %lld, expected %lld",
				    alg_names[a], what, i + 1, s[i].t_us, s[i].cost,
				    s[i].set ? s[i].set : "(as before)", field_names[f], r.v[f], want[f]);
				bad++;
			}
		for (f = 0; f < NEXT; f++)
			if (r.x[f] != wantx[f]) {
				note("%s override \"%s\" step %zu: %s is %lld, expected %lld",
				    alg_names[a], what, i + 1, ext_names[f], r.x[f], wantx[f]);
				bad++;
			}
		if (s[i].code == 3 && (strncmp(r.why, "override ignored: ", 18) != 0 ||
		    strstr(r.why, s[i].why) == NULL)) {
			note("%s override \"%s\" step %zu: why is \"%s\", expected \"...%s...\"",
			    alg_names[a], what, i + 1, r.why, s[i].why);
			bad++;
		}
		if (r.v[ALLOWED] == 1 && s[i].code != 2 &&
		    (r.pttl < r.v[RESET] - 1 || r.pttl > r.v[RESET] + 2)) {
			note("%s override \"%s\" step %zu: PTTL %lld after admission, reset_ms %lld",
			    alg_names[a], what, i + 1, r.pttl, r.v[RESET]);
			bad++;
		}
		/* Denied, or unlimited: nothing counted, nothing written. */
		if ((r.v[ALLOWED] == 0 || s[i].code == 2) && (r.changed || r.pttl >= 0)) {
			note("%s override \"%s\" step %zu: the key changed (%s)", alg_names[a], what,
			    i + 1, s[i].code == 2 ? "unlimited" : "denied");
			bad++;
		}
	}
	ok(bad == 0, "%s: override sequence \"%s\" (%zu requests: the override applies from the next "
	    "call, clearing it restores ARGV; exact replies and fields 8-11)", alg_names[a], what, n);
	ok(pbad == 0, "%s: %s_peek before each step of override sequence \"%s\" agrees with the "
	    "decision that follows (and fields 8-11)", alg_names[a], rlg_library_name, what);
}

static void
test_override_hand(void)
{
	/* limit 3 per 1000 ms. */
	static const struct ostep fixed[] = {
		{ NULL, 0, 1,			1, 2, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ NULL, 0, 1,			1, 1, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ NULL, 0, 1,			1, 0, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ NULL, 100 * MS, 1,		0, 0, 3, 900, 900, 0,	1000, 0, 0, 0, NULL },
		/* raised: the same window holds 5 */
		{ "limit 5", 100 * MS, 1,	1, 1, 5, 900, 0, 0,	1000, 0, 0, 1, NULL },
		{ NULL, 100 * MS, 1,		1, 0, 5, 900, 0, 0,	1000, 0, 0, 1, NULL },
		{ NULL, 200 * MS, 1,		0, 0, 5, 800, 800, 0,	1000, 0, 0, 1, NULL },
		/* replaced: limit back to 3, the open window now lasts 2 s */
		{ "window_ms 2000", 200 * MS, 1, 0, 0, 3, 1800, 1800, 0, 2000, 0, 0, 1, NULL },
		{ NULL, 1500 * MS, 1,		0, 0, 3, 500, 500, 0,	2000, 0, 0, 1, NULL },
		/* cleared: 1 s again, so the window that opened at 0 is over */
		{ "", 1500 * MS, 1,		1, 2, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ "unlimited 1", 1500 * MS, 1,	1, 3, 3, 0, 0, 0,	1000, 0, 0, 2, NULL },
		{ NULL, 1500 * MS, 3,		1, 3, 3, 0, 0, 0,	1000, 0, 0, 2, NULL },
		{ "", 1500 * MS, 1,		1, 1, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ "limit 0", 1500 * MS, 1,	1, 0, 3, 1000, 0, 0,	1000, 0, 0, 3, "limit must be at least 1, got 0" },
		{ "limit 2", 1600 * MS, 3,	0, 0, 3, 900, 900, 0,	1000, 0, 0, 3, "cost 3 is above limit 2" },
		{ "unlimited 0 limit 4", 1600 * MS, 1, 1, 0, 4, 900, 0, 0, 1000, 0, 0, 1, NULL },
	};
	/* limit 3 per 1000 ms, precision 100 ms. */
	static const struct ostep swin[] = {
		{ NULL, 0, 1,			1, 2, 3, 1000, 0, 0,	1000, 0, 100, 0, NULL },
		{ NULL, 0, 1,			1, 1, 3, 1000, 0, 0,	1000, 0, 100, 0, NULL },
		{ NULL, 0, 1,			1, 0, 3, 1000, 0, 0,	1000, 0, 100, 0, NULL },
		{ NULL, 0, 1,			0, 0, 3, 1000, 1000, 0,	1000, 0, 100, 0, NULL },
		{ "limit 6", 0, 1,		1, 2, 6, 1000, 0, 0,	1000, 0, 100, 1, NULL },
		/* 20 blocks: block 0 (4 admitted) counts until 2000 ms */
		{ "window_ms 2000", 600 * MS, 1, 0, 0, 3, 1400, 1400, 0, 2000, 0, 100, 1, NULL },
		{ NULL, 1500 * MS, 1,		0, 0, 3, 500, 500, 0,	2000, 0, 100, 1, NULL },
		{ "", 1500 * MS, 1,		1, 2, 3, 1000, 0, 0,	1000, 0, 100, 0, NULL },
		{ "precision_ms 300", 1500 * MS, 1, 1, 1, 3, 1000, 0, 0, 1000, 0, 100, 3,
		    "precision_ms 300 does not divide window_ms 1000" },
		{ "unlimited 1", 1500 * MS, 1,	1, 3, 3, 0, 0, 0,	1000, 0, 100, 2, NULL },
		{ "", 1500 * MS, 1,		1, 0, 3, 1000, 0, 0,	1000, 0, 100, 0, NULL },
	};
	/* limit 3 per 1000 ms. */
	static const struct ostep slog[] = {
		{ NULL, 0, 1,			1, 2, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ NULL, 0, 1,			1, 1, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ NULL, 0, 1,			1, 0, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ NULL, 0, 1,			0, 0, 3, 1000, 1000, 0,	1000, 0, 0, 0, NULL },
		{ "limit 4", 100 * MS, 1,	1, 0, 4, 1000, 0, 0,	1000, 0, 0, 1, NULL },
		{ NULL, 100 * MS, 1,		0, 0, 4, 1000, 900, 0,	1000, 0, 0, 1, NULL },
		/* 500 ms: the four admissions at 0 and 100 ms have left */
		{ "window_ms 500", 600 * MS, 1,	1, 2, 3, 500, 0, 0,	500, 0, 0, 1, NULL },
		{ "", 600 * MS, 1,		1, 1, 3, 1000, 0, 0,	1000, 0, 0, 0, NULL },
		{ "unlimited 1", 600 * MS, 1,	1, 3, 3, 0, 0, 0,	1000, 0, 0, 2, NULL },
		{ "limit 100001", 600 * MS, 1,	1, 0, 3, 1000, 0, 0,	1000, 0, 0, 3,
		    "limit must be at most 100000, got 100001" },
	};
	/* limit 2 per 1000 ms, burst empty (2): a token every 500 ms. */
	static const struct ostep token[] = {
		{ NULL, 0, 1,			1, 1, 2, 500, 0, 0,	1000, 2, 0, 0, NULL },
		{ NULL, 0, 1,			1, 0, 2, 1000, 0, 0,	1000, 2, 0, 0, NULL },
		{ NULL, 0, 1,			0, 0, 2, 1000, 500, 0,	1000, 2, 0, 0, NULL },
		/* 10 per second, burst 10: still empty, but a token every 100 ms */
		{ "limit 10", 0, 1,		0, 0, 10, 1000, 100, 0,	1000, 10, 0, 1, NULL },
		{ NULL, 100 * MS, 1,		1, 0, 10, 1000, 0, 0,	1000, 10, 0, 1, NULL },
		{ NULL, 600 * MS, 1,		1, 4, 10, 600, 0, 0,	1000, 10, 0, 1, NULL },
		/* 2 per second, burst 3: the 4 tokens are cut to 3 */
		{ "burst 3", 600 * MS, 1,	1, 2, 2, 500, 0, 0,	1000, 3, 0, 1, NULL },
		{ "", 600 * MS, 1,		1, 1, 2, 500, 0, 0,	1000, 2, 0, 0, NULL },
		{ "unlimited 1", 600 * MS, 1,	1, 2, 2, 0, 0, 0,	1000, 2, 0, 2, NULL },
		{ "burst 0", 600 * MS, 1,	1, 0, 2, 1000, 0, 0,	1000, 2, 0, 3, "burst must be at least 1, got 0" },
	};
	/*
	 * The same requests through gcra. It keeps the time until the bucket is
	 * full, not the tokens: after "burst 3" it owes 1.1 s (2 tokens at 2 per
	 * second, less what it took), which the restored burst 2 caps at 1 s.
	 */
	static const struct ostep gcra[] = {
		{ NULL, 0, 1,			1, 1, 2, 500, 0, 0,	1000, 2, 0, 0, NULL },
		{ NULL, 0, 1,			1, 0, 2, 1000, 0, 0,	1000, 2, 0, 0, NULL },
		{ NULL, 0, 1,			0, 0, 2, 1000, 500, 0,	1000, 2, 0, 0, NULL },
		{ "limit 10", 0, 1,		0, 0, 10, 1000, 100, 0,	1000, 10, 0, 1, NULL },
		{ NULL, 100 * MS, 1,		1, 0, 10, 1000, 0, 0,	1000, 10, 0, 1, NULL },
		{ NULL, 600 * MS, 1,		1, 4, 10, 600, 0, 0,	1000, 10, 0, 1, NULL },
		{ "burst 3", 600 * MS, 1,	1, 0, 2, 1100, 0, 0,	1000, 3, 0, 1, NULL },
		{ "", 600 * MS, 1,		0, 0, 2, 1000, 500, 0,	1000, 2, 0, 0, NULL },
		{ "unlimited 1", 600 * MS, 1,	1, 2, 2, 0, 0, 0,	1000, 2, 0, 2, NULL },
		{ "burst 0", 600 * MS, 1,	0, 0, 2, 1000, 500, 0,	1000, 2, 0, 3, "burst must be at least 1, got 0" },
	};
	/* limit 1 per 1000 ms, burst 1. */
	static const struct ostep leaky[] = {
		{ NULL, 0, 1,			1, 1, 1, 1000, 0, 0,	1000, 1, 0, 0, NULL },
		{ NULL, 0, 1,			1, 0, 1, 2000, 0, 1000,	1000, 1, 0, 0, NULL },
		{ NULL, 0, 1,			0, 0, 1, 2000, 1000, 0,	1000, 1, 0, 0, NULL },
		/* a longer queue: the third waits 2 s */
		{ "burst 3", 0, 1,		1, 1, 1, 3000, 0, 2000,	1000, 3, 0, 1, NULL },
		/* a faster outlet does not shorten what is queued (3 s) */
		{ "limit 4", 0, 1,		0, 0, 4, 3000, 2750, 0,	1000, 1, 0, 1, NULL },
		{ NULL, 2750 * MS, 1,		1, 0, 4, 500, 0, 250,	1000, 1, 0, 1, NULL },
		{ "", 2750 * MS, 1,		1, 0, 1, 1500, 0, 500,	1000, 1, 0, 0, NULL },
		{ "unlimited 1", 2750 * MS, 1,	1, 1, 1, 0, 0, 0,	1000, 1, 0, 2, NULL },
		{ "burst -1", 2750 * MS, 1,	0, 0, 1, 1500, 500, 0,	1000, 1, 0, 3, "burst must be at least 0, got -1" },
	};
	struct params p;

	p = (struct params){ 3, 1000, EMPTY, EMPTY };
	run_osteps(FIXED, "3 per 1000 ms", &p, fixed, NSTEPS(fixed));
	run_osteps(SLOG, "3 per 1000 ms", &p, slog, NSTEPS(slog));
	p = (struct params){ 3, 1000, EMPTY, 100 };
	run_osteps(SWINDOW, "3 per 1000 ms, precision 100", &p, swin, NSTEPS(swin));
	p = (struct params){ 2, 1000, EMPTY, EMPTY };
	run_osteps(TOKEN, "2 per 1000 ms", &p, token, NSTEPS(token));
	run_osteps(GCRA, "2 per 1000 ms", &p, gcra, NSTEPS(gcra));
	p = (struct params){ 1, 1000, 1, EMPTY };
	run_osteps(LEAKY, "1 per 1000 ms, burst 1", &p, leaky, NSTEPS(leaky));
}

/*
 * An override decides exactly as the script called with its values in
 * ARGV: random requests against the model of the override's parameters
 * (configured ones differ), field by field, fields 8-11 each time. With
 * fields NULL the hash does not exist and the model has the configured ones.
 */
static void
random_override_run(enum alg a, const struct params *conf, const char *fields,
    const struct params *eff, int count, int idx)
{
	struct twin m;
	struct reply r;
	char key[128], okey[160];
	long long now = T0 + rnd_between(0, 999999), want[NFIELDS];
	long long cap = capacity(a, eff) < capacity(a, conf) ? capacity(a, eff) : capacity(a, conf);
	long long wantx[NEXT] = { eff->window_ms, burst_of(a, eff), precision_of(a, eff),
	    fields != NULL };
	int i, f, mismatches = 0, ttl_bad = 0, admitted = 0;

	twin_init(&m, a, eff);
	make_key(key, sizeof(key), "override-random", a, idx);
	snprintf(okey, sizeof(okey), "%s:override", key);
	set_override(okey, fields);
	for (i = 0; i < count; i++) {
		unsigned k = (unsigned)(rnd() % 100);
		long long cost;

		if (k < 30)
			;
		else if (k < 80)
			now += rnd_between(1, eff->window_ms * 1000 / eff->limit * 2 + 1);
		else
			now += rnd_between(1, 2 * eff->window_ms * 1000);
		cost = rnd() % 4 == 0 ? rnd_between(1, cap) : 1;
		twin_decide(&m, now, cost, want);
		call_k(a, key, okey, now, cost, conf, &r);
		if (r.is_err) {
			ok(0, "%s override %s: error at request %d: %s", alg_names[a],
			    fields ? fields : "(none)", i, r.err);
			twin_free(&m);
			return;
		}
		for (f = 0; f < NFIELDS + NEXT; f++) {
			long long got = f < NFIELDS ? r.v[f] : r.x[f - NFIELDS];
			long long exp = f < NFIELDS ? want[f] : wantx[f - NFIELDS];

			if (got != exp) {
				if (mismatches < 3)
					note("%s request %d (now %lld, cost %lld): %s is %lld, expected %lld",
					    alg_names[a], i, now, cost, f < NFIELDS ? field_names[f] :
					    ext_names[f - NFIELDS], got, exp);
				mismatches++;
				break;
			}
		}
		if (r.v[ALLOWED] == 1) {
			admitted++;
			if (r.pttl < r.v[RESET] - 1 || r.pttl > r.v[RESET] + 2)
				ttl_bad++;
		}
	}
	ok(mismatches == 0 && ttl_bad == 0, "%s: configured %lld per %lld ms, override %s: %d requests "
	    "(%d admitted) decided as the model of %lld per %lld ms, TTLs from it (%d mismatches, %d TTLs wrong)",
	    alg_names[a], conf->limit, conf->window_ms, fields ? fields : "(no hash)", count, admitted,
	    eff->limit, eff->window_ms, mismatches, ttl_bad);
	twin_free(&m);
}

static void
test_override_random(int count)
{
	static const struct {
		enum alg	 a;
		struct params	 conf;
		const char	*fields;
		struct params	 eff;
	} sets[] = {
		{ FIXED,   { 5, 1000, EMPTY, EMPTY }, "limit 9 window_ms 700", { 9, 700, EMPTY, EMPTY } },
		{ FIXED,   { 5, 1000, EMPTY, EMPTY }, NULL, { 5, 1000, EMPTY, EMPTY } },
		{ SWINDOW, { 5, 1000, EMPTY, 100 }, "limit 8 window_ms 600 precision_ms 200", { 8, 600, EMPTY, 200 } },
		{ SWINDOW, { 5, 1000, EMPTY, 100 }, "window_ms 3000", { 5, 3000, EMPTY, 100 } },
		{ SWINDOW, { 5, 1000, EMPTY, 100 }, NULL, { 5, 1000, EMPTY, 100 } },
		{ SLOG,    { 5, 1000, EMPTY, EMPTY }, "limit 7 window_ms 1300", { 7, 1300, EMPTY, EMPTY } },
		{ SLOG,    { 5, 1000, EMPTY, EMPTY }, NULL, { 5, 1000, EMPTY, EMPTY } },
		{ TOKEN,   { 7, 1000, 3, EMPTY }, "limit 13 burst 4", { 13, 1000, 4, EMPTY } },
		{ TOKEN,   { 7, 1000, EMPTY, EMPTY }, "limit 13", { 13, 1000, EMPTY, EMPTY } },
		{ TOKEN,   { 7, 1000, 3, EMPTY }, NULL, { 7, 1000, 3, EMPTY } },
		{ GCRA,    { 7, 1000, 3, EMPTY }, "limit 13 burst 4", { 13, 1000, 4, EMPTY } },
		{ GCRA,    { 7, 1000, 3, EMPTY }, "window_ms 60000 burst 5", { 7, 60000, 5, EMPTY } },
		{ GCRA,    { 7, 1000, 3, EMPTY }, NULL, { 7, 1000, 3, EMPTY } },
		{ LEAKY,   { 1, 1000, 3, EMPTY }, "limit 3 burst 5", { 3, 1000, 5, EMPTY } },
		{ LEAKY,   { 1, 1000, 3, EMPTY }, "burst 0 window_ms 13 limit 7", { 7, 13, 0, EMPTY } },
		{ LEAKY,   { 1, 1000, 3, EMPTY }, NULL, { 1, 1000, 3, EMPTY } },
	};
	size_t i;

	for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		random_override_run(sets[i].a, &sets[i].conf, sets[i].fields, &sets[i].eff,
		    count, (int)i);
}

/*
 * An override that fails the arguments' checks is ignored as a whole: the
 * decision is the one without it (compared with a twin key called without
 * KEYS[2]), override = 3, and the 12th field says why.
 */
static void
test_override_ignored(void)
{
	static const struct {
		unsigned	 algs;
		const char	*fields;	/* "=string": the key holds a string */
		const char	*says;
	} cases[] = {
		{ 0x3f, "limit 0", "limit must be at least 1, got 0" },
		{ 0x3f, "limit ten", "limit must be an integer, got \"ten\"" },
		{ 0x3f, "limit 3 window_ms 0", "window_ms must be at least 1, got 0" },
		{ 0x3f, "window_ms 1000000000000", "window_ms must be at most 100000000000" },
		{ 0x3f, "unlimited yes limit 9", "unlimited must be 1 or 0, got \"yes\"" },
		{ 0x3f, "=string", "the override key (KEYS[2]) is not a hash" },
		{ 1 << FIXED | 1 << SWINDOW | 1 << SLOG, "limit 1", "cost 2 is above limit 1" },
		{ 1 << TOKEN | 1 << GCRA, "burst 1", "cost 2 is above burst 1" },
		{ 1 << TOKEN | 1 << GCRA, "limit 999983 window_ms 86400000 burst 999983",
		    "must stay below 2^53" },
		{ 1 << LEAKY, "limit 999983 window_ms 86400000 burst 1000000000", "must stay below 2^52" },
		{ 1 << SWINDOW, "window_ms 250", "precision_ms 100 does not divide window_ms 250" },
		{ 1 << SWINDOW, "window_ms 86400000 precision_ms 1", "more than 10000 blocks" },
		{ 1 << SLOG, "limit 100001", "limit must be at most 100000" },
	};
	static const struct params ps[NALG] = {
		[FIXED] = { 5, 1000, EMPTY, EMPTY }, [SWINDOW] = { 5, 1000, EMPTY, 100 },
		[SLOG] = { 5, 1000, EMPTY, EMPTY }, [TOKEN] = { 5, 1000, EMPTY, EMPTY },
		[GCRA] = { 5, 1000, 4, EMPTY }, [LEAKY] = { 5, 1000, 2, EMPTY },
	};
	size_t i;
	int a, j;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (a = 0; a < NALG; a++) {
			const struct params *p = &ps[a];
			char key[128], twin[128], okey[160];
			struct reply r, t;
			int bad = 0;

			if (!(cases[i].algs & (1u << a)))
				continue;
			make_key(key, sizeof(key), "override-ignored", (enum alg)a, (int)i);
			make_key(twin, sizeof(twin), "override-twin", (enum alg)a, (int)i);
			snprintf(okey, sizeof(okey), "%s:override", key);
			if (strcmp(cases[i].fields, "=string") == 0) {
				freeReplyObject(command("DEL %s", okey));
				freeReplyObject(command("SET %s limit", okey));
			} else
				set_override(okey, cases[i].fields);
			/* Three requests at one time: the third is denied (burst 2+). */
			for (j = 0; j < 3 && !bad; j++) {
				call_k((enum alg)a, key, okey, T0 + j, 2, p, &r);
				call((enum alg)a, twin, T0 + j, 2, p, &t);
				bad = r.is_err || t.is_err || memcmp(r.v, t.v, sizeof(r.v)) != 0 ||
				    r.x[XWINDOW] != p->window_ms || r.x[XBURST] != burst_of(a, p) ||
				    r.x[XPRECISION] != precision_of(a, p) || r.x[XOVERRIDE] != 3 ||
				    strncmp(r.why, "override ignored: ", 18) != 0 ||
				    strstr(r.why, cases[i].says) == NULL;
			}
			ok(!bad, "%s: override {%s} ignored, decided as without it: \"%s\"", alg_names[a],
			    cases[i].fields, r.is_err ? r.err : r.why);
		}
	}
}

static void
cleanup(void)
{
	redisReply *r;
	char pattern[80];
	unsigned long long cursor = 0;

	snprintf(pattern, sizeof(pattern), "%s*", prefix);
	do {
		size_t i;

		r = command("SCAN %llu MATCH %s COUNT 1000", cursor, pattern);
		cursor = strtoull(r->element[0]->str, NULL, 10);
		for (i = 0; i < r->element[1]->elements; i++)
			freeReplyObject(command("UNLINK %s", r->element[1]->element[i]->str));
		freeReplyObject(r);
	} while (cursor != 0);
}

int
main(int argc, char **argv)
{
	struct timeval tv = { 5, 0 };
	redisReply *r;
	int v, port, n = 3000;
	uint64_t seed;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: lua_check PORT fcall|decide [SEED]\n");
		return 2;
	}
	port = atoi(argv[1]);
	for (v = 0; v < 2 && strcmp(argv[2], via_names[v]) != 0; v++)
		;
	if (v == 2) {
		fprintf(stderr, "lua_check: %s: use fcall or decide\n", argv[2]);
		return 2;
	}
	via = (enum via)v;
	seed = argc == 4 ? strtoull(argv[3], NULL, 10) : (uint64_t)time(NULL);
	if (getenv("LUA_CHECK_N"))
		n = atoi(getenv("LUA_CHECK_N"));
	rng = seed ? seed : 1;
	printf("# seed %" PRIu64 " (lua_check %s %s %" PRIu64 " repeats this run)\n",
	    seed, argv[1], argv[2], seed);
	snprintf(prefix, sizeof(prefix), "lua_check:%ld:", (long)getpid());

	if ((rc = redisConnectWithTimeout("127.0.0.1", port, tv)) == NULL || rc->err)
		fatal("cannot connect to 127.0.0.1:%d: %s", port, rc ? rc->errstr : "out of memory");
	redisSetTimeout(rc, tv);

	/* The library this build embeds. */
	r = command("FUNCTION LOAD REPLACE %s", rlg_library);
	ok(r->type == REDIS_REPLY_STRING && strcmp(r->str, rlg_library_name) == 0,
	    "FUNCTION LOAD REPLACE of the library: %s", r->str ? r->str : "?");
	if (r->type != REDIS_REPLY_STRING)
		fatal("the library does not load: %s", r->str ? r->str : "?");
	freeReplyObject(r);

	test_hand();
	test_errors();
	test_log_members();
	test_foreign_state();
	test_random(n);
	test_gcra_equals_token(n);
	test_retry(2 * n);
	test_boundary();
	test_time_and_expiry();
	test_override_hand();
	test_override_ignored();
	test_override_random(n / 3);
	if (via == VIA_DECIDE)
		test_undo_twin(n / 3);

	if (reruns)
		note("%d steps were run again because Redis stalled past a short TTL", reruns);
	cleanup();
	redisFree(rc);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
