/*
 * denycache: the over-limit cache ([rule:NAME] deny_cache = on). When
 * Redis denies a key for retry_after R, the process remembers the denial
 * until R has passed and the limiter denies repeats itself, without a
 * round trip. One cache per process, shared by its worker threads:
 * bounded (RLG_DENY_CACHE_ENTRIES, least recently used out first) and
 * sharded, one mutex per shard. Knows nothing of Redis or requests.
 */
#ifndef RLG_DENYCACHE_H
#define RLG_DENYCACHE_H

#include <stddef.h>

#define RLG_DENY_CACHE_ENTRIES	8192	/* per process, at most */

/* What Redis said when it denied, and until when that holds. */
struct denial {
	long long	 cost;		/* denied cost: as costly ones hit */
	long long	 remaining;	/* as Redis replied */
	long long	 limit;
	long long	 until_us;	/* monotonic: retry_after has passed */
	long long	 reset_at_us;	/* monotonic: reset_ms has passed */
	long long	 now_us;	/* Redis TIME of the denial */
	long long	 at_us;		/* monotonic time of the denial */
};

/*
 * Looks up (tag, rule, key). tag tells configurations apart (the limiter
 * passes its struct conf): an entry made under one never answers for
 * another. A hit needs mono_us < until_us and cost >= the denied cost
 * (anything else may fit now); it fills *out and returns 1, else 0. An
 * expired entry is dropped. key is key_len bytes, any bytes. Thread safe.
 */
int	 denycache_get(const void *tag, const char *rule, const char *key,
	    size_t key_len, long long cost, long long mono_us,
	    struct denial *out);

/*
 * Remembers d for (tag, rule, key), replacing what was there, evicting
 * the least recently used entry of its shard when full. Out of memory
 * only means nothing is remembered. Thread safe.
 */
void	 denycache_put(const void *tag, const char *rule, const char *key,
	    size_t key_len, const struct denial *d);

/* Forgets everything (SIGHUP: a raised limit applies at once). Thread safe. */
void	 denycache_clear(void);

/* Entries held now, expired ones included until they are met. Thread safe. */
size_t	 denycache_size(void);

#endif
