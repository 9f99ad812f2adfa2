/*
 * html: the report as one self-contained page, no script, no font, nothing
 * fetched. Per series an inline SVG with two panels on one UTC time axis:
 * admitted decisions against the rule's limit (a dashed line scaled to the
 * window) on their own scale, denials below on theirs, so that neither
 * hides the other however lopsided they are; windows where --verify found
 * a violation shaded across both and flagged. Each window is a
 * <g class="bar">, each marked run of windows a <g class="violation">.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "label.h"
#include "output.h"
#include "window.h"

#define SVG_W		960
#define PAD_L		70
#define PAD_R		36
#define PAD_T		44	/* the legend, then the violation flags */
#define ADM_H		200	/* the admitted panel */
#define GAP		34
#define DEN_H		110	/* the denied panel */
#define PAD_B		46
#define SVG_H		(PAD_T + ADM_H + GAP + DEN_H + PAD_B)
#define DEN_TOP		(PAD_T + ADM_H + GAP)
#define PLOT_W		(SVG_W - PAD_L - PAD_R)
#define MIN_SLOTS	12	/* a lone window still gets a time axis around it */
#define MAX_BARS	1200	/* more windows are summed per bar */
#define MAX_CHARTS	50
#define MAX_LISTED	200	/* violations listed under the charts */

#define COLOR_ALLOWED	"#2e7d32"
#define COLOR_DENIED	"#c62828"
#define COLOR_LIMIT	"#1565c0"
#define COLOR_VIOL	"#ef6c00"
#define COLOR_UNCHECKED	"#f9a825"

static void
page_start(FILE *fp, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	    "<title>", fp);
	escape_html(fp, title);
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
	    "svg .unchecked { fill: " COLOR_UNCHECKED "; }\n"
	    "p.unchecked { color: #8d6e00; }\n"
	    "svg .limit { stroke: " COLOR_LIMIT "; stroke-width: 2; stroke-dasharray: 6 4; fill: none; }\n"
	    "svg .bar:hover rect { opacity: 0.75; }\n"
	    "svg .vband { fill: " COLOR_VIOL "; fill-opacity: 0.16; }\n"
	    "svg .vmark { fill: " COLOR_VIOL "; }\n"
	    "svg text.vtext { fill: " COLOR_VIOL "; font-weight: bold; }\n"
	    "svg text.panel { fill: #1f2328; font-weight: bold; }\n"
	    "p.viol { color: " COLOR_VIOL "; font-weight: bold; }\n"
	    "p.ok { color: " COLOR_ALLOWED "; }\n"
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
		escape_html(fp, m->dbs->v[i].path);
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
	int64_t		 unchecked;	/* of allowed: no limit counted them */
};

/* A run of windows [from, to) holding n violations. */
struct mark {
	int64_t		 from;
	int64_t		 to;
	int64_t		 n;
};

/* A panel: its top, height and the count at its top edge. */
struct panel {
	int		 top;
	int		 h;
	double		 ymax;
	double		 ystep;
};

static double
px_x(int64_t t, int64_t t0, int64_t t1)
{
	return PAD_L + (double)(t - t0) * PLOT_W / (double)(t1 - t0);
}

static double
px_y(const struct panel *p, double v)
{
	return p->top + p->h - v * p->h / p->ymax;
}

/* A count axis from 0 to at least top, with room above it. */
static void
panel_scale(struct panel *p, double top)
{
	if (top < 1)
		top = 1;
	p->ystep = window_count_step(top * 1.08 / 4);
	p->ymax = p->ystep * (double)(int64_t)(top * 1.08 / p->ystep + 0.999999);
	if (p->ymax < top)
		p->ymax += p->ystep;
}

static void
panel_axis(FILE *fp, const struct panel *p, const char *label)
{
	for (double v = 0; v <= p->ymax + p->ystep / 2; v += p->ystep) {
		double y = px_y(p, v);

		fprintf(fp, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
		    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", PAD_L,
		    PAD_L + PLOT_W, y, y, PAD_L - 6, y + 4, v);
	}
	fprintf(fp, "<text class=\"panel\" x=\"%d\" y=\"%d\">%s</text>\n", PAD_L + 4,
	    p->top - 6, label);
	fprintf(fp, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
	    PAD_L, PAD_L + PLOT_W, p->top + p->h, p->top + p->h);
}

/* A bar from 0 to v in p; whatever happened shows, however small. */
static void
bar_rect(FILE *fp, const struct panel *p, const char *cls, double x, double w,
    int64_t v)
{
	double y = px_y(p, (double)v), h = p->top + p->h - y;

	if (v > 0 && h < 1.5) {
		h = 1.5;
		y = p->top + p->h - h;
	}
	fprintf(fp, "<rect class=\"%s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
	    "height=\"%.2f\"/>", cls, x, y, w, v > 0 ? h : 0);
}

static int
cmp_mark(const void *x, const void *y)
{
	const struct mark *a = x, *b = y;

	return (a->from > b->from) - (a->from < b->from);
}

/* The violations of s as runs of bins; *n of them, the caller frees. */
static struct mark *
marks_of(const struct series *s, const struct verify *v, int64_t bin, size_t *n)
{
	struct mark *m;
	size_t k = 0, out = 0;

	*n = 0;
	if (v == NULL || v->nv == 0 || s->rule == NULL)
		return NULL;
	if ((m = calloc(v->nv, sizeof(*m))) == NULL)
		return NULL;
	for (size_t i = 0; i < v->nv; i++) {
		const struct violation *x = &v->v[i];

		if (strcmp(x->rule, s->rule) != 0 || (s->key != NULL &&
		    (x->key == NULL || strcmp(x->key, s->key) != 0)))
			continue;
		/* to_ms may be the exclusive end of a window: its last ms is inside. */
		m[k++] = (struct mark){ window_start(x->from_ms, bin),
		    window_start(x->to_ms > x->from_ms ? x->to_ms - 1 : x->from_ms, bin) +
		    bin, 1 };
	}
	qsort(m, k, sizeof(*m), cmp_mark);
	for (size_t i = 0; i < k; i++) {
		if (out > 0 && m[i].from <= m[out - 1].to) {
			if (m[i].to > m[out - 1].to)
				m[out - 1].to = m[i].to;
			m[out - 1].n++;
		} else
			m[out++] = m[i];
	}
	*n = out;
	return m;
}

/* The legend; limit: the limit line's label, or NULL when none is drawn;
 * unchecked: the chart shows admissions without a count. */
static void
legend(FILE *fp, const char *limit, int viol, int unchecked)
{
	int x = 0;

	fprintf(fp, "<g class=\"legend\" transform=\"translate(%d 8)\">", PAD_L);
	fprintf(fp, "<rect class=\"allowed\" x=\"%d\" y=\"0\" width=\"12\" height=\"12\"/>"
	    "<text x=\"%d\" y=\"10\">admitted</text>", x, x + 18);
	x += 94;
	fprintf(fp, "<rect class=\"denied\" x=\"%d\" y=\"0\" width=\"12\" height=\"12\"/>"
	    "<text x=\"%d\" y=\"10\">denied</text>", x, x + 18);
	x += 80;
	if (limit) {
		fprintf(fp, "<line class=\"limit\" x1=\"%d\" x2=\"%d\" y1=\"6\" y2=\"6\"/>"
		    "<text x=\"%d\" y=\"10\">%s</text>", x, x + 30, x + 36, limit);
		x += 50 + 7 * (int)strlen(limit);
	}
	if (unchecked) {
		fprintf(fp, "<rect class=\"unchecked\" x=\"%d\" y=\"0\" width=\"12\" "
		    "height=\"12\"/><text x=\"%d\" y=\"10\">admitted without a count"
		    "</text>", x, x + 18);
		x += 190;
	}
	if (viol)
		fprintf(fp, "<rect class=\"vband\" x=\"%d\" y=\"0\" width=\"12\" height=\"12\"/>"
		    "<path class=\"vmark\" d=\"M%d 0h12l-6 8z\"/>"
		    "<text x=\"%d\" y=\"10\">violation found by --verify</text>", x, x, x + 18);
	fputs("</g>\n", fp);
}

/* The chart's heading: its title (written to title too), the series'
 * parameters and totals, and what --verify found. */
static void
chart_heading(FILE *fp, const struct series *s, int64_t width_ms, int64_t bin,
    int idx, const struct verify *v, int64_t nviol, size_t nmarks, char *title,
    size_t titlelen)
{
	char params[160], w[32], bw[32];

	label_series(s, title, titlelen);
	label_params(&s->params, params, sizeof(params));
	fprintf(fp, "<section class=\"chart\" id=\"series-%d\">\n<h2>", idx);
	escape_html(fp, title);
	fputs("</h2>\n<p class=\"sub\">", fp);
	if (params[0]) {
		escape_html(fp, params);
		fputs(s->one_key ? "" : " for each key; the chart sums every key", fp);
		fputs(" &middot; ", fp);
	}
	fprintf(fp, "%" PRId64 " admitted, %" PRId64 " denied in %zu window%s of %s",
	    s->allowed, s->denied, s->nwins, s->nwins == 1 ? "" : "s",
	    window_format_duration(width_ms, w, sizeof(w)));
	if (bin != width_ms)
		fprintf(fp, "; each bar sums %" PRId64 " windows (%s)", bin / width_ms,
		    window_format_duration(bin, bw, sizeof(bw)));
	fputs("</p>\n", fp);
	if (s->unchecked > 0)
		fprintf(fp, "<p class=\"unchecked\">%" PRId64 " of the admitted without "
		    "a count (reason redis_error: Redis did not decide, on_error = allow "
		    "admitted)%s</p>\n", s->unchecked, v == NULL ? "" : v->strict ?
		    "; --verify --strict replayed them as admitted" :
		    "; --verify did not check them against the limit (--strict does)");
	if (v != NULL && s->rule != NULL) {
		if (nviol > 0)
			fprintf(fp, "<p class=\"viol\">--verify: %" PRId64 " violation%s of the "
			    "limit, in %zu marked stretch%s</p>\n", nviol, nviol == 1 ? "" : "s",
			    nmarks, nmarks == 1 ? "" : "es");
		else
			fputs("<p class=\"ok\">--verify: the limit held</p>\n", fp);
	}
}

/* The time axis, under the denied panel, from t0 to t1v. */
static void
time_axis(FILE *fp, int64_t t0, int64_t t1v)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN];
	int64_t step;

	/* Time axis, under the denied panel; ticks on round UTC times. */
	step = window_axis_step((t1v - t0) / 8 > 0 ? (t1v - t0) / 8 : 1);
	for (int64_t t = window_start(t0, step); t <= t1v; t += step) {
		char tl[32];
		double x;

		if (t < t0)
			continue;
		x = px_x(t, t0, t1v);
		tick_label(t, step, tl, sizeof(tl));
		fprintf(fp, "<line class=\"axis\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
		    "<line class=\"axis\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
		    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, x,
		    PAD_T + ADM_H, PAD_T + ADM_H + 4, x, x, DEN_TOP + DEN_H,
		    DEN_TOP + DEN_H + 5, x, DEN_TOP + DEN_H + 18, tl);
	}
	window_format_time(t0, t1);
	window_format_time(t1v - 1, t2);
	fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (UTC) %.10s",
	    PAD_L + PLOT_W / 2, SVG_H - 6, t1);
	if (strncmp(t1, t2, 10) != 0)
		fprintf(fp, " to %.10s", t2);
	fputs("</text>\n", fp);
}

/* The violations' marks, clipped to [t0, t1v). */
static void
violation_bands(FILE *fp, const struct mark *marks, size_t nmarks, int64_t t0,
    int64_t t1v)
{
	/* Violations first, under the bars: a band across both panels and a flag. */
	for (size_t k = 0; k < nmarks; k++) {
		int64_t from = marks[k].from < t0 ? t0 : marks[k].from;
		int64_t to = marks[k].to > t1v ? t1v : marks[k].to;
		double x0 = px_x(from, t0, t1v), x1 = px_x(to, t0, t1v), xm;
		char tf[RLG_TIME_LEN], tt[RLG_TIME_LEN];

		if (x1 - x0 < 3) {
			x0 -= (3 - (x1 - x0)) / 2;
			x1 = x0 + 3;
		}
		xm = (x0 + x1) / 2;
		fprintf(fp, "<g class=\"violation\" data-from=\"%s\" data-to=\"%s\" "
		    "data-violations=\"%" PRId64 "\"><title>%" PRId64 " violation%s "
		    "found by --verify from %s to %s</title>", window_format_time(marks[k].from,
		    tf), window_format_time(marks[k].to, tt), marks[k].n, marks[k].n,
		    marks[k].n == 1 ? "" : "s", tf, tt);
		fprintf(fp, "<rect class=\"vband\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
		    "height=\"%d\"/><path class=\"vmark\" d=\"M%.2f %dh14l-7 10z\"/>",
		    x0, PAD_T, x1 - x0, DEN_TOP + DEN_H - PAD_T, xm - 7, PAD_T - 12);
		fputs("</g>\n", fp);
	}
}

/* The bars of bin ms each, in panels pa (admitted) and pd (denied). */
static void
draw_bars(FILE *fp, const struct bar *bars, size_t nbars, int64_t bin,
    int64_t t0, int64_t t1v, const struct panel *pa, const struct panel *pd)
{
	double barw;

	/* The bars: admitted above, denied below, one group per window. */
	barw = (double)PLOT_W * (double)bin / (double)(t1v - t0);
	fputs("<g class=\"bars\">\n", fp);
	for (size_t k = 0; k < nbars; k++) {
		const struct bar *b = &bars[k];
		double x = px_x(b->start, t0, t1v), wpx = barw > 3 ? barw - 1 : barw;
		char tl[RLG_TIME_LEN], na[24], nd[24];

		if (barw > 3)
			x += 0.5;
		if (barw > 80) {
			x += (barw - 80) / 2;
			wpx = 80;
		}
		fprintf(fp, "<g class=\"bar\" data-start=\"%s\" data-allowed=\"%" PRId64
		    "\" data-denied=\"%" PRId64 "\" data-unchecked=\"%" PRId64 "\"><title>"
		    "%s: %" PRId64 " admitted (%" PRId64 " without a count), %" PRId64
		    " denied</title>", window_format_time(b->start, tl), b->allowed,
		    b->denied, b->unchecked, tl, b->allowed, b->unchecked, b->denied);
		bar_rect(fp, pa, "allowed", x, wpx, b->allowed);
		/* The admitted without a count: the bar's lower part. */
		if (b->unchecked > 0)
			bar_rect(fp, pa, "unchecked", x, wpx, b->unchecked);
		bar_rect(fp, pd, "denied", x, wpx, b->denied);
		/* Room for its numbers: each bar says them. */
		snprintf(na, sizeof(na), "%" PRId64, b->allowed);
		snprintf(nd, sizeof(nd), "%" PRId64, b->denied);
		if (wpx >= 7.0 * (double)strlen(na))
			fprintf(fp, "<text class=\"halo\" x=\"%.2f\" y=\"%.2f\" "
			    "text-anchor=\"middle\">%s</text>", x + wpx / 2,
			    px_y(pa, (double)b->allowed) - 4, na);
		if (b->denied > 0 && wpx >= 7.0 * (double)strlen(nd))
			fprintf(fp, "<text class=\"halo\" x=\"%.2f\" y=\"%.2f\" "
			    "text-anchor=\"middle\">%s</text>", x + wpx / 2,
			    px_y(pd, (double)b->denied) - 4, nd);
		fputs("</g>\n", fp);
	}
	fputs("</g>\n", fp);
}

static int
chart(FILE *fp, const struct series *s, int64_t width_ms, int idx,
    const struct verify *v)
{
	char title[600], bw[32], lab[96];
	int64_t first = s->wins[0].start_ms, last = s->wins[s->nwins - 1].start_ms;
	int64_t bin = width_ms, t0, t1v, slots, amax = 0, dmax = 0, nviol = 0;
	struct bar *bars;
	struct mark *marks = NULL;
	struct panel pa = { PAD_T, ADM_H, 1, 1 }, pd = { DEN_TOP, DEN_H, 1, 1 };
	size_t nbars = 0, nmarks = 0;
	double limit_y = -1;

	/* Too many windows for the width: each bar sums k whole windows. */
	slots = (last - first) / width_ms + 1;
	if (slots > MAX_BARS)
		bin = width_ms * ((slots + MAX_BARS - 1) / MAX_BARS);
	if ((bars = calloc(s->nwins, sizeof(*bars))) == NULL)
		return -1;
	for (size_t k = 0; k < s->nwins; k++) {
		int64_t b = window_start(s->wins[k].start_ms, bin);

		if (nbars == 0 || bars[nbars - 1].start != b)
			bars[nbars++] = (struct bar){ b, 0, 0, 0 };
		bars[nbars - 1].allowed += s->wins[k].allowed;
		bars[nbars - 1].denied += s->wins[k].denied;
		bars[nbars - 1].unchecked += s->wins[k].unchecked;
	}
	t0 = bars[0].start;
	t1v = bars[nbars - 1].start + bin;
	slots = (t1v - t0) / bin;
	if (slots < MIN_SLOTS) {
		t0 -= (MIN_SLOTS - slots) / 2 * bin;
		t1v = t0 + MIN_SLOTS * bin;
	}
	for (size_t k = 0; k < nbars; k++) {
		amax = bars[k].allowed > amax ? bars[k].allowed : amax;
		dmax = bars[k].denied > dmax ? bars[k].denied : dmax;
	}
	/* Drawn where it applies: one key (the rule's limit holds per key). */
	if (s->one_key && s->params.limit > 0 && s->params.window_ms > 0)
		limit_y = (double)s->params.limit * (double)bin / (double)s->params.window_ms;
	panel_scale(&pa, limit_y > (double)amax ? limit_y : (double)amax);
	panel_scale(&pd, (double)dmax);
	marks = marks_of(s, v, bin, &nmarks);
	for (size_t k = 0; k < nmarks; k++)
		nviol += marks[k].n;

	chart_heading(fp, s, width_ms, bin, idx, v, nviol, nmarks, title,
	    sizeof(title));

	fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	    "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", SVG_W, SVG_H, SVG_W, SVG_H);
	escape_html(fp, title);
	fputs("\">\n<title>", fp);
	escape_html(fp, title);
	fputs("</title>\n", fp);

	window_format_duration(bin, bw, sizeof(bw));
	snprintf(lab, sizeof(lab), "admitted per %s", bw);
	fprintf(fp, "<g class=\"panel-admitted\">\n");
	panel_axis(fp, &pa, lab);
	fputs("</g>\n<g class=\"panel-denied\">\n", fp);
	snprintf(lab, sizeof(lab), "denied per %s (own scale)", bw);
	panel_axis(fp, &pd, lab);
	fputs("</g>\n", fp);

	time_axis(fp, t0, t1v);

	violation_bands(fp, marks, nmarks, t0, t1v);

	draw_bars(fp, bars, nbars, bin, t0, t1v, &pa, &pd);

	/* The limit, as a rate: what the rule admits per window of this width. */
	if (limit_y >= 0) {
		double y = px_y(&pa, limit_y);

		fprintf(fp, "<line class=\"limit\" x1=\"%d\" x2=\"%d\" y1=\"%.2f\" "
		    "y2=\"%.2f\"/>\n", PAD_L, PAD_L + PLOT_W, y, y);
		snprintf(lab, sizeof(lab), "limit %g per %s", limit_y, bw);
	}
	legend(fp, limit_y >= 0 ? lab : NULL, nmarks > 0, s->unchecked > 0);
	fputs("</svg>\n</section>\n", fp);
	free(marks);
	free(bars);
	return 0;
}

static void
violations_table(FILE *fp, const struct verify *v)
{
	char t[RLG_TIME_LEN];

	fprintf(fp, "<h2>Violations found by --verify</h2>\n<p class=\"viol\">%zu "
	    "violation%s: a promise did not hold.</p>\n<table>\n<tr><th>rule</th>"
	    "<th>key</th><th>from (UTC)</th><th>what</th></tr>\n", v->nv,
	    v->nv == 1 ? "" : "s");
	for (size_t i = 0; i < v->nv && i < MAX_LISTED; i++) {
		fputs("<tr class=\"violation\"><td>", fp);
		escape_html(fp, v->v[i].rule);
		fputs("</td><td>", fp);
		escape_html(fp, v->v[i].key ? v->v[i].key : "-");
		fprintf(fp, "</td><td>%s</td><td>", window_format_time(v->v[i].from_ms, t));
		escape_html(fp, v->v[i].detail);
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n", fp);
	if (v->nv > MAX_LISTED)
		fprintf(fp, "<p>The first %d of %zu; -f csv --verify lists them all.</p>\n",
		    MAX_LISTED, v->nv);
}

int
html_report(FILE *fp, const struct agg *a, const struct out_meta *m)
{
	char title[600], params[160];
	size_t charted = 0, hidden = 0, shown = 0;
	int64_t hidden_rows = 0;

	for (size_t i = 0; i < a->nseries; i++) {
		if (a->series[i].rule == NULL && !m->unmatched) {
			hidden++;
			hidden_rows += a->series[i].allowed + a->series[i].denied;
		} else
			charted++;
	}
	if (charted == 1)
		for (size_t i = 0; i < a->nseries; i++)
			if (a->series[i].rule != NULL || m->unmatched)
				snprintf(title, sizeof(title), "rlgate report: %s",
				    label_series(&a->series[i], params, sizeof(params)));
	if (charted != 1)
		snprintf(title, sizeof(title), "rlgate report: %zu series", charted);
	page_start(fp, title);
	fputs("<h1>", fp);
	escape_html(fp, title);
	fputs("</h1>\n", fp);
	page_meta(fp, m, a->rows, a->first_ms, a->last_ms);
	if (a->rows == 0)
		fputs("<p>No decisions match.</p>\n", fp);
	if (m->verify != NULL && m->verify->nv == 0)
		fprintf(fp, "<p class=\"ok\">--verify: every limit held (%" PRId64 " admitted "
		    "decisions of %" PRId64 " keys replayed).</p>\n", m->verify->admitted,
		    m->verify->keys);
	if (m->verify != NULL && m->verify->unchecked > 0)
		fprintf(fp, "<p class=\"unchecked\">--verify: %" PRId64 " request%s "
		    "admitted without a count (reason redis_error, on_error = allow) %s"
		    "</p>\n", m->verify->unchecked, m->verify->unchecked == 1 ? "" : "s",
		    m->verify->strict ? "replayed as admitted (--strict)" :
		    "not checked against any limit; --strict counts them");
	if (hidden > 0)
		fprintf(fp, "<p class=\"sub\">%" PRId64 " decision%s no rule applied to "
		    "(not limited) are not charted; --unmatched shows them.</p>\n",
		    hidden_rows, hidden_rows == 1 ? "" : "s");
	if (charted > 1) {
		fputs("<table>\n<tr><th>series</th><th>rule parameters</th><th class=\"n\">"
		    "admitted</th><th class=\"n\">denied</th><th class=\"n\">windows</th></tr>\n",
		    fp);
		for (size_t i = 0, n = 0; i < a->nseries; i++) {
			const struct series *s = &a->series[i];
			int link;

			if (s->rule == NULL && !m->unmatched)
				continue;
			link = n++ < MAX_CHARTS;
			fputs("<tr><td>", fp);
			if (link)
				fprintf(fp, "<a href=\"#series-%zu\">", i);
			escape_html(fp, label_series(s, title, sizeof(title)));
			fputs(link ? "</a></td><td>" : "</td><td>", fp);
			escape_html(fp, label_params(&s->params, params, sizeof(params)));
			fprintf(fp, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64
			    "</td><td class=\"n\">%zu</td></tr>\n", s->allowed, s->denied, s->nwins);
		}
		fputs("</table>\n", fp);
	}
	if (charted > MAX_CHARTS)
		fprintf(fp, "<p>Charts for the first %d of %zu series; narrow the report "
		    "with -r and -k for the others.</p>\n", MAX_CHARTS, charted);
	/* Rules first; requests no rule applied to, when asked for, last. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < a->nseries && shown < MAX_CHARTS; i++) {
			const struct series *s = &a->series[i];

			if ((pass == 0) != (s->rule != NULL) || (s->rule == NULL &&
			    !m->unmatched) || s->nwins == 0)
				continue;
			shown++;
			if (chart(fp, s, a->width_ms, (int)i, m->verify) == -1)
				return -1;
		}
	if (m->verify != NULL && m->verify->nv > 0)
		violations_table(fp, m->verify);
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
	escape_html(fp, title);
	fputs("</h1>\n", fp);
	page_meta(fp, m, -1, 0, 0);
	fprintf(fp, "<p>%" PRId64 " of %" PRId64 " keys had denials.</p>\n", t->keys_denied,
	    t->keys);
	fputs("<table>\n<tr><th>rule</th><th>key</th><th class=\"n\">denied</th>"
	    "<th class=\"n\">total</th><th class=\"n\">deny ratio</th></tr>\n", fp);
	for (size_t i = 0; i < t->n; i++) {
		fputs("<tr class=\"top\"><td>", fp);
		escape_html(fp, t->v[i].rule);
		fputs("</td><td>", fp);
		escape_html(fp, t->v[i].key ? t->v[i].key : "-");
		fprintf(fp, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64
		    "</td><td class=\"n\">%.2f%%</td></tr>\n", t->v[i].denied, t->v[i].total,
		    t->v[i].total ? 100.0 * (double)t->v[i].denied / (double)t->v[i].total : 0);
	}
	fputs("</table>\n</body>\n</html>\n", fp);
	return ferror(fp) ? -1 : 0;
}
