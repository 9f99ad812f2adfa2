/*
 * label: the names every format gives a series and its parameters, the
 * same in text, CSV, JSON and HTML. Below output.c and html.c.
 */
#ifndef RLG_REPORT_LABEL_H
#define RLG_REPORT_LABEL_H

#include <stddef.h>

#include "agg.h"

/* "rule user_list, key org1/user/list" style names of a series. */
const char *label_series(const struct series *s, char *buf, size_t len);

/* "fixed_window, limit 100 per 1s" (", burst 150" where it matters); "" when unknown. */
const char *label_params(const struct params *p, char *buf, size_t len);

#endif
