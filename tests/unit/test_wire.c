/*
 * Unit tests for wire (FastCGI 1.0 records). The requests are built here
 * byte by byte as a web server writes them, and rlgate's answers are
 * compared with the exact records the specification describes. An
 * authorizer is READY at the end of its PARAMS and drains its STDIN after
 * the reply; a responder is READY at the end of its STDIN (wire.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The specification's record types, flags, roles and statuses, from its
 * reference implementation (libfcgi): not from wire.c, which is tested. */
#include <fastcgi.h>

#include "wire.h"

/* ---- building records ------------------------------------------------ */

/* Bytes as a web server writes them, or as rlgate should. */
struct bytes {
	unsigned char	*b;
	size_t		 len, cap;
};

static void
put(struct bytes *s, const void *p, size_t n)
{
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->b = realloc(s->b, s->cap);
		assert_non_null(s->b);
	}
	if (n > 0)
		memcpy(s->b + s->len, p, n);
	s->len += n;
}

/*
 * Appends a record: version 1, type, request id and content length big
 * endian, padding length, a reserved byte, the content, then the padding.
 * The padding is 0xee, not zeros: a header read from it is not version 1.
 */
static void
record_pad(struct bytes *s, int type, int id, const void *content, size_t len,
    size_t padding)
{
	unsigned char h[8] = { 1, (unsigned char)type, (unsigned char)(id >> 8),
	    (unsigned char)id, (unsigned char)(len >> 8), (unsigned char)len,
	    (unsigned char)padding, 0 };
	unsigned char junk = 0xee;

	assert_true(len <= FCGI_MAX_LENGTH && padding <= 255);
	put(s, h, sizeof(h));
	put(s, content, len);
	while (padding-- > 0)
		put(s, &junk, 1);
}

static void
record(struct bytes *s, int type, int id, const void *content, size_t len)
{
	record_pad(s, type, id, content, len, 0);
}

/* BEGIN_REQUEST: role (2 bytes), flags, 5 reserved bytes. */
static void
begin(struct bytes *s, int id, int role, int flags)
{
	unsigned char body[8] = { (unsigned char)(role >> 8),
	    (unsigned char)role, (unsigned char)flags };

	record(s, FCGI_BEGIN_REQUEST, id, body, sizeof(body));
}

/* END_REQUEST: appStatus (4 bytes), protocolStatus, 3 reserved bytes. */
static void
end_request(struct bytes *s, int id, int protocol_status)
{
	unsigned char body[8] = { 0, 0, 0, 0, (unsigned char)protocol_status };

	record(s, FCGI_END_REQUEST, id, body, sizeof(body));
}

/* A name-value pair's length: one byte under 128, else four, high bit set. */
static void
nv_len(struct bytes *s, size_t n)
{
	unsigned char c[4] = { (unsigned char)(0x80 | n >> 24),
	    (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n };

	if (n < 128)
		put(s, c + 3, 1);
	else
		put(s, c, 4);
}

/* A pair of any bytes. */
static void
nvn(struct bytes *s, const char *name, size_t nlen, const char *value,
    size_t vlen)
{
	nv_len(s, nlen);
	nv_len(s, vlen);
	put(s, name, nlen);
	put(s, value, vlen);
}

static void
nv(struct bytes *s, const char *name, const char *value)
{
	nvn(s, name, strlen(name), value, strlen(value));
}

/*
 * The PARAMS stream p as records cut at the offsets cuts[0..ncut) (rising)
 * and at every FCGI_MAX_LENGTH bytes, then the empty record that ends it.
 */
static void
params(struct bytes *s, int id, const struct bytes *p, const size_t *cuts,
    size_t ncut)
{
	size_t at = 0, next, i = 0;

	while (at < p->len) {
		next = i < ncut ? cuts[i] : p->len;
		if (next - at > FCGI_MAX_LENGTH)
			next = at + FCGI_MAX_LENGTH;
		else if (i < ncut)
			i++;
		record(s, FCGI_PARAMS, id, p->b + at, next - at);
		at = next;
	}
	record(s, FCGI_PARAMS, id, NULL, 0);
}

/*
 * A whole request: BEGIN_REQUEST, the params in one record, the empty
 * PARAMS and the empty STDIN (lighttpd sends it to an authorizer too).
 */
static void
request(struct bytes *s, int id, int role, int flags, const struct bytes *p)
{
	begin(s, id, role, flags);
	params(s, id, p, NULL, 0);
	record(s, FCGI_STDIN, id, NULL, 0);
}

/* The records rlgate has still to send must be exactly want. */
static void
assert_out(const struct wire *w, const struct bytes *want)
{
	assert_int_equal(w->out_len - w->out_off, want->len);
	if (want->len > 0)
		assert_memory_equal(w->out + w->out_off, want->b, want->len);
}

/* w->envp must be exactly want[0..), NULL-terminated. */
static void
assert_env(const struct wire *w, const char *const *want)
{
	size_t i;

	assert_non_null(w->envp);
	for (i = 0; want[i] != NULL; i++) {
		assert_non_null(w->envp[i]);
		assert_string_equal(w->envp[i], want[i]);
	}
	assert_null(w->envp[i]);
}

static long
feed(struct wire *w, const struct bytes *s)
{
	return wire_feed(w, s->b, s->len);
}

/* ---- the authorizer request of the first tests ----------------------- */

static char	cookie[301];		/* 300 bytes: a 4-byte value length */
static char	long_name[131];		/* 130 bytes: a 4-byte name length */

/*
 * Writes an AUTHORIZER request (id 0x1234, no FCGI_KEEP_CONN) into s, its
 * PARAMS stream cut mid name, mid 4-byte length and mid value, then its
 * empty STDIN and a GET_VALUES, both for after the reply. Returns how many
 * bytes make the request READY: up to and including the empty PARAMS.
 */
static size_t
authorizer(struct bytes *s)
{
	struct bytes p = { 0 }, gv = { 0 };
	/* Pair 3 (HTTP_COOKIE) starts at 50, its value length at 51..54;
	 * pair 5's name length is at 373..376. */
	static const size_t cuts[] = { 5, 52, 200, 375 };
	size_t len;

	memset(cookie, 'c', sizeof(cookie) - 1);
	memset(long_name, 'N', sizeof(long_name) - 1);
	nv(&p, "REQUEST_URI", "/login?user=ann");
	nv(&p, "REMOTE_ADDR", "192.0.2.7");
	nv(&p, "HTTP_COOKIE", cookie);
	nv(&p, "EMPTY", "");
	nv(&p, long_name, "x");
	nv(&p, "FCGI_ROLE", "AUTHORIZER");
	assert_int_equal(p.b[50], 11);
	assert_int_equal(p.b[51], 0x80);
	assert_int_equal(p.b[373], 0x80);

	begin(s, 0x1234, WIRE_AUTHORIZER, 0);
	params(s, 0x1234, &p, cuts, sizeof(cuts) / sizeof(cuts[0]));
	len = s->len;
	record(s, FCGI_STDIN, 0x1234, NULL, 0);
	nv(&gv, "FCGI_MPXS_CONNS", "");
	record(s, FCGI_GET_VALUES, 0, gv.b, gv.len);
	free(p.b);
	free(gv.b);
	return len;
}

static void
assert_authorizer_ready(const struct wire *w)
{
	char c[400], n[400];

	assert_int_equal(w->state, WIRE_READY);
	assert_int_equal(w->id, 0x1234);
	assert_int_equal(w->role, WIRE_AUTHORIZER);
	assert_int_equal(w->keep, 0);
	snprintf(c, sizeof(c), "HTTP_COOKIE=%s", cookie);
	snprintf(n, sizeof(n), "%s=x", long_name);
	/* FCGI_ROLE first, from BEGIN_REQUEST, as libfcgi puts it; then
	 * the params in order (lighttpd's own FCGI_ROLE among them). */
	assert_env(w, (const char *const []){ "FCGI_ROLE=AUTHORIZER",
	    "REQUEST_URI=/login?user=ann", "REMOTE_ADDR=192.0.2.7", c,
	    "EMPTY=", n, "FCGI_ROLE=AUTHORIZER", NULL });
	/* Nothing to answer: the GET_VALUES after the STDIN is not read. */
	assert_int_equal(w->out_len, 0);
}

/* ---- requests in ----------------------------------------------------- */

static void
test_authorizer_request(void **state)
{
	struct bytes in = { 0 }, res = { 0 }, gv = { 0 };
	struct wire w = { 0 };
	size_t want = authorizer(&in);

	(void)state;
	assert_int_equal(feed(&w, &in), want);
	assert_authorizer_ready(&w);
	assert_null(w.error);
	/* READY until the reply: more bytes are not taken. */
	assert_int_equal(wire_feed(&w, in.b + want, in.len - want), 0);
	assert_int_equal(w.out_len, 0);
	/* After it, the empty STDIN ends the request and the GET_VALUES
	 * is answered. */
	assert_int_equal(wire_reply(&w, "", 0), 0);
	assert_int_equal(w.state, WIRE_DRAIN);
	wire_sent(&w, w.out_len);
	assert_int_equal(wire_feed(&w, in.b + want, in.len - want),
	    in.len - want);
	assert_int_equal(w.state, WIRE_IDLE);
	nv(&res, "FCGI_MPXS_CONNS", "0");
	record(&gv, FCGI_GET_VALUES_RESULT, 0, res.b, res.len);
	assert_out(&w, &gv);
	wire_free(&w);
	free(in.b);
	free(res.b);
	free(gv.b);
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

static void
test_byte_by_byte(void **state)
{
	struct bytes in = { 0 };
	struct wire w = { 0 };
	size_t want = authorizer(&in), used = 0, end, expect;
	long n;

	(void)state;
	/* As a socket would deliver it: each call sees one byte more. */
	for (end = 1; end <= in.len; end++) {
		expect = used < want ? whole_record(in.b + used, end - used) : 0;
		n = wire_feed(&w, in.b + used, end - used);
		assert_int_equal(n, expect);
		used += (size_t)n;
		if (used < want)
			assert_int_not_equal(w.state, WIRE_READY);
	}
	assert_int_equal(used, want);
	assert_authorizer_ready(&w);
	wire_free(&w);
	free(in.b);
}

static void
test_padding_skipped(void **state)
{
	struct bytes in = { 0 }, p = { 0 };
	struct wire w = { 0 };
	unsigned char body[8] = { 0, WIRE_RESPONDER, FCGI_KEEP_CONN };

	(void)state;
	nv(&p, "SCRIPT_NAME", "/x");
	nv(&p, "QUERY_STRING", "a=1");
	/* Padding on every record, up to the most a header allows. */
	record_pad(&in, FCGI_BEGIN_REQUEST, 9, body, sizeof(body), 7);
	record_pad(&in, FCGI_PARAMS, 9, p.b, 5, 255);
	record_pad(&in, FCGI_PARAMS, 9, p.b + 5, p.len - 5, 1);
	record_pad(&in, FCGI_PARAMS, 9, NULL, 0, 3);
	record_pad(&in, FCGI_STDIN, 9, "body", 4, 4);
	record_pad(&in, FCGI_STDIN, 9, NULL, 0, 8);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.id, 9);
	assert_int_equal(w.role, WIRE_RESPONDER);
	assert_int_equal(w.keep, 1);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=RESPONDER",
	    "SCRIPT_NAME=/x", "QUERY_STRING=a=1", NULL });
	wire_free(&w);
	free(in.b);
	free(p.b);
}

static void
test_empty_params(void **state)
{
	struct bytes in = { 0 }, p = { 0 };
	struct wire w = { 0 };

	(void)state;
	request(&in, 1, WIRE_RESPONDER, 0, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	/* Only the role, which is not a param. */
	assert_env(&w, (const char *const []){ "FCGI_ROLE=RESPONDER", NULL });
	wire_free(&w);
	free(in.b);
}

static void
test_other_ids_ignored(void **state)
{
	struct bytes p1 = { 0 }, p2 = { 0 };
	struct bytes steps[8] = { { 0 } };
	static const enum wire_state after[8] = { WIRE_PARAMS, WIRE_PARAMS,
	    WIRE_PARAMS, WIRE_PARAMS, WIRE_PARAMS, WIRE_STDIN, WIRE_STDIN,
	    WIRE_READY };
	struct wire w = { 0 };
	size_t i;

	(void)state;
	nv(&p1, "GOOD", "1");
	nv(&p2, "EVIL", "1");
	/* Only request 1 is open: records of 2 change nothing, not even
	 * the empty ones that would end its streams. */
	begin(&steps[0], 1, WIRE_RESPONDER, 0);
	record(&steps[1], FCGI_PARAMS, 2, p2.b, p2.len);
	record(&steps[2], FCGI_PARAMS, 1, p1.b, p1.len);
	record(&steps[3], FCGI_PARAMS, 2, NULL, 0);
	record(&steps[4], FCGI_STDIN, 2, NULL, 0);
	record(&steps[5], FCGI_PARAMS, 1, NULL, 0);
	record(&steps[6], FCGI_STDIN, 2, NULL, 0);
	record(&steps[7], FCGI_STDIN, 1, NULL, 0);
	for (i = 0; i < 8; i++) {
		assert_int_equal(feed(&w, &steps[i]), steps[i].len);
		assert_int_equal(w.state, after[i]);
		free(steps[i].b);
	}
	assert_int_equal(w.id, 1);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=RESPONDER",
	    "GOOD=1", NULL });
	assert_int_equal(w.out_len, 0);
	wire_free(&w);
	free(p1.b);
	free(p2.b);
}

/* ---- replies out ----------------------------------------------------- */

static void
test_reply_small(void **state)
{
	static const char reply[] = "Status: 200 OK\r\n\r\n";
	struct bytes in = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	authorizer(&in);
	feed(&w, &in);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(wire_reply(&w, reply, strlen(reply)), 0);
	/* The data, the empty STDOUT that ends it, END_REQUEST complete. */
	record(&want, FCGI_STDOUT, 0x1234, reply, strlen(reply));
	record(&want, FCGI_STDOUT, 0x1234, NULL, 0);
	end_request(&want, 0x1234, FCGI_REQUEST_COMPLETE);
	assert_out(&w, &want);
	/* An authorizer's STDIN may follow its reply. */
	assert_int_equal(w.state, WIRE_DRAIN);
	/* No FCGI_KEEP_CONN: the connection ends with this reply. */
	assert_true(w.closing);
	wire_free(&w);
	free(in.b);
	free(want.b);
}

static void
test_reply_empty(void **state)
{
	struct bytes in = { 0 }, p = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	request(&in, 3, WIRE_RESPONDER, 0, &p);
	feed(&w, &in);
	assert_int_equal(wire_reply(&w, "", 0), 0);
	record(&want, FCGI_STDOUT, 3, NULL, 0);
	end_request(&want, 3, FCGI_REQUEST_COMPLETE);
	assert_out(&w, &want);
	wire_free(&w);
	free(in.b);
	free(want.b);
}

static void
test_reply_split_and_keep_conn(void **state)
{
	size_t big = 2 * FCGI_MAX_LENGTH + 100, i;
	char *reply = malloc(big);
	struct bytes in = { 0 }, p = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	assert_non_null(reply);
	for (i = 0; i < big; i++)
		reply[i] = (char)('a' + i % 23);
	nv(&p, "REQUEST_URI", "/one");
	request(&in, 0x0102, WIRE_RESPONDER, FCGI_KEEP_CONN, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.keep, 1);
	assert_int_equal(wire_reply(&w, reply, big), 0);
	/* Records of at most 65535 content bytes, in order. */
	record(&want, FCGI_STDOUT, 0x0102, reply, FCGI_MAX_LENGTH);
	record(&want, FCGI_STDOUT, 0x0102, reply + FCGI_MAX_LENGTH, FCGI_MAX_LENGTH);
	record(&want, FCGI_STDOUT, 0x0102, reply + 2 * FCGI_MAX_LENGTH, 100);
	record(&want, FCGI_STDOUT, 0x0102, NULL, 0);
	end_request(&want, 0x0102, FCGI_REQUEST_COMPLETE);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_IDLE);
	assert_false(w.closing);
	wire_sent(&w, w.out_len - w.out_off);
	assert_int_equal(w.out_off, 0);
	assert_int_equal(w.out_len, 0);

	/* The next request on the same connection, 65535 bytes: one record.
	 * Its params replace the first request's. */
	in.len = p.len = want.len = 0;
	nv(&p, "REQUEST_URI", "/two");
	request(&in, 0x0103, WIRE_RESPONDER, 0, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.id, 0x0103);
	assert_int_equal(w.role, WIRE_RESPONDER);
	assert_int_equal(w.keep, 0);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=RESPONDER",
	    "REQUEST_URI=/two", NULL });
	assert_int_equal(wire_reply(&w, reply, FCGI_MAX_LENGTH), 0);
	record(&want, FCGI_STDOUT, 0x0103, reply, FCGI_MAX_LENGTH);
	record(&want, FCGI_STDOUT, 0x0103, NULL, 0);
	end_request(&want, 0x0103, FCGI_REQUEST_COMPLETE);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_IDLE);
	assert_true(w.closing);
	wire_free(&w);
	free(reply);
	free(in.b);
	free(p.b);
	free(want.b);
}

static void
test_authorizer_drain(void **state)
{
	struct bytes in = { 0 }, p = { 0 }, want = { 0 };
	struct wire w = { 0 };
	size_t ready;

	(void)state;
	nv(&p, "REQUEST_URI", "/a");
	begin(&in, 4, WIRE_AUTHORIZER, FCGI_KEEP_CONN);
	params(&in, 4, &p, NULL, 0);
	ready = in.len;
	record(&in, FCGI_STDIN, 4, "body", 4);
	record(&in, FCGI_ABORT_REQUEST, 4, NULL, 0);
	record(&in, FCGI_STDIN, 5, NULL, 0);
	record(&in, FCGI_STDIN, 4, NULL, 0);
	assert_int_equal(feed(&w, &in), ready);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(wire_reply(&w, "", 0), 0);
	assert_int_equal(w.state, WIRE_DRAIN);
	assert_false(w.closing);
	wire_sent(&w, w.out_len);

	/* Its body is thrown away, an abort comes too late to be answered,
	 * another id's STDIN does not end it: only its own empty STDIN. */
	assert_int_equal(wire_feed(&w, in.b + ready, in.len - ready - 8),
	    in.len - ready - 8);
	assert_int_equal(w.state, WIRE_DRAIN);
	assert_int_equal(w.out_len, 0);
	assert_int_equal(wire_feed(&w, in.b + in.len - 8, 8), 8);
	assert_int_equal(w.state, WIRE_IDLE);
	assert_int_equal(w.out_len, 0);

	/* Apache's mod_authnz_fcgi sends no STDIN: its next BEGIN_REQUEST
	 * starts the next request, it is not refused as a second one. */
	in.len = 0;
	begin(&in, 1, WIRE_AUTHORIZER, FCGI_KEEP_CONN);
	params(&in, 1, &p, NULL, 0);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(wire_reply(&w, "", 0), 0);
	assert_int_equal(w.state, WIRE_DRAIN);
	wire_sent(&w, w.out_len);
	in.len = p.len = 0;
	nv(&p, "REQUEST_URI", "/b");
	begin(&in, 1, WIRE_AUTHORIZER, 0);
	params(&in, 1, &p, NULL, 0);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.out_len, 0);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.keep, 0);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=AUTHORIZER",
	    "REQUEST_URI=/b", NULL });
	assert_int_equal(wire_reply(&w, "", 0), 0);
	record(&want, FCGI_STDOUT, 1, NULL, 0);
	end_request(&want, 1, FCGI_REQUEST_COMPLETE);
	assert_out(&w, &want);
	assert_true(w.closing);
	wire_free(&w);
	free(in.b);
	free(p.b);
	free(want.b);
}

static void
test_sent_partial(void **state)
{
	struct bytes in = { 0 }, p = { 0 }, gv = { 0 }, want = { 0 };
	struct wire w = { 0 };
	size_t len;

	(void)state;
	request(&in, 1, WIRE_RESPONDER, FCGI_KEEP_CONN, &p);
	feed(&w, &in);
	assert_int_equal(wire_reply(&w, "hello", 5), 0);
	len = w.out_len;
	assert_int_equal(len, 8 + 5 + 8 + 8 + 8);
	wire_sent(&w, 3);
	assert_int_equal(w.out_off, 3);
	assert_int_equal(w.out_len, len);
	wire_sent(&w, 10);
	assert_int_equal(w.out_off, 13);
	/* An answer made while the socket is full goes after what is left. */
	nv(&gv, "FCGI_MAX_CONNS", "");
	in.len = 0;
	record(&in, FCGI_GET_VALUES, 0, gv.b, gv.len);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.out_off, 13);
	assert_int_equal(w.out_len, len + 8 + 2 + 14 + 4);
	record(&want, FCGI_STDOUT, 1, NULL, 0);
	end_request(&want, 1, FCGI_REQUEST_COMPLETE);
	gv.len = 0;
	nv(&gv, "FCGI_MAX_CONNS", "1024");
	record(&want, FCGI_GET_VALUES_RESULT, 0, gv.b, gv.len);
	assert_out(&w, &want);
	wire_sent(&w, w.out_len - w.out_off - 1);
	assert_int_equal(w.out_off, w.out_len - 1);
	wire_sent(&w, 1);
	assert_int_equal(w.out_off, 0);
	assert_int_equal(w.out_len, 0);
	wire_free(&w);
	free(in.b);
	free(gv.b);
	free(want.b);
}

/* ---- refusals and management records ---------------------------------- */

static void
test_second_request_refused(void **state)
{
	struct bytes in = { 0 }, p = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	nv(&p, "REQUEST_URI", "/first");
	begin(&in, 1, WIRE_RESPONDER, FCGI_KEEP_CONN);
	record(&in, FCGI_PARAMS, 1, p.b, p.len);
	/* One request at a time per connection (FCGI_MPXS_CONNS is 0). */
	begin(&in, 2, WIRE_AUTHORIZER, 0);
	assert_int_equal(feed(&w, &in), in.len);
	end_request(&want, 2, FCGI_CANT_MPX_CONN);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_PARAMS);
	assert_int_equal(w.id, 1);
	assert_int_equal(w.role, WIRE_RESPONDER);
	assert_int_equal(w.keep, 1);
	assert_false(w.closing);

	/* Request 1 goes on as if nothing had come between. */
	wire_sent(&w, w.out_len);
	in.len = 0;
	record(&in, FCGI_PARAMS, 1, NULL, 0);
	record(&in, FCGI_STDIN, 1, NULL, 0);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.id, 1);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=RESPONDER",
	    "REQUEST_URI=/first", NULL });
	assert_int_equal(wire_reply(&w, "", 0), 0);
	assert_false(w.closing);
	wire_free(&w);
	free(in.b);
	free(p.b);
	free(want.b);
}

static void
test_unknown_role_refused(void **state)
{
	struct bytes in = { 0 }, p = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	begin(&in, 5, FCGI_FILTER, 0);
	assert_int_equal(feed(&w, &in), in.len);
	end_request(&want, 5, FCGI_UNKNOWN_ROLE);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_IDLE);
	assert_true(w.closing);
	wire_free(&w);

	/* With FCGI_KEEP_CONN the connection stays for the next request. */
	in.len = want.len = 0;
	begin(&in, 6, FCGI_FILTER, FCGI_KEEP_CONN);
	request(&in, 7, WIRE_RESPONDER, FCGI_KEEP_CONN, &p);
	assert_int_equal(feed(&w, &in), in.len);
	end_request(&want, 6, FCGI_UNKNOWN_ROLE);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.id, 7);
	assert_int_equal(w.role, WIRE_RESPONDER);
	assert_false(w.closing);
	wire_free(&w);
	free(in.b);
	free(want.b);
}

static void
test_abort_before_ready(void **state)
{
	struct bytes in = { 0 }, p = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	nv(&p, "ABORTED", "yes");
	/* An abort of no open request is not answered. */
	record(&in, FCGI_ABORT_REQUEST, 7, NULL, 0);
	begin(&in, 7, WIRE_RESPONDER, FCGI_KEEP_CONN);
	record(&in, FCGI_PARAMS, 7, p.b, p.len);
	record(&in, FCGI_ABORT_REQUEST, 8, NULL, 0);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.out_len, 0);
	assert_int_equal(w.state, WIRE_PARAMS);

	in.len = 0;
	record(&in, FCGI_ABORT_REQUEST, 7, NULL, 0);
	assert_int_equal(feed(&w, &in), in.len);
	end_request(&want, 7, FCGI_REQUEST_COMPLETE);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_IDLE);
	assert_false(w.closing);

	/* Forgotten: the next request starts with no params. */
	wire_sent(&w, w.out_len);
	in.len = p.len = 0;
	nv(&p, "NEXT", "1");
	request(&in, 8, WIRE_RESPONDER, 0, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=RESPONDER",
	    "NEXT=1", NULL });
	assert_int_equal(w.out_len, 0);
	wire_free(&w);
	free(in.b);
	free(p.b);
	free(want.b);
}

static void
test_get_values(void **state)
{
	struct bytes in = { 0 }, ask = { 0 }, res = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	nv(&ask, "FCGI_MPXS_CONNS", "");
	nv(&ask, "FCGI_MAX_CONNS", "");
	nv(&ask, "FCGI_NOT_A_VARIABLE", "");
	record(&in, FCGI_GET_VALUES, 0, ask.b, ask.len);
	assert_int_equal(feed(&w, &in), in.len);
	/* The known names, in the order asked; the unknown one left out. */
	nv(&res, "FCGI_MPXS_CONNS", "0");
	nv(&res, "FCGI_MAX_CONNS", "1024");
	record(&want, FCGI_GET_VALUES_RESULT, 0, res.b, res.len);
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_IDLE);
	assert_false(w.closing);
	wire_free(&w);
	free(in.b);
	free(ask.b);
	free(res.b);
	free(want.b);
}

static void
test_unknown_type(void **state)
{
	static const unsigned char body[8] = { 42 };
	struct bytes in = { 0 }, want = { 0 };
	struct wire w = { 0 };

	(void)state;
	record(&in, 42, 0, "?", 1);
	assert_int_equal(feed(&w, &in), in.len);
	record(&want, FCGI_UNKNOWN_TYPE, 0, body, sizeof(body));
	assert_out(&w, &want);
	assert_int_equal(w.state, WIRE_IDLE);
	wire_free(&w);
	free(in.b);
	free(want.b);
}

/* ---- what ends the connection ----------------------------------------- */

static void
test_not_version_1(void **state)
{
	struct bytes in = { 0 }, p = { 0 };
	struct wire w = { 0 };

	(void)state;
	request(&in, 1, WIRE_RESPONDER, 0, &p);
	in.b[0] = 2;
	assert_int_equal(feed(&w, &in), -1);
	assert_string_equal(w.error, "not FastCGI version 1");
	wire_free(&w);
	/* Not even when the record is not complete yet. */
	in.b[0] = 0;
	assert_int_equal(wire_feed(&w, in.b, 8), -1);
	assert_string_equal(w.error, "not FastCGI version 1");
	wire_free(&w);
	/* Nor in the middle of a request. */
	in.b[0] = 1;
	in.b[16] = 2;
	assert_int_equal(feed(&w, &in), -1);
	assert_string_equal(w.error, "not FastCGI version 1");
	wire_free(&w);
	free(in.b);
}

static void
test_short_begin_request(void **state)
{
	static const unsigned char body[7] = { 0, WIRE_RESPONDER };
	struct bytes in = { 0 };
	struct wire w = { 0 };

	(void)state;
	record(&in, FCGI_BEGIN_REQUEST, 1, body, sizeof(body));
	assert_int_equal(feed(&w, &in), -1);
	assert_string_equal(w.error, "BEGIN_REQUEST is too short");
	wire_free(&w);
	free(in.b);
}

static void
test_pair_cut_short(void **state)
{
	/* Name 5 and value 3 bytes announced, 7 there; a 4-byte length cut
	 * after its second byte; a value length past the stream's end. */
	static const unsigned char cut[][12] = {
		{ 5, 3, 'N', 'A', 'M', 'E', 'S', 'v', 'a' },
		{ 1, 1, 'A', 'b', 0x80, 0 },
		{ 1, 0x80, 0, 1, 0, 'A', 'b', 'c' },
	};
	static const size_t len[] = { 9, 6, 8 };
	struct bytes in = { 0 }, p = { 0 };
	struct wire w = { 0 };
	char value[1017];
	size_t i;

	(void)state;
	for (i = 0; i < 3; i++) {
		in.len = 0;
		begin(&in, 1, WIRE_RESPONDER, 0);
		record(&in, FCGI_PARAMS, 1, cut[i], len[i]);
		record(&in, FCGI_PARAMS, 1, NULL, 0);
		record(&in, FCGI_STDIN, 1, NULL, 0);
		assert_int_equal(feed(&w, &in), -1);
		assert_string_equal(w.error, "a PARAMS name-value pair is cut short");
		wire_free(&w);
	}
	/* A 4-byte length cut at the very end of a 1024-byte stream (as
	 * large as wire's first buffer): ASan sees a read past it. */
	memset(value, 'v', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	nv(&p, "X", value);
	put(&p, cut[1] + 4, 2);
	assert_int_equal(p.len, 1024);
	in.len = 0;
	request(&in, 1, WIRE_RESPONDER, 0, &p);
	assert_int_equal(feed(&w, &in), -1);
	assert_string_equal(w.error, "a PARAMS name-value pair is cut short");
	wire_free(&w);
	free(in.b);
	free(p.b);
}

/* One pair "X" whose value makes the PARAMS stream total bytes long. */
static void
params_of_size(struct bytes *in, size_t total)
{
	struct bytes p = { 0 };
	char *value = malloc(total - 6 + 1);

	assert_non_null(value);
	memset(value, 'v', total - 6);
	value[total - 6] = '\0';
	nv(&p, "X", value);
	assert_int_equal(p.len, total);
	request(in, 1, WIRE_RESPONDER, 0, &p);
	free(value);
	free(p.b);
}

static void
test_params_too_long(void **state)
{
	struct bytes in = { 0 }, p = { 0 };
	struct wire w = { 0 };
	char *big = malloc(WIRE_MAX_PARAMS + 1);

	(void)state;
	assert_non_null(big);
	memset(big, 'v', WIRE_MAX_PARAMS);
	big[WIRE_MAX_PARAMS] = '\0';
	/* WIRE_MAX_PARAMS bytes are a request... */
	params_of_size(&in, WIRE_MAX_PARAMS);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.state, WIRE_READY);
	assert_string_equal(w.envp[0], "FCGI_ROLE=RESPONDER");
	assert_int_equal(strlen(w.envp[1]), WIRE_MAX_PARAMS - 6 + 2);
	assert_null(w.envp[2]);
	wire_free(&w);
	/* ... one more is read to its end and refused, the pair it cut
	 * dropped, the ones before it kept (for the audit row). */
	in.len = 0;
	params_of_size(&in, WIRE_MAX_PARAMS + 1);
	assert_int_equal(feed(&w, &in), in.len);
	assert_null(w.error);
	assert_int_equal(w.state, WIRE_READY);
	assert_string_equal(w.refused, "the request's params (headers) are "
	    "over 1048576 bytes");
	assert_env(&w, (const char *const[]){ "FCGI_ROLE=RESPONDER", NULL });
	wire_free(&w);
	memset(&w, 0, sizeof(w));
	in.len = 0;
	nv(&p, "REQUEST_URI", "/a");
	nv(&p, "X", big);
	request(&in, 1, WIRE_RESPONDER, FCGI_KEEP_CONN, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_non_null(w.refused);
	assert_env(&w, (const char *const[]){ "FCGI_ROLE=RESPONDER",
	    "REQUEST_URI=/a", NULL });
	/* Answered, the connection's next request starts afresh. */
	assert_int_equal(wire_reply(&w, "", 0), 0);
	p.len = 0;
	nv(&p, "REQUEST_URI", "/b");
	in.len = 0;
	request(&in, 2, WIRE_RESPONDER, FCGI_KEEP_CONN, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_null(w.refused);
	assert_env(&w, (const char *const[]){ "FCGI_ROLE=RESPONDER",
	    "REQUEST_URI=/b", NULL });
	wire_free(&w);
	free(in.b);
	free(p.b);
	free(big);
}

/* A request of n params "A=" (the smallest pair there is). */
static void
many_params(struct bytes *in, size_t n)
{
	struct bytes p = { 0 };

	while (n-- > 0)
		nv(&p, "A", "");
	in->len = 0;
	request(in, 1, WIRE_RESPONDER, 0, &p);
	free(p.b);
}

/* WIRE_MAX_ENV params are a request (after FCGI_ROLE, which is not a
 * param); one more is read to its end and refused, the first WIRE_MAX_ENV
 * kept (for the audit row). */
static void
test_too_many_params(void **state)
{
	struct bytes in = { 0 };
	struct wire w = { 0 };
	size_t i;

	(void)state;
	many_params(&in, WIRE_MAX_ENV);
	assert_int_equal(feed(&w, &in), in.len);
	assert_null(w.error);
	assert_int_equal(w.state, WIRE_READY);
	assert_string_equal(w.envp[0], "FCGI_ROLE=RESPONDER");
	for (i = 1; i <= WIRE_MAX_ENV; i++)
		assert_string_equal(w.envp[i], "A=");
	assert_null(w.envp[WIRE_MAX_ENV + 1]);
	wire_free(&w);
	assert_null(w.refused);
	wire_free(&w);
	memset(&w, 0, sizeof(w));
	many_params(&in, WIRE_MAX_ENV + 1);
	assert_int_equal(feed(&w, &in), in.len);
	assert_null(w.error);
	assert_int_equal(w.state, WIRE_READY);
	assert_string_equal(w.refused, "the request has more than 4096 "
	    "params (headers)");
	for (i = 1; i <= WIRE_MAX_ENV; i++)
		assert_string_equal(w.envp[i], "A=");
	assert_null(w.envp[WIRE_MAX_ENV + 1]);
	wire_free(&w);
	free(in.b);
}

/*
 * A name that no "NAME=" lookup could find (empty, or holding a NUL or
 * '=') is skipped, and cannot pass for another param: "A\0B" is not "A".
 * A NUL in a value refuses the request (400), the byte shown as %00: a C
 * string would have cut the value there.
 */
static void
test_unfindable_names_skipped(void **state)
{
	struct bytes in = { 0 }, p = { 0 };
	struct wire w = { 0 };

	(void)state;
	nvn(&p, "A\0B", 3, "spoof", 5);
	nvn(&p, "", 0, "empty", 5);
	nvn(&p, "X=Y", 3, "eq", 2);
	nvn(&p, "REMOTE_ADDR", 11, "10.0.0.1\0tail", 13);
	request(&in, 1, WIRE_AUTHORIZER, 0, &p);
	assert_int_equal(feed(&w, &in), in.len - 8);	/* not the STDIN */
	assert_int_equal(w.state, WIRE_READY);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=AUTHORIZER",
	    "REMOTE_ADDR=10.0.0.1%00tail", NULL });
	assert_non_null(w.refused);
	assert_int_equal(w.refused_status, 400);
	wire_free(&w);
	free(in.b);
	free(p.b);
}

/*
 * A reset wire is a new connection's: a spare connection reused after a
 * refused request with FCGI_KEEP_CONN reads the next one as new, keeping
 * no refusal, id, flag or param of the last, and reuses its buffers (but
 * not one grown past WIRE_KEEP_BYTES).
 */
static void
test_reset_forgets_the_last_request(void **state)
{
	struct bytes in = { 0 }, in2 = { 0 }, in3 = { 0 }, p = { 0 },
	    p2 = { 0 }, p3 = { 0 };
	struct wire w = { 0 };
	char *params, *big;

	(void)state;
	nvn(&p, "REMOTE_ADDR", 11, "10.0.0.1\0tail", 13);
	request(&in, 7, WIRE_RESPONDER, FCGI_KEEP_CONN, &p);
	assert_int_equal(feed(&w, &in), in.len);
	assert_int_equal(w.refused_status, 400);
	assert_int_equal(wire_reply(&w, "x", 1), 0);
	params = w.params;
	wire_reset(&w);
	assert_int_equal(w.out_len, 0);
	assert_ptr_equal(w.params, params);

	nv(&p2, "REQUEST_URI", "/next");
	request(&in2, 1, WIRE_AUTHORIZER, 0, &p2);
	assert_int_equal(feed(&w, &in2), in2.len - 8);	/* not the STDIN */
	assert_int_equal(w.state, WIRE_READY);
	assert_int_equal(w.id, 1);
	assert_int_equal(w.role, WIRE_AUTHORIZER);
	assert_int_equal(w.keep, 0);
	assert_null(w.refused);
	assert_int_equal(w.refused_status, 0);
	assert_env(&w, (const char *const []){ "FCGI_ROLE=AUTHORIZER",
	    "REQUEST_URI=/next", NULL });

	/* A buffer grown past WIRE_KEEP_BYTES is not kept. */
	big = calloc(1, WIRE_KEEP_BYTES + 1);
	assert_non_null(big);
	memset(big, 'c', WIRE_KEEP_BYTES);
	nv(&p3, "HTTP_COOKIE", big);
	request(&in3, 2, WIRE_AUTHORIZER, 0, &p3);
	wire_reset(&w);
	assert_int_equal(feed(&w, &in3), in3.len - 8);
	assert_true(w.params_cap > WIRE_KEEP_BYTES);
	wire_reset(&w);
	assert_null(w.params);
	assert_int_equal(w.params_cap, 0);
	wire_free(&w);
	free(big);
	free(in.b);
	free(in2.b);
	free(in3.b);
	free(p.b);
	free(p2.b);
	free(p3.b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_authorizer_request),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_padding_skipped),
		cmocka_unit_test(test_empty_params),
		cmocka_unit_test(test_other_ids_ignored),
		cmocka_unit_test(test_reply_small),
		cmocka_unit_test(test_reply_empty),
		cmocka_unit_test(test_reply_split_and_keep_conn),
		cmocka_unit_test(test_authorizer_drain),
		cmocka_unit_test(test_sent_partial),
		cmocka_unit_test(test_second_request_refused),
		cmocka_unit_test(test_unknown_role_refused),
		cmocka_unit_test(test_abort_before_ready),
		cmocka_unit_test(test_get_values),
		cmocka_unit_test(test_unknown_type),
		cmocka_unit_test(test_not_version_1),
		cmocka_unit_test(test_short_begin_request),
		cmocka_unit_test(test_pair_cut_short),
		cmocka_unit_test(test_params_too_long),
		cmocka_unit_test(test_too_many_params),
		cmocka_unit_test(test_unfindable_names_skipped),
		cmocka_unit_test(test_reset_forgets_the_last_request),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
