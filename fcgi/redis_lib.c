/*
 * redis_lib: this build's function library on one server. One routine
 * makes sure it is there for every caller (the gateway's run, where a node
 * answered "Function not found"; the start-up probe; rlgate-ctl, and its
 * load command), and never replaces a library it did not write; then what
 * the ACL user may run of it. Blocking calls on a connection the caller
 * owns. Not here: connections (redis_conn.c), which node (redis.c,
 * redis_admin.c).
 */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_int.h"
#include "scripts.h"

/* An error as a sentence: Redis 7.0 for an unknown command. */
static void
lib_error(char *err, size_t errlen, const char *what)
{
	char why[384];

	snprintf(why, sizeof(why), "%s", what);
	snprintf(err, errlen, "%s%s", why, strstr(why, "unknown command") !=
	    NULL ? " (Redis 7.0 or later is needed)" : "");
}

/* A library under this build's name that is not this build's: left as it
 * is, and said so with what to do. */
static void
not_ours(char *err, size_t errlen, const char *how)
{
	snprintf(err, errlen, "library %s there is not this build's (%s); "
	    "rlgate does not replace it: delete it (FUNCTION DELETE %s), "
	    "then run rlgate-ctl load", rlg_library_name, how,
	    rlg_library_name);
}

/* FCALL_RO LIB_version 0: 1 with the version in ver, 0 when the function
 * is not found, -1 with err set. */
static int
version_of(redisContext *ctx, long long timeout_ms, char *ver, size_t verlen,
    char *err, size_t errlen)
{
	const char *argv[3] = { "FCALL_RO", rlg_fn_version, "0" };
	redisReply *rep = NULL;
	char why[320];

	if (redis_conn_command(ctx, timeout_ms, &rep, why, sizeof(why), 3,
	    argv) == 0) {
		snprintf(ver, verlen, "%.40s", rep->type == REDIS_REPLY_STRING ?
		    rep->str : "?");
		freeReplyObject(rep);
		return 1;
	}
	if (ctx->err == 0 && strstr(why, "Function not found") != NULL)
		return 0;
	lib_error(err, errlen, why);
	return -1;
}

/* FUNCTION LIST LIBRARYNAME <this build's> WITHCODE: 1 when that
 * library's code is this build's, 0 when it differs, -1 with err set. */
static int
same_code(redisContext *ctx, long long timeout_ms, char *err, size_t errlen)
{
	const char *argv[5] = { "FUNCTION", "LIST", "LIBRARYNAME",
	    rlg_library_name, "WITHCODE" };
	const redisReply *lib, *k, *v, *name, *code;
	redisReply *rep = NULL;
	char why[320];
	size_t i, j;
	int same = 0;

	if (redis_conn_command(ctx, timeout_ms, &rep, why, sizeof(why), 5,
	    argv) == -1) {
		lib_error(err, errlen, why);
		return -1;
	}
	for (i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		lib = rep->element[i];
		name = code = NULL;
		for (j = 0; lib->type == REDIS_REPLY_ARRAY &&
		    j + 1 < lib->elements; j += 2) {
			k = lib->element[j];
			v = lib->element[j + 1];
			if (k->type != REDIS_REPLY_STRING ||
			    v->type != REDIS_REPLY_STRING)
				continue;
			if (strcmp(k->str, "library_name") == 0)
				name = v;
			else if (strcmp(k->str, "library_code") == 0)
				code = v;
		}
		if (name != NULL && code != NULL &&
		    strcmp(name->str, rlg_library_name) == 0 &&
		    code->len == strlen(rlg_library) &&
		    memcmp(code->str, rlg_library, code->len) == 0)
			same = 1;
	}
	freeReplyObject(rep);
	return same;
}

/* Found by its version function: this build's when that says this build's
 * version and, with check_code, its code is this build's too. 0 or -1. */
static int
found(redisContext *ctx, long long timeout_ms, const char *ver,
    int check_code, char *err, size_t errlen)
{
	char how[96];
	int same;

	if (strcmp(ver, rlg_library_version) != 0) {
		snprintf(how, sizeof(how), "its version is %s", ver);
		not_ours(err, errlen, how);
		return -1;
	}
	if (!check_code)
		return 0;
	if ((same = same_code(ctx, timeout_ms, err, errlen)) == 0)
		not_ours(err, errlen, "this build's version, other code");
	return same == 1 ? 0 : -1;
}

/*
 * redis_library(): asks the version function (FCALL_RO, which a user
 * without FUNCTION LOAD may run); where it is not found, FUNCTION LOAD,
 * never REPLACE: a library of this name that rlgate did not write stays as
 * it is. "Already exists" is this build's when its version function now
 * answers (another gateway was first). A library of this name is this
 * build's when its version function answers this build's version and,
 * with check_code, its code is this build's. Its errors: this build's
 * library missing and the user may not load it (what to run); another
 * library under this name (not replaced); Redis before 7.0; the
 * connection failed.
 */
int
redis_library(redisContext *ctx, long long timeout_ms, int check_code,
    char *err, size_t errlen)
{
	const char *load[3] = { "FUNCTION", "LOAD", rlg_library };
	char ver[48], why[320], how[96];
	int rc;

	if ((rc = version_of(ctx, timeout_ms, ver, sizeof(ver), err,
	    errlen)) != 0)
		return rc == 1 ? found(ctx, timeout_ms, ver, check_code, err,
		    errlen) : -1;
	/* Missing: loaded, never with REPLACE, which would take another
	 * library of this name (hand-made, or a collision) away from
	 * whoever calls it. */
	if (redis_conn_command(ctx, timeout_ms, NULL, why, sizeof(why), 3,
	    load) == 0)
		return 1;
	if (ctx->err == 0 && strstr(why, "NOPERM") != NULL) {
		snprintf(err, errlen, "this build's library %s is not loaded "
		    "there, and this user may not load it (NOPERM): run "
		    "rlgate-ctl load with an operator's user (README.md, \"A "
		    "Redis user for rlgate\")", rlg_library_name);
		return -1;
	}
	if (ctx->err != 0 || strstr(why, "already exists") == NULL) {
		lib_error(err, errlen, why);
		return -1;
	}
	/* "already exists": another gateway of this build loaded it since
	 * we asked, or a library of this name that has no such function is
	 * there. Its version function tells them apart. */
	if ((rc = version_of(ctx, timeout_ms, ver, sizeof(ver), err,
	    errlen)) == 1)
		return found(ctx, timeout_ms, ver, check_code, err, errlen);
	if (rc == 0) {
		snprintf(how, sizeof(how), "it has no function %s",
		    rlg_fn_version);
		not_ours(err, errlen, how);
	}
	return -1;
}

int
redis_lib_acl(redisContext *ctx, long long timeout_ms, const char *key_prefix,
    char *err, size_t errlen)
{
	char fn[64], key[RLG_MAX_KEY_PREFIX + sizeof("{rlgate:acl}")], why[320];
	const char *argv[4] = { "FCALL_RO", fn, "0", key };
	redisReply *rep = NULL;
	int rc = 0;

	snprintf(fn, sizeof(fn), "%s_acl", rlg_library_name);
	snprintf(key, sizeof(key), "%s{rlgate:acl}", key_prefix);
	if (redis_conn_command(ctx, timeout_ms, &rep, why, sizeof(why), 4,
	    argv) == -1) {
		lib_error(err, errlen, why);
		return -1;
	}
	if (rep->type == REDIS_REPLY_STRING && rep->len > 0) {
		snprintf(err, errlen, "the ACL user may not run %s on keys "
		    "%s*, which the rlgate library runs (README.md: \"A Redis "
		    "user for rlgate\")", rep->str, key_prefix);
		rc = -1;
	}
	freeReplyObject(rep);
	return rc;
}
