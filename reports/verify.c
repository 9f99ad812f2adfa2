/*
 * verify: loads the admitted decisions of every database into one array,
 * groups them per (rule, key) and time, and checks each algorithm's promise
 * with exactly the slack that millisecond timestamps imply (see verify.h and
 * the man page). Not for throughput: see agg.c.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "intern.h"
#include "verify.h"
#include "verify_local.h"
#include "window.h"

typedef __int128 i128;

/* One admitted decision, as compact as the replay needs. */
struct rec {
	int64_t		 ts;	/* ms */
	uint32_t	 kid;	/* (rule, key) */
	uint32_t	 pid;	/* (rule, algorithm, limit, window, burst) */
	uint32_t	 seq;	/* load order: database, then id */
	uint32_t	 cost;
	int64_t		 delay;	/* ms, leaky_bucket */
};

/* A parameter set of one rule, with what the summary reports about it. */
struct pinfo {
	const char	*rule;
	const char	*algname;
	int		 alg;		/* enum rlg_algorithm, -1 unknown */
	int64_t		 limit, window_ms, burst;
	int64_t		 precision_ms;
	const char	*precision_from;
	int64_t		 keys, admitted, violations;
	int64_t		 unchecked;	/* redis_error rows admitted, in range */
	uint32_t	 last_kid;
	int64_t		 retry_gcd;	/* sliding_window: gcd of denials' retry times */
};

/* The parameters last seen for a key, and their id. */
struct kcache {
	const char	*alg;
	int64_t		 limit, window, burst;
	uint32_t	 pid;
};

struct priv {
	struct intern	 keys;
	struct kcache	*kcache;	/* by key id */
	size_t		 kcap;
	struct intern	 params;	/* bytes of a parameter set; id = pinfo index */
	struct pinfo	*pi;
	size_t		 npi, pcap;
	struct rec	*recs;		/* in memory: all, or one part at a time */
	size_t		 n, cap;
	uint64_t	 seq;		/* records loaded in all */
	FILE		**part;		/* spilled records, by kid % nparts */
	size_t		 nparts;	/* 0: all in memory */
};

/*
 * Records beyond this many bytes are spilled to temporary files, one per
 * part of the keys, and checked a part at a time: memory stays bounded
 * whatever the number of rows, time stays one pass plus a write and a read
 * of each record. Reading in key order through the (rule, key, ts_ms)
 * index instead would make every row a random lookup.
 */
#define PART_BYTES	(16u << 20)
#define MAX_PARTS	1024

struct ctx {
	struct verify	*v;
	struct priv	*p;
	const struct filter *f;
	int		 strict;	/* unchecked admissions replayed too */
	size_t		 vcap;
	int		 oom;
};

int64_t
verify_default_precision(int64_t window_ms)
{
	return conf_default_precision(window_ms);
}

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

/* The parameter set of a row, interned with its rule; NULL params: UINT32_MAX. */
static uint32_t
param_id(struct priv *pv, const char *rule, const char *alg, int64_t limit,
    int64_t window_ms, int64_t burst)
{
	char buf[1024];
	int len;
	uint32_t id;

	len = snprintf(buf, sizeof(buf), "%s%c%s%c%lld%c%lld%c%lld", rule, 0, alg, 0,
	    (long long)limit, 0, (long long)window_ms, 0, (long long)burst);
	if (len < 0 || (size_t)len >= sizeof(buf))
		len = sizeof(buf) - 1;
	if ((id = intern_id(&pv->params, buf, (size_t)len)) == RLG_INTERN_FAIL)
		return RLG_INTERN_FAIL;
	if (id == pv->npi) {
		struct pinfo *pi;
		const char *b = intern_bytes(&pv->params, id);

		if (pv->npi == pv->pcap) {
			size_t ncap = pv->pcap ? pv->pcap * 2 : 16;

			if ((pi = realloc(pv->pi, ncap * sizeof(*pi))) == NULL)
				return RLG_INTERN_FAIL;
			pv->pi = pi;
			pv->pcap = ncap;
		}
		pi = &pv->pi[pv->npi++];
		memset(pi, 0, sizeof(*pi));
		pi->rule = b;
		pi->algname = b + strlen(b) + 1;
		pi->alg = -1;
		for (int a = 0; a < RLG_ALGORITHM_COUNT; a++)
			if (strcmp(pi->algname, conf_algorithm_name(a)) == 0)
				pi->alg = a;
		pi->limit = limit;
		pi->window_ms = window_ms;
		pi->burst = burst;
		pi->last_kid = UINT32_MAX;
	}
	return id;
}

static int
grow_kcache(struct priv *pv, uint32_t kid)
{
	size_t ncap = pv->kcap ? pv->kcap : 1024;
	struct kcache *k;

	while (ncap <= kid)
		ncap *= 2;
	if ((k = realloc(pv->kcache, ncap * sizeof(*k))) == NULL)
		return -1;
	memset(k + pv->kcap, 0, (ncap - pv->kcap) * sizeof(*k));
	pv->kcache = k;
	pv->kcap = ncap;
	return 0;
}

static int
load_one(struct ctx *c, struct rdb *d, char *err, size_t errlen)
{
	struct priv *pv = c->p;
	struct filter f = *c->f;
	/*
	 * Denials come along only for sliding_window's precision (see
	 * infer_precision); everything else replays admissions.
	 */
	const char *last_rule = NULL, *last_key = NULL;
	static char lrule[256], lkey[1024];	/* local rows' names */
	struct kcache *kc;
	struct db_str rb = { 0 }, kb = { 0 };
	uint32_t kid = 0, pid = 0;
	sqlite3_stmt *st;
	int rc, ret = -1;

	/* The whole history: a window or a bucket may start before --since. */
	f.since_ms = INT64_MIN;
	f.until_ms = INT64_MAX;
	/* Admitted by on_error = allow (reason redis_error): counted by no
	 * limit. Counted here; replayed as admissions only with --strict. */
	if ((st = db_select(d, &f, "rule, key, algorithm, ts_ms, cost, "
	    "limit_value, window_ms, burst, delay_ms, allowed, retry_after_ms, "
	    "reason = 'redis_error', " VERIFY_LOCAL_PROCESS, "(reason = 'limit' "
	    "OR " VERIFY_LOCAL_REASON " OR (reason = 'redis_error' AND "
	    "allowed = 1)) AND rule IS NOT NULL", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *rule = db_column_str(st, 0, &rb);
		const char *key = db_column_str(st, 1, &kb);
		const char *proc = (const char *)sqlite3_column_text(st, 12);
		const char *alg = (const char *)sqlite3_column_text(st, 2);
		int64_t cost, limit, window, burst, delay;
		int allowed = sqlite3_column_int(st, 9) != 0;
		int unchecked = sqlite3_column_int(st, 11) != 0;
		int64_t ts = sqlite3_column_int64(st, 3);
		struct rec *x, rec;

		if (!allowed && (alg == NULL || strcmp(alg, "sliding_window") != 0))
			continue;
		if (alg == NULL || sqlite3_column_type(st, 5) == SQLITE_NULL ||
		    sqlite3_column_type(st, 6) == SQLITE_NULL) {
			c->v->skipped += allowed && (!unchecked || c->strict);
			continue;
		}
		cost = sqlite3_column_type(st, 4) == SQLITE_NULL ? 1 : sqlite3_column_int64(st, 4);
		limit = sqlite3_column_int64(st, 5);
		window = sqlite3_column_int64(st, 6);
		burst = sqlite3_column_type(st, 7) == SQLITE_NULL ? limit :
		    sqlite3_column_int64(st, 7);
		delay = sqlite3_column_type(st, 8) == SQLITE_NULL ? 0 :
		    sqlite3_column_int64(st, 8);
		if (cost < 0 || cost > UINT32_MAX || limit < 1 || window < 1 ||
		    burst < 0 || delay < 0 || limit > (1LL << 40) || burst > (1LL << 40) ||
		    window > (1LL << 40)) {
			c->v->skipped += allowed && (!unchecked || c->strict);
			continue;
		}
		/* on_error = local: per process, apart from Redis's. */
		if (proc != NULL && rule != NULL) {
			verify_local_names(rule, key, proc, lrule,
			    sizeof(lrule), lkey, sizeof(lkey));
			rule = lrule;
			key = lkey;
		}
		/* Rows of one key and one rule come in runs: skip the hashes then. */
		if (last_rule == NULL || strcmp(rule, last_rule) != 0 ||
		    (key == NULL) != (last_key == NULL) ||
		    (key != NULL && strcmp(key, last_key) != 0)) {
			if ((kid = intern_pair(&pv->keys, rule, key)) == RLG_INTERN_FAIL)
				goto oom;
			intern_pair_get(&pv->keys, kid, &last_rule, &last_key);
			if (kid >= pv->kcap && grow_kcache(pv, kid) == -1)
				goto oom;
		}
		/* A key keeps its parameters until a reload: cache them per key. */
		kc = &pv->kcache[kid];
		if (kc->alg == NULL || strcmp(alg, kc->alg) != 0 || limit != kc->limit ||
		    window != kc->window || burst != kc->burst) {
			if ((pid = param_id(pv, rule, alg, limit, window, burst)) ==
			    RLG_INTERN_FAIL)
				goto oom;
			*kc = (struct kcache){ pv->pi[pid].algname, limit, window, burst, pid };
		}
		pid = kc->pid;
		if (unchecked) {
			if (ts >= c->f->since_ms && ts < c->f->until_ms)
				pv->pi[pid].unchecked++;
			if (!c->strict)
				continue;
		}
		if (!allowed) {
			int64_t retry = sqlite3_column_int64(st, 10);

			if (retry > 0)
				pv->pi[pid].retry_gcd = conf_gcd(
				    pv->pi[pid].retry_gcd,
				    sqlite3_column_int64(st, 3) + retry);
			continue;
		}
		if (pv->seq >= UINT32_MAX) {
			snprintf(err, errlen, "more than %u admitted decisions: verify "
			    "fewer at once (-r RULE)", UINT32_MAX);
			goto out;
		}
		rec = (struct rec){ sqlite3_column_int64(st, 3), kid, pid,
		    (uint32_t)pv->seq++, (uint32_t)cost, delay };
		if (pv->nparts > 0) {
			if (fwrite(&rec, sizeof(rec), 1, pv->part[kid % pv->nparts]) != 1) {
				snprintf(err, errlen, "cannot write a temporary file: %s",
				    strerror(errno));
				goto out;
			}
			continue;
		}
		if (pv->n == pv->cap) {
			size_t ncap = pv->cap ? pv->cap * 2 : 65536;

			if ((x = realloc(pv->recs, ncap * sizeof(*x))) == NULL)
				goto oom;
			pv->recs = x;
			pv->cap = ncap;
		}
		pv->recs[pv->n++] = rec;
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s: cannot read: %s", d->path, sqlite3_errmsg(d->db));
		goto out;
	}
	ret = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	sqlite3_finalize(st);
	free(rb.buf);
	free(kb.buf);
	return ret;
}

/*
 * The block width of a sliding_window rule. Each denial's retry time is a
 * block boundary (ts_ms + retry_after_ms exactly, as blocks start on whole
 * ms), so the precision divides their gcd; gcd(that, window) is then the
 * precision or a multiple of it that still divides the window, and runs of
 * such coarser blocks are runs of true blocks: checking them never reports
 * a false violation. Without denials: the gateway's default.
 */
static void
infer_precision(struct pinfo *pi)
{
	if (pi->retry_gcd != 0) {
		pi->precision_ms = conf_gcd(pi->retry_gcd, pi->window_ms);
		pi->precision_from = "denials";
	} else {
		pi->precision_ms = verify_default_precision(pi->window_ms);
		pi->precision_from = "default";
	}
}

static int
cmp_rec_time(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static int
cmp_rec_key_time(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	if (a->kid != b->kid)
		return a->kid < b->kid ? -1 : 1;
	return cmp_rec_time(x, y);
}

/*
 * Groups the records by key (stable: load order), then orders each key by
 * time. A part of the keys is sorted whole: a count per key of every key
 * would cost each part the number of keys.
 */
static int
sort_records(struct priv *pv)
{
	size_t nk = pv->keys.n, *start;
	struct rec *out;

	if (pv->n == 0)
		return 0;
	if (pv->nparts > 0) {
		qsort(pv->recs, pv->n, sizeof(*pv->recs), cmp_rec_key_time);
		return 0;
	}
	if ((start = calloc(nk + 1, sizeof(*start))) == NULL)
		return -1;
	if ((out = malloc(pv->n * sizeof(*out))) == NULL) {
		free(start);
		return -1;
	}
	for (size_t i = 0; i < pv->n; i++)
		start[pv->recs[i].kid + 1]++;
	for (size_t k = 0; k < nk; k++)
		start[k + 1] += start[k];
	for (size_t i = 0; i < pv->n; i++)
		out[start[pv->recs[i].kid]++] = pv->recs[i];
	free(pv->recs);
	pv->recs = out;
	pv->cap = pv->n;
	free(start);
	for (size_t i = 0, j; i < pv->n; i = j) {
		int sorted = 1;

		for (j = i + 1; j < pv->n && pv->recs[j].kid == pv->recs[i].kid; j++)
			if (cmp_rec_time(&pv->recs[j - 1], &pv->recs[j]) > 0)
				sorted = 0;
		if (!sorted)
			qsort(pv->recs + i, j - i, sizeof(*pv->recs), cmp_rec_time);
	}
	return 0;
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
		switch (p->alg) {
		case RLG_FIXED_WINDOW:
			check_fixed(c, r, j - i, p, r->kid);
			break;
		case RLG_SLIDING_LOG:
			check_blocks(c, r, j - i, p, r->kid, 1, log_flush);
			break;
		case RLG_SLIDING_WINDOW:
			check_blocks(c, r, j - i, p, r->kid, p->precision_ms, blocks_flush);
			break;
		case RLG_TOKEN_BUCKET:
		case RLG_GCRA:
			check_bucket(c, r, j - i, p, r->kid);
			break;
		case RLG_LEAKY_BUCKET:
			check_leaky(c, r, j - i, p, r->kid);
			break;
		default:
			v->skipped += (int64_t)(j - i);
			p->admitted -= (int64_t)(j - i);
			break;
		}
		p->violations += (int64_t)(v->nv - before);
		if (c->oom)
			return -1;
	}
	return 0;
}

/* Reads part k's spilled records into memory (and closes its file). */
static int
load_part(struct priv *pv, size_t k, char *err, size_t errlen)
{
	FILE *f = pv->part[k];
	long end;

	pv->part[k] = NULL;
	pv->n = 0;
	if (fflush(f) == EOF || (end = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) == -1)
		goto fail;
	pv->n = (size_t)end / sizeof(struct rec);
	if (pv->n > pv->cap) {
		struct rec *x = realloc(pv->recs, pv->n * sizeof(*x));

		if (x == NULL) {
			fclose(f);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		pv->recs = x;
		pv->cap = pv->n;
	}
	if (pv->n > 0 && fread(pv->recs, sizeof(struct rec), pv->n, f) != pv->n)
		goto fail;
	fclose(f);
	return 0;
fail:
	snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
	fclose(f);
	return -1;
}

/*
 * Spills records to nparts temporary files when the databases hold more
 * rows than PART_BYTES of records (max(id) over-counts: it is an estimate).
 */
static int
plan_parts(struct priv *pv, struct rdbs *dbs, char *err, size_t errlen)
{
	uint64_t rows = 0;

	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_stmt *st = db_prepare(&dbs->v[i], "SELECT max(id) FROM decisions",
		    err, errlen);

		if (st == NULL)
			return -1;
		if (sqlite3_step(st) == SQLITE_ROW)
			rows += (uint64_t)sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (rows * sizeof(struct rec) <= PART_BYTES)
		return 0;
	pv->nparts = (size_t)((rows * sizeof(struct rec) + PART_BYTES - 1) / PART_BYTES);
	if (pv->nparts > MAX_PARTS)
		pv->nparts = MAX_PARTS;
	if ((pv->part = calloc(pv->nparts, sizeof(*pv->part))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < pv->nparts; k++)
		if ((pv->part[k] = tmpfile()) == NULL) {
			snprintf(err, errlen, "cannot create a temporary file: %s",
			    strerror(errno));
			return -1;
		}
	return 0;
}

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
	if (plan_parts(pv, dbs, err, errlen) == -1)
		return -1;
	for (size_t i = 0; i < dbs->n; i++)
		if (load_one(&c, &dbs->v[i], err, errlen) == -1)
			return -1;
	for (size_t i = 0; i < pv->npi; i++) {
		if (pv->pi[i].alg != RLG_SLIDING_WINDOW)
			continue;
		if (precision_ms > 0) {
			pv->pi[i].precision_ms = precision_ms;
			pv->pi[i].precision_from = "--precision";
		} else
			infer_precision(&pv->pi[i]);
	}
	if (pv->nparts == 0) {
		if (sort_records(pv) == -1 || check_records(&c) == -1)
			goto oom;
	}
	for (size_t k = 0; k < pv->nparts; k++) {
		int rc = load_part(pv, k, err, errlen);

		if (rc == -1)
			return -1;
		if (sort_records(pv) == -1 || check_records(&c) == -1)
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
		for (size_t k = 0; k < pv->nparts; k++)
			if (pv->part[k] != NULL)
				fclose(pv->part[k]);
		free(pv->part);
		free(pv);
	}
	free(v->v);
	free(v->rules);
	memset(v, 0, sizeof(*v));
}
