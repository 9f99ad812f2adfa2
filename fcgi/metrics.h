/*
 * metrics: the counters behind the status endpoint (<status_path>/metrics
 * and /health). Each worker thread counts into its own struct
 * metrics_worker, with no lock and no shared cache line on the request
 * path; a scrape sums them, over every process that serves the same
 * listening socket and configuration (spawn-fcgi -F N) once they share
 * their counters (metrics_share()). Sums them for a scrape; the texts
 * (Prometheus, the health JSON), the HTTP framing and who may ask are
 * status.h's.
 */
#ifndef RLG_METRICS_H
#define RLG_METRICS_H

#include <stddef.h>

#include "conf.h"
#include "decision.h"

#ifndef RLG_METRICS_RULES	/* the Makefile's fuzz_metrics: fewer */
#define RLG_METRICS_RULES	1024	/* rule names counted, all reloads */
#endif

/* How a rule's decision counts (the "outcome" label). */
enum metrics_outcome {
	RLG_OUT_ALLOWED,
	RLG_OUT_DENIED,
	RLG_OUT_REDIS_ERROR,
	RLG_OUT_DRY_RUN,
	RLG_OUT_BAD_REQUEST,
	RLG_OUT_LOCAL_CACHE,
	RLG_OUT_OTHER_RULE,	/* admitted, but another rule denied */
	RLG_OUT_COUNT
};

struct metrics_worker;

/*
 * A worker's counters, scraped until metrics_worker_free(). Only the
 * thread that owns it may count into it. NULL when out of memory (every
 * counting function accepts NULL and then counts nothing).
 */
struct metrics_worker	*metrics_worker_new(void);

/* Gives w up; its counts stay in the totals. Accepts NULL. */
void	 metrics_worker_free(struct metrics_worker *w);

/*
 * Shares the counters with every process that serves listen_fd's socket
 * (the same socket: its inode) with the configuration at c's path: one
 * POSIX shared memory object, /dev/shm/rlgate-HASH, created by the first
 * and removed by the last (metrics_unshare()). Call once, at start, after
 * metrics_register_rules(c) and before any metrics_worker_new(); c's rules
 * are registered again in the shared names. Returns 0, or -1 (logged) when
 * the counters stay this process's own. Not for CGI mode.
 */
int	 metrics_share(int listen_fd, struct conf *c);

/*
 * At exit, once no worker counts any more: leaves the shared counters (the
 * counts stay) and removes the object when no process is left. Also run
 * by exit() (atexit); a second call does nothing.
 */
void	 metrics_unshare(void);

/*
 * Gives every rule of c its counter slot (c's rules' metrics_slot), by
 * name, so that a rule keeps its series across reloads. Call before c is
 * used by any worker. A name beyond RLG_METRICS_RULES is not counted
 * (logged once). Thread safe.
 */
void	 metrics_register_rules(struct conf *c);

/*
 * Counting, into w (NULL: nowhere), by w's own thread only, lock free:
 * metrics_decided(), one request decided (its rules' outcomes, d as
 * limiter_decide() settled it; d borrowed); metrics_busy(), serving a request
 * (1) or waiting (0); metrics_redis_latency(), one pipelined round trip that
 * answered and its duration; metrics_redis_error(), one call that failed
 * (connect, timeout, error reply); metrics_replica_timeout(), one call
 * counted on a master where fewer than [redis] replicas acknowledged it in
 * time (its rules followed on_error).
 */
void	 metrics_decided(struct metrics_worker *w, const struct decision *d);
void	 metrics_busy(struct metrics_worker *w, int busy);
void	 metrics_redis_latency(struct metrics_worker *w, long long us);
void	 metrics_redis_error(struct metrics_worker *w);
void	 metrics_replica_timeout(struct metrics_worker *w);

/* What the process knows beyond the counters, for a scrape. */
struct metrics_process {
	int		 workers;
	int		 audit;		/* an audit database is open */
	long long	 audit_written;
	long long	 audit_queued;
	long long	 audit_retries;
	long long	 audit_lost;	/* rows lost, the queue full */
	long long	 audit_lag_ms;	/* age of the oldest queued row */
	long long	 generation;	/* configurations loaded, 1 at start */
	long long	 loaded_ms;	/* the current one's, ms since epoch */
	size_t		 deny_cache_entries;
	int		 processes;	/* sharing the counters (metrics_total) */
};

/*
 * Makes p, this process's numbers, what the other processes sharing the
 * counters see of it. Thread safe; a no-op when not shared.
 */
void	 metrics_publish(const struct metrics_process *p);

/*
 * Turns p, this process's numbers, into the totals of every process
 * sharing the counters, as each last published them (and the audit
 * counters of the processes gone): sums; audit_lag_ms the largest;
 * generation and loaded_ms those of the oldest configuration in force.
 * Sets p->processes. Thread safe.
 */
void	 metrics_total(struct metrics_process *p);

/*
 * Reading the counters, for a scrape: each figure is the sum over every
 * worker slot ever taken, in every process sharing the counters, read now
 * (a worker counting meanwhile may be in one figure and not the next).
 * Thread safe.
 */

/* Redis round-trip histogram bounds, in microseconds (le labels in s). */
#define RLG_METRICS_BOUNDS	13
extern const long long metrics_bounds_us[RLG_METRICS_BOUNDS];

struct metrics_counts {
	unsigned long long requests;		/* metrics_decided() */
	unsigned long long redis_errors;
	unsigned long long replica_timeouts;
	/* on_error = local: rule decisions made in memory */
	unsigned long long local_allowed;
	unsigned long long local_denied;
	/* Round trips per bucket (not cumulative); the last: beyond the
	 * last bound. */
	unsigned long long latency[RLG_METRICS_BOUNDS + 1];
	unsigned long long latency_sum_us;
	unsigned long long latency_count;
};

/* Fills n with the sums of the counters above. */
void	 metrics_counts(struct metrics_counts *n);

/* How many rule names have a counter slot (0 .. RLG_METRICS_RULES). */
int	 metrics_rules_named(void);

/*
 * Slot's rule name (slot below metrics_rules_named()): at most
 * RLG_MAX_RULE_NAME bytes, not always NUL-terminated (print it with
 * %.*s); its bytes are [A-Za-z0-9_.-] when the table is sound.
 */
const char *metrics_rule_name(int slot);

/* Decisions of the rule in slot with outcome o; slot RLG_METRICS_NO_RULE:
 * the bad requests no rule is named for. */
#define RLG_METRICS_NO_RULE	(-1)
unsigned long long metrics_decisions(int slot, enum metrics_outcome o);

/* o's "outcome" label value. */
const char *metrics_outcome_name(enum metrics_outcome o);

/* Workers serving a request now, in the processes still running. */
int	 metrics_workers_busy(void);

#endif
