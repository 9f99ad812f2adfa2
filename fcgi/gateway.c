/*
 * gateway: what the event loops and CGI mode share. The configuration in use
 * (a generation, swapped by a reload while requests finish with the one
 * they started with), a request's decision in two halves around the Redis
 * round trip and the decide step between them, its audit rows, and this
 * process's numbers for the status endpoint (status.c serves it).
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
#include "local.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "respond.h"
#include "rule.h"

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

/*
 * on_error = local: the rules Redis could not decide are decided in this
 * process's memory on [redis] local_share of their limits (local.h), at
 * CLOCK_REALTIME in ms. Only while Redis fails: the next call it answers
 * is Redis's again.
 */
static void
decide_locally(const struct conf *c, struct limiter_request *reqs,
    size_t nreqs)
{
	long long now = wall_ms();
	size_t i, k;

	for (i = 0; i < nreqs; i++)
		for (k = 0; k < reqs[i].n; k++) {
			const struct rule *ru = reqs[i].m[k].rule;
			struct verdict *v = &reqs[i].v[k];
			if (v->answered || v->skipped ||
			    conf_on_error(c, ru) != RLG_ON_ERROR_LOCAL)
				continue;
			local_decide(&reqs[i].m[k], c->local_share_num,
			    c->local_share_den, now, v);
		}
}

void
jobs_decide(struct limiter *lim, const struct conf *c, const struct job *jobs,
    const size_t *first, size_t n, struct match *m, struct verdict *v,
    struct limiter_request *reqs)
{
	size_t i, nreqs = 0;

	/* The matches stay where job_begin() put them, the verdicts beside
	 * them: the limiter sees each request's own. */
	for (i = 0; i < n; i++)
		if (first[i] != RLG_NO_MATCHES && jobs[i].d.n > 0) {
			reqs[nreqs].m = m + first[i];
			reqs[nreqs].n = jobs[i].d.n;
			reqs[nreqs++].v = v + first[i];
		}
	if (nreqs > 0 && limiter_decide(lim, c, reqs, nreqs) == -1)
		decide_locally(c, reqs, nreqs);
}

size_t
job_serve(const struct conf *c, struct limiter *lim, struct job *j,
    struct match *m, struct verdict *v, struct metrics_worker *w, char *out)
{
	struct limiter_request rq;
	size_t first = 0, len;

	jobs_decide(lim, c, j, &first, 1, m, v, &rq);
	len = job_end(j, m, v, w, out);
	/* leaky_bucket: the consumer waits its turn instead of failing. */
	if (j->d.allowed && j->d.delay_ms > 0)
		sleep_ms(j->d.delay_ms);
	return len;
}

void
gateway_numbers(struct metrics_process *p)
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

	gateway_numbers(&p);
	metrics_publish(&p);
}
