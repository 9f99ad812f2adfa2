/*
 * Unit tests for loop, the generic event loop: timers run in the order
 * they are due (ties in the order added), each once; the before-sleep
 * hook runs once a turn and before the wait (a timer it adds for now runs
 * that turn); a descriptor's proc is called with what it is ready for; a
 * descriptor forgotten during a turn gets none of that turn's events.
 * Real pipes, no clock assertions beyond "due".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "loop.h"

static char	fired[16];
static size_t	nfired;

static void
mark(struct loop *l, void *arg)
{
	(void)l;
	fired[nfired++] = *(const char *)arg;
}

static void
test_timers_in_order(void **state)
{
	static const char a = 'a', b = 'b', c = 'c', d = 'd', e = 'e';
	struct loop *l;
	long long now = mono_us();
	int turns;

	(void)state;
	nfired = 0;
	assert_non_null(l = loop_new());
	assert_int_equal(loop_timer(l, now + 30000, mark, (void *)&c), 0);
	assert_int_equal(loop_timer(l, now + 10000, mark, (void *)&a), 0);
	assert_int_equal(loop_timer(l, now + 20000, mark, (void *)&b), 0);
	assert_int_equal(loop_timer(l, now + 30000, mark, (void *)&d), 0);
	assert_int_equal(loop_timer(l, now - 1, mark, (void *)&e), 0);
	assert_int_equal(loop_timers(l), 5);
	for (turns = 0; loop_timers(l) > 0 && turns < 1000; turns++)
		assert_true(loop_turn(l, -1) >= 0);
	assert_int_equal(nfired, 5);
	assert_memory_equal(fired, "eabcd", 5);
	/* Each once: nothing more to run. */
	assert_int_equal(loop_turn(l, 0), 0);
	assert_int_equal(nfired, 5);
	loop_free(l);
}

struct hooks {
	int	 before, after, turns;
	int	 add_timer;	/* before-sleep adds a timer due now */
	int	 wfd;		/* before-sleep writes a byte here (>= 0) */
};

static void
before(struct loop *l, void *arg)
{
	static const char t = 't';
	struct hooks *h = arg;

	/* Once a turn, and before the after-sleep hook of that turn. */
	assert_int_equal(h->before, h->after);
	h->before++;
	if (h->add_timer) {
		h->add_timer = 0;
		assert_int_equal(loop_timer(l, mono_us(), mark, (void *)&t),
		    0);
	}
	if (h->wfd >= 0) {
		assert_int_equal(write(h->wfd, "x", 1), 1);
		h->wfd = -1;
	}
}

static void
after(struct loop *l, void *arg)
{
	struct hooks *h = arg;

	(void)l;
	h->after++;
	assert_int_equal(h->before, h->after);
}

static void
test_before_sleep_once_a_turn(void **state)
{
	struct hooks h = { 0, 0, 0, 1, -1 };
	struct loop *l;
	int i;

	(void)state;
	nfired = 0;
	assert_non_null(l = loop_new());
	loop_before_sleep(l, before, &h);
	loop_after_sleep(l, after, &h);
	/* The timer the hook adds is due now: the turn does not sleep (a
	 * bound as a guard) but runs it. */
	assert_int_equal(loop_turn(l, 1000), 0);
	assert_int_equal(nfired, 1);
	assert_int_equal(fired[0], 't');
	for (i = 0; i < 4; i++)
		assert_int_equal(loop_turn(l, 0), 0);
	assert_int_equal(h.before, 5);
	assert_int_equal(h.after, 5);
	/* Without a hook: the turn still runs (the after-sleep one). */
	loop_before_sleep(l, NULL, NULL);
	h.before++;
	assert_int_equal(loop_turn(l, 0), 0);
	assert_int_equal(h.before, 6);
	assert_int_equal(h.after, 6);
	loop_free(l);
}

static void
on_byte(struct loop *l, struct loop_fd *f, unsigned ready)
{
	char ch;

	(void)l;
	(void)ready;
	assert_int_equal(read(f->fd, &ch, 1), 1);
}

/* What the hook makes ready is seen by the same turn's wait: it runs
 * before the wait, not after. */
static void
test_before_sleep_before_the_wait(void **state)
{
	struct hooks h = { 0, 0, 0, 0, -1 };
	struct loop_fd f = { -1, 0, on_byte, NULL };
	struct loop *l;
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_non_null(l = loop_new());
	f.fd = p[0];
	assert_int_equal(loop_watch(l, &f, LOOP_READABLE), 0);
	loop_before_sleep(l, before, &h);
	loop_after_sleep(l, after, &h);
	assert_int_equal(loop_turn(l, 0), 0);
	h.wfd = p[1];
	assert_int_equal(loop_turn(l, 0), 1);
	assert_int_equal(h.before, 2);
	loop_free(l);
	close(p[0]);
	close(p[1]);
}

struct seen {
	struct loop_fd	 f;
	unsigned	 ready;
	int		 calls;
	struct loop_fd	*other;	/* forgotten when this one runs */
};

static void
on_fd(struct loop *l, struct loop_fd *f, unsigned ready)
{
	struct seen *s = (struct seen *)f;

	s->ready = ready;
	s->calls++;
	if (s->other != NULL)
		loop_forget(l, s->other);
}

static void
test_fd_events(void **state)
{
	struct seen r = { 0 }, w = { 0 };
	struct loop *l;
	int p[2];
	char ch;

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_non_null(l = loop_new());
	r.f.fd = p[0];
	r.f.proc = on_fd;
	w.f.fd = p[1];
	w.f.proc = on_fd;
	assert_int_equal(loop_watch(l, &r.f, LOOP_READABLE), 0);
	assert_int_equal(r.f.mask, LOOP_READABLE);
	/* Nothing written: nothing ready. */
	assert_int_equal(loop_turn(l, 0), 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(loop_turn(l, 1000), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.ready, LOOP_READABLE);
	assert_int_equal(read(p[0], &ch, 1), 1);
	/* A pipe's write end has room: writable at once. */
	assert_int_equal(loop_watch(l, &w.f, LOOP_WRITABLE), 0);
	assert_int_equal(loop_turn(l, 1000), 1);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.ready, LOOP_WRITABLE);
	/* Unwatched: no more calls. */
	assert_int_equal(loop_watch(l, &w.f, 0), 0);
	assert_int_equal(w.f.mask, 0);
	assert_int_equal(loop_turn(l, 0), 0);
	assert_int_equal(w.calls, 1);
	loop_free(l);
	close(p[0]);
	close(p[1]);
}

static void
test_forget_drops_pending(void **state)
{
	struct seen a = { 0 }, b = { 0 };
	struct loop *l;
	int p[2], q[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(pipe(q), 0);
	assert_non_null(l = loop_new());
	a.f.fd = p[0];
	a.f.proc = on_fd;
	a.other = &b.f;
	b.f.fd = q[0];
	b.f.proc = on_fd;
	b.other = &a.f;
	assert_int_equal(loop_watch(l, &a.f, LOOP_READABLE), 0);
	assert_int_equal(loop_watch(l, &b.f, LOOP_READABLE), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(write(q[1], "x", 1), 1);
	/* Both ready in one turn; whichever runs first forgets the other,
	 * whose event of this turn is dropped. */
	assert_int_equal(loop_turn(l, 1000), 2);
	assert_int_equal(a.calls + b.calls, 1);
	loop_free(l);
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timers_in_order),
		cmocka_unit_test(test_before_sleep_once_a_turn),
		cmocka_unit_test(test_before_sleep_before_the_wait),
		cmocka_unit_test(test_fd_events),
		cmocka_unit_test(test_forget_drops_pending),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
