/*
 * top: the keys with the most denials over all databases (within the
 * filter), with their deny ratio. One streaming pass; ties go to the higher
 * ratio, then rule and key in byte order.
 */
#ifndef RLG_REPORT_TOP_H
#define RLG_REPORT_TOP_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

struct top_row {
	char		*rule;
	char		*key;		/* NULL when the rows had none */
	int64_t		 denied;
	int64_t		 total;
};

struct top {
	struct top_row	*v;		/* at most n rows, only keys with denials */
	size_t		 n;
	int64_t		 keys;		/* keys seen in all */
	int64_t		 keys_denied;	/* keys with at least one denial */
};

/* Fills t (zeroed by the caller). Returns 0, or -1 with a sentence in err. */
int		 top_run(struct top *t, struct rdbs *dbs, const struct filter *f,
		    size_t n, char *err, size_t errlen);

void		 top_free(struct top *t);

#endif
