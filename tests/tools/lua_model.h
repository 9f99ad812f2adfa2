/*
 * lua_model.h: lua_check's model of the six algorithms, apart from its
 * checks: each algorithm as written in DESIGN section 5, in exact 128-bit
 * rational arithmetic, independent of the Lua scripts' representation of
 * their state. It says what a reply should be; it talks to no Redis and
 * checks nothing (tests/tools/lua_check.c does).
 */
#ifndef RLG_LUA_MODEL_H
#define RLG_LUA_MODEL_H

#include <stddef.h>

typedef __int128 i128;

enum alg { FIXED, SWINDOW, SLOG, TOKEN, GCRA, LEAKY, NALG };

/* Reply fields, in the scripts' order. */
enum { ALLOWED, REMAINING, LIMIT, RESET, RETRY, NOW, DELAY, NFIELDS };

#define EMPTY	(-1)	/* an argument sent as "" */

struct params {
	long long	limit, window_ms, burst, precision_ms;	/* EMPTY allowed for the last two */
};

/* Floor and ceiling of a / b (b != 0), exactly. */
static inline long long
floor_div(i128 a, i128 b)
{
	i128 q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return (long long)q;
}

static inline long long
ceil_div(i128 a, i128 b)
{
	return -floor_div(-a, b);
}

struct event {
	long long	t, cost;
};

struct model {
	enum alg	alg;
	long long	L, W, Wu, B, P, Pu, n;	/* B: burst resolved; n: blocks */
	int		has;
	long long	start, count;		/* fixed_window */
	i128		tokens;			/* token_bucket: tokens * Wu */
	long long	ts;
	i128		tat;			/* gcra, leaky: time * L */
	struct event	*ev;			/* sliding_log, sliding_window */
	size_t		nev, cap;
};

/* A fresh model of algorithm a with parameters p; model_free frees it. */
void	model_init(struct model *m, enum alg a, const struct params *p);
void	model_free(struct model *m);
/*
 * Fills v[NFIELDS] with the reply a request of cost at now (us) should get,
 * and updates the state when it is admitted. Exits on out of memory.
 */
void	model_decide(struct model *m, long long now, long long cost, long long *v);

#endif
