/*
 * Unit tests for limiter_row(): the row of <library>_decide's reply as the
 * gateway reads it (lua/decide.lua writes it). Well-formed rows give their
 * fields exactly; anything else is refused, never guessed at. The rows
 * are written here as lua/README.md shows them, not produced by Lua
 * (it_lua and it_decide run the library itself).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "limiter.h"

static int
parse(const char *s, struct limiter_row *row)
{
	return limiter_row(s, strlen(s), row);
}

static void
test_fields(void **state)
{
	static const long long want[RLG_ROW_INTS] = {
		1, 2, 3, 1000, 0, 1000000, 0, 1000, 0, 100, 3
	};
	const char *s = "1 2 3 1000 0 1000000 0 1000 0 100 3 10:1 override "
	    "ignored: limit must be at least 1, got 0";
	struct limiter_row row;
	int k;

	(void)state;
	assert_int_equal(parse(s, &row), 0);
	for (k = 0; k < RLG_ROW_INTS; k++)
		assert_int_equal(row.f[k], want[k]);
	assert_int_equal(row.undo_len, 4);
	assert_memory_equal(row.undo, "10:1", 4);
	/* why: the rest, spaces and all, pointing into the row */
	assert_string_equal(row.why,
	    "override ignored: limit must be at least 1, got 0");
	assert_int_equal(row.why_len, strlen(row.why));
	assert_ptr_equal(row.undo, s + strlen("1 2 3 1000 0 1000000 0 1000 0 100 3 "));
}

static void
test_empty_strings(void **state)
{
	struct limiter_row row;

	(void)state;
	/* No undo token, no why: 12 spaces still, the last two ending it. */
	assert_int_equal(parse("0 -4 3 334 120 1795730692424132 0 1000 3 0 2  ",
	    &row), 0);
	assert_int_equal(row.f[RLG_ROW_ALLOWED], 0);
	assert_int_equal(row.f[RLG_ROW_REMAINING], -4);
	assert_int_equal(row.f[RLG_ROW_RETRY_MS], 120);
	assert_int_equal(row.f[RLG_ROW_NOW_US], 1795730692424132LL);
	assert_int_equal(row.f[RLG_ROW_BURST], 3);
	assert_int_equal(row.f[RLG_ROW_OVERRIDE], RLG_OVERRIDE_UNLIMITED);
	assert_int_equal(row.undo_len, 0);
	assert_int_equal(row.why_len, 0);
	/* A token and no why. */
	assert_int_equal(parse("1 0 3 60000 0 1000000 0 60000 0 0 0 1000000:1 ",
	    &row), 0);
	assert_int_equal(row.undo_len, 9);
	assert_int_equal(row.why_len, 0);
	/* 2^53 either way is the bound, and within it. */
	assert_int_equal(parse("1 9007199254740992 -9007199254740992 0 0 0 0 0 0 0 0  ",
	    &row), 0);
	assert_int_equal(row.f[RLG_ROW_REMAINING], 9007199254740992LL);
	assert_int_equal(row.f[RLG_ROW_LIMIT], -9007199254740992LL);
}

static void
test_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"1 2 3",				/* too few fields */
		"1 2 3 1000 0 1000000 0 1000 0 100 0",	/* no undo, no why */
		"1 2 3 1000 0 1000000 0 1000 0 100 0 ",	/* no why's space */
		"2 2 3 1000 0 1000000 0 1000 0 100 0  ", /* allowed 2 */
		"-1 2 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 2 3 1000 0 1000000 0 1000 0 100 4  ", /* override 4 */
		"1 2 3 1000 0 1000000 0 1000 0 100 -1  ",
		"1  2 3 1000 0 1000000 0 1000 0 100 0  ", /* two spaces */
		" 1 2 3 1000 0 1000000 0 1000 0 100 0  ", /* leading space */
		"1 x 3 1000 0 1000000 0 1000 0 100 0  ", /* not a number */
		"1 2a 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 +2 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 - 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 2.0 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 9007199254740993 3 1000 0 1000000 0 1000 0 100 0  ", /* > 2^53 */
		"1 99999999999999999999999 3 1000 0 1000000 0 1000 0 100 0  ",
		"1\t2 3 1000 0 1000000 0 1000 0 100 0  ", /* a tab */
	};
	struct limiter_row row;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &row) != -1)
			fail_msg("row %zu \"%s\" was read", i, bad[i]);
	/* A NUL inside a field: refused, not read up to it. */
	assert_int_equal(limiter_row("1 2\0009 3 1000 0 1000000 0 1000 0 100 0  ",
	    sizeof("1 2\0009 3 1000 0 1000000 0 1000 0 100 0  ") - 1, &row), -1);
	/* The length bounds the row: the whole of it is read, one byte
	 * less (its last space) is refused. */
	assert_int_equal(limiter_row("1 2 3 1000 0 1000000 0 1000 0 100 0  ",
	    strlen("1 2 3 1000 0 1000000 0 1000 0 100 0  "), &row), 0);
	assert_int_equal(limiter_row("1 2 3 1000 0 1000000 0 1000 0 100 0  ",
	    strlen("1 2 3 1000 0 1000000 0 1000 0 100 0 "), &row), -1);
	assert_int_equal(limiter_row(NULL, 0, &row), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_empty_strings),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
