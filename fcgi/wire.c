/*
 * wire: FastCGI records, as the FastCGI 1.0 specification defines them.
 * A record is an 8-byte header (version 1, type, request id, content
 * length, padding length, a reserved byte), the content and the padding.
 * Name-value pairs (PARAMS, GET_VALUES) give each length in one byte, or
 * in four with the high bit set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

enum {
	BEGIN_REQUEST = 1, ABORT_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT,
	STDERR, DATA, GET_VALUES, GET_VALUES_RESULT, UNKNOWN_TYPE
};
enum { REQUEST_COMPLETE = 0, CANT_MPX_CONN, OVERLOADED, UNKNOWN_ROLE };
#define KEEP_CONN	1
#define MAX_CONTENT	65535

/* w->refused's sentences name the limits. */
_Static_assert(WIRE_MAX_ENV == 4096 && WIRE_MAX_PARAMS == 1048576,
    "the sentences of w->refused say 4096 params and 1048576 bytes");

void
wire_free(struct wire *w)
{
	free(w->params);
	free(w->envp);
	free(w->out);
	memset(w, 0, sizeof(*w));
}

/* buf, or NULL once freed: a spare keeps WIRE_KEEP_BYTES of a buffer. */
static void *
spare(void *buf, size_t bytes)
{
	if (bytes <= WIRE_KEEP_BYTES)
		return buf;
	free(buf);
	return NULL;
}

void
wire_reset(struct wire *w)
{
	struct wire fresh;

	memset(&fresh, 0, sizeof(fresh));
	if ((fresh.params = spare(w->params, w->params_cap)) != NULL)
		fresh.params_cap = w->params_cap;
	if ((fresh.envp = spare(w->envp, w->env_cap * sizeof(*w->envp))) != NULL)
		fresh.env_cap = w->env_cap;
	if ((fresh.out = spare(w->out, w->out_cap)) != NULL)
		fresh.out_cap = w->out_cap;
	*w = fresh;
}

static int
grow(char **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 1024;
	char *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if ((p = realloc(*buf, n)) == NULL)
		return -1;
	*buf = p;
	*cap = n;
	return 0;
}

/* Appends one record (no padding: the specification only recommends it). */
static int
record(struct wire *w, int type, int id, const void *data, size_t len)
{
	unsigned char h[8] = { 1, (unsigned char)type, (unsigned char)(id >> 8),
	    (unsigned char)id, (unsigned char)(len >> 8), (unsigned char)len,
	    0, 0 };

	if (grow(&w->out, &w->out_cap, w->out_len + sizeof(h) + len) == -1)
		return -1;
	memcpy(w->out + w->out_len, h, sizeof(h));
	if (len > 0)
		memcpy(w->out + w->out_len + sizeof(h), data, len);
	w->out_len += sizeof(h) + len;
	return 0;
}

static int
end_request(struct wire *w, int id, int protocol_status)
{
	unsigned char body[8] = { 0, 0, 0, 0, (unsigned char)protocol_status };

	return record(w, END_REQUEST, id, body, sizeof(body));
}

/*
 * Reads the name-value pair at p[0..len): returns its size with the name
 * and value in *name, *nlen, *value, *vlen, or 0 when it is cut short.
 */
static size_t
pair(const unsigned char *p, size_t len, const unsigned char **name,
    size_t *nlen, const unsigned char **value, size_t *vlen)
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
			    (size_t)p[off + 1] << 16 |
			    (size_t)p[off + 2] << 8 | p[off + 3];
			off += 4;
		}
	}
	if (n[0] > len - off || n[1] > len - off - n[0])
		return 0;
	*name = p + off;
	*nlen = n[0];
	*value = p + off + n[0];
	*vlen = n[1];
	return off + n[0] + n[1];
}

/* The NUL bytes in the values of the PARAMS stream in[0..len). */
static size_t
nul_bytes(const unsigned char *in, size_t len)
{
	const unsigned char *name, *value, *p, *end;
	size_t off = 0, n = 0, nlen, vlen, used;

	while (off < len && (used = pair(in + off, len - off, &name, &nlen,
	    &value, &vlen)) > 0) {
		off += used;
		for (p = value, end = value + vlen;
		    (p = memchr(p, '\0', (size_t)(end - p))) != NULL; p++)
			n++;
	}
	return n;
}

/* Writes value v[0..vlen) at out, each NUL byte as "%00" when escape is
 * set. Returns the bytes written. */
static size_t
put_value(char *out, const unsigned char *v, size_t vlen, int escape)
{
	size_t i, n = 0;

	if (!escape) {
		memmove(out, v, vlen);
		return vlen;
	}
	for (i = 0; i < vlen; i++) {
		if (v[i] != '\0')
			out[n++] = (char)v[i];
		else {
			memcpy(out + n, "%00", 3);
			n += 3;
		}
	}
	return n;
}

/*
 * Turns the PARAMS stream into "NAME=value" strings, in place: a pair
 * takes at least two length bytes, and its string adds '=' and a NUL, so
 * writing never overtakes reading. The first is FCGI_ROLE, from
 * BEGIN_REQUEST, as libfcgi gives it (the role is not a param). A value
 * with a NUL byte (only a FastCGI client talking to rlgate directly can
 * send one) refuses the request with 400; its strings are then written
 * from a copy, each NUL as "%00", so that the audit shows what came.
 */
static int
make_env(struct wire *w)
{
	static char responder[] = "FCGI_ROLE=RESPONDER";
	static char authorizer[] = "FCGI_ROLE=AUTHORIZER";
	const unsigned char *in = (const unsigned char *)w->params, *name,
	    *value;
	unsigned char *copy = NULL;
	size_t off = 0, at = 0, nenv = 1, nlen, vlen, used, nuls;

	if ((nuls = nul_bytes(in, w->params_len)) > 0) {
		if ((copy = malloc(w->params_len)) == NULL ||
		    grow(&w->params, &w->params_cap,
		    w->params_len + 2 * nuls) == -1) {
			free(copy);
			w->error = "out of memory";
			return -1;
		}
		memcpy(copy, w->params, w->params_len);
		in = copy;
		if (w->refused == NULL) {
			w->refused = "a param (header) value holds a NUL "
			    "byte, which HTTP never sends";
			w->refused_status = 400;
		}
	}

	if (w->env_cap < 2) {
		free(w->envp);
		if ((w->envp = malloc(64 * sizeof(*w->envp))) == NULL) {
			w->env_cap = 0;
			w->error = "out of memory";
			return -1;
		}
		w->env_cap = 64;
	}
	w->envp[0] = w->role == WIRE_AUTHORIZER ? authorizer : responder;

	while (off < w->params_len) {
		used = pair(in + off, w->params_len - off, &name, &nlen, &value,
		    &vlen);
		if (used == 0) {
			/* Over WIRE_MAX_PARAMS: the stream was cut. */
			if (w->refused != NULL)
				break;
			free(copy);
			w->error = "a PARAMS name-value pair is cut short";
			return -1;
		}
		off += used;
		/* A name no lookup can find ("NAME=" is looked for): a
		 * server never sends one; skip it. */
		if (nlen == 0 || memchr(name, '\0', nlen) != NULL ||
		    memchr(name, '=', nlen) != NULL)
			continue;
		if (nenv > WIRE_MAX_ENV) {	/* envp[0] is FCGI_ROLE */
			w->refused = "the request has more than 4096 params "
			    "(headers)";
			w->refused_status = 431;
			break;
		}
		if (nenv + 2 > w->env_cap) {
			size_t cap = w->env_cap * 2;
			char **p = realloc(w->envp, cap * sizeof(*p));

			if (p == NULL) {
				free(copy);
				w->error = "out of memory";
				return -1;
			}
			w->envp = p;
			w->env_cap = cap;
		}
		w->envp[nenv++] = w->params + at;
		memmove(w->params + at, name, nlen);
		at += nlen;
		w->params[at++] = '=';
		at += put_value(w->params + at, value, vlen, copy != NULL);
		w->params[at++] = '\0';
	}
	w->envp[nenv] = NULL;
	free(copy);
	return 0;
}

/* GET_VALUES: what rlgate is asked about, answered as a web server needs. */
static int
get_values(struct wire *w, const unsigned char *p, size_t len)
{
	static const struct { const char *name, *value; } known[] = {
		{ "FCGI_MAX_CONNS", "1024" },
		{ "FCGI_MAX_REQS", "1024" },
		{ "FCGI_MPXS_CONNS", "0" },
	};
	unsigned char res[256];
	const unsigned char *name, *value;
	size_t off = 0, n = 0, nlen, vlen, used, i;

	while (off < len && (used = pair(p + off, len - off, &name, &nlen,
	    &value, &vlen)) > 0) {
		off += used;
		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
			size_t kn = strlen(known[i].name);
			size_t kv = strlen(known[i].value);

			if (nlen != kn || memcmp(name, known[i].name, kn) != 0 ||
			    n + 2 + kn + kv > sizeof(res))
				continue;
			res[n++] = (unsigned char)kn;
			res[n++] = (unsigned char)kv;
			memcpy(res + n, known[i].name, kn);
			memcpy(res + n + kn, known[i].value, kv);
			n += kn + kv;
		}
	}
	return record(w, GET_VALUES_RESULT, 0, res, n);
}

/*
 * Management records: GET_VALUES, unknown types; refusals: another request
 * id, a role other than RESPONDER or AUTHORIZER. A request over
 * WIRE_MAX_PARAMS or WIRE_MAX_ENV is read to its end all the same (the
 * rest of its params dropped) and becomes READY with w->refused set; so
 * does one with a NUL byte in a value, which HTTP never sends and a C
 * string would cut short. An aborted request (FCGI_ABORT_REQUEST before
 * READY) is ended and forgotten.
 */
long
wire_feed(struct wire *w, const unsigned char *buf, size_t len)
{
	size_t off = 0, clen, total;
	const unsigned char *h, *body;
	int type, id, rc = 0;

	while (w->state != WIRE_READY && rc == 0 && len - off >= 8) {
		h = buf + off;
		if (h[0] != 1) {
			w->error = "not FastCGI version 1";
			return -1;
		}
		clen = (size_t)h[4] << 8 | h[5];
		total = 8 + clen + h[6];
		if (len - off < total)
			break;
		type = h[1];
		id = h[2] << 8 | h[3];
		body = h + 8;
		off += total;
		switch (type) {
		case BEGIN_REQUEST:
			if (clen < 8) {
				w->error = "BEGIN_REQUEST is too short";
				return -1;
			}
			/* A server that never ends an authorizer's STDIN
			 * starts the next request without it. */
			if (w->state != WIRE_IDLE && w->state != WIRE_DRAIN) {
				rc = end_request(w, id, CANT_MPX_CONN);
				break;
			}
			w->state = WIRE_IDLE;
			w->role = body[0] << 8 | body[1];
			w->keep = body[2] & KEEP_CONN;
			w->closing = 0;
			if (w->role != WIRE_RESPONDER &&
			    w->role != WIRE_AUTHORIZER) {
				rc = end_request(w, id, UNKNOWN_ROLE);
				w->closing = !w->keep;
				break;
			}
			w->id = id;
			w->params_len = 0;
			w->refused = NULL;
			w->state = WIRE_PARAMS;
			break;
		case ABORT_REQUEST:
			if (w->state == WIRE_IDLE || w->state == WIRE_DRAIN ||
			    id != w->id)
				break;
			rc = end_request(w, id, REQUEST_COMPLETE);
			w->state = WIRE_IDLE;
			w->closing = !w->keep;
			break;
		case PARAMS:
			if (w->state != WIRE_PARAMS || id != w->id)
				break;
			if (clen == 0) {
				if (make_env(w) == -1)
					return -1;
				w->state = w->role == WIRE_AUTHORIZER ?
				    WIRE_READY : WIRE_STDIN;
				break;
			}
			/* Too much: read to the end all the same, keep
			 * nothing more, and answer it (431). */
			if (w->refused != NULL)
				break;
			if (w->params_len + clen > WIRE_MAX_PARAMS) {
				w->refused = "the request's params (headers) "
				    "are over 1048576 bytes";
				w->refused_status = 431;
				break;
			}
			if (grow(&w->params, &w->params_cap,
			    w->params_len + clen) == -1) {
				w->error = "out of memory";
				return -1;
			}
			memcpy(w->params + w->params_len, body, clen);
			w->params_len += clen;
			break;
		case STDIN:
			/* The body is not rlgate's business: read to its
			 * end, so that closing never resets the reply. */
			if (id != w->id || clen > 0)
				break;
			if (w->state == WIRE_STDIN)
				w->state = WIRE_READY;
			else if (w->state == WIRE_DRAIN)
				w->state = WIRE_IDLE;
			break;
		case GET_VALUES:
			if (id == 0)
				rc = get_values(w, body, clen);
			break;
		case DATA:
			break;
		default:
			if (id == 0) {
				unsigned char u[8] = { (unsigned char)type };

				rc = record(w, UNKNOWN_TYPE, 0, u, sizeof(u));
			}
			break;
		}
	}
	if (rc == -1) {
		w->error = "out of memory";
		return -1;
	}
	return (long)off;
}

int
wire_reply(struct wire *w, const char *data, size_t len)
{
	size_t n;

	while (len > 0) {
		n = len < MAX_CONTENT ? len : MAX_CONTENT;
		if (record(w, STDOUT, w->id, data, n) == -1)
			return -1;
		data += n;
		len -= n;
	}
	if (record(w, STDOUT, w->id, NULL, 0) == -1 ||
	    end_request(w, w->id, REQUEST_COMPLETE) == -1)
		return -1;
	w->state = w->role == WIRE_AUTHORIZER ? WIRE_DRAIN : WIRE_IDLE;
	w->closing = !w->keep;
	return 0;
}

void
wire_sent(struct wire *w, size_t n)
{
	w->out_off += n;
	if (w->out_off == w->out_len)
		w->out_off = w->out_len = 0;
}
