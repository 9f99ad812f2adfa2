/*
 * ctl_versions: rlgate-ctl's view of the Lua libraries loaded in Redis
 * (versions, unload, prune, load), on every master. Not the limit state
 * (fcgi/ctl.c).
 */
#ifndef RLG_CTL_VERSIONS_H
#define RLG_CTL_VERSIONS_H

#include <stddef.h>

struct conf;

/*
 * cmd "versions": prints each rlgate library (rlgate_ and 12 hex digits)
 * on the masters c names, one line each: name, a tab, "N/M masters", and
 * a tab and "this build" for the library this binary carries; when there
 * is none, one line that says so.
 * cmd "unload" with lib: FUNCTION DELETE of lib on every master holding
 * it; "prune" (lib NULL): of every rlgate library but this build's. Each
 * deletion is printed "address: unloaded name". Never deletes this build's
 * library.
 * cmd "load": this build's library on every master (redis_library(), its
 * code compared): "address: loaded name", or "address: name is there
 * already"; a library of its name that is not this build's is left as it
 * is, and said.
 * Returns 0; -1 for a usage error (lib not a library name, this build's,
 * or on no master); -2 when Redis fails (load: on any master). On -1 or
 * -2 err holds a sentence (empty when one was printed on stderr already).
 */
int	ctl_versions(const struct conf *c, const char *cmd, const char *lib,
	    char *err, size_t errlen);

#endif
