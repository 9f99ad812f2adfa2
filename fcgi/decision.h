/*
 * decision: one request's verdict, and the policy that settles it from its
 * rules' verdicts (over the limit, dry run, on_error, the deny cache).
 * limiter_decide() is the only caller in the gateway: what it returns is
 * final; respond renders it and audit records it, neither decides. Pure
 * code, no I/O, no allocation.
 */
#ifndef RLG_DECISION_H
#define RLG_DECISION_H

#include <stddef.h>

#include "conf.h"
#include "request.h"
#include "rule.h"

struct verdict;			/* limiter.h */

/* Why a rule's audit row says what it says (the audit "reason" column;
 * decision_reason_name() gives the word). */
enum rlg_reason {
	RLG_REASON_LIMIT,
	RLG_REASON_UNMATCHED,
	RLG_REASON_REDIS_ERROR,
	RLG_REASON_DRY_RUN,
	RLG_REASON_BAD_REQUEST,
	RLG_REASON_LOCAL_CACHE,	/* denied by the deny cache, without Redis */
	RLG_REASON_UNLIMITED,	/* an "unlimited" override: not counted */
	RLG_REASON_OTHER_RULE,	/* this rule would admit (or was not
				 * asked); another denied: not counted */
	RLG_REASON_LOCAL	/* decided in memory on local_share while
				 * Redis could not answer (local.h) */
};

/* One request's decision. The pointers are borrowed, not owned. */
struct decision {
	/* In: */
	const struct conf	*conf;
	const struct request	*req;
	const struct match	*m;	/* m[0..n): the rules it matched */
	size_t			 n;
	/* A bad request: bad_detail says why (always set then), bad_rule
	 * is the rule whose key or cost it lacks (or NULL), bad_status the
	 * status to answer (0: 400). */
	const struct rule	*bad_rule;
	const char		*bad_detail;
	int			 bad_status;
	long long		 latency_us;	/* for the audit row */

	/* Out, from limiter_decide(): */
	const struct verdict	*v;	/* v[0..n), the limiter's: valid
					 * until its next limiter_decide() */
	/* status: 200, deny_status, 503, 400, 414 or 431; retry_after_ms: the
	 * longest wait among the denials; delay_ms: leaky_bucket's wait. */
	int			 status;
	int			 allowed;	/* the request goes through */
	long long		 retry_after_ms;
	long long		 delay_ms;
	int			 rule_allowed[RLG_MAX_MATCHES];
	enum rlg_reason		 rule_reason[RLG_MAX_MATCHES];
};

/*
 * Settles d (conf, m, n, v and the bad_ fields set) into status, allowed,
 * retry_after_ms (the longest denial's), delay_ms (the longest admission's)
 * and each rule's outcome and reason: the one place a verdict is made.
 * Allocates nothing; d is the caller's.
 */
void		 decision_settle(struct decision *d);

/* The audit name of a reason ("redis_error"). */
const char	*decision_reason_name(enum rlg_reason r);

#endif
