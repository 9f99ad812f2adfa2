/*
 * ctl_redis: what rlgate-ctl's commands share: one way to complain on
 * stderr, and the plumbing of one Redis connection (a checked command, a
 * MULTI/EXEC, FCALL_RO with this build's library loaded where it is
 * missing, a field of an HGETALL reply). Not the commands (ctl.c,
 * ctl_versions.c), nor the dial (redis_connect(), redis_admin.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "conf.h"
#include "ctl_redis.h"
#include "redis.h"
#include "redis_io.h"

void
ctl_complain(const char *fmt, ...)
{
	va_list ap;

	fputs("rlgate-ctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* r, the reply to command what; NULL (and a message) when Redis failed. */
static redisReply *
checked(redisContext *rc, const struct conf *c, const char *what,
    redisReply *r)
{
	char why[256];

	if (r == NULL) {
		redis_why(rc, c->redis_timeout_ms, why, sizeof(why));
		ctl_complain("redis %s: %s: %s", c->redis_address, what, why);
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		ctl_complain("redis %s: %s: %s", c->redis_address, what, r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

/* Sends argv and reads the reply; NULL (and a message) when Redis fails. */
redisReply *
ctl_call(redisContext *rc, const struct conf *c, int argc, const char **argv)
{
	return checked(rc, c, argv[0], redis_io_command_argv(rc, argc, argv));
}

/*
 * MULTI + cmds + EXEC, each argv NULL-terminated. Returns 0 or -1. With
 * exec, *exec is EXEC's reply (one element per command; the caller frees
 * it); else it is freed here.
 */
int
ctl_transaction(redisContext *rc, const struct conf *c, const char *const *cmds[],
    size_t ncmds, redisReply **exec)
{
	redisReply *r;
	char why[256];
	size_t i;
	int argc, bad = 0;

	redisAppendCommand(rc, "MULTI");
	for (i = 0; i < ncmds; i++) {
		for (argc = 0; cmds[i][argc] != NULL; argc++)
			;
		redisAppendCommandArgv(rc, argc, (const char **)cmds[i], NULL);
	}
	redisAppendCommand(rc, "EXEC");
	for (i = 0; i < ncmds + 2; i++) {
		if (redis_io_get_reply(rc, (void **)&r) != REDIS_OK) {
			redis_why(rc, c->redis_timeout_ms, why, sizeof(why));
			ctl_complain("redis %s: %s", c->redis_address, why);
			return -1;
		}
		if (r->type == REDIS_REPLY_ERROR ||
		    (i == ncmds + 1 && r->type != REDIS_REPLY_ARRAY)) {
			if (!bad)
				ctl_complain("redis %s: %s", c->redis_address,
				    r->type == REDIS_REPLY_ERROR ? r->str :
				    "MULTI/EXEC did not run");
			bad = 1;
		}
		if (i == ncmds + 1 && exec != NULL && !bad)
			*exec = r;
		else
			freeReplyObject(r);
	}
	return bad ? -1 : 0;
}

/*
 * FCALL_RO of this build's library: where Redis has it not (ERR Function
 * not found), redis_library() as the gateway would, and the call again.
 * The reply, or NULL with a message.
 */
redisReply *
ctl_fcall_ro(redisContext *rc, const struct conf *c, int argc, const char **argv)
{
	redisReply *r = redis_io_command_argv(rc, argc, argv);
	char err[512];

	if (r == NULL || r->type != REDIS_REPLY_ERROR ||
	    strstr(r->str, "Function not found") == NULL)
		return checked(rc, c, argv[0], r);
	freeReplyObject(r);
	if (redis_library(rc, c->redis_timeout_ms, 0, err, sizeof(err)) == -1) {
		ctl_complain("redis %s: %s", c->redis_address, err);
		return NULL;
	}
	return checked(rc, c, argv[0], redis_io_command_argv(rc, argc, argv));
}
