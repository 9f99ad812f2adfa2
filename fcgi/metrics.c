/*
 * metrics: per-worker counters and the texts the status endpoint serves.
 * A worker only ever writes its own counters (relaxed atomic stores, so a
 * scrape on another thread reads whole values); the rule-name registry
 * and the list of workers change only at start and on reload, under one
 * mutex. Nothing here decides or answers a request.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "metrics.h"

/* Redis round-trip histogram bounds, in microseconds (le labels in s). */
static const long long bounds_us[] = {
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
	250000, 500000, 1000000
};
#define NBOUNDS	(sizeof(bounds_us) / sizeof(bounds_us[0]))

static const char *const outcome_names[RLG_OUT_COUNT] = {
	"allowed", "denied", "redis_error", "dry_run", "bad_request",
	"local_cache"
};

struct metrics_worker {
	struct metrics_worker	*next;
	atomic_int		 busy;
	atomic_ullong		 requests;
	atomic_ullong		 redis_errors;
	atomic_ullong		 lat_bucket[NBOUNDS + 1];	/* last: +Inf */
	atomic_ullong		 lat_sum_us;
	atomic_ullong		 lat_count;
	/* [slot][outcome]; slot RLG_METRICS_RULES: no rule (bad requests) */
	atomic_ullong
	    decisions[RLG_METRICS_RULES + 1][RLG_OUT_COUNT];
};

static pthread_mutex_t		 reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_worker	*workers;		/* under reg_lock */
static char			*names[RLG_METRICS_RULES]; /* under reg_lock */
static int			 nnames;		/* under reg_lock */
static int			 full_logged;		/* under reg_lock */

/* The owner's increment: one writer, so no read-modify-write atomics. */
static void
bump(atomic_ullong *x, unsigned long long by)
{
	atomic_store_explicit(x, atomic_load_explicit(x,
	    memory_order_relaxed) + by, memory_order_relaxed);
}

static unsigned long long
get(atomic_ullong *x)
{
	return atomic_load_explicit(x, memory_order_relaxed);
}

struct metrics_worker *
metrics_worker_new(void)
{
	struct metrics_worker *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	pthread_mutex_lock(&reg_lock);
	w->next = workers;
	workers = w;
	pthread_mutex_unlock(&reg_lock);
	return w;
}

void
metrics_worker_free(struct metrics_worker *w)
{
	struct metrics_worker **pp;

	if (w == NULL)
		return;
	pthread_mutex_lock(&reg_lock);
	for (pp = &workers; *pp != NULL; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	free(w);
}

void
metrics_register_rules(struct conf *c)
{
	size_t i;
	int s;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < c->nrules; i++) {
		struct rule *ru = &c->rules[i];

		for (s = 0; s < nnames; s++)
			if (strcmp(names[s], ru->name) == 0)
				break;
		if (s == nnames) {
			if (nnames == RLG_METRICS_RULES ||
			    (names[s] = strdup(ru->name)) == NULL) {
				if (!full_logged)
					log_warn("metrics: more than %d rule "
					    "names seen; rule %s is not "
					    "counted", RLG_METRICS_RULES,
					    ru->name);
				full_logged = 1;
				ru->metrics_slot = -1;
				continue;
			}
			nnames++;
		}
		ru->metrics_slot = s;
	}
	pthread_mutex_unlock(&reg_lock);
}

static void
count(struct metrics_worker *w, const struct rule *ru, enum metrics_outcome o)
{
	int slot = ru == NULL ? RLG_METRICS_RULES : ru->metrics_slot;

	if (slot >= 0)
		bump(&w->decisions[slot][o], 1);
}

void
metrics_decided(struct metrics_worker *w, const struct decision *d)
{
	size_t i;

	if (w == NULL)
		return;
	bump(&w->requests, 1);
	if (d->n == 0) {
		if (d->bad_detail != NULL)
			count(w, d->bad_rule, RLG_OUT_BAD_REQUEST);
		return;
	}
	for (i = 0; i < d->n; i++) {
		enum metrics_outcome o;

		switch (d->rule_reason[i]) {
		case RLG_REASON_REDIS_ERROR:
			o = RLG_OUT_REDIS_ERROR;
			break;
		case RLG_REASON_DRY_RUN:
			o = RLG_OUT_DRY_RUN;
			break;
		case RLG_REASON_LOCAL_CACHE:
			o = RLG_OUT_LOCAL_CACHE;
			break;
		default:
			o = d->rule_allowed[i] ? RLG_OUT_ALLOWED :
			    RLG_OUT_DENIED;
			break;
		}
		count(w, d->m[i].rule, o);
	}
}

void
metrics_busy(struct metrics_worker *w, int busy)
{
	if (w != NULL)
		atomic_store_explicit(&w->busy, busy != 0,
		    memory_order_relaxed);
}

void
metrics_redis_latency(struct metrics_worker *w, long long us)
{
	size_t b;

	if (w == NULL)
		return;
	if (us < 0)
		us = 0;
	for (b = 0; b < NBOUNDS && us > bounds_us[b]; b++)
		;
	bump(&w->lat_bucket[b], 1);
	bump(&w->lat_sum_us, (unsigned long long)us);
	bump(&w->lat_count, 1);
}

void
metrics_redis_error(struct metrics_worker *w)
{
	if (w != NULL)
		bump(&w->redis_errors, 1);
}

static int
metrics_workers_busy(void)
{
	struct metrics_worker *w;
	int n = 0;

	pthread_mutex_lock(&reg_lock);
	for (w = workers; w != NULL; w = w->next)
		n += atomic_load_explicit(&w->busy, memory_order_relaxed);
	pthread_mutex_unlock(&reg_lock);
	return n;
}

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

size_t
metrics_prometheus(const struct metrics_process *p, char *out, size_t outlen)
{
	unsigned long long requests = 0, errors = 0, lat[NBOUNDS + 1] = { 0 };
	unsigned long long sum_us = 0, lat_count = 0, cum, v;
	struct out o = { out, 0, outlen };
	struct metrics_worker *w;
	int busy = 0, s, k;
	size_t b;

	if (outlen > 0)
		out[0] = '\0';
	pthread_mutex_lock(&reg_lock);
	for (w = workers; w != NULL; w = w->next) {
		requests += get(&w->requests);
		errors += get(&w->redis_errors);
		for (b = 0; b <= NBOUNDS; b++)
			lat[b] += get(&w->lat_bucket[b]);
		sum_us += get(&w->lat_sum_us);
		lat_count += get(&w->lat_count);
		busy += atomic_load_explicit(&w->busy, memory_order_relaxed);
	}

	header(&o, "rlgate_decisions_total", "counter",
	    "Rule decisions by rule and outcome (rule=\"\": a bad request no "
	    "rule is named for).");
	for (s = 0; s <= nnames; s++) {
		const char *name = s < nnames ? names[s] : "";
		int slot = s < nnames ? s : RLG_METRICS_RULES;

		for (k = 0; k < RLG_OUT_COUNT; k++) {
			v = 0;
			for (w = workers; w != NULL; w = w->next)
				v += get(&w->decisions[slot][k]);
			/* Bad requests without a rule: once there are some. */
			if (s == nnames && v == 0)
				continue;
			/* Rule names are [A-Za-z0-9_.-]: nothing to escape. */
			put(&o, "rlgate_decisions_total{rule=\"%s\","
			    "outcome=\"%s\"} %llu\n", name, outcome_names[k],
			    v);
		}
	}
	pthread_mutex_unlock(&reg_lock);

	metric(&o, "rlgate_requests_total", "counter",
	    "Requests decided (the status endpoint is not counted).",
	    (long long)requests);
	metric(&o, "rlgate_redis_errors_total", "counter",
	    "Calls to Redis that failed: connect, timeout, error reply.",
	    (long long)errors);
	header(&o, "rlgate_redis_latency_seconds", "histogram",
	    "Round trip of one pipelined decision call to Redis.");
	for (b = 0, cum = 0; b < NBOUNDS; b++) {
		cum += lat[b];
		put(&o, "rlgate_redis_latency_seconds_bucket{le=\"%g\"} %llu\n",
		    (double)bounds_us[b] / 1e6, cum);
	}
	cum += lat[NBOUNDS];
	put(&o, "rlgate_redis_latency_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	put(&o, "rlgate_redis_latency_seconds_sum %.6f\n",
	    (double)sum_us / 1e6);
	put(&o, "rlgate_redis_latency_seconds_count %llu\n", lat_count);

	metric(&o, "rlgate_audit_rows_written_total", "counter",
	    "Audit rows committed to the database.", p->audit_written);
	metric(&o, "rlgate_audit_rows_queued", "gauge",
	    "Audit rows waiting in memory to be written.", p->audit_queued);
	metric(&o, "rlgate_audit_retries_total", "counter",
	    "Audit writes that failed and were retried.", p->audit_retries);
	header(&o, "rlgate_audit_lag_seconds", "gauge",
	    "Age of the oldest audit row waiting to be written.");
	put(&o, "rlgate_audit_lag_seconds %.3f\n",
	    (double)p->audit_lag_ms / 1e3);
	metric(&o, "rlgate_workers_busy", "gauge",
	    "Worker threads serving a request (this scrape included).",
	    (long long)busy);
	metric(&o, "rlgate_workers", "gauge", "Worker threads.",
	    (long long)p->workers);
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
metrics_health_json(const struct metrics_health *h, char *out,
    size_t outlen, int *healthy)
{
	struct out o = { out, 0, outlen };
	int audit_ok = !h->p.audit || h->p.audit_lag_ms <= h->audit_lag_max_ms;
	const char *sep = "";

	*healthy = h->redis_ok && audit_ok;
	put(&o, "{\"status\":\"%s\",\"version\":", *healthy ? "ok" :
	    "unavailable");
	put_str(&o, h->version);
	put(&o, ",\"redis\":{\"reachable\":%s,\"address\":",
	    h->redis_ok ? "true" : "false");
	put_str(&o, h->redis_address);
	if (h->redis_ok)
		put(&o, ",\"latency_ms\":%.3f}",
		    (double)h->redis_latency_us / 1e3);
	else {
		put(&o, ",\"error\":");
		put_str(&o, h->redis_error);
		put(&o, "}");
	}
	put(&o, ",\"audit\":{\"enabled\":%s", h->p.audit ? "true" : "false");
	if (h->p.audit)
		put(&o, ",\"queued\":%lld,\"lag_ms\":%lld,\"written\":%lld,"
		    "\"retries\":%lld,\"lag_max_ms\":%lld", h->p.audit_queued,
		    h->p.audit_lag_ms, h->p.audit_written, h->p.audit_retries,
		    h->audit_lag_max_ms);
	put(&o, "},\"config\":{\"generation\":%lld,\"loaded_at\":",
	    h->p.generation);
	put_time(&o, h->p.loaded_ms);
	put(&o, ",\"loaded_ms\":%lld,\"path\":", h->p.loaded_ms);
	put_str(&o, h->config_path);
	put(&o, ",\"rules\":%zu},\"workers\":{\"busy\":%d,\"total\":%d},"
	    "\"deny_cache\":{\"entries\":%zu},\"problems\":[", h->rules,
	    metrics_workers_busy(), h->p.workers, h->p.deny_cache_entries);
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
