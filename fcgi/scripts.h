/*
 * scripts: the rlgate Lua function library (lua/prelude.lua, the algorithms,
 * lua/decide.lua), embedded at build time by fcgi/embed.sh. Loaded with
 * FUNCTION LOAD REPLACE (Redis 7.0 or later); its functions and replies are
 * described in lua/README.md and lua/decide.lua.
 */
#ifndef RLG_SCRIPTS_H
#define RLG_SCRIPTS_H

/* The library source, for FUNCTION LOAD REPLACE. */
extern const char	rlg_library[];
/* 40 hex chars: the sha1 of the sources; rlgate_version returns it, and
 * rlgate_decide refuses a VERSION other than it. */
extern const char	rlg_library_version[];

#endif
