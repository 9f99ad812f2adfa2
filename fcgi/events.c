/*
 * events: epoll loops that serve FastCGI connections without a thread per
 * request. A loop wakes, reads what every ready connection sent, and
 * decides all the requests that are complete in one batch: one
 * jobs_decide() (gateway.h) for all of them, one limiter_decide(), which
 * is one round trip to Redis however many requests and rules there are.
 * Replies go out as soon as they are written, or when their leaky_bucket
 * delay (a timer) has passed.
 *
 * A connection moves on in progress(): send what is pending, close when
 * the web server asked for that, take the next request from what was
 * read. Nothing waits in a loop but limiter_decide(), the health check's
 * PING and a full audit queue, and those waits are bounded by the Redis
 * timeouts and the audit queue's room.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "events.h"
#include "gateway.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "status.h"
#include "wire.h"

#define IN_FIRST	4096
#define IN_MAX		(2 * (8 + 65535 + 255))	/* two records of any size */
#define MAX_EVENTS	256
#define ACCEPTS		64	/* per wake-up: the connections already
				 * open are served between runs */

struct conn {
	int		 fd;
	struct wire	 w;
	unsigned char	*in;		/* read, not yet taken by wire_feed() */
	size_t		 in_len, in_cap;
	int		 queued;	/* complete, in the loop's next batch */
	int		 delayed;	/* its reply waits for a timer */
	int		 gone;		/* the peer closed: no more reading */
	int		 lingering;	/* our end is shut, waiting for theirs */
	unsigned	 watching;	/* the epoll events asked for, 0: not
					 * in epoll */
	struct conn	*prev, *next;	/* the loop's connections */
};

struct timer {
	long long	 due_us;
	struct conn	*c;
};

struct loop {
	pthread_t	 thread;
	int		 ep;
	int		 wake;		/* eventfd written by events_stop() */
	struct redis	*redis;		/* the loop's connections */
	struct limiter	*lim;		/* over redis */
	struct metrics_worker *metrics;
	struct conn	*conns;
	size_t		 nconns;
	struct conn	*spares;	/* closed, kept for the next ones */
	size_t		 nspares;
	struct conn	**ready, **batch;	/* complete requests */
	size_t		 nready, cap;
	struct job	*jobs;		/* the batch's, cap of them */
	size_t		*first;		/* where each job's matches start */
	struct limiter_request *reqs;	/* the batch's for the limiter */
	struct match	*m;		/* the batch's matches */
	struct verdict	*v;
	size_t		 mcap;
	char		*out;		/* one reply */
	struct page	 status;
	struct timer	*timers;	/* a min-heap on due_us */
	size_t		 ntimers, tcap;
};

static struct loop	*loops;
static int		 nloops;
static int		 listen_fds[RLG_MAX_LISTENERS];
static int		 nlisten;
/* epoll data of listen_fds[i] is &listen_tags[i]. */
static char		 listen_tags[RLG_MAX_LISTENERS];
static atomic_int	 stopping;
static long long	 stop_deadline_us;	/* set before stopping */
static char		 wake_tag;		/* epoll data of the eventfd */

static void	progress(struct loop *, struct conn *);

/*
 * A connection for fd, one of the loop's spares when there is one: most
 * web servers open a connection per request, and a spare's buffers are
 * already there.
 */
static struct conn *
conn_new(struct loop *L, int fd)
{
	struct conn *c = L->spares;

	if (c != NULL) {
		L->spares = c->next;
		L->nspares--;
	} else if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->fd = fd;
	c->next = L->conns;
	if (L->conns != NULL)
		L->conns->prev = c;
	L->conns = c;
	L->nconns++;
	return c;
}

/* Frees c, and what it holds. */
static void
conn_free(struct conn *c)
{
	wire_free(&c->w);
	free(c->in);
	free(c);
}

/*
 * Closes c and keeps it as a spare, with the buffers an ordinary request
 * needs (input at its first size, wire_reset()'s). A loop takes at most
 * MAX_EVENTS connections a wake-up, so that many spares serve a steady
 * load without allocating.
 */
static void
conn_close(struct loop *L, struct conn *c)
{
	struct wire w;
	unsigned char *in;
	size_t in_cap;

	close(c->fd);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		L->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	L->nconns--;
	if (L->nspares >= MAX_EVENTS) {
		conn_free(c);
		return;
	}
	if (c->in_cap > IN_FIRST) {
		free(c->in);
		c->in = NULL;
		c->in_cap = 0;
	}
	wire_reset(&c->w);
	w = c->w;
	in = c->in;
	in_cap = c->in_cap;
	memset(c, 0, sizeof(*c));
	c->w = w;
	c->in = in;
	c->in_cap = in_cap;
	c->next = L->spares;
	L->spares = c;
	L->nspares++;
}

/*
 * Asks epoll for what c needs now: input unless gone or full, output
 * while a reply waits for room. A connection is added to epoll only when
 * it first has to wait: most requests are read, decided and answered
 * straight after accept(), and never cost an epoll_ctl().
 */
static void
rewatch(struct loop *L, struct conn *c, int want_out)
{
	struct epoll_event ev;
	unsigned want = 0;
	int op;

	if (!c->gone && c->in_len < IN_MAX)
		want |= EPOLLIN;
	if (!c->gone && want_out)
		want |= EPOLLOUT;
	if (want == c->watching)
		return;
	op = c->watching == 0 ? EPOLL_CTL_ADD : want == 0 ? EPOLL_CTL_DEL :
	    EPOLL_CTL_MOD;
	memset(&ev, 0, sizeof(ev));
	ev.events = want;
	ev.data.ptr = c;
	if (epoll_ctl(L->ep, op, c->fd, &ev) == 0)
		c->watching = want;
}

/* Sends what c has to send: 0 when all went, 1 when the socket is full
 * (EPOLLOUT will say when to go on), -1 when the peer is lost. */
static int
send_out(struct loop *L, struct conn *c)
{
	ssize_t n;

	while (c->w.out_off < c->w.out_len) {
		n = write(c->fd, c->w.out + c->w.out_off,
		    c->w.out_len - c->w.out_off);
		if (n > 0)
			wire_sent(&c->w, (size_t)n);
		else if (n == -1 && errno == EINTR)
			continue;
		else if (n == -1 && errno == EAGAIN && !c->gone) {
			rewatch(L, c, 1);
			return 1;
		} else
			return -1;
	}
	if (c->watching & EPOLLOUT)
		rewatch(L, c, 0);
	return 0;
}

static int
grow_batch(struct loop *L, size_t n)
{
	size_t cap = L->cap ? L->cap : 16;
	void *a, *b, *j, *f, *q;

	if (n <= L->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	a = realloc(L->ready, cap * sizeof(*L->ready));
	if (a != NULL)
		L->ready = a;
	b = realloc(L->batch, cap * sizeof(*L->batch));
	if (b != NULL)
		L->batch = b;
	j = realloc(L->jobs, cap * sizeof(*L->jobs));
	if (j != NULL)
		L->jobs = j;
	f = realloc(L->first, cap * sizeof(*L->first));
	if (f != NULL)
		L->first = f;
	q = realloc(L->reqs, cap * sizeof(*L->reqs));
	if (q != NULL)
		L->reqs = q;
	if (a == NULL || b == NULL || j == NULL || f == NULL || q == NULL)
		return -1;
	L->cap = cap;
	return 0;
}

/* Puts c's complete request into the next batch. */
static void
queue(struct loop *L, struct conn *c)
{
	if (grow_batch(L, L->nready + 1) == -1) {
		log_error("events: out of memory; dropping a connection");
		conn_close(L, c);
		return;
	}
	c->queued = 1;
	L->ready[L->nready++] = c;
}

/* Reads what c's socket holds (one read: epoll says when there is more). */
static void
conn_read(struct loop *L, struct conn *c)
{
	ssize_t n;

	if (c->in_len == c->in_cap && c->in_cap < IN_MAX) {
		size_t cap = c->in_cap ? c->in_cap * 2 : IN_FIRST;
		unsigned char *p;

		if (cap > IN_MAX)
			cap = IN_MAX;
		if ((p = realloc(c->in, cap)) == NULL) {
			conn_close(L, c);
			return;
		}
		c->in = p;
		c->in_cap = cap;
	}
	if (c->in_len < c->in_cap) {
		n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (n > 0)
			c->in_len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->gone = 1;
			rewatch(L, c, 0);
		}
	}
	progress(L, c);
}

static void
progress(struct loop *L, struct conn *c)
{
	long used;
	int rc;

	while (!c->queued && !c->delayed) {
		if ((rc = send_out(L, c)) != 0) {
			if (rc == -1)
				conn_close(L, c);
			return;
		}
		if (c->w.state == WIRE_READY) {
			queue(L, c);
			return;
		}
		/* Replied, and the server wants no other request here. */
		if (c->w.closing && (c->w.state == WIRE_IDLE || c->gone)) {
			conn_close(L, c);
			return;
		}
		if ((used = wire_feed(&c->w, c->in, c->in_len)) == -1) {
			log_warn("fastcgi: %s; connection closed", c->w.error);
			conn_close(L, c);
			return;
		}
		if (used > 0) {
			memmove(c->in, c->in + used, c->in_len - (size_t)used);
			c->in_len -= (size_t)used;
			continue;
		}
		/* Nothing more to take. A peer that left, or a stop with
		 * nothing under way, ends the connection. */
		if (c->gone || (atomic_load(&stopping) &&
		    c->w.state == WIRE_IDLE && c->in_len == 0)) {
			conn_close(L, c);
			return;
		}
		/* An authorizer's STDIN may still come (or never, as from
		 * Apache): close the careful way, as libfcgi does. Our end
		 * says we are done; the server's end, or that STDIN, closes
		 * the connection. */
		if (c->w.closing && !c->lingering) {
			shutdown(c->fd, SHUT_WR);
			c->lingering = 1;
		}
		rewatch(L, c, 0);
		return;
	}
}

static void
timer_add(struct loop *L, struct conn *c, long long due_us)
{
	size_t i, parent;
	struct timer t = { due_us, c };

	if (L->ntimers == L->tcap) {
		size_t cap = L->tcap ? L->tcap * 2 : 64;
		struct timer *p = realloc(L->timers, cap * sizeof(*p));

		if (p == NULL) {	/* no wait rather than no reply */
			progress(L, c);
			return;
		}
		L->timers = p;
		L->tcap = cap;
	}
	c->delayed = 1;
	for (i = L->ntimers++; i > 0; i = parent) {
		parent = (i - 1) / 2;
		if (L->timers[parent].due_us <= due_us)
			break;
		L->timers[i] = L->timers[parent];
	}
	L->timers[i] = t;
}

/* Sends the replies whose delay has passed. */
static void
timers_fire(struct loop *L, long long now)
{
	struct conn *c;
	struct timer last;
	size_t i, child;

	while (L->ntimers > 0 && L->timers[0].due_us <= now) {
		c = L->timers[0].c;
		last = L->timers[--L->ntimers];
		for (i = 0; (child = 2 * i + 1) < L->ntimers; i = child) {
			if (child + 1 < L->ntimers &&
			    L->timers[child + 1].due_us < L->timers[child].due_us)
				child++;
			if (last.due_us <= L->timers[child].due_us)
				break;
			L->timers[i] = L->timers[child];
		}
		if (L->ntimers > 0)
			L->timers[i] = last;
		c->delayed = 0;
		progress(L, c);
	}
}

/* Room for n matches (and their verdicts). */
static int
grow_matches(struct loop *L, size_t n)
{
	size_t cap = L->mcap ? L->mcap : 64;
	struct match *m;
	struct verdict *v;

	if (n <= L->mcap)
		return 0;
	while (cap < n)
		cap *= 2;
	if ((m = realloc(L->m, cap * sizeof(*m))) != NULL)
		L->m = m;
	if ((v = realloc(L->v, cap * sizeof(*v))) != NULL)
		L->v = v;
	if (m == NULL || v == NULL)
		return -1;
	L->mcap = cap;
	return 0;
}

/*
 * Decides every queued request: all of them in one limiter_decide(), one
 * round trip, then each reply, sent at once. Requests that become
 * complete meanwhile (the next one on a kept connection) wait for the next
 * batch, in the other array: at most one per connection of this batch, so
 * the arrays are never grown under it.
 */
static void
decide_batch(struct loop *L)
{
	struct generation *g = gen_acquire();
	const struct conf *cf = g->conf;
	struct conn **batch = L->ready, *c;
	struct job *j;
	size_t i, n = L->nready, total = 0, len, room;

	L->ready = L->batch;
	L->batch = batch;
	L->nready = 0;
	/* Each rule matches a request once at most: room for every match of
	 * the batch, each request's straight after the one before. */
	room = cf->nrules < RLG_MAX_MATCHES ? cf->nrules : RLG_MAX_MATCHES;
	if (grow_matches(L, n * (room > 0 ? room : 1)) == -1) {
		log_error("events: out of memory; dropping %zu requests", n);
		for (i = 0; i < n; i++)
			conn_close(L, batch[i]);
		gen_release(g);
		return;
	}
	for (i = 0; i < n; i++) {
		c = batch[i];
		j = &L->jobs[i];
		L->first[i] = RLG_NO_MATCHES;
		job_begin(j, cf, c->w.envp, 1, L->m + total);
		if (c->w.refused != NULL)
			job_refuse(j, c->w.refused_status, c->w.refused);
		if (j->status) {
			len = status_page(cf, &j->req, L->redis, &L->status);
			if (wire_reply(&c->w, L->status.buf, len) == -1)
				c->w.closing = 1;
			continue;
		}
		L->first[i] = total;
		total += j->d.n;
	}
	jobs_decide(L->lim, cf, L->jobs, L->first, n, L->m, L->v, L->reqs);
	for (i = 0; i < n; i++) {
		c = batch[i];
		j = &L->jobs[i];
		c->queued = 0;
		if (L->first[i] == RLG_NO_MATCHES) {
			progress(L, c);
			continue;
		}
		len = job_end(j, L->m + L->first[i], L->v + L->first[i],
		    L->metrics, L->out);
		if (wire_reply(&c->w, L->out, len) == -1)
			c->w.closing = 1;
		else if (j->d.allowed && j->d.delay_ms > 0) {
			/* leaky_bucket: the consumer waits its turn. */
			timer_add(L, c, mono_us() + j->d.delay_ms * 1000);
			continue;
		}
		/* Out at once, not after the rest of the batch. */
		progress(L, c);
	}
	gen_release(g);
}

/* The listening socket whose epoll data is ptr, or -1 (a connection). */
static int
listener_of(const void *ptr)
{
	int i;

	for (i = 0; i < nlisten; i++)
		if (ptr == &listen_tags[i])
			return listen_fds[i];
	return -1;
}

static void
accept_some(struct loop *L, int listen_fd)
{
	struct conn *c;
	int fd, k;

	for (k = 0; k < ACCEPTS; k++) {
		fd = accept4(listen_fd, NULL, NULL,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* Out of descriptors: not fatal, but do not
				 * spin on a listener that stays ready. */
				struct timespec ts = { 0, 10 * 1000000 };

				nanosleep(&ts, NULL);
			}
			return;
		}
		if ((c = conn_new(L, fd)) == NULL) {
			close(fd);
			continue;
		}
		/* The web server has usually written the request already. */
		conn_read(L, c);
	}
}

/* Stop accepting, and end the connections that have nothing under way. */
static void
begin_stop(struct loop *L)
{
	struct conn *c, *next;
	int i;

	for (i = 0; i < nlisten; i++)
		epoll_ctl(L->ep, EPOLL_CTL_DEL, listen_fds[i], NULL);
	for (c = L->conns; c != NULL; c = next) {
		next = c->next;
		if (!c->queued && !c->delayed && c->w.state == WIRE_IDLE &&
		    c->in_len == 0 && c->w.out_off == c->w.out_len)
			conn_close(L, c);
	}
}

static void *
loop_main(void *arg)
{
	struct loop *L = arg;
	struct epoll_event evs[MAX_EVENTS];
	struct conn *c;
	long long now, wait_ms;
	int n, i, fd, stop_seen = 0;
	uint64_t tick;

	pthread_setname_np(pthread_self(), "events-loop");
	for (;;) {
		if (!stop_seen && atomic_load(&stopping)) {
			stop_seen = 1;
			begin_stop(L);
		}
		if (stop_seen && (L->nconns == 0 ||
		    mono_us() >= stop_deadline_us))
			break;
		wait_ms = -1;
		if (L->ntimers > 0) {
			now = mono_us();
			wait_ms = L->timers[0].due_us <= now ? 0 :
			    (L->timers[0].due_us - now + 999) / 1000;
		}
		if (stop_seen && (wait_ms == -1 || wait_ms > 100))
			wait_ms = 100;
		metrics_busy(L->metrics, 0);
		n = epoll_wait(L->ep, evs, MAX_EVENTS, (int)wait_ms);
		metrics_busy(L->metrics, 1);
		for (i = 0; i < n; i++) {
			if (evs[i].data.ptr == &wake_tag) {
				if (read(L->wake, &tick, sizeof(tick)) < 0)
					continue;	/* read again later */
			} else if ((fd = listener_of(evs[i].data.ptr)) != -1)
				accept_some(L, fd);
			else {
				c = evs[i].data.ptr;
				if (evs[i].events & EPOLLOUT)
					progress(L, c);
				else
					conn_read(L, c);
			}
		}
		if (L->ntimers > 0)
			timers_fire(L, mono_us());
		while (L->nready > 0)
			decide_batch(L);
	}
	/* Past the deadline: what is left is lost, as the web server sees. */
	while (L->conns != NULL)
		conn_close(L, L->conns);
	L->ntimers = 0;
	metrics_busy(L->metrics, 0);
	return NULL;
}

static void
loop_free(struct loop *L)
{
	if (L->ep >= 0)
		close(L->ep);
	if (L->wake >= 0)
		close(L->wake);
	limiter_free(L->lim);
	redis_free(L->redis);
	metrics_worker_free(L->metrics);
	while (L->spares != NULL) {
		struct conn *c = L->spares;

		L->spares = c->next;
		conn_free(c);
	}
	free(L->ready);
	free(L->batch);
	free(L->jobs);
	free(L->first);
	free(L->reqs);
	free(L->m);
	free(L->v);
	free(L->out);
	free(L->status.buf);
	free(L->timers);
}

static int
loop_init(struct loop *L)
{
	struct epoll_event ev;
	int i;

	L->ep = L->wake = -1;
	if ((L->ep = epoll_create1(EPOLL_CLOEXEC)) == -1 ||
	    (L->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
		return -1;
	memset(&ev, 0, sizeof(ev));
	for (i = 0; i < nlisten; i++) {
		/* Each connection wakes one loop, not all of them. */
		ev.events = EPOLLIN | EPOLLEXCLUSIVE;
		ev.data.ptr = &listen_tags[i];
		if (epoll_ctl(L->ep, EPOLL_CTL_ADD, listen_fds[i], &ev) == -1)
			return -1;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &wake_tag;
	if (epoll_ctl(L->ep, EPOLL_CTL_ADD, L->wake, &ev) == -1)
		return -1;
	if ((L->redis = redis_new()) == NULL ||
	    (L->lim = limiter_new(L->redis)) == NULL ||
	    (L->metrics = metrics_worker_new()) == NULL ||
	    (L->out = malloc(RLG_MAX_RESPONSE)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	limiter_set_metrics(L->lim, L->metrics);
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
	if ((loops = calloc((size_t)n, sizeof(*loops))) == NULL)
		return -1;
	nloops = n;
	for (i = 0; i < n; i++) {
		if (loop_init(&loops[i]) == -1)
			return -1;
		if ((errno = pthread_create(&loops[i].thread, NULL, loop_main,
		    &loops[i])) != 0)
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
	for (i = 0; i < nloops; i++)
		if (write(loops[i].wake, &one, sizeof(one)) < 0)
			log_warn("events: cannot wake loop %d", i);
	for (i = 0; i < nloops; i++) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += timeout_s + 1;
		if (pthread_timedjoin_np(loops[i].thread, NULL,
		    &deadline) != 0) {
			log_warn("loop %d did not finish in %d s", i,
			    timeout_s);
			late++;
			continue;
		}
		loop_free(&loops[i]);
	}
	if (late == 0)
		free(loops);
	return late;
}
