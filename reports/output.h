/*
 * output: the report's formats. Text (aligned, with a bar per window, for a
 * terminal), CSV and JSON (for tools), and HTML (html.c: one page, inline
 * SVG, no network). Every writer takes the computed result and a FILE; none
 * queries a database. Writers return 0, or -1 when the stream failed.
 */
#ifndef RLG_REPORT_OUTPUT_H
#define RLG_REPORT_OUTPUT_H

#include <stdio.h>

#include "agg.h"
#include "db.h"
#include "top.h"
#include "verify.h"

enum out_format { OUT_TEXT, OUT_CSV, OUT_JSON, OUT_HTML };

/* What every output says about how it was made. */
struct out_meta {
	int64_t			 width_ms;
	const struct filter	*filter;
	const struct rdbs	*dbs;
	const struct verify	*verify;	/* html: violations to mark, or NULL */
	int			 unmatched;	/* html: chart the "no rule" series too */
};

int	out_report(FILE *fp, enum out_format fmt, const struct agg *a,
	    const struct out_meta *m);
int	out_verify(FILE *fp, enum out_format fmt, const struct verify *v,
	    const struct out_meta *m);
int	out_top(FILE *fp, enum out_format fmt, const struct top *t, size_t n,
	    const struct out_meta *m);

/*
 * html.c. The report's page: per series, admitted decisions against the
 * limit in one panel and denials in another, each on its own scale, so
 * that 100 admitted stay readable beside 100,000 denied; windows where
 * m->verify found a violation are marked on both. The "no rule" series is
 * counted in the summary but charted only with m->unmatched.
 */
int	html_report(FILE *fp, const struct agg *a, const struct out_meta *m);
int	html_top(FILE *fp, const struct top *t, size_t n, const struct out_meta *m);

/*
 * Escapers shared by the formats, so that every output is valid whatever
 * bytes a client sent: s may be NULL (JSON null, CSV and HTML empty). Each
 * byte that is not part of valid UTF-8 is written as U+FFFD (JSON:
 * \ufffd), and so is a NUL (db.h), which JSON writes as \u0000. JSON
 * escapes control characters as \u00XX; CSV quotes per RFC 4180 and keeps
 * control characters inside the field; HTML escapes & < > " ' as entities
 * and writes control characters other than tab, CR and LF as U+FFFD; text
 * writes every control character (C0, DEL, C1) as U+FFFD, so that no key
 * can drive a terminal.
 */
void	out_json_str(FILE *fp, const char *s);
void	out_csv_str(FILE *fp, const char *s);
void	out_html_str(FILE *fp, const char *s);
void	out_text_str(FILE *fp, const char *s);

/* s cleaned as out_text_str() writes it, into buf (cut between characters). */
const char *out_text(const char *s, char *buf, size_t len);

/* "rule user_list, key org1/user/list" style names of a series. */
const char *out_series_title(const struct series *s, char *buf, size_t len);

/* "fixed_window, limit 100 per 1s" (", burst 150" where it matters); "" when unknown. */
const char *out_params(const struct params *p, char *buf, size_t len);

#endif
