/*
 * trust: whether a file this process is about to read or write, and that
 * another local user could have made first, is its own. One check for
 * every such file: the /metrics shared memory (metrics.c), the audit
 * database and its directory (audit_files.c). Not what to do about a
 * refusal: each caller says that.
 */
#ifndef RLG_TRUST_H
#define RLG_TRUST_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Whether st, the status of a file, is this process's own: owned by its
 * effective user (or, with root_ok, by root, who owns the directories
 * above every user's) and with none of the mode bits in deny, which what
 * names ("group or other access", "write access for group or others").
 * 0, or -1 with "owned by uid U with mode 0M, not by this process's uid E
 * with no WHAT" in why (len bytes). Thread-safe.
 */
int	trust_check(const struct stat *st, int root_ok, mode_t deny,
	    const char *what, char *why, size_t len);

#endif
