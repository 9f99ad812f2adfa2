/*
 * respond: turns the verdicts of the rules a request matched into one
 * decision (status and reason per rule), and writes the reply the web
 * server expects for the request's role: headers (Status first), the IETF
 * or legacy rate-limit headers, and a JSON or problem+json body. Pure
 * code: it fills buffers and never does I/O.
 */
#ifndef RLG_RESPOND_H
#define RLG_RESPOND_H

#include <stddef.h>

#include "conf.h"
#include "limiter.h"
#include "request.h"
#include "rule.h"

#define RLG_MAX_RESPONSE	(160 * 1024)

/* Why a rule's audit row says what it says (the audit "reason" column). */
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
	const struct conf	*conf;
	const struct request	*req;
	const struct match	*m;
	const struct verdict	*v;
	size_t			 n;
	/* A bad request: bad_detail says why (always set then), bad_rule
	 * is the rule whose key or cost it lacks (or NULL). */
	const struct rule	*bad_rule;
	const char		*bad_detail;

	/* Filled in by respond_decide(): */
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
 * Sets d's status, allowed, retry_after_ms, delay_ms and the per-rule
 * outcome from its verdicts: a bad request is 400 (or the status given in
 * bad_status); a rule over its limit denies (deny_status) unless it is in
 * dry run (its own dry_run, or [gateway] dry_run: reason dry_run), and so
 * does a denial the deny cache remembered (reason local_cache); a rule
 * Redis could not decide follows its on_error (deny is 503, not in dry
 * run). A rule that admitted the request is allowed when the request was
 * counted (reason limit, or unlimited when an override in Redis said so),
 * and otherwise not: another rule denied, nothing was counted (allowed 0,
 * reason other_rule, as is a rule the deny cache's denial left unasked).
 * retry_after_ms is the longest of the denials', delay_ms the longest of
 * the admissions' (leaky_bucket). Limits and windows shown in headers and
 * bodies are the verdicts' (an override's when one applied); an unlimited
 * or unasked rule shows none.
 */
void		 respond_decide(struct decision *d, int bad_status);

/*
 * Writes the whole reply for d into out (at most outlen bytes), as CGI
 * headers, a blank line and the body, and returns its length. The shape
 * depends on the role: an allowed AUTHORIZER gets Status 200 and Variable-
 * headers only; everything else gets the rate-limit headers and a body.
 */
size_t		 respond_write(const struct decision *d, char *out,
		    size_t outlen);

/* The words after the status code ("Too Many Requests"). */
const char	*respond_reason_phrase(int status);

/* The audit name of a reason ("redis_error"). */
const char	*respond_reason_name(enum rlg_reason r);

/*
 * The values handed to the protected program (RATELIMIT_* variables in
 * CGI wrapper mode, Variable-RATELIMIT_* for authorizers): the policy that
 * is closest to its limit, or none (returns -1) when no rule applied.
 */
struct respond_summary {
	const char	*policy;	/* rule name */
	long long	 limit;
	long long	 remaining;
	long long	 reset_s;
};
int		 respond_summary(const struct decision *d,
		    struct respond_summary *s);

/*
 * Appends s (len bytes) to out as a JSON string with quotes, escaping
 * what JSON requires and any byte that is not printable ASCII as \u00XX
 * (keys may hold any bytes). Returns the new length, or outlen on overflow.
 */
size_t		 respond_json_string(char *out, size_t pos, size_t outlen,
		    const char *s, size_t len);

#endif
