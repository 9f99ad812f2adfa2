/*
 * threads: the threads engine ([gateway] engine = threads). Each worker
 * thread accepts with libfcgi, decides one request on its own Redis
 * connection, and holds it for a leaky_bucket delay.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include <fcgiapp.h>

#include "clock.h"
#include "gateway.h"
#include "limiter.h"
#include "log.h"
#include "metrics.h"
#include "threads.h"

struct worker {
	pthread_t	 thread;
	struct limiter	*limiter;
	FCGX_Request	 fcgi;
	char		*out;		/* RLG_MAX_RESPONSE bytes */
	struct match	 m[RLG_MAX_MATCHES];
	struct verdict	 v[RLG_MAX_MATCHES];
	struct metrics_worker *metrics;
	struct page	 status;	/* status page, grown as needed */
};

static int		 listen_fd = -1;
static atomic_int	 stopping;

/*
 * FCGX_Finish_r, closing at once when that is safe. libfcgi closes the
 * careful way: shutdown(), then it waits for the web server to close its
 * end (up to 2 s), because closing a socket with input still unread makes
 * the kernel send RST, which can destroy the response before the server
 * has read it. That wait holds this worker for a round trip and costs a
 * sleep and a wake-up per request. It protects nothing once everything
 * the server sends for the request has been read: for a request without a
 * body (the authorizer and auth_request case) that is the empty record
 * ending stdin, normally read with the parameters. So: without a body,
 * read the end of stdin without ever waiting (non-blocking), and when it
 * was there and the socket holds nothing more, close without the wait.
 * Anything else, or any doubt, closes the careful way.
 */
static void
finish(FCGX_Request *r)
{
	const char *cl = FCGX_GetParam("CONTENT_LENGTH", r->envp);
	char buf[64];
	int unread = -1;

	/* An accepted socket starts with no status flags (accept(2) does not
	 * inherit them): O_NONBLOCK on, then all off again. */
	if (!r->keepConnection && r->ipcFd >= 0 && r->in != NULL &&
	    (cl == NULL || strcmp(cl, "") == 0 || strcmp(cl, "0") == 0) &&
	    fcntl(r->ipcFd, F_SETFL, O_NONBLOCK) != -1) {
		/* Not there yet: read() says EAGAIN, the stream records an
		 * error, and FCGX_Finish_r closes the careful way. */
		while (FCGX_GetStr(buf, sizeof(buf), r->in) > 0)
			;
		fcntl(r->ipcFd, F_SETFL, 0);
		if (FCGX_HasSeenEOF(r->in) == EOF &&
		    FCGX_GetError(r->in) == 0 &&
		    ioctl(r->ipcFd, FIONREAD, &unread) == 0 && unread == 0)
			FCGX_Detach(r);	/* libfcgi: close() without the wait */
	}
	FCGX_Finish_r(r);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct generation *g;
	struct job j;
	size_t len;

	if (FCGX_InitRequest(&w->fcgi, listen_fd, 0) != 0) {
		log_error("cannot set up a FastCGI request");
		return NULL;
	}
	for (;;) {
		if (FCGX_Accept_r(&w->fcgi) < 0) {
			if (atomic_load(&stopping))
				break;
			/* Out of descriptors or a broken peer: not fatal. */
			sleep_ms(10);
			continue;
		}
		metrics_busy(w->metrics, 1);
		g = gen_acquire();
		job_begin(&j, g->conf, w->fcgi.envp, 1, w->m);
		if (j.status) {
			len = status_page(g->conf, &j, w->limiter, &w->status);
			FCGX_PutStr(w->status.buf, (int)len, w->fcgi.out);
		} else {
			len = job_serve(g->conf, w->limiter, &j, w->m, w->v,
			    w->metrics, w->out);
			FCGX_PutStr(w->out, (int)len, w->fcgi.out);
		}
		gen_release(g);
		finish(&w->fcgi);
		metrics_busy(w->metrics, 0);
	}
	FCGX_Free(&w->fcgi, 1);
	return NULL;
}

static struct worker	*workers;

int
threads_start(int fd, int n)
{
	listen_fd = fd;
	if (FCGX_Init() != 0) {
		errno = EINVAL;
		return -1;
	}
	if ((workers = calloc((size_t)n, sizeof(*workers))) == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		workers[i].limiter = limiter_new();
		workers[i].out = malloc(RLG_MAX_RESPONSE);
		workers[i].metrics = metrics_worker_new();
		if (workers[i].limiter == NULL || workers[i].out == NULL ||
		    workers[i].metrics == NULL) {
			errno = ENOMEM;
			return -1;
		}
		limiter_set_metrics(workers[i].limiter, workers[i].metrics);
		if ((errno = pthread_create(&workers[i].thread, NULL,
		    worker_main, &workers[i])) != 0)
			return -1;
	}
	return 0;
}

int
threads_stop(int timeout_s)
{
	struct timespec deadline;
	int i, late = 0;

	atomic_store(&stopping, 1);
	FCGX_ShutdownPending();
	/* Wakes every FCGX_Accept_r blocked in accept(). */
	shutdown(listen_fd, SHUT_RDWR);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_s;
	for (i = 0; i < gateway_threads; i++) {
		if (pthread_timedjoin_np(workers[i].thread, NULL,
		    &deadline) != 0) {
			log_warn("worker %d did not finish in %d s", i,
			    timeout_s);
			late++;
			continue;
		}
		limiter_free(workers[i].limiter);
		free(workers[i].out);
		free(workers[i].status.buf);
		metrics_worker_free(workers[i].metrics);
	}
	/* A worker still running uses its slot. */
	if (late == 0)
		free(workers);
	return late;
}

