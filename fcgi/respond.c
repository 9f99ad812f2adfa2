/*
 * respond: from a settled decision to the bytes the web server reads
 * (CGI-style headers, then the body). Not here: the verdict (decision.c,
 * through limiter_decide()), any I/O (the caller writes the buffer to the
 * FastCGI stream or stdout).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "respond.h"

#define PROBLEM_QUOTA \
	"https://iana.org/assignments/http-problem-types#quota-exceeded"

/* A bounded appender: once it overflows it stays overflowed. */
struct out {
	char	*p;
	size_t	 len;
	size_t	 cap;
};

static void
put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->len >= o->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	o->len = n < 0 || (size_t)n >= o->cap - o->len ? o->cap :
	    o->len + (size_t)n;
}

static void
put_json_str(struct out *o, const char *s, size_t len)
{
	o->len = respond_json_string(o->p, o->len, o->cap, s, len);
}

size_t
respond_json_string(char *out, size_t pos, size_t outlen, const char *s,
    size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	if (pos + 2 > outlen)
		return outlen;
	out[pos++] = '"';
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (pos + 7 > outlen)
			return outlen;
		if (ch == '"' || ch == '\\') {
			out[pos++] = '\\';
			out[pos++] = (char)ch;
		} else if (ch < 0x20 || ch >= 0x7f) {
			memcpy(out + pos, "\\u00", 4);
			out[pos + 4] = hex[ch >> 4];
			out[pos + 5] = hex[ch & 15];
			pos += 6;
		} else
			out[pos++] = (char)ch;
	}
	out[pos++] = '"';
	if (pos < outlen)
		out[pos] = '\0';
	return pos;
}

const char *
respond_reason_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 414: return "URI Too Long";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default:  return status < 500 ? "Client Error" : "Server Error";
	}
}

static long long
ceil_div(long long a, long long b)
{
	return a <= 0 ? 0 : (a + b - 1) / b;
}

/* Does rule i have a limit to show (answered, and not unlimited)? */
static int
limited(const struct decision *d, size_t i)
{
	return d->v[i].answered && d->rule_reason[i] != RLG_REASON_UNLIMITED &&
	    !(d->rule_reason[i] == RLG_REASON_OTHER_RULE &&
	    d->v[i].override == RLG_OVERRIDE_UNLIMITED);
}

/* Did rule i deny the request for being over its limit (here or cached)? */
static int
over_limit(const struct decision *d, size_t i)
{
	return !d->rule_allowed[i] && (d->rule_reason[i] == RLG_REASON_LIMIT ||
	    d->rule_reason[i] == RLG_REASON_LOCAL_CACHE ||
	    d->rule_reason[i] == RLG_REASON_LOCAL);
}

/* The rule whose numbers the single-valued headers show. */
static int
closest(const struct decision *d)
{
	int best = -1;
	size_t i;

	for (i = 0; i < d->n; i++) {
		if (!limited(d, i))
			continue;
		if (over_limit(d, i))
			return (int)i;	/* a denial explains itself first */
		if (best == -1 || d->v[i].remaining < d->v[best].remaining)
			best = (int)i;
	}
	return best;
}

static long long
reset_s(const struct decision *d, size_t i)
{
	const struct verdict *v = &d->v[i];

	return ceil_div(v->allowed ? v->reset_ms : v->retry_after_ms, 1000);
}

int
respond_summary(const struct decision *d, struct respond_summary *s)
{
	int i = closest(d);

	if (i == -1)
		return -1;
	s->policy = d->m[i].rule->name;
	s->limit = d->v[i].limit;
	s->remaining = d->v[i].remaining;
	s->reset_s = reset_s(d, (size_t)i);
	return 0;
}

static void
ratelimit_headers(struct out *o, const struct decision *d)
{
	enum rlg_headers h = d->conf->headers;
	struct respond_summary s;
	const char *sep;
	size_t i;

	if (h == RLG_HEADERS_IETF || h == RLG_HEADERS_BOTH) {
		/* draft-ietf-httpapi-ratelimit-headers: one list item per
		 * policy applied; w is whole seconds. */
		sep = "RateLimit-Policy: ";
		for (i = 0; i < d->n; i++) {
			if (!limited(d, i))
				continue;
			put(o, "%s\"%s\";q=%lld;w=%lld", sep,
			    d->m[i].rule->name, d->v[i].limit,
			    ceil_div(d->v[i].window_ms, 1000));
			sep = ", ";
		}
		if (sep[0] == ',')
			put(o, "\r\n");
		sep = "RateLimit: ";
		for (i = 0; i < d->n; i++) {
			if (!limited(d, i))
				continue;
			put(o, "%s\"%s\";r=%lld;t=%lld", sep,
			    d->m[i].rule->name, d->v[i].remaining,
			    reset_s(d, i));
			sep = ", ";
		}
		if (sep[0] == ',')
			put(o, "\r\n");
	}
	if ((h == RLG_HEADERS_LEGACY || h == RLG_HEADERS_BOTH) &&
	    respond_summary(d, &s) == 0)
		put(o, "X-RateLimit-Limit: %lld\r\n"
		    "X-RateLimit-Remaining: %lld\r\n"
		    "X-RateLimit-Reset: %lld\r\n", s.limit, s.remaining,
		    s.reset_s);
}

static void
problem_body(struct out *o, const struct decision *d)
{
	const char *sep = "";
	size_t i;

	if (d->status == 503 && d->bad_detail == NULL) {
		put(o, "{\"type\":\"about:blank\","
		    "\"title\":\"Service Unavailable\",\"status\":503,"
		    "\"detail\":\"the rate-limit store cannot be reached; "
		    "try again shortly\"}\n");
		return;
	}
	if (d->status != d->conf->deny_status || d->bad_detail != NULL) {
		put(o, "{\"type\":\"about:blank\",\"title\":\"%s\","
		    "\"status\":%d,\"detail\":",
		    respond_reason_phrase(d->status), d->status);
		put_json_str(o, d->bad_detail ? d->bad_detail : "bad request",
		    strlen(d->bad_detail ? d->bad_detail : "bad request"));
		if (d->bad_rule != NULL)
			put(o, ",\"rule\":\"%s\"", d->bad_rule->name);
		put(o, "}\n");
		return;
	}
	put(o, "{\"type\":\"" PROBLEM_QUOTA "\","
	    "\"title\":\"Too Many Requests\",\"status\":%d,\"detail\":\"",
	    d->status);
	for (i = 0; i < d->n; i++) {
		if (!over_limit(d, i))
			continue;
		put(o, "%s%s allows %lld per %lld ms", sep, d->m[i].rule->name,
		    d->v[i].limit, d->v[i].window_ms);
		sep = "; ";
	}
	put(o, "; retry in %lld ms\",\"violated-policies\":[",
	    d->retry_after_ms);
	sep = "";
	for (i = 0; i < d->n; i++) {
		if (!over_limit(d, i))
			continue;
		put(o, "%s\"%s\"", sep, d->m[i].rule->name);
		sep = ",";
	}
	put(o, "],\"retry_after_ms\":%lld}\n", d->retry_after_ms);
}

static void
decision_body(struct out *o, const struct decision *d)
{
	size_t i;

	put(o, "{\"allowed\":%s,\"status\":%d,\"request_id\":\"%s\","
	    "\"client\":", d->allowed ? "true" : "false", d->status,
	    d->req->id);
	put_json_str(o, d->req->ip, strlen(d->req->ip));
	put(o, ",\"delay_ms\":%lld,\"policies\":[", d->delay_ms);
	for (i = 0; i < d->n; i++) {
		const struct rule *ru = d->m[i].rule;
		const struct verdict *v = &d->v[i];

		put(o, "%s{\"rule\":\"%s\",\"key\":", i ? "," : "", ru->name);
		put_json_str(o, d->m[i].key, d->m[i].key_len);
		put(o, ",\"algorithm\":\"%s\",\"allowed\":%s,\"reason\":\"%s\","
		    "\"cost\":%lld", conf_algorithm_name(ru->algorithm),
		    d->rule_allowed[i] ? "true" : "false",
		    decision_reason_name(d->rule_reason[i]), d->m[i].cost);
		if (d->rule_reason[i] == RLG_REASON_UNLIMITED)
			put(o, ",\"limit\":null,\"window_ms\":null");
		else
			put(o, ",\"limit\":%lld,\"window_ms\":%lld",
			    v->limit, v->window_ms);
		if (limited(d, i))
			put(o, ",\"remaining\":%lld,\"reset_ms\":%lld,"
			    "\"retry_after_ms\":%lld,\"delay_ms\":%lld",
			    v->remaining, v->reset_ms, v->retry_after_ms,
			    v->delay_ms);
		put(o, "}");
	}
	put(o, "]}\n");
}

size_t
respond_write(const struct decision *d, char *buf, size_t buflen)
{
	struct out o = { buf, 0, buflen };
	struct respond_summary s;

	/* lighttpd drops every header written before Status: it goes first. */
	put(&o, "Status: %d %s\r\n", d->status,
	    respond_reason_phrase(d->status));
	if (d->req->role == RLG_ROLE_AUTHORIZER && d->allowed) {
		if (respond_summary(d, &s) == 0)
			put(&o, "Variable-RATELIMIT_REMAINING: %lld\r\n"
			    "Variable-RATELIMIT_POLICY: %s\r\n", s.remaining,
			    s.policy);
		if (d->req->apache)
			put(&o, "Variable-RL_CLIENT: %s\r\n", d->req->ip);
		put(&o, "\r\n");
		return o.len;
	}
	put(&o, "Cache-Control: no-store\r\n");
	if (d->status == 503)
		put(&o, "Retry-After: 1\r\n");
	else if (!d->allowed && d->status == d->conf->deny_status)
		put(&o, "Retry-After: %lld\r\n", d->retry_after_ms > 1000 ?
		    ceil_div(d->retry_after_ms, 1000) : 1);
	ratelimit_headers(&o, d);
	if (d->allowed) {
		put(&o, "Content-Type: application/json\r\n\r\n");
		decision_body(&o, d);
	} else {
		put(&o, "Content-Type: application/problem+json\r\n\r\n");
		problem_body(&o, d);
	}
	return o.len;
}
