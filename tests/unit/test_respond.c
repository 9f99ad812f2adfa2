/*
 * Unit tests for respond: the decision from verdicts, and the exact bytes
 * of each reply shape (authorizer allow/deny, responder, 503, 400).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "respond.h"

/* An answered verdict: allowed, remaining, limit, reset_ms, retry_after_ms;
 * counted when allowed (every rule of the request admitted it). */
#define VERDICT(a, rem, lim, reset, retry) ((struct verdict){ .answered = 1, \
	.allowed = (a), .counted = (a), .remaining = (rem), .limit = (lim), \
	.reset_ms = (reset), .retry_after_ms = (retry), .now_us = 1 })

static struct conf	conf;
static struct rule	rules[2];
static struct request	req;
static struct match	m[2];
static struct verdict	v[2];
static char		out[RLG_MAX_RESPONSE];
static char		name0[] = "user_list", name1[] = "daily";

static int
setup(void **state)
{
	(void)state;
	memset(&conf, 0, sizeof(conf));
	memset(rules, 0, sizeof(rules));
	memset(&req, 0, sizeof(req));
	memset(m, 0, sizeof(m));
	memset(v, 0, sizeof(v));
	conf.deny_status = 429;
	conf.headers = RLG_HEADERS_IETF;
	conf.on_error = RLG_ON_ERROR_ALLOW;
	rules[0].name = name0;
	rules[0].limit = 100;
	rules[0].window_ms = 1000;
	rules[1].name = name1;
	rules[1].limit = 5000;
	rules[1].window_ms = 86400000;
	m[0].rule = &rules[0];
	m[1].rule = &rules[1];
	strcpy(m[0].key, "org1/user/list");
	m[0].key_len = strlen(m[0].key);
	m[0].cost = m[1].cost = 1;
	strcpy(req.id, "abc-1");
	strcpy(req.ip, "127.0.0.1");
	req.role = RLG_ROLE_AUTHORIZER;
	return 0;
}

static struct decision
decide(size_t n)
{
	struct decision d;
	size_t i;

	/* As limiter_decide() leaves them: the rule's parameters unless the
	 * test gave others (an override's), the rule's limit when Redis did
	 * not answer. */
	for (i = 0; i < n; i++) {
		if (v[i].window_ms == 0)
			v[i].window_ms = m[i].rule->window_ms;
		if (!v[i].answered)
			v[i].limit = m[i].rule->limit;
	}
	memset(&d, 0, sizeof(d));
	d.conf = &conf;
	d.req = &req;
	d.m = m;
	d.v = v;
	d.n = n;
	decision_settle(&d);
	return d;
}

static void
test_deny_reply_exact(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	v[0] = VERDICT(0, 0, 100, 420, 420);
	d = decide(1);
	assert_int_equal(d.status, 429);
	assert_false(d.allowed);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_string_equal(out,
	    "Status: 429 Too Many Requests\r\n"
	    "Cache-Control: no-store\r\n"
	    "Retry-After: 1\r\n"
	    "RateLimit-Policy: \"user_list\";q=100;w=1\r\n"
	    "RateLimit: \"user_list\";r=0;t=1\r\n"
	    "Content-Type: application/problem+json\r\n"
	    "\r\n"
	    "{\"type\":\"https://iana.org/assignments/http-problem-types#"
	    "quota-exceeded\",\"title\":\"Too Many Requests\",\"status\":429,"
	    "\"detail\":\"user_list allows 100 per 1000 ms; retry in 420 ms\","
	    "\"violated-policies\":[\"user_list\"],\"retry_after_ms\":420}\n");
}

static void
test_retry_after_rounds_up(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	v[0] = VERDICT(0, 0, 100, 2001, 2001);
	d = decide(1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Retry-After: 3\r\n"));
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=0;t=3\r\n"));
}

static void
test_authorizer_allow_is_status_and_variables(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	v[0] = VERDICT(1, 99, 100, 1000, 0);
	v[1] = VERDICT(1, 4000, 5000, 1000, 0);
	d = decide(2);
	assert_int_equal(d.status, 200);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_string_equal(out, "Status: 200 OK\r\n"
	    "Variable-RATELIMIT_REMAINING: 99\r\n"
	    "Variable-RATELIMIT_POLICY: user_list\r\n\r\n");
	req.apache = 1;
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Variable-RL_CLIENT: 127.0.0.1\r\n"));
}

static void
test_two_policies_one_denies(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	v[0] = VERDICT(1, 50, 100, 300, 0);
	v[0].counted = 0;	/* daily denied: nothing was counted */
	v[1] = VERDICT(0, 0, 5000, 5000, 3600000);
	conf.headers = RLG_HEADERS_BOTH;
	d = decide(2);
	assert_int_equal(d.status, 429);
	assert_int_equal(d.retry_after_ms, 3600000);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "RateLimit-Policy: \"user_list\";q=100;w=1, "
	    "\"daily\";q=5000;w=86400\r\n"));
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=50;t=1, "
	    "\"daily\";r=0;t=3600\r\n"));
	/* Legacy headers speak for the policy that denied. */
	assert_non_null(strstr(out, "X-RateLimit-Limit: 5000\r\n"
	    "X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 3600\r\n"));
	assert_non_null(strstr(out, "\"violated-policies\":[\"daily\"]"));
	/* user_list would have admitted: not counted, says the audit. */
	assert_int_equal(d.rule_allowed[0], 0);
	assert_int_equal(d.rule_reason[0], RLG_REASON_OTHER_RULE);
	assert_string_equal(decision_reason_name(d.rule_reason[0]),
	    "other_rule");
	assert_int_equal(d.rule_allowed[1], 0);
	assert_int_equal(d.rule_reason[1], RLG_REASON_LIMIT);
}

/*
 * All-or-nothing: the request passes only when every rule admits it and
 * it was counted; Retry-After is the longest denial's, a leaky_bucket
 * delay the longest admission's; a dry-run rule that would deny blocks
 * nothing, and one that admitted a request another rule denied was not
 * counted either.
 */
static void
test_every_rule_must_admit(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	req.role = RLG_ROLE_RESPONDER;
	v[0] = VERDICT(1, 3, 100, 300, 0);
	v[0].delay_ms = 120;
	v[1] = VERDICT(1, 10, 5000, 1000, 0);
	v[1].delay_ms = 450;
	d = decide(2);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.delay_ms, 450);
	assert_int_equal(d.rule_reason[0], RLG_REASON_LIMIT);
	assert_int_equal(d.rule_reason[1], RLG_REASON_LIMIT);
	/* Both deny: the longer wait. */
	v[0] = VERDICT(0, 0, 100, 300, 300);
	v[1] = VERDICT(0, 0, 5000, 9000, 9000);
	d = decide(2);
	assert_int_equal(d.status, 429);
	assert_int_equal(d.retry_after_ms, 9000);
	assert_int_equal(d.delay_ms, 0);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Retry-After: 9\r\n"));
	assert_non_null(strstr(out,
	    "\"violated-policies\":[\"user_list\",\"daily\"]"));
	/* A dry-run rule denies nothing: counted, the request passes. */
	rules[1].dry_run = 1;
	v[0] = VERDICT(1, 3, 100, 300, 0);
	d = decide(2);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.rule_reason[0], RLG_REASON_LIMIT);
	assert_int_equal(d.rule_allowed[0], 1);
	assert_int_equal(d.rule_reason[1], RLG_REASON_DRY_RUN);
	assert_int_equal(d.rule_allowed[1], 0);
	/* A dry-run rule that admitted what another rule denied. */
	v[0] = VERDICT(0, 0, 100, 300, 300);
	v[1] = VERDICT(1, 10, 5000, 1000, 0);
	v[1].counted = 0;
	d = decide(2);
	assert_int_equal(d.status, 429);
	assert_int_equal(d.retry_after_ms, 300);
	assert_int_equal(d.rule_reason[1], RLG_REASON_OTHER_RULE);
	assert_int_equal(d.rule_allowed[1], 0);
	/* Its numbers still show: it kept its state. */
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=0;t=1, "
	    "\"daily\";r=10;t=1\r\n"));
}

static void
test_redis_error_follows_on_error(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	d = decide(1);		/* v[0].answered == 0 */
	assert_int_equal(d.status, 200);
	assert_int_equal(d.rule_reason[0], RLG_REASON_REDIS_ERROR);
	assert_int_equal(d.rule_allowed[0], 1);
	rules[0].on_error = RLG_ON_ERROR_DENY;
	d = decide(1);
	assert_int_equal(d.status, 503);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Status: 503 Service Unavailable\r\n"));
	assert_non_null(strstr(out, "Retry-After: 1\r\n"));
	assert_null(strstr(out, "RateLimit"));
}

static void
test_dry_run_never_denies(void **state)
{
	struct decision d;

	(void)state;
	rules[0].dry_run = 1;
	v[0] = VERDICT(0, 0, 100, 420, 420);
	d = decide(1);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.rule_reason[0], RLG_REASON_DRY_RUN);
	assert_int_equal(d.rule_allowed[0], 0);
}

/*
 * Dry run as a responder: 200, and the client (or the check API's caller)
 * still sees where it stands: RateLimit headers with r=0 and the reason.
 */
static void
test_dry_run_responder_headers(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	req.role = RLG_ROLE_RESPONDER;
	rules[0].dry_run = 1;
	v[0] = VERDICT(0, 0, 100, 420, 420);
	d = decide(1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Status: 200 OK\r\n"));
	assert_non_null(strstr(out, "RateLimit-Policy: \"user_list\";q=100;"
	    "w=1\r\nRateLimit: \"user_list\";r=0;t=1\r\n"));
	assert_null(strstr(out, "Retry-After"));
	assert_non_null(strstr(out, "\"allowed\":false,\"reason\":\"dry_run\""));
	conf.headers = RLG_HEADERS_LEGACY;
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "X-RateLimit-Remaining: 0\r\n"));
}

/* [gateway] dry_run: every rule in dry run, even a 503 on_error. */
static void
test_global_dry_run(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	req.role = RLG_ROLE_RESPONDER;
	conf.dry_run = 1;
	v[0] = VERDICT(0, 0, 100, 420, 420);
	v[1] = VERDICT(1, 4000, 5000, 1000, 0);
	d = decide(2);
	assert_int_equal(d.status, 200);
	assert_true(d.allowed);
	assert_int_equal(d.rule_reason[0], RLG_REASON_DRY_RUN);
	assert_int_equal(d.rule_allowed[0], 0);
	assert_int_equal(d.rule_reason[1], RLG_REASON_LIMIT);
	assert_int_equal(d.rule_allowed[1], 1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=0;t=1, "
	    "\"daily\";r=4000;t=1\r\n"));
	rules[0].on_error = RLG_ON_ERROR_DENY;
	memset(&v[0], 0, sizeof(v[0]));		/* Redis did not answer */
	d = decide(1);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.rule_reason[0], RLG_REASON_REDIS_ERROR);
	conf.dry_run = 0;
	d = decide(1);
	assert_int_equal(d.status, 503);
}

/* A denial the deny cache remembered: the same reply, its own reason. */
static void
test_local_cache_denies_like_redis(void **state)
{
	struct decision d;
	char redis_reply[2048];
	size_t len;

	(void)state;
	v[0] = VERDICT(0, 0, 100, 420, 420);
	d = decide(1);
	len = respond_write(&d, redis_reply, sizeof(redis_reply));
	redis_reply[len] = '\0';
	v[0].local = 1;
	d = decide(1);
	assert_int_equal(d.status, 429);
	assert_false(d.allowed);
	assert_int_equal(d.rule_reason[0], RLG_REASON_LOCAL_CACHE);
	assert_string_equal(decision_reason_name(d.rule_reason[0]),
	    "local_cache");
	assert_int_equal(d.retry_after_ms, 420);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_string_equal(out, redis_reply);
	/* The request's other rules were not asked: other_rule, no
	 * numbers to show. In the responder's JSON the reasons show. */
	req.role = RLG_ROLE_RESPONDER;
	memset(&v[1], 0, sizeof(v[1]));
	v[1].skipped = 1;
	d = decide(2);
	assert_int_equal(d.status, 429);
	assert_int_equal(d.rule_reason[1], RLG_REASON_OTHER_RULE);
	assert_int_equal(d.rule_allowed[1], 0);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "\"violated-policies\":[\"user_list\"]"));
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=0;t=1\r\n"));
}

static void
test_responder_json_escapes_key(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	req.role = RLG_ROLE_RESPONDER;
	memcpy(m[0].key, "a\"b\\\n\xff", 6);
	m[0].key_len = 6;
	v[0] = VERDICT(1, 99, 100, 1000, 0);
	conf.deny_status = 403;
	d = decide(1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Content-Type: application/json\r\n"));
	assert_non_null(strstr(out, "\"key\":\"a\\\"b\\\\\\u000a\\u00ff\""));
	assert_non_null(strstr(out, "{\"allowed\":true,\"status\":200,"));
	/* deny_status = 403 for nginx: the problem still says quota. */
	v[0] = VERDICT(0, 0, 100, 420, 420);
	d = decide(1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "Status: 403 Forbidden\r\n"));
	assert_non_null(strstr(out, "quota-exceeded\",\"title\":\"Too Many "
	    "Requests\",\"status\":403"));
}

static void
test_bad_request(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	memset(&d, 0, sizeof(d));
	d.conf = &conf;
	d.req = &req;
	d.bad_rule = &rules[0];
	d.bad_detail = "a field the rate-limit key needs is missing";
	decision_settle(&d);
	assert_int_equal(d.status, 400);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "\"title\":\"Bad Request\",\"status\":400,"
	    "\"detail\":\"a field the rate-limit key needs is missing\","
	    "\"rule\":\"user_list\"}"));
}

/* An override in Redis: headers and body show the parameters it used. */
static void
test_override_parameters_shown(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	v[0] = VERDICT(0, 0, 7, 1500, 1500);
	v[0].window_ms = 2000;
	v[0].override = RLG_OVERRIDE_APPLIED;
	d = decide(1);
	assert_int_equal(d.status, 429);
	assert_int_equal(d.rule_reason[0], RLG_REASON_LIMIT);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "RateLimit-Policy: \"user_list\";q=7;w=2\r\n"));
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=0;t=2\r\n"));
	assert_non_null(strstr(out, "\"detail\":\"user_list allows 7 per 2000 ms; "
	    "retry in 1500 ms\""));
	req.role = RLG_ROLE_RESPONDER;
	v[0] = VERDICT(1, 6, 7, 2000, 0);
	v[0].window_ms = 2000;
	d = decide(1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "\"reason\":\"limit\",\"cost\":1,\"limit\":7,"
	    "\"window_ms\":2000,\"remaining\":6"));
}

/* An unlimited override: allowed, reason unlimited, no policy shown. */
static void
test_override_unlimited(void **state)
{
	struct decision d;
	size_t len;

	(void)state;
	req.role = RLG_ROLE_RESPONDER;
	v[0] = VERDICT(1, 100, 100, 0, 0);
	v[0].override = RLG_OVERRIDE_UNLIMITED;
	v[1] = VERDICT(1, 4000, 5000, 1000, 0);
	d = decide(2);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.rule_reason[0], RLG_REASON_UNLIMITED);
	assert_true(d.rule_allowed[0]);
	assert_string_equal(decision_reason_name(d.rule_reason[0]), "unlimited");
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_non_null(strstr(out, "RateLimit-Policy: \"daily\";q=5000;w=86400\r\n"));
	assert_non_null(strstr(out, "RateLimit: \"daily\";r=4000;t=1\r\n"));
	assert_null(strstr(out, "\"user_list\";"));
	assert_non_null(strstr(out, "\"rule\":\"user_list\",\"key\":\"org1/user/list\","
	    "\"algorithm\":\"fixed_window\",\"allowed\":true,\"reason\":\"unlimited\","
	    "\"cost\":1,\"limit\":null,\"window_ms\":null}"));
	/* Alone: no rate-limit header at all, and none for the authorizer. */
	d = decide(1);
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_null(strstr(out, "RateLimit"));
	req.role = RLG_ROLE_AUTHORIZER;
	len = respond_write(&d, out, sizeof(out));
	out[len] = '\0';
	assert_string_equal(out, "Status: 200 OK\r\n\r\n");
}

static void
test_overflow_is_bounded(void **state)
{
	char small[40];

	(void)state;
	assert_int_equal(respond_json_string(small, 0, sizeof(small),
	    "\x01\x02\x03\x04\x05\x06\x07\x08", 8), sizeof(small));
}

/* write(): the reply for the decision of the first n verdicts. */
static const char *
write_reply(size_t n, struct decision *d)
{
	size_t len;

	*d = decide(n);
	len = respond_write(d, out, sizeof(out));
	out[len] = '\0';
	return out;
}

/*
 * Whole seconds round up, never down, in Retry-After, t= and w=; a denial
 * shows its retry as t, an admission its reset.
 */
static void
test_seconds_round_up(void **state)
{
	static const struct { long long ms; const char *retry, *t; } c[] = {
		{ 1, "Retry-After: 1\r\n", ";r=0;t=1\r\n" },
		{ 999, "Retry-After: 1\r\n", ";r=0;t=1\r\n" },
		{ 1000, "Retry-After: 1\r\n", ";r=0;t=1\r\n" },
		{ 1001, "Retry-After: 2\r\n", ";r=0;t=2\r\n" },
		{ 59999, "Retry-After: 60\r\n", ";r=0;t=60\r\n" },
	};
	struct decision d;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		v[0] = VERDICT(0, 0, 100, 60000, c[i].ms);
		write_reply(1, &d);
		if (strstr(out, c[i].retry) == NULL || strstr(out, c[i].t) == NULL)
			fail_msg("retry %lld ms: %s", c[i].ms, out);
		assert_int_equal(d.retry_after_ms, c[i].ms);
	}
	/* w: the window in whole seconds, up. */
	rules[0].window_ms = 1500;
	v[0] = VERDICT(1, 7, 100, 1, 0);
	req.role = RLG_ROLE_RESPONDER;
	write_reply(1, &d);
	assert_non_null(strstr(out, "RateLimit-Policy: \"user_list\";q=100;w=2\r\n"));
	assert_non_null(strstr(out, "RateLimit: \"user_list\";r=7;t=1\r\n"));
	assert_null(strstr(out, "Retry-After"));
	rules[0].window_ms = 999;
	v[0] = VERDICT(1, 7, 100, 0, 0);
	write_reply(1, &d);
	assert_non_null(strstr(out, "\"user_list\";q=100;w=1\r\n"));
	assert_non_null(strstr(out, "\"user_list\";r=7;t=0\r\n"));
}

/* A denial by a limit is deny_status even where another rule's Redis
 * failed with on_error = deny (503 is for when nothing denied). */
static void
test_denial_before_unavailable(void **state)
{
	struct decision d;

	(void)state;
	rules[1].on_error = RLG_ON_ERROR_DENY;
	v[0] = VERDICT(0, 0, 100, 700, 700);
	write_reply(2, &d);		/* v[1] unanswered */
	assert_int_equal(d.status, 429);
	assert_int_equal(d.retry_after_ms, 700);
	assert_non_null(strstr(out, "Status: 429 Too Many Requests\r\nCache-Control: "
	    "no-store\r\nRetry-After: 1\r\n"));
	assert_int_equal(d.rule_reason[1], RLG_REASON_REDIS_ERROR);
	assert_int_equal(d.rule_allowed[1], 0);
	/* Alone, the failure is 503; with on_error = allow, admitted. */
	v[0] = VERDICT(1, 5, 100, 700, 0);
	write_reply(2, &d);
	assert_int_equal(d.status, 503);
	rules[1].on_error = RLG_ON_ERROR_ALLOW;
	write_reply(2, &d);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.rule_allowed[1], 1);
	/* deny_status 403 (nginx): the same decision, its status. */
	conf.deny_status = 403;
	v[0] = VERDICT(0, 0, 100, 700, 700);
	write_reply(1, &d);
	assert_int_equal(d.status, 403);
	assert_false(d.allowed);
	assert_non_null(strstr(out, "Status: 403 Forbidden\r\n"));
	assert_non_null(strstr(out, "Retry-After: 1\r\n"));
	/* Two denials: the longer wait, whichever rule comes first. */
	v[0] = VERDICT(0, 0, 100, 9000, 9000);
	v[1] = VERDICT(0, 0, 5000, 300, 300);
	write_reply(2, &d);
	assert_int_equal(d.retry_after_ms, 9000);
	assert_non_null(strstr(out, "Retry-After: 9\r\n"));
}

/* headers = none: Retry-After and the body only; legacy: the X- ones. */
static void
test_header_sets(void **state)
{
	static const char none[] = "Status: 429 Too Many Requests\r\n"
	    "Cache-Control: no-store\r\nRetry-After: 3\r\n"
	    "Content-Type: application/problem+json\r\n\r\n";
	struct decision d;

	(void)state;
	conf.headers = RLG_HEADERS_NONE;
	v[0] = VERDICT(0, 0, 100, 2500, 2500);
	write_reply(1, &d);
	assert_int_equal(strncmp(out, none, strlen(none)), 0);
	conf.headers = RLG_HEADERS_LEGACY;
	write_reply(1, &d);
	assert_non_null(strstr(out, "Retry-After: 3\r\nX-RateLimit-Limit: 100\r\n"
	    "X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 3\r\nContent-Type"));
	assert_null(strstr(out, "RateLimit-Policy"));
	assert_null(strstr(out, "RateLimit:"));
	req.role = RLG_ROLE_RESPONDER;
	v[0] = VERDICT(1, 42, 100, 900, 0);
	write_reply(1, &d);
	assert_non_null(strstr(out, "X-RateLimit-Limit: 100\r\n"
	    "X-RateLimit-Remaining: 42\r\nX-RateLimit-Reset: 1\r\n"));
}

/* The one policy the single-valued outputs speak for: a denial first,
 * else the fewest remaining; an unlimited override never. */
static void
test_summary_policy(void **state)
{
	struct respond_summary s;
	struct decision d;

	(void)state;
	v[0] = VERDICT(1, 50, 100, 400, 0);
	v[1] = VERDICT(1, 10, 5000, 86000000, 0);
	d = decide(2);
	assert_int_equal(respond_summary(&d, &s), 0);
	assert_string_equal(s.policy, "daily");
	assert_int_equal(s.limit, 5000);
	assert_int_equal(s.remaining, 10);
	assert_int_equal(s.reset_s, 86000);
	write_reply(2, &d);
	assert_string_equal(out, "Status: 200 OK\r\n"
	    "Variable-RATELIMIT_REMAINING: 10\r\n"
	    "Variable-RATELIMIT_POLICY: daily\r\n\r\n");
	/* user_list denies with more remaining than daily shows. */
	v[0] = VERDICT(0, 3, 100, 400, 400);
	v[1] = VERDICT(1, 0, 5000, 86000000, 0);
	v[1].counted = 0;
	d = decide(2);
	assert_int_equal(respond_summary(&d, &s), 0);
	assert_string_equal(s.policy, "user_list");
	assert_int_equal(s.reset_s, 1);
	/* daily unlimited by an override: user_list speaks. */
	v[0] = VERDICT(1, 99, 100, 400, 0);
	v[1] = VERDICT(1, 0, 5000, 0, 0);
	v[1].override = RLG_OVERRIDE_UNLIMITED;
	d = decide(2);
	assert_int_equal(d.rule_reason[1], RLG_REASON_UNLIMITED);
	assert_int_equal(respond_summary(&d, &s), 0);
	assert_string_equal(s.policy, "user_list");
	/* No rule: nothing to say. */
	d = decide(0);
	assert_int_equal(d.status, 200);
	assert_int_equal(respond_summary(&d, &s), -1);
}

/* The audit's reason names and the status lines are contract. */
static void
test_names(void **state)
{
	static const char *const names[] = { "limit", "unmatched",
	    "redis_error", "dry_run", "bad_request", "local_cache",
	    "unlimited", "other_rule", "local" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_string_equal(decision_reason_name((enum rlg_reason)i),
		    names[i]);
	assert_int_equal(RLG_REASON_LOCAL + 1, sizeof(names) / sizeof(names[0]));
	assert_string_equal(respond_reason_phrase(200), "OK");
	assert_string_equal(respond_reason_phrase(400), "Bad Request");
	assert_string_equal(respond_reason_phrase(403), "Forbidden");
	assert_string_equal(respond_reason_phrase(414), "URI Too Long");
	assert_string_equal(respond_reason_phrase(429), "Too Many Requests");
	assert_string_equal(respond_reason_phrase(431),
	    "Request Header Fields Too Large");
	assert_string_equal(respond_reason_phrase(503), "Service Unavailable");
	assert_string_equal(respond_reason_phrase(420), "Client Error");
	assert_string_equal(respond_reason_phrase(599), "Server Error");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_deny_reply_exact, setup),
		cmocka_unit_test_setup(test_retry_after_rounds_up, setup),
		cmocka_unit_test_setup(test_authorizer_allow_is_status_and_variables, setup),
		cmocka_unit_test_setup(test_two_policies_one_denies, setup),
		cmocka_unit_test_setup(test_every_rule_must_admit, setup),
		cmocka_unit_test_setup(test_redis_error_follows_on_error, setup),
		cmocka_unit_test_setup(test_dry_run_never_denies, setup),
		cmocka_unit_test_setup(test_dry_run_responder_headers, setup),
		cmocka_unit_test_setup(test_global_dry_run, setup),
		cmocka_unit_test_setup(test_local_cache_denies_like_redis, setup),
		cmocka_unit_test_setup(test_responder_json_escapes_key, setup),
		cmocka_unit_test_setup(test_bad_request, setup),
		cmocka_unit_test_setup(test_override_parameters_shown, setup),
		cmocka_unit_test_setup(test_override_unlimited, setup),
		cmocka_unit_test_setup(test_overflow_is_bounded, setup),
		cmocka_unit_test_setup(test_seconds_round_up, setup),
		cmocka_unit_test_setup(test_denial_before_unavailable, setup),
		cmocka_unit_test_setup(test_header_sets, setup),
		cmocka_unit_test_setup(test_summary_policy, setup),
		cmocka_unit_test_setup(test_names, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
