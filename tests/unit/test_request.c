/*
 * Unit tests for request (params, query, client address) and rule
 * (matching, key templates). Configurations are loaded from real files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"
#include "request.h"
#include "rule.h"

static struct conf *
conf_from(const char *text)
{
	char path[] = "/tmp/rlgate-test-XXXXXX";
	char *errors = NULL;
	struct conf *c;
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	c = conf_load(path, &errors);
	if (c == NULL)
		fprintf(stderr, "%s", errors);
	assert_non_null(c);
	unlink(path);
	return c;
}

static void
test_uri_splits_path_and_query(void **state)
{
	const char *env[] = { "REQUEST_URI=/user/list?org=org1&x=%41", "QUERY_STRING=",
	    "REQUEST_METHOD=POST", "REMOTE_ADDR=10.0.0.1",
	    "HTTP_HOST=Example.COM:8080", NULL };
	struct request r;
	const char *err = NULL;
	char v[64];

	(void)state;
	assert_int_equal(request_init(&r, (char **)env, NULL, &err), 0);
	assert_string_equal(r.path, "/user/list");
	assert_string_equal(r.method, "POST");
	assert_string_equal(r.host, "example.com");
	assert_string_equal(r.ip, "10.0.0.1");
	/* nginx empties QUERY_STRING in auth subrequests: REQUEST_URI wins. */
	assert_int_equal(request_query(&r, "org", v, sizeof(v)), 4);
	assert_string_equal(v, "org1");
	assert_int_equal(request_query(&r, "x", v, sizeof(v)), 1);
	assert_string_equal(v, "A");
	assert_int_equal(request_query(&r, "missing", v, sizeof(v)), -1);
	assert_int_equal(request_query(&r, "org", v, 3), -2);
}

static void
test_cgi_fallback_and_defaults(void **state)
{
	const char *env[] = { "SCRIPT_NAME=/cgi-bin/app", "PATH_INFO=/x",
	    "QUERY_STRING=a=1", NULL };
	struct request r;
	const char *err = NULL;
	char v[8];

	(void)state;
	assert_int_equal(request_init(&r, (char **)env, NULL, &err), 0);
	assert_string_equal(r.path, "/cgi-bin/app/x");
	assert_string_equal(r.method, "GET");
	assert_string_equal(r.ip, "");
	assert_int_equal(request_query(&r, "a", v, sizeof(v)), 1);
	assert_int_equal(r.role, RLG_ROLE_RESPONDER);
}

static void
test_bad_paths(void **state)
{
	const char *nul[] = { "REQUEST_URI=/a%00b", NULL };
	const char *env[] = { NULL, NULL };
	static char big[RLG_MAX_PATH + 32];
	struct request r;
	const char *err = NULL;

	(void)state;
	assert_int_equal(request_init(&r, (char **)nul, NULL, &err), 400);
	assert_non_null(err);
	memcpy(big, "REQUEST_URI=/", 13);
	memset(big + 13, 'a', sizeof(big) - 14);
	env[0] = big;
	assert_int_equal(request_init(&r, (char **)env, NULL, &err), 414);
}

static void
test_roles(void **state)
{
	const char *lighttpd[] = { "FCGI_ROLE=AUTHORIZER", NULL };
	const char *apache[] = { "FCGI_ROLE=AUTHORIZER",
	    "FCGI_APACHE_ROLE=AUTHENTICATOR", NULL };
	struct request r;
	const char *err;

	(void)state;
	request_init(&r, (char **)lighttpd, NULL, &err);
	assert_int_equal(r.role, RLG_ROLE_AUTHORIZER);
	assert_false(r.apache);
	request_init(&r, (char **)apache, NULL, &err);
	assert_int_equal(r.role, RLG_ROLE_AUTHORIZER);
	assert_true(r.apache);
}

static void
test_ip_normalised(void **state)
{
	unsigned char a[16];
	char out[INET6_ADDRSTRLEN];

	(void)state;
	assert_int_equal(request_parse_ip("::ffff:192.0.2.1", 16, a, out), AF_INET);
	assert_string_equal(out, "192.0.2.1");
	assert_int_equal(request_parse_ip("[2001:DB8::1]", 13, a, out), AF_INET6);
	assert_string_equal(out, "2001:db8::1");
	assert_int_equal(request_parse_ip("1.2.3", 5, a, out), -1);
	assert_int_equal(request_parse_ip("", 0, a, out), -1);
}

static void
test_forwarded_for_only_from_trusted(void **state)
{
	struct conf *c = conf_from("[gateway]\n"
	    "trusted_proxies = 127.0.0.1/32 10.0.0.0/8\n"
	    "[audit]\ndatabase =\n[rule:r]\nlimit = 1\nwindow = 1s\n");
	const char *direct[] = { "REMOTE_ADDR=203.0.113.9",
	    "HTTP_X_FORWARDED_FOR=1.1.1.1", NULL };
	const char *proxied[] = { "REMOTE_ADDR=127.0.0.1",
	    "HTTP_X_FORWARDED_FOR=6.6.6.6, 198.51.100.7, 10.1.2.3", NULL };
	const char *garbage[] = { "REMOTE_ADDR=127.0.0.1",
	    "HTTP_X_FORWARDED_FOR=nonsense", NULL };
	struct request r;
	const char *err;

	(void)state;
	/* An untrusted peer cannot choose its key with the header. */
	request_init(&r, (char **)direct, c, &err);
	assert_string_equal(r.ip, "203.0.113.9");
	/* Right to left, past trusted proxies, never the spoofable left. */
	request_init(&r, (char **)proxied, c, &err);
	assert_string_equal(r.ip, "198.51.100.7");
	request_init(&r, (char **)garbage, c, &err);
	assert_string_equal(r.ip, "127.0.0.1");
	conf_free(c);
}

static void
test_rule_match_and_keys(void **state)
{
	struct conf *c = conf_from("[audit]\ndatabase =\n"
	    "[rule:exact]\npath = /user/list\nkey = {query.org}{path}\n"
	    "limit = 100\nwindow = 1s\n"
	    "[rule:prefix]\npath = /api/*\nmethod = post\n"
	    "key = {method}:{header.X-Api-Key}:{env.REMOTE_USER}:{rule}\n"
	    "limit = 10\nwindow = 1m\n"
	    "[rule:re]\npath = ~^/item/[0-9]+$\nkey = {ip}|{host}\n"
	    "limit = 5\nwindow = 1s\non_missing = deny\n"
	    "[rule:costly]\npath = /api/*\nkey = {ip}\ncost = {header.X-Cost}\n"
	    "algorithm = token_bucket\nlimit = 10\nwindow = 1s\nburst = 20\n");
	const char *e1[] = { "REQUEST_URI=/user/list?org=o%201", "REMOTE_ADDR=1.2.3.4",
	    NULL };
	const char *e2[] = { "REQUEST_URI=/api/v1", "REQUEST_METHOD=POST",
	    "HTTP_X_API_KEY=k1", "REMOTE_USER=bob", "HTTP_X_COST=7",
	    "REMOTE_ADDR=1.2.3.4", NULL };
	const char *e3[] = { "REQUEST_URI=/item/42", "REMOTE_ADDR=1.2.3.4", NULL };
	const char *e4[] = { "REQUEST_URI=/api/v1", "REQUEST_METHOD=GET",
	    "HTTP_X_COST=21", "REMOTE_ADDR=1.2.3.4", NULL };
	struct match m[RLG_MAX_MATCHES];
	const struct rule *bad = NULL;
	const char *err = NULL;
	struct request r;

	(void)state;
	request_init(&r, (char **)e1, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), 1);
	assert_string_equal(m[0].rule->name, "exact");
	assert_string_equal(m[0].key, "o%201/user/list");
	assert_int_equal(m[0].cost, 1);

	request_init(&r, (char **)e2, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), 2);
	assert_string_equal(m[0].key, "POST:k1:bob:prefix");
	assert_string_equal(m[1].rule->name, "costly");
	assert_int_equal(m[1].cost, 7);

	/* on_missing = deny: the host part is absent, so a bad request. */
	request_init(&r, (char **)e3, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), -1);
	assert_string_equal(bad->name, "re");

	/* A cost above the bucket's capacity is refused, not clamped. */
	request_init(&r, (char **)e4, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), -1);
	assert_string_equal(bad->name, "costly");
	conf_free(c);
}

static void
test_missing_part_skips_rule(void **state)
{
	struct conf *c = conf_from("[audit]\ndatabase =\n"
	    "[rule:org]\npath = /user/list\nkey = {query.org}\n"
	    "limit = 1\nwindow = 1s\n");
	const char *e[] = { "REQUEST_URI=/user/list", NULL };
	const char *empty[] = { "REQUEST_URI=/user/list?org=", NULL };
	struct match m[RLG_MAX_MATCHES];
	const struct rule *bad = NULL;
	const char *err = NULL;
	struct request r;

	(void)state;
	request_init(&r, (char **)e, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), 0);
	/* An empty value is a value: query parts may be empty on purpose. */
	request_init(&r, (char **)empty, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), 1);
	assert_string_equal(m[0].key, "");
	conf_free(c);
}

static void
test_paths_simplified(void **state)
{
	static const char *cases[][2] = {
		{ "REQUEST_URI=/user//list", "/user/list" },
		{ "REQUEST_URI=/user/./list?x", "/user/list" },
		{ "REQUEST_URI=/a/b/../../user/list", "/user/list" },
		{ "REQUEST_URI=/../../user/list", "/user/list" },
		{ "REQUEST_URI=/user/%2e/list", "/user/list" },
		{ "REQUEST_URI=/user/list/..", "/user" },
		{ "REQUEST_URI=/.", "/" },
		{ "REQUEST_URI=/a/.b/..c", "/a/.b/..c" },
	};
	struct request r;
	const char *err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *env[] = { cases[i][0], NULL };

		assert_int_equal(request_init(&r, (char **)env, NULL, &err), 0);
		assert_string_equal(r.path, cases[i][1]);
	}
}

static void
test_keys_are_unambiguous(void **state)
{
	struct conf *c = conf_from("[audit]\ndatabase =\n"
	    "[rule:pair]\nkey = {query.a}:{query.b}\nlimit = 1\nwindow = 1s\n"
	    "[rule:seed]\nkey = {query.org}{path}\nlimit = 1\nwindow = 1s\n");
	const char *e1[] = { "REQUEST_URI=/list?a=x:y&b=z&org=a/user", NULL };
	const char *e2[] = { "REQUEST_URI=/user/list?a=x&b=y:z&org=a", NULL };
	const char *e3[] = { "REQUEST_URI=/x?a=%25&b=%0d%0a%00&org=%7B", NULL };
	struct match m1[RLG_MAX_MATCHES], m2[RLG_MAX_MATCHES];
	const struct rule *bad = NULL;
	const char *err = NULL;
	struct request r;
	char *errors = NULL;
	char path[] = "/tmp/rlgate-test-XXXXXX";
	FILE *f;
	int fd;

	(void)state;
	request_init(&r, (char **)e1, c, &err);
	assert_int_equal(rule_match(c, &r, m1, RLG_MAX_MATCHES, &bad, &err), 2);
	request_init(&r, (char **)e2, c, &err);
	assert_int_equal(rule_match(c, &r, m2, RLG_MAX_MATCHES, &bad, &err), 2);
	/* "x:y"+"z" and "x"+"y:z"; "a/user"+"/list" and "a"+"/user/list". */
	assert_string_equal(m1[0].key, "x%3Ay:z");
	assert_string_equal(m2[0].key, "x:y%3Az");
	assert_string_equal(m1[1].key, "a%2Fuser/list");
	assert_string_equal(m2[1].key, "a/user/list");
	/* Control bytes, NUL and braces never reach Redis raw. */
	request_init(&r, (char **)e3, c, &err);
	assert_int_equal(rule_match(c, &r, m1, RLG_MAX_MATCHES, &bad, &err), 2);
	assert_string_equal(m1[0].key, "%25:%0D%0A%00");
	assert_int_equal(m1[0].key_len, 13);
	assert_string_equal(m1[1].key, "%7B/x");
	conf_free(c);

	/* Two fields side by side cannot be made unambiguous: refused. */
	fd = mkstemp(path);
	f = fdopen(fd, "w");
	fputs("[audit]\ndatabase =\n[rule:x]\nkey = {query.a}{query.b}\n"
	    "limit = 1\nwindow = 1s\n", f);
	fclose(f);
	assert_null(conf_load(path, &errors));
	assert_non_null(strstr(errors, ":4: [rule:x] key:"));
	free(errors);
	unlink(path);
}

static void
test_long_values_are_bounded(void **state)
{
	struct conf *c = conf_from("[audit]\ndatabase =\n"
	    "[rule:h]\nkey = {header.X-Key}\nlimit = 1\nwindow = 1s\n");
	static char big[8300];
	const char *env[] = { "REQUEST_URI=/", big, NULL };
	struct match m[RLG_MAX_MATCHES];
	const struct rule *bad = NULL;
	const char *err = NULL;
	struct request r;

	(void)state;
	memcpy(big, "HTTP_X_KEY=", 11);
	memset(big + 11, 'k', 8192);
	request_init(&r, (char **)env, c, &err);
	assert_int_equal(rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &err), -1);
	assert_string_equal(err, "the rate-limit key is too long");
	conf_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uri_splits_path_and_query),
		cmocka_unit_test(test_cgi_fallback_and_defaults),
		cmocka_unit_test(test_bad_paths),
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_ip_normalised),
		cmocka_unit_test(test_forwarded_for_only_from_trusted),
		cmocka_unit_test(test_rule_match_and_keys),
		cmocka_unit_test(test_missing_part_skips_rule),
		cmocka_unit_test(test_paths_simplified),
		cmocka_unit_test(test_keys_are_unambiguous),
		cmocka_unit_test(test_long_values_are_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
