/*
 * verify_api: verify_admissions() (verify_api.h): one key's admissions
 * from memory through verify.c's checks, as verify_run() gives them the
 * rows of databases. Not here: the checks themselves (verify.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "verify_api.h"
#include "verify_int.h"

int
verify_admissions(struct verify *v, enum rlg_algorithm alg, int64_t limit,
    int64_t window_ms, int64_t burst, int64_t precision_ms,
    const struct verify_admission *a, size_t n, char *err, size_t errlen)
{
	static const struct filter all = { NULL, NULL, INT64_MIN, INT64_MAX };
	struct ctx c = { 0 };
	struct priv *pv;
	struct pinfo *p;
	uint32_t kid;
	size_t i;

	if ((pv = calloc(1, sizeof(*pv))) == NULL)
		goto oom;
	v->priv = pv;
	if ((kid = intern_pair(&pv->keys, "verify", "key")) == RLG_INTERN_FAIL ||
	    (p = calloc(1, sizeof(*p))) == NULL)
		goto oom;
	pv->pi = p;
	pv->npi = pv->pcap = 1;
	p->rule = "verify";
	p->algname = conf_algorithm_name(alg);
	p->alg = (int)alg;
	p->limit = limit;
	p->window_ms = window_ms;
	p->burst = burst;
	p->precision_ms = precision_ms;
	p->precision_from = "given";
	p->last_kid = UINT32_MAX;
	if (n > 0 && (pv->recs = calloc(n, sizeof(*pv->recs))) == NULL)
		goto oom;
	for (i = 0; i < n; i++)
		pv->recs[i] = (struct rec){ a[i].ts_ms, kid, 0, (uint32_t)i,
		    (uint32_t)a[i].cost, a[i].delay_ms };
	pv->n = pv->cap = n;
	c.v = v;
	c.p = pv;
	c.f = &all;
	if (n > 0 && verify_check_run(&c, pv->recs, n, p) == -1) {
		snprintf(err, errlen, "algorithm %d is none rlgate knows", (int)alg);
		return -1;
	}
	if (c.oom)
		goto oom;
	v->keys = 1;
	v->admitted = (int64_t)n;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}
