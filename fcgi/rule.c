/*
 * rule: matching a request against the configured rules and filling in
 * their key and cost templates. What the values then mean to Redis is the
 * limiter's business.
 */
#include <string.h>
#include <strings.h>

#include "rule.h"

int
rule_fits(const struct rule *ru, const struct request *r)
{
	size_t n;

	switch (ru->path_kind) {
	case RLG_PATH_ANY:
		break;
	case RLG_PATH_EXACT:
		if (strcmp(r->path, ru->path) != 0)
			return 0;
		break;
	case RLG_PATH_PREFIX:
		if (strncmp(r->path, ru->path, ru->path_len) != 0)
			return 0;
		break;
	case RLG_PATH_REGEX:
		if (regexec(&ru->path_re, r->path, 0, NULL, 0) != 0)
			return 0;
		break;
	}
	if (ru->methods != NULL) {
		char **m;

		for (m = ru->methods; *m != NULL; m++)
			if (strcasecmp(*m, r->method) == 0)
				break;
		if (*m == NULL)
			return 0;
	}
	if (ru->host != NULL) {
		n = strlen(ru->host);
		if (strncasecmp(r->host, ru->host, n) != 0 ||
		    r->host[n] != '\0')
			return 0;
	}
	return 1;
}

static int
append_escaped(char *out, size_t outlen, size_t *len, const char *s,
    size_t n, const unsigned char esc[256])
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (*len + 4 > outlen)
			return -1;
		if (esc[ch]) {
			out[(*len)++] = '%';
			out[(*len)++] = hex[ch >> 4];
			out[(*len)++] = hex[ch & 15];
		} else
			out[(*len)++] = (char)ch;
	}
	out[*len] = '\0';
	return 0;
}

long
rule_expand(const struct tmpl *t, const struct rule *ru,
    const struct request *r, char *out, size_t outlen)
{
	char qbuf[RLG_MAX_KEY];
	size_t len = 0, i;
	const char *v;
	long n;

	if (outlen == 0)
		return -2;
	out[0] = '\0';
	for (i = 0; i < t->nparts; i++) {
		const struct tmpl_part *p = &t->parts[i];
		size_t vlen;

		v = NULL;
		switch (p->kind) {
		case RLG_PART_LITERAL:
			if (len + p->len + 1 > outlen)
				return -2;
			memcpy(out + len, p->text, p->len);
			len += p->len;
			out[len] = '\0';
			continue;
		case RLG_PART_IP:
			v = r->ip[0] != '\0' ? r->ip : NULL;
			break;
		case RLG_PART_PATH:
			v = r->path;
			break;
		case RLG_PART_METHOD:
			v = r->method;
			break;
		case RLG_PART_HOST:
			v = r->host[0] != '\0' ? r->host : NULL;
			break;
		case RLG_PART_RULE:
			/* Constant text, like a literal: never escaped. */
			vlen = strlen(ru->name);
			if (len + vlen + 1 > outlen)
				return -2;
			memcpy(out + len, ru->name, vlen + 1);
			len += vlen;
			continue;
		case RLG_PART_HEADER:
			v = request_header(r, p->text);
			break;
		case RLG_PART_ENV:
			v = request_env(r, p->text);
			break;
		case RLG_PART_QUERY:
			n = request_query(r, p->text, qbuf, sizeof(qbuf));
			if (n == -2)
				return -2;
			/* An empty query value is a value (?org=). */
			if (n == -1)
				return -1;
			if (append_escaped(out, outlen, &len, qbuf, (size_t)n,
			    t->esc) == -1)
				return -2;
			continue;
		}
		/* An empty header or param counts as absent: a key built
		 * from nothing would put every such client in one bucket. */
		if (v == NULL || *v == '\0')
			return -1;
		vlen = strlen(v);
		if (append_escaped(out, outlen, &len, v, vlen,
		    p->kind == RLG_PART_PATH ? t->esc_path : t->esc) == -1)
			return -2;
	}
	return (long)len;
}

int
rule_match(const struct conf *c, const struct request *r, struct match *out,
    size_t max, const struct rule **bad, const char **errstr)
{
	size_t i, n = 0;
	const char *e;
	long len;

	for (i = 0; i < c->nrules && n < max; i++) {
		const struct rule *ru = &c->rules[i];
		struct match *m = &out[n];

		if (!rule_fits(ru, r))
			continue;
		m->rule = ru;
		m->cost = ru->cost;
		len = rule_expand(&ru->key, ru, r, m->key, sizeof(m->key));
		if (len == -2) {
			*bad = ru;
			*errstr = "the rate-limit key is too long";
			return -1;
		}
		if (len == -1) {
			if (!ru->on_missing_deny)
				continue;
			*bad = ru;
			*errstr = "a field the rate-limit key needs is missing";
			return -1;
		}
		m->key_len = (size_t)len;
		if (ru->cost_tmpl.nparts > 0) {
			char buf[32];

			len = rule_expand(&ru->cost_tmpl, ru, r, buf,
			    sizeof(buf));
			if (len == -1 && !ru->on_missing_deny) {
				m->cost = 1;	/* absent cost: one unit */
			} else if (len < 0 || conf_parse_int(buf, 1,
			    conf_capacity(ru, ru->limit), &m->cost,
			    &e) == -1) {
				*bad = ru;
				*errstr = len == -1 ?
				    "the request cost is missing" :
				    "the request cost is not a whole number "
				    "between 1 and the rule's capacity";
				return -1;
			}
		}
		n++;
	}
	return (int)n;
}
