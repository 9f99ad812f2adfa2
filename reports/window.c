/*
 * window: time arithmetic for the report (window alignment, UTC formatting
 * and parsing, axis steps). Pure functions on integers: no time zone, no
 * locale, no I/O. Not for aggregation; see agg.c.
 */
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "window.h"

#define MS_PER_DAY	86400000LL
#define MAX_TIME_MS	253402300799999LL	/* 9999-12-31 23:59:59.999 */

int64_t
window_start(int64_t ts_ms, int64_t width_ms)
{
	int64_t r = ts_ms % width_ms;

	/* C's % truncates toward zero; windows floor, also before 1970. */
	if (r < 0)
		r += width_ms;
	return ts_ms - r;
}

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void
civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

char *
window_format_time(int64_t ms, char buf[RLG_TIME_LEN])
{
	int64_t days, rem, y;
	int m, d;

	days = ms / MS_PER_DAY;
	rem = ms % MS_PER_DAY;
	if (rem < 0) {
		rem += MS_PER_DAY;
		days--;
	}
	civil_from_days(days, &y, &m, &d);
	snprintf(buf, RLG_TIME_LEN, "%04lld-%02d-%02d %02d:%02d:%02d.%03d",
	    (long long)y, m, d, (int)(rem / 3600000), (int)(rem / 60000 % 60),
	    (int)(rem / 1000 % 60), (int)(rem % 1000));
	return buf;
}

/* Reads exactly n digits at *p into *out; advances *p. */
static int
digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int
days_in_month(int y, int m)
{
	static const int dim[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return dim[m - 1];
}

/*
 * A 'T' may replace the space and a trailing 'Z' is allowed; the fraction
 * has 1 to 3 digits; a date alone is midnight UTC.
 */
int
window_parse_time(const char *s, int64_t *out_ms, const char **errstr)
{
	const char *p = s;
	int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0;
	long long epoch;

	*errstr = "use YYYY-MM-DD, YYYY-MM-DD HH:MM:SS.mmm UTC, or milliseconds since the epoch";
	if (*s == '\0')
		return -1;
	if (strspn(s, "0123456789") == strlen(s)) {
		if (conf_parse_int(s, 0, MAX_TIME_MS, &epoch, errstr) == -1)
			return -1;
		*out_ms = epoch;
		return 0;
	}
	if (digits(&p, 4, &y) == -1 || *p++ != '-' || digits(&p, 2, &mo) == -1 ||
	    *p++ != '-' || digits(&p, 2, &d) == -1)
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return -1;
	if (*p == ' ' || *p == 'T') {
		p++;
		if (digits(&p, 2, &h) == -1 || *p++ != ':' || digits(&p, 2, &mi) == -1)
			return -1;
		if (*p == ':') {
			p++;
			if (digits(&p, 2, &sec) == -1)
				return -1;
			if (*p == '.') {
				int n = 0, scale = 100;

				p++;
				while (*p >= '0' && *p <= '9' && n < 3) {
					frac += (*p++ - '0') * scale;
					scale /= 10;
					n++;
				}
				if (n == 0)
					return -1;
			}
		}
		if (h > 23 || mi > 59 || sec > 59)
			return -1;
	}
	if (*p == 'Z')
		p++;
	if (*p != '\0')
		return -1;
	*out_ms = days_from_civil(y, mo, d) * MS_PER_DAY + h * 3600000LL +
	    mi * 60000LL + sec * 1000LL + frac;
	return 0;
}

char *
window_format_duration(int64_t ms, char *buf, size_t len)
{
	return conf_format_duration(ms, buf, len);
}

int64_t
window_axis_step(int64_t min_ms)
{
	static const int64_t steps[] = {
		1, 2, 5, 10, 20, 50, 100, 200, 500,
		1000, 2000, 5000, 10000, 15000, 30000,
		60000, 120000, 300000, 600000, 900000, 1800000,
		3600000, 7200000, 10800000, 21600000, 43200000,
		86400000, 172800000, 604800000,
	};
	size_t n = sizeof(steps) / sizeof(steps[0]);

	for (size_t i = 0; i < n; i++)
		if (steps[i] >= min_ms)
			return steps[i];
	return (min_ms + steps[n - 1] - 1) / steps[n - 1] * steps[n - 1];
}

double
window_count_step(double min)
{
	double p = 1;

	if (min <= 1)
		return 1;
	while (p * 10 < min)
		p *= 10;
	if (p >= min)
		return p;
	if (2 * p >= min)
		return 2 * p;
	if (5 * p >= min)
		return 5 * p;
	return 10 * p;
}
