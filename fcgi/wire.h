/*
 * wire: the FastCGI protocol (version 1) on one connection, for the event
 * loops: records in, one request's params out as "NAME=value" strings,
 * the reply out as records. Pure code: the caller reads and writes the
 * socket. One request at a time per connection (FCGI_MPXS_CONNS is 0: a
 * second BEGIN_REQUEST while one is open is refused with
 * FCGI_CANT_MPX_CONN), as every web server here uses FastCGI.
 */
#ifndef RLG_WIRE_H
#define RLG_WIRE_H

#include <stddef.h>

#define WIRE_MAX_PARAMS		(1024 * 1024)	/* bytes of one request's
						 * PARAMS stream */
#define WIRE_MAX_ENV		4096		/* params of one request */

/* FCGI_ROLE values. */
#define WIRE_RESPONDER		1
#define WIRE_AUTHORIZER		2

/*
 * A request is READY when its params are complete and, for a responder,
 * its body (STDIN) has been read to its end and thrown away: closing a
 * socket with input unread resets the connection and can destroy the
 * reply. An authorizer is READY at the end of its params (Apache's
 * mod_authnz_fcgi sends no STDIN at all, lighttpd an empty one), and the
 * STDIN that may follow is read after the reply (DRAIN).
 */
enum wire_state {
	WIRE_IDLE,		/* waiting for BEGIN_REQUEST */
	WIRE_PARAMS,		/* reading PARAMS */
	WIRE_STDIN,		/* a responder's PARAMS done, reading STDIN */
	WIRE_READY,		/* envp is complete: decide and reply */
	WIRE_DRAIN		/* replied; an authorizer's STDIN may follow */
};

struct wire {
	enum wire_state	 state;
	int		 id;		/* the request's id */
	int		 role;		/* WIRE_RESPONDER, WIRE_AUTHORIZER */
	int		 keep;		/* FCGI_KEEP_CONN: do not close after
					 * the reply */
	char		*params;	/* the request's PARAMS stream, then
					 * the strings envp points into */
	size_t		 params_len, params_cap;
	char		**envp;		/* NULL-terminated, when READY */
	size_t		 env_cap;
	char		*out;		/* records to send, from out_off */
	size_t		 out_len, out_off, out_cap;
	int		 closing;	/* close once out is sent: the last
					 * request did not ask FCGI_KEEP_CONN */
	const char	*refused;	/* READY, but to be refused: why */
	int		 refused_status;	/* 431: over WIRE_MAX_PARAMS or
					 * WIRE_MAX_ENV (envp holds the params
					 * before it); 400: a value holds a
					 * NUL byte (envp shows it as %00) */
	const char	*error;		/* why wire_feed() returned -1 */
};

/* Frees what w holds (not w). */
void	wire_free(struct wire *w);

/*
 * Makes w as a new connection's (all zero) but keeps its buffers, up to
 * WIRE_KEEP_BYTES each, for the next connection: a connection per request
 * (lighttpd's and Apache's default) need not allocate them every time.
 * WIRE_KEEP_BYTES is twice the 8 KB header line Apache and nginx accept by
 * default: a request with headers as servers usually allow them.
 */
#define WIRE_KEEP_BYTES	16384
void	wire_reset(struct wire *w);

/*
 * Takes the complete records at the start of buf[0..len), stopping after
 * the one that makes the request READY, and returns the bytes used (0: no
 * complete record yet); management replies and refusals go to w->out.
 * -1: the peer does not speak FastCGI (w->error says why; close it).
 */
long	wire_feed(struct wire *w, const unsigned char *buf, size_t len);

/*
 * Appends the reply of the READY request to w->out: data[0..len) as
 * FCGI_STDOUT records, the empty record that ends the stream, and
 * FCGI_END_REQUEST, and makes w IDLE for the connection's next request
 * (DRAIN until the end of an authorizer's STDIN; w->closing when there is
 * no next request). Returns 0, or -1 when out of memory.
 */
int	wire_reply(struct wire *w, const char *data, size_t len);

/* Drops what has been sent: n bytes from w->out's w->out_off. */
void	wire_sent(struct wire *w, size_t n);

#endif
