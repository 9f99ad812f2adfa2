/*
 * verify: replays every key's admitted decisions (allowed = 1, reason =
 * limit: the ones Redis admitted; with strict, also reason = redis_error:
 * the ones on_error = allow admitted while Redis could not decide, which
 * no limit counted) against the promise of its algorithm
 * (DESIGN section 5, the comment block of each lua/ script), using the
 * parameters stored in each row. All databases are merged into one
 * timeline per (rule, key), ordered by ts_ms, then database, then id.
 *
 * ts_ms is Redis TIME truncated to the millisecond, so a decision's true
 * time lies in [ts_ms, ts_ms + 0.999]. A violation is reported only when no
 * choice of true times within those bounds keeps the promise, and always
 * when none does: the slack is exactly what the truncation implies.
 */
#ifndef RLG_REPORT_VERIFY_H
#define RLG_REPORT_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

struct violation {
	const char	*rule;
	const char	*key;
	const char	*algorithm;
	int64_t		 limit;
	int64_t		 window_ms;
	int64_t		 burst;
	const char	*check;		/* "window", "interval", "blocks", "bucket", "spacing", "wait" */
	int64_t		 from_ms;	/* the times involved; their meaning is in detail */
	int64_t		 to_ms;
	int64_t		 admitted;	/* cost admitted there */
	char		 allowed[32];	/* what the promise allows there, as a number */
	int64_t		 decisions;	/* decisions found over the promise in this episode */
	char		 detail[320];	/* one sentence with times and counts */
};

/* One line per (rule, parameters) of the summary. */
struct verify_rule {
	const char	*rule;
	const char	*algorithm;
	int64_t		 limit;
	int64_t		 window_ms;
	int64_t		 burst;
	int64_t		 precision_ms;	/* sliding_window only, else 0 */
	const char	*precision_from; /* "--precision", "denials", "default" */
	int64_t		 keys;
	int64_t		 admitted;	/* decisions replayed */
	int64_t		 violations;
	int64_t		 unchecked;	/* admitted without a count (reason
					 * redis_error) in the time range;
					 * part of admitted when strict */
};

struct verify {
	struct violation	*v;
	size_t			 nv;
	struct verify_rule	*rules;
	size_t			 nrules;
	int64_t			 keys;
	int64_t			 admitted;
	int64_t			 skipped;	/* admitted rows without usable parameters */
	int64_t			 unchecked;	/* the rules' unchecked, summed */
	int			 strict;	/* they were replayed */
	int			 approximate;	/* a fixed_window reconstruction was cut short */
	void			*priv;		/* owns the strings above */
};

/*
 * Verifies the rows matching f's rule and key (all their history), keeping
 * violations that touch [f->since_ms, f->until_ms); precision_ms > 0 forces
 * sliding_window's block, 0 infers it. v zeroed by the caller first. 0 (see
 * v->nv), or -1 with a sentence in err; verify_free() v either way.
 */
int		 verify_run(struct verify *v, struct rdbs *dbs, const struct filter *f,
		    int64_t precision_ms, int strict, char *err, size_t errlen);

void		 verify_free(struct verify *v);

/* The gateway's default sliding_window precision for a window (conf.c). */
int64_t		 verify_default_precision(int64_t window_ms);

#endif
