/*
 * conf_errors: what the configuration loader has to say, collected while
 * a file is read (conf.c, the setters in conf_keys.c, the checks in
 * conf_finish.c): errors as "FILE:LINE: [section] key: ...", joined in
 * file order at the end, and warnings. Declared in conf_int.h. It reads
 * no file and knows no key.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_int.h"

#define MAX_ERRORS	100		/* then stop: the rest is likely noise */

void __attribute__((format(printf, 5, 6)))
conf_error(struct loader *l, int line, const char *sec, const char *key,
    const char *fmt, ...)
{
	char where[64], ctx[RLG_MAX_LINE + 80], msg[1024];
	struct lerror *e;
	va_list ap;

	if (l->nerrs >= MAX_ERRORS) {
		l->too_many = 1;
		return;
	}
	if (l->nerrs == l->errcap) {
		size_t cap = l->errcap ? l->errcap * 2 : 16;

		if ((e = reallocarray(l->errs, cap, sizeof(*e))) == NULL) {
			l->oom = 1;
			return;
		}
		l->errs = e;
		l->errcap = cap;
	}
	where[0] = ctx[0] = '\0';
	if (line > 0)
		snprintf(where, sizeof(where), ":%d", line);
	if (sec != NULL && key != NULL)
		snprintf(ctx, sizeof(ctx), "[%s] %s: ", sec, key);
	else if (sec != NULL)
		snprintf(ctx, sizeof(ctx), "[%s]: ", sec);
	else if (key != NULL)
		snprintf(ctx, sizeof(ctx), "%s: ", key);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = &l->errs[l->nerrs];
	if (asprintf(&e->text, "%s%s: %s%s", l->file, where, ctx, msg) == -1) {
		l->oom = 1;
		return;
	}
	e->line = line;
	e->seq = l->nerrs++;
}

void __attribute__((format(printf, 5, 6)))
conf_warn(struct loader *l, int line, const char *sec, const char *key,
    const char *fmt, ...)
{
	char msg[1024], *text, *more;
	size_t len;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (asprintf(&text, "%s:%d: [%s] %s: %s\n", l->file, line, sec, key,
	    msg) == -1) {
		l->oom = 1;
		return;
	}
	len = strlen(text);
	if ((more = realloc(l->warnings, l->warnlen + len + 1)) == NULL) {
		free(text);
		l->oom = 1;
		return;
	}
	memcpy(more + l->warnlen, text, len + 1);
	l->warnings = more;
	l->warnlen += len;
	free(text);
}

static int
lerror_cmp(const void *a, const void *b)
{
	const struct lerror *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

char *
conf_join_errors(struct loader *l)
{
	char *out, *p;
	size_t i, len = 1;

	if (l->oom) {
		char *s;

		return asprintf(&s, "%s: out of memory\n", l->file) == -1 ?
		    NULL : s;
	}
	qsort(l->errs, l->nerrs, sizeof(*l->errs), lerror_cmp);
	for (i = 0; i < l->nerrs; i++)
		len += strlen(l->errs[i].text) + 1;
	if (l->too_many)
		len += strlen(l->file) + 64;
	if ((out = malloc(len)) == NULL)
		return NULL;
	p = out;
	for (i = 0; i < l->nerrs; i++)
		p += sprintf(p, "%s\n", l->errs[i].text);
	if (l->too_many)
		sprintf(p, "%s: too many errors, stopped after %d\n", l->file,
		    MAX_ERRORS);
	return out;
}

char *
conf_strdup(struct loader *l, const char *s)
{
	char *d;

	if ((d = strdup(s)) == NULL)
		l->oom = 1;
	return d;
}
