/*
 * gateway: what the event loops (events.c) and CGI mode share: the
 * configuration in use, a request's decision in two halves around the
 * Redis round trip and the decide step between them, its audit rows, and
 * this process's numbers for the status endpoint (status.h serves it).
 */
#ifndef RLG_GATEWAY_H
#define RLG_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "limiter.h"
#include "metrics.h"
#include "request.h"
#include "respond.h"
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
 * configuration any more.
 */
void		 gen_install(struct conf *c);

/* One request being decided. */
struct job {
	struct request	 req;
	struct decision	 d;
	int		 bad_status;	/* request_init()'s */
	int		 status;	/* for the status endpoint: answer it
					 * with status_page() (status.h), no
					 * decision */
	long long	 start_us;
};

/*
 * Reads the request in envp (which must outlive j) and, unless it is for
 * c's status endpoint and status is set (j->status), matches it against
 * c's rules into m[0..RLG_MAX_MATCHES): j->d.n is then the number of
 * matches whose verdicts limiter_decide() must give before job_end().
 */
void		 job_begin(struct job *j, const struct conf *c, char **envp,
		    int status, struct match *m);

/*
 * Makes j (job_begin() done) a bad request answered with status, for a
 * request that could not be read whole (why: a sentence for the reply, the
 * log and its audit row, reason bad_request); no rule decides it.
 */
void		 job_refuse(struct job *j, int status, const char *why);

/*
 * The decide step, the same for a batch (the event loops) and one request
 * (CGI): asks lim, in one round trip (limiter_decide()), for the verdicts
 * of jobs[0..n) (job_begin() done) that have matches: job i's are at
 * m + first[i], its verdicts go to v + first[i]. A job whose first[i] is
 * RLG_NO_MATCHES (a status page) is not asked. reqs: room for n, the
 * limiter's view of them.
 */
#define RLG_NO_MATCHES	SIZE_MAX
void		 jobs_decide(struct limiter *lim, const struct conf *c,
		    const struct job *jobs, const size_t *first, size_t n,
		    struct match *m, struct verdict *v,
		    struct limiter_request *reqs);

/*
 * Decides j from its matches m[0..j->d.n) and their verdicts v, writes
 * the reply into out (RLG_MAX_RESPONSE bytes), queues its audit rows and
 * counts it into w (NULL: nowhere). Returns the reply's length.
 * j->d.delay_ms is what an allowed request waits before the reply goes out
 * (leaky_bucket).
 */
size_t		 job_end(struct job *j, const struct match *m,
		    const struct verdict *v, struct metrics_worker *w,
		    char *out);

/*
 * Decides j (job_begin() done, its matches in m) with jobs_decide() on
 * lim, then job_end() into out, and waits out a leaky_bucket delay in
 * this thread: CGI mode's way, one request per process.
 */
size_t		 job_serve(const struct conf *c, struct limiter *lim,
		    struct job *j, struct match *m, struct verdict *v,
		    struct metrics_worker *w, char *out);

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

/* Where job_end() queues audit rows; NULL: no audit. */
extern struct audit *gateway_audit;

#endif
