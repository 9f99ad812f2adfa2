/*
 * Unit tests for denycache: expiry at until_us, cost, configurations kept
 * apart, keys with any bytes, the LRU bound, clear, and many threads.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "denycache.h"

static const int tag_a = 1, tag_b = 2;	/* two "configurations" */

static struct denial
denial(long long cost, long long until_us)
{
	struct denial d = { cost, 3, 100, until_us, until_us + 500, 1000, 0 };

	return d;
}

static int
setup(void **state)
{
	(void)state;
	denycache_clear();
	return 0;
}

static void
test_hit_until_expiry(void **state)
{
	struct denial d = denial(1, 1000), got;

	(void)state;
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 1, 0, &got), 0);
	denycache_put(&tag_a, "r", "k", 1, &d);
	assert_int_equal(denycache_size(), 1);
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 1, 999, &got), 1);
	assert_true(got.remaining == 3 && got.limit == 100 &&
	    got.until_us == 1000 && got.reset_at_us == 1500);
	/* At until_us the client may try again: Redis decides. */
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 1, 1000, &got), 0);
	assert_int_equal(denycache_size(), 0);	/* and the entry is gone */
}

static void
test_cost_and_identity(void **state)
{
	struct denial d = denial(5, 1000), got;

	(void)state;
	denycache_put(&tag_a, "r", "k", 1, &d);
	/* A cheaper request may fit: it goes to Redis. */
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 4, 0, &got), 0);
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 5, 0, &got), 1);
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 9, 0, &got), 1);
	/* Another configuration, rule or key is another entry. */
	assert_int_equal(denycache_get(&tag_b, "r", "k", 1, 5, 0, &got), 0);
	assert_int_equal(denycache_get(&tag_a, "s", "k", 1, 5, 0, &got), 0);
	assert_int_equal(denycache_get(&tag_a, "r", "k2", 2, 5, 0, &got), 0);
	/* Rule and key do not run together: "rk"+"" is not "r"+"k". */
	assert_int_equal(denycache_get(&tag_a, "rk", "", 0, 5, 0, &got), 0);
	/* Keys are bytes, NUL included. */
	denycache_put(&tag_a, "r", "a\0b", 3, &d);
	assert_int_equal(denycache_get(&tag_a, "r", "a\0b", 3, 5, 0, &got), 1);
	assert_int_equal(denycache_get(&tag_a, "r", "a\0c", 3, 5, 0, &got), 0);
	/* A new denial replaces the old one. */
	d = denial(1, 2000);
	denycache_put(&tag_a, "r", "k", 1, &d);
	assert_int_equal(denycache_get(&tag_a, "r", "k", 1, 1, 1500, &got), 1);
	assert_int_equal(denycache_size(), 2);
}

static void
test_bounded_lru(void **state)
{
	struct denial d = denial(1, 1000000), got;
	char key[32];
	int i, kept = 0;

	(void)state;
	denycache_put(&tag_a, "r", "first", 5, &d);
	for (i = 0; i < 3 * RLG_DENY_CACHE_ENTRIES; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		denycache_put(&tag_a, "r", key, strlen(key), &d);
		/* "first" stays the most recently used in its shard. */
		assert_int_equal(denycache_get(&tag_a, "r", "first", 5, 1, 0,
		    &got), 1);
	}
	assert_true(denycache_size() <= RLG_DENY_CACHE_ENTRIES);
	assert_true(denycache_size() >= RLG_DENY_CACHE_ENTRIES * 3 / 4);
	/* The newest keys are there, the oldest were evicted. */
	for (i = 3 * RLG_DENY_CACHE_ENTRIES - 100; i < 3 *
	    RLG_DENY_CACHE_ENTRIES; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		kept += denycache_get(&tag_a, "r", key, strlen(key), 1, 0, &got);
	}
	assert_true(kept >= 90);
	assert_int_equal(denycache_get(&tag_a, "r", "k0", 2, 1, 0, &got), 0);
	denycache_clear();
	assert_int_equal(denycache_size(), 0);
	assert_int_equal(denycache_get(&tag_a, "r", "first", 5, 1, 0, &got), 0);
}

static void *
hammer(void *arg)
{
	struct denial d = denial(1, 1000000), got;
	char key[32];
	long t = (long)arg;
	int i;

	for (i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "t%ld-%d", t, i % 3000);
		if (!denycache_get(&tag_a, "r", key, strlen(key), 1, 0, &got))
			denycache_put(&tag_a, "r", key, strlen(key), &d);
		if (t == 0 && i % 5000 == 0)
			denycache_clear();
	}
	return NULL;
}

static void
test_threads(void **state)
{
	pthread_t th[8];
	long i;

	(void)state;
	for (i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hammer,
		    (void *)i), 0);
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	assert_true(denycache_size() <= RLG_DENY_CACHE_ENTRIES);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_hit_until_expiry, setup),
		cmocka_unit_test_setup(test_cost_and_identity, setup),
		cmocka_unit_test_setup(test_bounded_lru, setup),
		cmocka_unit_test_setup(test_threads, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
