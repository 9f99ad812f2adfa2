/*
 * status: the status endpoint (status.h): who may ask, which page, the
 * numbers each page shows, gathered at the scrape, and the texts
 * themselves. The counters are metrics.c's, this process's numbers
 * gateway.c's, each master's health the Redis layer's; nothing here counts,
 * decides or writes an audit row.
 *
 * It asks the Redis layer itself (redis_health()), not the limiter: the
 * limiter is what a decision asks of Redis and never sees a node, while a
 * health page is about the nodes, one per master, as the Redis layer
 * alone knows them. That is the status module's job and no other's above
 * the Redis layer. The event loops hand it the requests for its path
 * (job_begin() tells them apart); nothing it calls (gateway, metrics, the
 * Redis layer) calls back into it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway.h"
#include "metrics.h"
#include "netaddr.h"
#include "redis.h"
#include "request.h"
#include "respond.h"
#include "status.h"

/* /health answers 503 when the oldest audit row waits longer than this. */
#define RLG_HEALTH_AUDIT_LAG_MS	10000
#define RLG_HEALTH_NODES	64	/* Redis nodes /health lists */

/* A bounded appender that keeps counting what it could not write. */
struct out {
	char	*p;
	size_t	 len;	/* needed so far */
	size_t	 cap;
};

static void put(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->len < o->cap ? o->p + o->len : NULL,
	    o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

static void
header(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One metric with a single integer sample: HELP, TYPE, the value. */
static void
metric(struct out *o, const char *name, const char *type, const char *help,
    long long v)
{
	header(o, name, type, help);
	put(o, "%s %lld\n", name, v);
}

/* A label value: backslash, quote and newline escaped. */
static void
put_label(struct out *o, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			put(o, "\\%c", *s);
		else if (*s == '\n')
			put(o, "\\n");
		else
			put(o, "%c", *s);
	}
}

/* Each master's series: up at this scrape, and the Redis layer's counts. */
static void
node_metrics(struct out *o, const struct redis_health *nodes, int nnodes)
{
	static const struct {
		const char	*name, *type, *help;
	} fam[] = {
		{ "rlgate_redis_node_up", "gauge",
		    "Each Redis master: 1 when it answered a PING at this "
		    "scrape." },
		{ "rlgate_redis_node_errors_total", "counter",
		    "Calls to this node that failed (no answer, refused, not "
		    "sent)." },
		{ "rlgate_redis_node_redirects_total", "counter",
		    "MOVED and ASK redirects this node answered (cluster)." },
		{ "rlgate_redis_node_slot_refreshes_total", "counter",
		    "Slot maps read from this node (cluster)." },
	};
	long long v;
	size_t f;
	int i;

	for (f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		header(o, fam[f].name, fam[f].type, fam[f].help);
		for (i = 0; i < nnodes; i++) {
			const struct redis_health *n = &nodes[i];

			v = f == 0 ? n->ok : f == 1 ? n->errors : f == 2 ?
			    n->redirects : n->refreshes;
			put(o, "%s{node=\"", fam[f].name);
			put_label(o, n->address);
			put(o, "\"} %lld\n", v);
		}
	}
}

size_t
status_prometheus(const struct metrics_process *p,
    const struct redis_health *nodes, int nnodes, char *out, size_t outlen)
{
	struct metrics_counts n;
	unsigned long long cum, v;
	struct out o = { out, 0, outlen };
	int nnames, s, k;
	size_t b;

	if (outlen > 0)
		out[0] = '\0';
	metrics_counts(&n);

	header(&o, "rlgate_decisions_total", "counter",
	    "Rule decisions by rule and outcome (rule=\"\": a bad request no "
	    "rule is named for).");
	nnames = metrics_rules_named();
	for (s = 0; s <= nnames; s++) {
		const char *name = s < nnames ? metrics_rule_name(s) : "";
		int slot = s < nnames ? s : RLG_METRICS_NO_RULE;

		for (k = 0; k < RLG_OUT_COUNT; k++) {
			v = metrics_decisions(slot, (enum metrics_outcome)k);
			/* Bad requests without a rule: once there are some. */
			if (s == nnames && v == 0)
				continue;
			/* Rule names are [A-Za-z0-9_.-]: nothing to escape.
			 * A stored one may lack its NUL: its bytes only. */
			put(&o, "rlgate_decisions_total{rule=\"%.*s\","
			    "outcome=\"%s\"} %llu\n", RLG_MAX_RULE_NAME, name,
			    metrics_outcome_name((enum metrics_outcome)k), v);
		}
	}

	metric(&o, "rlgate_requests_total", "counter",
	    "Requests decided (the status endpoint is not counted).",
	    (long long)n.requests);
	metric(&o, "rlgate_redis_errors_total", "counter",
	    "Calls to Redis that failed: connect, timeout, error reply.",
	    (long long)n.redis_errors);
	metric(&o, "rlgate_redis_replica_timeouts_total", "counter",
	    "Decision calls that counted on a master where fewer than "
	    "[redis] replicas acknowledged in time (WAIT) or were "
	    "connected; their rules followed on_error.",
	    (long long)n.replica_timeouts);
	header(&o, "rlgate_local_decisions_total", "counter",
	    "Rule decisions made in memory on [redis] local_share while "
	    "Redis could not answer (on_error = local).");
	put(&o, "rlgate_local_decisions_total{result=\"allow\"} %llu\n"
	    "rlgate_local_decisions_total{result=\"deny\"} %llu\n",
	    n.local_allowed, n.local_denied);
	header(&o, "rlgate_redis_latency_seconds", "histogram",
	    "Round trip of one pipelined decision call to Redis.");
	for (b = 0, cum = 0; b < RLG_METRICS_BOUNDS; b++) {
		cum += n.latency[b];
		put(&o, "rlgate_redis_latency_seconds_bucket{le=\"%g\"} %llu\n",
		    (double)metrics_bounds_us[b] / 1e6, cum);
	}
	cum += n.latency[RLG_METRICS_BOUNDS];
	put(&o, "rlgate_redis_latency_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	put(&o, "rlgate_redis_latency_seconds_sum %.6f\n",
	    (double)n.latency_sum_us / 1e6);
	put(&o, "rlgate_redis_latency_seconds_count %llu\n", n.latency_count);

	node_metrics(&o, nodes, nnodes);

	metric(&o, "rlgate_audit_rows_written_total", "counter",
	    "Audit rows committed to the database.", p->audit_written);
	metric(&o, "rlgate_audit_rows_queued", "gauge",
	    "Audit rows waiting in memory to be written.", p->audit_queued);
	metric(&o, "rlgate_audit_retries_total", "counter",
	    "Audit writes that failed and were retried.", p->audit_retries);
	metric(&o, "rlgate_audit_rows_lost_total", "counter",
	    "Audit rows lost: the queue was full ([audit] on_full).",
	    p->audit_lost);
	header(&o, "rlgate_audit_lag_seconds", "gauge",
	    "Age of the oldest audit row waiting to be written.");
	put(&o, "rlgate_audit_lag_seconds %.3f\n",
	    (double)p->audit_lag_ms / 1e3);
	metric(&o, "rlgate_workers_busy", "gauge",
	    "Worker threads serving a request (this scrape included).",
	    (long long)metrics_workers_busy());
	metric(&o, "rlgate_workers", "gauge", "Worker threads.",
	    (long long)p->workers);
	metric(&o, "rlgate_processes", "gauge",
	    "Processes serving this socket and configuration, counted here.",
	    (long long)p->processes);
	metric(&o, "rlgate_deny_cache_entries", "gauge",
	    "Denials remembered by the deny cache.",
	    (long long)p->deny_cache_entries);
	metric(&o, "rlgate_config_generation", "gauge",
	    "Configurations loaded since start (1 at start, +1 per reload).",
	    p->generation);
	header(&o, "rlgate_config_loaded_timestamp_seconds", "gauge",
	    "When the configuration in force was loaded.");
	put(&o, "rlgate_config_loaded_timestamp_seconds %.3f\n",
	    (double)p->loaded_ms / 1e3);
	return o.len;
}

/* s as a JSON string (the inputs are paths, addresses and messages). */
static void
put_str(struct out *o, const char *s)
{
	size_t at = o->len < o->cap ? o->len : o->cap;
	size_t end;

	if (s == NULL) {
		put(o, "null");
		return;
	}
	end = respond_json_string(o->p, at, o->cap, s, strlen(s));
	/* Cut: count it as if written so the caller sees the overflow. */
	o->len = end >= o->cap ? o->cap + strlen(s) + 2 : end;
}

static void
put_time(struct out *o, long long ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	put(o, "\"%s.%03lldZ\"", buf, ms % 1000);
}

size_t
status_health_json(const struct status_health *h, char *out,
    size_t outlen, int *healthy)
{
	struct out o = { out, 0, outlen };
	int audit_ok = !h->p.audit || h->p.audit_lag_ms <= h->audit_lag_max_ms;
	const char *sep = "";
	int i;

	*healthy = h->redis_ok && audit_ok;
	put(&o, "{\"status\":\"%s\",\"version\":", *healthy ? "ok" :
	    "unavailable");
	put_str(&o, h->version);
	put(&o, ",\"redis\":{\"reachable\":%s,\"address\":",
	    h->redis_ok ? "true" : "false");
	put_str(&o, h->redis_address);
	if (h->redis_ok)
		put(&o, ",\"latency_ms\":%.3f",
		    (double)h->redis_latency_us / 1e3);
	else {
		put(&o, ",\"error\":");
		put_str(&o, h->redis_error);
	}
	put(&o, ",\"nodes\":[");
	for (i = 0; i < h->nnodes; i++) {
		const struct redis_health *n = &h->nodes[i];

		put(&o, "%s{\"address\":", i ? "," : "");
		put_str(&o, n->address);
		put(&o, ",\"role\":");
		put_str(&o, n->role);
		put(&o, ",\"reachable\":%s", n->ok ? "true" : "false");
		if (n->ok)
			put(&o, ",\"latency_ms\":%.3f}",
			    (double)n->latency_us / 1e3);
		else {
			put(&o, ",\"error\":");
			put_str(&o, n->errstr);
			put(&o, "}");
		}
	}
	put(&o, "]}");
	put(&o, ",\"audit\":{\"enabled\":%s", h->p.audit ? "true" : "false");
	if (h->p.audit)
		put(&o, ",\"queued\":%lld,\"lag_ms\":%lld,\"written\":%lld,"
		    "\"retries\":%lld,\"lost\":%lld,\"lag_max_ms\":%lld",
		    h->p.audit_queued, h->p.audit_lag_ms, h->p.audit_written,
		    h->p.audit_retries, h->p.audit_lost, h->audit_lag_max_ms);
	put(&o, "},\"config\":{\"generation\":%lld,\"loaded_at\":",
	    h->p.generation);
	put_time(&o, h->p.loaded_ms);
	put(&o, ",\"loaded_ms\":%lld,\"path\":", h->p.loaded_ms);
	put_str(&o, h->config_path);
	put(&o, ",\"rules\":%zu},\"processes\":%d,\"workers\":{\"busy\":%d,"
	    "\"total\":%d},\"deny_cache\":{\"entries\":%zu},\"problems\":[",
	    h->rules, h->p.processes, metrics_workers_busy(), h->p.workers,
	    h->p.deny_cache_entries);
	if (!h->redis_ok) {
		put(&o, "\"redis does not answer\"");
		sep = ",";
	}
	if (!audit_ok)
		put(&o, "%s\"the audit database is %lld ms behind\"", sep,
		    h->p.audit_lag_ms);
	put(&o, "]}\n");
	return o.len < outlen ? o.len : outlen;
}

/* The numbers of every process sharing the counters, this one's fresh. */
static void
process_numbers(struct metrics_process *p)
{
	gateway_numbers(p);
	metrics_publish(p);
	metrics_total(p);
}

/* Room for n bytes in p. */
static int
page_room(struct page *p, size_t n)
{
	char *bigger;

	if (n <= p->cap)
		return 0;
	if ((bigger = realloc(p->buf, n + 4096)) == NULL)
		return -1;
	p->buf = bigger;
	p->cap = n + 4096;
	return 0;
}

/*
 * Puts the headers of a status page in front of its body, which is
 * body_len bytes at p->buf + PAGE_HEAD. Returns the reply's length.
 */
#define PAGE_HEAD	128
static size_t
page_reply(struct page *p, int status, const char *type, size_t body_len)
{
	char head[PAGE_HEAD];
	int n;

	n = snprintf(head, sizeof(head), "Status: %d %s\r\nContent-Type: %s\r\n"
	    "Cache-Control: no-store\r\n\r\n", status,
	    respond_reason_phrase(status), type);
	if (n < 0 || n >= (int)sizeof(head))	/* our own short strings */
		abort();
	memmove(p->buf + n, p->buf + PAGE_HEAD, body_len);
	memcpy(p->buf, head, (size_t)n);
	return (size_t)n + body_len;
}

/*
 * For status_allow clients when the web server maps the path to rlgate as
 * a responder; asked as an authorizer about such a path (lighttpd asks its
 * "/" authorizer before it runs the responder), it says "go on" with no
 * decision and no audit row: a scrape is never rate-limited.
 */
size_t
status_page(const struct conf *c, const struct request *req,
    struct redis *r, struct page *p)
{
	static const char go_on[] = "Status: 200 OK\r\n\r\n";
	const char *sub = req->path + strlen(c->status_path);
	struct redis_health nodes[RLG_HEALTH_NODES];
	struct status_health h;
	unsigned char addr[16];
	char ip[INET6_ADDRSTRLEN], err[256], *body;
	size_t len, room;
	int family, healthy, i;

	if (page_room(p, PAGE_HEAD + 4096) == -1)
		return 0;
	if (req->role == RLG_ROLE_AUTHORIZER) {
		memcpy(p->buf, go_on, sizeof(go_on) - 1);
		return sizeof(go_on) - 1;
	}
	body = p->buf + PAGE_HEAD;
	room = p->cap - PAGE_HEAD;
	family = request_parse_ip(req->ip, strlen(req->ip), addr, ip);
	if (family == -1 || !netaddr_in_cidrs(c->status_allow,
	    c->nstatus_allow, family, addr)) {
		len = (size_t)snprintf(body, room, "{\"type\":"
		    "\"about:blank\",\"title\":\"Forbidden\",\"status\":403,"
		    "\"detail\":\"the status endpoint answers only the "
		    "addresses in [gateway] status_allow\"}\n");
		return page_reply(p, 403, "application/problem+json", len);
	}
	if (strcmp(sub, "/metrics") == 0) {
		struct metrics_process mp;
		int n;

		process_numbers(&mp);
		/* Each master, PINGed now, with the Redis layer's counts. */
		n = redis_health(r, c, nodes, RLG_HEALTH_NODES, err,
		    sizeof(err));
		if (n < 0)
			n = 0;
		else if (n > RLG_HEALTH_NODES)
			n = RLG_HEALTH_NODES;
		while ((len = status_prometheus(&mp, nodes, n, p->buf +
		    PAGE_HEAD, p->cap - PAGE_HEAD)) >= p->cap - PAGE_HEAD)
			if (page_room(p, PAGE_HEAD + len + 1) == -1) {
				len = p->cap - PAGE_HEAD - 1;
				break;
			}
		return page_reply(p, 200,
		    "text/plain; version=0.0.4; charset=utf-8", len);
	}
	if (strcmp(sub, "/health") == 0) {
		memset(&h, 0, sizeof(h));
		h.version = RLG_VERSION;
		h.redis_address = c->redis_address;
		/* Every master answers, or Redis is not healthy: the keys
		 * of a silent one's slots are not decided. */
		h.nnodes = redis_health(r, c, nodes, RLG_HEALTH_NODES, err,
		    sizeof(err));
		if (h.nnodes < 0)
			h.nnodes = 0;
		else
			err[0] = '\0';
		h.redis_ok = h.nnodes > 0;
		h.redis_error = err;
		if (h.nnodes > RLG_HEALTH_NODES)
			h.nnodes = RLG_HEALTH_NODES;
		h.nodes = nodes;
		for (i = 0; i < h.nnodes; i++) {
			if (!nodes[i].ok && h.redis_ok) {
				h.redis_ok = 0;
				h.redis_error = nodes[i].errstr;
			}
			if (nodes[i].latency_us > h.redis_latency_us)
				h.redis_latency_us = nodes[i].latency_us;
		}
		process_numbers(&h.p);
		h.config_path = c->path;
		h.rules = c->nrules;
		h.audit_lag_max_ms = RLG_HEALTH_AUDIT_LAG_MS;
		len = status_health_json(&h, body, room, &healthy);
		return page_reply(p, healthy ? 200 : 503, "application/json",
		    len);
	}
	len = (size_t)snprintf(body, room, "{\"type\":"
	    "\"about:blank\",\"title\":\"Not Found\",\"status\":404,"
	    "\"detail\":\"try %s/health or %s/metrics\"}\n",
	    c->status_path, c->status_path);
	return page_reply(p, 404, "application/problem+json", len);
}

