/*
 * twin_diff: the differential test of the C twin (fcgi/algo.c) against the
 * Lua library in a real redis-server: random scenarios of rules (every
 * algorithm, random parameters with their edges, costs, dry runs,
 * override keys whose fields change between calls), called through
 * LIB_decide in batches of requests (all or nothing each), at random
 * times given in ARGV (same-us bursts, gaps, a clock that steps back) or
 * with Redis TIME (the twin takes the now_us the Lua replied). Every
 * reply field of every rule, and whether each request was counted, must
 * be the twin's; the first difference is printed with its vector.
 *
 *   twin_diff PORT SEED [SCENARIOS]
 *
 * Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 on a
 * difference. Keys are "twin_diff:<pid>:..." and are deleted at the end.
 * Not a check of the promises (reports/verify.c) nor of errors' words.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "algo.h"
#include "limiter_int.h"
#include "scripts.h"
#include "tool.h"

/* A LIB_decide row's integers: the fields before the undo token. */
#define NROW	RLG_DECIDE_ROW_UNDO

#define MAX_RULES	4
#define MAX_REQS	3
#define MAX_ARGS	(2 + 2 * MAX_REQS * MAX_RULES + 8)
#define T0		1700000000000000LL	/* us */
#define NOVAL		LLONG_MIN		/* an override field not set */

static const char *const names[RLG_ALGORITHM_COUNT] = {
	"fixed_window", "sliding_window", "sliding_log", "token_bucket",
	"gcra", "leaky_bucket"
};

struct trule {
	enum rlg_algorithm	 alg;
	long long		 cost, limit, window_ms, burst, precision_ms;
	int			 has_okey, dry;
	char			 key[96], okey[100];
	char			 of[5][24];	/* override fields; "" unset */
	struct algo_state	 st;
};

static redisContext	*rc;
static uint64_t		 rng = 1;
static char		 prefix[48];
static int		 passed, failed;
static long long	 seen[RLG_ALGORITHM_COUNT][2];	/* denied, admitted */

static uint64_t
rnd(void)
{
	return tool_rnd(&rng);
}

static long long
between(long long lo, long long hi)
{
	return tool_between(&rng, lo, hi);
}

static int
chance(int percent)
{
	return (int)(rnd() % 100) < percent;
}

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "twin_diff: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(2);
}

/* A number for a parameter: mostly small and round, sometimes an edge. */
static long long
pick_limit(enum rlg_algorithm a)
{
	long long max = a == RLG_SLIDING_LOG ? RLG_MAX_LOG_LIMIT : RLG_MAX_COUNT;
	int k = (int)(rnd() % 100);

	if (k < 40)
		return between(1, 5);
	if (k < 70)
		return between(1, 30);
	if (k < 85)
		return between(1, 1000);
	if (k < 93)
		return chance(50) ? 7 : 13;
	if (k < 97)
		return max;
	return chance(50) ? max + 1 : 0;	/* refused */
}

static long long
pick_window(void)
{
	static const long long w[] = { 1, 2, 3, 7, 10, 13, 20, 50, 100, 250,
	    1000, 1000, 3000, 60000, 86400000, 100000000000LL };
	int k = (int)(rnd() % 100);

	if (k < 70)
		return w[rnd() % (sizeof(w) / sizeof(w[0]))];
	if (k < 98)
		return between(1, 5000);
	return chance(50) ? 0 : 100000000001LL;	/* refused */
}

/* A divisor of w, or an edge (empty, the window, a non-divisor). */
static long long
pick_precision(long long w)
{
	long long d;
	int k = (int)(rnd() % 100), i;

	if (k < 40)
		return RLG_PARAM_UNSET;
	if (k < 50)
		return w;
	if (k < 55)
		return w + 1;			/* refused */
	for (i = 0; i < 100; i++) {
		d = chance(50) ? between(1, w < 1000 ? w : 1000) :
		    w / between(1, w < RLG_MAX_BLOCKS ? w : RLG_MAX_BLOCKS);
		if (k >= 97 || (w % d == 0 && w / d <= RLG_MAX_BLOCKS))
			return d;		/* k >= 97: likely refused */
	}
	return w;
}

static void
pick_rule(struct trule *r, int scn, int i)
{
	long long bmax;

	memset(r->of, 0, sizeof(r->of));
	r->alg = (enum rlg_algorithm)(rnd() % RLG_ALGORITHM_COUNT);
	r->limit = pick_limit(r->alg);
	r->window_ms = pick_window();
	r->burst = chance(50) ? RLG_PARAM_UNSET : chance(10) ?
	    (chance(50) ? 0 : RLG_MAX_COUNT) : between(1, 2 * r->limit + 1);
	r->precision_ms = r->alg == RLG_SLIDING_WINDOW && r->window_ms > 0 ?
	    pick_precision(r->window_ms) : RLG_PARAM_UNSET;
	bmax = r->burst > 0 && r->burst < r->limit ? r->burst : r->limit;
	r->cost = chance(70) || bmax < 1 ? 1 : chance(90) ?
	    between(1, bmax < 5 ? bmax : 5) : chance(50) ? bmax : bmax + 1;
	r->has_okey = chance(30);
	r->dry = chance(10);
	snprintf(r->key, sizeof(r->key), "%s{%d:%d}", prefix, scn, i);
	snprintf(r->okey, sizeof(r->okey), "%s:o", r->key);
}

/* An override field's value: as the rule's own, another, empty, or not a
 * number. */
static void
pick_field(const struct trule *r, int f, char *buf, size_t len)
{
	int k = (int)(rnd() % 100);

	if (k < 25)
		buf[0] = '\0';
	else if (f == 4)
		snprintf(buf, len, "%s", k < 70 ? "0" : k < 95 ? "1" : "yes");
	else if (k < 90)
		snprintf(buf, len, "%lld", f == 0 ? pick_limit(r->alg) : f == 1 ?
		    pick_window() : f == 2 ? between(0, 2 * r->limit + 1) :
		    pick_precision(r->window_ms > 0 ? r->window_ms : 10));
	else
		snprintf(buf, len, "%s", k < 95 ? "x1" : "-1");
}

/* Sets new override fields on r's override key (or deletes it). */
static void
change_override(struct trule *r)
{
	redisReply *x;
	int f;

	if (chance(20)) {
		memset(r->of, 0, sizeof(r->of));
		x = redisCommand(rc, "DEL %s", r->okey);
	} else {
		for (f = 0; f < 5; f++)
			if (chance(40))
				pick_field(r, f, r->of[f], sizeof(r->of[f]));
		x = redisCommand(rc, "HSET %s limit %s window_ms %s burst %s "
		    "precision_ms %s unlimited %s", r->okey, r->of[0], r->of[1],
		    r->of[2], r->of[3], r->of[4]);
	}
	if (x == NULL)
		die("redis: %s", rc->errstr);
	freeReplyObject(x);
}

/* An override field as the Lua's arg_int reads it: 1 and *v when a
 * number, 0 when not one, NOVAL when empty. */
static int
field_value(const char *s, long long *v)
{
	const char *p = s;

	*v = NOVAL;
	if (*s == '\0')
		return 1;
	if (strlen(s) > 16)
		return 0;
	if (*p == '-')
		p++;
	if (*p == '\0' || strspn(p, "0123456789") != strlen(p))
		return 0;
	*v = strtoll(s, NULL, 10);
	return 1;
}

/*
 * The parameters r decides with now (prelude.lua apply_override): *p,
 * and the code (0 none, 1 applied, 2 unlimited, 3 ignored).
 */
static int
effective(const struct trule *r, struct algo_params *p)
{
	long long v[4];
	int f, set = 0;

	if (!r->has_okey)
		return 0;
	if (r->of[4][0] != '\0' && strcmp(r->of[4], "0") != 0)
		return strcmp(r->of[4], "1") == 0 ? 2 : 3;
	for (f = 0; f < 4; f++)
		set |= r->of[f][0] != '\0';
	if (!set)
		return 0;
	/* The fields its algorithm takes are read (the others not at all);
	 * below 0 each is refused (the C API's -1 is "empty"). */
	for (f = 0; f < 4; f++) {
		v[f] = NOVAL;
		if ((f == 2 && !conf_algorithm_has_burst(r->alg)) ||
		    (f == 3 && r->alg != RLG_SLIDING_WINDOW))
			continue;
		if (!field_value(r->of[f], &v[f]) || (v[f] != NOVAL && v[f] < 0)) {
			algo_params(p, r->alg, r->cost, r->limit, r->window_ms,
			    r->burst, r->precision_ms, NULL, 0);
			return 3;
		}
	}
	if (algo_params(p, r->alg, r->cost,
	    v[0] != NOVAL ? v[0] : r->limit,
	    v[1] != NOVAL ? v[1] : r->window_ms,
	    v[2] != NOVAL ? v[2] : r->burst,
	    v[3] != NOVAL ? v[3] : r->precision_ms, NULL, 0) == -1) {
		algo_params(p, r->alg, r->cost, r->limit, r->window_ms, r->burst,
		    r->precision_ms, NULL, 0);
		return 3;
	}
	return 1;
}

/* A signature field: the number, or "" for an empty one. */
static void
num(char *buf, size_t len, long long v)
{
	if (v == RLG_PARAM_UNSET)
		buf[0] = '\0';
	else
		snprintf(buf, len, "%lld", v);
}

static void
signature(const struct trule *r, int first, char *buf, size_t len)
{
	char b[24], p[24], flags[8];
	int n = 0;

	if (r->dry)
		flags[n++] = 'd';
	if (r->has_okey)
		flags[n++] = 'o';
	if (first)
		flags[n++] = 'n';
	if (n == 0)
		flags[n++] = '-';
	flags[n] = '\0';
	num(b, sizeof(b), r->burst);
	num(p, sizeof(p), r->precision_ms);
	snprintf(buf, len, "%s %s %lld %lld %lld %s %s", names[r->alg], flags,
	    r->cost, r->limit, r->window_ms, b, p);
}

/* One call: its requests as lists of rule indexes. */
struct call {
	int		 nreq, nrules[MAX_REQS], rule[MAX_REQS][MAX_RULES];
	long long	 now;		/* -1: Redis TIME */
	char		 sig[MAX_REQS * MAX_RULES][160];
	const char	*argv[MAX_ARGS];
	size_t		 argc;
};

static void
print_vector(const struct call *c, const struct trule *rules, const char *why)
{
	size_t i;
	int q, k;

	printf("# DIFFERENCE: %s\n# vector: FCALL", why);
	for (i = 1; i < c->argc; i++)
		printf(" \"%s\"", c->argv[i]);
	printf("\n");
	for (q = 0; q < c->nreq; q++)
		for (k = 0; k < c->nrules[q]; k++) {
			const struct trule *r = &rules[c->rule[q][k]];

			printf("#   request %d rule %d: %s override {%s,%s,%s,%s,%s}\n",
			    q + 1, k + 1, r->key, r->of[0], r->of[1], r->of[2],
			    r->of[3], r->of[4]);
		}
}

/* Sends c (keys per rule) in MULTI, with PERSIST of its keys; returns
 * the LIB_decide reply (the caller frees *tx). */
static redisReply *
send_call(struct call *c, const struct trule *rules, redisReply **tx)
{
	static char fname[96], nkeys[16], now[32];
	const char *keys[2 * MAX_REQS * MAX_RULES];
	size_t nk = 0, i, nsig = 0;
	redisReply *x;
	int q, k;

	snprintf(fname, sizeof(fname), "%s_decide", rlg_library_name);
	for (q = 0; q < c->nreq; q++)
		for (k = 0; k < c->nrules[q]; k++) {
			const struct trule *r = &rules[c->rule[q][k]];

			keys[nk++] = r->key;
			if (r->has_okey)
				keys[nk++] = r->okey;
			signature(r, k == 0 && q > 0, c->sig[nsig++], sizeof(c->sig[0]));
		}
	snprintf(nkeys, sizeof(nkeys), "%zu", nk);
	num(now, sizeof(now), c->now);
	c->argc = 0;
	c->argv[c->argc++] = "FCALL";
	c->argv[c->argc++] = fname;
	c->argv[c->argc++] = nkeys;
	for (i = 0; i < nk; i++)
		c->argv[c->argc++] = keys[i];
	c->argv[c->argc++] = rlg_library_version;
	c->argv[c->argc++] = now;
	for (i = 0; i < nsig; i++)
		c->argv[c->argc++] = c->sig[i];
	redisAppendCommand(rc, "MULTI");
	redisAppendCommandArgv(rc, (int)c->argc, c->argv, NULL);
	/*
	 * The TTLs go: ARGV's clock is not Redis's, and with Redis TIME a TTL
	 * set under an override's shorter window ends the state early once
	 * the override is gone. What is compared is the state.
	 */
	for (i = 0; i < nk; i++)
		redisAppendCommand(rc, "PERSIST %s", keys[i]);
	redisAppendCommand(rc, "EXEC");
	for (i = 0; i < 2 + nk; i++) {
		if (redisGetReply(rc, (void **)&x) != REDIS_OK)
			die("redis: %s", rc->errstr);
		freeReplyObject(x);
	}
	if (redisGetReply(rc, (void **)tx) != REDIS_OK)
		die("redis: %s", rc->errstr);
	if ((*tx)->type != REDIS_REPLY_ARRAY || (*tx)->elements < 1)
		die("EXEC: %s", (*tx)->str ? (*tx)->str : "not an array");
	return (*tx)->element[0];
}

/* The twin's request q of c at now: rows into want[k], counted. */
static int
twin_request(const struct call *c, int q, struct trule *rules, long long now,
    long long want[MAX_RULES][NROW], int *error)
{
	struct algo_params p[MAX_RULES];
	struct algo_decision d[MAX_RULES];
	int code[MAX_RULES], k, admitted = 1;

	*error = 0;
	for (k = 0; k < c->nrules[q]; k++) {
		const struct trule *r = &rules[c->rule[q][k]];

		if (algo_params(&p[k], r->alg, r->cost, r->limit, r->window_ms,
		    r->burst, r->precision_ms, NULL, 0) == -1)
			*error = 1;
	}
	if (*error)
		return 0;
	for (k = 0; k < c->nrules[q]; k++) {
		struct trule *r = &rules[c->rule[q][k]];

		code[k] = effective(r, &p[k]);
		if (code[k] == 2)
			continue;
		/* Grown before it is full: every decision exact. */
		if (algo_state_full(&r->st)) {
			size_t cap = r->st.cap ? 2 * r->st.cap : 16;
			struct algo_entry *old = r->st.e, *e;

			if ((e = malloc(cap * sizeof(*e))) == NULL)
				die("out of memory");
			algo_state_grow(&r->st, e, cap);
			free(old);
		}
		algo_check(&p[k], &r->st, now, &d[k]);
		seen[r->alg][d[k].allowed]++;
		if (!d[k].allowed && !r->dry)
			admitted = 0;
	}
	for (k = 0; k < c->nrules[q]; k++) {
		struct trule *r = &rules[c->rule[q][k]];
		int counted = admitted && code[k] != 2 && d[k].allowed;

		if (counted)
			algo_commit(&p[k], &r->st, now, &d[k]);
		algo_reply(&p[k], code[k] == 2 ? NULL : &d[k], counted, now, want[k]);
		want[k][RLG_DECIDE_ROW_WINDOW_MS] = p[k].window_ms;
		want[k][RLG_DECIDE_ROW_BURST] = p[k].burst;
		want[k][RLG_DECIDE_ROW_PRECISION_MS] = p[k].precision_ms;
		want[k][RLG_DECIDE_ROW_OVERRIDE] = code[k];
	}
	return admitted;
}

static const char *const row_names[NROW] = {
	[RLG_DECIDE_ROW_ALLOWED] = "allowed",
	[RLG_DECIDE_ROW_REMAINING] = "remaining",
	[RLG_DECIDE_ROW_LIMIT] = "limit",
	[RLG_DECIDE_ROW_RESET_MS] = "reset_ms",
	[RLG_DECIDE_ROW_RETRY_AFTER_MS] = "retry_after_ms",
	[RLG_DECIDE_ROW_NOW_US] = "now_us",
	[RLG_DECIDE_ROW_DELAY_MS] = "delay_ms",
	[RLG_DECIDE_ROW_WINDOW_MS] = "window_ms",
	[RLG_DECIDE_ROW_BURST] = "burst",
	[RLG_DECIDE_ROW_PRECISION_MS] = "precision_ms",
	[RLG_DECIDE_ROW_OVERRIDE] = "override"
};

/* Element e of the reply, a LIB_decide row, read as the gateway reads it. */
static int
row_of(const redisReply *x, size_t e, struct limiter_row *row)
{
	const redisReply *y = x->element[e];

	return y->type == REDIS_REPLY_STRING ? limiter_row(y->str, y->len, row) :
	    -1;
}

/* Compares request q's part of the reply from element *e on. */
static int
compare_request(const struct call *c, int q, struct trule *rules,
    const redisReply *x, size_t *e, long long *now)
{
	long long want[MAX_RULES][NROW];
	struct limiter_row row;
	char why[512];
	int k, i, error, counted, has_why;
	const redisReply *y;

	y = x->type == REDIS_REPLY_ARRAY ? x->element[*e] : x;
	if (y->type == REDIS_REPLY_ERROR) {
		twin_request(c, q, rules, 0, want, &error);
		(*e)++;
		if (error)
			return 0;
		snprintf(why, sizeof(why), "request %d: the Lua says %s, the twin "
		    "finds its arguments fine", q + 1, y->str);
		print_vector(c, rules, why);
		return -1;
	}
	/* Redis TIME: the now the Lua replied, from the first row. */
	if (*now < 0 && row_of(x, *e + 1, &row) == 0)
		*now = row.f[RLG_DECIDE_ROW_NOW_US];
	counted = twin_request(c, q, rules, *now, want, &error);
	if (error || y->type != REDIS_REPLY_INTEGER || y->integer != counted) {
		snprintf(why, sizeof(why), "request %d: counted %lld, the twin says "
		    "%d%s", q + 1, y->integer, counted, error ?
		    " (and refuses its arguments)" : "");
		print_vector(c, rules, why);
		return -1;
	}
	for (k = 0; k < c->nrules[q]; k++) {
		const char *str = x->element[*e + 1 + (size_t)k]->str;

		if (row_of(x, *e + 1 + (size_t)k, &row) == -1)
			die("not a row of %d fields: \"%s\"", RLG_DECIDE_ROW_FIELDS,
			    str);
		has_why = row.why_len > 0;
		for (i = 0; i < NROW; i++)
			if (row.f[i] != want[k][i])
				break;
		if (i == NROW && has_why ==
		    (want[k][RLG_DECIDE_ROW_OVERRIDE] == 3))
			continue;
		snprintf(why, sizeof(why), "request %d rule %d: %s is %lld in the "
		    "Lua (row \"%s\"), %lld in the twin", q + 1, k + 1,
		    i < NROW ? row_names[i] : "why", i < NROW ? row.f[i] : has_why,
		    str, i < NROW ? want[k][i] :
		    (long long)(want[k][RLG_DECIDE_ROW_OVERRIDE] == 3));
		print_vector(c, rules, why);
		return -1;
	}
	*e += 1 + (size_t)c->nrules[q];
	return 0;
}

/* Random requests of rules[0..n): 1..MAX_REQS, each of distinct rules. */
static void
pick_call(struct call *c, int n)
{
	int q, k, i, used;

	c->nreq = (int)between(1, MAX_REQS);
	for (q = 0; q < c->nreq; q++) {
		used = 0;
		c->nrules[q] = 0;
		for (k = 0; k < n; k++) {
			i = (int)between(0, n - 1);
			if (!(used & (1 << i)) && (k == 0 || chance(50))) {
				used |= 1 << i;
				c->rule[q][c->nrules[q]++] = i;
			}
		}
	}
}

/* The gap to the next call's now (us): a burst, around the rate, a
 * window, a long pause, or a clock that steps back. */
static long long
pick_gap(const struct trule *r)
{
	long long w = r->window_ms > 0 && r->window_ms <= 100000 ?
	    r->window_ms * 1000 : 1000000;
	long long l = r->limit > 0 ? r->limit : 1;
	int k = (int)(rnd() % 100);

	if (k < 30)
		return 0;
	if (k < 65)
		return between(1, 2 * (w / l) + 1);
	if (k < 80)
		return between(1, w / 4 + 1);
	if (k < 88)
		return between(1, 3 * w);
	if (k < 95)
		return between(0, 3) * 1000;
	return -between(1, w / 2 + 1);
}

/* One scenario: its rules, then calls. 0, or -1 at the first difference. */
static int
scenario(int scn, int ncalls, int use_time, long long *calls)
{
	struct trule rules[MAX_RULES];
	struct call c;
	long long now = T0 + between(0, 10000000);
	int n = (int)between(1, MAX_RULES), i, q, rv = 0;

	for (i = 0; i < n; i++) {
		pick_rule(&rules[i], scn, i);
		algo_state_init(&rules[i].st, NULL, 0);
	}
	for (i = 0; i < ncalls && rv == 0; i++) {
		redisReply *tx, *x;
		size_t e = 0;

		for (q = 0; q < n; q++)
			if (rules[q].has_okey && chance(i == 0 ? 100 : 15))
				change_override(&rules[q]);
		pick_call(&c, n);
		now += pick_gap(&rules[c.rule[0][0]]);
		if (now < 0)
			now = 0;
		c.now = use_time ? -1 : now;
		x = send_call(&c, rules, &tx);
		if (x->type == REDIS_REPLY_ERROR && c.nreq > 1) {
			print_vector(&c, rules, x->str);
			rv = -1;
		}
		for (q = 0; q < c.nreq && rv == 0; q++) {
			long long at = c.now;

			rv = compare_request(&c, q, rules, x, &e, &at);
			/* a call's error: one request, no array */
			if (x->type != REDIS_REPLY_ARRAY)
				break;
		}
		freeReplyObject(tx);
		(*calls)++;
	}
	for (i = 0; i < n; i++)
		free(rules[i].st.e);
	return rv;
}

int
main(int argc, char **argv)
{
	struct timeval tv = { 10, 0 };
	redisReply *x;
	long long calls = 0;
	int port, nscn = 200, s, bad[2] = { 0, 0 }, t;
	uint64_t seed;

	if (argc < 3 || argc > 4)
		die("usage: twin_diff PORT SEED [SCENARIOS]");
	port = atoi(argv[1]);
	seed = strtoull(argv[2], NULL, 10);
	if (argc == 4)
		nscn = atoi(argv[3]);
	rng = seed ? seed : 1;
	printf("# seed %" PRIu64 " (twin_diff %s %" PRIu64 " %d repeats this run)\n",
	    seed, argv[1], seed, nscn);
	snprintf(prefix, sizeof(prefix), "twin_diff:%ld:", (long)getpid());
	if ((rc = redisConnectWithTimeout("127.0.0.1", port, tv)) == NULL || rc->err)
		die("cannot connect to 127.0.0.1:%d", port);
	if ((x = redisCommand(rc, "FUNCTION LOAD REPLACE %s", rlg_library)) == NULL ||
	    x->type != REDIS_REPLY_STRING)
		die("the library does not load: %s", x && x->str ? x->str : "?");
	freeReplyObject(x);
	for (t = 0; t < 2; t++) {
		long long before = calls;

		for (s = 0; s < nscn && !bad[t]; s++)
			bad[t] = scenario(2 * s + t, (int)between(1, 60), t, &calls) == -1;
		printf("%s - %s: %lld calls of random rules (all 6 algorithms, "
		    "overrides, batches) agree with the twin, field by field\n",
		    bad[t] ? "not ok" : "ok", t ? "Redis TIME" : "ARGV now",
		    calls - before);
		bad[t] ? failed++ : passed++;
	}
	for (t = 0, s = 0; t < RLG_ALGORITHM_COUNT; t++) {
		printf("# %s: %lld admitted, %lld denied\n", names[t], seen[t][1],
		    seen[t][0]);
		s += seen[t][0] > 0 && seen[t][1] > 0;
	}
	printf("%s - every algorithm both admitted and denied (%d of 6)\n",
	    s == RLG_ALGORITHM_COUNT ? "ok" : "not ok", s);
	s == RLG_ALGORITHM_COUNT ? passed++ : failed++;
	x = redisCommand(rc, "EVAL %s 0 %s*", "for _, k in ipairs(redis.call('KEYS', "
	    "ARGV[1])) do redis.call('DEL', k) end", prefix);
	freeReplyObject(x);
	redisFree(rc);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
