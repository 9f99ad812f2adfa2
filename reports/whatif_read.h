/*
 * whatif_read: the recorded requests, in time order, for the what-if
 * replay. Reads the rows of every database (either layout; a second-layout
 * file by ids, rowids.h), puts each file's rows in time order through a
 * bounded reorder buffer, merges the files into one timeline, and gathers
 * the rows of one request (its request id) into one group. Rows with no
 * rule are left out. Not here: what the replay does with a request
 * (whatif.c).
 */
#ifndef RLG_REPORT_WHATIF_READ_H
#define RLG_REPORT_WHATIF_READ_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

/*
 * A file's rows are reordered within this span of their times (ms): a
 * writer commits every flush_interval, waits for another's lock up to
 * AUDIT_BUSY_MS; longer (an outage's queue) is replayed late and said.
 * A longer span costs time: the buffer leaves the CPU's caches...
 */
#define RLG_WHATIF_REORDER_MS	1000
/* ...holding at most this many rows a file; a row later than that is
 * replayed where it comes (counted in late). */
#define RLG_WHATIF_REORDER_ROWS	(1u << 19)
/* Rows of one request id further apart than this (ms) are two requests
 * (one request's rules are decided in one call a Redis node, each node
 * within [redis] timeout). */
#define RLG_WHATIF_GROUP_MS	200
/* Rows of one request at most (the gateway's RLG_MAX_MATCHES). */
#define RLG_WHATIF_GROUP_MAX	32

#define RLG_WHATIF_NONE		UINT32_MAX	/* no text */

/* The reason column, as the replay tells them apart. */
enum wr_reason {
	WR_LIMIT, WR_REDIS_ERROR, WR_DRY_RUN, WR_BAD_REQUEST, WR_LOCAL_CACHE,
	WR_UNLIMITED, WR_OTHER_RULE, WR_LOCAL, WR_OTHER
};

/* One decision row. Texts are ids of its file (whatif_text()). */
struct wrow {
	int64_t		 ts_ms;
	int64_t		 id;		/* rowid in its file */
	uint64_t	 rq, rn;	/* the request id, as two numbers */
	int64_t		 cost;		/* -1: NULL */
	uint32_t	 src;		/* the database's index */
	uint32_t	 rule;		/* the global rule (whatif_rule_name()) */
	uint32_t	 key, path, ip, method;
	uint32_t	 params;	/* the file's parameter set (whatif_params()) */
	uint8_t		 allowed;
	uint8_t		 reason;	/* enum wr_reason */
	uint8_t		 lone;		/* not in the leaders' table: no request
					 * id, or a request closed */
	uint8_t		 done;		/* internal */
	uint64_t	 next;		/* internal: the group's next row */
};

/* A rule's parameters as a row recorded them (-1: NULL). */
struct wparams {
	const char	*algorithm;	/* NULL: unknown */
	int64_t		 limit, window_ms, burst;
};

struct wreader;

/*
 * Opens a reader over every database: rows before until_ms (INT64_MAX:
 * all). fields: whether the replay needs path, client address and method
 * (else they read as RLG_WHATIF_NONE, faster). Returns the reader, or NULL
 * with a sentence in err. The caller frees it with whatif_read_free().
 */
struct wreader	*whatif_read_open(struct rdbs *dbs, int64_t until_ms, int fields,
		    char *err, size_t errlen);
void		 whatif_read_free(struct wreader *r);

/*
 * The next request: *rows points at its n rows (valid until the next
 * call). Returns 1, 0 at the end, or -1 with a sentence in err.
 */
int		 whatif_read_next(struct wreader *r, const struct wrow ***rows,
		    size_t *n, char *err, size_t errlen);

/* The text of id in database src, or NULL. */
const char	*whatif_text(const struct wreader *r, uint32_t src, uint32_t id);

/* The name of global rule id; the number of them. */
const char	*whatif_rule_name(const struct wreader *r, uint32_t id);
size_t		 whatif_rules(const struct wreader *r);

/* The parameters of a row. */
const struct wparams *whatif_params(const struct wreader *r, const struct wrow *w);

/* Rows replayed out of time order (later than the reorder buffer). */
int64_t		 whatif_late(const struct wreader *r);

/*
 * Every rule name in the databases (their rule tables, not their rows),
 * into names (n of them, sorted; the caller frees each and the array).
 * Returns 0, or -1 with a sentence in err.
 */
int		 whatif_rule_names(struct rdbs *dbs, char ***names, size_t *n,
		    char *err, size_t errlen);

#endif
