/*
 * agg: per-window throughput. One streaming pass over the decisions of all
 * databases (narrowed by the filter, through the indexes when a rule or a
 * time range is given) counts allowed and denied decisions per series and
 * window, and among the allowed ones those no limit checked (reason
 * redis_error: admitted by on_error = allow, counted nowhere). A series is one rule, or one (rule, key) when by_key is set.
 * Without by_key or a key, in whole seconds, a file of the second layout
 * is read from its per-second summaries (the same counts, no row read).
 */
#ifndef RLG_REPORT_AGG_H
#define RLG_REPORT_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

struct win {
	int64_t		 start_ms;	/* aligned to the report's width */
	int64_t		 allowed;	/* unchecked included */
	int64_t		 denied;
	int64_t		 unchecked;	/* admitted without a count: reason
					 * redis_error, allowed (on_error =
					 * allow) */
};

/* The rule's parameters as stored in its latest row (-1: not stored). */
struct params {
	char		*algorithm;	/* NULL when unknown */
	int64_t		 limit;
	int64_t		 window_ms;
	int64_t		 burst;
};

struct series {
	char		*rule;		/* NULL: requests no rule matched */
	char		*key;		/* NULL: every key of the rule */
	struct params	 params;
	int		 one_key;	/* a key, or a rule with one key: the limit applies as is */
	struct win	*wins;		/* sorted by start_ms, only windows with rows */
	size_t		 nwins;
	int64_t		 allowed;
	int64_t		 denied;
	int64_t		 unchecked;
};

struct agg {
	int64_t		 width_ms;
	int		 by_key;
	struct series	*series;	/* sorted by rule, then key */
	size_t		 nseries;
	int64_t		 rows;		/* decisions counted */
	int64_t		 unchecked;	/* admitted without a count, all series */
	int64_t		 first_ms;	/* earliest and latest ts_ms counted */
	int64_t		 last_ms;
	size_t		 from_counts;	/* databases answered from their
					 * per-second summaries (rlg_counts) */
};

/*
 * Fills a (which the caller zeroes first) from every database. Returns 0,
 * or -1 with one sentence in err. Release with agg_free() either way.
 */
int		 agg_run(struct agg *a, struct rdbs *dbs, const struct filter *f,
		    int64_t width_ms, int by_key, char *err, size_t errlen);

void		 agg_free(struct agg *a);

/* Admitted decisions per second in a window of width_ms. */
double		 agg_per_second(int64_t allowed, int64_t width_ms);

#endif
