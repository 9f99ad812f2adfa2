/*
 * Unit tests for conf: the number and duration parsers, every kind of
 * error the loader reports (with its exact file, line, section and key),
 * defaults, and that conf/rlgate.ini loads. Templates are test_tmpl.c's,
 * addresses and CIDRs test_netaddr.c's.
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

/* ---- parsers -------------------------------------------------------- */

static void
test_parse_int(void **state)
{
	const char *e;
	long long n;

	(void)state;
	assert_int_equal(conf_parse_int("0", 0, 10, &n, &e), 0);
	assert_int_equal(n, 0);
	assert_null(e);
	assert_int_equal(conf_parse_int("-5", -10, 10, &n, &e), 0);
	assert_int_equal(n, -5);
	assert_int_equal(conf_parse_int("007", 0, 10, &n, &e), 0);
	assert_int_equal(n, 7);
	assert_int_equal(conf_parse_int("9223372036854775807", 0, LLONG_MAX,
	    &n, &e), 0);
	assert_true(n == LLONG_MAX);
	assert_int_equal(conf_parse_int("-9223372036854775808", LLONG_MIN, 0,
	    &n, &e), 0);
	assert_true(n == LLONG_MIN);

	n = 42;
	assert_int_equal(conf_parse_int("9223372036854775808", 0, LLONG_MAX,
	    &n, &e), -1);
	assert_string_equal(e, "is too large");
	assert_int_equal(n, 42);	/* untouched on error */
	assert_int_equal(conf_parse_int("-9223372036854775809", LLONG_MIN, 0,
	    &n, &e), -1);
	assert_string_equal(e, "is too small");
	assert_int_equal(conf_parse_int("11", 0, 10, &n, &e), -1);
	assert_string_equal(e, "is too large");
	assert_int_equal(conf_parse_int("0", 1, 10, &n, &e), -1);
	assert_string_equal(e, "is too small");

	static const char *const bad[] = {
		"", " 1", "1 ", "+1", "1x", "0x10", "1.5", "1e3", "-", "--1",
		"١",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(conf_parse_int(bad[i], LLONG_MIN, LLONG_MAX,
		    &n, &e), -1);
		assert_string_equal(e, "is not a whole number");
	}
	assert_int_equal(conf_parse_int(NULL, 0, 1, &n, &e), -1);
	assert_int_equal(n, 42);
}

static void
test_parse_duration(void **state)
{
	static const struct {
		const char	*s;
		long long	 ms;
	} good[] = {
		{ "250ms", 250 }, { "1s", 1000 }, { "1m", 60000 },
		{ "1h", 3600000 }, { "1d", 86400000 }, { "0ms", 0 },
		{ "0s", 0 }, { "90s", 90000 }, { "0010ms", 10 },
		{ "106751991167d", 106751991167LL * 86400000 },
		{ "9223372036854775807ms", LLONG_MAX },
	};
	static const char *const bad[] = {
		"", "ms", "10x", "1.5s", "-1s", "+1s", " 1s", "1s ", "1 s",
		"1S", "1sec", "1ms1", "1mss", "s1",
	};
	const char *e;
	long long ms;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ms = -1;
		assert_int_equal(conf_parse_duration(good[i].s, &ms, &e), 0);
		assert_true(ms == good[i].ms);
		assert_null(e);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ms = -1;
		assert_int_equal(conf_parse_duration(bad[i], &ms, &e), -1);
		assert_string_equal(e,
		    "is not a duration (use 500ms, 1s, 1m, 1h, 1d)");
		assert_true(ms == -1);
	}
	assert_int_equal(conf_parse_duration("10", &ms, &e), -1);
	assert_string_equal(e, "has no unit (use 500ms, 1s, 1m, 1h, 1d)");
	/* One more day overflows the milliseconds, not the number. */
	assert_int_equal(conf_parse_duration("106751991168d", &ms, &e), -1);
	assert_string_equal(e, "is too large");
	assert_int_equal(conf_parse_duration("9223372036854775808ms", &ms,
	    &e), -1);
	assert_string_equal(e, "is too large");
	assert_int_equal(conf_parse_duration("99999999999999999999s", &ms,
	    &e), -1);
	assert_string_equal(e, "is too large");
}

static void
test_algorithm_names(void **state)
{
	(void)state;
	assert_string_equal(conf_algorithm_name(RLG_FIXED_WINDOW),
	    "fixed_window");
	assert_string_equal(conf_algorithm_name(RLG_SLIDING_WINDOW),
	    "sliding_window");
	assert_string_equal(conf_algorithm_name(RLG_SLIDING_LOG),
	    "sliding_log");
	assert_string_equal(conf_algorithm_name(RLG_TOKEN_BUCKET),
	    "token_bucket");
	assert_string_equal(conf_algorithm_name(RLG_GCRA), "gcra");
	assert_string_equal(conf_algorithm_name(RLG_LEAKY_BUCKET),
	    "leaky_bucket");
}

/* ---- whole files that load ------------------------------------------ */

static void
test_sample_loads(void **state)
{
	char *errors = (char *)"unset";
	struct conf *c;
	struct rule *r;

	(void)state;
	c = conf_load("conf/rlgate.ini", &errors);
	if (c == NULL)
		print_message("conf/rlgate.ini:\n%s", errors);
	assert_non_null(c);
	assert_null(errors);
	assert_null(c->listen);
	assert_int_equal(c->workers, 0);	/* one loop per CPU */
	assert_null(c->warnings);
	assert_int_equal(c->deny_status, 429);
	assert_int_equal(c->headers, RLG_HEADERS_IETF);
	assert_int_equal(c->ntrusted, 0);
	assert_int_equal(c->log_level, RLG_LOG_INFO);
	assert_string_equal(c->redis_address, "127.0.0.1:6379");
	assert_null(c->redis_username);
	assert_null(c->redis_password);
	assert_int_equal(c->redis_connect_timeout_ms, 200);
	assert_int_equal(c->redis_timeout_ms, 100);
	assert_string_equal(c->key_prefix, "rl:");
	assert_int_equal(c->on_error, RLG_ON_ERROR_ALLOW);
	/* The directory need not exist: audit opens the file later. */
	assert_string_equal(c->audit_database, "/var/lib/rlgate/audit.db");
	assert_int_equal(c->audit_flush_interval_ms, 50);
	assert_int_equal(c->audit_batch, 200);
	assert_int_equal(c->audit_queue, 100000);
	assert_int_equal(c->audit_unmatched, 1);
	assert_null(c->cgi_upstream);

	assert_int_equal(c->nrules, 1);
	r = &c->rules[0];
	assert_string_equal(r->name, "user_list");
	assert_int_equal(r->path_kind, RLG_PATH_EXACT);
	assert_string_equal(r->path, "/user/list");
	assert_int_equal(r->path_len, 10);
	assert_null(r->methods);
	assert_null(r->host);
	assert_int_equal(r->algorithm, RLG_FIXED_WINDOW);
	assert_int_equal(r->limit, 100);
	assert_int_equal(r->window_ms, 1000);
	assert_int_equal(r->burst, 0);
	assert_int_equal(r->precision_ms, 0);
	assert_int_equal(r->cost, 1);
	assert_int_equal(r->cost_tmpl.nparts, 0);
	assert_int_equal(r->on_missing_deny, 0);
	assert_int_equal(r->on_error, RLG_ON_ERROR_INHERIT);
	assert_int_equal(r->dry_run, 0);
	assert_int_equal(r->key.nparts, 2);
	assert_int_equal(r->key.parts[0].kind, RLG_PART_QUERY);
	assert_string_equal(r->key.parts[0].text, "org");
	assert_int_equal(r->key.parts[1].kind, RLG_PART_PATH);
	conf_free(c);
}

static void
test_defaults(void **state)
{
	static const char *const none[] = {
		"", "; nothing\n", "[gateway]\nworkers = 2\n[redis]\n[audit]\n",
	};
	struct conf *c;
	struct rule *r;
	char *errors;
	size_t i;

	(void)state;
	c = load_ok("[rule:r]\nlimit = 5\nwindow = 1m\n");
	assert_null(c->listen);
	assert_int_equal(c->workers, 0);
	assert_int_equal(c->deny_status, 429);
	assert_int_equal(c->headers, RLG_HEADERS_IETF);
	assert_string_equal(c->redis_address, "127.0.0.1:6379");
	assert_int_equal(c->redis_database, 0);
	assert_string_equal(c->key_prefix, "rl:");
	assert_string_equal(c->audit_database, "/var/lib/rlgate/audit.db");
	assert_string_equal(c->path, file);
	r = &c->rules[0];
	assert_int_equal(r->line, 1);
	assert_int_equal(r->path_kind, RLG_PATH_ANY);
	assert_null(r->path);
	assert_int_equal(r->algorithm, RLG_FIXED_WINDOW);
	assert_int_equal(r->window_ms, 60000);
	assert_int_equal(r->key.nparts, 1);	/* {ip} */
	assert_int_equal(r->key.parts[0].kind, RLG_PART_IP);
	assert_null(r->key.parts[0].text);
	assert_int_equal(r->cost, 1);
	conf_free(c);

	/* No rule at all would allow every request: an error, for -t, at
	 * start and on reload, whatever else the file says. */
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		errors = load_fail(none[i]);
		assert_int_equal(count_lines(errors), 1);
		assert_error(errors, NO_RULE, NULL);
		free(errors);
	}
	/* A rule with errors is not "no rule": its own error says it. */
	expect_one("[rule:r]\nlimit = 0\nwindow = 1s\n", "2: [rule:r] limit:",
	    NULL);
}

static void
test_every_key(void **state)
{
	struct conf *c;
	struct rule *r;

	(void)state;
	c = load_ok(
	    "[gateway]\n"
	    "listen = unix:/run/rlgate.sock\n"
	    "workers = 1024\n"
	    "deny_status = 403\n"
	    "headers = both\n"
	    "trusted_proxies = 127.0.0.1/32, ::1/128\n"
	    "log_level = debug\n"
	    "[redis]\n"
	    "address = [::1]:6380\n"
	    "username = gw\n"
	    "password = s3cret;x\n"
	    "database = 15\n"
	    "connect_timeout = 1s\n"
	    "timeout = 1ms\n"
	    "key_prefix = app:rl:\n"
	    "on_error = deny\n"
	    "[audit]\n"
	    "database = /srv/a.db\n"
	    "flush_interval = 1m\n"
	    "batch = 10\n"
	    "queue = 10\n"
	    "unmatched = no\n"
	    "[cgi]\n"
	    "upstream = /usr/lib/cgi-bin/app.cgi\n"
	    "[rule:api.v2-x_1]\n"
	    "path = /api/*\n"
	    "method = get, Post\n"
	    "host = API.example.com\n"
	    "key = {env.REMOTE_USER}:{method}\n"
	    "algorithm = token_bucket\n"
	    "limit = 100\n"
	    "window = 1m\n"
	    "burst = 200\n"
	    "cost = 150\n"
	    "on_missing = deny\n"
	    "on_error = allow\n"
	    "dry_run = yes\n"
	    "deny_cache = on\n");
	assert_string_equal(c->listen, "unix:/run/rlgate.sock");
	assert_int_equal(c->workers, 1024);
	/* More loops than this machine's CPUs: valid, with a warning. */
	assert_non_null(c->warnings);
	assert_error(c->warnings, "3: [gateway] workers: 1024 event loops on ",
	    "more loops than CPUs only add context switches");
	assert_int_equal(count_lines(c->warnings), 1);
	assert_int_equal(c->deny_status, 403);
	assert_int_equal(c->headers, RLG_HEADERS_BOTH);
	assert_int_equal(c->ntrusted, 2);
	assert_int_equal(c->log_level, RLG_LOG_DEBUG);
	assert_string_equal(c->redis_address, "[::1]:6380");
	assert_string_equal(c->redis_username, "gw");
	/* No blank before the ';': it belongs to the value. */
	assert_string_equal(c->redis_password, "s3cret;x");
	assert_int_equal(c->redis_database, 15);
	assert_int_equal(c->redis_connect_timeout_ms, 1000);
	assert_int_equal(c->redis_timeout_ms, 1);
	assert_string_equal(c->key_prefix, "app:rl:");
	assert_int_equal(c->on_error, RLG_ON_ERROR_DENY);
	assert_string_equal(c->audit_database, "/srv/a.db");
	assert_int_equal(c->audit_flush_interval_ms, 60000);
	assert_int_equal(c->audit_batch, 10);
	assert_int_equal(c->audit_queue, 10);
	assert_int_equal(c->audit_unmatched, 0);
	assert_string_equal(c->cgi_upstream, "/usr/lib/cgi-bin/app.cgi");
	r = &c->rules[0];
	assert_string_equal(r->name, "api.v2-x_1");
	assert_int_equal(r->line, 25);
	assert_int_equal(r->path_kind, RLG_PATH_PREFIX);
	assert_string_equal(r->path, "/api/");
	assert_int_equal(r->path_len, 5);
	assert_non_null(r->methods);
	assert_string_equal(r->methods[0], "GET");
	assert_string_equal(r->methods[1], "POST");
	assert_null(r->methods[2]);
	assert_string_equal(r->host, "API.example.com");
	assert_int_equal(r->algorithm, RLG_TOKEN_BUCKET);
	assert_int_equal(r->limit, 100);
	assert_int_equal(r->window_ms, 60000);
	assert_int_equal(r->burst, 200);
	assert_int_equal(r->cost, 150);	/* above limit, within burst */
	assert_int_equal(r->precision_ms, 0);
	assert_int_equal(r->on_missing_deny, 1);
	assert_int_equal(r->on_error, RLG_ON_ERROR_ALLOW);
	assert_int_equal(r->dry_run, 1);
	assert_int_equal(r->deny_cache, 1);
	assert_int_equal(r->metrics_slot, -1);
	conf_free(c);
}

/* [gateway] dry_run, status_path and status_allow; deny_cache per rule. */
static void
test_operations_keys(void **state)
{
	unsigned char a[16];
	struct conf *c;

	(void)state;
	/* Defaults: no status endpoint, loopback may read it, no dry run. */
	c = load_ok(RULE_OK);
	assert_int_equal(c->dry_run, 0);
	assert_null(c->status_path);
	assert_int_equal(c->nstatus_allow, 2);
	assert_int_equal(c->rules[0].deny_cache, 0);
	assert_true(netaddr_in_cidrs(c->status_allow, c->nstatus_allow,
	    AF_INET, (inet_pton(AF_INET, "127.0.0.1", a), a)));
	assert_true(netaddr_in_cidrs(c->status_allow, c->nstatus_allow,
	    AF_INET6, (inet_pton(AF_INET6, "::1", a), a)));
	assert_false(netaddr_in_cidrs(c->status_allow, c->nstatus_allow,
	    AF_INET, (inet_pton(AF_INET, "10.0.0.1", a), a)));
	conf_free(c);

	c = load_ok("[gateway]\ndry_run = yes\nstatus_path = /rlgate-status//\n"
	    "status_allow = 10.0.0.0/8\n"
	    "[rule:r]\nlimit = 1\nwindow = 1s\ndeny_cache = on\n");
	assert_int_equal(c->dry_run, 1);
	assert_string_equal(c->status_path, "/rlgate-status");
	assert_int_equal(c->nstatus_allow, 1);
	assert_true(netaddr_in_cidrs(c->status_allow, c->nstatus_allow,
	    AF_INET, (inet_pton(AF_INET, "10.9.8.7", a), a)));
	/* Given, the list replaces the default: loopback is out. */
	assert_false(netaddr_in_cidrs(c->status_allow, c->nstatus_allow,
	    AF_INET, (inet_pton(AF_INET, "127.0.0.1", a), a)));
	assert_int_equal(c->rules[0].deny_cache, 1);
	conf_free(c);

	/* Empty: not set (no endpoint; the default list stays). */
	c = load_ok("[gateway]\nstatus_path =\nstatus_allow =\n" RULE_OK);
	assert_null(c->status_path);
	assert_int_equal(c->nstatus_allow, 2);
	conf_free(c);

	expect_one("[gateway]\nstatus_path = status\n" RULE_OK,
	    "2: [gateway] status_path: \"status\" is not a plain path (use "
	    "e.g. /rlgate-status)", NULL);
	expect_one("[gateway]\nstatus_path = /s?x=1\n" RULE_OK,
	    "2: [gateway] status_path: \"/s?x=1\" is not a plain path", NULL);
	expect_one("[gateway]\nstatus_path = //\n" RULE_OK,
	    "2: [gateway] status_path: \"//\" would take every request", NULL);
	expect_one("[gateway]\nstatus_allow = 127.0.0.1 localhost\n" RULE_OK,
	    "2: [gateway] status_allow: \"localhost\" is not an address or "
	    "CIDR", NULL);
	expect_one("[gateway]\nstatus_allow = , ,\n" RULE_OK,
	    "2: [gateway] status_allow: \", ,\" lists no address", NULL);
	expect_one("[gateway]\ndry_run = maybe\n" RULE_OK,
	    "2: [gateway] dry_run: \"maybe\" is not a boolean", NULL);
	expect_one(RULE_OK "deny_cache = sometimes\n",
	    "4: [rule:r] deny_cache: \"sometimes\" is not a boolean", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\ndeny_cache = on\n"
	    "deny_cache = off\n", "5: [rule:r] deny_cache: is set twice", NULL);
}

/* overrides = none | redis per rule; never with deny_cache. */
static void
test_overrides_key(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok(RULE_OK "[rule:s]\nlimit = 1\nwindow = 1s\noverrides = redis\n"
	    "[rule:t]\nlimit = 1\nwindow = 1s\noverrides = none\n"
	    "deny_cache = on\n");
	assert_int_equal(c->rules[0].overrides, 0);	/* the default */
	assert_int_equal(c->rules[1].overrides, 1);
	assert_int_equal(c->rules[2].overrides, 0);
	assert_int_equal(c->rules[2].deny_cache, 1);
	conf_free(c);

	expect_one(RULE_OK "overrides = hash\n",
	    "4: [rule:r] overrides: \"hash\" is not an override source (use "
	    "none or redis)", NULL);
	/* The error is on the later of the two lines, named by its key. */
	expect_one(RULE_OK "overrides = redis\ndeny_cache = on\n",
	    "5: [rule:r] deny_cache: deny_cache = on and overrides = redis do "
	    "not go together", "outlive a limit raised in Redis");
	expect_one(RULE_OK "deny_cache = yes\noverrides = redis\n",
	    "5: [rule:r] overrides: deny_cache = on and overrides = redis do "
	    "not go together", NULL);
}

static void
test_replicas_key(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok(RULE_OK);
	assert_int_equal(c->redis_replicas, 0);		/* the default */
	conf_free(c);
	c = load_ok("[redis]\nreplicas = 2\ntimeout = 2ms\n" RULE_OK);
	assert_int_equal(c->redis_replicas, 2);
	conf_free(c);
	expect_one("[redis]\nreplicas = 17\n",
	    "2: [redis] replicas: \"17\" is too large (use 0 to 16)", NULL);
	expect_one("[redis]\nreplicas = -1\n",
	    "2: [redis] replicas: \"-1\" is too small", NULL);
	/* WAIT takes half the timeout, and WAIT 0 would block. */
	expect_one("[redis]\ntimeout = 1ms\nreplicas = 1\n",
	    "3: [redis] replicas: is 1, but timeout is 1 ms: WAIT for replicas "
	    "takes half the timeout; set timeout = 2ms or more", NULL);
}

/* on_error = local and [redis] local_share (issue 28 part 4). */
static void
test_local_share_key(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok(RULE_OK);
	assert_int_equal(c->local_share_num, 1);	/* the default: 1 */
	assert_int_equal(c->local_share_den, 1);
	conf_free(c);
	c = load_ok("[redis]\non_error = local\nlocal_share = 1/4\n"
	    RULE_OK);
	assert_int_equal(c->on_error, RLG_ON_ERROR_LOCAL);
	assert_int_equal(c->local_share_num, 1);
	assert_int_equal(c->local_share_den, 4);
	conf_free(c);
	c = load_ok("[redis]\nlocal_share = 0.25\n" RULE_OK);
	assert_int_equal(c->local_share_num, 25);
	assert_int_equal(c->local_share_den, 100);
	conf_free(c);
	c = load_ok("[redis]\nlocal_share = 1\n" RULE_OK);
	assert_int_equal(c->local_share_num, 1);
	assert_int_equal(c->local_share_den, 1);
	conf_free(c);
	expect_one("[redis]\nlocal_share = 3/2\n",
	    "2: [redis] local_share: \"3/2\" is not a share (use a fraction N/D "
	    "such as 1/4, or a decimal in (0, 1] such as 0.25)", NULL);
	expect_one("[redis]\nlocal_share = 0\n",
	    "2: [redis] local_share: \"0\" is not a share", NULL);
	expect_one("[redis]\nlocal_share = 1/0\n",
	    "2: [redis] local_share: \"1/0\" is not a share", NULL);
	expect_one("[redis]\nlocal_share = 0.0000001\n",
	    "2: [redis] local_share: \"0.0000001\" is not a share", NULL);
	expect_one("[redis]\nlocal_share = 1.5\n",
	    "2: [redis] local_share: \"1.5\" is not a share", NULL);
	expect_one("[audit]\non_full = local\n",
	    "2: [audit] on_full: \"local\" is not a queue-full policy "
	    "(use allow or deny)", NULL);
}

static void
test_empty_values(void **state)
{
	struct conf *c;

	(void)state;
	/* Empty means "not set": the default, except [audit] database. */
	c = load_ok("[gateway]\nworkers =\nlisten =   ; fd 0\n"
	    "[redis]\naddress =\nkey_prefix =\n"
	    "[audit]\ndatabase =\n"
	    "[rule:r]\nlimit = 1\nwindow = 1s\nkey =\ncost =\nburst =\n"
	    "precision =\nmethod =\n");
	assert_int_equal(c->workers, 0);
	assert_null(c->listen);
	assert_string_equal(c->redis_address, "127.0.0.1:6379");
	assert_string_equal(c->key_prefix, "rl:");
	assert_null(c->audit_database);
	assert_int_equal(c->rules[0].key.nparts, 1);
	assert_int_equal(c->rules[0].key.parts[0].kind, RLG_PART_IP);
	assert_int_equal(c->rules[0].cost, 1);
	assert_null(c->rules[0].methods);
	conf_free(c);
}

static void
test_syntax_tolerated(void **state)
{
	struct conf *c;

	(void)state;
	/* A BOM, CRLF line ends, indentation, "key: value", # comments,
	 * and a ; comment after a section header. */
	c = load_ok("\xEF\xBB\xBF# rlgate\r\n"
	    "[ gateway ] ; main\r\n"
	    "   workers: 4\r\n"
	    "\tdeny_status = 403\t; for nginx\r\n"
	    "[rule:r]\r\n"
	    "path = ~^/a;b#c$\r\n"
	    "limit = 1\r\nwindow = 1s\r\n");
	assert_int_equal(c->workers, 4);
	assert_int_equal(c->deny_status, 403);
	assert_int_equal(c->rules[0].path_kind, RLG_PATH_REGEX);
	assert_string_equal(c->rules[0].path, "^/a;b#c$");
	assert_int_equal(c->rules[0].line, 5);
	conf_free(c);
}

/* ---- one test per kind of error -------------------------------------- */

static void
test_error_format(void **state)
{
	char *errors, want[PATH_MAX + 128];

	(void)state;
	/* The example of DESIGN.md section 4, word for word. */
	errors = load_fail("[rule:login]\nlimit = 5\nwindow = 10x\n");
	snprintf(want, sizeof(want), "%s:3: [rule:login] window: \"10x\" is "
	    "not a duration (use 500ms, 1s, 1m, 1h, 1d)\n", file);
	assert_string_equal(errors, want);
	free(errors);
}

static void
test_cannot_open(void **state)
{
	char *errors = NULL, want[PATH_MAX + 64];

	(void)state;
	snprintf(want, sizeof(want), "%s/none.ini", dir);
	assert_null(conf_load(want, &errors));
	assert_non_null(errors);
	strcat(want, ": cannot open: No such file or directory\n");
	assert_string_equal(errors, want);
	free(errors);

	assert_null(conf_load(dir, &errors));
	assert_non_null(strstr(errors, "it is a directory"));
	free(errors);
}

static void
test_long_line(void **state)
{
	char text[1024], *errors;
	int n;

	(void)state;
	/* 199 characters load; 200 do not, and the lines after still carry
	 * their own numbers (inih would have made two lines of it). */
	n = snprintf(text, sizeof(text), "[rule:r]\nlimit = 1\nwindow = 1s\n"
	    "key = ");
	memset(text + n, 'k', 199 - 6);
	strcpy(text + n + 199 - 6, "\n");
	struct conf *c = load_ok(text);
	assert_int_equal(strlen(c->rules[0].key.parts[0].text), 193);
	conf_free(c);

	n = snprintf(text, sizeof(text), "[gateway]\nlisten = ");
	memset(text + n, 'x', 200 - 9);
	strcpy(text + n + 200 - 9, "\r\nworkers = 0\n" RULE_OK);
	errors = load_fail(text);
	assert_int_equal(count_lines(errors), 2);
	assert_error(errors, "2: line is longer than 199 characters", NULL);
	assert_error(errors, "3: [gateway] workers: ", "\"0\" is too small");
	free(errors);

	/* A section header lost to length does not leak its keys into the
	 * section before it. */
	n = snprintf(text, sizeof(text), "[gateway]\n[rule:");
	memset(text + n, 'x', 200);
	strcpy(text + n + 200, "]\nlimit = 1\n" RULE_OK);
	expect_one(text, "2: line is longer than 199 characters", NULL);
}

static void
test_bad_lines(void **state)
{
	(void)state;
	expect_one("[gateway]\nworkers\n" RULE_OK,
	    "2: \"workers\" is not \"key = value\"", NULL);
	expect_one("[gateway]\nworkers = 4\n  8\n",
	    "3: \"8\" is not \"key = value\" (values cannot continue on an "
	    "indented line)", NULL);
	expect_one("[gateway]\n= 4\n", "2: a value with no key", NULL);
	expect_one("[gateway]\nworkers = 4\x01\n",
	    "2: control character 0x01 at column 12", NULL);
	expect_one("[gateway\nworkers = 4\n",
	    "1: \"[gateway\" has no closing ]", NULL);
	expect_one("[gateway] x\n", "1: [gateway]: unexpected \"x\"", NULL);
	expect_one("workers = 4\n[gateway]\n",
	    "1: workers: is set before any section", NULL);
}

static void
test_unknown_section(void **state)
{
	(void)state;
	/* Reported once, at the header; its keys are not reported again. */
	expect_one("[gatway]\nworkers = 4\nfoo = 1\n",
	    "1: [gatway]: unknown section (use [gateway], [redis], [audit], "
	    "[cgi] or [rule:NAME])", NULL);
	expect_one("[Gateway]\n", "1: [Gateway]: unknown section", NULL);
	expect_one("[rule]\nlimit = 1\n", "1: [rule]: a rule needs a name",
	    NULL);
}

static void
test_unknown_key(void **state)
{
	(void)state;
	expect_one("[gateway]\nworkers = 4\nwokers = 4\n",
	    "3: [gateway] wokers: unknown key (the keys of [gateway] are "
	    "listen, socket_mode, socket_group, workers, deny_status, "
	    "headers, trusted_proxies, "
	    "log_level, dry_run, status_path, status_allow)", NULL);
	expect_one("[redis]\nhost = x\n", "2: [redis] host: unknown key",
	    "address, username, password");
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nrate = 4\n",
	    "4: [rule:r] rate: unknown key (the keys of [rule:NAME] are path, ",
	    NULL);
	/* Keys belong to one section each. */
	expect_one("[cgi]\nworkers = 4\n", "2: [cgi] workers: unknown key",
	    NULL);
}

static void
test_key_twice(void **state)
{
	(void)state;
	expect_one("[gateway]\nworkers = 4\n\nworkers = 8\n",
	    "4: [gateway] workers: is set twice (first on line 2); keep one",
	    NULL);
	/* Across two [gateway] sections too. */
	expect_one("[gateway]\nworkers = 4\n[redis]\n[gateway]\nworkers = 8\n",
	    "5: [gateway] workers: is set twice (first on line 2)", NULL);
	/* An empty value counts as a setting. */
	expect_one("[rule:r]\nlimit = 1\nwindow =\nwindow = 1s\n",
	    "4: [rule:r] window: is set twice (first on line 3)", NULL);
	/* ... but each rule has its own keys. */
	struct conf *c = load_ok(RULE_OK "[rule:s]\nlimit = 1\nwindow = 1s\n");
	assert_int_equal(c->nrules, 2);
	conf_free(c);
}

static void
test_duplicate_rule(void **state)
{
	(void)state;
	expect_one(RULE_OK "\n[rule:r]\nlimit = 1\nwindow = 1s\n",
	    "5: [rule:r]: this rule name is already used on line 1", NULL);
}

static void
test_bad_rule_name(void **state)
{
	char text[256];
	struct conf *c;

	(void)state;
	expect_one("[rule:a b]\nlimit = 1\nwindow = 1s\n",
	    "1: [rule:a b]: \"a b\" is not a rule name (use 1 to 64 letters, "
	    "digits, _, . or -)", NULL);
	expect_one("[rule:a{b}]\nlimit = 1\nwindow = 1s\n",
	    "1: [rule:a{b}]: \"a{b}\" is not a rule name", NULL);
	expect_one("[rule:]\nlimit = 1\nwindow = 1s\n",
	    "1: [rule:]: \"\" is not a rule name", NULL);

	/* 64 characters are fine (inih alone would cut the section name
	 * at 49 and merge two such rules), 65 are not. */
	snprintf(text, sizeof(text), "[rule:%.64s]\nlimit = 1\nwindow = 1s\n"
	    "[rule:%.63sy]\nlimit = 1\nwindow = 1s\n",
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	c = load_ok(text);
	assert_int_equal(c->nrules, 2);
	assert_int_equal(strlen(c->rules[0].name), 64);
	assert_string_not_equal(c->rules[0].name, c->rules[1].name);
	conf_free(c);
	snprintf(text, sizeof(text), "[rule:%.65s]\nlimit = 1\nwindow = 1s\n",
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	expect_one(text, "1: [rule:xxx", "is not a rule name");
}

static void
test_too_many_rules(void **state)
{
	size_t len = (RLG_MAX_RULES + 1) * 48, n = 0;
	char *text = malloc(len), *errors, prefix[64];
	struct conf *c;
	int i;

	(void)state;
	assert_non_null(text);
	for (i = 0; i < RLG_MAX_RULES; i++)
		n += (size_t)snprintf(text + n, len - n,
		    "[rule:r%d]\nlimit = 1\nwindow = 1s\n", i);
	c = load_ok(text);
	assert_int_equal(c->nrules, RLG_MAX_RULES);
	conf_free(c);

	snprintf(text + n, len - n, "[rule:one_more]\nlimit = x\n");
	errors = load_fail(text);
	assert_int_equal(count_lines(errors), 1);
	snprintf(prefix, sizeof(prefix), "%d: [rule:one_more]: too many rules "
	    "(at most %d)", RLG_MAX_RULES * 3 + 1, RLG_MAX_RULES);
	assert_error(errors, prefix, NULL);
	free(errors);
	free(text);
}

static void
test_bad_numbers(void **state)
{
	(void)state;
	expect_one("[gateway]\nworkers = 0\n",
	    "2: [gateway] workers: \"0\" is too small (use 1 to 1024)", NULL);
	expect_one("[gateway]\nworkers = 1025\n",
	    "2: [gateway] workers: \"1025\" is too large (use 1 to 1024)", NULL);
	expect_one("[gateway]\nworkers = four\n",
	    "2: [gateway] workers: \"four\" is not a whole number (use 1 to "
	    "1024)", NULL);
	expect_one("[gateway]\ndeny_status = 200\n",
	    "2: [gateway] deny_status: \"200\" is too small (use 400 to 599)",
	    NULL);
	expect_one("[gateway]\ndeny_status = 600\n",
	    "2: [gateway] deny_status: \"600\" is too large", NULL);
	expect_one("[redis]\ndatabase = -1\n",
	    "2: [redis] database: \"-1\" is too small", NULL);
	expect_one("[audit]\nqueue = 0\n", "2: [audit] queue: \"0\" is too "
	    "small", NULL);
	expect_one("[rule:r]\nlimit = 0\nwindow = 1s\n",
	    "2: [rule:r] limit: \"0\" is too small (use 1 to 1000000000)",
	    NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nburst = 99999999999\n"
	    "algorithm = gcra\n", "4: [rule:r] burst: \"99999999999\" is too "
	    "large", NULL);
	/* A number with a comment after it, and without a blank before. */
	expect_one("[gateway]\nworkers = 4;x\n",
	    "2: [gateway] workers: \"4;x\" is not a whole number", NULL);
}

static void
test_bad_durations(void **state)
{
	(void)state;
	expect_one("[redis]\ntimeout = 0ms\n",
	    "2: [redis] timeout: \"0ms\" is too short (use at least 1ms)", NULL);
	expect_one("[redis]\nconnect_timeout = 2h\n",
	    "2: [redis] connect_timeout: \"2h\" is too long (use at most 1h)",
	    NULL);
	expect_one("[redis]\ntimeout = 100\n",
	    "2: [redis] timeout: \"100\" has no unit (use 500ms, 1s, 1m, 1h, "
	    "1d)", NULL);
	expect_one("[audit]\nflush_interval = 0s\n",
	    "2: [audit] flush_interval: \"0s\" is too short", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 0s\n",
	    "3: [rule:r] window: \"0s\" is too short (use at least 1ms)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 367d\n",
	    "3: [rule:r] window: \"367d\" is too long (use at most 366d)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 99999999999999999999d\n",
	    "3: [rule:r] window: \"99999999999999999999d\" is too large", NULL);
}

/*
 * [gateway] engine is gone: "events" (what rlgate still is) loads with a
 * warning naming the line; "threads" or anything else is refused, with
 * what to do.
 */
static void
test_engine_gone(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("[gateway]\nworkers = 1\nengine = events\n" RULE_OK);
	assert_non_null(c->warnings);
	assert_int_equal(count_lines(c->warnings), 1);
	assert_error(c->warnings, "3: [gateway] engine: the key is gone: "
	    "rlgate has one engine, event loops ([gateway] workers of them",
	    "remove this line");
	assert_int_equal(c->workers, 1);
	conf_free(c);

	expect_one("[gateway]\nengine = threads\n",
	    "2: [gateway] engine: \"threads\": the key is gone: rlgate has "
	    "one engine, event loops ([gateway] workers of them, one per CPU "
	    "by default), and no threads engine; remove this line",
	    "a kept-alive connection no longer holds a worker");
	expect_one("[gateway]\nengine = fast\n",
	    "2: [gateway] engine: \"fast\": the key is gone", "remove this "
	    "line");

	/* One loop is never more than the CPUs: no warning at all. */
	c = load_ok("[gateway]\nworkers = 1\n" RULE_OK);
	assert_null(c->warnings);
	conf_free(c);
}

static void
test_bad_enums(void **state)
{
	(void)state;
	expect_one("[gateway]\nheaders = IETF\n",
	    "2: [gateway] headers: \"IETF\" is not a header style (use ietf, "
	    "legacy, both or none)", NULL);
	expect_one("[gateway]\nlog_level = loud\n",
	    "2: [gateway] log_level: \"loud\" is not a log level (use error, "
	    "warn, info or debug)", NULL);
	expect_one("[redis]\non_error = ignore\n",
	    "2: [redis] on_error: \"ignore\" is not an error policy (use allow, "
	    "deny or local)", NULL);
	expect_one("[audit]\nunmatched = maybe\n",
	    "2: [audit] unmatched: \"maybe\" is not a boolean (use yes or no)",
	    NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nalgorithm = leaky\n",
	    "4: [rule:r] algorithm: \"leaky\" is not an algorithm (use "
	    "fixed_window, sliding_window, sliding_log, token_bucket, gcra or "
	    "leaky_bucket)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\non_missing = allow\n",
	    "4: [rule:r] on_missing: \"allow\" is not a missing-field policy "
	    "(use skip or deny)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\non_error = skip\n",
	    "4: [rule:r] on_error: \"skip\" is not an error policy", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\ndry_run = si\n",
	    "4: [rule:r] dry_run: \"si\" is not a boolean", NULL);

	/* The usual spellings of a boolean are all understood. */
	struct conf *c = load_ok("[audit]\nunmatched = off\n[rule:r]\n"
	    "limit = 1\nwindow = 1s\ndry_run = true\n");
	assert_int_equal(c->audit_unmatched, 0);
	assert_int_equal(c->rules[0].dry_run, 1);
	conf_free(c);
}

static void
test_paths(void **state)
{
	struct conf *c;
	char xs[1 + 199 + 1];	/* "/" and 199 x */

	(void)state;
	c = load_ok("[rule:a]\npath = /user/list\nlimit = 1\nwindow = 1s\n"
	    "[rule:b]\npath = /api/*\nlimit = 1\nwindow = 1s\n"
	    "[rule:c]\npath = ~ ^/user/[0-9]+$\nlimit = 1\nwindow = 1s\n"
	    "[rule:d]\npath = /*\nlimit = 1\nwindow = 1s\n");
	assert_int_equal(c->rules[0].path_kind, RLG_PATH_EXACT);
	assert_string_equal(c->rules[0].path, "/user/list");
	assert_int_equal(c->rules[1].path_kind, RLG_PATH_PREFIX);
	assert_string_equal(c->rules[1].path, "/api/");
	assert_int_equal(c->rules[1].path_len, 5);
	assert_int_equal(c->rules[2].path_kind, RLG_PATH_REGEX);
	assert_string_equal(c->rules[2].path, "^/user/[0-9]+$");
	assert_int_equal(regexec(&c->rules[2].path_re, "/user/42", 0, NULL, 0),
	    0);
	assert_int_equal(regexec(&c->rules[2].path_re, "/user/4x", 0, NULL, 0),
	    REG_NOMATCH);
	assert_int_equal(c->rules[3].path_kind, RLG_PATH_PREFIX);
	assert_string_equal(c->rules[3].path, "/");
	conf_free(c);

	/* One repetition after another is refused before regcomp(), which
	 * would take gigabytes for "+++...": the second is named. Members
	 * of a bracket expression, escaped ones and a single {m,n} are not
	 * repetitions of repetitions. */
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~^/u/[5-9]++$\n",
	    "4: [rule:r] path: \"~^/u/[5-9]++$\" repeats a repetition (\"++\")",
	    NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~^/u/a{2}*$\n",
	    "4: [rule:r] path: \"~^/u/a{2}*$\" repeats a repetition (\"}*\")",
	    NULL);
	/* So is an expression whose repetitions, nested ones multiplied,
	 * expand past 20000 atoms (anchors and "/" count too; regcomp()
	 * would take 28 MB for the first one and gigabytes one level
	 * further), or groups 33 deep. */
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\n"
	    "path = ~^/((a{50}){50}){50}$\n",
	    "4: [rule:r] path: \"~^/((a{50}){50}){50}$\" is too large once "
	    "its repetitions are expanded (over 20000 characters from "
	    "\"{50}$\")", NULL);
	/* An empty group counts as one: regcomp() copies it all the same
	 * (fuzz_conf: rlgate -t ran 14 s into 4 GB and crashed on the
	 * three levels below). */
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\n"
	    "path = ~^/((((){200}){200}){200})$\n",
	    "4: [rule:r] path: ", "is too large once its repetitions are "
	    "expanded");
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\n"
	    "path = ~^/(((|){200}){200}){200}$\n",
	    "4: [rule:r] path: ", "is too large once its repetitions are "
	    "expanded");
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~^/(x|y{99}){201}$\n",
	    "4: [rule:r] path: ", "is too large once its repetitions are "
	    "expanded");
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~"
	    "(((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))\n",
	    "4: [rule:r] path: ", "nests groups more than 32 deep");
	c = load_ok("[rule:a]\npath = ~^/((a{20}){20}){49}$\nlimit = 1\nwindow = 1s\n"
	    "[rule:b]\npath = ~^/(x|y{99}){199}$\nlimit = 1\nwindow = 1s\n"
	    "[rule:c]\npath = ~^/u{,2}v{19990}$\nlimit = 1\nwindow = 1s\n");
	assert_int_equal(regexec(&c->rules[0].path_re, "/aa", 0, NULL, 0),
	    REG_NOMATCH);
	memset(xs, 'x', sizeof(xs) - 1);
	xs[0] = '/';
	xs[sizeof(xs) - 1] = '\0';
	assert_int_equal(regexec(&c->rules[1].path_re, xs, 0, NULL, 0), 0);
	conf_free(c);
	c = load_ok("[rule:a]\npath = ~^/[+*?]+$\nlimit = 1\nwindow = 1s\n"
	    "[rule:b]\npath = ~^/a\\++$\nlimit = 1\nwindow = 1s\n"
	    "[rule:c]\npath = ~^/[]+[:digit:]]{2,3}x?$\nlimit = 1\nwindow = 1s\n");
	assert_int_equal(regexec(&c->rules[0].path_re, "/+*?", 0, NULL, 0), 0);
	assert_int_equal(regexec(&c->rules[1].path_re, "/a++", 0, NULL, 0), 0);
	assert_int_equal(regexec(&c->rules[2].path_re, "/]7x", 0, NULL, 0), 0);
	conf_free(c);

	/* regerror()'s own words follow the colon. */
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~^/user/[0-9+$\n",
	    "4: [rule:r] path: \"~^/user/[0-9+$\" is not a POSIX extended "
	    "regular expression: ", "Unmatched [");
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~(a\n",
	    "4: [rule:r] path: \"~(a\" is not a POSIX extended regular "
	    "expression: ", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = ~\n",
	    "4: [rule:r] path: \"~\" has no regular expression after ~", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = user/list\n",
	    "4: [rule:r] path: \"user/list\" is not a path (use /exact, "
	    "/prefix/* or ~regex)", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = /a/*/b\n",
	    "4: [rule:r] path: \"/a/*/b\" has a * that is not at the end", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\npath = /a?org=1\n",
	    "4: [rule:r] path: \"/a?org=1\" has a blank, ? or #", NULL);
}

static void
test_methods_and_host(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("[rule:r]\nlimit = 1\nwindow = 1s\n"
	    "method = get  PURGE,m-search\n");
	assert_string_equal(c->rules[0].methods[0], "GET");
	assert_string_equal(c->rules[0].methods[1], "PURGE");
	assert_string_equal(c->rules[0].methods[2], "M-SEARCH");
	assert_null(c->rules[0].methods[3]);
	conf_free(c);

	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nmethod = GET P(OST\n",
	    "4: [rule:r] method: \"P(OST\" is not a method name", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nmethod = ,\n",
	    "4: [rule:r] method: \",\" lists no method", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nhost = a.com b.com\n",
	    "4: [rule:r] host: \"a.com b.com\" is not one host name", NULL);
}

/* What the scripts would refuse per request is refused at load time. */
static void
test_script_limits(void **state)
{
	struct conf *c;

	(void)state;
	expect_one("[rule:r]\nalgorithm = sliding_log\nlimit = 100001\n"
	    "window = 1s\n", "3: [rule:r] limit: 100001 is more than "
	    "sliding_log keeps", NULL);
	expect_one("[rule:r]\nalgorithm = sliding_window\nlimit = 5\n"
	    "window = 1h\nprecision = 100ms\n", "5: [rule:r] precision: "
	    "100ms makes 36000 blocks", NULL);
	/* 999983 per day: day/999983 is too fine a fraction to keep. */
	expect_one("[rule:r]\nalgorithm = gcra\nlimit = 999983\n"
	    "window = 1d\n", "3: [rule:r] limit: 999983 per 1d cannot be "
	    "kept exactly by gcra", NULL);
	c = load_ok("[rule:r]\nalgorithm = token_bucket\nlimit = 1000000\n"
	    "window = 1d\n[rule:s]\nalgorithm = sliding_log\n"
	    "limit = 100000\nwindow = 1m\n");
	conf_free(c);
	/* token_bucket and gcra refuse burst * window_us / gcd at 2^53, not
	 * 2^52: 999983 per 2h is 999983 * 7.2e9 = 7.2e15, between the two,
	 * and the scripts take it. */
	c = load_ok("[rule:r]\nalgorithm = token_bucket\nlimit = 999983\n"
	    "window = 2h\n[rule:s]\nalgorithm = gcra\nlimit = 999983\n"
	    "window = 2h\n");
	conf_free(c);
	/* 3h: 1.08e16, above 2^53; burst counts, not the limit alone. */
	expect_one("[rule:r]\nalgorithm = token_bucket\nlimit = 999983\n"
	    "window = 3h\n", "3: [rule:r] limit: 999983 per 3h cannot be "
	    "kept exactly by token_bucket with a capacity of 999983", NULL);
	expect_one("[rule:r]\nalgorithm = gcra\nlimit = 999983\n"
	    "window = 2h\nburst = 1999966\n", "3: [rule:r] limit: 999983 per "
	    "2h cannot be kept exactly by gcra with a capacity of 1999966",
	    NULL);
	/* leaky_bucket: (burst + cost) * window_us / gcd below 2^52, so
	 * 999983 per 1h (3.6e15 with cost 1) loads, 2h does not. */
	c = load_ok("[rule:r]\nalgorithm = leaky_bucket\nlimit = 999983\n"
	    "window = 1h\n");
	conf_free(c);
	expect_one("[rule:r]\nalgorithm = leaky_bucket\nlimit = 999983\n"
	    "window = 2h\n", "3: [rule:r] limit: 999983 per 2h cannot be "
	    "kept exactly by leaky_bucket with a capacity of 999983 and a "
	    "cost of 1", NULL);
}

/* leaky_bucket admits a request of any cost into an empty queue. */
static void
test_leaky_bucket_cost(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("[rule:r]\nalgorithm = leaky_bucket\nlimit = 10\n"
	    "window = 1s\nburst = 5\ncost = 6\n[rule:s]\n"
	    "algorithm = leaky_bucket\nlimit = 10\nwindow = 1s\ncost = 50\n");
	assert_int_equal(c->rules[0].cost, 6);
	assert_int_equal(c->rules[1].cost, 50);
	conf_free(c);
	/* The bound that remains: (burst + cost) * window_us / gcd < 2^52;
	 * 7 per 1d (scale 8.64e10 / 1): burst 7 + cost 52000 is 4.5e15. */
	expect_one("[rule:r]\nalgorithm = leaky_bucket\nlimit = 7\n"
	    "window = 1d\ncost = 52130\n", "3: [rule:r] limit: 7 per 1d "
	    "cannot be kept exactly by leaky_bucket with a capacity of 7 and a "
	    "cost of 52130", NULL);
	c = load_ok("[rule:r]\nalgorithm = leaky_bucket\nlimit = 7\n"
	    "window = 1d\ncost = 52000\n");
	conf_free(c);
	/* The others still refuse what they could never admit. */
	expect_one("[rule:r]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\n"
	    "burst = 5\ncost = 6\n", "6: [rule:r] cost: 6 is more than the "
	    "rule can ever admit (burst = 5)", NULL);
}

static void
test_cost(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("[rule:r]\nlimit = 10\nwindow = 1s\ncost = {header.X-Cost}\n"
	    "[rule:s]\nlimit = 10\nwindow = 1s\ncost = 10\n");
	assert_int_equal(c->rules[0].cost_tmpl.nparts, 1);
	assert_int_equal(c->rules[0].cost_tmpl.parts[0].kind, RLG_PART_HEADER);
	assert_string_equal(c->rules[0].cost_tmpl.parts[0].text, "X-Cost");
	assert_int_equal(c->rules[1].cost_tmpl.nparts, 0);
	assert_int_equal(c->rules[1].cost, 10);
	conf_free(c);

	expect_one("[rule:r]\nlimit = 10\nwindow = 1s\ncost = two\n",
	    "4: [rule:r] cost: \"two\" is not a whole number (use a whole number "
	    "from 1 to 1000000000, or a template such as {header.X-Cost})",
	    NULL);
	expect_one("[rule:r]\nlimit = 10\nwindow = 1s\ncost = 0\n",
	    "4: [rule:r] cost: \"0\" is too small", NULL);
	expect_one("[rule:r]\nlimit = 10\nwindow = 1s\ncost = {header.X-Cost\n",
	    "4: [rule:r] cost: \"{header.X-Cost\" has a { that is not closed",
	    NULL);
	/* Contradictions: a constant cost no window or bucket can hold. */
	expect_one("[rule:r]\ncost = 11\nlimit = 10\nwindow = 1s\n",
	    "2: [rule:r] cost: 11 is more than the rule can ever admit (limit = "
	    "10)", NULL);
	expect_one("[rule:r]\nalgorithm = token_bucket\nlimit = 100\n"
	    "window = 1s\nburst = 5\ncost = 6\n",
	    "6: [rule:r] cost: 6 is more than the rule can ever admit (burst = "
	    "5), so every request would be denied; lower the cost or raise "
	    "burst", NULL);
}

static void
test_missing_keys(void **state)
{
	char *errors;

	(void)state;
	expect_one("[gateway]\n[rule:r]\nwindow = 1s\n",
	    "2: [rule:r] limit: is missing: every rule needs one", NULL);
	expect_one("[rule:r]\nlimit = 1\n\n[gateway]\n",
	    "1: [rule:r] window: is missing: every rule needs one (e.g. window "
	    "= 1s)", NULL);
	/* An empty value is not a setting. */
	expect_one("[rule:r]\nlimit =\nwindow = 1s\n",
	    "1: [rule:r] limit: is missing", NULL);
	/* A rule at the end of the file is checked too; a bad value is
	 * reported as bad, not also as missing. */
	errors = load_fail(RULE_OK "[rule:s]\nlimit = x\n");
	assert_int_equal(count_lines(errors), 2);
	assert_error(errors, "4: [rule:s] window: is missing", NULL);
	assert_error(errors, "5: [rule:s] limit: \"x\" is not a whole number",
	    NULL);
	free(errors);
}

static void
test_algorithm_keys(void **state)
{
	struct conf *c;

	(void)state;
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nburst = 5\n",
	    "4: [rule:r] burst: fixed_window has no burst (only token_bucket, "
	    "gcra and leaky_bucket do); remove it or change the algorithm",
	    NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nburst = 5\n"
	    "algorithm = sliding_log\n",
	    "4: [rule:r] burst: sliding_log has no burst", NULL);
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nprecision = 100ms\n"
	    "algorithm = gcra\n",
	    "4: [rule:r] precision: gcra has no precision (only sliding_window "
	    "does); remove it or change the algorithm", NULL);
	/* An unknown algorithm is one error, not three. */
	expect_one("[rule:r]\nlimit = 1\nwindow = 1s\nburst = 5\n"
	    "algorithm = bogus\n", "5: [rule:r] algorithm: ", NULL);

	c = load_ok("[rule:a]\nalgorithm = leaky_bucket\nlimit = 10\n"
	    "window = 1s\nburst = 3\n"
	    "[rule:b]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\n");
	assert_int_equal(c->rules[0].algorithm, RLG_LEAKY_BUCKET);
	assert_int_equal(c->rules[0].burst, 3);
	assert_int_equal(c->rules[1].burst, 0);	/* the scripts use limit */
	conf_free(c);
}

static void
test_precision(void **state)
{
	static const struct {
		const char	*window;
		long long	 precision_ms;
	} defaults[] = {
		{ "1s", 100 }, { "1m", 6000 }, { "10ms", 1 }, { "15ms", 1 },
		{ "5ms", 1 }, { "1ms", 1 }, { "7ms", 1 }, { "250ms", 25 },
		{ "1d", 8640000 }, { "3s", 300 }, { "1001ms", 91 },
	};
	char text[256];
	struct conf *c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		snprintf(text, sizeof(text), "[rule:r]\nalgorithm = "
		    "sliding_window\nlimit = 5\nwindow = %s\n",
		    defaults[i].window);
		c = load_ok(text);
		assert_int_equal(c->rules[0].precision_ms,
		    defaults[i].precision_ms);
		assert_int_equal(c->rules[0].window_ms %
		    c->rules[0].precision_ms, 0);
		conf_free(c);
	}
	c = load_ok("[rule:r]\nalgorithm = sliding_window\nlimit = 5\n"
	    "window = 1m\nprecision = 1s\n");
	assert_int_equal(c->rules[0].precision_ms, 1000);
	conf_free(c);

	expect_one("[rule:r]\nalgorithm = sliding_window\nlimit = 5\n"
	    "window = 1s\nprecision = 300ms\n",
	    "5: [rule:r] precision: the window (1s) is not a whole number of "
	    "blocks of 300ms; use a divisor of the window, e.g. 100ms", NULL);
	expect_one("[rule:r]\nalgorithm = sliding_window\nlimit = 5\n"
	    "precision = 2s\nwindow = 1s\n",
	    "4: [rule:r] precision: 2s is longer than the window (1s)", NULL);
}

/* [audit] database with strftime fields, keep, on_full. */
static void
test_audit_retention(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("[audit]\ndatabase = /var/lib/rlgate/audit-%Y-%m-%d.db\n"
	    "keep = 14d\non_full = deny\n" RULE_OK);
	assert_string_equal(c->audit_database,
	    "/var/lib/rlgate/audit-%Y-%m-%d.db");
	assert_int_equal(c->audit_keep_ms, 14 * 86400000LL);
	assert_int_equal(c->audit_on_full, RLG_ON_ERROR_DENY);
	conf_free(c);
	c = load_ok("[audit]\ndatabase = /a/b-%Y%m%d%H-100%%.db\n" RULE_OK);
	assert_int_equal(c->audit_keep_ms, 0);
	assert_int_equal(c->audit_on_full, RLG_ON_ERROR_ALLOW);
	conf_free(c);

	expect_one("[audit]\ndatabase = /a/audit-%F.db\n" RULE_OK,
	    "2: [audit] database: \"/a/audit-%F.db\": a dated name may hold "
	    "%Y, %m, %d and %H (and %% for a %), nothing else", NULL);
	expect_one("[audit]\ndatabase = /a/audit-%H.db\n" RULE_OK,
	    "2: [audit] database: \"/a/audit-%H.db\": each date field needs "
	    "the ones before it: %Y, %m, %d, %H", NULL);
	expect_one("[audit]\ndatabase = /a/audit-%Y-%d.db\n" RULE_OK,
	    "2: [audit] database: ", "each date field needs the ones before");
	expect_one("[audit]\ndatabase = /a/%Y/audit.db\n" RULE_OK,
	    "2: [audit] database: \"/a/%Y/audit.db\": a date goes in the "
	    "file's name, not in its directory", NULL);
	expect_one("[audit]\ndatabase = /a/audit.db\nkeep = 14d\n" RULE_OK,
	    "3: [audit] keep: deletes dated files only: put a date in [audit] "
	    "database (e.g. audit-%Y-%m-%d.db, a file a day), or remove keep",
	    NULL);
	expect_one("[audit]\ndatabase = /a/audit-%Y.db\nkeep = 10m\n"
	    RULE_OK, "3: [audit] keep: \"10m\" is too short (use at least "
	    "1h)", NULL);
	expect_one("[audit]\non_full = drop\n" RULE_OK,
	    "2: [audit] on_full: \"drop\" is not a queue-full policy (use "
	    "allow or deny)", NULL);
}

static void
test_audit_batch_queue(void **state)
{
	(void)state;
	expect_one("[audit]\nqueue = 500\nbatch = 1000\n",
	    "3: [audit] batch: a batch of 1000 rows cannot come from a queue of "
	    "500; use a batch no larger than the queue", NULL);
	/* Only the queue given: the default batch is what does not fit. */
	expect_one("[audit]\nqueue = 199\n",
	    "2: [audit] queue: a batch of 200 rows cannot come from a queue "
	    "of 199", NULL);
}

/* [gateway] socket_mode and socket_group: octal, a group of this host. */
static void
test_socket_mode_group(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok(RULE_OK);
	assert_int_equal(c->socket_mode, 0660);
	assert_int_equal(c->socket_gid, -1);
	conf_free(c);
	c = load_ok("[gateway]\nsocket_mode = 600\nsocket_group = 0\n"
	    RULE_OK);
	assert_int_equal(c->socket_mode, 0600);
	assert_int_equal(c->socket_gid, 0);
	conf_free(c);
	c = load_ok("[gateway]\nsocket_mode = 0777\nsocket_group = root\n"
	    RULE_OK);
	assert_int_equal(c->socket_mode, 0777);
	assert_int_equal(c->socket_gid, 0);
	conf_free(c);
	c = load_ok("[gateway]\nsocket_group =\n" RULE_OK);
	assert_int_equal(c->socket_gid, -1);
	conf_free(c);
	expect_one("[gateway]\nsocket_mode = 0668\n" RULE_OK,
	    "2: [gateway] socket_mode: \"0668\" is not an octal mode (use "
	    "e.g. 0660, at most 777)", NULL);
	expect_one("[gateway]\nsocket_mode = 1000\n" RULE_OK,
	    "2: [gateway] socket_mode: \"1000\" is not an octal mode", NULL);
	expect_one("[gateway]\nsocket_mode = 0o660\n" RULE_OK,
	    "2: [gateway] socket_mode: \"0o660\" is not an octal mode", NULL);
	expect_one("[gateway]\nsocket_group = no-such-group-x\n" RULE_OK,
	    "2: [gateway] socket_group: \"no-such-group-x\" is not a group "
	    "of this host (use a name from /etc/group or a number)", NULL);
	expect_one("[gateway]\nsocket_group = 99999999999\n" RULE_OK,
	    "2: [gateway] socket_group: \"99999999999\" is not a group", NULL);
}

static void
test_password_mode(void **state)
{
	static const char text[] = "[redis]\npassword = secret\n" RULE_OK;
	char *errors, *c_errors = NULL;
	struct conf *c;

	(void)state;
	errors = load_fail_mode(text, 0644);
	assert_int_equal(count_lines(errors), 1);
	assert_error(errors, "2: [redis] password: ", "every user can read it "
	    "(mode 644); run chmod 640");
	free(errors);
	errors = load_fail_mode(text, 0604);
	assert_error(errors, "2: [redis] password: ", "(mode 604)");
	free(errors);

	/* 640 and 600 are what the message asks for. */
	write_file(text, 0640);
	c = conf_load(file, &c_errors);
	assert_non_null(c);
	assert_string_equal(c->redis_password, "secret");
	conf_free(c);
	/* A world-readable file without a password is fine. */
	write_file("[redis]\npassword =\n" RULE_OK, 0644);
	c = conf_load(file, &c_errors);
	assert_non_null(c);
	conf_free(c);
}

static void
test_other_contradictions(void **state)
{
	(void)state;
	expect_one("[redis]\nusername = gw\n",
	    "2: [redis] username: is set without a password (Redis AUTH takes "
	    "both)", NULL);
	expect_one("[redis]\nkey_prefix = rl:{x}\n",
	    "2: [redis] key_prefix: \"rl:{x}\" contains a brace", NULL);
	expect_one("[cgi]\nupstream = app.cgi\n",
	    "2: [cgi] upstream: \"app.cgi\" is not an absolute path", NULL);
}

static void
test_all_errors_together(void **state)
{
	char *errors;

	(void)state;
	errors = load_fail(
	    "[gateway]\n"			/* 1 */
	    "workers = 0\n"			/* 2 */
	    "headers = fancy\n"			/* 3 */
	    "[redis]\n"				/* 4 */
	    "timeout = 10x\n"			/* 5 */
	    "[rule:a]\n"			/* 6: window missing */
	    "limit = 10\n"			/* 7 */
	    "cost = 20\n"			/* 8 */
	    "[rule:a]\n"			/* 9 */
	    "limit = 1\n"			/* 10 */
	    "window = 1s\n"			/* 11 */
	    "key = {nope}\n"			/* 12 */
	    "[audit]\n"				/* 13 */
	    "queue = 10\n");			/* 14 */
	/* In file order, whenever they were found. */
	assert_int_equal(count_lines(errors), 8);
	assert_error(errors, "2: [gateway] workers: ", NULL);
	assert_error(errors, "3: [gateway] headers: ", NULL);
	assert_error(errors, "5: [redis] timeout: ", NULL);
	assert_error(errors, "6: [rule:a] window: is missing", NULL);
	assert_error(errors, "8: [rule:a] cost: 20 is more", NULL);
	assert_error(errors, "9: [rule:a]: this rule name is already used", NULL);
	assert_error(errors, "12: [rule:a] key: ", NULL);
	assert_error(errors, "14: [audit] queue: ", NULL);
	assert_true(strstr(errors, ":2: ") < strstr(errors, ":3: "));
	assert_true(strstr(errors, ":6: ") < strstr(errors, ":8: "));
	assert_true(strstr(errors, ":12: ") < strstr(errors, ":14: "));
	free(errors);
}

static void
test_error_limit(void **state)
{
	char *text = malloc(200 * 16), *errors, want[PATH_MAX + 64];
	size_t n = 0;
	int i;

	(void)state;
	assert_non_null(text);
	n = (size_t)sprintf(text, "[gateway]\n");
	for (i = 0; i < 150; i++)
		n += (size_t)sprintf(text + n, "bad%d = 1\n", i);
	errors = load_fail(text);
	assert_int_equal(count_lines(errors), 101);
	snprintf(want, sizeof(want), "%s: too many errors, stopped after 100\n",
	    file);
	assert_string_equal(errors + strlen(errors) - strlen(want), want);
	free(errors);
	free(text);
}

static void
test_free_null(void **state)
{
	(void)state;
	conf_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_int),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_algorithm_names),
		cmocka_unit_test(test_sample_loads),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_operations_keys),
		cmocka_unit_test(test_overrides_key),
		cmocka_unit_test(test_replicas_key),
		cmocka_unit_test(test_local_share_key),
		cmocka_unit_test(test_empty_values),
		cmocka_unit_test(test_syntax_tolerated),
		cmocka_unit_test(test_error_format),
		cmocka_unit_test(test_cannot_open),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_unknown_section),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_key_twice),
		cmocka_unit_test(test_duplicate_rule),
		cmocka_unit_test(test_bad_rule_name),
		cmocka_unit_test(test_too_many_rules),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_bad_durations),
		cmocka_unit_test(test_engine_gone),
		cmocka_unit_test(test_bad_enums),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_methods_and_host),
		cmocka_unit_test(test_script_limits),
		cmocka_unit_test(test_leaky_bucket_cost),
		cmocka_unit_test(test_cost),
		cmocka_unit_test(test_missing_keys),
		cmocka_unit_test(test_algorithm_keys),
		cmocka_unit_test(test_precision),
		cmocka_unit_test(test_audit_batch_queue),
		cmocka_unit_test(test_audit_retention),
		cmocka_unit_test(test_socket_mode_group),
		cmocka_unit_test(test_password_mode),
		cmocka_unit_test(test_other_contradictions),
		cmocka_unit_test(test_all_errors_together),
		cmocka_unit_test(test_error_limit),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
