/*
 * scripts: the rlgate Lua function library (lua/prelude.lua, the algorithms,
 * lua/decide.lua), embedded at build time by fcgi/embed.sh. Its name and
 * its functions' names carry the version, so that two builds share one
 * Redis: loaded with FUNCTION LOAD (never REPLACE: that would take another
 * version's away) where it is missing (Redis 7.0 or later); its functions
 * and replies are described in lua/README.md and lua/decide.lua.
 */
#ifndef RLG_SCRIPTS_H
#define RLG_SCRIPTS_H

/* The library source, for FUNCTION LOAD. */
extern const char	rlg_library[];
/* 40 hex chars: the sha1 of the sources; rlg_fn_version returns it, and
 * rlg_fn_decide refuses a VERSION other than it. */
extern const char	rlg_library_version[];
/* "rlgate_" and the version's first 12 hex chars: the library's name, and
 * the prefix of its functions' names (rlgate-ctl versions lists them). */
extern const char	rlg_library_name[];
/* The functions the gateway calls: "<rlg_library_name>_decide", _undo,
 * _version. Constants of the build: no name is made per request. */
extern const char	rlg_fn_decide[];
extern const char	rlg_fn_undo[];
extern const char	rlg_fn_version[];

#endif
