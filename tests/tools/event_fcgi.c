/*
 * event_fcgi: what an event-driven gateway could cost, for `make bench`.
 * One thread and epoll instead of FCGX_Accept_r threads: every FastCGI
 * connection ready in one epoll round is read, each complete request adds
 * one EVALSHA of SCRIPT (as allow_fcgi -e does: key event_fcgi:floor, ARGV
 * "" 1 1000000000 1000) to a single pipelined Redis connection, all of them
 * go out in one write, and each reply answers its request, in order, with
 * "Status: 200" (500 when the script did not admit it or Redis failed). No
 * parsing of the parameters, no rules, no audit. A benchmark tool, not a
 * gateway: it trusts the web server, keeps no connection (FCGI_KEEP_CONN
 * is ignored) and stops at the first Redis error.
 *
 *   event_fcgi -s HOST:PORT -r REDIS_HOST:PORT -e SCRIPT
 *
 * SIGTERM/SIGINT: exit 0 after printing the number of requests answered
 * and the mean number of calls per Redis write (on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tool.h"

#define MAX_FD		65536
#define IN_MAX		16384	/* a request's records must fit */

enum { FCGI_END_REQUEST = 3, FCGI_PARAMS = 4, FCGI_STDIN = 5,
    FCGI_STDOUT = 6 };

struct conn {
	unsigned char	 in[IN_MAX];
	size_t		 len;
	int		 id;		/* FastCGI request id */
	int		 open;
	int		 queued;	/* waiting for its Redis reply */
};

static struct conn *conns[MAX_FD];
static int *pending;		/* fds waiting for a reply, oldest first */
static size_t phead, pcount;
static char *out;		/* Redis commands not yet written */
static size_t out_len, out_cap;
static char *cmd;		/* one EVALSHA, formatted once */
static int cmd_len;
static volatile sig_atomic_t stopping;
static int ep;			/* the epoll instance */
static long long answered, writes, calls;

static void
on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void
drop(int fd)
{
	if (conns[fd] != NULL)
		conns[fd]->open = 0;
	close(fd);
}

/* Writes the whole reply of a request and closes the connection. */
static void
answer(int fd, int ok)
{
	static const char body[] = "Status: 200\r\n\r\n";
	static const char fail[] = "Status: 500\r\n\r\n";
	const char *b = ok ? body : fail;
	unsigned char r[64];
	struct conn *c = conns[fd];
	size_t n = sizeof(body) - 1, i = 0;

	/* STDOUT with the headers, empty STDOUT, END_REQUEST. */
	r[i++] = 1; r[i++] = FCGI_STDOUT; r[i++] = (unsigned char)(c->id >> 8);
	r[i++] = (unsigned char)c->id; r[i++] = 0; r[i++] = (unsigned char)n;
	r[i++] = 0; r[i++] = 0;
	memcpy(r + i, b, n);
	i += n;
	r[i++] = 1; r[i++] = FCGI_STDOUT; r[i++] = (unsigned char)(c->id >> 8);
	r[i++] = (unsigned char)c->id; r[i++] = 0; r[i++] = 0; r[i++] = 0;
	r[i++] = 0;
	r[i++] = 1; r[i++] = FCGI_END_REQUEST;
	r[i++] = (unsigned char)(c->id >> 8); r[i++] = (unsigned char)c->id;
	r[i++] = 0; r[i++] = 8; r[i++] = 0; r[i++] = 0;
	memset(r + i, 0, 8);
	i += 8;
	if (write(fd, r, i) != (ssize_t)i)
		fprintf(stderr, "event_fcgi: short write to the web server\n");
	answered++;
	c->queued = 0;
	drop(fd);
}

/* Reads what fd has; queues a Redis call once stdin has ended. */
static void
readable(int fd)
{
	struct conn *c = conns[fd];
	size_t off = 0, clen, plen;
	ssize_t n = -1;

	while (c->len < IN_MAX &&
	    (n = read(fd, c->in + c->len, IN_MAX - c->len)) > 0)
		c->len += (size_t)n;
	while (c->len - off >= 8) {
		unsigned char *h = c->in + off;

		clen = (size_t)h[4] << 8 | h[5];
		plen = h[6];
		if (c->len - off < 8 + clen + plen)
			break;
		c->id = h[2] << 8 | h[3];
		if (h[1] == FCGI_STDIN && clen == 0 && !c->queued) {
			c->queued = 1;
			if (out_len + (size_t)cmd_len > out_cap) {
				out_cap = (out_len + (size_t)cmd_len) * 2;
				out = realloc(out, out_cap);
			}
			memcpy(out + out_len, cmd, (size_t)cmd_len);
			out_len += (size_t)cmd_len;
			pending[(phead + pcount++) % MAX_FD] = fd;
			calls++;
		}
		off += 8 + clen + plen;
	}
	memmove(c->in, c->in + off, c->len - off);
	c->len -= off;
	if (n == 0 || (n == -1 && errno != EAGAIN) || c->len == IN_MAX) {
		if (!c->queued)
			drop(fd);
		else	/* closed early: kept (not reused) until its reply */
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	}
}

int
main(int argc, char **argv)
{
	const char *addr = NULL, *raddr = NULL, *script = NULL;
	struct epoll_event ev, evs[256];
	redisReader *reader;
	redisReply *rep;
	char sha[41] = "", buf[65536], *text;
	int c, lfd, rfd, i, n, fd, ok;

	while ((c = getopt(argc, argv, "e:r:s:")) != -1) {
		switch (c) {
		case 'e': script = optarg; break;
		case 'r': raddr = optarg; break;
		case 's': addr = optarg; break;
		default: goto usage;
		}
	}
	if (addr == NULL || raddr == NULL || script == NULL)
		goto usage;
	if ((text = tool_read_file(script)) == NULL) {
		fprintf(stderr, "event_fcgi: %s: cannot read\n", script);
		return 1;
	}
	{	/* SCRIPT LOAD on a blocking connection of its own */
		redisContext *rc;
		char host[64];
		const char *colon = strrchr(raddr, ':');

		if (colon == NULL || (size_t)(colon - raddr) >= sizeof(host))
			goto usage;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - raddr),
		    raddr);
		if ((rc = redisConnect(host, atoi(colon + 1))) == NULL ||
		    rc->err || (rep = redisCommand(rc, "SCRIPT LOAD %s",
		    text)) == NULL || rep->type != REDIS_REPLY_STRING) {
			fprintf(stderr, "event_fcgi: %s: cannot load %s\n",
			    raddr, script);
			return 1;
		}
		snprintf(sha, sizeof(sha), "%s", rep->str);
		freeReplyObject(rep);
		redisFree(rc);
	}
	free(text);
	cmd_len = redisFormatCommand(&cmd, "EVALSHA %s 1 event_fcgi:floor %s 1 "
	    "1000000000 1000", sha, "");
	if (cmd_len < 0 || (pending = calloc(MAX_FD, sizeof(*pending))) ==
	    NULL || (reader = redisReaderCreate()) == NULL)
		return 1;
	if ((lfd = tool_tcp(addr, 1)) == -1 ||
	    (rfd = tool_tcp(raddr, 0)) == -1) {
		fprintf(stderr, "event_fcgi: %s or %s: %s\n", addr, raddr,
		    strerror(errno));
		return 1;
	}
	fcntl(lfd, F_SETFL, O_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if ((ep = epoll_create1(0)) == -1)
		return 1;
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	ev.data.fd = rfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, rfd, &ev);

	while (!stopping) {
		if ((n = epoll_wait(ep, evs, 256, -1)) == -1) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (i = 0; i < n; i++) {
			fd = evs[i].data.fd;
			if (fd == lfd) {
				while ((fd = accept4(lfd, NULL, NULL,
				    SOCK_NONBLOCK)) != -1) {
					if (fd >= MAX_FD) {
						close(fd);
						continue;
					}
					if (conns[fd] == NULL)
						conns[fd] = malloc(sizeof(**conns));
					conns[fd]->len = 0;
					conns[fd]->open = 1;
					conns[fd]->queued = 0;
					ev.events = EPOLLIN;
					ev.data.fd = fd;
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
					readable(fd);	/* often there already */
				}
			} else if (fd == rfd) {
				ssize_t r = read(rfd, buf, sizeof(buf));

				if (r <= 0) {
					fprintf(stderr, "event_fcgi: Redis "
					    "closed\n");
					return 1;
				}
				redisReaderFeed(reader, buf, (size_t)r);
				while (redisReaderGetReply(reader,
				    (void **)&rep) == REDIS_OK && rep != NULL) {
					ok = rep->type == REDIS_REPLY_ARRAY &&
					    rep->elements > 0 &&
					    rep->element[0]->integer == 1;
					freeReplyObject(rep);
					if (pcount == 0)
						return 1;
					fd = pending[phead];
					phead = (phead + 1) % MAX_FD;
					pcount--;
					answer(fd, ok);
				}
			} else if (conns[fd] != NULL && conns[fd]->open)
				readable(fd);
		}
		/* Every call this round in one write. */
		if (out_len > 0) {
			size_t done = 0;
			ssize_t w;

			while (done < out_len && (w = write(rfd, out + done,
			    out_len - done)) > 0)
				done += (size_t)w;
			if (done < out_len)
				return 1;
			out_len = 0;
			writes++;
		}
	}
	fprintf(stderr, "event_fcgi: %lld requests, %.2f calls per Redis "
	    "write\n", answered, writes > 0 ? (double)calls / writes : 0.0);
	return 0;
usage:
	fprintf(stderr, "usage: event_fcgi -s HOST:PORT -r REDIS_HOST:PORT "
	    "-e SCRIPT\n");
	return 2;
}
