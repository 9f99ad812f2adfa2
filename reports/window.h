/*
 * window: the report's time arithmetic. Windows are aligned to multiples of
 * their width counted from the Unix epoch (UTC); times are milliseconds since
 * the epoch and print as "YYYY-MM-DD HH:MM:SS.mmm". Pure functions, no state.
 */
#ifndef RLG_REPORT_WINDOW_H
#define RLG_REPORT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#define RLG_TIME_LEN	32	/* room for any formatted time, with the NUL */

/* Start of the window of width width_ms (> 0) that holds ts_ms (floor). */
int64_t		 window_start(int64_t ts_ms, int64_t width_ms);

/* Writes ms as "YYYY-MM-DD HH:MM:SS.mmm" (UTC) into buf; returns buf. */
char		*window_format_time(int64_t ms, char buf[RLG_TIME_LEN]);

/*
 * Parses a point in time: "YYYY-MM-DD[ HH[:MM[:SS[.mmm]]]]" (UTC),
 * "YYYY-MM-DD", or milliseconds since the epoch. Returns 0 and *out_ms, or
 * -1 with *errstr a static phrase that completes "... is not a time (...)".
 */
int		 window_parse_time(const char *s, int64_t *out_ms, const char **errstr);

/*
 * Writes a duration in the units of the configuration file ("250ms",
 * "1s", "1m", "90s", "1h", "1d"): the largest unit that divides it.
 */
char		*window_format_duration(int64_t ms, char *buf, size_t len);

/*
 * A "nice" step for a time axis: the smallest of 1, 2, 5, 10, 20, 50, 100,
 * 200, 500 ms, 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6,
 * 12 h, 1, 2, 7 days (and multiples of 7 days beyond) that is >= min_ms.
 */
int64_t		 window_axis_step(int64_t min_ms);

/* A "nice" step for a count axis: 1, 2 or 5 times a power of ten >= min. */
double		 window_count_step(double min);

#endif
