/*
 * sentinel: finds the master of [redis] master_name through the Sentinels
 * of [redis] address, as the Sentinel client guidelines say, and watches
 * them for failovers (+switch-master). For the Redis layer (redis*.c); no
 * data calls here.
 */
#ifndef RLG_SENTINEL_H
#define RLG_SENTINEL_H

#include <stddef.h>

#include "conf.h"

struct redisContext;

/*
 * Asks c's Sentinels in turn for the master, connects to it as redis_dial()
 * does and checks ROLE. Returns that blocking connection (the caller frees
 * it with redis_io_free()) with the master's host and port, or NULL with a
 * sentence in err naming each Sentinel asked and why. Thread safe.
 */
struct redisContext *sentinel_master(const struct conf *c, char *host,
		    size_t hostlen, int *port, char *err, size_t errlen);

/*
 * Starts (first call) the process's watcher thread, or points it at c's
 * Sentinels if a reload changed them: it stays subscribed to
 * +switch-master on one Sentinel (the next one when that one goes) and
 * bumps sentinel_epoch() when master_name's master moves, and each time
 * it (re)subscribes (it may have missed one). Counted: each call wants one
 * sentinel_unwatch(); the last stops and joins the thread.
 */
void		 sentinel_watch(const struct conf *c);
void		 sentinel_unwatch(void);

/* Changes when the master may have moved. Lock free. */
long		 sentinel_epoch(void);

#endif
