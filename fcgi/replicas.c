/*
 * replicas: the rules of [redis] replicas that need no connection: what a
 * master's ROLE reply says of its replicas, whether a round waits for them,
 * when their count is read again. The connections and the WAIT are the
 * Redis layer's (redis_conn.c, redis.c).
 */
#include <string.h>

#include <hiredis/hiredis.h>

#include "replicas.h"

int
replicas_of_role(const redisReply *rep)
{
	const redisReply *list;

	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY ||
	    rep->elements < 3 || rep->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(rep->element[0]->str, "master") != 0)
		return -1;
	list = rep->element[2];
	if (list->type != REDIS_REPLY_ARRAY || list->elements > 1000000)
		return -1;
	return (int)list->elements;
}

int
replicas_wait(int connected, int want)
{
	return connected < 0 || connected >= want;
}

int
replicas_due(long long read_ms, long long now_ms)
{
	return read_ms == 0 || now_ms - read_ms >= RLG_REPLICAS_EVERY_MS;
}
