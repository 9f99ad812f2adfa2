/*
 * audit_files: the files of a dated [audit] database name
 * (audit-%Y-%m-%d.db): which file a time's rows go to, and deleting the
 * ones [audit] keep has passed. Names and files only: the queue, the
 * writer and SQLite are audit.c's, audit_writer.c's and audit_db.c's.
 */
#include <sys/types.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit_files.h"
#include "log.h"

/* The finest field of a dated name: 'H', 'd', 'm' or 'Y'. */
static int
name_unit(const char *pattern)
{
	static const char order[] = "YmdH";
	const char *p, *at;
	int unit = 'Y';

	for (p = pattern; *p != '\0'; p++) {
		if (*p != '%' || p[1] == '\0')
			continue;
		p++;
		if ((at = strchr(order, *p)) != NULL &&
		    at > strchr(order, unit))
			unit = *p;
	}
	return unit;
}

/* The period of unit that holds t (UTC): [*start, *end) in ms. */
static void
period_of(int unit, const struct tm *t, long long *start, long long *end)
{
	struct tm tm = *t;

	tm.tm_sec = tm.tm_min = 0;
	if (unit != 'H')
		tm.tm_hour = 0;
	if (unit == 'm' || unit == 'Y')
		tm.tm_mday = 1;
	if (unit == 'Y')
		tm.tm_mon = 0;
	tm.tm_isdst = 0;
	*start = (long long)timegm(&tm) * 1000;
	switch (unit) {
	case 'H': tm.tm_hour++; break;
	case 'd': tm.tm_mday++; break;
	case 'm': tm.tm_mon++; break;
	default: tm.tm_year++; break;
	}
	*end = (long long)timegm(&tm) * 1000;
}

/* In UTC, so that every process agrees whatever its TZ. */
int
audit_files_for(const char *pattern, long long ms, char *buf, size_t len,
    long long *start, long long *end)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	/* The name's fields are %Y %m %d %H and %% only: conf_finish.c checks. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	if (strftime(buf, len, pattern, &tm) == 0)
		return -1;
#pragma GCC diagnostic pop
	period_of(name_unit(pattern), &tm, start, end);
	return 0;
}

/* The dated name as a glob(3) pattern: each field its digits. */
static int
name_glob(const char *pattern, char *out, size_t len)
{
	const char *p, *add;
	char lit[3];
	size_t n = 0, k;

	for (p = pattern; *p != '\0'; p++) {
		if (*p == '%' && p[1] != '\0') {
			p++;
			add = *p == 'Y' ? "[0-9][0-9][0-9][0-9]" :
			    *p == '%' ? "%" : "[0-9][0-9]";
		} else {
			k = 0;
			if (strchr("*?[\\", *p) != NULL)
				lit[k++] = '\\';
			lit[k++] = *p;
			lit[k] = '\0';
			add = lit;
		}
		if (n + strlen(add) >= len)
			return -1;
		memcpy(out + n, add, strlen(add) + 1);
		n += strlen(add);
	}
	return 0;
}

/* Several processes may do it at once: a file already gone is no error. */
void
audit_files_delete_old(const char *pattern, const char *in_use,
    long long keep, long long now)
{
	char pat[2 * PATH_MAX], side[PATH_MAX + 8];
	long long start, end;
	const char *rest;
	struct tm tm;
	glob_t g;
	size_t i;

	if (keep <= 0 || name_glob(pattern, pat, sizeof(pat)) == -1 ||
	    glob(pat, GLOB_NOSORT, NULL, &g) != 0)
		return;
	for (i = 0; i < g.gl_pathc; i++) {
		const char *f = g.gl_pathv[i];

		memset(&tm, 0, sizeof(tm));
		tm.tm_mday = 1;
		if ((rest = strptime(f, pattern, &tm)) == NULL ||
		    *rest != '\0' || strcmp(f, in_use) == 0)
			continue;
		period_of(name_unit(pattern), &tm, &start, &end);
		if (end + keep > now || unlink(f) == -1)
			continue;
		snprintf(side, sizeof(side), "%s-wal", f);
		unlink(side);
		snprintf(side, sizeof(side), "%s-shm", f);
		unlink(side);
		log_info("audit: %s: deleted, its period ended more than "
		    "[audit] keep ago", f);
	}
	globfree(&g);
}

void
audit_files_each_ended(const char *pattern, const char *in_use,
    long long ago, long long now, void (*fn)(const char *))
{
	char pat[2 * PATH_MAX];
	long long start, end;
	const char *rest;
	struct tm tm;
	glob_t g;
	size_t i;

	if (name_glob(pattern, pat, sizeof(pat)) == -1 ||
	    glob(pat, GLOB_NOSORT, NULL, &g) != 0)
		return;
	for (i = 0; i < g.gl_pathc; i++) {
		memset(&tm, 0, sizeof(tm));
		tm.tm_mday = 1;
		if ((rest = strptime(g.gl_pathv[i], pattern, &tm)) == NULL ||
		    *rest != '\0' || strcmp(g.gl_pathv[i], in_use) == 0)
			continue;
		period_of(name_unit(pattern), &tm, &start, &end);
		if (end + ago <= now)
			fn(g.gl_pathv[i]);
	}
	globfree(&g);
}
