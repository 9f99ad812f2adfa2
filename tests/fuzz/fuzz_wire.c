/*
 * fuzz_wire: libFuzzer target for wire, the FastCGI records a web server
 * sends, driven as the gateway's event loop drives it: bytes arrive in
 * pieces, wire_feed() takes what it can, a READY request is answered with
 * wire_reply() and the answer leaves in writes that may be partial. An
 * input is
 *
 *   byte 0     bits 0-3: how many bytes each read delivers (1 to all)
 *              bits 4-5: the size of each reply: none, small, a few
 *              records' worth, or about 65535 (one record more or less)
 *              bits 6-7: how many bytes each write takes (wire_sent())
 *   rest       the byte stream from the web server
 *
 * Beyond "no crash, no leak, no undefined behaviour": wire_feed() takes
 * whole records only, never more than it is given, stops right after the
 * record that makes the request READY (an authorizer's empty PARAMS, a
 * responder's empty STDIN) and leaves no complete record unread
 * otherwise; -1 comes with w->error. A READY request has a role rlgate
 * plays and params that are "NAME=value" strings, NULL-terminated, its
 * FCGI_ROLE first, at most WIRE_MAX_ENV (wire.h: a request with more is
 * READY with w->refused). Everything in w->out is whole records of version 1: answers to
 * management records and refusals as the specification shapes them, and
 * each reply exactly its data in STDOUT records of at most 65535 bytes,
 * the empty STDOUT and an END_REQUEST, all for the request's id, after
 * which w is IDLE (DRAIN for an authorizer) and closing unless
 * FCGI_KEEP_CONN was asked. wire_sent() empties w->out once all of it is
 * sent.
 *
 * Build and run: make fuzz (tests/fuzz/corpus/wire/ is the seed corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The specification's record types, flags, roles and statuses, from its
 * reference implementation (libfcgi): not from wire.c, which is tested. */
#include <fastcgi.h>

#include "wire.h"

#define REPLY_MAX		70000

static const size_t	reads[16] = { 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 64,
			    255, 1000, 4096, 65536, SIZE_MAX };
static const size_t	writes[4] = { 1, 13, 4096, SIZE_MAX };
static char		reply[REPLY_MAX];

static void
die(const char *what)
{
	fprintf(stderr, "fuzz_wire: %s\n", what);
	abort();
}

/* A record's size when p[0..len) holds all of it, else 0. */
static size_t
whole_record(const unsigned char *p, size_t len)
{
	size_t n;

	if (len < 8)
		return 0;
	n = 8 + ((size_t)p[4] << 8 | p[5]) + p[6];
	return n <= len ? n : 0;
}

/* One record of w->out, read by next_out(). */
struct rec {
	int			 type, id;
	const unsigned char	*content;
	size_t			 len;
};

/* Reads the record at w->out[*off..w->out_len) into r, or dies. */
static void
next_out(const struct wire *w, size_t *off, struct rec *r)
{
	const unsigned char *p = (const unsigned char *)w->out + *off;
	size_t n = whole_record(p, w->out_len - *off);

	if (n == 0)
		die("w->out holds part of a record");
	if (p[0] != 1)
		die("a record of w->out is not version 1");
	r->type = p[1];
	r->id = p[2] << 8 | p[3];
	r->content = p + 8;
	r->len = (size_t)p[4] << 8 | p[5];
	*off += n;
}

/* The pair at p[0..len) (a GET_VALUES_RESULT's): its size, or 0. */
static size_t
pair(const unsigned char *p, size_t len, size_t *nlen, size_t *vlen)
{
	size_t off = 0, n[2];

	for (int i = 0; i < 2; i++) {
		if (off >= len)
			return 0;
		if (p[off] < 0x80)
			n[i] = p[off++];
		else {
			if (len - off < 4)
				return 0;
			n[i] = (size_t)(p[off] & 0x7f) << 24 |
			    (size_t)p[off + 1] << 16 | (size_t)p[off + 2] << 8 |
			    p[off + 3];
			off += 4;
		}
	}
	if (n[0] > len - off || n[1] > len - off - n[0])
		return 0;
	*nlen = n[0];
	*vlen = n[1];
	return off + n[0] + n[1];
}

/*
 * What wire_feed() wrote, w->out[from..out_len): whole records, each an
 * END_REQUEST (an abort or a refusal), a GET_VALUES_RESULT of names rlgate
 * knows, or an UNKNOWN_TYPE naming a type wire does not handle.
 */
static void
check_answers(const struct wire *w, size_t from)
{
	static const char *const known[][2] = { { "FCGI_MAX_CONNS", "1024" },
	    { "FCGI_MAX_REQS", "1024" }, { "FCGI_MPXS_CONNS", "0" } };
	static const unsigned char zeros[8];
	const unsigned char *p, *name;
	size_t off = from, at, used, nlen, vlen, i;
	struct rec r;

	while (off < w->out_len) {
		next_out(w, &off, &r);
		switch (r.type) {
		case FCGI_END_REQUEST:
			if (r.len != 8 || memcmp(r.content, zeros, 4) != 0 ||
			    memcmp(r.content + 5, zeros, 3) != 0)
				die("an END_REQUEST is not 8 bytes, appStatus 0");
			if (r.content[4] != FCGI_REQUEST_COMPLETE &&
			    r.content[4] != FCGI_CANT_MPX_CONN &&
			    r.content[4] != FCGI_UNKNOWN_ROLE)
				die("an END_REQUEST with an odd protocolStatus");
			break;
		case FCGI_GET_VALUES_RESULT:
			if (r.id != 0)
				die("a GET_VALUES_RESULT not for id 0");
			for (at = 0; at < r.len; at += used) {
				p = r.content + at;
				if ((used = pair(p, r.len - at, &nlen, &vlen)) == 0)
					die("a GET_VALUES_RESULT pair is cut short");
				/* The name and value end the pair, whatever
				 * size its lengths took. */
				name = p + used - vlen - nlen;
				for (i = 0; i < 3; i++)
					if (nlen == strlen(known[i][0]) &&
					    memcmp(name, known[i][0], nlen) == 0)
						break;
				if (i == 3 || vlen != strlen(known[i][1]) ||
				    memcmp(name + nlen, known[i][1], vlen) != 0)
					die("a GET_VALUES_RESULT pair is not a "
					    "known name and its value");
			}
			break;
		case FCGI_UNKNOWN_TYPE:
			if (r.id != 0 || r.len != 8 ||
			    memcmp(r.content + 1, zeros, 7) != 0)
				die("an UNKNOWN_TYPE is not 8 bytes for id 0");
			switch (r.content[0]) {
			case FCGI_BEGIN_REQUEST: case FCGI_ABORT_REQUEST:
			case FCGI_PARAMS: case FCGI_STDIN: case FCGI_DATA:
			case FCGI_GET_VALUES:
				die("UNKNOWN_TYPE for a type wire knows");
			}
			break;
		default:
			die("wire_feed() wrote a record that answers nothing");
		}
	}
}

/*
 * The reply wire_reply() wrote at w->out[from..out_len): data[0..len) in
 * STDOUT records of 1 to 65535 bytes, the empty STDOUT, an END_REQUEST
 * (appStatus 0, FCGI_REQUEST_COMPLETE), all for id, and nothing more.
 */
static void
check_reply(const struct wire *w, size_t from, int id, const char *data,
    size_t len)
{
	static const unsigned char end[8];
	size_t off = from, got = 0;
	struct rec r;

	for (;;) {
		next_out(w, &off, &r);
		if (r.type != FCGI_STDOUT || r.id != id)
			die("the reply's data is not STDOUT for the request");
		if (r.len == 0)
			break;
		if (r.len > len - got ||
		    memcmp(r.content, data + got, r.len) != 0)
			die("the STDOUT records are not the reply");
		got += r.len;
	}
	if (got != len)
		die("the STDOUT stream ends before the reply does");
	next_out(w, &off, &r);
	if (r.type != FCGI_END_REQUEST || r.id != id || r.len != 8 ||
	    memcmp(r.content, end, 8) != 0)
		die("the reply does not end with END_REQUEST complete");
	if (off != w->out_len)
		die("records after the END_REQUEST");
}

/*
 * wire_feed() took in[0..n): whole records, the last one when READY the
 * empty PARAMS (authorizer) or STDIN (responder) of w->id; when not READY,
 * none of in[n..len) is a whole record.
 */
static void
check_taken(const struct wire *w, const unsigned char *in, size_t n,
    size_t len)
{
	size_t off = 0, r = 0;

	while (off < n) {
		if ((r = whole_record(in + off, n - off)) == 0)
			die("wire_feed() took part of a record");
		off += r;
	}
	if (w->state == WIRE_READY) {
		const unsigned char *h = in + n - r;
		int last = w->role == WIRE_AUTHORIZER ? FCGI_PARAMS :
		    FCGI_STDIN;

		if (n == 0 || h[1] != last || (h[2] << 8 | h[3]) != w->id ||
		    h[4] != 0 || h[5] != 0)
			die("READY not right after the end of the request's "
			    "PARAMS (authorizer) or STDIN (responder)");
	} else if (whole_record(in + n, len - n) != 0)
		die("wire_feed() left a whole record unread");
}

/*
 * The params of a READY request: FCGI_ROLE first (from BEGIN_REQUEST, as
 * libfcgi gives it), then "NAME=value" strings, at most WIRE_MAX_ENV.
 */
static void
check_env(const struct wire *w)
{
	size_t i;

	if (w->role != WIRE_RESPONDER && w->role != WIRE_AUTHORIZER)
		die("READY in a role rlgate does not play");
	if (w->keep != 0 && w->keep != 1)
		die("keep is not 0 or 1");
	if (w->envp == NULL || w->envp[0] == NULL ||
	    strcmp(w->envp[0], w->role == WIRE_AUTHORIZER ?
	    "FCGI_ROLE=AUTHORIZER" : "FCGI_ROLE=RESPONDER") != 0)
		die("envp does not start with the request's FCGI_ROLE");
	for (i = 0; w->envp[i] != NULL; i++) {
		/* envp[0] is FCGI_ROLE, then WIRE_MAX_ENV params at most. */
		if (i > WIRE_MAX_ENV)
			die("more than WIRE_MAX_ENV params");
		/* A name no lookup can find is skipped: none empty. */
		if (strchr(w->envp[i], '=') == NULL || w->envp[i][0] == '=')
			die("a param is not NAME=value");
	}
}

/* One write: takes up to n bytes of w->out. */
static void
send_some(struct wire *w, size_t n)
{
	size_t left = w->out_len - w->out_off;

	if (w->out_off > w->out_len)
		die("out_off past out_len");
	wire_sent(w, n < left ? n : left);
	if (n >= left && (w->out_off != 0 || w->out_len != 0))
		die("w->out not empty once all of it is sent");
}

/* The reply to the nth request: its size from bits 4-5 of byte 0. */
static size_t
reply_size(unsigned flags, size_t nth, size_t size)
{
	size_t x = size * 7919 + nth * 104729;

	switch (flags >> 4 & 3) {
	case 0:
		return 0;
	case 1:
		return x % 200;
	case 2:
		return 1000 + x % 5000;
	default:
		return FCGI_MAX_LENGTH - 1 + x % (REPLY_MAX - FCGI_MAX_LENGTH + 2);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire w;
	unsigned char *in;
	size_t rd, wr, pos = 1, pending = 0, take, from, len, nth = 0;
	size_t need, i, j;
	long n;
	int id;

	if (size < 1)
		return -1;
	rd = reads[data[0] & 15];
	wr = writes[data[0] >> 6];
	/* The replies' bytes: the input's, so that any byte is sent. */
	need = (data[0] >> 4 & 3) == 3 ? REPLY_MAX : 6000;
	for (i = 0, j = 0; i < need; i++, j = j + 1 < size ? j + 1 : 0)
		reply[i] = (char)(data[j] ^ i);
	if ((in = malloc(size)) == NULL)
		die("out of memory");
	memset(&w, 0, sizeof(w));

	for (;;) {
		/* One read from the socket. */
		take = size - pos < rd ? size - pos : rd;
		memcpy(in + pending, data + pos, take);
		pending += take;
		pos += take;
		for (;;) {
			from = w.out_len;
			if ((n = wire_feed(&w, in, pending)) == -1) {
				if (w.error == NULL)
					die("wire_feed() failed with no error");
				goto done;
			}
			if (n < 0 || (size_t)n > pending)
				die("wire_feed() took more than it was given");
			check_taken(&w, in, (size_t)n, pending);
			check_answers(&w, from);
			memmove(in, in + n, pending - (size_t)n);
			pending -= (size_t)n;
			if (w.state != WIRE_READY)
				break;
			check_env(&w);
			from = w.out_len;
			id = w.id;
			len = reply_size(data[0], nth++, size);
			if (wire_reply(&w, reply, len) == -1)
				die("wire_reply() out of memory");
			check_reply(&w, from, id, reply, len);
			if (w.state != (w.role == WIRE_AUTHORIZER ?
			    WIRE_DRAIN : WIRE_IDLE) || w.closing != !w.keep)
				die("not IDLE (DRAIN), or closing is not !keep, "
				    "after the reply");
			send_some(&w, wr);
		}
		send_some(&w, wr);
		if (pos == size)
			break;
	}
	send_some(&w, SIZE_MAX);
done:
	wire_free(&w);
	free(in);
	return 0;
}
