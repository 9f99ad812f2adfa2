/*
 * redis_io: bytes to and from a Redis server, plain or TLS. hiredis 0.14
 * has no TLS: it still formats commands (ctx->obuf) and parses replies
 * (ctx->reader); this module owns what goes over the socket, with OpenSSL
 * when [redis] tls = yes. Every connection of the Redis layer, the
 * Sentinel watch and rlgate-ctl goes through these calls, never through
 * hiredis's own I/O. Not here: what to send (redis.c, redis_conn.c).
 */
#ifndef RLG_REDIS_IO_H
#define RLG_REDIS_IO_H

#include <stddef.h>

#include <hiredis/hiredis.h>

struct conf;

/*
 * Builds the process's TLS context from c's [redis] tls_* keys, or drops it
 * when tls = no; connections made after it use the new one. 0, or -1 with a
 * sentence in err naming the file and what is wrong. Thread safe.
 */
int		 redis_io_setup(const struct conf *c, char *err,
		    size_t errlen);

/*
 * Starts TLS on ctx's connected socket when TLS is on (nothing for a unix
 * socket or with TLS off), checking the certificate against
 * tls_server_name, else host. 0, or -1 with "TLS handshake: why" in err;
 * the caller frees ctx with redis_io_free() either way.
 */
int		 redis_io_start(redisContext *ctx, const char *host,
		    long long timeout_ms, char *err, size_t errlen);

/* hiredis's redisBufferWrite(): writes ctx->obuf, *done once it is empty. */
int		 redis_io_write(redisContext *ctx, int *done);
/*
 * hiredis's redisBufferRead(): one read into ctx's reader. With TLS it
 * also takes what OpenSSL holds already decrypted, so that nothing left
 * for the reader hides from poll(). REDIS_OK or REDIS_ERR (ctx->err set;
 * a timeout is REDIS_ERR_IO with strerror(EAGAIN), as hiredis says it).
 */
int		 redis_io_read(redisContext *ctx);
/* hiredis's redisGetReply() on a blocking ctx: writes, then reads until a
 * reply is whole. */
int		 redis_io_get_reply(redisContext *ctx, void **reply);
/* hiredis's redisCommandArgv() and redisCommand() on a blocking ctx. */
redisReply	*redis_io_command_argv(redisContext *ctx, int argc,
		    const char **argv);
redisReply	*redis_io_command(redisContext *ctx, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
/*
 * Has the connection been closed, or has the server spoken, since its
 * last reply? TLS records the server sends on its own (TLS 1.3 session
 * tickets) are taken and do not count. A syscall: not per call.
 */
int		 redis_io_stale(redisContext *ctx);
/* Has the server sent anything on ctx yet (with TLS: the handshake)? A
 * plain connection reset or closed before it did is what a TLS port does
 * to a client that speaks plain. */
int		 redis_io_heard(const redisContext *ctx);
/* Frees ctx and its TLS session (redisFree() leaks the session). NULL is
 * fine. */
void		 redis_io_free(redisContext *ctx);

#endif
