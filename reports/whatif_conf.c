/*
 * whatif_conf: NEW.ini for --what-if, read by the gateway's own parser, and
 * its rules checked against what the audit keeps of a request (the client
 * address, path and method; not the host, query, headers or environment).
 * Not here: the replay (whatif.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "whatif.h"
#include "whatif_int.h"
#include "whatif_read.h"

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Does the template need only fields every audit row keeps? */
static int
tmpl_kept(const struct tmpl *t, const struct tmpl_part **lost)
{
	for (size_t i = 0; i < t->nparts; i++)
		switch (t->parts[i].kind) {
		case RLG_PART_LITERAL:
		case RLG_PART_IP:
		case RLG_PART_PATH:
		case RLG_PART_METHOD:
		case RLG_PART_RULE:
			break;
		default:
			*lost = &t->parts[i];
			return 0;
		}
	return 1;
}

/* "{query.org}", "{host}" as written in the file. */
static const char *
part_name(const struct tmpl_part *p, char *buf, size_t len)
{
	const char *k = p->kind == RLG_PART_QUERY ? "query." : p->kind ==
	    RLG_PART_HEADER ? "header." : p->kind == RLG_PART_ENV ? "env." : "";

	snprintf(buf, len, "{%s%s}", k, p->kind == RLG_PART_HOST ? "host" :
	    p->text ? p->text : "");
	return buf;
}

/* Appends one "FILE:LINE: ..." line to *errs. -1 out of memory. */
static int __attribute__((format(printf, 2, 3)))
add_err(char **errs, const char *fmt, ...)
{
	char line[600], *n;
	size_t old = *errs ? strlen(*errs) : 0;
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (len < 0)
		return -1;
	if ((n = realloc(*errs, old + strlen(line) + 2)) == NULL)
		return -1;
	memcpy(n + old, line, strlen(line));
	n[old + strlen(line)] = '\n';
	n[old + strlen(line) + 1] = '\0';
	*errs = n;
	return 0;
}

/* The refusals of rule ru, new to the audit, into *errs. */
static int
refuse_new(const struct conf *c, const struct rule *ru, int match_kept,
    int key_kept, const struct tmpl_part *lost, char **errs)
{
	char part[160];

	if (!match_kept && add_err(errs, "%s:%d: [rule:%s] host: the audit "
	    "does not keep the request's host, and the databases have no rule "
	    "\"%s\" whose rows tell which requests it matched (a new rule can "
	    "match on path and method only)", c->path, ru->line, ru->name,
	    ru->name) == -1)
		return -1;
	if (!key_kept && add_err(errs, "%s:%d: [rule:%s] key: %s needs a request "
	    "field the audit does not keep, and the databases have no rule \"%s\" "
	    "whose rows hold its keys (a new rule can be keyed on {ip}, {path}, "
	    "{method} and {rule} only)", c->path, ru->line, ru->name,
	    part_name(lost, part, sizeof(part)), ru->name) == -1)
		return -1;
	if (ru->cost_tmpl.nparts > 0 && add_err(errs, "%s:%d: [rule:%s] cost: "
	    "a cost template needs request fields the audit does not keep, and "
	    "the databases have no rule \"%s\" whose rows hold its costs (a new "
	    "rule takes a plain number)", c->path, ru->line, ru->name,
	    ru->name) == -1)
		return -1;
	return 0;
}

/*
 * conf_load's mistakes read as rlgate -t says them. A rule the databases do
 * not know is refused, with the file, its line and the reason, when its
 * match, key or cost needs more than the audit keeps (the client address,
 * path and method).
 */
int
whatif_conf_load(struct whatif_conf **wcp, const char *path, struct rdbs *dbs,
    char **errors)
{
	struct whatif_conf *wc;
	char **names = NULL, err[512];
	size_t nnames = 0;
	char *errs = NULL;

	*wcp = NULL;
	if ((wc = calloc(1, sizeof(*wc))) == NULL)
		goto oom;
	if ((wc->c = conf_load(path, errors)) == NULL) {
		free(wc);
		return -1;
	}
	if (whatif_rule_names(dbs, &names, &nnames, err, sizeof(err)) == -1) {
		add_err(&errs, "%s", err);
		goto fail;
	}
	if ((wc->in_audit = calloc(wc->c->nrules + 1, 1)) == NULL ||
	    (wc->match_kept = calloc(wc->c->nrules + 1, 1)) == NULL ||
	    (wc->key_kept = calloc(wc->c->nrules + 1, 1)) == NULL)
		goto oom;
	for (size_t i = 0; i < wc->c->nrules; i++) {
		const struct rule *ru = &wc->c->rules[i];
		const struct tmpl_part *lost = NULL;
		const char *name = ru->name;

		wc->in_audit[i] = bsearch(&name, names, nnames, sizeof(*names),
		    cmp_name) != NULL;
		wc->match_kept[i] = ru->host == NULL;
		wc->key_kept[i] = tmpl_kept(&ru->key, &lost);
		if (!wc->in_audit[i] && refuse_new(wc->c, ru, wc->match_kept[i],
		    wc->key_kept[i], lost, &errs) == -1)
			goto oom;
	}
	if (errs != NULL)
		goto fail;
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	*wcp = wc;
	return 0;
oom:
	free(errs);
	errs = NULL;
	add_err(&errs, "%s: out of memory", path);
fail:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	whatif_conf_free(wc);
	*errors = errs;
	return -1;
}

void
whatif_conf_free(struct whatif_conf *wc)
{
	if (wc == NULL)
		return;
	conf_free(wc->c);
	free(wc->in_audit);
	free(wc->match_kept);
	free(wc->key_kept);
	free(wc);
}

int
whatif_conf_has(const struct whatif_conf *wc, const char *name)
{
	for (size_t i = 0; i < wc->c->nrules; i++)
		if (strcmp(wc->c->rules[i].name, name) == 0)
			return 1;
	return 0;
}

const char *
whatif_conf_warnings(const struct whatif_conf *wc)
{
	return wc->c->warnings;
}
