/*
 * label: the names the formats give a series and its parameters (see
 * label.h), built from the escaped strings. Text only: no format's layout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "label.h"
#include "window.h"

const char *
label_series(const struct series *s, char *buf, size_t len)
{
	char r[200], k[300];

	if (s->rule == NULL)
		snprintf(buf, len, "no rule (requests no rule applied to)");
	else if (s->key != NULL)
		snprintf(buf, len, "rule %s, key %s", escape_text_buf(s->rule, r, sizeof(r)),
		    escape_text_buf(s->key, k, sizeof(k)));
	else
		snprintf(buf, len, "rule %s", escape_text_buf(s->rule, r, sizeof(r)));
	return buf;
}

const char *
label_params(const struct params *p, char *buf, size_t len)
{
	char w[32], alg[64];
	int with_burst;

	if (p->algorithm == NULL || p->limit < 0 || p->window_ms <= 0) {
		snprintf(buf, len, "%s", "");
		return buf;
	}
	with_burst = p->burst >= 0 && (strcmp(p->algorithm, "token_bucket") == 0 ||
	    strcmp(p->algorithm, "gcra") == 0 || strcmp(p->algorithm, "leaky_bucket") == 0);
	snprintf(buf, len, "%s, limit %" PRId64 " per %s",
	    escape_text_buf(p->algorithm, alg, sizeof(alg)), p->limit,
	    window_format_duration(p->window_ms, w, sizeof(w)));
	if (with_burst)
		snprintf(buf + strlen(buf), len - strlen(buf), ", burst %" PRId64, p->burst);
	return buf;
}
