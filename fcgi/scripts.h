/*
 * scripts: the rlgate Lua function library (lua/prelude.lua, the algorithms,
 * lua/decide.lua), embedded at build time by fcgi/embed.sh. Loaded with
 * FUNCTION LOAD REPLACE (Redis 7.0 or later); its functions and replies are
 * described in lua/README.md and lua/decide.lua.
 */
#ifndef RLG_SCRIPTS_H
#define RLG_SCRIPTS_H

#include <stddef.h>

/* The library source, for FUNCTION LOAD REPLACE. */
extern const char	rlg_library[];
/* 40 hex chars: the sha1 of the sources; rlgate_version returns it, and
 * rlgate_decide refuses a VERSION other than it. */
extern const char	rlg_library_version[];

/*
 * Transitional, until limiter.c calls the library: each algorithm as a
 * standalone EVAL script (the library's prelude and algorithm text, run as
 * rlgate_<algorithm> is), named by file, with its SHA1 for EVALSHA.
 */
struct rlg_script {
	const char	*name;		/* the algorithm */
	const char	*source;
	const char	*sha1;		/* for EVALSHA, known at build */
};

extern const struct rlg_script	rlg_scripts[];
extern const size_t		rlg_nscripts;

/* The embedded script called name, or NULL. */
const struct rlg_script	*scripts_find(const char *name);

#endif
