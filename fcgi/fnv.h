/*
 * fnv: 64-bit FNV-1a, the hash of the gateway's in-memory tables (the deny
 * cache, the local limiter). Not for anything an adversary may steer into
 * collisions that matter: both tables only ever admit less on one.
 */
#ifndef RLG_FNV_H
#define RLG_FNV_H

#include <stddef.h>
#include <stdint.h>

#define FNV_OFFSET	14695981039346656037ULL
#define FNV_PRIME	1099511628211ULL

/* h with len bytes at p added. */
static inline uint64_t
fnv_add(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * FNV_PRIME;
	return h;
}

/* h with a separator added: name "a" key "bc" is not name "ab" key "c". */
static inline uint64_t
fnv_sep(uint64_t h)
{
	return (h ^ 0xff) * FNV_PRIME;
}

#endif
