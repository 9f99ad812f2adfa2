/*
 * slot: Redis Cluster's hash slot function and the parsers of what the
 * cluster says about slots (redirects, CLUSTER SLOTS, CLUSTER SHARDS).
 * Pure functions over bytes and hiredis reply trees; the slot map itself
 * and every connection live in the Redis layer (redis*.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "conf.h"
#include "slot.h"

unsigned
slot_crc16(const char *buf, size_t len)
{
	unsigned crc = 0;
	size_t i;
	int b;

	for (i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)buf[i] << 8;
		for (b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return crc;
}

int
slot_of(const char *key, size_t len)
{
	const char *open, *close;

	/* Redis's keyHashSlot(): the first '{', then the first '}' after
	 * it; an empty tag ("{}") hashes the whole key. */
	if ((open = memchr(key, '{', len)) != NULL) {
		close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
		if (close != NULL && close > open + 1)
			return (int)(slot_crc16(open + 1,
			    (size_t)(close - open - 1)) & (RLG_SLOTS - 1));
	}
	return (int)(slot_crc16(key, len) & (RLG_SLOTS - 1));
}

/* A decimal number in [min, max] from s[0..len), the whole of it. */
static int
num(const char *s, size_t len, long long min, long long max, long long *out)
{
	char buf[24];
	const char *errstr;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return conf_parse_int(buf, min, max, out, &errstr);
}

int
slot_parse_redirect(const char *s, size_t len, struct slot_redirect *out)
{
	const char *p, *end = s + len, *sp, *colon;
	long long v;
	size_t hl;

	memset(out, 0, sizeof(*out));
	if (len > 6 && memcmp(s, "MOVED ", 6) == 0)
		p = s + 6;
	else if (len > 4 && memcmp(s, "ASK ", 4) == 0) {
		p = s + 4;
		out->ask = 1;
	} else
		return -1;
	if ((sp = memchr(p, ' ', (size_t)(end - p))) == NULL ||
	    num(p, (size_t)(sp - p), 0, RLG_SLOTS - 1, &v) == -1)
		return -1;
	out->slot = (int)v;
	p = sp + 1;
	/* Anything after the address (a later Redis may add words) ends
	 * it. */
	if ((sp = memchr(p, ' ', (size_t)(end - p))) != NULL)
		end = sp;
	for (colon = end; colon > p && colon[-1] != ':'; colon--)
		;
	if (colon == p || num(colon, (size_t)(end - colon), 1, 65535,
	    &v) == -1)
		return -1;
	out->port = (int)v;
	hl = (size_t)(colon - 1 - p);
	if (hl >= 2 && p[0] == '[' && p[hl - 1] == ']') {
		p++;
		hl -= 2;
	}
	if (hl >= sizeof(out->host))
		return -1;
	memcpy(out->host, p, hl);
	out->host[hl] = '\0';
	return 0;
}

/* An integer reply, or a string holding one (CLUSTER SHARDS may give
 * either, depending on the version). */
static int
reply_int(const redisReply *r, long long min, long long max, long long *out)
{
	if (r == NULL)
		return -1;
	if (r->type == REDIS_REPLY_INTEGER) {
		if (r->integer < min || r->integer > max)
			return -1;
		*out = r->integer;
		return 0;
	}
	if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
		return num(r->str, r->len, min, max, out);
	return -1;
}

/* A string reply's text into buf (NUL-terminated), or -1. */
static int
reply_str(const redisReply *r, char *buf, size_t len)
{
	if (r == NULL || (r->type != REDIS_REPLY_STRING &&
	    r->type != REDIS_REPLY_STATUS) || r->len >= len)
		return -1;
	memcpy(buf, r->str, r->len);
	buf[r->len] = '\0';
	return 0;
}

/*
 * CLUSTER SLOTS: {start, end, {host, port, id...}, replicas...}...;
 * CLUSTER SHARDS: each shard a flat array of name/value pairs, "slots"
 * {start, end, ...} and "nodes", each a flat array with "ip"/"endpoint",
 * "port", "role". Slot numbers and ports may be integers or strings.
 */
int
slot_parse_slots(const redisReply *rep, slot_range_fn fn, void *arg,
    char *err, size_t errlen)
{
	const redisReply *e, *m;
	long long first, last, port;
	char host[RLG_HOST_SIZE];
	size_t i;

	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
		snprintf(err, errlen, "CLUSTER SLOTS: %s",
		    rep != NULL && rep->type == REDIS_REPLY_ERROR ? rep->str :
		    "the reply is not an array");
		return -1;
	}
	for (i = 0; i < rep->elements; i++) {
		e = rep->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    reply_int(e->element[0], 0, RLG_SLOTS - 1, &first) == -1 ||
		    reply_int(e->element[1], first, RLG_SLOTS - 1,
		    &last) == -1) {
			snprintf(err, errlen, "CLUSTER SLOTS: entry %zu is not "
			    "{start, end, master...}", i + 1);
			return -1;
		}
		m = e->element[2];
		if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
		    reply_str(m->element[0], host, sizeof(host)) == -1 ||
		    reply_int(m->element[1], 1, 65535, &port) == -1) {
			snprintf(err, errlen, "CLUSTER SLOTS: entry %zu has no "
			    "master {host, port}", i + 1);
			return -1;
		}
		if (fn(arg, (int)first, (int)last, host, (int)port) == -1)
			return -1;
	}
	return 0;
}

/* The value of name in a RESP2 map (a flat array of name, value...). */
static const redisReply *
map_get(const redisReply *map, const char *name)
{
	size_t i, n = strlen(name);

	if (map->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (i = 0; i + 1 < map->elements; i += 2)
		if ((map->element[i]->type == REDIS_REPLY_STRING ||
		    map->element[i]->type == REDIS_REPLY_STATUS) &&
		    map->element[i]->len == n &&
		    memcmp(map->element[i]->str, name, n) == 0)
			return map->element[i + 1];
	return NULL;
}

/* The master of a shard's "nodes": its host and port. 0, or -1. */
static int
shard_master(const redisReply *nodes, char *host, size_t hostlen, int *port)
{
	const redisReply *n, *role;
	long long p;
	size_t i;

	if (nodes == NULL || nodes->type != REDIS_REPLY_ARRAY)
		return -1;
	for (i = 0; i < nodes->elements; i++) {
		n = nodes->element[i];
		role = map_get(n, "role");
		if (role == NULL || role->type != REDIS_REPLY_STRING ||
		    strcmp(role->str, "master") != 0)
			continue;
		if ((reply_str(map_get(n, "ip"), host, hostlen) == -1 &&
		    reply_str(map_get(n, "endpoint"), host, hostlen) == -1) ||
		    (reply_int(map_get(n, "port"), 1, 65535, &p) == -1 &&
		    reply_int(map_get(n, "tls-port"), 1, 65535, &p) == -1))
			return -1;
		*port = (int)p;
		return 0;
	}
	return -1;
}

int
slot_parse_shards(const redisReply *rep, slot_range_fn fn, void *arg,
    char *err, size_t errlen)
{
	const redisReply *sh, *slots;
	char host[RLG_HOST_SIZE];
	long long first, last;
	size_t i, j;
	int port;

	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
		snprintf(err, errlen, "CLUSTER SHARDS: %s",
		    rep != NULL && rep->type == REDIS_REPLY_ERROR ? rep->str :
		    "the reply is not an array");
		return -1;
	}
	for (i = 0; i < rep->elements; i++) {
		sh = rep->element[i];
		slots = map_get(sh, "slots");
		if (slots == NULL || slots->type != REDIS_REPLY_ARRAY ||
		    slots->elements % 2 != 0) {
			snprintf(err, errlen, "CLUSTER SHARDS: shard %zu has "
			    "no \"slots\" {start, end...}", i + 1);
			return -1;
		}
		if (slots->elements == 0)
			continue;	/* a shard without slots */
		if (shard_master(map_get(sh, "nodes"), host, sizeof(host),
		    &port) == -1) {
			snprintf(err, errlen, "CLUSTER SHARDS: shard %zu has "
			    "no master with an address and port", i + 1);
			return -1;
		}
		for (j = 0; j < slots->elements; j += 2) {
			if (reply_int(slots->element[j], 0, RLG_SLOTS - 1,
			    &first) == -1 || reply_int(slots->element[j + 1],
			    first, RLG_SLOTS - 1, &last) == -1) {
				snprintf(err, errlen, "CLUSTER SHARDS: shard "
				    "%zu has a bad slot range", i + 1);
				return -1;
			}
			if (fn(arg, (int)first, (int)last, host, port) == -1)
				return -1;
		}
	}
	return 0;
}
