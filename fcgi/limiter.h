/*
 * limiter: a batch of requests in, their final verdicts out. Each
 * request's rules are decided together by one <library>_decide call of the
 * Lua library (lua/), all-or-nothing: a request is counted only when every
 * rule admits it. The batch goes out in one round trip through the Redis
 * layer (redis.h), which alone knows nodes, slots and failover; what Redis
 * cannot answer is settled here too (on_error, local.h, decision.h).
 */
#ifndef RLG_LIMITER_H
#define RLG_LIMITER_H

#include <stddef.h>

#include "conf.h"
#include "decision.h"
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

/*
 * One rule's part in a request's decision. allowed is the rule's own
 * decision on the state it found; counted says whether the request was
 * counted in the rule's state, which happens only when every rule of the
 * request admitted it (a rule that admitted and is not counted was
 * overruled by another: the audit's other_rule).
 */
struct verdict {
	int		 answered;	/* 1: decided (by Redis, or a denial
					 * from the deny cache); 0: Redis
					 * could not decide (see on_error),
					 * or skipped */
	int		 skipped;	/* not asked: another rule's
					 * remembered denial decided the
					 * request without Redis */
	int		 allowed;	/* this rule admits the request */
	int		 counted;	/* the request is counted in this
					 * rule's state (nothing to count
					 * for an unlimited override) */
	long long	 remaining;	/* after the call: a rule that did
					 * not count kept its state */
	long long	 limit;		/* the limit used (the override's,
					 * if any) */
	long long	 reset_ms;
	long long	 retry_after_ms;
	long long	 now_us;	/* Redis TIME */
	long long	 delay_ms;
	int		 local;		/* a denial from the deny cache,
					 * not Redis */
	int		 by_local;	/* decided in memory while Redis
					 * could not answer (on_error =
					 * local, local.h) */
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
struct redis;

/*
 * A limiter whose calls go out on r, the calling loop's Redis connections
 * (redis_new()), which it borrows: r must outlive it, and only r's loop
 * may use either. Returns NULL when out of memory.
 */
struct limiter	*limiter_new(struct redis *r);

/* Frees l (not its struct redis). Accepts NULL. */
void		 limiter_free(struct limiter *l);

/* Counts l's round trips, latency and errors into w (NULL: nowhere). */
void		 limiter_set_metrics(struct limiter *l,
		    struct metrics_worker *w);

/*
 * Decides d[0..nd) (conf c; each with conf, req, m, n and the bad_ fields
 * set) and settles each (decision_settle()): status, allowed and every
 * outcome are final. d[k]->v points to the limiter's verdicts until its next
 * call. 0, or -1 when a rule was left to on_error (limiter_errstr()). One
 * limiter per loop: not thread safe.
 */
int		 limiter_decide(struct limiter *l, const struct conf *c,
		    struct decision *const *d, size_t nd);

/* The last error of l, a sentence ("" when none). */
const char	*limiter_errstr(const struct limiter *l);

#endif
