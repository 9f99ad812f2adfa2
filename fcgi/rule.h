/*
 * rule: which rules a request falls under, and the key and cost each one
 * counts it by (the key templates of the configuration, filled in).
 * Pure code: no I/O, no Redis.
 */
#ifndef RLG_RULE_H
#define RLG_RULE_H

#include <stddef.h>

#include "conf.h"
#include "request.h"

#define RLG_MAX_KEY	512	/* bytes of a filled-in key */
#define RLG_MAX_MATCHES	32	/* rules applied to one request */

struct match {
	const struct rule	*rule;
	char			 key[RLG_MAX_KEY];
	size_t			 key_len;
	long long		 cost;
};

/*
 * Fills out[] with the rules of c that apply to r, in file order, at most
 * max of them. A rule whose key needs a part the request lacks is skipped,
 * or, with on_missing = deny, makes the request bad. Returns the number of
 * matches, or -1 for a bad request: *bad is then the rule and *errstr says
 * which field is missing or wrong (the caller answers 400). Thread safe.
 */
int	rule_match(const struct conf *c, const struct request *r,
	    struct match *out, size_t max, const struct rule **bad,
	    const char **errstr);

/* Does rule ru's path, method and host fit r? */
int	rule_fits(const struct rule *ru, const struct request *r);

/*
 * Fills template t for request r into out (outlen bytes, NUL-terminated).
 * Returns the length, -1 when a part is absent from the request, -2 when
 * the result does not fit.
 */
long	rule_expand(const struct tmpl *t, const struct rule *ru,
	    const struct request *r, char *out, size_t outlen);

#endif
