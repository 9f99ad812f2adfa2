/*
 * scripts: the Lua files of lua/, embedded at build time by fcgi/embed.sh.
 * The limiter runs them in Redis; main only checks, at load, that every
 * rule's algorithm has one.
 */
#ifndef RLG_SCRIPTS_H
#define RLG_SCRIPTS_H

#include <stddef.h>

struct rlg_script {
	const char	*name;		/* file name without .lua */
	const char	*source;
	const char	*sha1;		/* for EVALSHA, known at build */
};

extern const struct rlg_script	rlg_scripts[];
extern const size_t		rlg_nscripts;

/* The embedded script called name, or NULL. */
const struct rlg_script	*scripts_find(const char *name);

#endif
