/*
 * ctl_redis: what rlgate-ctl's commands (ctl.c, ctl_versions.c) share: the
 * complaint on stderr and the plumbing of one Redis connection. Blocking
 * hiredis calls; rlgate-ctl only, never the gateway. Messages name
 * c->redis_address.
 */
#ifndef RLG_CTL_REDIS_H
#define RLG_CTL_REDIS_H

#include <stddef.h>

struct conf;
struct redisContext;
struct redisReply;

/* Prints "rlgate-ctl: ", the message and a newline on stderr. */
void	ctl_complain(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));

/* Sends argv[0..argc) and reads the reply: the reply (the caller frees
 * it), or NULL with a message when Redis failed or answered an error. */
struct redisReply *ctl_call(struct redisContext *rc, const struct conf *c,
	    int argc, const char **argv);

/*
 * MULTI + cmds[0..ncmds) + EXEC, each argv NULL-terminated, pipelined.
 * Returns 0 or -1 (with a message). With exec, *exec is EXEC's reply (one
 * element per command; the caller frees it); else it is freed here.
 */
int	ctl_transaction(struct redisContext *rc, const struct conf *c,
	    const char *const *cmds[], size_t ncmds, struct redisReply **exec);

/*
 * FCALL_RO of this build's library: where Redis has it not (ERR Function
 * not found: no gateway of this build ran there yet), redis_library() (as
 * the gateway: loaded, never replacing another library of its name), and
 * the call again. The reply (the caller frees it), or NULL with a message.
 */
struct redisReply *ctl_fcall_ro(struct redisContext *rc, const struct conf *c,
	    int argc, const char **argv);

#endif
