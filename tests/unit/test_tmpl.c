/*
 * Unit tests for key and cost templates (tmpl) as the configuration loads
 * them: the parts of a template, and every error a template can have.
 * Run from the repository root.
 */
#include <sys/stat.h>
#include <arpa/inet.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"
#include "conf_load.h"

static void
test_templates(void **state)
{
	struct conf *c;
	struct tmpl *t;

	(void)state;
	c = load_ok("[rule:r]\nlimit = 1\nwindow = 1s\n"
	    "key = rl-{ip}:{header.X-User}/{env.REMOTE_USER}:{query.org}"
	    "|{method}|{host}{path}{rule}!\n");
	t = &c->rules[0].key;
	assert_int_equal(t->nparts, 15);
	assert_int_equal(t->parts[0].kind, RLG_PART_LITERAL);
	assert_string_equal(t->parts[0].text, "rl-");
	assert_int_equal(t->parts[0].len, 3);
	assert_int_equal(t->parts[1].kind, RLG_PART_IP);
	assert_int_equal(t->parts[2].kind, RLG_PART_LITERAL);
	assert_string_equal(t->parts[2].text, ":");
	assert_int_equal(t->parts[3].kind, RLG_PART_HEADER);
	assert_string_equal(t->parts[3].text, "X-User");
	assert_int_equal(t->parts[3].len, 6);
	assert_int_equal(t->parts[4].kind, RLG_PART_LITERAL);
	assert_string_equal(t->parts[4].text, "/");
	assert_int_equal(t->parts[5].kind, RLG_PART_ENV);
	assert_string_equal(t->parts[5].text, "REMOTE_USER");
	assert_int_equal(t->parts[7].kind, RLG_PART_QUERY);
	assert_string_equal(t->parts[7].text, "org");
	assert_int_equal(t->parts[9].kind, RLG_PART_METHOD);
	assert_int_equal(t->parts[11].kind, RLG_PART_HOST);
	assert_int_equal(t->parts[12].kind, RLG_PART_PATH);
	assert_int_equal(t->parts[13].kind, RLG_PART_RULE);
	assert_int_equal(t->parts[14].kind, RLG_PART_LITERAL);
	assert_string_equal(t->parts[14].text, "!");
	conf_free(c);

	/* Literal text alone is a valid key: one limit shared by all. */
	c = load_ok("[rule:r]\nlimit = 1\nwindow = 1s\nkey = everyone\n");
	assert_int_equal(c->rules[0].key.nparts, 1);
	assert_int_equal(c->rules[0].key.parts[0].kind, RLG_PART_LITERAL);
	assert_string_equal(c->rules[0].key.parts[0].text, "everyone");
	conf_free(c);

	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {ip}{usr}\n",
	    "4: [rule:r] key: \"{ip}{usr}\" has {usr}, which is not a field "
	    "(use {ip}, {path}, {method}, {host}, {rule}, {query.NAME}, "
	    "{header.NAME} or {env.NAME})", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {query.}\n",
	    "4: [rule:r] key: \"{query.}\" has {query.} with no name (use "
	    "{query.NAME})", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {header}\n",
	    "4: [rule:r] key: \"{header}\" has {header} with no name", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = a{ip\n",
	    "4: [rule:r] key: \"a{ip\" has a { that is not closed (at "
	    "character 2)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {ip{path}\n",
	    "4: [rule:r] key: \"{ip{path}\" has a { that is not closed", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = a}b\n",
	    "4: [rule:r] key: \"a}b\" has a } with no { before it (at "
	    "character 2)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {ip.v4}\n",
	    "4: [rule:r] key: \"{ip.v4}\" has {ip.v4}, but {ip} takes no .NAME",
	    NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {}\n",
	    "4: [rule:r] key: \"{}\" has {}, which is not a field", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {header.X(1)}\n",
	    "4: [rule:r] key: \"{header.X(1)}\" has {header.X(1)}: \"X(1)\" is "
	    "not a header name", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nkey = {env.A-B}\n",
	    "4: [rule:r] key: \"{env.A-B}\" has {env.A-B}: \"A-B\" is not a "
	    "variable name", NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_templates),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
