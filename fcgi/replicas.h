/*
 * replicas: the rules of [redis] replicas that need no connection: how
 * many replicas a master's ROLE reply says are connected, whether a round
 * waits for them there (WAIT) or its admissions follow on_error at once,
 * and when the count is read again. Not here: reading ROLE and sending
 * WAIT (redis_conn.c, redis.c), what an admission short of its replicas
 * becomes (limiter.c).
 */
#ifndef RLG_REPLICAS_H
#define RLG_REPLICAS_H

struct redisReply;

/* A master's count of connected replicas is read again (ROLE) when it is
 * this old: a replica that attaches or leaves is seen within it. */
#define RLG_REPLICAS_EVERY_MS	1000

/*
 * The number of replicas a master's ROLE reply lists ({"master", offset,
 * {{ip, port, offset}...}}: Redis lists the online ones only), or -1 when
 * rep is no master's ROLE reply (a replica's, an error, NULL). Pure.
 */
int		 replicas_of_role(const struct redisReply *rep);

/*
 * Whether a round sends WAIT for want replicas to a master that ROLE said
 * has connected replicas (-1: not known): 1, unless connected is known and
 * below want. Such a WAIT could only time out, and Redis ends a WAIT that
 * timed out at its next cron tick (1000 / hz ms): never sent, its
 * admissions follow on_error at once. Pure.
 */
int		 replicas_wait(int connected, int want);

/* Whether a count read at read_ms (0: never read) is read again at now_ms
 * (monotonic ms). Pure. */
int		 replicas_due(long long read_ms, long long now_ms);

#endif
