/*
 * slot: the pure parts of Redis Cluster routing: a key's hash slot, the
 * MOVED/ASK redirects and the slot map replies (CLUSTER SLOTS, CLUSTER
 * SHARDS). No connections and no state: the Redis layer (redis*.c) owns
 * those.
 */
#ifndef RLG_SLOT_H
#define RLG_SLOT_H

#include <stddef.h>

#define RLG_SLOTS	16384
#define RLG_HOST_SIZE	256	/* a node's host (name, IPv4 or IPv6) */

struct redisReply;

/* CRC16/XMODEM (poly 0x1021, init 0) of buf[0..len): Redis Cluster's. */
unsigned	 slot_crc16(const char *buf, size_t len);

/*
 * The hash slot of key (len bytes, any bytes): CRC16 of the hash tag (the
 * bytes between the first '{' and the first '}' after it, when not empty)
 * or of the whole key, & 16383.
 */
int		 slot_of(const char *key, size_t len);

/* A redirect error reply: "MOVED 3999 127.0.0.1:6381" or "ASK ...". */
struct slot_redirect {
	int	 ask;			/* 1: ASK, 0: MOVED */
	int	 slot;
	char	 host[RLG_HOST_SIZE];	/* "" when the node did not say:
					 * the host of the node that replied */
	int	 port;
};

/*
 * Parses the error text s (len bytes) as a redirect. The address is
 * host:port split at the last ':' (Redis writes IPv6 hosts without
 * brackets; brackets are accepted too). Returns 0 and fills *out, or -1
 * when s is not a well-formed MOVED or ASK.
 */
int		 slot_parse_redirect(const char *s, size_t len,
		    struct slot_redirect *out);

/*
 * Called once per slot range a slot map reply assigns: slots first..last
 * (inclusive) are served by the master at host:port (host "" when the
 * node did not say: the host of the node asked). Returns 0 to go on, -1
 * to stop the parse (its -1 is returned).
 */
typedef int	(*slot_range_fn)(void *arg, int first, int last,
		    const char *host, int port);

/*
 * Walks a CLUSTER SLOTS or CLUSTER SHARDS (RESP2) reply, calling fn for
 * each range and its master. Returns 0, or -1 with a sentence in err (a
 * malformed reply; fn may have been called for the ranges before it).
 */
int		 slot_parse_slots(const struct redisReply *rep,
		    slot_range_fn fn, void *arg, char *err, size_t errlen);
int		 slot_parse_shards(const struct redisReply *rep,
		    slot_range_fn fn, void *arg, char *err, size_t errlen);

#endif
