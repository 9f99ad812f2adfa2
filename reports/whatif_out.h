/*
 * whatif_out: the formats of the --what-if result (text, CSV, JSON, and
 * HTML in whatif_html.c). Writers return 0, or -1 when the stream failed.
 */
#ifndef RLG_REPORT_WHATIF_OUT_H
#define RLG_REPORT_WHATIF_OUT_H

#include <stdio.h>

#include "output.h"
#include "whatif.h"
#include "whatif_read.h"

int	out_whatif(FILE *fp, enum out_format fmt, const struct whatif *w,
	    const struct out_meta *m);

/* One page: per rule an inline SVG of recorded and what-if admissions per
 * window, each limit a dashed line scaled to the window; no network. */
int	whatif_html(FILE *fp, const struct whatif *w, const struct out_meta *m);

#endif
