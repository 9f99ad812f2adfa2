/*
 * Unit tests for rlgate-report's arithmetic: window alignment, UTC times,
 * durations, axis steps, and each --verify check at the edge of the slack
 * that millisecond timestamps allow (one ms less passes, one more fails).
 * The report's sources are included so that their static checks can be
 * driven directly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../reports/window.c"
#include "../../reports/intern.c"
#include "../../reports/db.c"
#include "../../reports/verify.c"
#include "../../reports/verify_load.c"
#include "../../reports/verify_local.c"

#define BASE	1763805600000LL		/* 2025-11-22 10:00:00.000 UTC */

static void
test_window_start(void **state)
{
	(void)state;
	assert_int_equal(window_start(1005, 1000), 1000);
	assert_int_equal(window_start(1000, 1000), 1000);
	assert_int_equal(window_start(999, 1000), 0);
	assert_int_equal(window_start(-1, 1000), -1000);
	assert_int_equal(window_start(BASE + 123, 1), BASE + 123);
	assert_int_equal(window_start(BASE + 59999, 60000), BASE);
	assert_int_equal(window_start(20, 7), 14);
}

static void
test_format_time(void **state)
{
	char b[RLG_TIME_LEN];

	(void)state;
	assert_string_equal(window_format_time(0, b), "1970-01-01 00:00:00.000");
	assert_string_equal(window_format_time(BASE, b), "2025-11-22 10:00:00.000");
	assert_string_equal(window_format_time(BASE + 86399999 - 36000000, b),
	    "2025-11-22 23:59:59.999");
	assert_string_equal(window_format_time(951782400123LL, b), "2000-02-29 00:00:00.123");
	assert_string_equal(window_format_time(-1, b), "1969-12-31 23:59:59.999");
}

static void
test_parse_time(void **state)
{
	int64_t ms;
	const char *e;
	static const char *bad[] = {
		"", "yesterday", "2025-13-01", "2025-00-10", "2025-02-29", "2025-11-31",
		"2025-11-22 24:00", "2025-11-22 10:60", "2025-11-22 10:00:60",
		"2025-11-22 10", "2025-11-22 10:00:00.", "2025-11-22 10:00:00.1234",
		"2025-11-22x", "25-11-22", "2025-11-22 10:00:00 UTC", "-5", "1e9",
	};

	(void)state;
	assert_int_equal(window_parse_time("2025-11-22 10:00:00.000", &ms, &e), 0);
	assert_int_equal(ms, BASE);
	assert_int_equal(window_parse_time("2025-11-22", &ms, &e), 0);
	assert_int_equal(ms, BASE - 36000000);
	assert_int_equal(window_parse_time("2025-11-22T10:00:05.5Z", &ms, &e), 0);
	assert_int_equal(ms, BASE + 5500);
	assert_int_equal(window_parse_time("2025-11-22 10:01", &ms, &e), 0);
	assert_int_equal(ms, BASE + 60000);
	assert_int_equal(window_parse_time("2024-02-29 00:00:00.007", &ms, &e), 0);
	assert_int_equal(ms, 1709164800007LL);
	assert_int_equal(window_parse_time("1763805600123", &ms, &e), 0);
	assert_int_equal(ms, BASE + 123);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (window_parse_time(bad[i], &ms, &e) != -1)
			fail_msg("\"%s\" parsed as %lld", bad[i], (long long)ms);
		assert_non_null(e);
	}
	/* Every formatted time parses back to itself. */
	for (int64_t t = BASE - 5000000000LL; t < BASE + 5000000000LL; t += 123456789) {
		char b[RLG_TIME_LEN];

		assert_int_equal(window_parse_time(window_format_time(t, b), &ms, &e), 0);
		assert_int_equal(ms, t);
	}
}

static void
test_durations_and_steps(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(window_format_duration(1, b, sizeof(b)), "1ms");
	assert_string_equal(window_format_duration(1000, b, sizeof(b)), "1s");
	assert_string_equal(window_format_duration(1500, b, sizeof(b)), "1500ms");
	assert_string_equal(window_format_duration(90000, b, sizeof(b)), "90s");
	assert_string_equal(window_format_duration(3600000, b, sizeof(b)), "1h");
	assert_string_equal(window_format_duration(172800000, b, sizeof(b)), "2d");
	assert_int_equal(window_axis_step(1), 1);
	assert_int_equal(window_axis_step(3), 5);
	assert_int_equal(window_axis_step(501), 1000);
	assert_int_equal(window_axis_step(50000), 60000);
	assert_int_equal(window_axis_step(604800001), 1209600000);
	assert_true(window_count_step(0.3) == 1);
	assert_true(window_count_step(3) == 5);
	assert_true(window_count_step(11) == 20);
	assert_true(window_count_step(2000) == 2000);
	assert_true(window_count_step(2001) == 5000);
	assert_int_equal(verify_default_precision(1000), 100);
	assert_int_equal(verify_default_precision(60000), 6000);
	assert_int_equal(verify_default_precision(250), 25);
	assert_int_equal(verify_default_precision(15), 1);
	assert_int_equal(verify_default_precision(7), 1);
	assert_int_equal(verify_default_precision(30), 3);
}

/* A replay harness: one key, rows at the given ms with cost 1 and delays. */
static struct verify V;
static struct priv P;
static const struct filter F = { NULL, NULL, INT64_MIN, INT64_MAX };

static size_t
replay(enum rlg_algorithm alg, int64_t limit, int64_t window_ms, int64_t burst,
    int64_t precision_ms, const int64_t *ts, const int64_t *delay, size_t n)
{
	struct ctx c = { &V, &P, &F, 0, 0, 0 };
	struct pinfo p = { "r", conf_algorithm_name(alg), (int)alg, limit, window_ms,
	    burst, precision_ms, "test", 0, 0, 0, 0, 0, 0 };
	struct rec r[64];
	uint32_t kid;

	assert_true(n <= 64);
	free(V.v);
	memset(&V, 0, sizeof(V));
	kid = intern_pair(&P.keys, "r", "k");
	for (size_t i = 0; i < n; i++)
		r[i] = (struct rec){ BASE + ts[i], kid, 0, (uint32_t)i, 1, delay ? delay[i] : 0 };
	switch (alg) {
	case RLG_FIXED_WINDOW:	check_fixed(&c, r, n, &p, kid); break;
	case RLG_SLIDING_LOG:	check_blocks(&c, r, n, &p, kid, 1, log_flush); break;
	case RLG_SLIDING_WINDOW: check_blocks(&c, r, n, &p, kid, precision_ms, blocks_flush); break;
	case RLG_LEAKY_BUCKET:	check_leaky(&c, r, n, &p, kid); break;
	default:		check_bucket(&c, r, n, &p, kid); break;
	}
	assert_false(c.oom);
	return V.nv;
}

#define N(a)	(sizeof(a) / sizeof((a)[0]))
#define FIXED(limit, w, ...) ({ static const int64_t t_[] = { __VA_ARGS__ }; \
	replay(RLG_FIXED_WINDOW, limit, w, limit, 0, t_, NULL, N(t_)); })

static void
test_fixed_window(void **state)
{
	(void)state;
	/* The ms where a window ends may hold decisions of either window. */
	assert_int_equal(FIXED(1, 10, 0, 10), 0);
	assert_int_equal(FIXED(2, 10, 0, 9, 10, 10), 0);
	assert_int_equal(FIXED(2, 10, 0, 10, 10, 10), 0);	/* one in the old window */
	assert_int_equal(FIXED(2, 10, 0, 10, 10, 10, 10), 1);
	assert_int_equal(FIXED(2, 10, 0, 9, 10, 10, 10), 1);
	/* ...and the next window may open in that ms or at the next decision. */
	assert_int_equal(FIXED(2, 10, 0, 10, 11, 19, 21), 0);	/* opens at 11 */
	assert_int_equal(FIXED(2, 10, 0, 10, 11, 20, 20), 0);	/* opens at 10 */
	/* Inside a window there is no slack. */
	assert_int_equal(FIXED(2, 10, 0, 1, 2), 1);
	assert_string_equal(V.v[0].check, "window");
	assert_int_equal(V.v[0].from_ms, BASE);
	assert_int_equal(V.v[0].to_ms, BASE + 10);
	assert_int_equal(V.v[0].admitted, 3);
	assert_int_equal(FIXED(2, 10, 0, 5, 9, 20, 21, 22), 2);
	assert_int_equal(V.v[1].from_ms, BASE + 20);
	/* The seeds' boundary problem: 2 x limit within 2 ms is the promise. */
	assert_int_equal(FIXED(3, 1000, 999, 999, 999, 1999, 1999, 1999), 0);
	assert_int_equal(FIXED(3, 1000, 0, 999, 999, 999), 1);
}

static void
test_sliding_log(void **state)
{
	static const int64_t a[] = { 0, 999 }, b[] = { 0, 1000 }, c[] = { 5, 5, 5 };

	(void)state;
	/* Stamped W - 1 ms apart: less than W apart whatever the true times. */
	assert_int_equal(replay(RLG_SLIDING_LOG, 1, 1000, 1, 0, a, NULL, 2), 1);
	assert_int_equal(V.v[0].admitted, 2);
	assert_int_equal(V.v[0].to_ms, BASE + 1000);
	assert_int_equal(replay(RLG_SLIDING_LOG, 1, 1000, 1, 0, b, NULL, 2), 0);
	assert_int_equal(replay(RLG_SLIDING_LOG, 3, 1, 3, 0, c, NULL, 3), 0);
	assert_int_equal(replay(RLG_SLIDING_LOG, 2, 1, 2, 0, c, NULL, 3), 1);
}

static void
test_sliding_window(void **state)
{
	static const int64_t a[] = { 0, 999 }, b[] = { 0, 1000 }, c[] = { 99, 1000 },
	    d[] = { 100, 1000 };

	(void)state;
	/* Blocks start on whole ms: a decision's block is exact, no slack. */
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, a, NULL, 2), 1);
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, b, NULL, 2), 0);
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, c, NULL, 2), 0);
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, d, NULL, 2), 1);
	assert_int_equal(V.v[0].from_ms, BASE + 100);
	assert_int_equal(V.v[0].to_ms, BASE + 1100);
}

static void
test_token_bucket(void **state)
{
	static const int64_t same[] = { 0, 0 }, a[] = { 0, 999 }, b[] = { 0, 1000 };

	(void)state;
	/* Two in one ms are up to 0.999 ms apart: 1.002 tokens/ms refills one. */
	assert_int_equal(replay(RLG_TOKEN_BUCKET, 1002, 1000, 1, 0, same, NULL, 2), 0);
	assert_int_equal(replay(RLG_TOKEN_BUCKET, 1001, 1000, 1, 0, same, NULL, 2), 1);
	assert_int_equal(V.v[0].admitted, 2);
	assert_string_equal(V.v[0].allowed, "1.999999");
	/* One token per second: stamped 999 ms apart is at most 999.999 ms. */
	assert_int_equal(replay(RLG_GCRA, 1, 1000, 1, 0, a, NULL, 2), 1);
	assert_int_equal(replay(RLG_GCRA, 1, 1000, 1, 0, b, NULL, 2), 0);
	/* A full bucket admits burst at once, not one more. */
	{
		int64_t t[11] = { 0 };

		assert_int_equal(replay(RLG_TOKEN_BUCKET, 1, 60000, 10, 0, t, NULL, 10), 0);
		assert_int_equal(replay(RLG_TOKEN_BUCKET, 1, 60000, 10, 0, t, NULL, 11), 1);
		assert_int_equal(V.v[0].decisions, 1);
	}
}

static void
test_leaky_bucket(void **state)
{
	static const int64_t t[] = { 0, 0 }, d10[] = { 0, 10 }, d9[] = { 0, 9 },
	    d8[] = { 0, 8 }, w10[] = { 10, 0 }, w11[] = { 11, 0 };

	(void)state;
	/* T = 10 ms: departures stamped 9 ms apart may be 10.998 ms apart. */
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 10, 0, t, d10, 2), 0);
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 10, 0, t, d9, 2), 0);
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 10, 0, t, d8, 2), 1);
	assert_string_equal(V.v[0].check, "spacing");
	/* burst 1 x T: a wait of 10 ms is allowed, a delay of 11 ms (> 10) not. */
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 1, 0, t, w10, 1), 0);
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 1, 0, t, w11, 1), 1);
	assert_string_equal(V.v[0].check, "wait");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_start),
		cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_parse_time),
		cmocka_unit_test(test_durations_and_steps),
		cmocka_unit_test(test_fixed_window),
		cmocka_unit_test(test_sliding_log),
		cmocka_unit_test(test_sliding_window),
		cmocka_unit_test(test_token_bucket),
		cmocka_unit_test(test_leaky_bucket),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	free(V.v);
	intern_free(&P.keys);
	return rc;
}
