/*
 * Unit tests for algo, the C twin of lua/: each algorithm's replies at
 * given times, worked out by hand from its lua/<algorithm>.lua comment
 * (the same sequences lua_check asks the Lua for), the check that writes
 * nothing and the commit, an admitting rule that was not counted, the
 * arguments refused, a bounded array (stricter, never looser), the idle
 * time, and the default precision.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "algo.h"
#include "conf.h"

#define T0	1700000000000000LL	/* us, a multiple of every block */
#define MS	1000LL
#define E	RLG_PARAM_UNSET

/* One request: at T0 + t_us, cost; the reply's allowed, remaining,
 * reset_ms, retry_after_ms, delay_ms. */
struct step {
	long long	t_us, cost, allowed, remaining, reset, retry, delay;
};

static struct algo_entry	 entries[64];

static void
run(enum rlg_algorithm a, long long limit, long long window_ms,
    long long burst, long long precision_ms, const struct step *s, size_t n)
{
	struct algo_params p;
	struct algo_state st;
	long long v[ALGO_NFIELDS];
	size_t i;

	algo_state_init(&st, entries, 64);
	for (i = 0; i < n; i++) {
		assert_int_equal(algo_params(&p, a, s[i].cost, limit, window_ms,
		    burst, precision_ms, NULL, 0), 0);
		algo_decide(&p, &st, T0 + s[i].t_us, v);
		if (v[RLG_REPLY_ALLOWED] != s[i].allowed || v[RLG_REPLY_REMAINING] !=
		    s[i].remaining || v[RLG_REPLY_RESET_MS] != s[i].reset ||
		    v[RLG_REPLY_RETRY_AFTER_MS] != s[i].retry || v[RLG_REPLY_DELAY_MS] !=
		    s[i].delay)
			fail_msg("step %zu (t %lld us, cost %lld): %lld %lld %lld "
			    "%lld %lld, expected %lld %lld %lld %lld %lld", i + 1,
			    s[i].t_us, s[i].cost, v[0], v[1], v[3], v[4], v[6],
			    s[i].allowed, s[i].remaining, s[i].reset, s[i].retry,
			    s[i].delay);
		assert_int_equal(v[RLG_REPLY_LIMIT], limit);
		assert_int_equal(v[RLG_REPLY_NOW_US], T0 + s[i].t_us);
	}
}

#define RUN(a, l, w, b, p, s)	run(a, l, w, b, p, s, sizeof(s) / sizeof(s[0]))

static void
test_fixed_window(void **state)
{
	/* 3 per 1000 ms: a window opens at the first request after the last. */
	static const struct step s[] = {
		{ 0, 1, 1, 2, 1000, 0, 0 },
		{ 0, 1, 1, 1, 1000, 0, 0 },
		{ 400 * MS, 1, 1, 0, 600, 0, 0 },
		{ 400 * MS, 1, 0, 0, 600, 600, 0 },
		{ 999999, 1, 0, 0, 1, 1, 0 },		/* 1 us left: 1 ms */
		{ 1000 * MS, 2, 1, 1, 1000, 0, 0 },	/* opens [1000, 2000) */
		{ 1500 * MS, 2, 0, 1, 500, 500, 0 },
		{ 5000 * MS, 3, 1, 0, 1000, 0, 0 },	/* at 5000, not a multiple */
		{ 5999 * MS, 1, 0, 0, 1, 1, 0 },
	};

	(void)state;
	RUN(RLG_FIXED_WINDOW, 3, 1000, E, E, s);
}

static void
test_sliding_window(void **state)
{
	/* 3 per 1000 ms in blocks of 100 ms. */
	static const struct step s[] = {
		{ 0, 1, 1, 2, 1000, 0, 0 },
		{ 0, 1, 1, 1, 1000, 0, 0 },
		{ 100 * MS, 1, 1, 0, 1000, 0, 0 },
		{ 100 * MS, 1, 0, 0, 1000, 900, 0 },
		{ 250 * MS, 1, 0, 0, 850, 750, 0 },
		{ 999999, 1, 0, 0, 101, 1, 0 },
		{ 1000 * MS, 1, 1, 1, 1000, 0, 0 },	/* block 0 dropped out */
		{ 1050 * MS, 1, 1, 0, 950, 0, 0 },
		{ 1050 * MS, 1, 0, 0, 950, 50, 0 },
		{ 1100 * MS, 2, 0, 1, 900, 900, 0 },	/* block 10 (2) must go */
		{ 1100 * MS, 1, 1, 0, 1000, 0, 0 },
	};

	(void)state;
	RUN(RLG_SLIDING_WINDOW, 3, 1000, E, 100, s);
	RUN(RLG_SLIDING_WINDOW, 3, 1000, E, E, s);	/* empty: 1000 / 10 */
}

static void
test_sliding_log(void **state)
{
	/* 3 per 1000 ms: any (t - 1000 ms, t]. */
	static const struct step s[] = {
		{ 0, 1, 1, 2, 1000, 0, 0 },
		{ 0, 1, 1, 1, 1000, 0, 0 },
		{ 100 * MS, 1, 1, 0, 1000, 0, 0 },
		{ 100 * MS, 1, 0, 0, 1000, 900, 0 },
		{ 200 * MS, 1, 0, 0, 900, 800, 0 },
		{ 999999, 1, 0, 0, 101, 1, 0 },
		{ 1000 * MS, 1, 1, 1, 1000, 0, 0 },	/* both at 0 left */
		{ 1001 * MS, 1, 1, 0, 1000, 0, 0 },
		{ 1100 * MS, 1, 1, 0, 1000, 0, 0 },
		{ 1100 * MS, 3, 0, 0, 1000, 1000, 0 },	/* all three must leave */
		{ 2100 * MS, 2, 1, 1, 1000, 0, 0 },
	};

	(void)state;
	RUN(RLG_SLIDING_LOG, 3, 1000, E, E, s);
}

/* 7 per 1000 ms, burst 3: a token every 142857.142857 us. */
static const struct step bucket7[] = {
	{ 0, 1, 1, 2, 143, 0, 0 },
	{ 0, 1, 1, 1, 286, 0, 0 },
	{ 0, 1, 1, 0, 429, 0, 0 },
	{ 0, 1, 0, 0, 429, 143, 0 },
	{ 142 * MS, 1, 0, 0, 287, 1, 0 },	/* 858 us short */
	{ 142857, 1, 0, 0, 286, 1, 0 },		/* 1 us short */
	{ 142858, 1, 1, 0, 429, 0, 0 },
	{ 1142 * MS, 3, 1, 0, 429, 0, 0 },	/* full again */
	{ 1142 * MS, 1, 0, 0, 429, 143, 0 },
};

static void
test_token_bucket(void **state)
{
	(void)state;
	RUN(RLG_TOKEN_BUCKET, 7, 1000, 3, E, bucket7);
}

static void
test_gcra(void **state)
{
	/* redis-cell's CL.THROTTLE user123 15 30 60 1: burst 16, 30 per 60 s. */
	static const struct step cell[] = {
		{ 0, 1, 1, 15, 2000, 0, 0 },
		{ 0, 14, 1, 1, 30000, 0, 0 },
		{ 0, 1, 1, 0, 32000, 0, 0 },
		{ 0, 1, 0, 0, 32000, 2000, 0 },
		{ 1999 * MS, 1, 0, 0, 30001, 1, 0 },
		{ 2000 * MS, 1, 1, 0, 32000, 0, 0 },
		{ 4000 * MS, 1, 1, 0, 32000, 0, 0 },
		{ 12000 * MS, 5, 0, 4, 24000, 2000, 0 },	/* 4 back, not 5 */
		{ 70000 * MS, 16, 1, 0, 32000, 0, 0 },
	};

	(void)state;
	RUN(RLG_GCRA, 7, 1000, 3, E, bucket7);
	RUN(RLG_GCRA, 30, 60000, 16, E, cell);
}

static void
test_leaky_bucket(void **state)
{
	/* 1 per 1000 ms, burst 3: one leaves per second. */
	static const struct step s[] = {
		{ 0, 1, 1, 3, 1000, 0, 0 },		/* idle: at once */
		{ 0, 1, 1, 2, 2000, 0, 1000 },
		{ 0, 1, 1, 1, 3000, 0, 2000 },
		{ 0, 1, 1, 0, 4000, 0, 3000 },
		{ 0, 1, 0, 0, 4000, 1000, 0 },
		{ 999 * MS, 1, 0, 0, 3001, 1, 0 },
		{ 1000 * MS, 1, 1, 0, 4000, 0, 3000 },
		{ 3500 * MS, 2, 1, 0, 3500, 0, 1500 },	/* cost 2: 2 s */
		{ 10000 * MS, 1, 1, 3, 1000, 0, 0 },	/* idle again */
	};
	/* 3 per 1000 ms: one every 333333.333 us. */
	static const struct step frac[] = {
		{ 0, 1, 1, 3, 334, 0, 0 },
		{ 0, 1, 1, 2, 667, 0, 334 },
		{ 0, 1, 1, 1, 1000, 0, 667 },
		{ 0, 1, 1, 0, 1334, 0, 1000 },
		{ 0, 1, 0, 0, 1334, 334, 0 },
		{ 333333, 1, 0, 0, 1001, 1, 0 },	/* waits 1000000.33 us */
		{ 333334, 1, 1, 0, 1334, 0, 1000 },
	};

	(void)state;
	RUN(RLG_LEAKY_BUCKET, 1, 1000, 3, E, s);
	RUN(RLG_LEAKY_BUCKET, 3, 1000, E, E, frac);
}

/* The check writes nothing; an admitting rule not counted shows the state
 * as it is (decide.lua), an unlimited one the whole limit. */
static void
test_check_then_commit(void **state)
{
	struct algo_params p;
	struct algo_state st, before;
	struct algo_decision d;
	long long v[ALGO_NFIELDS];

	(void)state;
	assert_int_equal(algo_params(&p, RLG_LEAKY_BUCKET, 1, 1, 1000, 3, E,
	    NULL, 0), 0);
	algo_state_init(&st, NULL, 0);
	algo_decide(&p, &st, T0, v);
	before = st;
	algo_check(&p, &st, T0, &d);
	assert_memory_equal(&st, &before, sizeof(st));
	assert_int_equal(d.allowed, 1);
	algo_reply(&p, &d, 0, T0, v);	/* not counted */
	assert_int_equal(v[RLG_REPLY_ALLOWED], 1);
	assert_int_equal(v[RLG_REPLY_REMAINING], 3);
	assert_int_equal(v[RLG_REPLY_RESET_MS], 1000);
	assert_int_equal(v[RLG_REPLY_DELAY_MS], 0);
	algo_reply(&p, &d, 1, T0, v);	/* counted */
	assert_int_equal(v[RLG_REPLY_REMAINING], 2);
	assert_int_equal(v[RLG_REPLY_RESET_MS], 2000);
	assert_int_equal(v[RLG_REPLY_DELAY_MS], 1000);
	algo_commit(&p, &st, T0, &d);
	assert_int_equal(st.t, T0 + 2000 * MS);
	algo_reply(&p, NULL, 1, T0, v);	/* unlimited */
	assert_int_equal(v[RLG_REPLY_ALLOWED], 1);
	assert_int_equal(v[RLG_REPLY_REMAINING], 1);
	assert_int_equal(v[RLG_REPLY_RESET_MS], 0);
}

static void
refused(enum rlg_algorithm a, long long cost, long long limit, long long w,
    long long burst, long long prec, const char *words)
{
	struct algo_params p;
	char err[256] = "";

	assert_int_equal(algo_params(&p, a, cost, limit, w, burst, prec, err,
	    sizeof(err)), -1);
	if (strstr(err, words) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", err, words);
}

static void
test_params(void **state)
{
	struct algo_params p;

	(void)state;
	refused(RLG_FIXED_WINDOW, 4, 3, 1000, E, E, "cost 4 is above limit 3");
	refused(RLG_GCRA, 4, 10, 1000, 3, E, "cost 4 is above burst 3");
	refused(RLG_SLIDING_LOG, 1, 100001, 1000, E, E, "limit must be at most 100000");
	refused(RLG_TOKEN_BUCKET, 1, 0, 1000, E, E, "limit must be at least 1");
	refused(RLG_SLIDING_WINDOW, 1, 3, 1001, E, E, "not a multiple of 10");
	refused(RLG_SLIDING_WINDOW, 1, 3, 1000, E, 300, "does not divide");
	refused(RLG_SLIDING_WINDOW, 1, 3, 100000, E, 1, "more than 10000 blocks");
	refused(RLG_GCRA, 1, 7, 100000000000LL, 1000000000, E, "below 2^53");
	refused(RLG_LEAKY_BUCKET, 1, 7, 100000000000LL, 1000000, E, "below 2^52");
	refused(RLG_TOKEN_BUCKET, 1, 3, 1000, 0, E, "burst must be at least 1");
	/* Defaults: burst = limit; leaky_bucket takes burst 0. */
	assert_int_equal(algo_params(&p, RLG_GCRA, 1, 7, 1000, E, E, NULL, 0), 0);
	assert_int_equal(p.burst, 7);
	assert_int_equal(p.scale, 1000000);	/* window_us / gcd(1e6, 7) */
	assert_int_equal(p.rate, 7);
	assert_int_equal(algo_params(&p, RLG_LEAKY_BUCKET, 5, 1, 1000, 0, E, NULL, 0), 0);
	assert_int_equal(p.burst, 0);
	assert_int_equal(algo_params(&p, RLG_SLIDING_WINDOW, 1, 3, 60000, E, E,
	    NULL, 0), 0);
	assert_int_equal(p.precision_ms, 6000);
	assert_int_equal(p.nblocks, 10);
	assert_int_equal(p.burst, 0);
	assert_int_equal(algo_entries(&p), 20);
}

/* With fewer entries than algo_entries(), stricter, never looser. */
static void
test_bounded(void **state)
{
	struct algo_params p;
	struct algo_state st;
	struct algo_entry two[2];
	long long v[ALGO_NFIELDS];

	(void)state;
	assert_int_equal(algo_params(&p, RLG_SLIDING_LOG, 1, 5, 1000, E, E,
	    NULL, 0), 0);
	assert_int_equal(algo_entries(&p), 5);
	algo_state_init(&st, two, 2);
	algo_decide(&p, &st, T0, v);
	algo_decide(&p, &st, T0 + 100 * MS, v);
	assert_true(algo_state_full(&st));
	/* No entry left: the newest (100 ms) moves to 200 ms, with it. */
	algo_decide(&p, &st, T0 + 200 * MS, v);
	assert_int_equal(v[RLG_REPLY_REMAINING], 2);
	assert_int_equal(st.len, 2);
	assert_int_equal(two[1].at, T0 + 200 * MS);
	assert_int_equal(two[1].cost, 2);
	/* Exact, 1100 ms holds 1 (at 200 ms) and admits 4; here it holds 2. */
	assert_int_equal(algo_params(&p, RLG_SLIDING_LOG, 4, 5, 1000, E, E,
	    NULL, 0), 0);
	algo_decide(&p, &st, T0 + 1100 * MS, v);
	assert_int_equal(v[RLG_REPLY_ALLOWED], 0);
	assert_int_equal(v[RLG_REPLY_RETRY_AFTER_MS], 100);
	/* Grown, the entries move in order (the ring linearised). */
	{
		struct algo_entry more[8];

		algo_state_grow(&st, more, 8);
		assert_false(algo_state_full(&st));
		assert_int_equal(more[0].at, T0);
		assert_int_equal(more[1].at, T0 + 200 * MS);
	}
}

static void
test_idle(void **state)
{
	struct algo_params p;
	struct algo_state st;
	long long v[ALGO_NFIELDS];

	(void)state;
	algo_state_init(&st, entries, 64);
	assert_int_equal(algo_params(&p, RLG_TOKEN_BUCKET, 1, 7, 1000, 3, E,
	    NULL, 0), 0);
	assert_true(algo_idle_us(&p, &st) == LLONG_MIN);
	algo_decide(&p, &st, T0, v);
	/* one token short: 142857.142857 us, rounded up */
	assert_int_equal(algo_idle_us(&p, &st), T0 + 142858);
	algo_state_init(&st, entries, 64);
	assert_int_equal(algo_params(&p, RLG_SLIDING_WINDOW, 1, 3, 1000, E,
	    100, NULL, 0), 0);
	algo_decide(&p, &st, T0 + 150 * MS, v);
	assert_int_equal(algo_idle_us(&p, &st), T0 + 1100 * MS);
	algo_state_init(&st, NULL, 0);
	assert_int_equal(algo_params(&p, RLG_LEAKY_BUCKET, 1, 3, 1000, E, E,
	    NULL, 0), 0);
	algo_decide(&p, &st, T0, v);
	assert_int_equal(algo_idle_us(&p, &st), T0 + 333334);
	assert_int_equal(algo_params(&p, RLG_FIXED_WINDOW, 1, 3, 1000, E, E,
	    NULL, 0), 0);
	algo_state_init(&st, NULL, 0);
	algo_decide(&p, &st, T0 + 5, v);
	assert_int_equal(algo_idle_us(&p, &st), T0 + 5 + 1000 * MS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_window),
		cmocka_unit_test(test_sliding_window),
		cmocka_unit_test(test_sliding_log),
		cmocka_unit_test(test_token_bucket),
		cmocka_unit_test(test_gcra),
		cmocka_unit_test(test_leaky_bucket),
		cmocka_unit_test(test_check_then_commit),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_idle),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
