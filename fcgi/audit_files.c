/*
 * audit_files: the files of a dated [audit] database name
 * (audit-%Y-%m-%d.db): which file a time's rows go to, and deleting the
 * ones [audit] keep has passed, and whose turn that is among processes of
 * one request each; and, for every audit file, whether it and its
 * directory are rlgate's before SQLite opens them. Names and files only:
 * the queue, the writer and SQLite are audit.c's, audit_writer.c's and
 * audit_db.c's.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "audit_files.h"
#include "log.h"
#include "trust.h"

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

/* The stamp of pattern's turns: ".NAME.keep" beside the files. */
static int
stamp_path(const char *pattern, char *buf, size_t len)
{
	const char *base = strrchr(pattern, '/');
	int dir = base != NULL ? (int)(base - pattern + 1) : 0;
	int n;

	base = base != NULL ? base + 1 : pattern;
	n = snprintf(buf, len, "%.*s.%s.keep", dir, pattern, base);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/*
 * Whether st, the stamp, was set by this user less than the period ago.
 * A time in the future (a clock set back, or a hand) is not trusted.
 */
static int
stamp_fresh(const struct stat *st, long long now)
{
	long long mtime = (long long)st->st_mtim.tv_sec * 1000 +
	    st->st_mtim.tv_nsec / 1000000;

	return S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
	    mtime > now - AUDIT_FILES_SWEEP_EVERY_MS &&
	    mtime <= now + AUDIT_FILES_SWEEP_EVERY_MS;
}

/*
 * The common case is one lstat(). When the stamp is stale, the process
 * that gets its lock sets it and takes the turn; the others, and any that
 * finds it fresh once it holds the lock, do not. When there is none, the
 * one that creates it (O_EXCL) takes the turn. O_NOFOLLOW and the owner
 * check: the directory may let others plant a stamp, never steer us.
 */
int
audit_files_sweep_due(const char *pattern, long long now)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, due = 1;

	if (stamp_path(pattern, path, sizeof(path)) == -1)
		return 1;
	if (lstat(path, &st) == 0 && stamp_fresh(&st, now))
		return 0;
	/* Who makes the stamp takes the first turn. */
	if ((fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) != -1 || errno != EEXIST)
		goto done;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return 1;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid())
		goto done;
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		due = 0;	/* another process is taking the turn */
		goto done;
	}
	if (fstat(fd, &st) == 0 && stamp_fresh(&st, now))
		due = 0;
	else
		futimens(fd, NULL);
done:
	if (fd != -1)
		close(fd);
	return due;
}

/*
 * Another local user who can write the directory, or who made the file
 * first, could read and change the rows, or keep rlgate from starting:
 * the directory must be this user's (or root's) and writable by nobody
 * else, each file this user's and writable by nobody else. An own file
 * with more than RLG_AUDIT_FILE_MODE (others may read it: an operator's
 * chmod, an older umask) is set to it, the -wal and -shm too, which SQLite
 * would otherwise create with the database's mode.
 */
int
audit_files_trust(const char *path, char *errbuf, size_t errlen)
{
	static const char *const sides[] = { "", "-wal", "-shm" };
	char dir[PATH_MAX], file[PATH_MAX + 8], why[200];
	const char *slash = strrchr(path, '/');
	struct stat st;
	size_t i;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 :
		    (int)(slash - path), path);
	/* A directory that is not there, or not ours to enter: the open
	 * that follows says so. */
	if (stat(dir, &st) == 0 && trust_check(&st, 1, 022,
	    "write access for group or others", why, sizeof(why)) == -1) {
		snprintf(errbuf, errlen, "%s: its directory %s is %s: "
		    "refused", path, dir, why);
		return -1;
	}
	for (i = 0; i < sizeof(sides) / sizeof(sides[0]); i++) {
		snprintf(file, sizeof(file), "%s%s", path, sides[i]);
		if (stat(file, &st) == -1)
			continue;
		if (trust_check(&st, 0, 022, "write access for group or "
		    "others", why, sizeof(why)) == -1) {
			snprintf(errbuf, errlen, "%s is %s: refused", file,
			    why);
			return -1;
		}
		if ((st.st_mode & 07777 & ~RLG_AUDIT_FILE_MODE) != 0 &&
		    chmod(file, RLG_AUDIT_FILE_MODE) == 0)
			log_warn("audit: %s was mode %04o: now %04o (the rows "
			    "hold client addresses and keys)", file,
			    (unsigned)(st.st_mode & 07777),
			    (unsigned)RLG_AUDIT_FILE_MODE);
	}
	return 0;
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
