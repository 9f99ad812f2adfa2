/*
 * verify: checks each algorithm's promise over the records of one key, in
 * time order, with exactly the slack that millisecond timestamps imply (see
 * verify.h and the man page), and runs the whole: load, check, summary.
 * Not here: reading the databases into records (verify_load.c); not for
 * throughput: see agg.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "intern.h"
#include "verify_int.h"
#include "window.h"

typedef __int128 i128;

/* A bound to the us: "1.999999", "2", "40.5" (never rounded up to look kept). */
static const char *
fmt_dec(double v, char *buf, size_t len)
{
	long long u = (long long)floorl((long double)v * 1000000.0L + 1e-6L);
	char *e;

	snprintf(buf, len, "%lld.%06lld", u / 1000000, u % 1000000);
	e = buf + strlen(buf);
	while (e[-1] == '0')
		*--e = '\0';
	if (e[-1] == '.')
		*--e = '\0';
	return buf;
}

/* Adds a violation of p's promise for key kid; detail is printf-formatted. */
static void __attribute__((format(printf, 10, 11)))
add(struct ctx *c, const struct pinfo *p, uint32_t kid, const char *check,
    int64_t from_ms, int64_t to_ms, int64_t admitted, int64_t decisions,
    const char *allowed, const char *fmt, ...)
{
	struct violation *x;
	va_list ap;

	/* Kept when it touches [since, until); to_ms may equal from_ms. */
	if (to_ms < c->f->since_ms || from_ms >= c->f->until_ms)
		return;
	if (c->v->nv == c->vcap) {
		size_t ncap = c->vcap ? c->vcap * 2 : 64;
		struct violation *nv = realloc(c->v->v, ncap * sizeof(*nv));

		if (nv == NULL) {
			c->oom = 1;
			return;
		}
		c->v->v = nv;
		c->vcap = ncap;
	}
	x = &c->v->v[c->v->nv++];
	memset(x, 0, sizeof(*x));
	intern_pair_get(&c->p->keys, kid, &x->rule, &x->key);
	x->algorithm = p->algname;
	x->limit = p->limit;
	x->window_ms = p->window_ms;
	x->burst = p->burst;
	x->check = check;
	x->from_ms = from_ms;
	x->to_ms = to_ms;
	x->admitted = admitted;
	x->decisions = decisions;
	snprintf(x->allowed, sizeof(x->allowed), "%s", allowed);
	va_start(ap, fmt);
	vsnprintf(x->detail, sizeof(x->detail), fmt, ap);
	va_end(ap);
}

/*
 * fixed_window. A window [S, S + W) opens at the first request at or after
 * the previous window's end, and admits at most limit cost. With ms times a
 * window that opens in ms s ends inside ms s + W: the decisions stamped
 * s + W may belong to it or to the next window (any of them, as their true
 * order inside the ms is unknown), and when all belong to it the next
 * window opens later. So several reconstructions are possible; a violation
 * is reported only when none keeps the promise. The search keeps, per
 * possible window start (a distinct ms), the smallest cost already in the
 * window, explores starts in time order, and on a dead end reports the
 * reconstruction that got furthest, counting that window as full.
 */
struct fw {
	const struct rec *r;
	size_t		 G;
	int64_t		*gms, *gcost, *P;	/* per distinct ms; P: prefix cost */
	size_t		*glo, *ghi;		/* rows of the group */
	int64_t		*best;			/* smallest load queued per start */
	struct fwst { size_t g; int64_t load; } *heap;
	size_t		 nheap, heapcap;
	int		 success, dropped;
};

static size_t
fw_lb(const struct fw *w, size_t lo, int64_t ms)
{
	size_t hi = w->G;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->gms[mid] < ms)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
fw_sift_up(struct fw *w, size_t i)
{
	while (i > 0 && w->heap[(i - 1) / 2].g > w->heap[i].g) {
		struct fwst t = w->heap[i];

		w->heap[i] = w->heap[(i - 1) / 2];
		w->heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void
fw_sift_down(struct fw *w, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct fwst t;

		if (l < w->nheap && w->heap[l].g < w->heap[m].g)
			m = l;
		if (l + 1 < w->nheap && w->heap[l + 1].g < w->heap[m].g)
			m = l + 1;
		if (m == i)
			return;
		t = w->heap[i];
		w->heap[i] = w->heap[m];
		w->heap[m] = t;
		i = m;
	}
}

static int
fw_push(struct fw *w, size_t g, int64_t load)
{
	if (g >= w->G) {
		w->success = 1;
		return 0;
	}
	if (load >= w->best[g])
		return 0;
	w->best[g] = load;
	if (w->nheap == w->heapcap) {
		size_t ncap = w->heapcap ? w->heapcap * 2 : 64;
		struct fwst *h = realloc(w->heap, ncap * sizeof(*h));

		if (h == NULL)
			return -1;
		w->heap = h;
		w->heapcap = ncap;
	}
	w->heap[w->nheap] = (struct fwst){ g, load };
	fw_sift_up(w, w->nheap++);
	return 0;
}

static int
cmp_fwst_load(const void *x, const void *y)
{
	const struct fwst *a = x, *b = y;

	if (a->load != b->load)
		return a->load < b->load ? -1 : 1;
	return (a->g > b->g) - (a->g < b->g);
}

/* Keeps the cap / 2 least loaded live starts; the search is then no longer exhaustive. */
static void
fw_prune(struct fw *w, size_t cap)
{
	size_t live = 0;

	for (size_t i = 0; i < w->nheap; i++)
		if (w->best[w->heap[i].g] == w->heap[i].load)
			w->heap[live++] = w->heap[i];
	w->nheap = live;
	if (w->nheap <= cap)
		goto heapify;
	qsort(w->heap, w->nheap, sizeof(*w->heap), cmp_fwst_load);
	for (size_t i = cap / 2; i < w->nheap; i++)
		w->best[w->heap[i].g] = INT64_MAX;
	w->nheap = cap / 2;
	w->dropped = 1;
heapify:
	for (size_t i = w->nheap / 2 + 1; i-- > 0;)
		fw_sift_down(w, i);
}

/* The most cost of group g's rows that fits in room, leaving at least one row out. */
static int64_t
fw_fit(const struct fw *w, size_t g, int64_t room)
{
	size_t lo = w->glo[g], hi = w->ghi[g], n = hi - lo;
	int64_t cmin = INT64_MAX, cmax = 0, total = w->gcost[g];

	if (n <= 1 || room <= 0)
		return 0;
	for (size_t i = lo; i < hi; i++) {
		if (w->r[i].cost < cmin)
			cmin = w->r[i].cost;
		if (w->r[i].cost > cmax)
			cmax = w->r[i].cost;
	}
	if (total <= room)
		return total - cmin;
	if (cmin == cmax) {
		int64_t k = room / cmin;

		return (k < (int64_t)n - 1 ? k : (int64_t)n - 1) * cmin;
	}
	/* Mixed costs: the best subset sum, exactly when small enough. */
	if (room <= 65536 && n <= 4096) {
		unsigned char *ok = calloc((size_t)room + 1, 1);
		int64_t bestsum = 0;

		if (ok != NULL) {
			ok[0] = 1;
			for (size_t i = lo; i < hi; i++)
				for (int64_t s = room; s >= (int64_t)w->r[i].cost; s--)
					if (ok[s - w->r[i].cost])
						ok[s] = 1;
			for (int64_t s = room; s >= 0 && bestsum == 0; s--)
				if (ok[s])
					bestsum = s;
			free(ok);
			return bestsum;
		}
	}
	/* Otherwise an upper bound: it can only hide a violation, never invent one. */
	return room < total - cmin ? room : total - cmin;
}

static int
check_fixed_pass(struct ctx *c, struct fw *w, const struct pinfo *p, uint32_t kid,
    size_t cap)
{
	int64_t W = p->window_ms, N = p->limit;
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], d[32], dw[32];

	for (size_t g = 0; g < w->G; g++)
		w->best[g] = INT64_MAX;
	w->nheap = 0;
	w->success = w->dropped = 0;
	if (fw_push(w, 0, w->gcost[0]) == -1)
		return -1;
	while (!w->success) {
		size_t dead_g = SIZE_MAX;
		int64_t dead_load = 0;

		while (w->nheap > 0 && !w->success) {
			struct fwst st = w->heap[0];
			int64_t e, load, room;
			size_t ge;

			w->heap[0] = w->heap[--w->nheap];
			fw_sift_down(w, 0);
			if (w->best[st.g] != st.load)
				continue;	/* stale, or already expanded */
			w->best[st.g] = INT64_MIN;
			e = w->gms[st.g] + W;
			ge = fw_lb(w, st.g + 1, e);
			load = st.load + w->P[ge] - w->P[st.g + 1];
			if (load > N) {
				if (dead_g == SIZE_MAX || st.g > dead_g ||
				    (st.g == dead_g && load < dead_load)) {
					dead_g = st.g;
					dead_load = load;
				}
				continue;
			}
			room = N - load;
			if (ge < w->G && w->gms[ge] == e) {
				/* The ms where the window ends: split its decisions. */
				if (w->gcost[ge] <= room &&
				    fw_push(w, ge + 1, ge + 1 < w->G ? w->gcost[ge + 1] : 0) == -1)
					return -1;
				if (fw_push(w, ge, w->gcost[ge] - fw_fit(w, ge, room)) == -1)
					return -1;
			} else if (fw_push(w, ge, ge < w->G ? w->gcost[ge] : 0) == -1)
				return -1;
			if (w->nheap > cap)
				fw_prune(w, cap);
		}
		if (w->success || dead_g == SIZE_MAX)	/* the latter cannot happen */
			break;
		/* Every reconstruction broke the promise: report the one that lasted longest. */
		snprintf(d, sizeof(d), "%lld", (long long)N);
		add(c, p, kid, "window", w->gms[dead_g], w->gms[dead_g] + W, dead_load, 1, d,
		    "window [%s, %s) (%s from its first decision) admitted %lld, limit %lld",
		    window_format_time(w->gms[dead_g], t1),
		    window_format_time(w->gms[dead_g] + W, t2),
		    window_format_duration(W, dw, sizeof(dw)), (long long)dead_load,
		    (long long)N);
		/* Go on as if that window had been full. */
		{
			size_t ge = fw_lb(w, dead_g + 1, w->gms[dead_g] + W);

			if (fw_push(w, ge, ge < w->G ? w->gcost[ge] : 0) == -1)
				return -1;
		}
	}
	return 0;
}

static void
check_fixed(struct ctx *c, const struct rec *r, size_t n, const struct pinfo *p,
    uint32_t kid)
{
	struct fw w = { 0 };
	size_t G = 0, before = c->v->nv;

	w.r = r;
	w.gms = malloc(n * sizeof(*w.gms));
	w.gcost = malloc(n * sizeof(*w.gcost));
	w.P = malloc((n + 1) * sizeof(*w.P));
	w.glo = malloc(n * sizeof(*w.glo));
	w.ghi = malloc(n * sizeof(*w.ghi));
	w.best = malloc(n * sizeof(*w.best));
	if (!w.gms || !w.gcost || !w.P || !w.glo || !w.ghi || !w.best)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		if (G == 0 || w.gms[G - 1] != r[i].ts) {
			w.gms[G] = r[i].ts;
			w.gcost[G] = 0;
			w.glo[G] = i;
			G++;
		}
		w.gcost[G - 1] += r[i].cost;
		w.ghi[G - 1] = i + 1;
	}
	w.G = G;
	w.P[0] = 0;
	for (size_t g = 0; g < G; g++)
		w.P[g + 1] = w.P[g] + w.gcost[g];

	/*
	 * First a narrow search (the usual case: one reconstruction fits);
	 * only if that finds a violation after cutting alternatives short,
	 * a wide one in its place, so that a reported violation is a real one.
	 * (A violation owns no memory: dropping the narrow pass's is a count.)
	 */
	if (check_fixed_pass(c, &w, p, kid, 16) == -1)
		goto oom;
	if (c->v->nv > before && w.dropped) {
		c->v->nv = before;
		if (check_fixed_pass(c, &w, p, kid, 1 << 20) == -1)
			goto oom;
		if (c->v->nv > before && w.dropped)
			c->v->approximate = 1;
	}
	goto out;
oom:
	c->oom = 1;
out:
	free(w.gms);
	free(w.gcost);
	free(w.P);
	free(w.glo);
	free(w.ghi);
	free(w.best);
	free(w.heap);
}

/*
 * An episode: consecutive points (ms or blocks) over the promise, reported
 * once with its worst point.
 */
struct episode {
	int		 open;
	int64_t		 decisions;
	int64_t		 first_ms, last_ms;
	int64_t		 worst_admitted;
	int64_t		 a_ms, b_ms;	/* the worst point's interval */
	i128		 worst;		/* check-specific: larger is worse */
	int64_t		 extra;		/* check-specific */
};

/*
 * rows more decisions over the promise, the last stamped last_ms; opens
 * the episode (at first_ms, its worst starting at worst) if none is open.
 */
static void
episode_extend(struct episode *e, int64_t first_ms, int64_t last_ms,
    int64_t rows, i128 worst)
{
	if (!e->open)
		*e = (struct episode){ .open = 1, .first_ms = first_ms,
		    .worst = worst };
	e->decisions += rows;
	e->last_ms = last_ms;
}

/*
 * sliding_log: any (t - W, t] admits at most limit. Taking every true time
 * as its ms stamp is a consistent choice, and under it an interval holds
 * the same decisions as the ms interval; two decisions stamped less than
 * W ms apart are less than W apart whatever their true times. So the check
 * on ms stamps is exact: decisions stamped within W - 1 ms of each other,
 * which is check_blocks with blocks of 1 ms.
 */
static void
log_flush(struct ctx *c, const struct pinfo *p, uint32_t kid, struct episode *e)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], t3[RLG_TIME_LEN], t4[RLG_TIME_LEN], d[32];
	char lim[32];

	if (!e->open)
		return;
	e->open = 0;
	snprintf(lim, sizeof(lim), "%lld", (long long)p->limit);
	add(c, p, kid, "interval", e->a_ms, e->b_ms, e->worst_admitted, e->decisions, lim,
	    "interval (%s - %s, %s] admitted %lld, limit %lld (%lld decision%s over "
	    "the limit from %s to %s)", window_format_time(e->b_ms - 1, t1),
	    window_format_duration(p->window_ms, d, sizeof(d)),
	    window_format_time(e->b_ms - 1, t2), (long long)e->worst_admitted,
	    (long long)p->limit, (long long)e->decisions, e->decisions == 1 ? "" : "s",
	    window_format_time(e->first_ms, t3), window_format_time(e->last_ms, t4));
}

/*
 * sliding_window: any n = W / P consecutive blocks [k P, (k + 1) P) admit at
 * most limit. Blocks start on whole ms, so a decision's block follows from
 * its ms stamp exactly: no slack.
 */
static void
blocks_flush(struct ctx *c, const struct pinfo *p, uint32_t kid, struct episode *e)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], t3[RLG_TIME_LEN], t4[RLG_TIME_LEN], d[32];
	char lim[32];

	if (!e->open)
		return;
	e->open = 0;
	snprintf(lim, sizeof(lim), "%lld", (long long)p->limit);
	add(c, p, kid, "blocks", e->a_ms, e->b_ms, e->worst_admitted, e->decisions, lim,
	    "blocks [%s, %s) (%lld of %s, precision from %s) admitted %lld, limit %lld "
	    "(%lld decision%s over the limit from %s to %s)",
	    window_format_time(e->a_ms, t1), window_format_time(e->b_ms, t2),
	    (long long)(p->window_ms / p->precision_ms),
	    window_format_duration(p->precision_ms, d, sizeof(d)), p->precision_from,
	    (long long)e->worst_admitted, (long long)p->limit, (long long)e->decisions,
	    e->decisions == 1 ? "" : "s", window_format_time(e->first_ms, t3),
	    window_format_time(e->last_ms, t4));
}

typedef void flush_fn(struct ctx *, const struct pinfo *, uint32_t, struct episode *);

/*
 * Any nb = W / P consecutive blocks of P ms admit at most limit; flush
 * reports an episode. sliding_window: P is the precision, flush
 * blocks_flush. sliding_log: P = 1, flush log_flush (a block is one ms, so
 * the nb blocks ending in ms t are the ms interval (t - W, t]).
 */
static void
check_blocks(struct ctx *c, const struct rec *r, size_t n, const struct pinfo *p,
    uint32_t kid, int64_t P, flush_fn *flush)
{
	struct episode e = { 0 };
	int64_t nb = p->window_ms / P, sum = 0;
	size_t i = 0, j = 0;

	if (nb < 1)
		nb = 1;
	while (j < n) {
		int64_t k = window_start(r[j].ts, P) / P, rows = 0, first = r[j].ts;

		for (; j < n && window_start(r[j].ts, P) / P == k; j++, rows++)
			sum += r[j].cost;
		for (; window_start(r[i].ts, P) / P <= k - nb; i++)
			sum -= r[i].cost;
		if (sum > p->limit) {
			episode_extend(&e, first, r[j - 1].ts, rows, 0);
			if (sum > e.worst_admitted) {
				e.worst_admitted = sum;
				e.a_ms = (k - nb + 1) * P;
				e.b_ms = (k + 1) * P;
			}
		} else
			flush(c, p, kid, &e);
	}
	flush(c, p, kid, &e);
}

/*
 * token_bucket and gcra: any interval of length d admits at most
 * burst + d * limit / W. Between decisions stamped a and b ms the true
 * interval is at most (b - a) ms + 999 us, so a violation is a run of
 * decisions whose cost exceeds burst + (b - a + 0.999) * limit / W. The run
 * that matters for each decision is found by simulating the bucket on the
 * ms stamps (tokens scaled by W in us, so everything is an integer) and
 * allowing it to go 999 us of refill below zero, not further.
 */
static void
bucket_flush(struct ctx *c, const struct pinfo *p, uint32_t kid, struct episode *e)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], t3[RLG_TIME_LEN], t4[RLG_TIME_LEN], d[32];
	int64_t span = e->b_ms - e->a_ms;
	double bound = (double)p->burst + ((double)span + 0.999) * (double)p->limit /
	    (double)p->window_ms;
	char lim[32];

	if (!e->open)
		return;
	e->open = 0;
	fmt_dec(bound, lim, sizeof(lim));
	add(c, p, kid, "bucket", e->a_ms, e->b_ms, e->worst_admitted, e->decisions, lim,
	    "from %s to %s (%lld ms) admitted %lld, the bucket allows %s (burst %lld "
	    "+ %lld.999 ms x %lld per %s) (%lld decision%s over it from %s to %s)",
	    window_format_time(e->a_ms, t1), window_format_time(e->b_ms, t2),
	    (long long)span, (long long)e->worst_admitted, lim, (long long)p->burst,
	    (long long)span, (long long)p->limit,
	    window_format_duration(p->window_ms, d, sizeof(d)), (long long)e->decisions,
	    e->decisions == 1 ? "" : "s", window_format_time(e->first_ms, t3),
	    window_format_time(e->last_ms, t4));
}

static void
check_bucket(struct ctx *c, const struct rec *r, size_t n, const struct pinfo *p,
    uint32_t kid)
{
	struct episode e = { 0 };
	i128 Wus = (i128)p->window_ms * 1000, full = (i128)p->burst * Wus;
	i128 tokens = full, floor_ = -(i128)999 * p->limit;
	int64_t prev = r[0].ts, S = 0;
	size_t a = 0;

	for (size_t b = 0; b < n; b++) {
		i128 refill = (i128)p->limit * 1000 * (r[b].ts - prev);

		if (tokens + refill >= full) {
			/* Full again: the worst run now starts here. */
			tokens = full;
			a = b;
			S = 0;
		} else
			tokens += refill;
		tokens -= (i128)r[b].cost * Wus;
		S += r[b].cost;
		prev = r[b].ts;
		if (tokens < floor_) {
			episode_extend(&e, r[b].ts, r[b].ts, 1, -tokens - 1);
			if (-tokens > e.worst) {
				e.worst = -tokens;
				e.worst_admitted = S;
				e.a_ms = r[a].ts;
				e.b_ms = r[b].ts;
			}
		} else
			bucket_flush(c, p, kid, &e);
	}
	bucket_flush(c, p, kid, &e);
}

/*
 * leaky_bucket: an admitted decision leaves at now + w (w its exact wait,
 * delay_ms = ceil(w)), at least cost x T after the one before it (T = W /
 * limit), and w <= burst x T. From the row, leave = ts_ms + delay_ms is the
 * true departure within (-1000, +999] us, so two departures stamped D ms
 * apart are less than D ms + 1999 us apart, and w > (delay_ms - 1) ms.
 */
static void
spacing_flush(struct ctx *c, const struct pinfo *p, uint32_t kid, struct episode *e)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], t3[RLG_TIME_LEN], d[32];
	double need = (double)e->worst_admitted * (double)p->window_ms / (double)p->limit;
	char lim[32];

	if (!e->open)
		return;
	e->open = 0;
	/* Cost units that may leave within the gap, with the 1999 us slack. */
	snprintf(lim, sizeof(lim), "%lld",
	    (long long)(((i128)(e->b_ms - e->a_ms) * 1000 + 1998) * p->limit /
	    ((i128)p->window_ms * 1000)));
	add(c, p, kid, "spacing", e->a_ms, e->b_ms, e->worst_admitted, e->decisions, lim,
	    "departures stamped %s and %s are %lld ms apart (under %lld.999 ms "
	    "however the ms were truncated), but the %lld cost unit%s leaving first "
	    "need %.3f ms at %lld per %s (%lld decision%s left too early, until %s)",
	    window_format_time(e->a_ms, t1), window_format_time(e->b_ms, t2),
	    (long long)(e->b_ms - e->a_ms), (long long)(e->b_ms - e->a_ms + 1),
	    (long long)e->worst_admitted, e->worst_admitted == 1 ? "" : "s", need,
	    (long long)p->limit, window_format_duration(p->window_ms, d, sizeof(d)),
	    (long long)e->decisions, e->decisions == 1 ? "" : "s",
	    window_format_time(e->last_ms, t3));
}

static void
wait_flush(struct ctx *c, const struct pinfo *p, uint32_t kid, struct episode *e)
{
	char t1[RLG_TIME_LEN], t2[RLG_TIME_LEN], d[32];
	double maxw = (double)p->burst * (double)p->window_ms / (double)p->limit;
	char lim[32];

	if (!e->open)
		return;
	e->open = 0;
	fmt_dec(maxw, lim, sizeof(lim));
	add(c, p, kid, "wait", e->a_ms, e->b_ms, e->worst_admitted, e->decisions, lim,
	    "admitted at %s with delay %lld ms, more than burst %lld x %s / %lld = %s ms "
	    "(%lld decision%s waited too long, until %s)", window_format_time(e->a_ms, t1),
	    (long long)e->extra, (long long)p->burst,
	    window_format_duration(p->window_ms, d, sizeof(d)), (long long)p->limit,
	    lim, (long long)e->decisions, e->decisions == 1 ? "" : "s",
	    window_format_time(e->last_ms, t2));
}

static int
cmp_rec_delay(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	if (a->delay != b->delay)
		return a->delay < b->delay ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static void
check_leaky(struct ctx *c, struct rec *r, size_t n, const struct pinfo *p,
    uint32_t kid)
{
	struct episode sp = { 0 }, wt = { 0 };
	i128 Wus = (i128)p->window_ms * 1000, N = p->limit;
	i128 zmin = 0, slack = 1999 * N;
	int64_t prefix = 0, prefix_amin = 0;
	size_t amin = 0;

	/* Inside one ms the arrival order is unknown: take the departure order. */
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i; j < n && r[j].ts == r[i].ts; j++)
			;
		if (j - i > 1)
			qsort(r + i, j - i, sizeof(*r), cmp_rec_delay);
	}
	for (size_t b = 0; b < n; b++) {
		int64_t leave = r[b].ts + r[b].delay;
		/* z = prefix cost x W - N x departure, in us: spacing needs z_b - z_a < slack. */
		i128 z = (i128)prefix * Wus - N * 1000 * leave;

		if (b > 0 && z - zmin >= slack) {
			episode_extend(&sp, r[b].ts, r[b].ts, 1, -1);
			/* The first pair: where the outlet first ran too fast. */
			if (sp.worst < 0) {
				sp.worst = z - zmin;
				sp.a_ms = r[amin].ts + r[amin].delay;
				sp.b_ms = leave;
				sp.worst_admitted = prefix - prefix_amin;
			}
		} else if (b > 0)
			spacing_flush(c, p, kid, &sp);
		if (b == 0 || z < zmin) {
			zmin = z;
			amin = b;
			prefix_amin = prefix;
		}
		prefix += r[b].cost;

		if ((i128)(r[b].delay - 1) * p->limit >= (i128)p->burst * p->window_ms &&
		    r[b].delay > 0) {
			episode_extend(&wt, r[b].ts, r[b].ts, 1, 0);
			if (r[b].delay > wt.extra) {
				wt.extra = r[b].delay;
				wt.a_ms = r[b].ts;
				wt.b_ms = r[b].ts + 1;
				wt.worst_admitted = r[b].cost;
			}
		} else
			wait_flush(c, p, kid, &wt);
	}
	spacing_flush(c, p, kid, &sp);
	wait_flush(c, p, kid, &wt);
}

static int
cmp_violation(const void *x, const void *y)
{
	const struct violation *a = x, *b = y;
	int c = strcmp(a->rule, b->rule);

	if (c == 0)
		c = strcmp(a->key ? a->key : "", b->key ? b->key : "");
	if (c == 0)
		c = (a->from_ms > b->from_ms) - (a->from_ms < b->from_ms);
	if (c == 0)
		c = strcmp(a->check, b->check);
	return c;
}

static int
cmp_rule(const void *x, const void *y)
{
	const struct verify_rule *a = x, *b = y;
	int c = strcmp(a->rule, b->rule);

	if (c == 0)
		c = strcmp(a->algorithm, b->algorithm);
	if (c == 0)
		c = (a->limit > b->limit) - (a->limit < b->limit);
	if (c == 0)
		c = (a->window_ms > b->window_ms) - (a->window_ms < b->window_ms);
	if (c == 0)
		c = (a->burst > b->burst) - (a->burst < b->burst);
	return c;
}

int
verify_check_run(struct ctx *c, struct rec *r, size_t n, const struct pinfo *p)
{
	switch (p->alg) {
	case RLG_FIXED_WINDOW:
		check_fixed(c, r, n, p, r->kid);
		return 0;
	case RLG_SLIDING_LOG:
		check_blocks(c, r, n, p, r->kid, 1, log_flush);
		return 0;
	case RLG_SLIDING_WINDOW:
		check_blocks(c, r, n, p, r->kid, p->precision_ms, blocks_flush);
		return 0;
	case RLG_TOKEN_BUCKET:
	case RLG_GCRA:
		check_bucket(c, r, n, p, r->kid);
		return 0;
	case RLG_LEAKY_BUCKET:
		check_leaky(c, r, n, p, r->kid);
		return 0;
	default:
		return -1;
	}
}

/* Checks the records in memory (sorted), a run of one key at a time. */
static int
check_records(struct ctx *c)
{
	struct priv *pv = c->p;
	struct verify *v = c->v;

	for (size_t i = 0, j; i < pv->n; i = j) {
		struct rec *r = &pv->recs[i];
		struct pinfo *p = &pv->pi[r->pid];
		size_t before = v->nv;

		/* A run of one key with one parameter set (a reload starts a new run). */
		for (j = i + 1; j < pv->n && pv->recs[j].kid == r->kid &&
		    pv->recs[j].pid == r->pid; j++)
			;
		if (p->last_kid != r->kid) {
			p->last_kid = r->kid;
			p->keys++;
		}
		p->admitted += (int64_t)(j - i);
		if (verify_check_run(c, r, j - i, p) == -1) {
			v->skipped += (int64_t)(j - i);
			p->admitted -= (int64_t)(j - i);
		}
		p->violations += (int64_t)(v->nv - before);
		if (c->oom)
			return -1;
	}
	return 0;
}

/*
 * All of a key's history: a window may open before f's time range. An
 * inferred block width comes from the denials (their retry times are block
 * boundaries), else the gateway's default. Rows admitted without a count
 * (reason redis_error) are counted per rule (unchecked) and, with strict,
 * replayed as if Redis had admitted them: whether the limit held from the
 * clients' point of view.
 */
int
verify_run(struct verify *v, struct rdbs *dbs, const struct filter *f,
    int64_t precision_ms, int strict, char *err, size_t errlen)
{
	struct priv *pv;
	struct ctx c = { 0 };

	if ((pv = calloc(1, sizeof(*pv))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	v->priv = pv;
	c.v = v;
	c.p = pv;
	c.f = f;
	c.strict = strict;
	v->strict = strict;
	if (verify_load(&c, dbs, precision_ms, err, errlen) == -1)
		return -1;
	if (pv->nparts == 0) {
		if (verify_sort_records(pv) == -1 || check_records(&c) == -1)
			goto oom;
	}
	for (size_t k = 0; k < pv->nparts; k++) {
		int rc = verify_load_part(pv, k, err, errlen);

		if (rc == -1)
			return -1;
		if (verify_sort_records(pv) == -1 || check_records(&c) == -1)
			goto oom;
	}
	v->keys = (int64_t)pv->keys.n;
	if ((v->rules = calloc(pv->npi + 1, sizeof(*v->rules))) == NULL)
		goto oom;
	for (size_t i = 0; i < pv->npi; i++) {
		struct pinfo *p = &pv->pi[i];

		v->admitted += p->admitted;
		v->unchecked += p->unchecked;
		v->rules[v->nrules++] = (struct verify_rule){ p->rule, p->algname,
		    p->limit, p->window_ms, p->burst, p->precision_ms,
		    p->precision_from, p->keys, p->admitted, p->violations,
		    p->unchecked };
	}
	qsort(v->rules, v->nrules, sizeof(*v->rules), cmp_rule);
	if (v->nv > 0)
		qsort(v->v, v->nv, sizeof(*v->v), cmp_violation);
	/* The records are not needed any more; the strings are. */
	free(pv->recs);
	pv->recs = NULL;
	free(pv->scratch);
	pv->scratch = NULL;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

void
verify_free(struct verify *v)
{
	struct priv *pv = v->priv;

	if (pv != NULL) {
		intern_free(&pv->keys);
		intern_free(&pv->params);
		free(pv->kcache);
		free(pv->pi);
		free(pv->recs);
		free(pv->scratch);
		for (size_t k = 0; k < pv->nparts; k++)
			if (pv->part[k] != NULL)
				fclose(pv->part[k]);
		free(pv->part);
		free(pv->partbuf);
		free(pv);
	}
	free(v->v);
	free(v->rules);
	memset(v, 0, sizeof(*v));
}
