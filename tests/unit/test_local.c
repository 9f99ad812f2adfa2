/*
 * Unit tests for local (on_error = local): the share rounded down, and
 * each of the six algorithms on a share, with exact numbers at a given
 * clock (ms); keys kept apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "local.h"

static struct rule	ru;
static struct match	m;

static int
setup(void **state)
{
	(void)state;
	local_reset();
	memset(&ru, 0, sizeof(ru));
	memset(&m, 0, sizeof(m));
	ru.name = (char *)"r";
	m.rule = &ru;
	strcpy(m.key, "k");
	m.key_len = 1;
	m.cost = 1;
	return 0;
}

static void
rule(enum rlg_algorithm a, long long limit, long long window_ms,
    long long burst, long long precision_ms)
{
	ru.algorithm = a;
	ru.limit = limit;
	ru.window_ms = window_ms;
	ru.burst = burst;
	ru.precision_ms = precision_ms;
}

/* Decides at now on share 1/2; returns allowed, and v. */
static int
at(long long now, struct verdict *v)
{
	local_decide(&m, 1, 2, now, v);
	assert_int_equal(v->answered, 1);
	assert_int_equal(v->by_local, 1);
	assert_int_equal(v->counted, v->allowed);
	assert_int_equal(v->now_us, now * 1000);
	return v->allowed;
}

static void
test_share(void **state)
{
	(void)state;
	assert_int_equal(local_share(10, 1, 4), 2);
	assert_int_equal(local_share(3, 1, 4), 0);
	assert_int_equal(local_share(7, 1, 2), 3);
	assert_int_equal(local_share(10, 1, 1), 10);
	assert_int_equal(local_share(1000000000, 333333, 1000000), 333333000);
}

static void
test_fixed_window(void **state)
{
	struct verdict v;
	int i;

	(void)state;
	rule(RLG_FIXED_WINDOW, 10, 1000, 0, 0);
	for (i = 0; i < 5; i++) {
		assert_true(at(1000 + i, &v));
		assert_int_equal(v.remaining, 4 - i);
		assert_int_equal(v.limit, 5);
	}
	assert_false(at(1500, &v));
	assert_int_equal(v.retry_after_ms, 500);
	assert_int_equal(v.remaining, 0);
	assert_false(at(1999, &v));
	assert_true(at(2000, &v));	/* start + window: a new window */
	assert_int_equal(v.remaining, 4);
	/* another key is its own */
	strcpy(m.key, "k2");
	m.key_len = 2;
	assert_true(at(2000, &v));
	assert_int_equal(v.remaining, 4);
}

static void
test_rounds_to_zero(void **state)
{
	struct verdict v;

	(void)state;
	rule(RLG_FIXED_WINDOW, 1, 1000, 0, 0);	/* 1 x 1/2 = 0 */
	assert_false(at(1000, &v));
	assert_int_equal(v.limit, 0);
	assert_int_equal(v.retry_after_ms, 1000);
}

static void
test_sliding_log(void **state)
{
	struct verdict v;

	(void)state;
	rule(RLG_SLIDING_LOG, 6, 1000, 0, 0);	/* 3 */
	assert_true(at(10000, &v));
	assert_true(at(10100, &v));
	assert_true(at(10200, &v));
	assert_int_equal(v.remaining, 0);
	assert_false(at(10300, &v));
	assert_int_equal(v.retry_after_ms, 700);
	assert_false(at(10999, &v));
	assert_int_equal(v.retry_after_ms, 1);
	assert_true(at(11000, &v));		/* 10000 left (t - 1000, t] */
	assert_false(at(11000, &v));
	assert_int_equal(v.retry_after_ms, 100);
}

static void
test_sliding_window(void **state)
{
	struct verdict v;

	(void)state;
	rule(RLG_SLIDING_WINDOW, 4, 1000, 0, 250);	/* 2, 4 blocks */
	assert_true(at(10000, &v));
	assert_true(at(10100, &v));
	assert_int_equal(v.remaining, 0);
	assert_false(at(10900, &v));
	assert_int_equal(v.retry_after_ms, 100);	/* block 40 leaves */
	assert_true(at(11000, &v));
	assert_true(at(11000, &v));
	assert_false(at(11249, &v));
	assert_int_equal(v.retry_after_ms, 751);	/* block 44 leaves at 12000 */
}

static void
bucket(enum rlg_algorithm a)
{
	struct verdict v;
	int i;

	rule(a, 10, 1000, 10, 0);	/* 5 per s, burst 5 */
	for (i = 0; i < 5; i++) {
		assert_true(at(10000, &v));
		assert_int_equal(v.remaining, 4 - i);
	}
	assert_int_equal(v.burst, 5);
	assert_false(at(10000, &v));
	assert_int_equal(v.retry_after_ms, 200);
	assert_false(at(10199, &v));
	assert_int_equal(v.retry_after_ms, 1);
	assert_true(at(10200, &v));		/* one token back */
	assert_false(at(10200, &v));
	assert_true(at(11400, &v));		/* full again at 11200 */
	assert_int_equal(v.remaining, 4);
}

static void
test_token_bucket(void **state)
{
	(void)state;
	bucket(RLG_TOKEN_BUCKET);
}

static void
test_gcra(void **state)
{
	(void)state;
	bucket(RLG_GCRA);
}

static void
test_leaky_bucket(void **state)
{
	struct verdict v;

	(void)state;
	rule(RLG_LEAKY_BUCKET, 10, 1000, 2, 0);	/* 5 per s: 200 ms; 1 waits */
	assert_true(at(10000, &v));
	assert_int_equal(v.delay_ms, 0);
	assert_true(at(10000, &v));
	assert_int_equal(v.delay_ms, 200);
	assert_false(at(10000, &v));
	assert_int_equal(v.retry_after_ms, 200);
	assert_true(at(10200, &v));
	assert_int_equal(v.delay_ms, 200);
	assert_true(at(11000, &v));		/* drained at 10600 */
	assert_int_equal(v.delay_ms, 0);
}

static void
test_cost(void **state)
{
	struct verdict v;

	(void)state;
	rule(RLG_FIXED_WINDOW, 10, 1000, 0, 0);
	m.cost = 3;
	assert_true(at(1000, &v));
	assert_int_equal(v.remaining, 2);
	assert_false(at(1000, &v));
	assert_int_equal(v.remaining, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_share, setup),
		cmocka_unit_test_setup(test_fixed_window, setup),
		cmocka_unit_test_setup(test_rounds_to_zero, setup),
		cmocka_unit_test_setup(test_sliding_log, setup),
		cmocka_unit_test_setup(test_sliding_window, setup),
		cmocka_unit_test_setup(test_token_bucket, setup),
		cmocka_unit_test_setup(test_gcra, setup),
		cmocka_unit_test_setup(test_leaky_bucket, setup),
		cmocka_unit_test_setup(test_cost, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
