/*
 * tmpl: key and cost templates ("{ip}:{path}", "{header.X-Cost}") compiled
 * into parts: literal text and request fields. It parses and checks a
 * template and sets the escape tables that keep keys unambiguous; filling
 * one in for a request is rule.c's job (rule_expand()).
 */
#ifndef RLG_TMPL_H
#define RLG_TMPL_H

#include <stddef.h>

/* One piece of a key or cost template: literal text or a request field. */
enum rlg_part_kind {
	RLG_PART_LITERAL,	/* text */
	RLG_PART_IP,
	RLG_PART_PATH,
	RLG_PART_METHOD,
	RLG_PART_HOST,
	RLG_PART_QUERY,		/* text = parameter name */
	RLG_PART_HEADER,	/* text = header name as written */
	RLG_PART_ENV,		/* text = FastCGI/CGI param name */
	RLG_PART_RULE
};

struct tmpl_part {
	enum rlg_part_kind	 kind;
	char			*text;
	size_t			 len;
};

struct tmpl {
	struct tmpl_part	*parts;
	size_t			 nparts;
	/*
	 * Which bytes of a request value rule_expand() writes as %XX: '%'
	 * itself, the braces, blanks and control bytes (keys show up in
	 * logs), every literal character of the template and of the rule's
	 * name when the template has {rule} (constant text too, written as
	 * it is), and '/' in values other than the {path} when the template
	 * has one (the path's own '/' never). Then the constant text and the
	 * {path} can only be split one way, so two different requests never
	 * share a key by choosing their values. esc_path is for the {path}.
	 * Set once the rule is complete.
	 */
	unsigned char		 esc[256];
	unsigned char		 esc_path[256];
};

/*
 * Parses s into t (zeroed by the caller): literal runs and {fields}.
 * Returns 0, or -1 with a phrase in why (whylen bytes) that follows the
 * value in a message ("has a { that is not closed (at character 3)"),
 * or with why empty when out of memory. Either way t is left for
 * tmpl_free(). Escape tables are not set: see tmpl_escapes().
 */
int	tmpl_parse(const char *s, struct tmpl *t, char *why, size_t whylen);

/*
 * Would t let two different requests make the same key? Two request
 * values side by side ({query.a}{query.b}) can be split more than one
 * way, which escaping cannot fix. Returns 1 with a phrase in why, or 0.
 */
int	tmpl_ambiguous(const struct tmpl *t, char *why, size_t whylen);

/* Sets t's escape tables (see struct tmpl) for the rule named rule_name. */
void	tmpl_escapes(struct tmpl *t, const char *rule_name);

/* Makes t (zeroed) the default key, "{ip}". Returns 0, or -1 when out of
 * memory. */
int	tmpl_init_ip(struct tmpl *t);

/* Frees t's parts and leaves it empty (escape tables untouched). */
void	tmpl_free(struct tmpl *t);

#endif
