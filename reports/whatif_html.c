/*
 * whatif_html: the --what-if page. Per rule a table of the totals and an
 * inline SVG on one UTC time axis: admissions per window as recorded and
 * in the what-if, two lines, and each one's limit scaled to the window
 * (dashed). No script, nothing fetched.
 */
#include <inttypes.h>
#include <stdio.h>

#include "escape.h"
#include "label.h"
#include "whatif_out.h"
#include "window.h"

#define SVG_W		960
#define SVG_H		260
#define PAD_L		70
#define PAD_R		20
#define PAD_T		30
#define PAD_B		40
#define PLOT_W		(SVG_W - PAD_L - PAD_R)
#define PLOT_H		(SVG_H - PAD_T - PAD_B)
#define COLOR_REC	"#1565c0"
#define COLOR_WI	"#2e7d32"

/* The admissions a limit lets through in one window of width_ms, at its
 * steady rate; -1 when unknown. */
static double
limit_per_window(const struct params *p, int64_t width_ms)
{
	if (p->limit < 0 || p->window_ms <= 0)
		return -1;
	return (double)p->limit * (double)width_ms / (double)p->window_ms;
}

static void
polyline(FILE *fp, const struct whatif_rule *r, int wi, int64_t t0,
    double tspan, double ymax, const char *color)
{
	fprintf(fp, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" "
	    "stroke-width=\"2\" points=\"", wi ? "what-if" : "recorded", color);
	for (size_t k = 0; k < r->nwins; k++) {
		const struct whatif_win *x = &r->wins[k];
		double v = (double)(wi ? x->wi_allowed : x->rec_allowed);

		fprintf(fp, "%s%.1f,%.1f", k ? " " : "", PAD_L + PLOT_W *
		    (double)(x->start_ms - t0) / tspan, PAD_T + PLOT_H -
		    PLOT_H * v / ymax);
	}
	fputs("\"/>\n", fp);
}

static void
limit_line(FILE *fp, double l, double ymax, const char *color, const char *what)
{
	double y;

	if (l < 0)
		return;
	y = PAD_T + PLOT_H - PLOT_H * l / ymax;
	fprintf(fp, "<line class=\"limit\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" "
	    "y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n<text x=\"%d\" "
	    "y=\"%.1f\" fill=\"%s\">%s limit %.0f</text>\n", PAD_L, PAD_L + PLOT_W,
	    y, y, color, SVG_W - PAD_R - 130, y - 4, color, what, l);
}

static void
chart(FILE *fp, const struct whatif *w, const struct whatif_rule *r)
{
	char t[RLG_TIME_LEN];
	int64_t t0 = r->wins[0].start_ms;
	double tspan = (double)(r->wins[r->nwins - 1].start_ms - t0), ymax = 1;
	double lr = limit_per_window(&r->recorded, w->width_ms);
	double lw = limit_per_window(&r->what_if, w->width_ms);

	if (tspan <= 0)
		tspan = (double)w->width_ms;
	for (size_t k = 0; k < r->nwins; k++) {
		if ((double)r->wins[k].rec_allowed > ymax)
			ymax = (double)r->wins[k].rec_allowed;
		if ((double)r->wins[k].wi_allowed > ymax)
			ymax = (double)r->wins[k].wi_allowed;
	}
	ymax = (lr > ymax ? lr : ymax) * 1.1;
	ymax = lw * 1.1 > ymax ? lw * 1.1 : ymax;
	fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" "
	    "width=\"%d\" height=\"%d\" role=\"img\">\n", SVG_W, SVG_H, SVG_W, SVG_H);
	fprintf(fp, "<text x=\"%d\" y=\"18\" fill=\"%s\">recorded admissions</text>"
	    "<text x=\"%d\" y=\"18\" fill=\"%s\">what-if admissions</text>\n",
	    PAD_L, COLOR_REC, PAD_L + 180, COLOR_WI);
	fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n"
	    "<text x=\"%d\" y=\"%d\">0</text><text x=\"4\" y=\"%d\">%.0f</text>\n",
	    PAD_L, PAD_L + PLOT_W, PAD_T + PLOT_H, PAD_T + PLOT_H, PAD_L - 14,
	    PAD_T + PLOT_H, PAD_T + 10, ymax);
	fprintf(fp, "<text x=\"%d\" y=\"%d\">%s</text>", PAD_L, SVG_H - 12,
	    window_format_time(t0, t));
	fprintf(fp, "<text x=\"%d\" y=\"%d\">%s UTC</text>\n", SVG_W - PAD_R - 200,
	    SVG_H - 12, window_format_time(r->wins[r->nwins - 1].start_ms, t));
	limit_line(fp, lr, ymax, COLOR_REC, "recorded");
	limit_line(fp, lw, ymax, COLOR_WI, "what-if");
	polyline(fp, r, 0, t0, tspan, ymax, COLOR_REC);
	polyline(fp, r, 1, t0, tspan, ymax, COLOR_WI);
	fputs("</svg>\n", fp);
}

static void
rule_section(FILE *fp, const struct whatif *w, const struct whatif_rule *r)
{
	char rec[160], wi[160];

	fputs("<h2>rule ", fp);
	escape_html(fp, r->rule);
	fputs("</h2>\n<p class=\"sub\">recorded: ", fp);
	escape_html(fp, label_params(&r->recorded, rec, sizeof(rec)));
	fputs("; what-if: ", fp);
	escape_html(fp, label_params(&r->what_if, wi, sizeof(wi)));
	fprintf(fp, "</p>\n<table><tr><th></th><th class=\"n\">allowed</th><th "
	    "class=\"n\">denied</th></tr>\n<tr><td>recorded</td><td class=\"n\">%"
	    PRId64 "</td><td class=\"n\">%" PRId64 "</td></tr>\n<tr><td>what-if"
	    "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64
	    "</td></tr></table>\n<p>keys newly denied: %" PRId64 ", newly admitted: %"
	    PRId64 "</p>\n", r->rec_allowed, r->rec_denied, r->wi_allowed,
	    r->wi_denied, r->newly_denied_keys, r->newly_admitted_keys);
	if (r->nwins > 0)
		chart(fp, w, r);
	if (r->ntop == 0)
		return;
	fputs("<table><tr><th>key</th><th class=\"n\">recorded denied</th><th "
	    "class=\"n\">what-if denied</th></tr>\n", fp);
	for (size_t k = 0; k < r->ntop; k++) {
		fputs("<tr><td>", fp);
		escape_html(fp, r->top[k].key);
		fprintf(fp, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%"
		    PRId64 "</td></tr>\n", r->top[k].rec_denied, r->top[k].wi_denied);
	}
	fputs("</table>\n", fp);
}

int
whatif_html(FILE *fp, const struct whatif *w, const struct out_meta *m)
{
	char d[32];

	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	    "<title>rlgate what-if</title>\n<style>\nbody { font: 14px/1.45 "
	    "'DejaVu Sans', Arial, sans-serif; margin: 24px auto; max-width: "
	    "1000px; padding: 0 16px; }\ntable { border-collapse: collapse; }\n"
	    "th, td { padding: 3px 10px; border-bottom: 1px solid #d0d7de; }\n"
	    "td.n, th.n { text-align: right; }\nsvg text { font: 11px 'DejaVu "
	    "Sans', Arial, sans-serif; fill: #57606a; }\n</style>\n</head>\n<body>\n"
	    "<h1>What if: ", fp);
	escape_html(fp, w->conf_path);
	fprintf(fp, "</h1>\n<p class=\"meta\">%" PRId64 " requests replayed from %zu "
	    "database%s, windows of %s</p>\n", w->requests, m->dbs->n,
	    m->dbs->n == 1 ? "" : "s", window_format_duration(w->width_ms, d,
	    sizeof(d)));
	for (size_t i = 0; i < w->nrules; i++)
		if (w->rules[i].nwins > 0 || (m->filter->rule == NULL &&
		    m->filter->key == NULL))
			rule_section(fp, w, &w->rules[i]);
	fputs("</body>\n</html>\n", fp);
	return ferror(fp) ? -1 : 0;
}
