/*
 * gateway: what the event loops and CGI mode share. The configuration in
 * use (a generation, swapped by a reload while requests finish with the
 * one they started with), the jobs of a batch from params to a settled,
 * recorded decision, and this process's numbers for the status endpoint
 * (status.c serves it). The verdict is limiter_decide()'s; rendering it is
 * the caller's (respond.h).
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

int
gen_install(struct conf *c)
{
	struct generation *g = NULL, *old;

	if (c != NULL && (g = calloc(1, sizeof(*g))) == NULL) {
		conf_free(c);
		return -1;
	}
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
	return 0;
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

/* The jobs of a batch, and their matches: each job's straight after the
 * one before, at most RLG_MAX_MATCHES each. */
struct jobs {
	struct limiter	*lim;
	struct metrics_worker *metrics;
	struct job	*j;
	size_t		 n, cap;
	struct match	*m;
	size_t		 mcap;
	struct decision	**d;		/* the decisions limiter_decide() gets */
};

struct jobs *
jobs_new(struct limiter *lim, struct metrics_worker *w)
{
	struct jobs *b = calloc(1, sizeof(*b));

	if (b != NULL) {
		b->lim = lim;
		b->metrics = w;
	}
	return b;
}

void
jobs_free(struct jobs *b)
{
	if (b == NULL)
		return;
	free(b->j);
	free(b->m);
	free(b->d);
	free(b);
}

struct job *
jobs_add(struct jobs *b)
{
	struct job *j;

	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		struct job *p = realloc(b->j, cap * sizeof(*p));
		struct decision **d;

		if (p == NULL)
			return NULL;
		b->j = p;
		if ((d = realloc(b->d, cap * sizeof(*d))) == NULL)
			return NULL;
		b->d = d;
		b->cap = cap;
	}
	j = &b->j[b->n++];
	j->envp = NULL;
	j->refused = NULL;
	j->refused_status = 0;
	j->owner = NULL;
	return j;
}

struct job *
jobs_list(struct jobs *b, size_t *n)
{
	*n = b->n;
	return b->j;
}

void
jobs_clear(struct jobs *b)
{
	b->n = 0;
}

/* Room for n matches. Returns 0 or -1. */
static int
room_matches(struct jobs *b, size_t n)
{
	size_t cap = b->mcap ? b->mcap : 64;
	struct match *m;

	if (n <= b->mcap)
		return 0;
	while (cap < n)
		cap *= 2;
	if ((m = realloc(b->m, cap * sizeof(*m))) == NULL)
		return -1;
	b->m = m;
	b->mcap = cap;
	return 0;
}

/* Makes j a bad request answered with status (why: a sentence for the
 * reply, the log and its audit row); no rule decides it. */
static void
job_refuse(struct job *j, int status, const char *why)
{
	j->status = 0;
	j->d.bad_status = status;
	j->d.bad_detail = why;
	j->d.bad_rule = NULL;
	j->d.n = 0;
}

/*
 * Reads j's request and, unless it is for c's status endpoint and status
 * is set (j->status), matches it against c's rules into m.
 */
static void
job_begin(struct job *j, const struct conf *c, int status, struct match *m)
{
	const char *errstr = NULL;
	int n = 0;

	memset(&j->d, 0, sizeof(j->d));
	j->start_us = mono_us();
	j->d.conf = c;
	j->d.req = &j->req;
	j->d.m = m;
	j->status = 0;
	j->d.bad_status = request_init(&j->req, j->envp, c, &errstr);
	if (j->d.bad_status != 0)
		j->d.bad_detail = errstr;
	else if (j->refused != NULL)
		;	/* refused below: no rule decides it */
	else if (status && for_status(c, &j->req))
		j->status = 1;
	else if ((n = rule_match(c, &j->req, m, RLG_MAX_MATCHES,
	    &j->d.bad_rule, &errstr)) == -1) {
		j->d.bad_detail = errstr;
		n = 0;
	}
	j->d.n = (size_t)n;
	if (j->refused != NULL)
		job_refuse(j, j->refused_status, j->refused);
	/* [audit] on_full = deny: a request whose row would be lost is not
	 * decided (and not counted in Redis). */
	if (c->audit_on_full == RLG_ON_ERROR_DENY && !j->status &&
	    (j->d.n > 0 || j->d.bad_detail != NULL || c->audit_unmatched) &&
	    audit_full(gateway_audit))
		job_refuse(j, 503, "the audit database cannot keep up "
		    "([audit] on_full = deny); try again shortly");
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
		    "denied", decision_reason_name(d->rule_reason[i]), left);
	}
	log_debug("request %s: %s %s from %s: %d%s%s%s", d->req->id,
	    d->req->method, d->req->path, d->req->ip[0] ? d->req->ip : "-",
	    d->status, d->bad_detail != NULL ? ", bad request: " : "",
	    d->bad_detail != NULL ? d->bad_detail : "",
	    d->n == 0 && d->bad_detail == NULL ? "; no rule" : rules);
}

void
jobs_decide(struct jobs *b, const struct conf *c, int status)
{
	size_t i, nd = 0, total = 0, room;
	struct job *j;

	/* Each rule matches a request once at most. */
	room = c->nrules < RLG_MAX_MATCHES ? c->nrules : RLG_MAX_MATCHES;
	if (room_matches(b, b->n * (room > 0 ? room : 1)) == -1) {
		/* No room to match: each is refused, none is lost. */
		for (i = 0; i < b->n; i++) {
			b->j[i].refused = "out of memory; try again shortly";
			b->j[i].refused_status = 503;
		}
	}
	for (i = 0; i < b->n; i++) {
		j = &b->j[i];
		job_begin(j, c, status, b->m + total);
		if (j->status)
			continue;
		total += j->d.n;
		b->d[nd++] = &j->d;
	}
	if (nd > 0 && limiter_decide(b->lim, c, b->d, nd) == -1)
		log_debug("%s", limiter_errstr(b->lim));
	for (i = 0; i < b->n; i++) {
		j = &b->j[i];
		if (j->status)
			continue;
		j->d.latency_us = mono_us() - j->start_us;
		(void)audit_record(gateway_audit, &j->d);
		if (log_enabled(RLG_LOG_DEBUG))
			log_decision(&j->d);
		metrics_decided(b->metrics, &j->d);
	}
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
