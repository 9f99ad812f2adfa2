/*
 * limiter: asks Redis for the decisions of the rules a request matched,
 * all of them in one pipelined round trip of EVALSHA calls to the scripts
 * of lua/. One struct limiter per worker thread (one Redis connection
 * each); a dead Redis is backed off process-wide, not hammered.
 */
#ifndef RLG_LIMITER_H
#define RLG_LIMITER_H

#include <stddef.h>

#include "conf.h"
#include "rule.h"

/*
 * The Redis key of rule ru's state for the filled-in key template value
 * key (keylen bytes, any bytes): <key_prefix>{<rule>:<key>}, one hash tag
 * per rule and key. With override, the key of its override hash instead:
 * the same followed by RLG_OVERRIDE_SUFFIX (the same hash slot). Writes at
 * most outlen bytes and a NUL when there is room; returns the key's
 * length, as snprintf does (outlen or more: cut). RLG_REDIS_KEY_SIZE bytes
 * always hold it: conf bounds every part.
 */
#define RLG_OVERRIDE_SUFFIX	":override"
#define RLG_REDIS_KEY_SIZE	(RLG_MAX_KEY_PREFIX + RLG_MAX_RULE_NAME + \
				 RLG_MAX_KEY + sizeof("{:}" RLG_OVERRIDE_SUFFIX))
size_t		 limiter_key(const struct conf *c, const struct rule *ru,
		    const char *key, size_t keylen, int override, char *out,
		    size_t outlen);

/* What a rule's override in Redis did to a decision (overrides = redis). */
enum rlg_override {
	RLG_OVERRIDE_NONE,	/* none there: the rule's own parameters */
	RLG_OVERRIDE_APPLIED,	/* limit, window_ms, burst: the override's */
	RLG_OVERRIDE_UNLIMITED,	/* admitted, nothing counted */
	RLG_OVERRIDE_IGNORED	/* invalid: the rule's parameters (logged) */
};

/* One rule's decision, as the script returned it. */
struct verdict {
	int		 answered;	/* 0: Redis could not decide
					 * (see on_error) */
	int		 allowed;
	long long	 remaining;
	long long	 limit;		/* the limit used (the override's,
					 * if any) */
	long long	 reset_ms;
	long long	 retry_after_ms;
	long long	 now_us;	/* Redis TIME */
	long long	 delay_ms;
	int		 local;		/* a denial from the deny cache,
					 * not Redis */
	/* The parameters the decision used (with limit above): the rule's,
	 * or its override's when Redis applied one. Always set by
	 * limiter_decide(), also when Redis could not answer. */
	long long	 window_ms;
	long long	 burst;		/* token_bucket, gcra, leaky_bucket;
					 * the limit for the others (as the
					 * audit records it) */
	enum rlg_override override;
};

struct limiter;
struct metrics_worker;
struct redisContext;

/* A limiter with no connection yet. Returns NULL when out of memory. */
struct limiter	*limiter_new(void);

/* Closes the connection and frees l. Accepts NULL. */
void		 limiter_free(struct limiter *l);

/* Counts l's round trips, latency and errors into w (NULL: nowhere). */
void		 limiter_set_metrics(struct limiter *l,
		    struct metrics_worker *w);

/*
 * Decides m[0..n) against Redis as configured in c, filling v[0..n):
 * the matches of one request, or of a batch of them (an event loop's).
 * A match whose rule has deny_cache (and is not in dry run) is first
 * looked up in the process's deny cache: a remembered denial fills its
 * verdict (local = 1) without Redis; denials Redis gives such rules are
 * remembered until their retry_after. The rest go to Redis in one round
 * trip; a rule with overrides = redis passes its override hash
 * (<state key>:override) as KEYS[2] in the same call, and its verdict
 * carries the parameters used. An ignored (invalid) override is logged,
 * at most once per 10 s per process. Connects as needed (again after a
 * reload changed c's Redis address or credentials, or after an outage)
 * and goes straight to EVALSHA: the scripts are loaded, and the calls
 * run again once, only after NOSCRIPT. Never waits
 * longer than c's connect timeout plus its timeout per attempt. Returns 0
 * when every match was answered, -1 when some v[i].answered is 0 (the
 * reason is logged once per outage, not per request). Not thread safe:
 * one limiter per thread.
 */
int		 limiter_decide(struct limiter *l, const struct conf *c,
		    const struct match *m, size_t n, struct verdict *v);

/*
 * Checks that Redis at c's address answers and accepts the scripts.
 * Returns 0, or -1 with a sentence in errbuf. For `rlgate -t` and start-up.
 */
int		 limiter_probe(const struct conf *c, char *errbuf,
		    size_t errlen);

/*
 * Is Redis answering? A PING on l's connection (made as limiter_decide()
 * would, honouring the back-off). Returns 0 with the round trip in
 * *latency_us, or -1 with a sentence in errbuf (a failure counts as an
 * outage, like a failed decision). For the status endpoint. Not thread
 * safe: l's thread only.
 */
int		 limiter_ping(struct limiter *l, const struct conf *c,
		    long long *latency_us, char *errbuf, size_t errlen);

/*
 * A connection to c's Redis as the gateway makes one (timeouts, AUTH,
 * SELECT), without loading the scripts: for rlgate-ctl. Returns a hiredis
 * context the caller frees with redisFree(), or NULL with a sentence in
 * errbuf.
 */
struct redisContext *limiter_connect(const struct conf *c, char *errbuf,
		    size_t errlen);

#endif
