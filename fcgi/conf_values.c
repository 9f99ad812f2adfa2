/*
 * conf_values: the values a configuration holds, checked on their own:
 * whole numbers, durations, the algorithms' names, and each algorithm's
 * parameters (what its Lua script's args() accepts), for conf_keys.c's
 * setters, for netaddr.c, for rlgate-ctl's overrides and for rlgate-report.
 * Declared in conf_values.h; calls nothing of the loader's. The file format is
 * conf_keys.c's, reading it conf.c's.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "conf_values.h"

#define DURATION_USE	"(use 500ms, 1s, 1m, 1h, 1d)"

const struct enum_name conf_algorithms[] = {
	{ "fixed_window", RLG_FIXED_WINDOW, 0 },
	{ "sliding_window", RLG_SLIDING_WINDOW, 0 },
	{ "sliding_log", RLG_SLIDING_LOG, 0 },
	{ "token_bucket", RLG_TOKEN_BUCKET, 0 },
	{ "gcra", RLG_GCRA, 0 },
	{ "leaky_bucket", RLG_LEAKY_BUCKET, 0 },
	{ NULL, 0, 0 }
};

const char *
conf_algorithm_name(enum rlg_algorithm a)
{
	size_t i;

	for (i = 0; conf_algorithms[i].name != NULL; i++)
		if (conf_algorithms[i].value == (int)a)
			return conf_algorithms[i].name;
	return "unknown";
}

int
conf_parse_int(const char *s, long long min, long long max, long long *out,
    const char **errstr)
{
	const char *p = s;
	long long v;

	*errstr = "is not a whole number";
	if (s == NULL)
		return -1;
	if (*p == '-')
		p++;
	if (!ascii_is_digit(*p))
		return -1;
	while (ascii_is_digit(*p))
		p++;
	if (*p != '\0')
		return -1;
	/* Only digits are left, so strtoll's one remaining failure is range. */
	errno = 0;
	v = strtoll(s, NULL, 10);
	if ((errno == ERANGE && v == LLONG_MIN) || v < min) {
		*errstr = "is too small";
		return -1;
	}
	if (errno == ERANGE || v > max) {
		*errstr = "is too large";
		return -1;
	}
	*errstr = NULL;
	*out = v;
	return 0;
}

int
conf_parse_duration(const char *s, long long *out_ms, const char **errstr)
{
	static const struct {
		const char	*unit;
		long long	 ms;
	} units[] = {
		{ "ms", 1 }, { "s", RLG_MS_SECOND }, { "m", RLG_MS_MINUTE },
		{ "h", RLG_MS_HOUR }, { "d", RLG_MS_DAY },
	};
	const char *p = s;
	long long n = 0;
	size_t i;

	*errstr = "is not a duration " DURATION_USE;
	if (s == NULL || !ascii_is_digit(*p))
		return -1;
	for (; ascii_is_digit(*p); p++) {
		if (n > (LLONG_MAX - (*p - '0')) / 10) {
			*errstr = "is too large";
			return -1;
		}
		n = n * 10 + (*p - '0');
	}
	if (*p == '\0') {
		*errstr = "has no unit " DURATION_USE;
		return -1;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].unit) != 0)
			continue;
		if (n > LLONG_MAX / units[i].ms) {
			*errstr = "is too large";
			return -1;
		}
		*out_ms = n * units[i].ms;
		*errstr = NULL;
		return 0;
	}
	return -1;
}

char *
conf_format_duration(long long ms, char *buf, size_t len)
{
	if (ms != 0 && ms % RLG_MS_DAY == 0)
		snprintf(buf, len, "%lldd", ms / RLG_MS_DAY);
	else if (ms != 0 && ms % RLG_MS_HOUR == 0)
		snprintf(buf, len, "%lldh", ms / RLG_MS_HOUR);
	else if (ms != 0 && ms % RLG_MS_MINUTE == 0)
		snprintf(buf, len, "%lldm", ms / RLG_MS_MINUTE);
	else if (ms != 0 && ms % RLG_MS_SECOND == 0)
		snprintf(buf, len, "%llds", ms / RLG_MS_SECOND);
	else
		snprintf(buf, len, "%lldms", ms);
	return buf;
}

/* Each algorithm's spec in lua/<algorithm>.lua, as facts.h carries it. */
#define SPEC(A) \
	{ RLG_##A##_LIMIT_MAX, RLG_##A##_BURST, RLG_##A##_PRECISION }
static const struct spec {
	long long	 limit_max;
	int		 burst;	/* RLG_BURST_NONE, _BUCKET, _QUEUE */
	int		 precision;	/* takes precision_ms */
} specs[RLG_ALGORITHM_COUNT] = {
	[RLG_FIXED_WINDOW] = SPEC(FIXED_WINDOW),
	[RLG_SLIDING_WINDOW] = SPEC(SLIDING_WINDOW),
	[RLG_SLIDING_LOG] = SPEC(SLIDING_LOG),
	[RLG_TOKEN_BUCKET] = SPEC(TOKEN_BUCKET),
	[RLG_GCRA] = SPEC(GCRA),
	[RLG_LEAKY_BUCKET] = SPEC(LEAKY_BUCKET),
};

int
conf_algorithm_has_burst(enum rlg_algorithm a)
{
	return (unsigned)a < RLG_ALGORITHM_COUNT &&
	    specs[a].burst != RLG_BURST_NONE;
}

long long
conf_default_precision(long long window_ms)
{
	long long best = 1, i;

	for (i = 1; i <= window_ms / i; i++) {
		if (window_ms % i != 0)
			continue;
		if (i * RLG_DEFAULT_BLOCKS <= window_ms && i > best)
			best = i;
		if (window_ms / i * RLG_DEFAULT_BLOCKS <= window_ms &&
		    window_ms / i > best)
			best = window_ms / i;
	}
	return best;
}

long long
conf_gcd(long long a, long long b)
{
	while (b != 0) {
		long long t = a % b;

		a = b;
		b = t;
	}
	return a < 0 ? -a : a;
}

const char *
conf_param_name(enum rlg_param p)
{
	static const char *const names[] = {
		[RLG_PARAM_OK] = "",
		[RLG_PARAM_COST] = "cost",
		[RLG_PARAM_LIMIT] = "limit",
		[RLG_PARAM_WINDOW] = "window",
		[RLG_PARAM_BURST] = "burst",
		[RLG_PARAM_PRECISION] = "precision"
	};

	return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "";
}

/* The precision checks of params() for sliding_window (precision_ms, or
 * RLG_PARAM_UNSET: the library's default), into why. */
static enum rlg_param
check_precision(long long window_ms, long long precision_ms, char *why,
    size_t len)
{
	char a[32], b[32], hint[32];

	conf_format_duration(window_ms, b, sizeof(b));
	conf_format_duration(conf_default_precision(window_ms), hint,
	    sizeof(hint));
	if (precision_ms == RLG_PARAM_UNSET &&
	    window_ms % RLG_DEFAULT_BLOCKS != 0) {
		snprintf(why, len, "is not set and the window (%s) is not a "
		    "multiple of %lldms; use a divisor of the window, e.g. %s",
		    b, RLG_DEFAULT_BLOCKS, hint);
		return RLG_PARAM_PRECISION;
	}
	if (precision_ms == RLG_PARAM_UNSET)
		precision_ms = window_ms / RLG_DEFAULT_BLOCKS;
	if (precision_ms < 1) {
		snprintf(why, len, "%lld ms is too small; use a divisor of the "
		    "window, e.g. %s", precision_ms, hint);
		return RLG_PARAM_PRECISION;
	}
	conf_format_duration(precision_ms, a, sizeof(a));
	if (precision_ms > window_ms) {
		snprintf(why, len, "%s is longer than the window (%s); use a "
		    "divisor of the window, e.g. %s", a, b, hint);
		return RLG_PARAM_PRECISION;
	}
	if (window_ms % precision_ms != 0) {
		snprintf(why, len, "the window (%s) is not a whole number of "
		    "blocks of %s; use a divisor of the window, e.g. %s", b, a,
		    hint);
		return RLG_PARAM_PRECISION;
	}
	if (window_ms / precision_ms > RLG_MAX_BLOCKS) {
		snprintf(why, len, "%s makes %lld blocks per window; at most "
		    "%lld are kept (set a coarser precision that divides the "
		    "window)", a, window_ms / precision_ms, RLG_MAX_BLOCKS);
		return RLG_PARAM_PRECISION;
	}
	return RLG_PARAM_OK;
}

/* The burst checks of params() for an algorithm with a burst (sp), cap
 * the burst in use, into why. */
static enum rlg_param
check_burst(enum rlg_algorithm alg, const struct spec *sp, long long limit,
    long long window_ms, long long cap, long long cost, char *why,
    size_t len)
{
	int queue = sp->burst == RLG_BURST_QUEUE;
	long long window_us, scale;
	char b[32], c[48];

	if (cap < (queue ? 0 : 1) || cap > RLG_MAX_COUNT) {
		snprintf(why, len, "%lld is out of range (use %d to %lld)", cap,
		    queue ? 0 : 1, RLG_MAX_COUNT);
		return RLG_PARAM_BURST;
	}
	/* A queue admits any cost when it is empty. */
	if (!queue && cost > cap) {
		snprintf(why, len, "%lld is more than the rule can ever admit "
		    "(burst = %lld), so every request would be denied; lower "
		    "the cost or raise burst", cost, cap);
		return RLG_PARAM_COST;
	}
	/* Time per unit is window/limit, kept as an exact fraction with
	 * denominator limit/gcd: what the state holds, in units of
	 * gcd/window_us, must stay exact. */
	window_us = window_ms * 1000;
	scale = window_us / conf_gcd(limit, window_us);
	if (queue ? (__int128)(cap + cost) * scale < RLG_EXACT_MAX :
	    (__int128)cap * scale < RLG_EXACT)
		return RLG_PARAM_OK;
	if (queue)
		snprintf(c, sizeof(c), " and a cost of %lld", cost);
	else
		c[0] = '\0';
	snprintf(why, len, "%lld per %s cannot be kept exactly by %s with a "
	    "capacity of %lld%s (the time per unit is too fine a fraction: %s "
	    "* window_us / gcd(limit, window_us) must stay below 2^%d); use a "
	    "limit that divides the window in microseconds, e.g. a round "
	    "number", limit, conf_format_duration(window_ms, b, sizeof(b)),
	    conf_algorithm_name(alg), cap, c, queue ? "(burst + cost)" :
	    "burst", queue ? 52 : 53);
	return RLG_PARAM_LIMIT;
}

/*
 * The library keeps exact integer arithmetic in Lua numbers (doubles) and
 * bounds what it stores; it refuses other arguments per request. This is
 * its params(), check for check, on the limits and specs it exports
 * (facts.h): what it refuses is refused here (at load time), and nothing
 * else. The products are exact in __int128; the library's are exact too
 * below 2^53 and round to at least 2^53 above, so the comparisons agree.
 */
enum rlg_param
conf_check_params(enum rlg_algorithm alg, long long limit, long long window_ms,
    long long burst, long long precision_ms, long long cost, char *why,
    size_t len)
{
	const struct spec *sp;
	enum rlg_param p;
	char a[32];

	if ((unsigned)alg >= RLG_ALGORITHM_COUNT) {
		snprintf(why, len, "algorithm %d is unknown", (int)alg);
		return RLG_PARAM_LIMIT;
	}
	sp = &specs[alg];
	if (cost < 1 || cost > RLG_MAX_COUNT) {
		snprintf(why, len, "%lld is out of range (use 1 to %lld)", cost,
		    RLG_MAX_COUNT);
		return RLG_PARAM_COST;
	}
	if (alg == RLG_SLIDING_LOG && limit > sp->limit_max) {
		snprintf(why, len, "%lld is more than sliding_log keeps (one "
		    "entry per admitted unit, at most %lld); use sliding_window "
		    "or gcra for large limits", limit, sp->limit_max);
		return RLG_PARAM_LIMIT;
	}
	if (limit < 1 || limit > sp->limit_max) {
		snprintf(why, len, "%lld is out of range (use 1 to %lld)", limit,
		    sp->limit_max);
		return RLG_PARAM_LIMIT;
	}
	if (window_ms < 1 || window_ms > RLG_MAX_WINDOW_MS) {
		snprintf(why, len, "%lld ms is out of range (use 1ms to %s)",
		    window_ms, conf_format_duration(RLG_MAX_WINDOW_MS, a,
		    sizeof(a)));
		return RLG_PARAM_WINDOW;
	}
	if (sp->precision && (p = check_precision(window_ms, precision_ms,
	    why, len)) != RLG_PARAM_OK)
		return p;
	if (sp->burst != RLG_BURST_NONE)
		return check_burst(alg, sp, limit, window_ms,
		    burst == RLG_PARAM_UNSET ? limit : burst, cost, why, len);
	if (cost > limit) {
		snprintf(why, len, "%lld is more than the rule can ever admit "
		    "(limit = %lld), so every request would be denied; lower "
		    "the cost or raise limit", cost, limit);
		return RLG_PARAM_COST;
	}
	return RLG_PARAM_OK;
}
