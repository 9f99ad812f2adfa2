/*
 * log: one line per event on stderr, "2026-11-22T10:00:00.123Z rlgate[pid]:
 * level: message", written with a single write(2) so that lines from several
 * threads never interleave. Not for audit records (see audit.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX	2048	/* longer messages are cut, ending in "..." */

static int log_level = RLG_LOG_INFO;	/* read and written atomically */

static const char *const level_names[] = {
	[RLG_LOG_ERROR] = "error",
	[RLG_LOG_WARN] = "warn",
	[RLG_LOG_INFO] = "info",
	[RLG_LOG_DEBUG] = "debug",
};

void
log_set_level(enum rlg_log_level level)
{
	__atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

int
log_enabled(enum rlg_log_level level)
{
	return (int)level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

static void log_line(enum rlg_log_level, const char *, va_list)
    __attribute__((format(printf, 2, 0)));

static void
log_line(enum rlg_log_level level, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	struct timespec ts;
	struct tm tm;
	size_t len, i, pre;
	ssize_t n;
	int r, saved_errno = errno;

	if (!log_enabled(level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	len = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	r = snprintf(line + len, sizeof(line) - len,
	    ".%03ldZ rlgate[%ld]: %s: ", ts.tv_nsec / 1000000, (long)getpid(),
	    level_names[level]);
	len += (size_t)r;
	pre = len;
	errno = saved_errno;	/* so that %m works */
	r = vsnprintf(line + len, sizeof(line) - len - 1, fmt, ap);
	if (r < 0)
		r = 0;
	if ((size_t)r >= sizeof(line) - len - 1) {
		len = sizeof(line) - 1;
		line[len - 3] = line[len - 2] = line[len - 1] = '.';
	} else
		len += (size_t)r;
	/* One event, one line: a message with a newline would fake another,
	 * and other control bytes (a client's path, a key) have no business
	 * reaching a terminal. */
	for (i = pre; i < len; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = ' ';
	line[len++] = '\n';
	/* A line is far below PIPE_BUF-sized writes; loop only for EINTR. */
	for (i = 0; i < len; i += (size_t)n)
		if ((n = write(STDERR_FILENO, line + i, len - i)) <= 0) {
			if (n == -1 && errno == EINTR) {
				n = 0;
				continue;
			}
			break;
		}
	errno = saved_errno;
}

#define LOG_FUNC(name, level)				\
void							\
name(const char *fmt, ...)				\
{							\
	va_list ap;					\
							\
	va_start(ap, fmt);				\
	log_line(level, fmt, ap);			\
	va_end(ap);					\
}

LOG_FUNC(log_error, RLG_LOG_ERROR)
LOG_FUNC(log_warn, RLG_LOG_WARN)
LOG_FUNC(log_info, RLG_LOG_INFO)
LOG_FUNC(log_debug, RLG_LOG_DEBUG)

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(RLG_LOG_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}
