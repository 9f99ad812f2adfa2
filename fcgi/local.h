/*
 * local: the outage stand-in for Redis (on_error = local). While a rule's
 * Redis node cannot answer, its requests are decided here, in this
 * process's memory, by the rule's own algorithm on a share of its limit:
 * limit x local_share and burst x local_share, rounded down. Redis's Lua
 * (the lua/ files) is the reference; this only holds the line until Redis
 * answers again. Scope: one process (its event-loop threads share one
 * table behind one mutex); processes and hosts do not share it, so an
 * operator with N gateway processes in all sets local_share = 1/N.
 * The decisions are the C twin's of the Lua (algo.h); the clock is the
 * host's CLOCK_REALTIME in whole ms (Redis TIME is what cannot be reached).
 */
#ifndef RLG_LOCAL_H
#define RLG_LOCAL_H

#include "conf.h"
#include "limiter.h"
#include "rule.h"

/* Keys the table holds; a full table denies new keys (see local_decide). */
#define RLG_LOCAL_SLOTS		4096
/* sliding_log and sliding_window keep at most this many entries a key
 * (times, blocks): a key that needs more (algo_entries()) counts its cost
 * in a later entry than its own, so that it leaves the window later (less
 * admitted, never more; algo.h). Keys are told apart by a 64-bit hash of
 * rule name and key: two that collide share one state (less admitted,
 * never more). */
#define RLG_LOCAL_LOG		64

/* limit x num / den rounded down (0 when it rounds to 0: every request of
 * the rule is then denied locally). */
long long	 local_share(long long limit, long long num, long long den);

/*
 * Decides match m (rule, key, cost) at now_ms on local share num/den and
 * fills v as Redis would (answered, by_local, counted = allowed, the share
 * as limit and burst); denied when the table is full of live keys. Thread
 * safe (one mutex, taken only while Redis cannot answer). No allocation.
 */
void		 local_decide(const struct match *m, long long num,
		    long long den, long long now_ms, struct verdict *v);

/* Forgets every key (tests). */
void		 local_reset(void);

#endif
