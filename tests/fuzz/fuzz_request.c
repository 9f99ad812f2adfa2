/*
 * fuzz_request: libFuzzer target for the straight request path without
 * I/O: request_init() on fuzzed FastCGI params, rule_match() against a
 * fixed set of rules that use every kind of path, method, host, key and
 * cost, verdicts made up from the input (as Redis could answer them, or
 * not), decision_settle() and respond_write(). An input is
 *
 *   byte 0     which headers setting (ietf, legacy, both, none)
 *   bytes 1-8  one byte per match: answered (bit 0), allowed (bit 1),
 *              remaining, reset and retry-after from the other bits
 *   rest       "NAME=value" params separated by NUL bytes (libfcgi hands
 *              them over as C strings, so a value cannot hold a NUL)
 *
 * Beyond "no crash, no leak, no undefined behaviour", the reply must be
 * one a web server can take as it is: "Status: NNN" first and equal to the
 * decision, header lines "Name: value" with no control byte in the value,
 * only rlgate's own headers and each once (a request cannot inject a
 * header, not even with a CR LF), a blank line, and a body that is one
 * valid JSON value of printable ASCII followed by a newline (none for an
 * allowed authorizer).
 *
 * Build and run: make fuzz (tests/fuzz/corpus/request/ is the seed corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf.h"
#include "limiter.h"
#include "request.h"
#include "respond.h"
#include "rule.h"

#define MAX_ENV		128
#define NVERDICT	8

/* The rules; init() puts a [gateway] section with each headers value first. */
static const char *const rules_ini =
	"[redis]\n"
	"on_error = deny\n"
	"[rule:exact]\n"
	"path = /user/list\n"
	"key = {query.org}{path}\n"
	"limit = 100\n"
	"window = 1s\n"
	"[rule:prefix]\n"
	"path = /api/*\n"
	"method = GET POST\n"
	"key = {ip}:{header.X-Api-Key}\n"
	"cost = {header.X-Cost}\n"
	"algorithm = token_bucket\n"
	"limit = 10\n"
	"window = 1s\n"
	"burst = 20\n"
	"on_missing = deny\n"
	"[rule:regex]\n"
	"path = ~^/user/[0-9]+$\n"
	"host = example.com\n"
	"key = {host}/{method}/{env.REMOTE_USER}\n"
	"algorithm = sliding_window\n"
	"limit = 5\n"
	"window = 10s\n"
	"on_error = allow\n"
	"[rule:leaky]\n"
	"path = /slow/*\n"
	"key = {query.a}-{query.b}\n"
	"algorithm = leaky_bucket\n"
	"limit = 10\n"
	"window = 1s\n"
	"burst = 5\n"
	"[rule:dry]\n"
	"key = {ip}\n"
	"algorithm = gcra\n"
	"limit = 1000\n"
	"window = 1m\n"
	"dry_run = yes\n"
	"[rule:everyone]\n"
	"key = {rule}\n"
	"algorithm = sliding_log\n"
	"limit = 50\n"
	"window = 1h\n";

static struct conf	*confs[4];
static char		*out;

static void
die(const char *what, const char *reply, size_t len)
{
	if (reply != NULL)
		fprintf(stderr, "reply (%zu bytes):\n%.*s\n", len, (int)len,
		    reply);
	fprintf(stderr, "fuzz_request: %s\n", what);
	abort();
}

static void
init(void)
{
	static const char *const headers[4] = { "ietf", "legacy", "both",
	    "none" };
	char path[64], *ini, *errors = NULL;
	int fd, i, n;

	if ((fd = memfd_create("rlgate.ini", 0)) == -1)
		die("memfd_create", NULL, 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	for (i = 0; i < 4; i++) {
		n = asprintf(&ini, "[gateway]\nheaders = %s\n"
		    "trusted_proxies = 127.0.0.1/32 ::1/128 10.0.0.0/8 fd00::/8\n%s",
		    headers[i], rules_ini);
		if (n < 0 || ftruncate(fd, 0) == -1 ||
		    pwrite(fd, ini, (size_t)n, 0) != n)
			die("writing the memfd", NULL, 0);
		if ((confs[i] = conf_load(path, &errors)) == NULL) {
			fputs(errors ? errors : "out of memory\n", stderr);
			die("the fixed configuration does not load", NULL, 0);
		}
		free(ini);
	}
	close(fd);
	if ((out = malloc(RLG_MAX_RESPONSE)) == NULL)
		abort();
}

/* ---- a small JSON syntax checker (RFC 8259 values) ------------------ */

static const char *json_value(const char *p, const char *end, int depth);

static const char *
json_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *
json_string(const char *p, const char *end)
{
	if (p >= end || *p++ != '"')
		return NULL;
	while (p < end && *p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			if (++p >= end)
				return NULL;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (p + i >= end || strchr("0123456789abcdefABCDEF",
					    p[i]) == NULL || p[i] == '\0')
						return NULL;
				p += 4;
			} else if (strchr("\"\\/bfnrt", *p) == NULL || *p == '\0')
				return NULL;
		}
		p++;
	}
	return p < end ? p + 1 : NULL;
}

static const char *
json_number(const char *p, const char *end)
{
	const char *s;

	if (p < end && *p == '-')
		p++;
	s = p;
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	if (p == s || (*s == '0' && p - s > 1))
		return NULL;
	return p;
}

static const char *
json_value(const char *p, const char *end, int depth)
{
	if (depth > 16 || (p = json_ws(p, end)) >= end)
		return NULL;
	switch (*p) {
	case '{':
		p = json_ws(p + 1, end);
		if (p < end && *p == '}')
			return p + 1;
		for (;;) {
			if ((p = json_string(json_ws(p, end), end)) == NULL)
				return NULL;
			if ((p = json_ws(p, end)) >= end || *p++ != ':')
				return NULL;
			if ((p = json_value(p, end, depth + 1)) == NULL)
				return NULL;
			if ((p = json_ws(p, end)) >= end)
				return NULL;
			if (*p == '}')
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	case '[':
		p = json_ws(p + 1, end);
		if (p < end && *p == ']')
			return p + 1;
		for (;;) {
			if ((p = json_value(p, end, depth + 1)) == NULL)
				return NULL;
			if ((p = json_ws(p, end)) >= end)
				return NULL;
			if (*p == ']')
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	case '"':
		return json_string(p, end);
	case 't':
		return end - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
	case 'f':
		return end - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
	case 'n':
		return end - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
	default:
		return json_number(p, end);
	}
}

/* ---- the reply's shape ---------------------------------------------- */

static void
check_reply(const struct decision *d, const char *reply, size_t len)
{
	static const char *const known[] = { "Status", "Cache-Control",
	    "Retry-After", "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit",
	    "X-RateLimit-Remaining", "X-RateLimit-Reset", "Content-Type",
	    "Variable-RATELIMIT_REMAINING", "Variable-RATELIMIT_POLICY",
	    "Variable-RL_CLIENT", NULL };
	int seen[sizeof(known) / sizeof(known[0])] = { 0 };
	const char *p = reply, *end = reply + len, *eol, *colon, *hdr_end;
	char first[64];
	size_t i;
	int n;

	if (len == 0 || len >= RLG_MAX_RESPONSE)
		die("reply empty or as long as the whole buffer", reply, len);
	n = snprintf(first, sizeof(first), "Status: %d %s\r\n", d->status,
	    respond_reason_phrase(d->status));
	if (len < (size_t)n || memcmp(reply, first, (size_t)n) != 0)
		die("the reply does not start with the decision's Status",
		    reply, len);
	if ((hdr_end = memmem(reply, len, "\r\n\r\n", 4)) == NULL)
		die("no blank line after the headers", reply, len);
	hdr_end += 2;
	for (p = reply; p < hdr_end; p = eol + 2) {
		eol = memmem(p, (size_t)(hdr_end - p), "\r\n", 2);
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon == NULL || colon == p || colon + 1 >= eol ||
		    colon[1] != ' ')
			die("a header line is not \"Name: value\"", reply, len);
		for (const char *q = p; q < colon; q++)
			if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789-_", *q) == NULL || *q == '\0')
				die("a header name has a byte a server refuses",
				    reply, len);
		for (const char *q = colon + 2; q < eol; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				die("a header value holds a control byte: a "
				    "request could inject a header", reply, len);
		/* Only rlgate's own headers, each once: a CR LF smuggled in
		 * a value would start a header of the client's choosing. */
		for (i = 0; known[i] != NULL; i++)
			if (strlen(known[i]) == (size_t)(colon - p) &&
			    strncasecmp(known[i], p, (size_t)(colon - p)) == 0)
				break;
		if (known[i] == NULL)
			die("a header rlgate does not write: injected?", reply,
			    len);
		if (seen[i]++)
			die("a header written twice", reply, len);
	}
	p = hdr_end + 2;
	if (d->req->role == RLG_ROLE_AUTHORIZER && d->allowed) {
		if (p != end)
			die("an allowed authorizer reply has a body", reply, len);
		return;
	}
	if (p == end || end[-1] != '\n')
		die("the body does not end in a newline", reply, len);
	for (const char *q = p; q < end - 1; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q >= 0x7f)
			die("the body holds a byte that is not printable ASCII",
			    reply, len);
	if (json_value(p, end - 1, 0) != end - 1)
		die("the body is not one JSON value", reply, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct match m[RLG_MAX_MATCHES];
	struct verdict v[RLG_MAX_MATCHES];
	char *buf, *envp[MAX_ENV + 1];
	const char *errstr = NULL;
	struct decision d;
	struct request r;
	const struct conf *c;
	size_t nenv = 0, len, i;
	int bad_status, n = 0;

	if (confs[0] == NULL)
		init();
	if (size < 1 + NVERDICT || size > 64 * 1024)
		return -1;
	c = confs[data[0] & 3];

	if ((buf = malloc(size - NVERDICT)) == NULL)
		abort();
	memcpy(buf, data + 1 + NVERDICT, size - 1 - NVERDICT);
	buf[size - 1 - NVERDICT] = '\0';
	for (char *s = buf; s < buf + (size - 1 - NVERDICT) && nenv < MAX_ENV;
	    s += strlen(s) + 1)
		if (strchr(s, '=') != NULL)
			envp[nenv++] = s;
	envp[nenv] = NULL;

	/* What main.c's serve() does, with made-up verdicts for Redis. */
	memset(&d, 0, sizeof(d));
	memset(v, 0, sizeof(v));
	d.conf = c;
	d.req = &r;
	d.m = m;
	d.v = v;
	bad_status = request_init(&r, envp, c, &errstr);
	if (bad_status != 0) {
		if (errstr == NULL || (bad_status != 400 && bad_status != 414))
			die("request_init failed without a reason or with an "
			    "odd status", NULL, 0);
		d.bad_detail = errstr;
	} else if ((n = rule_match(c, &r, m, RLG_MAX_MATCHES, &d.bad_rule,
	    &errstr)) == -1) {
		if (errstr == NULL || d.bad_rule == NULL)
			die("rule_match failed without a reason", NULL, 0);
		d.bad_detail = errstr;
		n = 0;
	}
	if (bad_status == 0 && (r.path[0] != '/' || strlen(r.path) >= RLG_MAX_PATH))
		die("the request path is not absolute or too long", NULL, 0);
	for (i = 0; i < (size_t)n; i++) {
		unsigned b = data[1 + i % NVERDICT];
		const struct rule *ru = m[i].rule;

		v[i].answered = b & 1;
		v[i].allowed = (b >> 1) & 1;
		/* Not counted: another rule denied (other_rule); not asked:
		 * the deny cache decided. */
		v[i].counted = v[i].allowed && !(b & 0x80);
		v[i].skipped = !v[i].answered && (b & 0x40);
		/* The rule's parameters, as limiter_decide() sets them. */
		v[i].limit = ru->limit;
		v[i].window_ms = ru->window_ms;
		v[i].burst = conf_capacity(ru, ru->limit);
		v[i].remaining = v[i].allowed ? (long long)(b >> 2) % (ru->limit + 1) : 0;
		v[i].reset_ms = (long long)(b >> 4) * ru->window_ms / 15;
		v[i].retry_after_ms = v[i].allowed ? 0 : (long long)(b >> 3) * 997;
		v[i].delay_ms = ru->algorithm == RLG_LEAKY_BUCKET && v[i].allowed ?
		    (long long)(b >> 5) * 100 : 0;
		v[i].now_us = 1700000000000000LL;
	}
	d.n = (size_t)n;
	d.bad_status = bad_status;
	decision_settle(&d);
	if (d.allowed != (d.status == 200))
		die("allowed and status disagree", NULL, 0);
	len = respond_write(&d, out, RLG_MAX_RESPONSE);
	check_reply(&d, out, len);
	free(buf);
	return 0;
}
