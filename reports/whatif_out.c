/*
 * whatif_out: the --what-if result in text, CSV, JSON and HTML (one page,
 * an inline SVG a rule: recorded and what-if admissions per window, each
 * with its limit scaled to the window). Formatting only: the numbers come
 * computed (whatif.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "label.h"
#include "whatif_out.h"
#include "window.h"

static int
ndigits(int64_t v)
{
	char b[32];

	return snprintf(b, sizeof(b), "%" PRId64, v);
}

static int
wide(int64_t v, int min)
{
	return ndigits(v) > min ? ndigits(v) : min;
}

/* "fixed_window, limit 100 per 1s", or what stands for none. */
static const char *
params_text(const struct params *p, const char *none, char *buf, size_t len)
{
	label_params(p, buf, len);
	if (buf[0] == '\0')
		snprintf(buf, len, "%s", none);
	return buf;
}

static void
text_rule(FILE *fp, const struct whatif_rule *r)
{
	char name[200], rec[160], wi[160], t[RLG_TIME_LEN], key[300], total[48];
	int wa = wide(r->rec_allowed, 16), wd = wide(r->rec_denied, 6);
	int xa = wide(r->wi_allowed, 15), xd = wide(r->wi_denied, 6);

	params_text(&r->recorded, "none recorded", rec, sizeof(rec));
	params_text(&r->what_if, "unknown", wi, sizeof(wi));
	fprintf(fp, "\nrule %s: recorded %s; what-if %s%s\n",
	    escape_text_buf(r->rule, name, sizeof(name)), rec, wi,
	    !r->in_conf ? " (not in the what-if file: as recorded)" :
	    !r->in_audit ? " (new: not in the record)" : "");
	fprintf(fp, "%-23s  %*s  %*s  %*s  %*s\n", "window (UTC)", wa, "recorded allowed",
	    wd, "denied", xa, "what-if allowed", xd, "denied");
	for (size_t k = 0; k < r->nwins; k++) {
		const struct whatif_win *x = &r->wins[k];

		fprintf(fp, "%-23s  %*" PRId64 "  %*" PRId64 "  %*" PRId64 "  %*"
		    PRId64 "\n", window_format_time(x->start_ms, t), wa,
		    x->rec_allowed, wd, x->rec_denied, xa, x->wi_allowed, xd,
		    x->wi_denied);
	}
	snprintf(total, sizeof(total), "total, %zu window%s", r->nwins,
	    r->nwins == 1 ? "" : "s");
	fprintf(fp, "%-23s  %*" PRId64 "  %*" PRId64 "  %*" PRId64 "  %*" PRId64
	    "\n", total, wa, r->rec_allowed, wd, r->rec_denied, xa, r->wi_allowed,
	    xd, r->wi_denied);
	fprintf(fp, "keys newly denied: %" PRId64 ", newly admitted: %" PRId64
	    "; decisions that differ: %" PRId64 "\n", r->newly_denied_keys,
	    r->newly_admitted_keys, r->differ);
	if (r->ntop == 0)
		return;
	fprintf(fp, "  %-30s  %15s  %14s\n", "key", "recorded denied",
	    "what-if denied");
	for (size_t k = 0; k < r->ntop; k++)
		fprintf(fp, "  %-30s  %15" PRId64 "  %14" PRId64 "\n",
		    escape_text_buf(r->top[k].key, key, sizeof(key)),
		    r->top[k].rec_denied, r->top[k].wi_denied);
}

static void
text_notes(FILE *fp, const struct whatif *w)
{
	if (w->differ > 0)
		fprintf(fp, "note: %" PRId64 " decision%s differ%s from the record"
		    " (%" PRId64 " of them on rows Redis had not decided: "
		    "redis_error, local, local_cache)\n", w->differ,
		    w->differ == 1 ? "" : "s", w->differ == 1 ? "s" : "",
		    w->differ_undecided);
	if (w->undecided > 0)
		fprintf(fp, "note: %" PRId64 " row%s Redis had not decided "
		    "(redis_error, local, local_cache) replayed as attempts\n",
		    w->undecided, w->undecided == 1 ? "" : "s");
	if (w->skipped > 0)
		fprintf(fp, "note: %" PRId64 " row%s not replayed (bad requests, "
		    "rows without a key or parameters): counted as recorded "
		    "only\n", w->skipped, w->skipped == 1 ? "" : "s");
	if (w->bad > 0)
		fprintf(fp, "note: %" PRId64 " attempt%s the what-if parameters "
		    "refuse (a cost above the burst): denied\n", w->bad,
		    w->bad == 1 ? "" : "s");
	if (w->late > 0)
		fprintf(fp, "note: %" PRId64 " row%s recorded more than %d ms out "
		    "of time order in %s file: replayed late\n", w->late,
		    w->late == 1 ? "" : "s", RLG_WHATIF_REORDER_MS,
		    w->late == 1 ? "its" : "their");
}

static void
text_whatif(FILE *fp, const struct whatif *w, const struct out_meta *m)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], d[32];

	fprintf(fp, "rlgate-report: what-if ");
	escape_text(fp, w->conf_path);
	fprintf(fp, ": %" PRId64 " request%s replayed from %zu database%s",
	    w->requests, w->requests == 1 ? "" : "s", m->dbs->n,
	    m->dbs->n == 1 ? "" : "s");
	if (w->rows > 0)
		fprintf(fp, ", %s to %s UTC", window_format_time(w->first_ms, t1),
		    window_format_time(w->last_ms, t2));
	fprintf(fp, ", windows of %s\n", window_format_duration(w->width_ms, d,
	    sizeof(d)));
	for (size_t i = 0; i < w->nrules; i++)
		if (w->rules[i].nwins > 0 || (m->filter->rule == NULL &&
		    m->filter->key == NULL))
			text_rule(fp, &w->rules[i]);
	fputc('\n', fp);
	text_notes(fp, w);
}

static void
csv_whatif(FILE *fp, const struct whatif *w)
{
	char t[RLG_TIME_LEN];

	fputs("window_start,window_start_ms,width_ms,rule,recorded_allowed,"
	    "recorded_denied,what_if_allowed,what_if_denied\n", fp);
	for (size_t i = 0; i < w->nrules; i++) {
		const struct whatif_rule *r = &w->rules[i];

		for (size_t k = 0; k < r->nwins; k++) {
			const struct whatif_win *x = &r->wins[k];

			fprintf(fp, "%s,%" PRId64 ",%" PRId64 ",",
			    window_format_time(x->start_ms, t), x->start_ms,
			    w->width_ms);
			escape_csv(fp, r->rule);
			fprintf(fp, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
			    "\n", x->rec_allowed, x->rec_denied, x->wi_allowed,
			    x->wi_denied);
		}
	}
}

static void
json_int(FILE *fp, const char *name, int64_t v)
{
	fprintf(fp, ", \"%s\": ", name);
	if (v < 0)
		fputs("null", fp);
	else
		fprintf(fp, "%" PRId64, v);
}

static void
json_rule(FILE *fp, const struct whatif_rule *r)
{
	char t[RLG_TIME_LEN];

	fputs("\n    {\"rule\": ", fp);
	escape_json(fp, r->rule);
	fputs(", \"algorithm\": ", fp);
	escape_json(fp, r->what_if.algorithm);
	json_int(fp, "limit", r->what_if.limit);
	json_int(fp, "window_ms", r->what_if.window_ms);
	json_int(fp, "burst", r->what_if.burst);
	fprintf(fp, ", \"in_what_if\": %s, \"in_record\": %s,\n     \"recorded\": "
	    "{\"allowed\": %" PRId64 ", \"denied\": %" PRId64 ", \"algorithm\": ",
	    r->in_conf ? "true" : "false", r->in_audit ? "true" : "false",
	    r->rec_allowed, r->rec_denied);
	escape_json(fp, r->recorded.algorithm);
	json_int(fp, "limit", r->recorded.limit);
	json_int(fp, "window_ms", r->recorded.window_ms);
	json_int(fp, "burst", r->recorded.burst);
	fprintf(fp, "},\n     \"what_if\": {\"allowed\": %" PRId64 ", \"denied\": %"
	    PRId64 "},\n     \"differ\": %" PRId64 ", \"newly_denied_keys\": %"
	    PRId64 ", \"newly_admitted_keys\": %" PRId64 ",\n     \"top_keys\": [",
	    r->wi_allowed, r->wi_denied, r->differ, r->newly_denied_keys,
	    r->newly_admitted_keys);
	for (size_t k = 0; k < r->ntop; k++) {
		fputs(k ? ", {\"key\": " : "{\"key\": ", fp);
		escape_json(fp, r->top[k].key);
		fprintf(fp, ", \"recorded_denied\": %" PRId64 ", \"what_if_denied\": %"
		    PRId64 "}", r->top[k].rec_denied, r->top[k].wi_denied);
	}
	fputs("],\n     \"windows\": [", fp);
	for (size_t k = 0; k < r->nwins; k++) {
		const struct whatif_win *x = &r->wins[k];

		fprintf(fp, "%s\n       {\"start\": \"%s\", \"start_ms\": %" PRId64
		    ", \"recorded\": {\"allowed\": %" PRId64 ", \"denied\": %" PRId64
		    "}, \"what_if\": {\"allowed\": %" PRId64 ", \"denied\": %" PRId64
		    "}}", k ? "," : "", window_format_time(x->start_ms, t),
		    x->start_ms, x->rec_allowed, x->rec_denied, x->wi_allowed,
		    x->wi_denied);
	}
	fputs(r->nwins ? "\n     ]}" : "]}", fp);
}

static void
json_whatif(FILE *fp, const struct whatif *w, const struct out_meta *m)
{
	size_t n = 0;

	fputs("{\"what_if\": ", fp);
	escape_json(fp, w->conf_path);
	fprintf(fp, ",\n  \"width_ms\": %" PRId64 ", \"databases\": %zu, "
	    "\"requests\": %" PRId64 ", \"decisions\": %" PRId64 ", \"differ\": %"
	    PRId64 ", \"differ_undecided\": %" PRId64 ", \"undecided\": %" PRId64
	    ", \"skipped\": %" PRId64 ", \"refused\": %" PRId64 ", \"late\": %"
	    PRId64 ", \"keys_in_flight_max\": %" PRId64 ",\n  \"rules\": [",
	    w->width_ms, m->dbs->n, w->requests, w->rows, w->differ,
	    w->differ_undecided, w->undecided, w->skipped, w->bad, w->late,
	    w->keys_peak);
	for (size_t i = 0; i < w->nrules; i++) {
		if (w->rules[i].nwins == 0 && (m->filter->rule != NULL ||
		    m->filter->key != NULL))
			continue;
		fputs(n++ ? "," : "", fp);
		json_rule(fp, &w->rules[i]);
	}
	fputs(n ? "\n  ]}\n" : "]}\n", fp);
}

int
out_whatif(FILE *fp, enum out_format fmt, const struct whatif *w,
    const struct out_meta *m)
{
	switch (fmt) {
	case OUT_TEXT:
		text_whatif(fp, w, m);
		break;
	case OUT_CSV:
		csv_whatif(fp, w);
		break;
	case OUT_JSON:
		json_whatif(fp, w, m);
		break;
	case OUT_HTML:
		return whatif_html(fp, w, m);
	}
	return ferror(fp) ? -1 : 0;
}
