/*
 * status: the status endpoint, <status_path>/health and
 * <status_path>/metrics, beside the request path: who may ask, the HTTP
 * framing, and the texts it serves (the Prometheus text exposition format
 * 0.0.4, the health JSON). It reads the counters (metrics.h), this
 * process's numbers (gateway.h) and each Redis master's health; it counts
 * nothing, decides nothing and writes no audit row. The event loops hand
 * it the requests for its path (jobs_decide() tells them apart); nothing
 * it calls calls back into it.
 */
#ifndef RLG_STATUS_H
#define RLG_STATUS_H

#include <stddef.h>

#include "conf.h"
#include "metrics.h"
#include "redis.h"
#include "request.h"

/* A growing buffer. */
struct page {
	char		*buf;
	size_t		 cap;
};

/*
 * Answers req, a request for c's status endpoint (status_path or under
 * it), into p (realloc'd as need be; the caller frees p->buf), using r, the
 * calling loop's Redis connections, for the health check. Returns the
 * reply's length (0 when out of memory). r's loop only: not thread safe.
 */
size_t		 status_page(const struct conf *c, const struct request *req,
		    struct redis *r, struct page *p);

/*
 * Writes the Prometheus text (format 0.0.4) of every counter, plus p
 * (the processes' numbers, metrics_total()'s) and nodes[0..nnodes) (each
 * master as the scrape found it), into out (outlen bytes). Returns the
 * length it needs: when that is outlen or more, out holds a cut text and
 * the caller retries with a larger buffer (like snprintf). Thread safe.
 */
size_t		 status_prometheus(const struct metrics_process *p,
		    const struct redis_health *nodes, int nnodes, char *out,
		    size_t outlen);

/* What /health reports. */
struct status_health {
	const char	*version;
	int		 redis_ok;	/* every node answers */
	const char	*redis_address;	/* as configured */
	const char	*redis_error;	/* why not, when not */
	long long	 redis_latency_us;	/* the slowest node's */
	const struct redis_health *nodes;	/* each master (redis.h) */
	int		 nnodes;
	struct metrics_process p;
	const char	*config_path;
	size_t		 rules;
	long long	 audit_lag_max_ms;	/* beyond: audit unhealthy */
};

/*
 * Writes the health JSON of h into out (outlen bytes, cut if need be) and
 * returns its length; *healthy is 1 when Redis answers and the audit keeps
 * up (lag at most audit_lag_max_ms), else 0 (the endpoint answers 503).
 */
size_t		 status_health_json(const struct status_health *h, char *out,
		    size_t outlen, int *healthy);

#endif
