/*
 * verify_api: the promise checker of verify.c on one key's admissions
 * held in memory rather than read from audit databases: for a program
 * that has the admissions already (tests/tools/lua_check checks the Lua's
 * with it). The same checks and slack as rlgate-report --verify: times
 * are ts_ms, Redis TIME truncated to the ms, as the gateway writes them.
 */
#ifndef RLG_REPORT_VERIFY_API_H
#define RLG_REPORT_VERIFY_API_H

#include <stddef.h>
#include <stdint.h>

#include "conf_values.h"
#include "verify.h"

/* One admitted decision. */
struct verify_admission {
	int64_t		 ts_ms;
	int64_t		 cost;
	int64_t		 delay_ms;	/* leaky_bucket's, else 0 */
};

/*
 * Checks a[0..n), one key's admissions in time order, of algorithm alg
 * with these parameters (precision_ms: sliding_window's block, else 0;
 * burst: the limit where none), against its promise. v zeroed first; 0 and
 * v->v[0..v->nv), or -1 (out of memory) with err; verify_free() v always.
 */
int		 verify_admissions(struct verify *v, enum rlg_algorithm alg,
		    int64_t limit, int64_t window_ms, int64_t burst,
		    int64_t precision_ms, const struct verify_admission *a,
		    size_t n, char *err, size_t errlen);

#endif
