/*
 * conf_values: the values a configuration holds, checked on their own:
 * whole numbers (the one bounded parser), durations, the algorithms by
 * name, and each algorithm's parameters (what its Lua script's args()
 * accepts). Pure code below the loader (conf.h, which includes this) and
 * below netaddr: it knows no file, no section and no struct conf.
 */
#ifndef RLG_CONF_VALUES_H
#define RLG_CONF_VALUES_H

#include <stddef.h>

#define RLG_MS_SECOND		1000LL
#define RLG_MS_MINUTE		(60 * RLG_MS_SECOND)
#define RLG_MS_HOUR		(60 * RLG_MS_MINUTE)
#define RLG_MS_DAY		(24 * RLG_MS_HOUR)

enum rlg_algorithm {
	RLG_FIXED_WINDOW,
	RLG_SLIDING_WINDOW,
	RLG_SLIDING_LOG,
	RLG_TOKEN_BUCKET,
	RLG_GCRA,
	RLG_LEAKY_BUCKET,
	RLG_ALGORITHM_COUNT
};

/*
 * What the library in lua/ accepts: its limits (RLG_MAX_COUNT,
 * RLG_MAX_WINDOW_MS, RLG_MAX_BLOCKS, RLG_EXACT, ...), the default precision
 * (RLG_DEFAULT_BLOCKS) and each algorithm's spec, generated from lua/ into
 * facts.h (fcgi/embed.sh -f): written once, there.
 */
#include "facts.h"

#define RLG_PARAM_UNSET		(-1LL)		/* an empty burst or precision */

/* The parameter a refusal of conf_check_params() is about. */
enum rlg_param {
	RLG_PARAM_OK,
	RLG_PARAM_COST,
	RLG_PARAM_LIMIT,
	RLG_PARAM_WINDOW,
	RLG_PARAM_BURST,
	RLG_PARAM_PRECISION
};

/* A word the file accepts for an enum value (conf_keys.c's tables). */
struct enum_name {
	const char	*name;
	int		 value;
	int		 alias;		/* accepted, not suggested */
};

/*
 * The algorithms as the file names them ("token_bucket"), in the order of
 * enum rlg_algorithm, ended by a NULL name: the one table of their names.
 */
extern const struct enum_name conf_algorithms[];

/* Name of an algorithm as written in the file ("token_bucket"). */
const char	*conf_algorithm_name(enum rlg_algorithm a);

/* Does the algorithm take a burst (token_bucket, gcra, leaky_bucket: its
 * spec in lua/ says so)? */
int		 conf_algorithm_has_burst(enum rlg_algorithm a);

/*
 * The one bounded number parser: a decimal integer in [min, max], the whole
 * string. Returns 0 and stores it in *out, or -1 and points *errstr at a
 * static phrase ("is not a number", "is too small", "is too large").
 */
int		 conf_parse_int(const char *s, long long min, long long max,
		    long long *out, const char **errstr);

/*
 * A duration: an integer followed by ms, s, m, h or d ("250ms", "1s").
 * Stores milliseconds in *out_ms. Returns 0, or -1 with *errstr set.
 */
int		 conf_parse_duration(const char *s, long long *out_ms,
		    const char **errstr);

/*
 * ms written in the largest unit that holds it exactly ("1s", "1500ms",
 * "2h"; "0ms"), into buf (len bytes). Returns buf.
 */
char		*conf_format_duration(long long ms, char *buf, size_t len);

/*
 * The sliding_window precision a rule gets when it sets none: the
 * library's, window / RLG_DEFAULT_BLOCKS, when that divides the window,
 * else the largest divisor of the window below it (at least 1 ms), so that
 * the blocks tile the window.
 */
long long	 conf_default_precision(long long window_ms);

/*
 * Would the library accept these arguments for the algorithm? The checks
 * of params() in lua/prelude.lua, in its order, on the limits and spec it
 * exports (facts.h): cost, limit, window_ms, burst and precision_ms
 * (burst and precision_ms RLG_PARAM_UNSET when empty, then the library's
 * default; each ignored by the algorithms that do not take it). Returns
 * RLG_PARAM_OK, or the parameter to blame with a sentence in why (len
 * bytes) saying what is wrong and what would do, naming values
 * as the configuration file writes them (durations as "1s"), without the
 * parameter's name (conf_param_name()).
 */
enum rlg_param	 conf_check_params(enum rlg_algorithm alg, long long limit,
		    long long window_ms, long long burst, long long precision_ms,
		    long long cost, char *why, size_t len);

/* The parameter's key in the file: "cost", "limit", "window", ... */
const char	*conf_param_name(enum rlg_param p);

/* The greatest common divisor of a and b, never negative. */
long long	 conf_gcd(long long a, long long b);

#endif
