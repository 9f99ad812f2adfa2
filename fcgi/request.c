/*
 * request: reads the FastCGI/CGI params of one request into struct request.
 * Only parsing and normalising here: matching rules is rule's job, and
 * replies are respond's.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "request.h"

static uint64_t		id_prefix;
static atomic_ulong	id_counter;
static pthread_once_t	id_once = PTHREAD_ONCE_INIT;

static void
id_init(void)
{
	if (getrandom(&id_prefix, sizeof(id_prefix), GRND_NONBLOCK) !=
	    sizeof(id_prefix))
		id_prefix = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
}

const char *
request_env(const struct request *r, const char *name)
{
	size_t n = strlen(name);

	for (char **e = r->envp; e != NULL && *e != NULL; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

const char *
request_header(const struct request *r, const char *name)
{
	char var[128];
	size_t i = 0, n = strlen(name);

	/* CGI turns "X-Api-Key" into HTTP_X_API_KEY, but the body headers
	 * have names of their own. */
	if (strcasecmp(name, "Content-Type") == 0)
		return request_env(r, "CONTENT_TYPE");
	if (strcasecmp(name, "Content-Length") == 0)
		return request_env(r, "CONTENT_LENGTH");
	if (n + 6 > sizeof(var))
		return NULL;
	memcpy(var, "HTTP_", 5);
	for (i = 0; i < n; i++)
		var[5 + i] = name[i] == '-' ? '_' :
		    (char)toupper((unsigned char)name[i]);
	var[5 + n] = '\0';
	return request_env(r, var);
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

long
request_decode(const char *src, size_t len, int plus, char *out,
    size_t outlen)
{
	size_t i, o = 0;
	int hi, lo;

	for (i = 0; i < len; i++) {
		char ch = src[i];

		if (ch == '%' && i + 2 < len &&
		    (hi = hexval(src[i + 1])) >= 0 &&
		    (lo = hexval(src[i + 2])) >= 0) {
			ch = (char)(hi << 4 | lo);
			i += 2;
		} else if (ch == '+' && plus)
			ch = ' ';
		if (o + 1 >= outlen)
			return -1;
		out[o++] = ch;
	}
	if (outlen == 0)
		return -1;
	out[o] = '\0';
	return (long)o;
}

long
request_query(const struct request *r, const char *name, char *out,
    size_t outlen)
{
	const char *p = r->query, *end = r->query + r->query_len;
	size_t nlen = strlen(name);
	char decoded[256];

	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp != NULL ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		const char *nend = eq != NULL ? eq : stop;
		long dn;

		/* Names are compared decoded, so "o%72g" is "org": a client
		 * cannot dodge a rule by spelling the name differently. */
		dn = request_decode(p, (size_t)(nend - p), 1, decoded,
		    sizeof(decoded));
		if (dn == (long)nlen && memcmp(decoded, name, nlen) == 0) {
			if (eq == NULL) {
				if (outlen == 0)
					return -2;
				out[0] = '\0';
				return 0;
			}
			dn = request_decode(eq + 1, (size_t)(stop - eq - 1), 1,
			    out, outlen);
			return dn < 0 ? -2 : dn;
		}
		p = stop + 1;
	}
	return -1;
}

int
request_parse_ip(const char *text, size_t len, unsigned char addr[16],
    char out[INET6_ADDRSTRLEN])
{
	char buf[INET6_ADDRSTRLEN + 8];
	static const unsigned char mapped[12] =
	    { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	/* Bracketed IPv6 ("[::1]") and IPv6 zone ids are seen in the wild. */
	if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
		text++;
		len -= 2;
	}
	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, addr) == 1) {
		inet_ntop(AF_INET, addr, out, INET6_ADDRSTRLEN);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, buf, addr) != 1)
		return -1;
	if (memcmp(addr, mapped, sizeof(mapped)) == 0) {
		/* ::ffff:1.2.3.4 is 1.2.3.4: one client, one key. */
		memmove(addr, addr + 12, 4);
		inet_ntop(AF_INET, addr, out, INET6_ADDRSTRLEN);
		return AF_INET;
	}
	inet_ntop(AF_INET6, addr, out, INET6_ADDRSTRLEN);
	return AF_INET6;
}

/*
 * The client: REMOTE_ADDR, unless that is a trusted proxy; then walk
 * X-Forwarded-For from the right, skipping trusted proxies, and take the
 * first address that is not one. A client can put anything on the left of
 * the header, so nothing left of that entry is believed.
 */
static void
client_ip(struct request *r, const struct conf *c)
{
	const char *remote = request_env(r, "REMOTE_ADDR"), *xff, *end;
	unsigned char addr[16];
	char ip[INET6_ADDRSTRLEN];
	int family;

	r->ip[0] = '\0';
	if (remote == NULL)
		return;
	family = request_parse_ip(remote, strlen(remote), addr, r->ip);
	if (family == -1) {
		/* Unix-socket peers have no address; keep what we were told,
		 * unless it holds bytes that do not belong in a header
		 * (Variable-RL_CLIENT) or a log line: then it is unknown. */
		for (const char *p = remote; *p != '\0'; p++)
			if ((unsigned char)*p <= ' ' ||
			    (unsigned char)*p >= 0x7f)
				return;
		snprintf(r->ip, sizeof(r->ip), "%.*s", (int)sizeof(r->ip) - 1,
		    remote);
		return;
	}
	if (c == NULL || c->ntrusted == 0 || !conf_trusted(c, family, addr))
		return;
	if ((xff = request_env(r, "HTTP_X_FORWARDED_FOR")) == NULL)
		return;
	end = xff + strlen(xff);
	while (end > xff) {
		const char *start = end, *s, *e;

		while (start > xff && start[-1] != ',')
			start--;
		for (s = start; s < end && (*s == ' ' || *s == '\t'); s++)
			;
		for (e = end; e > s && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		family = request_parse_ip(s, (size_t)(e - s), addr, ip);
		if (family == -1)
			return;	/* garbage: stop at the last proxy we trust */
		memcpy(r->ip, ip, sizeof(ip));
		if (!conf_trusted(c, family, addr))
			return;
		end = start > xff ? start - 1 : xff;
	}
}

static void
host(struct request *r)
{
	const char *h = request_env(r, "HTTP_HOST");
	size_t i, n;

	r->host[0] = '\0';
	if (h == NULL && (h = request_env(r, "SERVER_NAME")) == NULL)
		return;
	n = strlen(h);
	if (h[0] == '[') {		/* [v6]:port */
		const char *close = strchr(h, ']');
		n = close != NULL ? (size_t)(close - h + 1) : n;
	} else {
		const char *colon = strchr(h, ':');
		n = colon != NULL ? (size_t)(colon - h) : n;
	}
	if (n >= sizeof(r->host))
		n = sizeof(r->host) - 1;
	for (i = 0; i < n; i++)
		r->host[i] = (char)tolower((unsigned char)h[i]);
	r->host[n] = '\0';
}

/*
 * Collapses "//", drops "." segments and resolves ".." (never above the
 * root) in place, as web servers do before they map a path to a file: a
 * client must not escape /user/list's limit by asking for /user//list or
 * /user/./list, which the server serves as the same thing.
 */
static void
simplify_path(char *path)
{
	char *out = path, *in = path;

	while (*in != '\0') {
		if (*in == '/') {
			while (in[1] == '/')
				in++;
			if (in[1] == '.' && (in[2] == '/' || in[2] == '\0')) {
				in += 2;
				continue;
			}
			if (in[1] == '.' && in[2] == '.' &&
			    (in[3] == '/' || in[3] == '\0')) {
				while (out > path && *--out != '/')
					;
				in += 3;
				continue;
			}
		}
		*out++ = *in++;
	}
	if (out == path)
		*out++ = '/';
	*out = '\0';
}

/* Writes v in lower-case hex at out, width digits at least; returns the end. */
static char *
put_hex(char *out, unsigned long long v, int width)
{
	char tmp[16];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v & 0xf];
		v >>= 4;
	} while (v != 0);
	while (n < width)
		tmp[n++] = '0';
	while (n > 0)
		*out++ = tmp[--n];
	return out;
}

/*
 * Path and query come from REQUEST_URI, because nginx's auth subrequest
 * empties QUERY_STRING; CGI servers without REQUEST_URI fall back to
 * SCRIPT_NAME, PATH_INFO and QUERY_STRING. The client is REMOTE_ADDR, or,
 * when that is a trusted proxy, the rightmost X-Forwarded-For entry that
 * is not.
 */
int
request_init(struct request *r, char **envp, const struct conf *c,
    const char **errstr)
{
	const char *role, *uri, *q, *raw;
	char cgi[RLG_MAX_PATH];
	size_t plen;
	long n;
	char *id;

	/* Every field is set below; path first, for the audit of a 414. */
	r->envp = envp;
	r->path[0] = '\0';
	pthread_once(&id_once, id_init);
	id = put_hex(r->id, id_prefix, 16);
	*id++ = '-';
	*put_hex(id, atomic_fetch_add(&id_counter, 1), 1) = '\0';

	role = request_env(r, "FCGI_ROLE");
	r->role = role != NULL && strcmp(role, "AUTHORIZER") == 0 ?
	    RLG_ROLE_AUTHORIZER : RLG_ROLE_RESPONDER;
	r->apache = request_env(r, "FCGI_APACHE_ROLE") != NULL;
	if ((r->method = request_env(r, "REQUEST_METHOD")) == NULL ||
	    *r->method == '\0')
		r->method = "GET";
	host(r);
	client_ip(r, c);

	r->query = "";
	r->query_len = 0;
	if ((uri = request_env(r, "REQUEST_URI")) != NULL && *uri != '\0') {
		q = strchr(uri, '?');
		plen = q != NULL ? (size_t)(q - uri) : strlen(uri);
		if (q != NULL) {
			r->query = q + 1;
			r->query_len = strlen(q + 1);
		}
		raw = uri;
	} else {
		/* Plain CGI: the server split the URI for us. */
		const char *sn = request_env(r, "SCRIPT_NAME");
		const char *pi = request_env(r, "PATH_INFO");
		const char *qs = request_env(r, "QUERY_STRING");

		plen = (size_t)snprintf(cgi, sizeof(cgi), "%s%s",
		    sn ? sn : "", pi ? pi : "");
		if (qs != NULL) {
			r->query = qs;
			r->query_len = strlen(qs);
		}
		raw = cgi;
	}
	if (plen >= RLG_MAX_PATH) {
		*errstr = raw == uri ? "REQUEST_URI is too long" :
		    "SCRIPT_NAME and PATH_INFO are too long";
		return 414;
	}
	if (plen == 0) {
		raw = "/";
		plen = 1;
	}
	if ((n = request_decode(raw, plen, 0, r->path, sizeof(r->path))) < 0) {
		*errstr = "the request path is too long";
		return 414;
	}
	if (strlen(r->path) != (size_t)n) {
		/* The audit shows the path as it came, not cut at the NUL. */
		snprintf(r->path, sizeof(r->path), "%.*s", (int)plen, raw);
		*errstr = "the request path contains %00";
		return 400;
	}
	if (r->path[0] != '/') {
		*errstr = "the request path does not start with /";
		return 400;
	}
	simplify_path(r->path);
	return 0;
}
