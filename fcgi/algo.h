/*
 * algo: the one C twin of the six algorithms of lua/ (the Lua in Redis is
 * the reference): the same arithmetic and units (now in us, windows in
 * ms, exact integers, __int128 where a product needs it), the same checks
 * of the arguments and the same reply {allowed, remaining, limit,
 * reset_ms, retry_after_ms, now_us, delay_ms}. A key's state is a struct
 * the caller owns (with the entries sliding_log and sliding_window keep,
 * in an array the caller gives); nothing is allocated. A decision is a
 * check, which reads the state and writes nothing, then, when the caller's
 * request is admitted by all its rules, a commit (lua/prelude.lua's spec).
 * Not here: Redis, keys, TTLs, overrides, undo tokens, clocks (callers').
 * Used by the local limiter (local.c), gen_audit, lua_check and
 * rlgate-report --what-if; tests/it/it_twin.sh checks it against the Lua.
 * Thread safety: none needed (no globals); a state is the caller's to lock.
 */
#ifndef RLG_ALGO_H
#define RLG_ALGO_H

#include <stddef.h>

#include "conf_values.h"

/* The reply: the first fields of the Lua's REPLY (facts.h's
 * RLG_REPLY_*), allowed to delay_ms, those a decision fills. */
#define ALGO_NFIELDS	RLG_REPLY_WINDOW_MS

/* The arguments of one decision, checked, and what they imply. */
struct algo_params {
	enum rlg_algorithm	 alg;
	long long		 cost, limit, window_ms;
	long long		 burst;		/* 0 for the algorithms without one */
	long long		 precision_ms;	/* 0 but for sliding_window */
	long long		 window_us;
	long long		 scale, rate;	/* buckets: a token is scale units,
						 * rate units come per us */
	long long		 nblocks, block_us; /* sliding_window */
};

/*
 * Checks the arguments as the Lua's params() does, in its order; burst and
 * precision_ms RLG_PARAM_UNSET when empty (the Lua's defaults). Returns 0
 * with *p filled, or -1 with the Lua's sentence (without "rlgate: ") in err
 * (errlen bytes; err may be NULL). Thread safe.
 */
int		 algo_params(struct algo_params *p, enum rlg_algorithm alg,
		    long long cost, long long limit, long long window_ms,
		    long long burst, long long precision_ms, char *err,
		    size_t errlen);

/* One entry of sliding_log (at: a time in us, cost admitted then) or of
 * sliding_window (at: a block index, cost counted in it). */
struct algo_entry {
	long long	 at, cost;
};

/*
 * A key's state; all zero but e and cap is no state (a missing key). The
 * fields are the Lua's stored state, parsed: fixed_window {t = start,
 * q = count}; token_bucket {t = ts, tokens q + r/den}; gcra and
 * leaky_bucket {the time t + r/den us}; sliding_* entries e[head..] in
 * a ring of cap, len of them, sorted by at.
 */
struct algo_state {
	int			 has;
	long long		 t, q, r, den;
	struct algo_entry	*e;
	size_t			 cap, head, len;
};

/*
 * The entries a key of p may hold at once (0 for the algorithms without
 * entries): with that many every decision is exact; with fewer, stricter,
 * never looser. A caller that grows the state (algo_state_grow) whenever
 * algo_state_full() before a check is exact from any size.
 */
size_t		 algo_entries(const struct algo_params *p);

/* s as no state, with entries e[cap] (NULL, 0: none). */
void		 algo_state_init(struct algo_state *s, struct algo_entry *e,
		    size_t cap);
/* 1 when every entry is taken. */
int		 algo_state_full(const struct algo_state *s);
/* Moves s's entries to e[cap] (cap >= s->len); the old array is the
 * caller's to free. */
void		 algo_state_grow(struct algo_state *s, struct algo_entry *e,
		    size_t cap);

/*
 * The time (us) from which s is as good as no state for p: a decision at
 * or after it sees a missing key (the time its Lua key's TTL ends, to
 * the us). LLONG_MIN when s holds nothing.
 */
long long	 algo_idle_us(const struct algo_params *p,
		    const struct algo_state *s);

/* A decision: the Lua's d (verdict()), and what the commit writes. */
struct algo_decision {
	int		 allowed;
	long long	 remaining, reset_ms, retry_after_ms, delay_ms;
	long long	 kept_remaining, kept_reset_ms; /* the state as it is */
	long long	 t, q;		/* what commit writes */
	__int128	 x;
};

/* Decides a request of p->cost at now_us on s; writes only d. */
void		 algo_check(const struct algo_params *p,
		    const struct algo_state *s, long long now_us,
		    struct algo_decision *d);

/* Counts the admission d (allowed, from algo_check on s at now_us with
 * p, s unchanged since) into s. */
void		 algo_commit(const struct algo_params *p, struct algo_state *s,
		    long long now_us, const struct algo_decision *d);

/*
 * The reply of d into v[ALGO_NFIELDS], as the Lua's row: counted 0 for an
 * admitting rule of a request that was not admitted (it shows the state
 * as it is, no delay); d NULL for an unlimited override (admitted,
 * remaining = limit).
 */
void		 algo_reply(const struct algo_params *p,
		    const struct algo_decision *d, int counted, long long now_us,
		    long long v[ALGO_NFIELDS]);

/* check, then commit when allowed: a rule on its own (LIB_<algorithm>). */
void		 algo_decide(const struct algo_params *p, struct algo_state *s,
		    long long now_us, long long v[ALGO_NFIELDS]);

#endif
