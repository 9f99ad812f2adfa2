/*
 * local: the in-memory stand-in for Redis while it cannot answer
 * (on_error = local), the six algorithms on a share of the limit. Redis's
 * Lua library (lua/ *.lua files, shared/DESIGN.md section 5) is the reference:
 * this file repeats its decisions for the outage, and nothing else. Time
 * is CLOCK_REALTIME in whole ms, so every quantity below is an exact
 * integer (ticks of 1/limit ms where a rate needs them, in __int128).
 * One fixed table per process behind one mutex; no allocation. It does
 * not hand its counts back to Redis when Redis answers again: each side
 * enforces its own share (see local.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fnv.h"
#include "local.h"

#define PROBES	16

typedef __int128 big;

struct slot {
	uint64_t	 h;		/* rule name and key; 0: free */
	long long	 idle_ms;	/* from then on the state is empty */
	long long	 a, b;		/* fixed_window: start, count */
	big		 x;		/* buckets: units, or tat in ticks */
	long long	 t[RLG_LOCAL_LOG]; /* sliding_log: times (ring);
					 * sliding_window: block ids */
	long long	 c[RLG_LOCAL_LOG]; /* sliding_window: counts */
	int		 n, head;	/* sliding_log: entries, oldest */
};

static struct slot	 table[RLG_LOCAL_SLOTS];
static pthread_mutex_t	 table_lock = PTHREAD_MUTEX_INITIALIZER;

long long
local_share(long long limit, long long num, long long den)
{
	return (long long)((big)limit * num / den);
}

static long long
cdiv(big a, big b)
{
	return a <= 0 ? 0 : (long long)((a + b - 1) / b);
}

static uint64_t
hash(const char *name, const char *key, size_t len)
{
	uint64_t h = fnv_add(fnv_sep(fnv_add(FNV_OFFSET, name, strlen(name))),
	    key, len);

	return h == 0 ? 1 : h;
}

/* The slot of h, fresh when new; NULL when the probed slots are all live. */
static struct slot *
find(uint64_t h, long long now)
{
	struct slot *s, *spare = NULL;
	size_t i, at = (size_t)(h % RLG_LOCAL_SLOTS);

	for (i = 0; i < PROBES; i++) {
		s = &table[(at + i) % RLG_LOCAL_SLOTS];
		if (s->h == h)
			return s;
		if (spare == NULL && (s->h == 0 || s->idle_ms <= now))
			spare = s;
	}
	if (spare != NULL) {
		memset(spare, 0, sizeof(*spare));
		spare->h = h;
		spare->idle_ms = now;
	}
	return spare;
}

static void
fixed_window(struct slot *s, long long lim, long long win, long long cost,
    long long now, struct verdict *v)
{
	if (s->idle_ms <= now) {	/* the previous window closed */
		s->a = now;
		s->b = 0;
	}
	v->reset_ms = s->a + win - now;
	if (s->b + cost > lim) {
		v->remaining = lim - s->b > 0 ? lim - s->b : 0;
		v->retry_after_ms = v->reset_ms;
		return;
	}
	v->allowed = 1;
	s->b += cost;
	v->remaining = lim - s->b;
	s->idle_ms = s->a + win;
}

/* token_bucket and gcra (the same decisions): units of 1/(window ms) of a
 * token, lim of them come back each ms. The state is the deficit x below
 * a full bucket at time a. */
static void
bucket(struct slot *s, long long lim, long long win, long long burst,
    long long cost, long long now, struct verdict *v)
{
	big cap = (big)burst * win, need = (big)cost * win, d, u;

	d = s->x - (big)(now - s->a) * lim;
	if (d < 0)
		d = 0;
	u = cap - d;
	if (lim == 0 || u < need) {
		v->remaining = (long long)(u / win);
		v->reset_ms = lim ? cdiv(d, lim) : 0;
		v->retry_after_ms = lim && need <= cap ?
		    cdiv(need - u, lim) : win;
		return;
	}
	v->allowed = 1;
	u -= need;
	v->remaining = (long long)(u / win);
	v->reset_ms = cdiv(cap - u, lim);
	s->x = cap - u;
	s->a = now;
	s->idle_ms = now + v->reset_ms;
}

/* The queue drains at tat x, in ticks of 1/lim ms; a request waits
 * cost x win ticks. */
static void
leaky_bucket(struct slot *s, long long lim, long long win, long long burst,
    long long cost, long long now, struct verdict *v)
{
	big max_wait = (big)burst * win, w, q;

	w = s->x - (big)now * lim;	/* the queue ahead, in ticks */
	if (w < 0)
		w = 0;
	v->reset_ms = cdiv(w, lim);
	if (lim == 0 || w > max_wait) {
		v->remaining = 0;
		v->retry_after_ms = lim ? cdiv(w - max_wait, lim) : win;
		return;
	}
	v->allowed = 1;
	q = w + (big)cost * win;
	v->delay_ms = v->reset_ms;
	v->remaining = max_wait >= q ? (long long)((max_wait - q) / win) + 1 :
	    0;
	v->reset_ms = cdiv(q, lim);
	s->x = (big)now * lim + q;
	s->idle_ms = now + v->reset_ms;
}

static void
sliding_log(struct slot *s, long long lim, long long win, long long cost,
    long long now, struct verdict *v)
{
	long long i;

	if (lim > RLG_LOCAL_LOG)
		lim = RLG_LOCAL_LOG;
	while (s->n > 0 && s->t[s->head] <= now - win) {
		s->head = (s->head + 1) % RLG_LOCAL_LOG;
		s->n--;
	}
	v->reset_ms = s->n > 0 ? s->t[(s->head + s->n - 1) % RLG_LOCAL_LOG] +
	    win - now : 0;
	if (s->n + cost > lim) {
		v->remaining = lim - s->n > 0 ? lim - s->n : 0;
		/* until enough of the oldest leave (t + win <= now') */
		v->retry_after_ms = cost > lim ? win : s->t[(s->head +
		    (s->n + cost - lim) - 1) % RLG_LOCAL_LOG] + win - now;
		return;
	}
	v->allowed = 1;
	for (i = 0; i < cost; i++)
		s->t[(s->head + s->n++) % RLG_LOCAL_LOG] = now;
	v->remaining = lim - s->n;
	v->reset_ms = win;
	s->idle_ms = now + win;
}

/* Blocks of prec ms; the current one and the nb - 1 before it count. */
static void
sliding_window(struct slot *s, long long lim, long long win,
    long long prec, long long cost, long long now, struct verdict *v)
{
	long long nb = win / prec, cur = now / prec, sum = 0, b, j;

	if (nb < 1 || nb > RLG_LOCAL_LOG) {
		/* more blocks than kept: the log, stricter (any window of
		 * blocks lies within one interval of win) */
		sliding_log(s, lim, win, cost, now, v);
		return;
	}
	for (b = cur - nb + 1; b <= cur; b++) {
		j = b % RLG_LOCAL_LOG;
		if (s->t[j] == b)
			sum += s->c[j];
	}
	v->reset_ms = (cur + 1) * prec - now;
	if (sum + cost > lim) {
		/* until enough of the oldest blocks drop out */
		long long need = sum + cost - lim, gone = 0;

		v->remaining = lim - sum > 0 ? lim - sum : 0;
		v->retry_after_ms = win;
		for (b = cur - nb + 1; b <= cur; b++) {
			j = b % RLG_LOCAL_LOG;
			if (s->t[j] == b)
				gone += s->c[j];
			if (gone >= need) {
				v->retry_after_ms = (b + nb) * prec - now;
				break;
			}
		}
		return;
	}
	v->allowed = 1;
	j = cur % RLG_LOCAL_LOG;
	if (s->t[j] != cur) {
		s->t[j] = cur;
		s->c[j] = 0;
	}
	s->c[j] += cost;
	v->remaining = lim - sum - cost;
	s->idle_ms = (cur + nb) * prec;
}

void
local_decide(const struct match *m, long long num, long long den,
    long long now_ms, struct verdict *v)
{
	const struct rule *ru = m->rule;
	long long lim = local_share(ru->limit, num, den);
	long long burst = local_share(ru->burst > 0 ? ru->burst : ru->limit,
	    num, den);
	long long win = ru->window_ms, cost = m->cost;
	struct slot *s;

	memset(v, 0, sizeof(*v));
	v->answered = 1;
	v->by_local = 1;
	v->limit = lim;
	v->window_ms = win;
	v->burst = conf_algorithm_has_burst(ru->algorithm) ? burst : lim;
	v->now_us = now_ms * 1000;
	pthread_mutex_lock(&table_lock);
	s = find(hash(ru->name, m->key, m->key_len), now_ms);
	if (s == NULL) {		/* full of live keys: deny */
		v->retry_after_ms = 1000;
		pthread_mutex_unlock(&table_lock);
		return;
	}
	switch (ru->algorithm) {
	case RLG_FIXED_WINDOW:
		fixed_window(s, lim, win, cost, now_ms, v);
		break;
	case RLG_SLIDING_WINDOW:
		sliding_window(s, lim, win, ru->precision_ms, cost, now_ms, v);
		break;
	case RLG_SLIDING_LOG:
		sliding_log(s, lim, win, cost, now_ms, v);
		break;
	case RLG_TOKEN_BUCKET:
	case RLG_GCRA:
		bucket(s, lim, win, burst, cost, now_ms, v);
		break;
	case RLG_LEAKY_BUCKET:
	default:
		leaky_bucket(s, lim, win, burst, cost, now_ms, v);
		break;
	}
	pthread_mutex_unlock(&table_lock);
	v->counted = v->allowed;
}

void
local_reset(void)
{
	pthread_mutex_lock(&table_lock);
	memset(table, 0, sizeof(table));
	pthread_mutex_unlock(&table_lock);
}
