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

struct whatif_conf;

/* What every output says about how it was made. */
struct out_meta {
	int64_t			 width_ms;
	const struct filter	*filter;
	const struct rdbs	*dbs;
	const struct verify	*verify;	/* html: violations to mark, or NULL */
	int			 unmatched;	/* html: chart the "no rule" series too */
	struct whatif_conf	*whatif;	/* --what-if's NEW.ini, or NULL */
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

#endif
