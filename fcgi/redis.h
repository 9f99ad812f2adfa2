/*
 * redis: the Redis layer. Knows the deployment ([redis] mode = single,
 * cluster or sentinel), its nodes, the slot map, redirects, failover, the
 * function library and outages; runs the calls the limiter (and
 * rlgate-ctl) hand it and never knows what they mean. One struct redis
 * per event loop; what is shared between loops is only each node's health
 * (back-off, once-per-outage logs, counters) and the Sentinel watch.
 */
#ifndef RLG_REDIS_H
#define RLG_REDIS_H

#include <stddef.h>

#include "conf.h"

struct redis;
struct redisContext;
struct redisReply;
struct metrics_worker;

/* A node's address as logs show it: host:port, [v6]:port or unix:/path. */
#define RLG_REDIS_ADDR_SIZE	280

/* A struct redis with no connection yet; NULL when out of memory. */
struct redis	*redis_new(void);

/* Closes every connection and frees r. Accepts NULL. */
void		 redis_free(struct redis *r);

/* Counts r's round trips, latency and errors into w (NULL: nowhere). */
void		 redis_set_metrics(struct redis *r, struct metrics_worker *w);

enum rlg_call_status {
	RLG_CALL_OK,		/* answered: reply holds the answer */
	RLG_CALL_FAILED,	/* no answer, it may have run (timed out,
				 * connection lost after sending) */
	RLG_CALL_UNSENT		/* it did not run: not sent (node down and
				 * backed off, no node for its slot, cannot
				 * connect), or refused before running
				 * (BUSY, LOADING, READONLY, OOM, NOAUTH,
				 * CLUSTERDOWN and TRYAGAIN past the
				 * timeout...: reply then holds that error) */
};

struct redis_call {
	/* in: */
	const char	*key;	/* routes the call (its slot); NULL: any
				 * master */
	size_t		 keylen;
	int		 argc;	/* the command, borrowed during redis_run() */
	const char	**argv;
	const size_t	*argvlen;
	int		 wait;	/* 1: it may write; with [redis] replicas
				 * > 0 a WAIT follows it on its node, in the
				 * same pipeline (one per node and round
				 * trip, after the last such call: WAIT
				 * covers every earlier write of its
				 * connection) */
	/* out: */
	struct redisReply *reply;	/* the caller frees it
				 * (freeReplyObject(), which takes NULL); may
				 * be an error reply other than the ones the
				 * layer handles; NULL when there was none */
	enum rlg_call_status status;
	int		 node;	/* the node it went to (redis_node_address()),
				 * or -1 */
	int		 acked;	/* wait set and [redis] replicas > 0: how
				 * many replicas acknowledged the WAIT after
				 * its answer (WAIT's reply); when its master
				 * had fewer replicas connected than
				 * [redis] replicas, no WAIT went and this is
				 * how many it had; -1 when the WAIT got no
				 * number (no answer within the round, an
				 * error) or none was sent */
	int		 waited;	/* 1: a WAIT followed it (acked is
				 * that WAIT's) */
};

/*
 * Runs calls[0..n) (their in: fields, borrowed for the call) and fills
 * their out: fields: one round trip to every node at once, routed by key,
 * redirects, a missing library, TRYAGAIN and failover handled inside
 * (redis.c says how); waits at most c's connect timeout plus timeout per
 * attempt. Returns how many calls are not RLG_CALL_OK, and then
 * redis_errstr() says why. Not thread safe: r's loop only.
 */
int		 redis_run(struct redis *r, const struct conf *c,
		    struct redis_call *calls, size_t n);

/*
 * Why the last redis_run() on r left a call unanswered, in one sentence
 * naming the node ("redis 127.0.0.1:6379: timed out after 100 ms"); ""
 * when it answered them all. Owned by r, valid until its next run. The
 * layer has logged an outage once already: the caller decides whether to
 * log this. r's loop only.
 */
const char	*redis_errstr(const struct redis *r);

/* Node i's address (i from a redis_call's node), or "" if unknown. */
const char	*redis_node_address(const struct redis *r, int i);

/*
 * Which keys one call (one script's KEYS) may hold, so that the caller
 * groups its keys without knowing nodes or slots. redis_keys_together():
 * 1 when any keys may share a call (one node holds them all: single and
 * Sentinel modes), 0 when only keys of the same group may (a cluster).
 * redis_key_group(): key's group (0..16383, its hash slot in a cluster;
 * 0 for every key otherwise): keys of one group may share a call. Pure,
 * thread safe.
 */
int		 redis_keys_together(const struct conf *c);
int		 redis_key_group(const struct conf *c, const char *key,
		    size_t keylen);

/* One master as the status endpoint reports it. */
struct redis_health {
	char		 address[RLG_REDIS_ADDR_SIZE];
	char		 role[16];	/* "master", or what ROLE said */
	int		 ok;		/* answered PING */
	long long	 latency_us;	/* PING's round trip, when ok */
	char		 errstr[256];	/* why not, when not ok */
	long long	 errors;	/* process-wide counters */
	long long	 redirects;
	long long	 refreshes;
};

/*
 * PINGs every master (connecting as redis_run() would, honouring the
 * back-off: a node backed off is reported down without a try) and fills
 * up to max entries of h. A master where this build's library cannot be
 * is not ok, with why, though it answers PING: only a call's answer ends
 * that outage. Returns how many masters there are (may exceed
 * max), or -1 when none is known, with a sentence in errbuf (no seed or
 * Sentinel reachable...). Not thread safe: r's loop only.
 */
int		 redis_health(struct redis *r, const struct conf *c,
		    struct redis_health *h, size_t max, char *errbuf,
		    size_t errlen);

/* A node's counters, process-wide, since start (for /metrics). */
struct redis_node_counters {
	const char	*address;	/* lives as long as the process */
	long long	 errors;	/* outages and failed calls */
	long long	 redirects;	/* MOVED and ASK it answered */
	long long	 refreshes;	/* slot maps it gave */
};

/*
 * Fills up to max entries with every node address the process has used
 * (data nodes, seeds; in sentinel and cluster mode also the deployment's
 * own entry, named by its mode and address list: "cluster ADDRESSES",
 * "sentinel ADDRESSES"). Returns how many there are (may exceed max).
 * Thread safe, lock free.
 */
size_t		 redis_counters(struct redis_node_counters *out, size_t max);

/*
 * For rlgate -t and start-up: reaches the deployment as configured,
 * checks its mode (cluster support on, the Sentinels know the master, ROLE
 * is master; Redis 7.0 or later), makes sure of the library on every
 * master (redis_library()) and that the ACL user may run what it runs.
 * Returns 0, or -1 with a sentence in errbuf naming each address tried and
 * why. A master whose library cannot be there is marked down with that
 * outage said (the caller logs errbuf): requests do not log it again.
 * Thread safe (its own connections).
 */
int		 redis_probe(const struct conf *c, char *errbuf, size_t errlen);

/*
 * For rlgate-ctl: calls fn once per master with a blocking hiredis
 * connection to it (AUTH and SELECT done, c's timeouts set) and its
 * address, e.g. to SCAN each. fn returns 0 to go on, -1 to stop (its -1 is
 * returned). Returns 0, or -1 with a sentence in errbuf (a master that
 * cannot be reached: the ones before it were visited), to follow
 * c->redis_address: it names the master where that is another address
 * (cluster, sentinel). A call by key is redis_run() with one call.
 */
typedef int	(*redis_master_fn)(void *arg, struct redisContext *ctx,
		    const char *address);
int		 redis_each_master(struct redis *r, const struct conf *c,
		    redis_master_fn fn, void *arg, char *errbuf,
		    size_t errlen);

/*
 * A blocking connection to address (host:port, [v6]:port or unix:/path)
 * with c's connect timeout and timeout set (a blocking call that takes
 * longer fails "timed out after N ms"), AUTH (username may be NULL; none
 * when password is NULL) and SELECT (database not 0) done. Returns a
 * context the caller frees with redis_io_free(), or NULL with why in err.
 * Thread safe.
 */
struct redisContext *redis_dial(const char *address, const char *username,
		    const char *password, int database,
		    long long connect_timeout_ms, long long timeout_ms,
		    char *err, size_t errlen);

/*
 * Makes sure this build's function library (rlg_library, scripts.h) is on
 * the server of a blocking ctx, never replacing one (redis_lib.c says how
 * it tells its own); the one routine for the gateway, the probe and
 * rlgate-ctl. check_code: compare the code too (needs FUNCTION LIST).
 * Returns 1 when it loaded it, 0 when it was there, -1 with a sentence in
 * err (then ctx->err is set if the connection failed). Thread safe (ctx is
 * the caller's).
 */
int		 redis_library(struct redisContext *ctx, long long timeout_ms,
		    int check_code, char *err, size_t errlen);

/* Why a call on ctx failed, in words: "timed out after N ms" for a
 * timeout; a connection reset or closed before the server said anything
 * (what a TLS port does to a client that speaks plain) asks whether it is
 * a TLS port. */
void		 redis_why(const struct redisContext *ctx, long long timeout_ms,
		    char *buf, size_t len);

/*
 * A blocking connection to the single server or the Sentinel's master as
 * the gateway makes one (timeouts, AUTH, SELECT): for rlgate-ctl's
 * commands that need no routing. In cluster mode, a connection to the
 * master of key (keylen bytes) instead. Returns a context the caller frees
 * with redis_io_free(), or NULL with a sentence in errbuf, to follow
 * c->redis_address as redis_each_master()'s.
 */
struct redisContext *redis_connect(const struct conf *c, const char *key,
		    size_t keylen, char *errbuf, size_t errlen);

#endif
