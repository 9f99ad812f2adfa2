/*
 * audit_files: the files of a dated [audit] database name, one whose
 * strftime fields (%Y %m %d %H, each with the coarser ones; conf checks)
 * give a file per period; whether an audit file may be trusted. For
 * audit.c, audit_writer.c and audit_db.c only.
 */
#ifndef RLG_AUDIT_FILES_H
#define RLG_AUDIT_FILES_H

#include <stddef.h>

/*
 * The file of the dated name pattern that holds the rows of time ms, into
 * buf (len bytes), and its period [*start, *end) in ms. 0, or -1 when the
 * name does not fit.
 */
int	audit_files_for(const char *pattern, long long ms, char *buf,
	    size_t len, long long *start, long long *end);

/*
 * Deletes the files of pattern (with their -wal and -shm) whose period
 * ended more than keep ms before now, never in_use, and logs each. keep
 * <= 0 deletes nothing.
 */
void	audit_files_delete_old(const char *pattern, const char *in_use,
	    long long keep, long long now);

/* How often the processes of one dated name take turns at deleting. */
#define AUDIT_FILES_SWEEP_EVERY_MS	60000

/*
 * For processes that live one request each (CGI), which must not each
 * look through the directory: 1 when it is this process's turn to call
 * audit_files_delete_old() at now, 0 when another took the turn less than
 * AUDIT_FILES_SWEEP_EVERY_MS ago. The turn is the mtime of a stamp beside
 * the files, ".NAME.keep" (NAME the pattern's own file name), owned by the
 * process's user; a stamp that cannot be trusted (another user's, not a
 * plain file, a link, in the future) or made gives every process the turn:
 * the files are still deleted, only at the cost of looking each time.
 */
int	audit_files_sweep_due(const char *pattern, long long now);

/*
 * Whether the audit database path (and its -wal and -shm, when they are
 * there) may be opened: the directory is this process's user's or root's
 * and no one else may write it; each file there is the user's and no one
 * else may write it; an own file others may read is narrowed to
 * RLG_AUDIT_FILE_MODE (logged). 0, or -1 with the refusal, naming the
 * file, its owner and mode, in errbuf.
 */
int	audit_files_trust(const char *path, char *errbuf, size_t errlen);

/*
 * Calls fn with each file of pattern, never in_use, whose period ended
 * more than ago ms before now.
 */
void	audit_files_each_ended(const char *pattern, const char *in_use,
	    long long ago, long long now, void (*fn)(const char *));

#endif
