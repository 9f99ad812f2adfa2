/*
 * denycache: remembered denials, per process. Sixteen shards, each a hash
 * table with chaining and an LRU list under one mutex, so that workers
 * looking up different keys rarely wait for each other. Deciding whether
 * a denial may be remembered is the limiter's business.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fnv.h"
#include "denycache.h"

#define SHARDS		16
#define SHARD_MAX	(RLG_DENY_CACHE_ENTRIES / SHARDS)
#define BUCKETS		1024	/* per shard: chains stay short */

struct entry {
	struct entry	*chain;		/* next in its bucket */
	struct entry	*newer, *older;	/* the shard's LRU list */
	uint64_t	 hash;
	const void	*tag;
	struct denial	 d;
	size_t		 rule_len;
	size_t		 key_len;
	char		 text[];	/* rule, then key */
};

struct shard {
	pthread_mutex_t	 mu;
	struct entry	*bucket[BUCKETS];
	struct entry	*newest, *oldest;
	size_t		 count;
};

static struct shard shards[SHARDS] = {
#define S	{ .mu = PTHREAD_MUTEX_INITIALIZER }
	S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S
#undef S
};

/* FNV-1a over the tag, the rule and the key. */
static uint64_t
hash_of(const void *tag, const char *rule, size_t rule_len, const char *key,
    size_t key_len)
{
	uintptr_t t = (uintptr_t)tag;
	uint64_t h = fnv_add(FNV_OFFSET, &t, sizeof(t));

	h = fnv_sep(fnv_add(h, rule, rule_len));
	return fnv_add(h, key, key_len);
}

static struct shard *
shard_of(uint64_t h)
{
	return &shards[h >> 60];
}

static struct entry **
slot_of(struct shard *s, uint64_t h)
{
	return &s->bucket[h % BUCKETS];
}

/* The link pointing at the entry for these bytes, or at the chain's end. */
static struct entry **
find(struct shard *s, uint64_t h, const void *tag, const char *rule,
    size_t rule_len, const char *key, size_t key_len)
{
	struct entry **pp;

	for (pp = slot_of(s, h); *pp != NULL; pp = &(*pp)->chain) {
		struct entry *e = *pp;

		if (e->hash == h && e->tag == tag && e->rule_len == rule_len &&
		    e->key_len == key_len &&
		    memcmp(e->text, rule, rule_len) == 0 &&
		    memcmp(e->text + rule_len, key, key_len) == 0)
			break;
	}
	return pp;
}

static void
lru_unlink(struct shard *s, struct entry *e)
{
	if (e->newer != NULL)
		e->newer->older = e->older;
	else
		s->newest = e->older;
	if (e->older != NULL)
		e->older->newer = e->newer;
	else
		s->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void
lru_front(struct shard *s, struct entry *e)
{
	e->older = s->newest;
	e->newer = NULL;
	if (s->newest != NULL)
		s->newest->newer = e;
	s->newest = e;
	if (s->oldest == NULL)
		s->oldest = e;
}

/* Removes e, whose link in its chain is *pp, and frees it. */
static void
drop(struct shard *s, struct entry **pp)
{
	struct entry *e = *pp;

	*pp = e->chain;
	lru_unlink(s, e);
	s->count--;
	free(e);
}

int
denycache_get(const void *tag, const char *rule, const char *key,
    size_t key_len, long long cost, long long mono_us, struct denial *out)
{
	size_t rule_len = strlen(rule);
	uint64_t h = hash_of(tag, rule, rule_len, key, key_len);
	struct shard *s = shard_of(h);
	struct entry **pp, *e;
	int hit = 0;

	pthread_mutex_lock(&s->mu);
	pp = find(s, h, tag, rule, rule_len, key, key_len);
	if ((e = *pp) != NULL) {
		if (mono_us >= e->d.until_us)
			drop(s, pp);
		else if (cost >= e->d.cost) {
			*out = e->d;
			lru_unlink(s, e);
			lru_front(s, e);
			hit = 1;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return hit;
}

void
denycache_put(const void *tag, const char *rule, const char *key,
    size_t key_len, const struct denial *d)
{
	size_t rule_len = strlen(rule);
	uint64_t h = hash_of(tag, rule, rule_len, key, key_len);
	struct shard *s = shard_of(h);
	struct entry **pp, *e, *fresh;

	/* Allocated before the lock: the shard is held for less. */
	if ((fresh = malloc(sizeof(*fresh) + rule_len + key_len)) == NULL)
		return;
	fresh->hash = h;
	fresh->tag = tag;
	fresh->d = *d;
	fresh->rule_len = rule_len;
	fresh->key_len = key_len;
	memcpy(fresh->text, rule, rule_len);
	memcpy(fresh->text + rule_len, key, key_len);

	pthread_mutex_lock(&s->mu);
	pp = find(s, h, tag, rule, rule_len, key, key_len);
	if ((e = *pp) != NULL) {
		/* The latest word from Redis replaces the older one. */
		e->d = *d;
		lru_unlink(s, e);
		lru_front(s, e);
		pthread_mutex_unlock(&s->mu);
		free(fresh);
		return;
	}
	if (s->count >= SHARD_MAX) {
		struct entry *old = s->oldest;

		drop(s, find(s, old->hash, old->tag, old->text, old->rule_len,
		    old->text + old->rule_len, old->key_len));
		/* The link found above may have been the dropped one's. */
		pp = find(s, h, tag, rule, rule_len, key, key_len);
	}
	fresh->chain = NULL;
	*pp = fresh;
	lru_front(s, fresh);
	s->count++;
	pthread_mutex_unlock(&s->mu);
}

void
denycache_clear(void)
{
	struct entry *e, *next;
	size_t i;

	for (i = 0; i < SHARDS; i++) {
		struct shard *s = &shards[i];

		pthread_mutex_lock(&s->mu);
		for (e = s->newest; e != NULL; e = next) {
			next = e->older;
			free(e);
		}
		memset(s->bucket, 0, sizeof(s->bucket));
		s->newest = s->oldest = NULL;
		s->count = 0;
		pthread_mutex_unlock(&s->mu);
	}
}

size_t
denycache_size(void)
{
	size_t i, n = 0;

	for (i = 0; i < SHARDS; i++) {
		pthread_mutex_lock(&shards[i].mu);
		n += shards[i].count;
		pthread_mutex_unlock(&shards[i].mu);
	}
	return n;
}
