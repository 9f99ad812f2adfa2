/*
 * conns: the FastCGI connections of one event loop (loop.h): accepting on
 * the listening sockets, reading records (wire.h), sending replies, closing
 * the careful way. A request that is complete waits in the ready list for
 * its caller to decide it (conns_take_ready()) and answer it
 * (conn_reply()). Nothing here decides a request or knows Redis. One
 * struct conns per loop thread; not thread safe.
 */
#ifndef RLG_CONNS_H
#define RLG_CONNS_H

#include <stddef.h>

struct conn;
struct conns;
struct loop;

/*
 * Connections on loop l, accepting on the nfd listening sockets fds
 * (non-blocking; the caller keeps them open). Returns NULL with errno set.
 */
struct conns	*conns_new(struct loop *l, const int *fds, int nfd);

/* Closes every connection and frees cs. Accepts NULL. */
void		 conns_free(struct conns *cs);

/*
 * The connections whose request is complete, in the order they became
 * so: *n of them, in an array cs owns until the next call. Each waits for
 * its conn_reply(); requests that complete meanwhile go to the next list.
 */
struct conn	**conns_take_ready(struct conns *cs, size_t *n);

/* A ready connection's request: its FastCGI params (NULL-terminated,
 * valid until conn_reply()), and why it is refused (NULL: it is not; then
 * *status is left alone), with the status to answer. */
char		**conn_params(const struct conn *c);
const char	*conn_refused(const struct conn *c, int *status);

/*
 * Answers ready connection c with reply[0..len) (copied), sent at once, or
 * at mono_us() due_us when due_us > 0 (leaky_bucket's wait). After this c
 * belongs to cs again: it may be closed at any time.
 */
void		 conn_reply(struct conns *cs, struct conn *c, const char *reply,
		    size_t len, long long due_us);

/* Stops accepting and closes the connections with nothing under way;
 * the others close when their reply is out. */
void		 conns_stop(struct conns *cs);

/* Connections open. */
size_t		 conns_open(const struct conns *cs);

#endif
