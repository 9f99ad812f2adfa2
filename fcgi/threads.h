/*
 * threads: the threads engine ([gateway] engine = threads), DESIGN.md's
 * model: n worker threads, each serving one request at a time on its own
 * Redis connection. A kept-alive web-server connection pins its worker.
 */
#ifndef RLG_THREADS_H
#define RLG_THREADS_H

/*
 * Starts n workers accepting on listen_fd. Returns 0, or -1 with errno set
 * when one cannot be made.
 */
int	threads_start(int listen_fd, int n);

/*
 * Stops accepting, lets the workers finish their requests (at most
 * timeout_s seconds), and returns the number still running (0 normally).
 */
int	threads_stop(int timeout_s);

#endif
