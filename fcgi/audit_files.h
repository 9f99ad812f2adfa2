/*
 * audit_files: the files of a dated [audit] database name, one whose
 * strftime fields (%Y %m %d %H, each with the coarser ones; conf checks)
 * give a file per period. For audit.c and audit_writer.c only.
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

/*
 * Calls fn with each file of pattern, never in_use, whose period ended
 * more than ago ms before now.
 */
void	audit_files_each_ended(const char *pattern, const char *in_use,
	    long long ago, long long now, void (*fn)(const char *));

#endif
