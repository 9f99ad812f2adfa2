/*
 * policy: the scheduling policies rlgate's own threads switch between. The
 * event loops wait for work at SCHED_BATCH and serve at SCHED_OTHER; the
 * audit writer idles at SCHED_IDLE until rows pile up. They switch only
 * where the process was started at SCHED_OTHER: a policy given at start
 * (chrt, systemd's CPUSchedulingPolicy=) is the operator's, and every
 * thread keeps it.
 */
#ifndef RLG_POLICY_H
#define RLG_POLICY_H

#include <pthread.h>
#include <sched.h>

/* Sets thread t's policy, at static priority 0 (all but the real-time
 * ones). Returns 0 or an errno value. */
static inline int
policy_set(pthread_t t, int policy)
{
	struct sched_param sp = { 0 };

	return pthread_setschedparam(t, policy, &sp);
}

/* The calling thread's policy, SCHED_RESET_ON_FORK left out. Threads
 * inherit their creator's, so at start it is the one given to rlgate. */
static inline int
policy_now(void)
{
	return sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
}

/* Whether rlgate's threads may switch policies: none was given at start. */
static inline int
policy_ours(void)
{
	return policy_now() == SCHED_OTHER;
}

static inline const char *
policy_name(int policy)
{
	switch (policy) {
	case SCHED_OTHER:
		return "SCHED_OTHER";
	case SCHED_BATCH:
		return "SCHED_BATCH";
	case SCHED_IDLE:
		return "SCHED_IDLE";
	case SCHED_FIFO:
		return "SCHED_FIFO";
	case SCHED_RR:
		return "SCHED_RR";
	default:
		return "(unknown)";
	}
}

#endif
