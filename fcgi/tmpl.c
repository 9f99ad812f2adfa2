/*
 * tmpl: compiles key and cost templates (see tmpl.h). Nothing here reads
 * a request: rule.c fills templates in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "tmpl.h"

#define TMPL_FIELDS_USE	"{ip}, {path}, {method}, {host}, {rule}, " \
			"{query.NAME}, {header.NAME} or {env.NAME}"

/* Template fields: {NAME} or, with needs_name, {NAME.ARG}. */
static const struct {
	const char		*name;
	enum rlg_part_kind	 kind;
	int			 needs_name;
} tmpl_fields[] = {
	{ "ip", RLG_PART_IP, 0 },
	{ "path", RLG_PART_PATH, 0 },
	{ "method", RLG_PART_METHOD, 0 },
	{ "host", RLG_PART_HOST, 0 },
	{ "rule", RLG_PART_RULE, 0 },
	{ "query", RLG_PART_QUERY, 1 },
	{ "header", RLG_PART_HEADER, 1 },
	{ "env", RLG_PART_ENV, 1 },
};

void
tmpl_free(struct tmpl *t)
{
	size_t i;

	for (i = 0; i < t->nparts; i++)
		free(t->parts[i].text);
	free(t->parts);
	t->parts = NULL;
	t->nparts = 0;
}

/* Checks NAME of {query.NAME}, {header.NAME} or {env.NAME}. */
static const char *
tmpl_bad_name(enum rlg_part_kind kind, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		int ch = (unsigned char)s[i];

		if (kind == RLG_PART_HEADER && !ascii_is_tchar(ch))
			return "is not a header name";
		if (kind == RLG_PART_ENV && !ascii_is_alnum(ch) && ch != '_')
			return "is not a variable name (letters, digits, _)";
		if (kind == RLG_PART_QUERY && ascii_is_blank(ch))
			return "is not a query parameter name";
	}
	return NULL;
}

/* Appends a part to t (room made by tmpl_parse()); -1: out of memory. */
static int
tmpl_add(struct tmpl *t, enum rlg_part_kind kind, const char *text,
    size_t len)
{
	struct tmpl_part *p = &t->parts[t->nparts];

	p->kind = kind;
	p->len = len;
	p->text = NULL;
	if (text != NULL && (p->text = strndup(text, len)) == NULL)
		return -1;
	t->nparts++;
	return 0;
}

int
tmpl_parse(const char *s, struct tmpl *t, char *why, size_t whylen)
{
	const char *p, *open, *close, *dot, *bad;
	size_t i, max = 1, flen, nlen;

	if (whylen > 0)
		why[0] = '\0';		/* stays empty when out of memory */
	for (p = s; *p != '\0'; p++)
		max += *p == '{' ? 2 : 0;
	if ((t->parts = calloc(max, sizeof(*t->parts))) == NULL)
		return -1;
	for (p = s; *p != '\0'; p = close + 1) {
		open = p + strcspn(p, "{}");
		if (open > p && tmpl_add(t, RLG_PART_LITERAL, p,
		    (size_t)(open - p)) == -1)
			return -1;
		if (*open == '\0')
			break;
		if (*open == '}') {
			snprintf(why, whylen, "has a } with no { before it "
			    "(at character %zu)", (size_t)(open - s) + 1);
			return -1;
		}
		close = open + 1 + strcspn(open + 1, "{}");
		if (*close != '}') {
			snprintf(why, whylen, "has a { that is not closed (at "
			    "character %zu)", (size_t)(open - s) + 1);
			return -1;
		}
		flen = (size_t)(close - open - 1);
		dot = memchr(open + 1, '.', flen);
		nlen = dot != NULL ? (size_t)(dot - open - 1) : flen;
		for (i = 0; i < sizeof(tmpl_fields) / sizeof(tmpl_fields[0]);
		    i++)
			if (strlen(tmpl_fields[i].name) == nlen &&
			    memcmp(tmpl_fields[i].name, open + 1, nlen) == 0)
				break;
		if (i == sizeof(tmpl_fields) / sizeof(tmpl_fields[0])) {
			snprintf(why, whylen, "has {%.*s}, which is not a field "
			    "(use %s)", (int)flen, open + 1, TMPL_FIELDS_USE);
			return -1;
		}
		if (!tmpl_fields[i].needs_name) {
			if (dot != NULL) {
				snprintf(why, whylen, "has {%.*s}, but {%s} "
				    "takes no .NAME", (int)flen, open + 1,
				    tmpl_fields[i].name);
				return -1;
			}
			if (tmpl_add(t, tmpl_fields[i].kind, NULL, 0) == -1)
				return -1;
			continue;
		}
		if (dot == NULL || dot + 1 == close) {
			snprintf(why, whylen, "has {%.*s} with no name (use "
			    "{%s.NAME})", (int)flen, open + 1,
			    tmpl_fields[i].name);
			return -1;
		}
		bad = tmpl_bad_name(tmpl_fields[i].kind, dot + 1,
		    (size_t)(close - dot - 1));
		if (bad != NULL) {
			snprintf(why, whylen, "has {%.*s}: \"%.*s\" %s",
			    (int)flen, open + 1, (int)(close - dot - 1),
			    dot + 1, bad);
			return -1;
		}
		if (tmpl_add(t, tmpl_fields[i].kind, dot + 1,
		    (size_t)(close - dot - 1)) == -1)
			return -1;
	}
	return 0;
}

/*
 * Two request values side by side can be split more than one way, so two
 * clients could share a key by choice. rule.c escapes
 * the template's literal characters (and '/' before a {path}) inside
 * values, which keeps every other key unambiguous; this is the one shape
 * escaping cannot fix. {x}{path} is fine: a path starts with '/'.
 */
int
tmpl_ambiguous(const struct tmpl *t, char *why, size_t whylen)
{
	size_t i;

	for (i = 1; i < t->nparts; i++) {
		/* {rule} is constant text, as good as a literal. */
		if (t->parts[i - 1].kind == RLG_PART_LITERAL ||
		    t->parts[i].kind == RLG_PART_LITERAL ||
		    t->parts[i - 1].kind == RLG_PART_RULE ||
		    t->parts[i].kind == RLG_PART_RULE)
			continue;
		if (t->parts[i].kind == RLG_PART_PATH &&
		    t->parts[i - 1].kind != RLG_PART_PATH)
			continue;
		snprintf(why, whylen, "has two fields with nothing between "
		    "them (parts %zu and %zu): put a separator such as ':' "
		    "between them, or different values could make one key",
		    i, i + 1);
		return 1;
	}
	return 0;
}

void
tmpl_escapes(struct tmpl *t, const char *rule_name)
{
	size_t i, j;
	int has_path = 0;

	for (i = 0; i < 256; i++)
		t->esc[i] = i <= ' ' || i == 0x7f || i == '%' || i == '{' ||
		    i == '}';
	for (i = 0; i < t->nparts; i++) {
		const struct tmpl_part *p = &t->parts[i];

		if (p->kind == RLG_PART_PATH)
			has_path = 1;
		if (p->kind == RLG_PART_LITERAL)
			for (j = 0; j < p->len; j++)
				t->esc[(unsigned char)p->text[j]] = 1;
		if (p->kind == RLG_PART_RULE)
			for (j = 0; rule_name[j] != '\0'; j++)
				t->esc[(unsigned char)rule_name[j]] = 1;
	}
	memcpy(t->esc_path, t->esc, sizeof(t->esc));
	/* A {path} is where a raw '/' says "the path starts here": its own
	 * '/' stay as they are even when the literal text has one. */
	t->esc_path['/'] = 0;
	if (has_path)
		t->esc['/'] = 1;
}

int
tmpl_init_ip(struct tmpl *t)
{
	if ((t->parts = calloc(1, sizeof(*t->parts))) == NULL)
		return -1;
	t->parts[0].kind = RLG_PART_IP;
	t->nparts = 1;
	return 0;
}
