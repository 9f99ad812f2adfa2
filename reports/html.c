/*
 * html: the report as one self-contained page: a chart per series in
 * inline SVG (allowed and denied stacked per window, the rule's limit as a
 * dashed line scaled to the window, a UTC time axis, a legend), no script,
 * no font, nothing fetched. Each window's bar is a <g class="bar">.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "window.h"

#define SVG_W		960
#define SVG_H		340
#define PAD_L		70
#define PAD_R		20
#define PAD_T		40
#define PAD_B		50
#define PLOT_W		(SVG_W - PAD_L - PAD_R)
#define PLOT_H		(SVG_H - PAD_T - PAD_B)
#define MIN_SLOTS	12	/* a lone window still gets a time axis around it */
#define MAX_BARS	1200	/* more windows are summed per bar */
#define MAX_CHARTS	50

#define COLOR_ALLOWED	"#2e7d32"
#define COLOR_DENIED	"#c62828"
#define COLOR_LIMIT	"#1565c0"

static void
page_start(FILE *fp, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	    "<title>", fp);
	out_html_str(fp, title);
	fputs("</title>\n<style>\n"
	    "body { font: 14px/1.45 -apple-system, 'Segoe UI', 'DejaVu Sans', Arial, sans-serif;"
	    " margin: 24px auto; max-width: 1000px; padding: 0 16px; color: #1f2328; background: #fff; }\n"
	    "h1 { font-size: 22px; margin: 0 0 4px; }\n"
	    "h2 { font-size: 17px; margin: 28px 0 2px; }\n"
	    "p.meta, p.sub { color: #57606a; margin: 0 0 8px; }\n"
	    "table { border-collapse: collapse; margin: 12px 0; }\n"
	    "th, td { padding: 4px 10px; border-bottom: 1px solid #d0d7de; text-align: left; }\n"
	    "td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }\n"
	    "svg { display: block; max-width: 100%; height: auto; }\n"
	    "svg text { font: 11px 'DejaVu Sans', Arial, sans-serif; fill: #57606a; }\n"
	    "svg .grid { stroke: #eaeef2; stroke-width: 1; }\n"
	    "svg .axis { stroke: #8c959f; stroke-width: 1; }\n"
	    "svg .allowed { fill: " COLOR_ALLOWED "; }\n"
	    "svg .denied { fill: " COLOR_DENIED "; }\n"
	    "svg .limit { stroke: " COLOR_LIMIT "; stroke-width: 2; stroke-dasharray: 6 4; fill: none; }\n"
	    "svg .bar:hover rect { opacity: 0.75; }\n"
	    "svg text.halo { paint-order: stroke; stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }\n"
	    "</style>\n</head>\n<body>\n", fp);
}

static void
page_meta(FILE *fp, const struct out_meta *m, int64_t rows, int64_t first,
    int64_t last)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], w[32];
	const struct filter *f = m->filter;

	fputs("<p class=\"meta\">", fp);
	if (rows >= 0)
		fprintf(fp, "%" PRId64 " decision%s from ", rows, rows == 1 ? "" : "s");
	else
		fputs("From ", fp);
	fprintf(fp, "%zu database%s", m->dbs->n, m->dbs->n == 1 ? "" : "s");
	for (size_t i = 0; i < m->dbs->n && i < 8; i++) {
		fputs(i ? ", " : " (", fp);
		out_html_str(fp, m->dbs->v[i].path);
	}
	fputs(m->dbs->n > 8 ? ", ...)" : ")", fp);
	if (rows > 0)
		fprintf(fp, ", %s to %s UTC", window_format_time(first, t1),
		    window_format_time(last, t2));
	fprintf(fp, ", windows of %s", window_format_duration(m->width_ms, w, sizeof(w)));
	if (f->since_ms != INT64_MIN)
		fprintf(fp, ", since %s", window_format_time(f->since_ms, t1));
	if (f->until_ms != INT64_MAX)
		fprintf(fp, ", until %s", window_format_time(f->until_ms, t1));
	fputs(".</p>\n", fp);
}

/* A time label for an axis tick: as much precision as the step needs. */
static void
tick_label(int64_t ms, int64_t step, char *buf, size_t len)
{
	char t[RLG_TIME_LEN];

	window_format_time(ms, t);
	if (step >= 86400000)
		snprintf(buf, len, "%.5s", t + 5);		/* MM-DD */
	else if (step >= 60000)
		snprintf(buf, len, "%.5s", t + 11);		/* HH:MM */
	else if (step >= 1000)
		snprintf(buf, len, "%.8s", t + 11);		/* HH:MM:SS */
	else
		snprintf(buf, len, "%.12s", t + 11);		/* HH:MM:SS.mmm */
}

struct bar {
	int64_t		 start;
	int64_t		 allowed;
	int64_t		 denied;
};

static double
px_x(int64_t t, int64_t t0, int64_t t1)
{
	return PAD_L + (double)(t - t0) * PLOT_W / (double)(t1 - t0);
}

static double
px_y(double v, double ymax)
{
	return PAD_T + PLOT_H - v * PLOT_H / ymax;
}

static int
chart(FILE *fp, const struct series *s, int64_t width_ms, int idx)
{
	char title[600], params[160], w[32], bw[32], t1[RLG_TIME_LEN], t2[RLG_TIME_LEN];
	int64_t first = s->wins[0].start_ms, last = s->wins[s->nwins - 1].start_ms;
	int64_t bin = width_ms, t0, t1v, slots, step;
	struct bar *bars;
	size_t nbars = 0;
	double ymax = 1, limit_y = -1, barw, ystep;

	/* Too many windows for the width: each bar sums k whole windows. */
	slots = (last - first) / width_ms + 1;
	if (slots > MAX_BARS)
		bin = width_ms * ((slots + MAX_BARS - 1) / MAX_BARS);
	if ((bars = calloc(s->nwins, sizeof(*bars))) == NULL)
		return -1;
	for (size_t k = 0; k < s->nwins; k++) {
		int64_t b = window_start(s->wins[k].start_ms, bin);

		if (nbars == 0 || bars[nbars - 1].start != b)
			bars[nbars++] = (struct bar){ b, 0, 0 };
		bars[nbars - 1].allowed += s->wins[k].allowed;
		bars[nbars - 1].denied += s->wins[k].denied;
	}
	t0 = bars[0].start;
	t1v = bars[nbars - 1].start + bin;
	slots = (t1v - t0) / bin;
	if (slots < MIN_SLOTS) {
		t0 -= (MIN_SLOTS - slots) / 2 * bin;
		t1v = t0 + MIN_SLOTS * bin;
	}
	for (size_t k = 0; k < nbars; k++)
		if (bars[k].allowed + bars[k].denied > ymax)
			ymax = (double)(bars[k].allowed + bars[k].denied);
	/* Drawn where it applies: one key (the rule's limit holds per key). */
	if (s->one_key && s->params.limit > 0 && s->params.window_ms > 0) {
		limit_y = (double)s->params.limit * (double)bin / (double)s->params.window_ms;
		if (limit_y > ymax)
			ymax = limit_y;
	}
	ystep = window_count_step(ymax / 5);
	ymax = ystep * (double)(int64_t)(ymax / ystep + 1);

	out_series_title(s, title, sizeof(title));
	out_params(&s->params, params, sizeof(params));
	fprintf(fp, "<section class=\"chart\" id=\"series-%d\">\n<h2>", idx);
	out_html_str(fp, title);
	fputs("</h2>\n<p class=\"sub\">", fp);
	if (params[0]) {
		out_html_str(fp, params);
		fputs(s->one_key ? "" : " for each key; the chart sums every key", fp);
		fputs(" &middot; ", fp);
	}
	fprintf(fp, "%" PRId64 " allowed, %" PRId64 " denied in %zu window%s of %s",
	    s->allowed, s->denied, s->nwins, s->nwins == 1 ? "" : "s",
	    window_format_duration(width_ms, w, sizeof(w)));
	if (bin != width_ms)
		fprintf(fp, "; each bar sums %" PRId64 " windows (%s)", bin / width_ms,
		    window_format_duration(bin, bw, sizeof(bw)));
	fputs("</p>\n", fp);

	fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	    "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", SVG_W, SVG_H, SVG_W, SVG_H);
	out_html_str(fp, title);
	fputs("\">\n<title>", fp);
	out_html_str(fp, title);
	fputs("</title>\n", fp);

	/* Count axis: grid lines and labels. */
	for (double v = 0; v <= ymax + ystep / 2; v += ystep) {
		double y = px_y(v, ymax);

		fprintf(fp, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
		    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", PAD_L,
		    PAD_L + PLOT_W, y, y, PAD_L - 6, y + 4, v);
	}
	fprintf(fp, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
	    "text-anchor=\"middle\">decisions per %s</text>\n", PAD_T + PLOT_H / 2,
	    PAD_T + PLOT_H / 2, window_format_duration(bin, bw, sizeof(bw)));

	/* Time axis: ticks on round UTC times. */
	step = window_axis_step((t1v - t0) / 8 > 0 ? (t1v - t0) / 8 : 1);
	for (int64_t t = window_start(t0, step); t <= t1v; t += step) {
		char lab[32];
		double x;

		if (t < t0)
			continue;
		x = px_x(t, t0, t1v);
		tick_label(t, step, lab, sizeof(lab));
		fprintf(fp, "<line class=\"axis\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
		    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, x,
		    PAD_T + PLOT_H, PAD_T + PLOT_H + 5, x, PAD_T + PLOT_H + 18, lab);
	}
	window_format_time(t0, t1);
	window_format_time(t1v - 1, t2);
	fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (UTC) %.10s",
	    PAD_L + PLOT_W / 2, SVG_H - 8, t1);
	if (strncmp(t1, t2, 10) != 0)
		fprintf(fp, " to %.10s", t2);
	fputs("</text>\n", fp);

	/* The bars. */
	barw = (double)PLOT_W * (double)bin / (double)(t1v - t0);
	fputs("<g class=\"bars\">\n", fp);
	for (size_t k = 0; k < nbars; k++) {
		const struct bar *b = &bars[k];
		double x = px_x(b->start, t0, t1v), wpx = barw > 3 ? barw - 1 : barw;
		double ya = px_y((double)b->allowed, ymax);
		double yd = px_y((double)(b->allowed + b->denied), ymax);
		char tl[RLG_TIME_LEN];

		if (barw > 3)
			x += 0.5;
		if (barw > 80) {
			x += (barw - 80) / 2;
			wpx = 80;
		}
		fprintf(fp, "<g class=\"bar\" data-start=\"%s\" data-allowed=\"%" PRId64
		    "\" data-denied=\"%" PRId64 "\"><title>%s: %" PRId64 " allowed, %"
		    PRId64 " denied</title>", window_format_time(b->start, tl), b->allowed,
		    b->denied, tl, b->allowed, b->denied);
		fprintf(fp, "<rect class=\"allowed\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
		    "height=\"%.2f\"/>", x, ya, wpx, PAD_T + PLOT_H - ya);
		fprintf(fp, "<rect class=\"denied\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
		    "height=\"%.2f\"/>", x, yd, wpx, ya - yd);
		/* Few bars: each says its numbers. */
		if (nbars <= 40 && wpx >= 14)
			fprintf(fp, "<text class=\"halo\" x=\"%.2f\" y=\"%.2f\" "
			    "text-anchor=\"middle\">%" PRId64 " / %" PRId64 "</text>",
			    x + wpx / 2, yd - 5, b->allowed, b->denied);
		fputs("</g>\n", fp);
	}
	fputs("</g>\n", fp);
	fprintf(fp, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
	    PAD_L, PAD_L + PLOT_W, PAD_T + PLOT_H, PAD_T + PLOT_H);

	/* The limit, as a rate: what the rule admits per window of this width. */
	if (limit_y >= 0) {
		double y = px_y(limit_y, ymax);

		fprintf(fp, "<line class=\"limit\" x1=\"%d\" x2=\"%d\" y1=\"%.2f\" y2=\"%.2f\"/>"
		    "<text class=\"halo\" x=\"%d\" y=\"%.2f\" text-anchor=\"end\" style=\"fill:" COLOR_LIMIT
		    "\">limit %g per %s</text>\n", PAD_L, PAD_L + PLOT_W, y, y,
		    PAD_L + PLOT_W - 4, y - 5, limit_y, window_format_duration(bin, bw, sizeof(bw)));
	}

	/* Legend. */
	fprintf(fp, "<g class=\"legend\" transform=\"translate(%d 14)\">"
	    "<rect class=\"allowed\" x=\"0\" y=\"0\" width=\"12\" height=\"12\"/>"
	    "<text x=\"18\" y=\"10\">allowed</text>"
	    "<rect class=\"denied\" x=\"90\" y=\"0\" width=\"12\" height=\"12\"/>"
	    "<text x=\"108\" y=\"10\">denied</text>", PAD_L);
	if (limit_y >= 0)
		fputs("<line class=\"limit\" x1=\"176\" x2=\"206\" y1=\"6\" y2=\"6\"/>"
		    "<text x=\"212\" y=\"10\">limit</text>", fp);
	fputs("</g>\n</svg>\n</section>\n", fp);
	free(bars);
	return 0;
}

int
html_report(FILE *fp, const struct agg *a, const struct out_meta *m)
{
	char title[600], params[160];
	size_t shown = a->nseries < MAX_CHARTS ? a->nseries : MAX_CHARTS;

	if (a->nseries == 1)
		snprintf(title, sizeof(title), "rlgate report: %s",
		    out_series_title(&a->series[0], params, sizeof(params)));
	else
		snprintf(title, sizeof(title), "rlgate report: %zu series", a->nseries);
	page_start(fp, title);
	fputs("<h1>", fp);
	out_html_str(fp, title);
	fputs("</h1>\n", fp);
	page_meta(fp, m, a->rows, a->first_ms, a->last_ms);
	if (a->rows == 0)
		fputs("<p>No decisions match.</p>\n", fp);
	if (a->nseries > 1) {
		fputs("<table>\n<tr><th>series</th><th>rule parameters</th><th class=\"n\">"
		    "allowed</th><th class=\"n\">denied</th><th class=\"n\">windows</th></tr>\n", fp);
		for (size_t i = 0; i < a->nseries; i++) {
			const struct series *s = &a->series[i];

			fputs("<tr><td>", fp);
			if (i < shown)
				fprintf(fp, "<a href=\"#series-%zu\">", i);
			out_html_str(fp, out_series_title(s, title, sizeof(title)));
			fputs(i < shown ? "</a></td><td>" : "</td><td>", fp);
			out_html_str(fp, out_params(&s->params, params, sizeof(params)));
			fprintf(fp, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64
			    "</td><td class=\"n\">%zu</td></tr>\n", s->allowed, s->denied, s->nwins);
		}
		fputs("</table>\n", fp);
	}
	if (shown < a->nseries)
		fprintf(fp, "<p>Charts for the first %zu of %zu series; narrow the report "
		    "with -r and -k for the others.</p>\n", shown, a->nseries);
	for (size_t i = 0; i < shown; i++)
		if (a->series[i].nwins > 0 && chart(fp, &a->series[i], a->width_ms, (int)i) == -1)
			return -1;
	fputs("</body>\n</html>\n", fp);
	return ferror(fp) ? -1 : 0;
}

int
html_top(FILE *fp, const struct top *t, size_t n, const struct out_meta *m)
{
	char title[64];

	snprintf(title, sizeof(title), "rlgate report: top %zu keys by denials", n);
	page_start(fp, title);
	fputs("<h1>", fp);
	out_html_str(fp, title);
	fputs("</h1>\n", fp);
	page_meta(fp, m, -1, 0, 0);
	fprintf(fp, "<p>%" PRId64 " of %" PRId64 " keys had denials.</p>\n", t->keys_denied,
	    t->keys);
	fputs("<table>\n<tr><th>rule</th><th>key</th><th class=\"n\">denied</th>"
	    "<th class=\"n\">total</th><th class=\"n\">deny ratio</th></tr>\n", fp);
	for (size_t i = 0; i < t->n; i++) {
		fputs("<tr class=\"top\"><td>", fp);
		out_html_str(fp, t->v[i].rule);
		fputs("</td><td>", fp);
		out_html_str(fp, t->v[i].key ? t->v[i].key : "-");
		fprintf(fp, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64
		    "</td><td class=\"n\">%.2f%%</td></tr>\n", t->v[i].denied, t->v[i].total,
		    t->v[i].total ? 100.0 * (double)t->v[i].denied / (double)t->v[i].total : 0);
	}
	fputs("</table>\n</body>\n</html>\n", fp);
	return ferror(fp) ? -1 : 0;
}
