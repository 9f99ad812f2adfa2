/*
 * events: the worker threads that serve FastCGI. [gateway] workers
 * threads, each an event loop (loop.h) with its FastCGI connections
 * (conns.h) and its own Redis connections. Every request that is complete
 * when the loop is about to sleep is decided in one batch (gateway.h's
 * jobs_decide()): all their rules' calls go to Redis in one round trip.
 * leaky_bucket's wait is a timer, not a sleeping thread, and a kept-alive
 * web-server connection pins nothing.
 */
#ifndef RLG_EVENTS_H
#define RLG_EVENTS_H

/* The most listening sockets the loops accept on (systemd may pass several:
 * a unix socket for lighttpd or nginx, TCP for Apache). */
#define RLG_MAX_LISTENERS	8

/*
 * Starts n loops, each accepting on all nfd listening sockets of fds
 * (1 to RLG_MAX_LISTENERS; made non-blocking; the caller keeps them
 * open). Returns 0, or -1 with errno set when a loop cannot be made.
 */
int	events_start(const int *fds, int nfd, int n);

/*
 * Stops accepting, finishes the requests in flight (at most timeout_s
 * seconds for the slowest), and waits for the loops to end. Returns the
 * number of loops that did not end in time (0 normally).
 */
int	events_stop(int timeout_s);

#endif
