/*
 * gateway: what the event loops and CGI mode share. The configuration in use
 * (a generation, swapped by a reload while requests finish with the one
 * they started with), a request's decision in two halves around the Redis
 * round trip, its audit rows, and the status endpoint.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "clock.h"
#include "conf.h"
#include "denycache.h"
#include "gateway.h"
#include "limiter.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "request.h"
#include "respond.h"
#include "rule.h"

/* /health answers 503 when the oldest audit row waits longer than this. */
#define RLG_HEALTH_AUDIT_LAG_MS	10000
#define RLG_HEALTH_NODES	64	/* Redis nodes /health lists */

static pthread_mutex_t	 gen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct generation *current;
static long long	 generations;	/* under gen_lock */
int			 gateway_threads;
struct audit		*gateway_audit;

struct generation *
gen_acquire(void)
{
	struct generation *g;

	pthread_mutex_lock(&gen_lock);
	g = current;
	g->refs++;
	pthread_mutex_unlock(&gen_lock);
	return g;
}

void
gen_release(struct generation *g)
{
	int last;

	pthread_mutex_lock(&gen_lock);
	last = --g->refs == 0;
	pthread_mutex_unlock(&gen_lock);
	if (last) {
		conf_free(g->conf);
		free(g);
	}
}

void
gen_install(struct conf *c)
{
	struct generation *g = NULL, *old;

	if (c != NULL && (g = calloc(1, sizeof(*g))) == NULL)
		fatal("out of memory");
	if (g != NULL) {
		g->conf = c;
		g->refs = 1;
		g->loaded_ms = wall_ms();
	}
	pthread_mutex_lock(&gen_lock);
	if (g != NULL)
		g->number = ++generations;
	old = current;
	current = g;
	pthread_mutex_unlock(&gen_lock);
	if (old != NULL)
		gen_release(old);
	if (g != NULL)
		gateway_publish();
}

/* Writes the audit rows of one decided request. */
static void
record(const struct decision *d, long long latency_us)
{
	struct audit_row row;
	long long ts_ms;
	size_t i;

	if (gateway_audit == NULL)
		return;
	memset(&row, 0, sizeof(row));
	row.request_id = d->req->id;
	row.method = d->req->method;
	row.path = d->req->path;
	row.client_ip = d->req->ip;
	row.status = d->status;
	row.latency_us = latency_us;
	row.ts_ms = ts_ms = wall_ms();
	row.cost = row.limit_value = row.window_ms = row.burst = -1;
	row.remaining = row.retry_after_ms = row.delay_ms = -1;

	if (d->n == 0) {
		if (d->bad_detail == NULL &&
		    !d->conf->audit_unmatched)
			return;
		row.rule = d->bad_rule ? d->bad_rule->name : NULL;
		row.allowed = d->allowed;
		row.reason = respond_reason_name(d->bad_detail ?
		    RLG_REASON_BAD_REQUEST : RLG_REASON_UNMATCHED);
		audit_push(gateway_audit, &row);
		return;
	}
	for (i = 0; i < d->n; i++) {
		const struct rule *ru = d->m[i].rule;
		const struct verdict *v = &d->v[i];

		row.rule = ru->name;
		row.key = d->m[i].key;
		row.algorithm = conf_algorithm_name(ru->algorithm);
		row.allowed = d->rule_allowed[i];
		row.reason = respond_reason_name(d->rule_reason[i]);
		row.cost = d->m[i].cost;
		/* The parameters the decision used: the rule's, or its
		 * override's in Redis (overrides = redis). */
		row.limit_value = v->limit;
		row.window_ms = v->window_ms;
		row.burst = v->burst;
		row.ts_ms = ts_ms;
		row.remaining = row.retry_after_ms = row.delay_ms = -1;
		if (v->answered) {
			/* Redis TIME: the clock every gateway shares. */
			row.ts_ms = v->now_us / 1000;
			row.remaining = v->remaining;
			row.retry_after_ms = v->retry_after_ms;
			row.delay_ms = v->delay_ms;
		}
		/* Unlimited: no limit applied, nothing was counted. */
		if (v->answered && v->override == RLG_OVERRIDE_UNLIMITED)
			row.limit_value = row.window_ms = row.burst =
			    row.remaining = -1;
		audit_push(gateway_audit, &row);
	}
}

/* Is r's path c's status path, or under it? */
static int
for_status(const struct conf *c, const struct request *r)
{
	size_t n;

	if (c->status_path == NULL)
		return 0;
	n = strlen(c->status_path);
	return strncmp(r->path, c->status_path, n) == 0 &&
	    (r->path[n] == '\0' || r->path[n] == '/');
}

void
job_begin(struct job *j, const struct conf *c, char **envp, int status,
    struct match *m)
{
	const char *errstr = NULL;
	int n = 0;

	memset(&j->d, 0, sizeof(j->d));
	j->start_us = mono_us();
	j->d.conf = c;
	j->d.req = &j->req;
	j->status = 0;
	j->bad_status = request_init(&j->req, envp, c, &errstr);
	if (j->bad_status != 0)
		j->d.bad_detail = errstr;
	else if (status && for_status(c, &j->req))
		j->status = 1;
	else if ((n = rule_match(c, &j->req, m, RLG_MAX_MATCHES,
	    &j->d.bad_rule, &errstr)) == -1) {
		j->d.bad_detail = errstr;
		n = 0;
	}
	j->d.n = (size_t)n;
	/* [audit] on_full = deny: a request whose row would be lost is not
	 * decided (and not counted in Redis). */
	if (c->audit_on_full == RLG_ON_ERROR_DENY && !j->status &&
	    (n > 0 || j->d.bad_detail != NULL || c->audit_unmatched) &&
	    audit_full(gateway_audit))
		job_refuse(j, 503, "the audit database cannot keep up "
		    "([audit] on_full = deny); try again shortly");
}

void
job_refuse(struct job *j, int status, const char *why)
{
	j->status = 0;
	j->bad_status = status;
	j->d.bad_detail = why;
	j->d.bad_rule = NULL;
	j->d.n = 0;
}

/* log_level = debug: a line per decided request, as its audit rows say. */
static void
log_decision(const struct decision *d)
{
	char rules[1024], left[40];
	size_t i, len = 0;

	rules[0] = '\0';
	for (i = 0; i < d->n && len < sizeof(rules); i++) {
		const struct match *m = &d->m[i];

		left[0] = '\0';
		if (d->v[i].answered)
			snprintf(left, sizeof(left), ", remaining %lld",
			    d->v[i].remaining);
		len += (size_t)snprintf(rules + len, sizeof(rules) - len,
		    "; rule %s key %.*s: %s (%s)%s", m->rule->name,
		    (int)m->key_len, m->key, d->rule_allowed[i] ? "allowed" :
		    "denied", respond_reason_name(d->rule_reason[i]), left);
	}
	log_debug("request %s: %s %s from %s: %d%s%s%s", d->req->id,
	    d->req->method, d->req->path, d->req->ip[0] ? d->req->ip : "-",
	    d->status, d->bad_detail != NULL ? ", bad request: " : "",
	    d->bad_detail != NULL ? d->bad_detail : "",
	    d->n == 0 && d->bad_detail == NULL ? "; no rule" : rules);
}

size_t
job_end(struct job *j, const struct match *m, const struct verdict *v,
    struct metrics_worker *w, char *out)
{
	size_t len;

	j->d.m = m;
	j->d.v = v;
	respond_decide(&j->d, j->bad_status);
	len = respond_write(&j->d, out, RLG_MAX_RESPONSE);
	record(&j->d, mono_us() - j->start_us);
	if (log_enabled(RLG_LOG_DEBUG))
		log_decision(&j->d);
	metrics_decided(w, &j->d);
	return len;
}

size_t
job_serve(const struct conf *c, struct limiter *lim, struct job *j,
    struct match *m, struct verdict *v, struct metrics_worker *w, char *out)
{
	struct limiter_request rq = { m, j->d.n, v };
	size_t len;

	if (j->d.n > 0)
		limiter_decide(lim, c, &rq, 1);
	len = job_end(j, m, v, w, out);
	/* leaky_bucket: the consumer waits its turn instead of failing. */
	if (j->d.allowed && j->d.delay_ms > 0)
		sleep_ms(j->d.delay_ms);
	return len;
}

/* What the status pages show besides the counters, for this process. */
static void
own_numbers(struct metrics_process *p)
{
	struct audit_stats st;
	long long now = wall_ms();

	memset(p, 0, sizeof(*p));
	p->workers = gateway_threads;
	p->audit = gateway_audit != NULL;
	audit_stats(gateway_audit, &st);
	p->audit_written = st.written;
	p->audit_queued = st.queued;
	p->audit_retries = st.failures;
	p->audit_lost = st.lost;
	/* Rows carry Redis TIME: a little clock skew is not lag. */
	if (st.queued > 0 && st.oldest_ts_ms > 0 && now > st.oldest_ts_ms)
		p->audit_lag_ms = now - st.oldest_ts_ms;
	pthread_mutex_lock(&gen_lock);
	if (current != NULL) {
		p->generation = current->number;
		p->loaded_ms = current->loaded_ms;
	}
	pthread_mutex_unlock(&gen_lock);
	p->deny_cache_entries = denycache_size();
}

void
gateway_publish(void)
{
	struct metrics_process p;

	own_numbers(&p);
	metrics_publish(&p);
}

/* The numbers of every process sharing the counters, this one's fresh. */
static void
process_numbers(struct metrics_process *p)
{
	own_numbers(p);
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
 * The status endpoint: <status_path>/health and <status_path>/metrics for
 * status_allow clients, when the web server maps the path to rlgate as a
 * responder. Asked as an authorizer about such a path (lighttpd asks its
 * "/" authorizer before it runs the responder), rlgate says "go on" with
 * no decision and no audit row: a scrape is never rate-limited. Returns
 * the length of the reply it wrote into p (0 when out of memory).
 */
size_t
status_page(const struct conf *c, const struct job *j, struct limiter *l,
    struct page *p)
{
	static const char go_on[] = "Status: 200 OK\r\n\r\n";
	const struct request *req = &j->req;
	const char *sub = req->path + strlen(c->status_path);
	struct redis_health nodes[RLG_HEALTH_NODES];
	struct metrics_health h;
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
		n = limiter_health(l, c, nodes, RLG_HEALTH_NODES, err,
		    sizeof(err));
		mp.nodes = nodes;
		mp.nnodes = n < 0 ? 0 : n > RLG_HEALTH_NODES ?
		    RLG_HEALTH_NODES : n;
		while ((len = metrics_prometheus(&mp, p->buf + PAGE_HEAD,
		    p->cap - PAGE_HEAD)) >= p->cap - PAGE_HEAD)
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
		h.nnodes = limiter_health(l, c, nodes, RLG_HEALTH_NODES, err,
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
		len = metrics_health_json(&h, body, room, &healthy);
		return page_reply(p, healthy ? 200 : 503, "application/json",
		    len);
	}
	len = (size_t)snprintf(body, room, "{\"type\":"
	    "\"about:blank\",\"title\":\"Not Found\",\"status\":404,"
	    "\"detail\":\"try %s/health or %s/metrics\"}\n",
	    c->status_path, c->status_path);
	return page_reply(p, 404, "application/problem+json", len);
}

