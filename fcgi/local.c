/*
 * local: the in-memory stand-in for Redis while it cannot answer
 * (on_error = local): a table of keys, their hashing and the share of the
 * limit; the decisions are the C twin's of the Lua (algo.c), on that
 * share, with the host's clock. One fixed table per process behind one
 * mutex; no allocation. It does not hand its counts back to Redis when
 * Redis answers again: each side enforces its own share (see local.h).
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "algo.h"
#include "fnv.h"
#include "local.h"

#define PROBES	16

/* A key's state: the twin's, with RLG_LOCAL_LOG entries of its own. */
struct slot {
	uint64_t		 h;		/* rule name and key; 0: free */
	long long		 idle_us;	/* from then on the state is empty */
	enum rlg_algorithm	 alg;		/* the state's */
	struct algo_state	 st;
	struct algo_entry	 e[RLG_LOCAL_LOG];
};

static struct slot	 table[RLG_LOCAL_SLOTS];
static pthread_mutex_t	 table_lock = PTHREAD_MUTEX_INITIALIZER;

long long
local_share(long long limit, long long num, long long den)
{
	return (long long)((__int128)limit * num / den);
}

static uint64_t
hash(const char *name, const char *key, size_t len)
{
	uint64_t h = fnv_add(fnv_sep(fnv_add(FNV_OFFSET, name, strlen(name))),
	    key, len);

	return h == 0 ? 1 : h;
}

/* s as a fresh key h of algorithm alg. */
static void
slot_reset(struct slot *s, uint64_t h, enum rlg_algorithm alg)
{
	s->h = h;
	s->idle_us = LLONG_MIN;
	s->alg = alg;
	algo_state_init(&s->st, s->e, RLG_LOCAL_LOG);
}

/* The slot of h, fresh when new; NULL when the probed slots are all live. */
static struct slot *
find(uint64_t h, enum rlg_algorithm alg, long long now)
{
	struct slot *s, *spare = NULL;
	size_t i, at = (size_t)(h % RLG_LOCAL_SLOTS);

	for (i = 0; i < PROBES; i++) {
		s = &table[(at + i) % RLG_LOCAL_SLOTS];
		if (s->h == h) {
			/* The rule changed algorithm (a reload): another
			 * algorithm's state is none, as the Lua replaces it. */
			if (s->alg != alg)
				slot_reset(s, h, alg);
			return s;
		}
		if (spare == NULL && (s->h == 0 || s->idle_us <= now))
			spare = s;
	}
	if (spare != NULL)
		slot_reset(spare, h, alg);
	return spare;
}

/*
 * v's fields: answered = 1, by_local = 1, allowed, counted (= allowed: the
 * local state counts what it admits, even when another rule of the request
 * denies it: less admitted, never more), remaining, limit, window_ms,
 * burst, reset_ms, retry_after_ms, delay_ms, now_us (now_ms x 1000). A key
 * not yet in the table takes a free slot or one whose state is idle again.
 */
void
local_decide(const struct match *m, long long num, long long den,
    long long now_ms, struct verdict *v)
{
	const struct rule *ru = m->rule;
	long long lim = local_share(ru->limit, num, den);
	long long burst = local_share(ru->burst > 0 ? ru->burst : ru->limit,
	    num, den);
	long long now = now_ms * 1000, r[ALGO_NFIELDS];
	int has_burst = conf_algorithm_has_burst(ru->algorithm);
	struct algo_params p;
	struct algo_decision d;
	struct slot *s;

	memset(v, 0, sizeof(*v));
	v->answered = 1;
	v->by_local = 1;
	v->limit = lim;
	v->window_ms = ru->window_ms;
	v->burst = has_burst ? burst : lim;
	v->now_us = now;
	/* A share the Lua would refuse (it rounds to 0, or below the cost)
	 * admits nothing: every request of it waits a window. */
	v->retry_after_ms = ru->window_ms;
	if (algo_params(&p, ru->algorithm, m->cost, lim, ru->window_ms,
	    has_burst ? burst : RLG_PARAM_UNSET, ru->precision_ms > 0 ?
	    ru->precision_ms : RLG_PARAM_UNSET, NULL, 0) == -1)
		return;
	pthread_mutex_lock(&table_lock);
	s = find(hash(ru->name, m->key, m->key_len), ru->algorithm, now);
	if (s == NULL) {		/* full of live keys: deny */
		v->retry_after_ms = 1000;
		pthread_mutex_unlock(&table_lock);
		return;
	}
	algo_check(&p, &s->st, now, &d);
	if (d.allowed) {
		algo_commit(&p, &s->st, now, &d);
		s->idle_us = algo_idle_us(&p, &s->st);
	}
	pthread_mutex_unlock(&table_lock);
	algo_reply(&p, &d, 1, now, r);
	v->allowed = (int)r[RLG_REPLY_ALLOWED];
	v->counted = v->allowed;
	v->remaining = r[RLG_REPLY_REMAINING];
	v->reset_ms = r[RLG_REPLY_RESET_MS];
	v->retry_after_ms = r[RLG_REPLY_RETRY_AFTER_MS];
	v->delay_ms = r[RLG_REPLY_DELAY_MS];
}

void
local_reset(void)
{
	pthread_mutex_lock(&table_lock);
	memset(table, 0, sizeof(table));
	pthread_mutex_unlock(&table_lock);
}
