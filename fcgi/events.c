/*
 * events: the worker threads. Each runs one event loop (loop.h) with its
 * FastCGI connections (conns.h), its Redis connections and limiter, and
 * decides in the loop's before-sleep hook, once a turn, every request that
 * became complete: one jobs_decide() (gateway.h), one round trip to Redis
 * however many requests and rules there are, then each reply rendered
 * (respond.h, or status.h for the status endpoint) and handed back.
 * Nothing waits in a loop but that round trip, the health check's PING
 * and a full audit queue, each bounded (Redis timeouts, the queue's room).
 *
 * The round trip is waited for in the Redis layer's own poll() (redis.c),
 * not in this loop: a batch is decided whole before the next is read, so
 * the connections that wait meanwhile wait one round trip at most, and
 * the limiter stays a call that returns final verdicts. Waiting in the
 * loop would need a limiter that resumes (its undo round, a cluster's
 * redirects) and several batches in flight to gain anything; not tried.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "conns.h"
#include "events.h"
#include "gateway.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "redis.h"
#include "respond.h"
#include "status.h"

/* The reply when a request cannot even be decided. */
#define UNAVAILABLE	"Status: 503 Service Unavailable\r\nRetry-After: 1" \
			"\r\nContent-Type: text/plain\r\n\r\nout of memory\n"

struct worker {
	pthread_t	 thread;
	struct loop	*loop;
	struct conns	*conns;
	struct loop_fd	 wake;		/* eventfd written by events_stop() */
	struct redis	*redis;		/* the loop's connections */
	struct limiter	*lim;		/* over redis */
	struct metrics_worker *metrics;
	struct jobs	*jobs;
	char		*out;		/* one reply */
	struct page	 status;
};

static struct worker	*workers;
static int		 nworkers;
static int		 listen_fds[RLG_MAX_LISTENERS];
static int		 nlisten;
static atomic_int	 stopping;
static long long	 stop_deadline_us;	/* set before stopping */

/* The reply of job j (decided) into W->out; returns its length. */
static size_t
render(struct worker *W, const struct conf *cf, const struct job *j)
{
	if (j->status)
		return status_page(cf, &j->req, W->redis, &W->status);
	return respond_write(&j->d, W->out, RLG_MAX_RESPONSE);
}

/*
 * Decides the requests that are complete: all of them in one
 * jobs_decide(), then each reply, sent at once. Requests that complete
 * meanwhile (the next one on a kept connection) are the next batch.
 */
static void
decide_batch(struct worker *W, struct conn **ready, size_t n)
{
	struct generation *g = gen_acquire();
	const struct conf *cf = g->conf;
	struct job *j;
	size_t i, len;

	jobs_clear(W->jobs);
	for (i = 0; i < n; i++) {
		if ((j = jobs_add(W->jobs)) == NULL) {
			log_error("events: out of memory; %zu requests "
			    "answered 503", n - i);
			for (; i < n; i++)
				conn_reply(W->conns, ready[i], UNAVAILABLE,
				    sizeof(UNAVAILABLE) - 1, 0);
			break;
		}
		j->envp = conn_params(ready[i]);
		j->refused = conn_refused(ready[i], &j->refused_status);
		j->owner = ready[i];
	}
	jobs_decide(W->jobs, cf, 1);
	j = jobs_list(W->jobs, &n);
	for (i = 0; i < n; i++) {
		len = render(W, cf, &j[i]);
		/* leaky_bucket: the consumer waits its turn. */
		conn_reply(W->conns, j[i].owner, j[i].status ? W->status.buf :
		    W->out, len, !j[i].status && j[i].d.allowed &&
		    j[i].d.delay_ms > 0 ? mono_us() + j[i].d.delay_ms * 1000 :
		    0);
	}
	jobs_clear(W->jobs);
	gen_release(g);
}

/* The before-sleep hook: where the batch is decided, once a turn. */
static void
before_sleep(struct loop *l, void *arg)
{
	struct worker *W = arg;
	struct conn **ready;
	size_t n;

	(void)l;
	while ((ready = conns_take_ready(W->conns, &n)), n > 0)
		decide_batch(W, ready, n);
	metrics_busy(W->metrics, 0);
}

static void
after_sleep(struct loop *l, void *arg)
{
	struct worker *W = arg;

	(void)l;
	metrics_busy(W->metrics, 1);
}

static void
woken(struct loop *l, struct loop_fd *f, unsigned ready)
{
	uint64_t tick;

	(void)l;
	(void)ready;
	if (read(f->fd, &tick, sizeof(tick)) < 0)
		return;		/* read again later */
}

static void *
worker_main(void *arg)
{
	struct worker *W = arg;
	int stop_seen = 0;

	pthread_setname_np(pthread_self(), "events-loop");
	for (;;) {
		if (!stop_seen && atomic_load(&stopping)) {
			stop_seen = 1;
			conns_stop(W->conns);
		}
		if (stop_seen && (conns_open(W->conns) == 0 ||
		    mono_us() >= stop_deadline_us))
			break;
		if (loop_turn(W->loop, stop_seen ? 100 : -1) == -1) {
			log_error("events: epoll_wait: %s", strerror(errno));
			break;
		}
	}
	metrics_busy(W->metrics, 0);
	return NULL;
}

static void
worker_free(struct worker *W)
{
	conns_free(W->conns);
	if (W->wake.fd >= 0)
		close(W->wake.fd);
	loop_free(W->loop);
	jobs_free(W->jobs);
	limiter_free(W->lim);
	redis_free(W->redis);
	metrics_worker_free(W->metrics);
	free(W->out);
	free(W->status.buf);
}

static int
worker_init(struct worker *W)
{
	W->wake.fd = -1;
	if ((W->loop = loop_new()) == NULL ||
	    (W->conns = conns_new(W->loop, listen_fds, nlisten)) == NULL ||
	    (W->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
		return -1;
	W->wake.proc = woken;
	W->wake.arg = W;
	if (loop_watch(W->loop, &W->wake, LOOP_READABLE) == -1)
		return -1;
	if ((W->redis = redis_new()) == NULL ||
	    (W->lim = limiter_new(W->redis)) == NULL ||
	    (W->metrics = metrics_worker_new()) == NULL ||
	    (W->jobs = jobs_new(W->lim, W->metrics)) == NULL ||
	    (W->out = malloc(RLG_MAX_RESPONSE)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	limiter_set_metrics(W->lim, W->metrics);
	loop_before_sleep(W->loop, before_sleep, W);
	loop_after_sleep(W->loop, after_sleep, W);
	return 0;
}

int
events_start(const int *fds, int nfd, int n)
{
	int flags, i;

	if (nfd < 1 || nfd > RLG_MAX_LISTENERS) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < nfd; i++) {
		if ((flags = fcntl(fds[i], F_GETFL)) == -1 ||
		    fcntl(fds[i], F_SETFL, flags | O_NONBLOCK) == -1)
			return -1;
		listen_fds[i] = fds[i];
	}
	nlisten = nfd;
	if ((workers = calloc((size_t)n, sizeof(*workers))) == NULL)
		return -1;
	nworkers = n;
	for (i = 0; i < n; i++) {
		if (worker_init(&workers[i]) == -1)
			return -1;
		if ((errno = pthread_create(&workers[i].thread, NULL,
		    worker_main, &workers[i])) != 0)
			return -1;
	}
	return 0;
}

int
events_stop(int timeout_s)
{
	struct timespec deadline;
	uint64_t one = 1;
	int i, late = 0;

	stop_deadline_us = mono_us() + (long long)timeout_s * 1000000;
	atomic_store(&stopping, 1);
	for (i = 0; i < nworkers; i++)
		if (write(workers[i].wake.fd, &one, sizeof(one)) < 0)
			log_warn("events: cannot wake loop %d", i);
	for (i = 0; i < nworkers; i++) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += timeout_s + 1;
		if (pthread_timedjoin_np(workers[i].thread, NULL,
		    &deadline) != 0) {
			log_warn("loop %d did not finish in %d s", i,
			    timeout_s);
			late++;
			continue;
		}
		worker_free(&workers[i]);
	}
	if (late == 0)
		free(workers);
	return late;
}
