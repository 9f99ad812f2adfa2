/*
 * respond: renders a settled decision (decision.h; limiter_decide() settles
 * it) as the reply the web server expects for the request's role: headers
 * (Status first), the IETF or legacy rate-limit headers, and a JSON or
 * problem+json body. It decides nothing. Pure code: it fills the caller's
 * buffers, never does I/O, allocates nothing; thread safe.
 */
#ifndef RLG_RESPOND_H
#define RLG_RESPOND_H

#include <stddef.h>

#include "conf.h"
#include "decision.h"
#include "limiter.h"
#include "request.h"
#include "rule.h"

#define RLG_MAX_RESPONSE	(160 * 1024)

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
