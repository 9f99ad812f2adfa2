/*
 * intern: byte strings (rule names, "rule\0key" pairs, parameter sets)
 * mapped to dense ids 0, 1, 2... so that millions of rows can be grouped
 * with integers. A plain open-addressing hash; not thread safe.
 */
#ifndef RLG_REPORT_INTERN_H
#define RLG_REPORT_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define RLG_INTERN_FAIL	UINT32_MAX

struct intern_entry {
	char		*bytes;		/* a NUL-terminated copy of len bytes */
	size_t		 len;
	uint64_t	 hash;
};

struct intern {
	uint32_t		*slots;	/* id + 1; 0 = empty */
	size_t			 cap;	/* a power of two */
	struct intern_entry	*v;	/* by id */
	size_t			 n;
	size_t			 vcap;
};

/* The id of bytes[0..len), adding a copy when new; RLG_INTERN_FAIL when out of memory. */
uint32_t	 intern_id(struct intern *in, const void *bytes, size_t len);

/* The bytes of an id, NUL-terminated. */
const char	*intern_bytes(const struct intern *in, uint32_t id);

/*
 * A pair of optional strings (rule and key) as one id: a or b may be NULL,
 * which is kept apart from "". intern_pair_get() gives them back, pointing
 * into the table (valid until intern_free()).
 */
uint32_t	 intern_pair(struct intern *in, const char *a, const char *b);
void		 intern_pair_get(const struct intern *in, uint32_t id,
		    const char **a, const char **b);

/* Frees everything; in may be zeroed or half-built. */
void		 intern_free(struct intern *in);

#endif
