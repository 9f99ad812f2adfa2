/*
 * log: one line per event on stderr (which spawn-fcgi, lighttpd and Apache
 * send to their error logs): "2026-11-22T10:00:00.123Z rlgate[pid]: warn: ...".
 * Thread safe. Not for audit records: those go to audit.
 */
#ifndef RLG_LOG_H
#define RLG_LOG_H

#include "conf.h"

/* Messages above level are dropped. Set at start and on reload. */
void	log_set_level(enum rlg_log_level level);
/* Would a line of this level be written? (To skip costly formatting.) */
int	log_enabled(enum rlg_log_level level);

void	log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Logs at error level and exits 1. Only during start-up. */
void	fatal(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

#endif
