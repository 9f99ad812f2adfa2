/*
 * algo: the six algorithms of lua/ in C, formula for formula (each
 * function below names the Lua it follows), for the callers that cannot
 * ask Redis (algo.h). The Lua's state as parsed values; where the Lua
 * reads a state written with other parameters in floating point (a
 * fraction of another denominator), this does the same double arithmetic.
 * Not here: the promises' checks (reports/verify.c, independent of both).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"

typedef __int128 i128;

/* floor and ceiling of a / b, b > 0 (the Lua's fdiv, cdiv). Operands of
 * 64 bits divide in 64 bits, the same quotient and remainder: a 128-bit
 * division is a library call, and most of what the twin costs. */
static long long
floor_div(i128 a, i128 b)
{
	i128 q;

	if (a >= LLONG_MIN && a <= LLONG_MAX && b > 0 && b <= LLONG_MAX) {
		long long x = (long long)a, y = (long long)b, r = x / y;

		return x % y != 0 && x < 0 ? r - 1 : r;
	}
	q = a / b;

	if (a % b != 0 && a < 0)
		q--;
	return (long long)q;
}

static long long
ceil_div(i128 a, i128 b)
{
	return -floor_div(-a, b);
}

static long long
gcd(long long x, long long y)
{
	while (y > 0) {
		long long t = x % y;

		x = y;
		y = t;
	}
	return x;
}

static int __attribute__((format(printf, 3, 4)))
fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* The Lua's arg_int range check of a given value. */
static int
in_range(const char *name, long long v, long long lo, long long hi, char *err,
    size_t len)
{
	if (v < lo)
		return fail(err, len, "%s must be at least %lld, got %lld", name, lo, v);
	if (v > hi)
		return fail(err, len, "%s must be at most %lld, got %lld", name, hi, v);
	return 0;
}

/* prelude.lua params(), the precision part. */
static int
params_precision(struct algo_params *p, long long precision_ms, char *err,
    size_t len)
{
	long long w = p->window_ms;

	if (precision_ms == RLG_PARAM_UNSET) {
		if (w % RLG_DEFAULT_BLOCKS != 0)
			return fail(err, len, "precision_ms is empty and window_ms "
			    "%lld is not a multiple of %lld: give a precision that "
			    "divides the window", w, RLG_DEFAULT_BLOCKS);
		precision_ms = w / RLG_DEFAULT_BLOCKS;
	} else if (in_range("precision_ms", precision_ms, 1, w, err, len) == -1)
		return -1;
	if (w % precision_ms != 0)
		return fail(err, len, "precision_ms %lld does not divide "
		    "window_ms %lld: blocks must tile the window", precision_ms, w);
	if (w / precision_ms > RLG_MAX_BLOCKS)
		return fail(err, len, "window_ms %lld / precision_ms %lld is more "
		    "than %lld blocks: use a coarser precision", w, precision_ms,
		    RLG_MAX_BLOCKS);
	p->precision_ms = precision_ms;
	p->nblocks = w / precision_ms;
	p->block_us = precision_ms * 1000;
	return 0;
}

/* prelude.lua params(), the burst part (token_bucket, gcra: a bucket;
 * leaky_bucket: a queue). */
static int
params_burst(struct algo_params *p, long long burst, char *err, size_t len)
{
	int queue = p->alg == RLG_LEAKY_BUCKET;
	long long g;

	if (burst == RLG_PARAM_UNSET)
		burst = p->limit;
	else if (in_range("burst", burst, queue ? 0 : 1, RLG_MAX_COUNT, err,
	    len) == -1)
		return -1;
	p->burst = burst;
	if (!queue && p->cost > burst)
		return fail(err, len, "cost %lld is above burst %lld: such a "
		    "request could never be admitted", p->cost, burst);
	g = gcd(p->window_us, p->limit);
	p->scale = p->window_us / g;
	p->rate = p->limit / g;
	if (!queue && (i128)burst * p->scale >= RLG_EXACT)
		return fail(err, len, "burst %lld is too large for limit %lld per "
		    "%lld ms: burst * window_us / gcd(limit, window_us) must stay "
		    "below 2^53 (use a shorter window or a limit sharing more "
		    "factors with it)", burst, p->limit, p->window_ms);
	if (queue && (i128)(burst + p->cost) * p->scale >= RLG_EXACT_MAX)
		return fail(err, len, "burst %lld and cost %lld are too large for "
		    "limit %lld per %lld ms: (burst + cost) * window_us / "
		    "gcd(limit, window_us) must stay below 2^52 (use a shorter "
		    "window or a limit sharing more factors with it)", burst,
		    p->cost, p->limit, p->window_ms);
	return 0;
}

/*
 * The order: cost (1..RLG_MAX_COUNT), limit, window_ms, precision_ms
 * (sliding_window), burst (buckets), cost against limit or burst,
 * exactness. Each parameter is ignored by the algorithms without it.
 */
int
algo_params(struct algo_params *p, enum rlg_algorithm alg, long long cost,
    long long limit, long long window_ms, long long burst,
    long long precision_ms, char *err, size_t errlen)
{
	long long limit_max = alg == RLG_SLIDING_LOG ? RLG_MAX_LOG_LIMIT :
	    RLG_MAX_COUNT;

	memset(p, 0, sizeof(*p));
	p->alg = alg;
	p->cost = cost;
	p->limit = limit;
	p->window_ms = window_ms;
	if ((unsigned)alg >= RLG_ALGORITHM_COUNT)
		return fail(err, errlen, "unknown algorithm %d", (int)alg);
	if (in_range("cost", cost, 1, RLG_MAX_COUNT, err, errlen) == -1 ||
	    in_range("limit", limit, 1, limit_max, err, errlen) == -1 ||
	    in_range("window_ms", window_ms, 1, RLG_MAX_WINDOW_MS, err,
	    errlen) == -1)
		return -1;
	p->window_us = window_ms * 1000;
	if (alg == RLG_SLIDING_WINDOW &&
	    params_precision(p, precision_ms, err, errlen) == -1)
		return -1;
	if (alg == RLG_FIXED_WINDOW || alg == RLG_SLIDING_WINDOW ||
	    alg == RLG_SLIDING_LOG) {
		if (cost > limit)
			return fail(err, errlen, "cost %lld is above limit %lld: such "
			    "a request could never be admitted", cost, limit);
		return 0;
	}
	return params_burst(p, burst, err, errlen);
}

/*
 * With fewer entries (a bounded table) a commit that finds them all live
 * merges its cost into a later entry than its own, or moves the newest
 * entry to now: the cost then leaves the window later.
 */
size_t
algo_entries(const struct algo_params *p)
{
	/* A log entry holds at least 1 of the limit; blocks after the
	 * current one (a clock that ran back) stay up to a window ahead. */
	if (p->alg == RLG_SLIDING_LOG)
		return (size_t)p->limit;
	if (p->alg == RLG_SLIDING_WINDOW)
		return (size_t)(2 * p->nblocks);
	return 0;
}

void
algo_state_init(struct algo_state *s, struct algo_entry *e, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->e = e;
	s->cap = cap;
}

int
algo_state_full(const struct algo_state *s)
{
	return s->len >= s->cap;
}

/* The i-th entry, oldest first. */
static struct algo_entry *
ent(const struct algo_state *s, size_t i)
{
	return &s->e[(s->head + i) % s->cap];
}

void
algo_state_grow(struct algo_state *s, struct algo_entry *e, size_t cap)
{
	size_t i;

	for (i = 0; i < s->len; i++)
		e[i] = *ent(s, i);
	s->e = e;
	s->cap = cap;
	s->head = 0;
}

/*
 * Stored tokens q + r/den as units of p's scale (token_bucket.lua
 * parse_tokens): exact with the same denominator; else rounded down in
 * the Lua's double arithmetic.
 */
static i128
tokens_units(const struct algo_params *p, const struct algo_state *s)
{
	i128 u = (i128)s->q * p->scale;

	if (s->r == 0)
		return u;
	if (s->den == p->scale)
		return u + s->r;
	return u + (i128)floor((double)s->r / (double)s->den * (double)p->scale);
}

/*
 * Ticks (1/tpu us) from now until the stored time, 0 when past or none,
 * at most cap (prelude.lua ticks_ahead).
 */
static i128
ticks_ahead(const struct algo_state *s, long long now, long long tpu, i128 cap)
{
	long long r = s->r;
	i128 w;

	if (!s->has)
		return 0;
	if (r != 0 && s->den != tpu)
		r = (long long)ceil((double)r / (double)s->den * (double)tpu);
	if (s->t < now || (s->t == now && r == 0))
		return 0;
	if (s->t - now > ceil_div(cap, tpu))
		return cap;
	w = (i128)(s->t - now) * tpu + r;
	return w < cap ? w : cap;
}

long long
algo_idle_us(const struct algo_params *p, const struct algo_state *s)
{
	i128 units, cap;

	switch (p->alg) {
	case RLG_SLIDING_LOG:
		return s->len ? ent(s, s->len - 1)->at + p->window_us : LLONG_MIN;
	case RLG_SLIDING_WINDOW:
		return s->len ? (ent(s, s->len - 1)->at + p->nblocks) *
		    p->block_us : LLONG_MIN;
	default:
		break;
	}
	if (!s->has)
		return LLONG_MIN;
	switch (p->alg) {
	case RLG_FIXED_WINDOW:
		return s->t + p->window_us;
	case RLG_TOKEN_BUCKET:
		cap = (i128)p->burst * p->scale;
		units = tokens_units(p, s);
		if (units >= cap)
			return s->t;
		if (units < 0)
			units = 0;
		return s->t + ceil_div(cap - units, p->rate);
	default:	/* gcra, leaky_bucket: the stored time, passed */
		return s->r != 0 ? s->t + 1 : s->t;
	}
}

static void
verdict(struct algo_decision *d, int allowed, long long remaining,
    long long reset_ms, long long retry_ms, long long delay_ms,
    long long kept_remaining, long long kept_reset_ms)
{
	d->allowed = allowed;
	d->remaining = remaining;
	d->reset_ms = reset_ms;
	d->retry_after_ms = retry_ms;
	d->delay_ms = delay_ms;
	d->kept_remaining = kept_remaining;
	d->kept_reset_ms = kept_reset_ms;
}

/* fixed_window.lua A.check; d->t, d->q: the window's start and count. */
static void
check_fixed(const struct algo_params *p, const struct algo_state *s,
    long long now, struct algo_decision *d)
{
	long long start = s->t, count = s->q, reset_ms;

	if (!s->has || now >= start + p->window_us) {
		start = now;
		count = 0;
	}
	reset_ms = ceil_div((i128)start + p->window_us - now, 1000);
	d->t = start;
	d->q = count;
	if (count + p->cost <= p->limit)
		verdict(d, 1, p->limit - count - p->cost, reset_ms, 0, 0,
		    p->limit - count, count > 0 ? reset_ms : 0);
	else
		verdict(d, 0, p->limit - count > 0 ? p->limit - count : 0,
		    reset_ms, reset_ms, 0, p->limit - count,
		    count > 0 ? reset_ms : 0);
}

/* token_bucket.lua A.check; d->x: the units left, d->t: their time. */
static void
check_token(const struct algo_params *p, const struct algo_state *s,
    long long now, struct algo_decision *d)
{
	i128 cap = (i128)p->burst * p->scale, units = cap, need, left;
	long long ts = now, t;

	if (s->has) {
		units = tokens_units(p, s);
		ts = s->t;
	}
	if (units > cap)
		units = cap;
	else if (units < 0)
		units = 0;
	/* Refill from ts to now; time running backwards refills nothing. */
	t = ts;
	if (now > ts) {
		if (cap - units > 0) {
			if ((i128)(now - ts) >= ceil_div(cap - units, p->rate))
				units = cap;
			else
				units += (i128)(now - ts) * p->rate;
		}
		t = now;
	}
	need = (i128)p->cost * p->scale;
	d->t = t;
	verdict(d, 0, floor_div(units, p->scale), ceil_div((i128)(t - now) +
	    ceil_div(cap - units, p->rate), 1000), 0, 0, floor_div(units, p->scale),
	    ceil_div((i128)(t - now) + ceil_div(cap - units, p->rate), 1000));
	if (units < need) {
		d->retry_after_ms = ceil_div((i128)(t - now) + ceil_div(need - units,
		    p->rate), 1000);
		return;
	}
	left = units - need;
	d->x = left;
	d->allowed = 1;
	d->remaining = floor_div(left, p->scale);
	d->reset_ms = ceil_div((i128)(t - now) + ceil_div(cap - left, p->rate), 1000);
}

/* gcra.lua A.check; d->x: the ticks ahead after the admission. */
static void
check_gcra(const struct algo_params *p, const struct algo_state *s,
    long long now, struct algo_decision *d)
{
	i128 tau = (i128)p->burst * p->scale, per_ms = (i128)p->rate * 1000;
	i128 need = (i128)p->cost * p->scale, w;

	w = ticks_ahead(s, now, p->rate, tau);
	verdict(d, 0, floor_div(tau - w, p->scale), ceil_div(w, per_ms), 0, 0,
	    floor_div(tau - w, p->scale), ceil_div(w, per_ms));
	if (w + need > tau) {
		d->retry_after_ms = ceil_div(w + need - tau, per_ms);
		return;
	}
	w += need;
	d->x = w;
	d->allowed = 1;
	d->remaining = floor_div(tau - w, p->scale);
	d->reset_ms = ceil_div(w, per_ms);
}

/* leaky_bucket.lua A.check; d->x: the ticks until the queue drains. */
static void
check_leaky(const struct algo_params *p, const struct algo_state *s,
    long long now, struct algo_decision *d)
{
	i128 max_wait = (i128)p->burst * p->scale;
	i128 per_ms = (i128)p->rate * 1000, w, q;
	long long kept_remaining = 0, kept_reset_ms, rem;

	w = ticks_ahead(s, now, p->rate, RLG_EXACT_MAX);
	if (w <= max_wait) {
		kept_remaining = floor_div(max_wait - w, p->scale) + 1;
		if (kept_remaining < 0)
			kept_remaining = 0;
	}
	kept_reset_ms = ceil_div(w, per_ms);
	if (w > max_wait) {
		verdict(d, 0, 0, kept_reset_ms, ceil_div(w - max_wait, per_ms), 0,
		    kept_remaining, kept_reset_ms);
		return;
	}
	q = w + (i128)p->cost * p->scale;
	d->x = q;
	rem = floor_div(max_wait - q, p->scale) + 1;
	verdict(d, 1, rem > 0 ? rem : 0, ceil_div(q, per_ms), 0, kept_reset_ms,
	    kept_remaining, kept_reset_ms);
}

/* The entries in [lo, hi) (oldest first) whose at lies in [from, to]. */
static void
live_range(const struct algo_state *s, long long from, long long to,
    size_t *lo, size_t *hi)
{
	size_t i = 0, j = s->len;

	while (i < j && ent(s, i)->at < from)
		i++;
	while (j > i && ent(s, j - 1)->at > to)
		j--;
	*lo = i;
	*hi = j;
}

/* The at of the entry in [lo, hi) where the costs from lo reach need. */
static long long
reaching(const struct algo_state *s, size_t lo, size_t hi, long long need)
{
	long long freed = 0;
	size_t i;

	for (i = lo; i < hi; i++) {
		freed += ent(s, i)->cost;
		if (freed >= need)
			return ent(s, i)->at;
	}
	return ent(s, hi - 1)->at;	/* not reached: need <= used */
}

/* sliding_log.lua A.check: admissions in (now - window, now]. */
static void
check_log(const struct algo_params *p, const struct algo_state *s,
    long long now, struct algo_decision *d)
{
	long long w = p->window_us, used = 0, last, kept_reset_ms = 0;
	size_t lo, hi, i;

	live_range(s, now - w + 1, LLONG_MAX, &lo, &hi);
	for (i = lo; i < hi; i++)
		used += ent(s, i)->cost;
	last = used > 0 ? ent(s, hi - 1)->at : LLONG_MIN;
	if (used > 0)
		kept_reset_ms = ceil_div((i128)last + w - now, 1000);
	if (used + p->cost <= p->limit) {
		if (last < now)
			last = now;
		verdict(d, 1, p->limit - used - p->cost,
		    ceil_div((i128)last + w - now, 1000), 0, 0, p->limit - used,
		    kept_reset_ms);
		return;
	}
	/* Denied: the need-th oldest admission in the window leaves first. */
	verdict(d, 0, p->limit - used > 0 ? p->limit - used : 0, kept_reset_ms,
	    ceil_div((i128)reaching(s, lo, hi, used + p->cost - p->limit) + w - now,
	    1000), 0, p->limit - used, kept_reset_ms);
}

/* sliding_window.lua A.check: block j counts while first <= j <=
 * current + nblocks (blocks ahead: a clock that ran back). */
static void
check_window(const struct algo_params *p, const struct algo_state *s,
    long long now, struct algo_decision *d)
{
	long long n = p->nblocks, b = p->block_us, current = floor_div(now, b);
	long long used = 0, newest, kept_reset_ms = 0;
	size_t lo, hi, i;

	live_range(s, current - n + 1, current + n, &lo, &hi);
	for (i = lo; i < hi; i++)
		used += ent(s, i)->cost;
	newest = hi > lo ? ent(s, hi - 1)->at : LLONG_MIN;
	/* Block j drops out at the start of block j + n. */
	if (hi > lo)
		kept_reset_ms = ceil_div((i128)(newest + n) * b - now, 1000);
	if (used + p->cost <= p->limit) {
		if (newest < current)
			newest = current;
		verdict(d, 1, p->limit - used - p->cost,
		    ceil_div((i128)(newest + n) * b - now, 1000), 0, 0,
		    p->limit - used, kept_reset_ms);
		return;
	}
	verdict(d, 0, p->limit - used > 0 ? p->limit - used : 0, kept_reset_ms,
	    ceil_div((i128)(reaching(s, lo, hi, used + p->cost - p->limit) + n) *
	    b - now, 1000), 0, p->limit - used, kept_reset_ms);
}

void
algo_check(const struct algo_params *p, const struct algo_state *s,
    long long now_us, struct algo_decision *d)
{
	memset(d, 0, sizeof(*d));
	switch (p->alg) {
	case RLG_FIXED_WINDOW:
		check_fixed(p, s, now_us, d);
		break;
	case RLG_SLIDING_WINDOW:
		check_window(p, s, now_us, d);
		break;
	case RLG_SLIDING_LOG:
		check_log(p, s, now_us, d);
		break;
	case RLG_TOKEN_BUCKET:
		check_token(p, s, now_us, d);
		break;
	case RLG_GCRA:
		check_gcra(p, s, now_us, d);
		break;
	case RLG_LEAKY_BUCKET:
	default:
		check_leaky(p, s, now_us, d);
		break;
	}
}

/*
 * Adds cost at `at` to the sorted entries: into the entry at `at`, else a
 * new one in its place. When every entry is taken (a bounded array), into
 * the first entry after `at`, else the newest entry moves to `at`: that
 * cost then leaves later than it would (stricter, never looser).
 */
static void
entries_add(struct algo_state *s, long long at, long long cost)
{
	size_t i = s->len, k;

	while (i > 0 && ent(s, i - 1)->at >= at)
		i--;
	if (i < s->len && ent(s, i)->at == at) {
		ent(s, i)->cost += cost;
		return;
	}
	if (s->len == s->cap) {
		if (s->cap == 0)
			return;
		if (i < s->len) {
			ent(s, i)->cost += cost;
		} else {
			ent(s, s->len - 1)->at = at;
			ent(s, s->len - 1)->cost += cost;
		}
		return;
	}
	for (k = s->len; k > i; k--)
		*ent(s, k) = *ent(s, k - 1);
	ent(s, i)->at = at;
	ent(s, i)->cost = cost;
	s->len++;
}

/* Drops the entries outside [from, to] (the Lua deletes them on
 * admission). */
static void
entries_keep(struct algo_state *s, long long from, long long to)
{
	size_t lo, hi;

	live_range(s, from, to, &lo, &hi);
	s->head = s->cap ? (s->head + lo) % s->cap : 0;
	s->len = hi - lo;
}

/* Writes one time now + ticks/tpu as the Lua's format_at does. */
static void
store_at(struct algo_state *s, long long now, i128 ticks, long long tpu)
{
	long long us = floor_div(ticks, tpu);

	s->has = 1;
	s->t = now + us;
	s->r = (long long)(ticks - (i128)us * tpu);
	s->den = tpu;
}

void
algo_commit(const struct algo_params *p, struct algo_state *s,
    long long now_us, const struct algo_decision *d)
{
	long long q;

	switch (p->alg) {
	case RLG_FIXED_WINDOW:
		s->has = 1;
		s->t = d->t;
		s->q = d->q + p->cost;
		break;
	case RLG_SLIDING_WINDOW: {
		long long cur = floor_div(now_us, p->block_us);

		entries_keep(s, cur - p->nblocks + 1, cur + p->nblocks);
		entries_add(s, cur, p->cost);
		break;
	}
	case RLG_SLIDING_LOG:
		entries_keep(s, now_us - p->window_us + 1, LLONG_MAX);
		entries_add(s, now_us, p->cost);
		break;
	case RLG_TOKEN_BUCKET:
		q = floor_div(d->x, p->scale);
		s->has = 1;
		s->t = d->t;
		s->q = q;
		s->r = (long long)(d->x - (i128)q * p->scale);
		s->den = p->scale;
		break;
	case RLG_GCRA:
	case RLG_LEAKY_BUCKET:
	default:
		store_at(s, now_us, d->x, p->rate);
		break;
	}
}

void
algo_reply(const struct algo_params *p, const struct algo_decision *d,
    int counted, long long now_us, long long v[ALGO_NFIELDS])
{
	memset(v, 0, ALGO_NFIELDS * sizeof(*v));
	v[RLG_REPLY_LIMIT] = p->limit;
	v[RLG_REPLY_NOW_US] = now_us;
	if (d == NULL) {	/* unlimited */
		v[RLG_REPLY_ALLOWED] = 1;
		v[RLG_REPLY_REMAINING] = p->limit;
		return;
	}
	v[RLG_REPLY_ALLOWED] = d->allowed;
	if (d->allowed && !counted) {
		v[RLG_REPLY_REMAINING] = d->kept_remaining;
		v[RLG_REPLY_RESET_MS] = d->kept_reset_ms;
		return;
	}
	v[RLG_REPLY_REMAINING] = d->remaining;
	v[RLG_REPLY_RESET_MS] = d->reset_ms;
	v[RLG_REPLY_RETRY_AFTER_MS] = d->retry_after_ms;
	v[RLG_REPLY_DELAY_MS] = d->delay_ms;
}

void
algo_decide(const struct algo_params *p, struct algo_state *s,
    long long now_us, long long v[ALGO_NFIELDS])
{
	struct algo_decision d;

	algo_check(p, s, now_us, &d);
	if (d.allowed)
		algo_commit(p, s, now_us, &d);
	algo_reply(p, &d, 1, now_us, v);
}
