/*
 * intern: dense ids for byte strings, so that the report groups rows with
 * integers. Open addressing with linear probing; grows at half full.
 */
#include <stdlib.h>
#include <string.h>

#include "intern.h"

/* 64-bit FNV-1a. */
static uint64_t
intern_hash(const void *bytes, size_t len)
{
	const unsigned char *p = bytes;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int
grow(struct intern *in)
{
	size_t cap = in->cap ? in->cap * 2 : 1024;
	uint32_t *slots = calloc(cap, sizeof(*slots));

	if (slots == NULL)
		return -1;
	for (size_t id = 0; id < in->n; id++) {
		size_t i = in->v[id].hash & (cap - 1);

		while (slots[i] != 0)
			i = (i + 1) & (cap - 1);
		slots[i] = (uint32_t)id + 1;
	}
	free(in->slots);
	in->slots = slots;
	in->cap = cap;
	return 0;
}

uint32_t
intern_id(struct intern *in, const void *bytes, size_t len)
{
	uint64_t h = intern_hash(bytes, len);
	struct intern_entry *e;
	size_t i;

	if ((in->n + 1) * 2 > in->cap && grow(in) == -1)
		return RLG_INTERN_FAIL;
	for (i = h & (in->cap - 1); in->slots[i] != 0; i = (i + 1) & (in->cap - 1)) {
		e = &in->v[in->slots[i] - 1];
		if (e->hash == h && e->len == len && memcmp(e->bytes, bytes, len) == 0)
			return in->slots[i] - 1;
	}
	if (in->n == in->vcap) {
		size_t vcap = in->vcap ? in->vcap * 2 : 256;
		struct intern_entry *v = realloc(in->v, vcap * sizeof(*v));

		if (v == NULL)
			return RLG_INTERN_FAIL;
		in->v = v;
		in->vcap = vcap;
	}
	e = &in->v[in->n];
	if ((e->bytes = malloc(len + 1)) == NULL)
		return RLG_INTERN_FAIL;
	memcpy(e->bytes, bytes, len);
	e->bytes[len] = '\0';
	e->len = len;
	e->hash = h;
	in->slots[i] = (uint32_t)in->n + 1;
	return (uint32_t)in->n++;
}

const char *
intern_bytes(const struct intern *in, uint32_t id)
{
	return in->v[id].bytes;
}

uint32_t
intern_pair(struct intern *in, const char *a, const char *b)
{
	size_t alen = a ? strlen(a) : 0, blen = b ? strlen(b) : 0;
	size_t len = alen + blen + 3;
	char small[512], *buf = len <= sizeof(small) ? small : malloc(len);
	uint32_t id;

	if (buf == NULL)
		return RLG_INTERN_FAIL;
	/* "<flag>a\0<flag>b": the flag tells NULL ('-') from a string ('+'). */
	buf[0] = a ? '+' : '-';
	memcpy(buf + 1, a ? a : "", alen);
	buf[alen + 1] = '\0';
	buf[alen + 2] = b ? '+' : '-';
	memcpy(buf + alen + 3, b ? b : "", blen);
	id = intern_id(in, buf, len);
	if (buf != small)
		free(buf);
	return id;
}

void
intern_pair_get(const struct intern *in, uint32_t id, const char **a,
    const char **b)
{
	const char *p = in->v[id].bytes;
	size_t alen = strlen(p + 1);

	*a = p[0] == '+' ? p + 1 : NULL;
	*b = p[alen + 2] == '+' ? p + alen + 3 : NULL;
}

void
intern_free(struct intern *in)
{
	for (size_t i = 0; i < in->n; i++)
		free(in->v[i].bytes);
	free(in->v);
	free(in->slots);
	memset(in, 0, sizeof(*in));
}
