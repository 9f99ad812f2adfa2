/*
 * Unit tests for trust_check(), the owner and mode check of the files
 * another local user could have made first (the /metrics shared memory,
 * the audit files and their directory): who may own them, which mode bits
 * refuse them, and the sentence a refusal logs.
 */
#include <sys/stat.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "trust.h"

static struct stat
status(uid_t uid, mode_t mode)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_uid = uid;
	st.st_mode = S_IFREG | mode;
	return st;
}

static void
test_own(void **state)
{
	struct stat st = status(geteuid(), 0600);
	char why[200] = "";

	(void)state;
	assert_int_equal(trust_check(&st, 0, 077, "group or other access",
	    why, sizeof(why)), 0);
	assert_string_equal(why, "");
	/* What deny does not name passes: group read for the audit. */
	st = status(geteuid(), 0640);
	assert_int_equal(trust_check(&st, 0, 022, "write access", why,
	    sizeof(why)), 0);
}

static void
test_mode_refused(void **state)
{
	struct stat st = status(geteuid(), 0666);
	char why[200], want[200];

	(void)state;
	assert_int_equal(trust_check(&st, 0, 022, "write access for group or "
	    "others", why, sizeof(why)), -1);
	snprintf(want, sizeof(want), "owned by uid %ju with mode 0666, not by "
	    "this process's uid %ju with no write access for group or others",
	    (uintmax_t)geteuid(), (uintmax_t)geteuid());
	assert_string_equal(why, want);
	/* The sticky bit is part of the mode it shows. */
	st = status(geteuid(), 01777);
	assert_int_equal(trust_check(&st, 1, 022, "write", why, sizeof(why)),
	    -1);
	assert_non_null(strstr(why, "with mode 1777,"));
}

static void
test_owner_refused(void **state)
{
	struct stat st = status(geteuid() + 1, 0600);
	char why[200], want[200];

	(void)state;
	assert_int_equal(trust_check(&st, 0, 077, "group or other access", why,
	    sizeof(why)), -1);
	snprintf(want, sizeof(want), "owned by uid %ju with mode 0600, not by "
	    "this process's uid %ju%s with no group or other access",
	    (uintmax_t)geteuid() + 1, (uintmax_t)geteuid(), "");
	assert_string_equal(why, want);
}

static void
test_root(void **state)
{
	struct stat st = status(0, 0755);
	char why[200];

	(void)state;
	/* A directory root made (/var/lib): with root_ok, whoever runs. */
	assert_int_equal(trust_check(&st, 1, 022, "write", why, sizeof(why)),
	    0);
	/* Without it, only a process running as root. */
	assert_int_equal(trust_check(&st, 0, 022, "write", why, sizeof(why)),
	    geteuid() == 0 ? 0 : -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own),
		cmocka_unit_test(test_mode_refused),
		cmocka_unit_test(test_owner_refused),
		cmocka_unit_test(test_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
