/*
 * linger: the careful close of FastCGI connections (shutdown, wait for the
 * peer's end, close) done by one thread for all of them, so that workers
 * go back to FCGX_Accept_r as soon as their response is written. See
 * linger.h for why the wait matters at all.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "linger.h"

#define LINGER_FDS_MAX	65536	/* higher descriptors linger the old way */
#define LINGER_SCAN_MS	250	/* how often overdue connections are looked for */
#define LINGER_READS	16	/* reads per wake-up from a peer that keeps sending */

static int		 ep = -1;
static pthread_t	 thread;
static atomic_llong	*since;		/* per fd: when handed over (ms), 0: not ours */
static int		 nfds;
static atomic_int	 top;		/* highest fd handed over + 1 */
static atomic_int	 pending;	/* connections handed over, not yet closed */
static atomic_int	 stopping;

static long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What libfcgi does, in the caller: for when the thread cannot help. */
static void
close_here(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char trash[1024];

	if (shutdown(fd, SHUT_WR) == 0)
		while (poll(&p, 1, RLG_LINGER_MS) > 0 &&
		    read(fd, trash, sizeof(trash)) > 0)
			;
	close(fd);
}

/* Thread only: fd is done with (close() also takes it out of ep). */
static void
release(int fd)
{
	atomic_store(&since[fd], 0);
	atomic_fetch_sub(&pending, 1);
	close(fd);
}

static void *
linger_main(void *arg)
{
	struct epoll_event ev[128];
	char trash[4096];
	long long now, next_scan = 0, stop_at = 0;
	ssize_t r;
	int n, i, k, fd, hi;

	(void)arg;
	for (;;) {
		n = epoll_wait(ep, ev, 128, LINGER_SCAN_MS);
		for (i = 0; i < n; i++) {
			fd = ev[i].data.fd;
			/* Discard what the server still sends until its end. */
			for (k = 0; k < LINGER_READS; k++)
				if ((r = recv(fd, trash, sizeof(trash),
				    MSG_DONTWAIT)) <= 0)
					break;
			if (k < LINGER_READS && (r == 0 || (errno != EAGAIN &&
			    errno != EWOULDBLOCK && errno != EINTR)))
				release(fd);
		}
		now = mono_ms();
		if (atomic_load(&stopping)) {
			if (stop_at == 0)
				stop_at = now + RLG_LINGER_MS;
			if (atomic_load(&pending) == 0 || now >= stop_at)
				break;
		}
		if (now < next_scan)
			continue;
		next_scan = now + LINGER_SCAN_MS;
		hi = atomic_load(&top);
		for (fd = 0; fd < hi; fd++) {
			long long t = atomic_load(&since[fd]);

			if (t != 0 && now - t >= RLG_LINGER_MS)
				release(fd);	/* a server that never closes */
		}
	}
	hi = atomic_load(&top);
	for (fd = 0; fd < hi; fd++)
		if (atomic_load(&since[fd]) != 0)
			release(fd);
	return NULL;
}

int
linger_start(void)
{
	struct rlimit rl;

	if (ep != -1)
		return 0;
	nfds = LINGER_FDS_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)nfds)
		nfds = (int)rl.rlim_cur;
	if ((since = calloc((size_t)nfds, sizeof(*since))) == NULL)
		return -1;
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
		goto fail;
	if ((errno = pthread_create(&thread, NULL, linger_main, NULL)) != 0) {
		close(ep);
		ep = -1;
		goto fail;
	}
	return 0;
fail:
	free(since);
	since = NULL;
	return -1;
}

void
linger_close(int fd)
{
	struct epoll_event ev;
	int hi;

	if (fd < 0)
		return;
	if (ep == -1 || fd >= nfds || atomic_load(&stopping)) {
		close_here(fd);
		return;
	}
	/* The FIN goes now: the server has the whole response at once. */
	if (shutdown(fd, SHUT_WR) == -1) {
		close(fd);	/* the peer is gone: nothing left to protect */
		return;
	}
	atomic_store(&since[fd], mono_ms());
	atomic_fetch_add(&pending, 1);
	hi = atomic_load(&top);
	while (fd + 1 > hi && !atomic_compare_exchange_weak(&top, &hi, fd + 1))
		;
	ev.events = EPOLLIN | EPOLLRDHUP;
	ev.data.u64 = 0;
	ev.data.fd = fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1) {
		/* Not ours after all: wait here, like libfcgi. */
		atomic_store(&since[fd], 0);
		atomic_fetch_sub(&pending, 1);
		close_here(fd);
	}
}

void
linger_stop(void)
{
	if (ep == -1)
		return;
	atomic_store(&stopping, 1);
	pthread_join(thread, NULL);
	close(ep);
	ep = -1;
	free(since);
	since = NULL;
}
