/*
 * clock: the gateway's two clocks in whole units. Monotonic for timeouts,
 * back-off and latencies; the wall clock only for what people read (audit
 * rows when Redis did not decide, log lines, status pages). And a sleep
 * that a signal does not cut short.
 */
#ifndef RLG_CLOCK_H
#define RLG_CLOCK_H

#include <errno.h>
#include <time.h>

static inline long long
clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline long long
mono_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}

static inline long long
mono_ms(void)
{
	return mono_us() / 1000;
}

static inline long long
wall_ms(void)
{
	return clock_us(CLOCK_REALTIME) / 1000;
}

static inline void
sleep_ms(long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
	    (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

#endif
