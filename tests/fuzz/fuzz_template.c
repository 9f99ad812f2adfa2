/*
 * fuzz_template: libFuzzer target for key and cost templates. An input is
 *
 *   line 1   a key template, as written after "key = " in rlgate.ini
 *   line 2   a cost template or number (optional; empty: cost = 1)
 *   rest     the FastCGI params of one request, "NAME=value" strings
 *            separated by NUL bytes (as libfcgi hands them over)
 *
 * The template goes through the real loader (conf_load on a memfd), the
 * request through request_init() and rule_match(). Beyond "no crash, no
 * leak, no undefined behaviour", every key rule_match() builds must be
 *
 *   - bounded: key_len < RLG_MAX_KEY, NUL-terminated, no NUL inside;
 *   - printable: no control byte, DEL or blank that the template's own
 *     literal text does not contain (keys end up in logs and Redis);
 *   - reversible: read back with the template, the key gives exactly the
 *     request values it was built from. So two requests that differ in a
 *     value the key uses never share a key, whatever values they choose.
 *
 * Build and run: make fuzz (tests/fuzz/corpus/template/ is the seed corpus).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "request.h"
#include "rule.h"

#define MAX_ENV		64
#define MAX_TMPL	150	/* fits a 199-character line with "key = " */

static int	 memfd = -1;
static char	 path[64];

static void die(const char *, const struct match *) __attribute__((noreturn));

static void
die(const char *what, const struct match *m)
{
	if (m != NULL)
		fprintf(stderr, "key (%zu bytes): \"%.*s\"\n", m->key_len,
		    (int)m->key_len, m->key);
	fprintf(stderr, "fuzz_template: %s\n", what);
	abort();
}

static struct conf *
load_rule(const char *key, size_t klen, const char *cost, size_t clen)
{
	char ini[1024];
	struct conf *c;
	char *errors = NULL;
	int n;

	/* leaky_bucket with a large burst: any cost from 1 to 1000000 fits. */
	n = snprintf(ini, sizeof(ini),
	    "[gateway]\n"
	    "trusted_proxies = 127.0.0.1/32 ::1/128 10.0.0.0/8\n"
	    "[rule:t]\n"
	    "key = %.*s\n"
	    "algorithm = token_bucket\n"
	    "limit = 100\n"
	    "window = 1s\n"
	    "burst = 1000000\n"
	    "%s%.*s\n",
	    (int)klen, key, clen > 0 ? "cost = " : "", (int)clen, cost);
	if (n < 0 || (size_t)n >= sizeof(ini))
		return NULL;
	if (ftruncate(memfd, 0) == -1 || pwrite(memfd, ini, (size_t)n, 0) != n)
		die("writing the memfd", NULL);
	c = conf_load(path, &errors);
	free(errors);
	return c;
}

static int
hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/*
 * One byte of a key as a reader decodes it: "%XX" or a byte other than
 * '%'. Returns the bytes it took (1 or 3), or 0 when k[0..n) does not
 * start with a well-formed one.
 */
static size_t
token(const char *k, size_t n, unsigned char *byte)
{
	if (n == 0)
		return 0;
	if (k[0] != '%') {
		*byte = (unsigned char)k[0];
		return 1;
	}
	if (n < 3 || hexval(k[1]) < 0 || hexval(k[2]) < 0)
		return 0;
	*byte = (unsigned char)(hexval(k[1]) << 4 | hexval(k[2]));
	return 3;
}

/*
 * If k[0..n) starts with want[0..wlen) written the one way rule.c
 * promises (a byte of esc as %XX, upper-case hex; any other as it is),
 * returns what it took; else -1.
 */
static long
canonical(const char *k, size_t n, const char *want, size_t wlen,
    const unsigned char esc[256])
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, pos = 0;

	for (i = 0; i < wlen; i++) {
		unsigned char b = (unsigned char)want[i];

		if (!esc[b]) {
			if (pos >= n || k[pos] != (char)b)
				return -1;
			pos++;
		} else {
			if (n - pos < 3 || k[pos] != '%' || k[pos + 1] !=
			    hex[b >> 4] || k[pos + 2] != hex[b & 15])
				return -1;
			pos += 3;
		}
	}
	return (long)pos;
}

/* If k[0..n) starts with want[0..wlen) encoded, returns what it took. */
static long
consume(const char *k, size_t n, const char *want, size_t wlen)
{
	size_t i, pos = 0, t;
	unsigned char b;

	for (i = 0; i < wlen; i++) {
		if ((t = token(k + pos, n - pos, &b)) == 0 ||
		    b != (unsigned char)want[i])
			return -1;
		pos += t;
	}
	return (long)pos;
}

/* The value of one template part for r, as rule_expand must see it. */
static long
field_value(const struct tmpl_part *p, const struct rule *ru,
    const struct request *r, char *out, size_t outlen)
{
	const char *v = NULL;

	switch (p->kind) {
	case RLG_PART_LITERAL:
		if (p->len >= outlen)
			return -1;
		memcpy(out, p->text, p->len);
		return (long)p->len;
	case RLG_PART_RULE:
		v = ru->name;
		break;
	case RLG_PART_IP:
		v = r->ip;
		break;
	case RLG_PART_PATH:
		v = r->path;
		break;
	case RLG_PART_METHOD:
		v = r->method;
		break;
	case RLG_PART_HOST:
		v = r->host;
		break;
	case RLG_PART_HEADER:
		v = request_header(r, p->text);
		break;
	case RLG_PART_ENV:
		v = request_env(r, p->text);
		break;
	case RLG_PART_QUERY:
		return request_query(r, p->text, out, outlen);
	}
	if (v == NULL || strlen(v) >= outlen)
		return -1;
	memcpy(out, v, strlen(v) + 1);
	return (long)strlen(v);
}

/*
 * How many ways can key k[0..n) be read as template t filled in, from
 * part i on? Literal text and {rule} (the rule's name) stand as they
 * are; every other field is any non-empty run of
 * bytes ({query.NAME} may be empty, {path} starts with '/') written as
 * rule.c promises: a byte of the escape set as %XX (upper-case hex), any
 * other byte as it is. Counting stops at 2; -1 when the search grows too
 * long to say. Were rule.c to escape more than it promises, the key would
 * have no such reading (0, not a failure); were it to escape less, two
 * readings can appear.
 */
struct reading {
	const struct rule	*ru;
	const char		*k;
	size_t			 n;
	long			 steps;
	unsigned char		 esc[256];	/* escaped in fields but {path} */
	unsigned char		 esc_path[256];	/* escaped in {path} */
};

/*
 * The bytes rule.c promises to write as %XX in a request value: '%', the
 * braces, blanks, control bytes and DEL, every character of the
 * template's literal text and of the rule's name when the template has
 * {rule}, and '/' in values other than {path} when the template has a
 * {path} (the path's own '/' never).
 */
static void
escape_set(const struct tmpl *t, const char *rule_name, int for_path,
    unsigned char esc[256])
{
	size_t i, j;
	int has_path = 0;

	for (i = 0; i < 256; i++)
		esc[i] = i <= ' ' || i == 0x7f || i == '%' || i == '{' ||
		    i == '}';
	for (i = 0; i < t->nparts; i++) {
		has_path |= t->parts[i].kind == RLG_PART_PATH;
		if (t->parts[i].kind == RLG_PART_LITERAL)
			for (j = 0; j < t->parts[i].len; j++)
				esc[(unsigned char)t->parts[i].text[j]] = 1;
		if (t->parts[i].kind == RLG_PART_RULE)
			for (j = 0; rule_name[j] != '\0'; j++)
				esc[(unsigned char)rule_name[j]] = 1;
	}
	if (for_path)
		esc['/'] = 0;
	else if (has_path)
		esc['/'] = 1;
}

static int
readings(struct reading *rd, size_t i, size_t pos)
{
	const struct tmpl *t = &rd->ru->key;
	const struct tmpl_part *p;
	const unsigned char *esc;
	size_t j, took;
	unsigned char b, first = 0;
	int count = 0, sub;
	long used;

	if (++rd->steps > 200000)
		return -1;
	if (i == t->nparts)
		return pos == rd->n;
	p = &t->parts[i];
	if (p->kind == RLG_PART_LITERAL) {
		if (rd->n - pos < p->len || memcmp(rd->k + pos, p->text, p->len))
			return 0;
		return readings(rd, i + 1, pos + p->len);
	}
	if (p->kind == RLG_PART_RULE) {
		used = (long)strlen(rd->ru->name);
		if (rd->n - pos < (size_t)used ||
		    memcmp(rd->k + pos, rd->ru->name, (size_t)used) != 0)
			return 0;
		return readings(rd, i + 1, pos + (size_t)used);
	}
	for (j = pos;; j += took) {
		if ((j > pos || p->kind == RLG_PART_QUERY) &&
		    (p->kind != RLG_PART_PATH || first == '/')) {
			if ((sub = readings(rd, i + 1, j)) < 0)
				return -1;
			if ((count += sub) >= 2)
				return 2;
		}
		if ((took = token(rd->k + j, rd->n - j, &b)) == 0)
			break;
		esc = p->kind == RLG_PART_PATH ? rd->esc_path : rd->esc;
		/* Only the one way rule.c writes a byte is a reading. */
		if ((took == 1) == (esc[b] != 0) || (took == 3 &&
		    (islower((unsigned char)rd->k[j + 1]) ||
		    islower((unsigned char)rd->k[j + 2]))))
			break;
		if (j == pos)
			first = b;
	}
	return count;
}

/*
 * The key must be the template filled in with exactly r's values, and it
 * must be readable one way only: then no other values make the same key.
 */
static void
check_reversible(const struct match *m, const struct request *r)
{
	const struct rule *ru = m->rule;
	const struct tmpl *t = &ru->key;
	static char want[RLG_MAX_KEY * 4];
	struct reading rd = { ru, m->key, m->key_len, 0, { 0 }, { 0 } };
	size_t i, pos = 0;
	long wlen, used;

	escape_set(t, ru->name, 0, rd.esc);
	escape_set(t, ru->name, 1, rd.esc_path);

	for (i = 0; i < t->nparts; i++) {
		const struct tmpl_part *p = &t->parts[i];

		if ((wlen = field_value(p, ru, r, want, sizeof(want))) < 0)
			die("a key was built although a field is absent", m);
		if (p->kind == RLG_PART_LITERAL || p->kind == RLG_PART_RULE) {
			if (m->key_len - pos < (size_t)wlen ||
			    memcmp(m->key + pos, want, (size_t)wlen) != 0)
				die("the template's constant text (literal or "
				    "{rule}) is not where it belongs in the key", m);
			pos += (size_t)wlen;
			continue;
		}
		used = consume(m->key + pos, m->key_len - pos, want,
		    (size_t)wlen);
		if (used < 0)
			die("the key does not hold the request's value where "
			    "the template puts it", m);
		if (canonical(m->key + pos, m->key_len - pos, want,
		    (size_t)wlen, p->kind == RLG_PART_PATH ? rd.esc_path :
		    rd.esc) != used)
			die("a value in the key is not escaped as rule.c promises "
			    "(see escape_set)", m);
		pos += (size_t)used;
	}
	if (pos != m->key_len)
		die("the key has bytes the template does not explain", m);
	if (readings(&rd, 0, 0) == 2)
		die("the key can be read as more than one set of values: "
		    "other requests can choose values that share it", m);
}

static void
check_key(const struct match *m, const struct request *r)
{
	const struct tmpl *t = &m->rule->key;
	size_t i;
	int tab = 0, space = 0;

	if (m->key_len >= RLG_MAX_KEY || m->key[m->key_len] != '\0' ||
	    strlen(m->key) != m->key_len)
		die("key not bounded or not NUL-terminated", m);
	for (i = 0; i < t->nparts; i++)
		if (t->parts[i].kind == RLG_PART_LITERAL) {
			tab |= memchr(t->parts[i].text, '\t', t->parts[i].len) != NULL;
			space |= memchr(t->parts[i].text, ' ', t->parts[i].len) != NULL;
		}
	for (i = 0; i < m->key_len; i++) {
		unsigned char ch = (unsigned char)m->key[i];

		if ((ch < 0x20 && !(ch == '\t' && tab)) || ch == 0x7f ||
		    (ch == ' ' && !space))
			die("a control byte or blank from a request value is in "
			    "the key", m);
	}
	check_reversible(m, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl, *key, *cost;
	size_t klen, clen = 0, nenv = 0;
	char *buf, *envp[MAX_ENV + 1];
	struct match m[RLG_MAX_MATCHES];
	const struct rule *bad = NULL;
	const char *errstr = NULL;
	struct request r;
	struct conf *c;
	int n, i;

	if (memfd == -1) {
		if ((memfd = memfd_create("rlgate.ini", 0)) == -1)
			die("memfd_create", NULL);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	}
	if (size > 16 * 1024)
		return -1;
	if ((nl = memchr(p, '\n', size)) == NULL)
		return 0;
	key = p;
	klen = (size_t)(nl - p);
	p = nl + 1;
	cost = p;
	if ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		clen = (size_t)(nl - p);
		p = nl + 1;
	} else
		p = end;
	if (klen == 0 || klen > MAX_TMPL || clen > MAX_TMPL ||
	    memchr(key, '\0', klen) != NULL || memchr(cost, '\0', clen) != NULL)
		return 0;
	if ((c = load_rule(key, klen, cost, clen)) == NULL)
		return 0;

	/* The params: NUL-separated, copied so that each ends in a NUL. */
	if ((buf = malloc((size_t)(end - p) + 1)) == NULL)
		abort();
	memcpy(buf, p, (size_t)(end - p));
	buf[end - p] = '\0';
	for (char *s = buf; s < buf + (end - p) + 1 && nenv < MAX_ENV;
	    s += strlen(s) + 1)
		if (strchr(s, '=') != NULL)
			envp[nenv++] = s;
	envp[nenv] = NULL;

	if (request_init(&r, envp, c, &errstr) == 0) {
		n = rule_match(c, &r, m, RLG_MAX_MATCHES, &bad, &errstr);
		if (n == -1 && (bad == NULL || errstr == NULL))
			die("rule_match failed without saying why", NULL);
		for (i = 0; i < n; i++) {
			check_key(&m[i], &r);
			if (m[i].cost < 1 || m[i].cost > 1000000)
				die("cost outside 1 .. burst", &m[i]);
		}
	} else if (errstr == NULL)
		die("request_init failed without saying why", NULL);
	free(buf);
	conf_free(c);
	return 0;
}
