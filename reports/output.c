/*
 * output: text, CSV and JSON for the three results (throughput, verify,
 * top). Formatting only: the numbers come computed. HTML is in html.c,
 * the escapers in escape.c, the names of a series in label.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "label.h"
#include "output.h"
#include "window.h"

#define BAR_WIDTH	32

static int
ndigits(int64_t v)
{
	char b[32];

	return snprintf(b, sizeof(b), "%" PRId64, v);
}

static void
text_header(FILE *fp, const struct agg *a, const struct out_meta *m)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], w[32];
	const struct filter *f = m->filter;

	fprintf(fp, "rlgate-report: %" PRId64 " decision%s from %zu database%s",
	    a->rows, a->rows == 1 ? "" : "s", m->dbs->n, m->dbs->n == 1 ? "" : "s");
	if (a->rows > 0)
		fprintf(fp, ", %s to %s UTC", window_format_time(a->first_ms, t1),
		    window_format_time(a->last_ms, t2));
	fprintf(fp, ", windows of %s", window_format_duration(m->width_ms, w, sizeof(w)));
	if (f->rule) {
		fputs(", rule ", fp);
		escape_text(fp, f->rule);
	}
	if (f->key) {
		fputs(", key ", fp);
		escape_text(fp, f->key);
	}
	if (f->since_ms != INT64_MIN)
		fprintf(fp, ", since %s", window_format_time(f->since_ms, t1));
	if (f->until_ms != INT64_MAX)
		fprintf(fp, ", until %s", window_format_time(f->until_ms, t1));
	fputc('\n', fp);
}

static void
text_bar(FILE *fp, int64_t allowed, int64_t denied, int64_t max)
{
	int na, nd;

	if (max <= 0)
		return;
	na = (int)((allowed * BAR_WIDTH + max / 2) / max);
	nd = (int)(((allowed + denied) * BAR_WIDTH + max / 2) / max) - na;
	/* Whatever happened shows, however small next to the busiest window. */
	if (allowed > 0 && na == 0)
		na = 1;
	if (denied > 0 && nd <= 0)
		nd = 1;
	fputs("  ", fp);
	for (int i = 0; i < na; i++)
		fputc('#', fp);
	for (int i = 0; i < nd; i++)
		fputc('x', fp);
}

static void
text_report(FILE *fp, const struct agg *a, const struct out_meta *m)
{
	text_header(fp, a, m);
	if (a->rows == 0) {
		fputs("no decisions match\n", fp);
		return;
	}
	for (size_t i = 0; i < a->nseries; i++) {
		const struct series *s = &a->series[i];
		char title[512], params[160], t[RLG_TIME_LEN], total[48];
		int64_t max = 0;
		int wa, wd, wt, wr, wu;

		for (size_t k = 0; k < s->nwins; k++)
			if (s->wins[k].allowed + s->wins[k].denied > max)
				max = s->wins[k].allowed + s->wins[k].denied;
		wa = ndigits(s->allowed) > 7 ? ndigits(s->allowed) : 7;
		wd = ndigits(s->denied) > 6 ? ndigits(s->denied) : 6;
		wt = ndigits(s->allowed + s->denied) > 5 ? ndigits(s->allowed + s->denied) : 5;
		wr = ndigits((int64_t)agg_per_second(max, a->width_ms)) + 2;
		wr = wr > 9 ? wr : 9;
		/* Admitted without a count: a column only where there are some. */
		wu = s->unchecked == 0 ? 0 : ndigits(s->unchecked) > 9 ?
		    ndigits(s->unchecked) : 9;
		label_params(&s->params, params, sizeof(params));
		fprintf(fp, "\n%s%s%s%s\n", label_series(s, title, sizeof(title)),
		    params[0] ? " (" : "", params, params[0] ? ")" : "");
		fprintf(fp, "%-23s  %*s  %*s  %*s  %*s", "window (UTC)", wa, "allowed",
		    wd, "denied", wt, "total", wr, "allowed/s");
		if (wu > 0)
			fprintf(fp, "  %*s", wu, "unchecked");
		fputc('\n', fp);
		for (size_t k = 0; k < s->nwins; k++) {
			const struct win *w = &s->wins[k];

			fprintf(fp, "%-23s  %*" PRId64 "  %*" PRId64 "  %*" PRId64 "  %*.1f",
			    window_format_time(w->start_ms, t), wa, w->allowed, wd, w->denied,
			    wt, w->allowed + w->denied, wr,
			    agg_per_second(w->allowed, a->width_ms));
			if (wu > 0)
				fprintf(fp, "  %*" PRId64, wu, w->unchecked);
			text_bar(fp, w->allowed, w->denied, max);
			fputc('\n', fp);
		}
		snprintf(total, sizeof(total), "total, %zu window%s", s->nwins,
		    s->nwins == 1 ? "" : "s");
		fprintf(fp, "%-23s  %*" PRId64 "  %*" PRId64 "  %*" PRId64, total,
		    wa, s->allowed, wd, s->denied, wt, s->allowed + s->denied);
		if (wu > 0)
			fprintf(fp, "  %*s  %*" PRId64, wr, "", wu, s->unchecked);
		fputc('\n', fp);
	}
	if (a->unchecked > 0)
		fprintf(fp, "\nnote: %" PRId64 " of the allowed request%s %s admitted "
		    "without a count (\"unchecked\": reason redis_error, Redis did not "
		    "decide and on_error = allow admitted; no limit counted %s)\n",
		    a->unchecked, a->unchecked == 1 ? "" : "s", a->unchecked == 1 ?
		    "was" : "were", a->unchecked == 1 ? "it" : "them");
}

static void
csv_report(FILE *fp, const struct agg *a)
{
	char t[RLG_TIME_LEN];

	fputs("window_start,window_start_ms,width_ms,rule,key,allowed,denied,total,"
	    "allowed_per_s\n", fp);
	for (size_t i = 0; i < a->nseries; i++) {
		const struct series *s = &a->series[i];

		for (size_t k = 0; k < s->nwins; k++) {
			const struct win *w = &s->wins[k];

			fprintf(fp, "%s,%" PRId64 ",%" PRId64 ",", window_format_time(w->start_ms, t),
			    w->start_ms, a->width_ms);
			escape_csv(fp, s->rule);
			fputc(',', fp);
			escape_csv(fp, s->key);
			fprintf(fp, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%.3f\n", w->allowed,
			    w->denied, w->allowed + w->denied,
			    agg_per_second(w->allowed, a->width_ms));
		}
	}
}

static void
json_time_or_null(FILE *fp, int64_t ms, int64_t none)
{
	char t[RLG_TIME_LEN];

	if (ms == none)
		fputs("null", fp);
	else
		fprintf(fp, "\"%s\"", window_format_time(ms, t));
}

static void
json_int_or_null(FILE *fp, int64_t v)
{
	if (v < 0)
		fputs("null", fp);
	else
		fprintf(fp, "%" PRId64, v);
}

static void
json_report(FILE *fp, const struct agg *a, const struct out_meta *m)
{
	char t[RLG_TIME_LEN];

	fprintf(fp, "{\n  \"width_ms\": %" PRId64 ",\n  \"since\": ", a->width_ms);
	json_time_or_null(fp, m->filter->since_ms, INT64_MIN);
	fputs(",\n  \"until\": ", fp);
	json_time_or_null(fp, m->filter->until_ms, INT64_MAX);
	fprintf(fp, ",\n  \"decisions\": %" PRId64 ",\n  \"series\": [", a->rows);
	for (size_t i = 0; i < a->nseries; i++) {
		const struct series *s = &a->series[i];

		fprintf(fp, "%s\n    {\"rule\": ", i ? "," : "");
		escape_json(fp, s->rule);
		fputs(", \"key\": ", fp);
		escape_json(fp, s->key);
		fputs(", \"algorithm\": ", fp);
		escape_json(fp, s->params.algorithm);
		fputs(", \"limit\": ", fp);
		json_int_or_null(fp, s->params.limit);
		fputs(", \"window_ms\": ", fp);
		json_int_or_null(fp, s->params.window_ms);
		fputs(", \"burst\": ", fp);
		json_int_or_null(fp, s->params.burst);
		fprintf(fp, ", \"allowed\": %" PRId64 ", \"denied\": %" PRId64
		    ", \"windows\": [", s->allowed, s->denied);
		for (size_t k = 0; k < s->nwins; k++) {
			const struct win *w = &s->wins[k];

			fprintf(fp, "%s\n      {\"start\": \"%s\", \"start_ms\": %" PRId64
			    ", \"allowed\": %" PRId64 ", \"denied\": %" PRId64 ", \"total\": %"
			    PRId64 ", \"allowed_per_s\": %.3f}", k ? "," : "",
			    window_format_time(w->start_ms, t), w->start_ms, w->allowed,
			    w->denied, w->allowed + w->denied,
			    agg_per_second(w->allowed, a->width_ms));
		}
		fputs("\n    ]}", fp);
	}
	fputs("\n  ]\n}\n", fp);
}

int
out_report(FILE *fp, enum out_format fmt, const struct agg *a,
    const struct out_meta *m)
{
	switch (fmt) {
	case OUT_TEXT:
		text_report(fp, a, m);
		break;
	case OUT_CSV:
		csv_report(fp, a);
		break;
	case OUT_JSON:
		json_report(fp, a, m);
		break;
	case OUT_HTML:
		return html_report(fp, a, m);
	}
	return ferror(fp) ? -1 : 0;
}

static const char *
rule_params(const struct verify_rule *r, char *buf, size_t len)
{
	struct params p = { (char *)(uintptr_t)r->algorithm, r->limit, r->window_ms,
	    r->burst };
	char pr[32];

	label_params(&p, buf, len);
	if (r->precision_ms > 0)
		snprintf(buf + strlen(buf), len - strlen(buf), ", precision %s (%s)",
		    window_format_duration(r->precision_ms, pr, sizeof(pr)),
		    r->precision_from);
	return buf;
}

static void
text_verify(FILE *fp, const struct verify *v, const struct out_meta *m)
{
	char params[200], rule[200], key[300];

	fprintf(fp, "rlgate-report: verify: %zu database%s, %" PRId64 " admitted decision%s "
	    "of %" PRId64 " key%s replayed\n", m->dbs->n, m->dbs->n == 1 ? "" : "s",
	    v->admitted, v->admitted == 1 ? "" : "s", v->keys, v->keys == 1 ? "" : "s");
	for (size_t i = 0; i < v->nrules; i++) {
		const struct verify_rule *r = &v->rules[i];

		fprintf(fp, "%-4s rule %s (%s): %" PRId64 " key%s, %" PRId64 " admitted, %"
		    PRId64 " violation%s, %" PRId64 " admitted without a count%s\n",
		    r->violations ? "FAIL" : "ok",
		    escape_text_buf(r->rule, rule, sizeof(rule)),
		    rule_params(r, params, sizeof(params)), r->keys, r->keys == 1 ? "" : "s",
		    r->admitted, r->violations, r->violations == 1 ? "" : "s",
		    r->unchecked, r->unchecked == 0 ? "" : v->strict ?
		    " (replayed: --strict)" : " (not replayed)");
	}
	if (v->unchecked > 0 && !v->strict)
		fprintf(fp, "note: %" PRId64 " request%s admitted without a count (reason "
		    "redis_error: Redis did not decide, on_error = allow admitted) "
		    "%s not checked against any limit; --strict counts them\n",
		    v->unchecked, v->unchecked == 1 ? "" : "s",
		    v->unchecked == 1 ? "is" : "are");
	else if (v->unchecked > 0)
		fprintf(fp, "note: --strict: %" PRId64 " request%s admitted without a "
		    "count (reason redis_error) replayed as admitted\n", v->unchecked,
		    v->unchecked == 1 ? "" : "s");
	if (v->skipped > 0)
		fprintf(fp, "note: %" PRId64 " admitted decision%s without usable rule "
		    "parameters not replayed\n", v->skipped, v->skipped == 1 ? "" : "s");
	for (size_t i = 0; i < v->nv; i++) {
		const struct violation *x = &v->v[i];

		fprintf(fp, "VIOLATION rule %s key %s (%s): %s\n",
		    escape_text_buf(x->rule, rule, sizeof(rule)),
		    x->key ? escape_text_buf(x->key, key, sizeof(key)) : "(none)", x->algorithm,
		    x->detail);
	}
	if (v->approximate)
		fputs("note: a fixed_window history had too many possible window "
		    "alignments to try them all; its violations may be overstated\n", fp);
	if (v->nv == 0)
		fputs("ok: every limit held\n", fp);
	else
		fprintf(fp, "%zu violation%s: a promise did not hold\n", v->nv,
		    v->nv == 1 ? "" : "s");
}

static void
csv_verify(FILE *fp, const struct verify *v)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN];

	fputs("rule,key,algorithm,limit,window_ms,burst,check,from,to,from_ms,to_ms,"
	    "admitted,allowed,decisions,detail\n", fp);
	for (size_t i = 0; i < v->nv; i++) {
		const struct violation *x = &v->v[i];

		escape_csv(fp, x->rule);
		fputc(',', fp);
		escape_csv(fp, x->key);
		fprintf(fp, ",%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%s,%s,%s,%" PRId64 ",%"
		    PRId64 ",%" PRId64 ",%s,%" PRId64 ",", x->algorithm, x->limit,
		    x->window_ms, x->burst, x->check, window_format_time(x->from_ms, t1),
		    window_format_time(x->to_ms, t2), x->from_ms, x->to_ms, x->admitted,
		    x->allowed, x->decisions);
		escape_csv(fp, x->detail);
		fputc('\n', fp);
	}
}

static void
json_verify(FILE *fp, const struct verify *v, const struct out_meta *m)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN];

	fprintf(fp, "{\n  \"ok\": %s,\n  \"databases\": %zu,\n  \"keys\": %" PRId64
	    ",\n  \"admitted\": %" PRId64 ",\n  \"skipped\": %" PRId64
	    ",\n  \"unchecked\": %" PRId64 ",\n  \"strict\": %s"
	    ",\n  \"approximate\": %s,\n  \"rules\": [", v->nv == 0 ? "true" : "false",
	    m->dbs->n, v->keys, v->admitted, v->skipped, v->unchecked,
	    v->strict ? "true" : "false", v->approximate ? "true" : "false");
	for (size_t i = 0; i < v->nrules; i++) {
		const struct verify_rule *r = &v->rules[i];

		fprintf(fp, "%s\n    {\"rule\": ", i ? "," : "");
		escape_json(fp, r->rule);
		fputs(", \"algorithm\": ", fp);
		escape_json(fp, r->algorithm);
		fprintf(fp, ", \"limit\": %" PRId64 ", \"window_ms\": %" PRId64 ", \"burst\": %"
		    PRId64 ", \"precision_ms\": ", r->limit, r->window_ms, r->burst);
		if (r->precision_ms > 0)
			fprintf(fp, "%" PRId64, r->precision_ms);
		else
			fputs("null", fp);
		fprintf(fp, ", \"keys\": %" PRId64 ", \"admitted\": %" PRId64
		    ", \"violations\": %" PRId64 ", \"unchecked\": %" PRId64 "}",
		    r->keys, r->admitted, r->violations, r->unchecked);
	}
	fputs("\n  ],\n  \"violations\": [", fp);
	for (size_t i = 0; i < v->nv; i++) {
		const struct violation *x = &v->v[i];

		fprintf(fp, "%s\n    {\"rule\": ", i ? "," : "");
		escape_json(fp, x->rule);
		fputs(", \"key\": ", fp);
		escape_json(fp, x->key);
		fprintf(fp, ", \"algorithm\": \"%s\", \"check\": \"%s\", \"from\": \"%s\", "
		    "\"to\": \"%s\", \"from_ms\": %" PRId64 ", \"to_ms\": %" PRId64
		    ", \"admitted\": %" PRId64 ", \"allowed\": %s, \"decisions\": %" PRId64
		    ", \"detail\": ", x->algorithm, x->check,
		    window_format_time(x->from_ms, t1), window_format_time(x->to_ms, t2),
		    x->from_ms, x->to_ms, x->admitted, x->allowed, x->decisions);
		escape_json(fp, x->detail);
		fputc('}', fp);
	}
	fputs(v->nv ? "\n  ]\n}\n" : "]\n}\n", fp);
}

int
out_verify(FILE *fp, enum out_format fmt, const struct verify *v,
    const struct out_meta *m)
{
	switch (fmt) {
	case OUT_CSV:
		csv_verify(fp, v);
		break;
	case OUT_JSON:
		json_verify(fp, v, m);
		break;
	default:
		text_verify(fp, v, m);
		break;
	}
	return ferror(fp) ? -1 : 0;
}

static double
ratio(const struct top_row *r)
{
	return r->total ? (double)r->denied / (double)r->total : 0;
}

int
out_top(FILE *fp, enum out_format fmt, const struct top *t, size_t n,
    const struct out_meta *m)
{
	int wr = 4, wk = 3;
	char rule[200], key[300];

	switch (fmt) {
	case OUT_HTML:
		return html_top(fp, t, n, m);
	case OUT_CSV:
		fputs("rule,key,denied,total,deny_ratio\n", fp);
		for (size_t i = 0; i < t->n; i++) {
			escape_csv(fp, t->v[i].rule);
			fputc(',', fp);
			escape_csv(fp, t->v[i].key);
			fprintf(fp, ",%" PRId64 ",%" PRId64 ",%.4f\n", t->v[i].denied,
			    t->v[i].total, ratio(&t->v[i]));
		}
		break;
	case OUT_JSON:
		fprintf(fp, "{\n  \"keys\": %" PRId64 ",\n  \"keys_denied\": %" PRId64
		    ",\n  \"top\": [", t->keys, t->keys_denied);
		for (size_t i = 0; i < t->n; i++) {
			fprintf(fp, "%s\n    {\"rule\": ", i ? "," : "");
			escape_json(fp, t->v[i].rule);
			fputs(", \"key\": ", fp);
			escape_json(fp, t->v[i].key);
			fprintf(fp, ", \"denied\": %" PRId64 ", \"total\": %" PRId64
			    ", \"deny_ratio\": %.4f}", t->v[i].denied, t->v[i].total,
			    ratio(&t->v[i]));
		}
		fputs(t->n ? "\n  ]\n}\n" : "]\n}\n", fp);
		break;
	case OUT_TEXT:
		fprintf(fp, "rlgate-report: top %zu key%s by denials: %" PRId64 " of %" PRId64
		    " key%s had denials\n", n, n == 1 ? "" : "s", t->keys_denied, t->keys,
		    t->keys == 1 ? "" : "s");
		if (t->n == 0)
			break;
		for (size_t i = 0; i < t->n; i++) {
			int lr = (int)strlen(escape_text_buf(t->v[i].rule, rule, sizeof(rule)));
			int lk = t->v[i].key ? (int)strlen(escape_text_buf(t->v[i].key, key,
			    sizeof(key))) : 1;

			wr = lr > wr ? (lr > 40 ? 40 : lr) : wr;
			wk = lk > wk ? (lk > 60 ? 60 : lk) : wk;
		}
		fprintf(fp, "%-*s  %-*s  %10s  %10s  %10s\n", wr, "rule", wk, "key", "denied",
		    "total", "deny ratio");
		for (size_t i = 0; i < t->n; i++)
			fprintf(fp, "%-*s  %-*s  %10" PRId64 "  %10" PRId64 "  %9.2f%%\n", wr,
			    escape_text_buf(t->v[i].rule, rule, sizeof(rule)), wk,
			    t->v[i].key ? escape_text_buf(t->v[i].key, key, sizeof(key)) : "-",
			    t->v[i].denied,
			    t->v[i].total, 100.0 * ratio(&t->v[i]));
		break;
	}
	return ferror(fp) ? -1 : 0;
}
