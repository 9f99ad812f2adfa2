/*
 * trust: the owner and mode check for files another local user could
 * have made first (trust.h). It only judges a status; opening, refusing
 * and logging are the callers'.
 */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "trust.h"

int
trust_check(const struct stat *st, int root_ok, mode_t deny,
    const char *what, char *why, size_t len)
{
	uid_t me = geteuid();

	if ((st->st_uid == me || (root_ok && st->st_uid == 0)) &&
	    (st->st_mode & deny) == 0)
		return 0;
	snprintf(why, len, "owned by uid %ju with mode %04o, not by this "
	    "process's uid %ju%s with no %s", (uintmax_t)st->st_uid,
	    (unsigned)(st->st_mode & 07777), (uintmax_t)me,
	    root_ok && me != 0 ? " (or root)" : "", what);
	return -1;
}
