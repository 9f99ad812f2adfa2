/*
 * decision: the policy from rules' verdicts to a request's final answer,
 * in one place. Not here: asking Redis or the local stand-in (limiter.c),
 * the reply's bytes (respond.c), the audit row (audit.c).
 */
#include <string.h>

#include "decision.h"
#include "limiter.h"

const char *
decision_reason_name(enum rlg_reason r)
{
	static const char *names[] = { "limit", "unmatched", "redis_error",
	    "dry_run", "bad_request", "local_cache", "unlimited",
	    "other_rule", "local" };

	return names[r];
}

/*
 * Rule i's outcome from its verdict. Sets *denied when it denies for its
 * limit, *unavailable when Redis could not decide and on_error denies.
 */
static void
settle_rule(struct decision *d, size_t i, int *denied, int *unavailable)
{
	const struct rule *ru = d->m[i].rule;
	const struct verdict *v = &d->v[i];
	int dry = ru->dry_run || d->conf->dry_run;

	d->rule_allowed[i] = 0;
	if (v->skipped) {
		d->rule_reason[i] = RLG_REASON_OTHER_RULE;
	} else if (!v->answered) {
		d->rule_reason[i] = RLG_REASON_REDIS_ERROR;
		d->rule_allowed[i] = conf_on_error(d->conf, ru) !=
		    RLG_ON_ERROR_DENY;
		if (!d->rule_allowed[i] && !dry)
			*unavailable = 1;
	} else if (!v->allowed) {
		d->rule_reason[i] = v->local ? RLG_REASON_LOCAL_CACHE :
		    dry ? RLG_REASON_DRY_RUN : v->by_local ?
		    RLG_REASON_LOCAL : RLG_REASON_LIMIT;
		if (!dry) {
			*denied = 1;
			if (v->retry_after_ms > d->retry_after_ms)
				d->retry_after_ms = v->retry_after_ms;
		}
	} else if (!v->counted) {
		d->rule_reason[i] = RLG_REASON_OTHER_RULE;
	} else {
		d->rule_reason[i] = v->override == RLG_OVERRIDE_UNLIMITED ?
		    RLG_REASON_UNLIMITED : v->by_local ? RLG_REASON_LOCAL :
		    RLG_REASON_LIMIT;
		d->rule_allowed[i] = 1;
		if (v->delay_ms > d->delay_ms)
			d->delay_ms = v->delay_ms;
	}
}

/*
 * A bad request is bad_status (400 when 0); a rule over its limit denies
 * (deny_status) unless in dry run (reason dry_run), as does a remembered
 * denial (reason local_cache); a rule Redis could not decide follows its
 * on_error (deny: 503, never in dry run; local: decided in memory, reason
 * local); a rule that admitted is allowed only when counted (else
 * other_rule).
 */
void
decision_settle(struct decision *d)
{
	int denied = 0, unavailable = 0;
	size_t i;

	d->retry_after_ms = 0;
	d->delay_ms = 0;
	if (d->bad_detail != NULL) {
		d->status = d->bad_status > 0 ? d->bad_status : 400;
		d->allowed = 0;
		return;
	}
	for (i = 0; i < d->n; i++)
		settle_rule(d, i, &denied, &unavailable);
	if (denied)
		d->status = d->conf->deny_status;
	else if (unavailable)
		d->status = 503;
	else
		d->status = 200;
	d->allowed = d->status == 200;
	if (!d->allowed)
		d->delay_ms = 0;
}
