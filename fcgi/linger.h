/*
 * linger: closes FastCGI connections carefully without a worker waiting.
 *
 * libfcgi ends every connection the careful way: shutdown(SHUT_WR), then
 * it waits (up to 2 s) for the web server to close its end, reading and
 * discarding whatever it still sends, and only then close(). A plain
 * close() with data still unread, or with data arriving after it, makes
 * the kernel answer with RST, which may destroy the response before the
 * server has read it. libfcgi does that wait in the worker, which sits in
 * poll() for a round trip per request instead of taking the next one.
 * linger does the same wait for all connections in one thread (epoll).
 */
#ifndef RLG_LINGER_H
#define RLG_LINGER_H

/* How long a connection may take to be closed by the web server. */
#define RLG_LINGER_MS	2000

/*
 * Starts the closing thread. Returns 0, or -1 with errno set (then
 * linger_close() closes like libfcgi, in the caller). Call once, with the
 * signals the workers block already blocked.
 */
int	linger_start(void);

/*
 * Takes ownership of fd, a connection whose response has been written:
 * sends FIN now, and closes fd once the peer has closed its end or after
 * RLG_LINGER_MS. Thread safe. Never blocks for the peer, except when
 * linger_start() failed or was not called.
 */
void	linger_close(int fd);

/*
 * Waits until every connection handed over is closed (at most
 * RLG_LINGER_MS), then stops the thread. Call after the workers are done.
 */
void	linger_stop(void);

#endif
