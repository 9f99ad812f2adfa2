/*
 * gateway: what the event loops (events.c) and CGI mode share: the
 * configuration generations (a reload swaps them while requests finish on
 * theirs), the jobs of a batch (one call decides them all: read, match,
 * limiter_decide(), audit, count), and this process's numbers for the
 * status endpoint (status.h serves it). Not here: the verdict (limiter.h,
 * decision.h), the reply's bytes (respond.h), connections (conns.h).
 */
#ifndef RLG_GATEWAY_H
#define RLG_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "limiter.h"
#include "metrics.h"
#include "request.h"
#include "decision.h"
#include "rule.h"
#include "version.h"	/* RLG_VERSION, made from debian/changelog */

/* A configuration in use; freed when the last request using it is done. */
struct generation {
	struct conf	*conf;
	int		 refs;		/* requests using it, +1 if current */
	long long	 number;	/* 1 at start, +1 per reload */
	long long	 loaded_ms;	/* installed at, ms since epoch */
};

/* The configuration to decide with, held until gen_release(). */
struct generation *gen_acquire(void);
void		 gen_release(struct generation *g);

/*
 * Makes c the configuration new requests get (taking it over); the one
 * before is freed when its last request is done. NULL, at exit: no
 * configuration any more. Returns 0, or -1 when out of memory: c is freed
 * and the running configuration stays. Thread safe.
 */
int		 gen_install(struct conf *c);

/* One request of a batch. */
struct job {
	/* In (jobs_add() zeroes them): */
	char		**envp;		/* its params; outlive the batch */
	const char	*refused;	/* could not be read whole: why */
	int		 refused_status;
	void		*owner;		/* the caller's (a connection) */
	/* Out, from jobs_decide(): */
	int		 status;	/* for the status endpoint: answer it
					 * with status_page(), no decision */
	struct request	 req;
	struct decision	 d;		/* settled: render it (respond.h) */
	long long	 start_us;
};

/* A loop's batch of jobs, with room for their matches; reused. */
struct jobs;

/*
 * A batch deciding on lim (borrowed; its loop's), counting into w (NULL:
 * nowhere). Returns NULL when out of memory. jobs_free() accepts NULL.
 */
struct jobs	*jobs_new(struct limiter *lim, struct metrics_worker *w);
void		 jobs_free(struct jobs *b);

/* A new job at the end of b, its in-fields zeroed, or NULL when out of
 * memory. Valid until the next jobs_add() or jobs_clear(). */
struct job	*jobs_add(struct jobs *b);

/* b's jobs: n of them, valid until the next jobs_add() or jobs_clear(). */
struct job	*jobs_list(struct jobs *b, size_t *n);

/* Empties b (keeping its memory). */
void		 jobs_clear(struct jobs *b);

/*
 * Decides every job of b with c: reads each request (envp), matches its
 * rules, sets aside those for c's status endpoint when status is set
 * (job->status), then settles the rest in one limiter_decide(), one round
 * trip, and queues their audit rows and counts them. Each d is then final;
 * its verdicts live until the next jobs_decide() on b's limiter.
 */
void		 jobs_decide(struct jobs *b, const struct conf *c, int status);

/*
 * This process's numbers besides the counters (workers, audit, the
 * configuration in force, the deny cache) into p, for the status pages.
 * Thread safe.
 */
void		 gateway_numbers(struct metrics_process *p);

/*
 * Publishes this process's numbers (workers, audit, configuration) to the
 * processes that share its counters (metrics_share()); the status pages
 * do it too. Thread safe; for the audit writer after each write.
 */
void		 gateway_publish(void);

/* How many event loops serve requests; for the status pages. */
extern int	 gateway_threads;

/* Where jobs_decide() queues audit rows; NULL: no audit. */
extern struct audit *gateway_audit;

#endif
