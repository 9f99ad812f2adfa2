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
 * Runs cmd ("versions", "load", "prune", or "unload" with lib) on every
 * master of c, printing on stdout what it found or did (ctl_versions.c
 * and rlgate-ctl(8) give the lines); never deletes this build's library,
 * never replaces one. Returns 0; -1 for a usage error (lib not a library,
 * this build's, or on no master); -2 when Redis fails; then err holds a
 * sentence (empty when one went to stderr already). Blocking; one thread.
 */
int	ctl_versions(const struct conf *c, const char *cmd, const char *lib,
	    char *err, size_t errlen);

#endif
