/*
 * conns: FastCGI connections on an event loop, without a thread per
 * request. A connection moves on in progress(): send what is pending,
 * close when the web server asked for that, take the next request from
 * what was read, or park it in the ready list until its reply comes.
 * Not here: deciding (events.c asks the gateway), the loop itself (loop.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conns.h"
#include "log.h"
#include "loop.h"
#include "wire.h"

#define IN_FIRST	4096
#define IN_MAX		(2 * (8 + 65535 + 255))	/* two records of any size */
#define SPARES		256	/* closed connections kept for new ones */
#define ACCEPTS		64	/* per wake-up: the connections already
				 * open are served between runs */
#define MAX_LISTENERS	8

struct conn {
	struct loop_fd	 lf;		/* first: the loop hands it back */
	struct wire	 w;
	unsigned char	*in;		/* read, not yet taken by wire_feed() */
	size_t		 in_len, in_cap;
	int		 queued;	/* complete, in the ready list */
	int		 delayed;	/* its reply waits for a timer */
	int		 gone;		/* the peer closed: no more reading */
	int		 lingering;	/* our end is shut, waiting for theirs */
	struct conn	*prev, *next;	/* the open connections */
};

struct conns {
	struct loop	*loop;
	struct loop_fd	 listen[MAX_LISTENERS];
	int		 nlisten;
	int		 stopping;
	struct conn	*open;
	size_t		 nopen;
	struct conn	*spares;
	size_t		 nspares;
	struct conn	**ready, **taken;	/* complete requests */
	size_t		 nready, cap;
};

static void	progress(struct conns *, struct conn *);

/*
 * A connection for fd, one of the spares when there is one: most web
 * servers open a connection per request, and a spare's buffers are
 * already there.
 */
static struct conn *
conn_new(struct conns *cs, int fd)
{
	struct conn *c = cs->spares;

	if (c != NULL) {
		cs->spares = c->next;
		cs->nspares--;
	} else if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->lf.fd = fd;
	c->lf.arg = cs;
	c->prev = NULL;
	c->next = cs->open;
	if (cs->open != NULL)
		cs->open->prev = c;
	cs->open = c;
	cs->nopen++;
	return c;
}

static void
conn_free(struct conn *c)
{
	wire_free(&c->w);
	free(c->in);
	free(c);
}

/*
 * Closes c and keeps it as a spare, with the buffers an ordinary request
 * needs (input at its first size, wire_reset()'s).
 */
static void
conn_close(struct conns *cs, struct conn *c)
{
	struct wire w;
	unsigned char *in;
	size_t in_cap;

	loop_forget(cs->loop, &c->lf);
	close(c->lf.fd);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		cs->open = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	cs->nopen--;
	if (cs->nspares >= SPARES) {
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
	c->next = cs->spares;
	cs->spares = c;
	cs->nspares++;
}

/*
 * Asks the loop for what c needs now: input unless gone or full, output
 * while a reply waits for room. A connection is watched only once it
 * first has to wait: most requests are read, decided and answered
 * straight after accept(), and never cost an epoll_ctl().
 */
static void
rewatch(struct conns *cs, struct conn *c, int want_out)
{
	unsigned want = 0;

	if (!c->gone && c->in_len < IN_MAX)
		want |= LOOP_READABLE;
	if (!c->gone && want_out)
		want |= LOOP_WRITABLE;
	(void)loop_watch(cs->loop, &c->lf, want);
}

/* Sends what c has to send: 0 when all went, 1 when the socket is full
 * (the loop says when to go on), -1 when the peer is lost. */
static int
send_out(struct conns *cs, struct conn *c)
{
	ssize_t n;

	while (c->w.out_off < c->w.out_len) {
		n = write(c->lf.fd, c->w.out + c->w.out_off,
		    c->w.out_len - c->w.out_off);
		if (n > 0)
			wire_sent(&c->w, (size_t)n);
		else if (n == -1 && errno == EINTR)
			continue;
		else if (n == -1 && errno == EAGAIN && !c->gone) {
			rewatch(cs, c, 1);
			return 1;
		} else
			return -1;
	}
	if (c->lf.mask & LOOP_WRITABLE)
		rewatch(cs, c, 0);
	return 0;
}

/* Puts c's complete request into the ready list. */
static void
queue(struct conns *cs, struct conn *c)
{
	size_t cap = cs->cap ? cs->cap * 2 : 16;
	void *a, *b;

	if (cs->nready == cs->cap) {
		a = realloc(cs->ready, cap * sizeof(*cs->ready));
		if (a != NULL)
			cs->ready = a;
		b = realloc(cs->taken, cap * sizeof(*cs->taken));
		if (b != NULL)
			cs->taken = b;
		if (a == NULL || b == NULL) {
			log_error("fastcgi: out of memory; dropping a "
			    "connection");
			conn_close(cs, c);
			return;
		}
		cs->cap = cap;
	}
	c->queued = 1;
	cs->ready[cs->nready++] = c;
}

/* Reads what c's socket holds (one read: the loop says when there is
 * more). */
static void
conn_read(struct conns *cs, struct conn *c)
{
	ssize_t n;

	if (c->in_len == c->in_cap && c->in_cap < IN_MAX) {
		size_t cap = c->in_cap ? c->in_cap * 2 : IN_FIRST;
		unsigned char *p;

		if (cap > IN_MAX)
			cap = IN_MAX;
		if ((p = realloc(c->in, cap)) == NULL) {
			conn_close(cs, c);
			return;
		}
		c->in = p;
		c->in_cap = cap;
	}
	if (c->in_len < c->in_cap) {
		n = read(c->lf.fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (n > 0)
			c->in_len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->gone = 1;
			rewatch(cs, c, 0);
		}
	}
	progress(cs, c);
}

/* What is left once nothing more can be taken from c's input. */
static void
idle(struct conns *cs, struct conn *c)
{
	/* A peer that left, or a stop with nothing under way, ends it. */
	if (c->gone || (cs->stopping && c->w.state == WIRE_IDLE &&
	    c->in_len == 0)) {
		conn_close(cs, c);
		return;
	}
	/* An authorizer's STDIN may still come (or never, as from Apache):
	 * close the careful way, as libfcgi does. Our end says we are done;
	 * the server's end, or that STDIN, closes the connection. */
	if (c->w.closing && !c->lingering) {
		shutdown(c->lf.fd, SHUT_WR);
		c->lingering = 1;
	}
	rewatch(cs, c, 0);
}

static void
progress(struct conns *cs, struct conn *c)
{
	long used;
	int rc;

	while (!c->queued && !c->delayed) {
		if ((rc = send_out(cs, c)) != 0) {
			if (rc == -1)
				conn_close(cs, c);
			return;
		}
		if (c->w.state == WIRE_READY) {
			queue(cs, c);
			return;
		}
		/* Replied, and the server wants no other request here. */
		if (c->w.closing && (c->w.state == WIRE_IDLE || c->gone)) {
			conn_close(cs, c);
			return;
		}
		if ((used = wire_feed(&c->w, c->in, c->in_len)) == -1) {
			log_warn("fastcgi: %s; connection closed", c->w.error);
			conn_close(cs, c);
			return;
		}
		if (used == 0) {
			idle(cs, c);
			return;
		}
		memmove(c->in, c->in + used, c->in_len - (size_t)used);
		c->in_len -= (size_t)used;
	}
}

static void
conn_ready(struct loop *l, struct loop_fd *f, unsigned ready)
{
	struct conn *c = (struct conn *)f;

	(void)l;
	if (ready & LOOP_WRITABLE)
		progress(f->arg, c);
	else
		conn_read(f->arg, c);
}

static void
accept_some(struct loop *l, struct loop_fd *f, unsigned ready)
{
	struct conns *cs = f->arg;
	struct conn *c;
	int fd, k;

	(void)l;
	(void)ready;
	for (k = 0; k < ACCEPTS; k++) {
		fd = accept4(f->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
		if ((c = conn_new(cs, fd)) == NULL) {
			close(fd);
			continue;
		}
		c->lf.proc = conn_ready;
		/* The web server has usually written the request already. */
		conn_read(cs, c);
	}
}

struct conns *
conns_new(struct loop *l, const int *fds, int nfd)
{
	struct conns *cs;
	int i;

	if (nfd < 1 || nfd > MAX_LISTENERS) {
		errno = EINVAL;
		return NULL;
	}
	if ((cs = calloc(1, sizeof(*cs))) == NULL)
		return NULL;
	cs->loop = l;
	for (i = 0; i < nfd; i++) {
		cs->listen[i].fd = fds[i];
		cs->listen[i].proc = accept_some;
		cs->listen[i].arg = cs;
		/* Each connection wakes one loop, not all of them. */
		if (loop_watch(l, &cs->listen[i], LOOP_READABLE |
		    LOOP_EXCLUSIVE) == -1) {
			conns_free(cs);
			return NULL;
		}
		cs->nlisten = i + 1;
	}
	return cs;
}

void
conns_free(struct conns *cs)
{
	struct conn *c;
	int i;

	if (cs == NULL)
		return;
	for (i = 0; i < cs->nlisten; i++)
		(void)loop_watch(cs->loop, &cs->listen[i], 0);
	/* What is left is lost, as the web server sees. */
	while (cs->open != NULL)
		conn_close(cs, cs->open);
	while ((c = cs->spares) != NULL) {
		cs->spares = c->next;
		conn_free(c);
	}
	free(cs->ready);
	free(cs->taken);
	free(cs);
}

struct conn **
conns_take_ready(struct conns *cs, size_t *n)
{
	struct conn **list = cs->ready;

	cs->ready = cs->taken;
	cs->taken = list;
	*n = cs->nready;
	cs->nready = 0;
	return list;
}

char **
conn_params(const struct conn *c)
{
	return c->w.envp;
}

const char *
conn_refused(const struct conn *c, int *status)
{
	if (c->w.refused != NULL)
		*status = c->w.refused_status;
	return c->w.refused;
}

static void
delay_done(struct loop *l, void *arg)
{
	struct conn *c = arg;

	(void)l;
	c->delayed = 0;
	progress(c->lf.arg, c);
}

void
conn_reply(struct conns *cs, struct conn *c, const char *reply, size_t len,
    long long due_us)
{
	c->queued = 0;
	if (wire_reply(&c->w, reply, len) == -1)
		c->w.closing = 1;
	else if (due_us > 0) {
		/* Without a timer: no wait rather than no reply. */
		if (loop_timer(cs->loop, due_us, delay_done, c) == 0) {
			c->delayed = 1;
			return;
		}
	}
	/* Out at once, not after the rest of the batch. */
	progress(cs, c);
}

void
conns_stop(struct conns *cs)
{
	struct conn *c, *next;
	int i;

	cs->stopping = 1;
	for (i = 0; i < cs->nlisten; i++)
		(void)loop_watch(cs->loop, &cs->listen[i], 0);
	cs->nlisten = 0;
	for (c = cs->open; c != NULL; c = next) {
		next = c->next;
		if (!c->queued && !c->delayed && c->w.state == WIRE_IDLE &&
		    c->in_len == 0 && c->w.out_off == c->w.out_len)
			conn_close(cs, c);
	}
}

size_t
conns_open(const struct conns *cs)
{
	return cs->nopen;
}
