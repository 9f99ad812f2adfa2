/*
 * loop: epoll, a min-heap of timers and two hooks, for one thread. A turn
 * runs the before-sleep hook first, so that what the last turn gathered
 * (the requests it read) is done once, then sleeps until a descriptor is
 * ready or the first timer is due. Not here: what a descriptor is for, or
 * what a timer does (their procs, the users' files).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "loop.h"

#define MAX_EVENTS	256

struct timer {
	long long	 due_us;
	unsigned long long seq;		/* the order added: ties run FIFO */
	loop_timer_proc	*proc;
	void		*arg;
};

struct loop {
	int		 ep;
	struct epoll_event evs[MAX_EVENTS];
	int		 nevs, at;	/* this turn's events, the one run */
	struct timer	*timers;	/* a min-heap on (due_us, seq) */
	size_t		 ntimers, tcap;
	unsigned long long seq;
	loop_hook_proc	*before, *after;
	void		*before_arg, *after_arg;
};

struct loop *
loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	if ((l->ep = epoll_create1(EPOLL_CLOEXEC)) == -1) {
		free(l);
		return NULL;
	}
	return l;
}

void
loop_free(struct loop *l)
{
	if (l == NULL)
		return;
	close(l->ep);
	free(l->timers);
	free(l);
}

int
loop_watch(struct loop *l, struct loop_fd *f, unsigned mask)
{
	struct epoll_event ev;
	int op;

	if (mask == f->mask)
		return 0;
	op = f->mask == 0 ? EPOLL_CTL_ADD : mask == 0 ? EPOLL_CTL_DEL :
	    EPOLL_CTL_MOD;
	memset(&ev, 0, sizeof(ev));
	ev.events = (mask & LOOP_READABLE ? EPOLLIN : 0) |
	    (mask & LOOP_WRITABLE ? EPOLLOUT : 0) |
	    (mask & LOOP_EXCLUSIVE ? EPOLLEXCLUSIVE : 0);
	ev.data.ptr = f;
	if (epoll_ctl(l->ep, op, f->fd, &ev) == -1)
		return -1;
	f->mask = mask;
	return 0;
}

void
loop_forget(struct loop *l, struct loop_fd *f)
{
	int i;

	f->mask = 0;
	/* Its memory may serve another descriptor before the turn ends. */
	for (i = l->at + 1; i < l->nevs; i++)
		if (l->evs[i].data.ptr == f)
			l->evs[i].data.ptr = NULL;
}

static int
before(const struct timer *a, const struct timer *b)
{
	return a->due_us < b->due_us || (a->due_us == b->due_us &&
	    a->seq < b->seq);
}

int
loop_timer(struct loop *l, long long due_us, loop_timer_proc *proc,
    void *arg)
{
	struct timer t = { due_us, l->seq++, proc, arg };
	size_t i, parent;

	if (l->ntimers == l->tcap) {
		size_t cap = l->tcap ? l->tcap * 2 : 64;
		struct timer *p = realloc(l->timers, cap * sizeof(*p));

		if (p == NULL)
			return -1;
		l->timers = p;
		l->tcap = cap;
	}
	for (i = l->ntimers++; i > 0; i = parent) {
		parent = (i - 1) / 2;
		if (!before(&t, &l->timers[parent]))
			break;
		l->timers[i] = l->timers[parent];
	}
	l->timers[i] = t;
	return 0;
}

unsigned long
loop_timers(const struct loop *l)
{
	return (unsigned long)l->ntimers;
}

/* Takes the first timer off the heap. */
static struct timer
timer_pop(struct loop *l)
{
	struct timer first = l->timers[0], last = l->timers[--l->ntimers];
	size_t i, child;

	for (i = 0; (child = 2 * i + 1) < l->ntimers; i = child) {
		if (child + 1 < l->ntimers &&
		    before(&l->timers[child + 1], &l->timers[child]))
			child++;
		if (!before(&l->timers[child], &last))
			break;
		l->timers[i] = l->timers[child];
	}
	if (l->ntimers > 0)
		l->timers[i] = last;
	return first;
}

/* Runs the timers due by now; those they add for now wait a turn. */
static void
timers_run(struct loop *l, long long now)
{
	unsigned long long until = l->seq;
	struct timer t;

	while (l->ntimers > 0 && l->timers[0].due_us <= now &&
	    l->timers[0].seq < until) {
		t = timer_pop(l);
		t.proc(l, t.arg);
	}
}

void
loop_before_sleep(struct loop *l, loop_hook_proc *proc, void *arg)
{
	l->before = proc;
	l->before_arg = arg;
}

void
loop_after_sleep(struct loop *l, loop_hook_proc *proc, void *arg)
{
	l->after = proc;
	l->after_arg = arg;
}

/* How long the turn may sleep: max_wait_ms, or less for the next timer. */
static int
wait_ms(const struct loop *l, int max_wait_ms)
{
	long long now, ms;

	if (l->ntimers == 0)
		return max_wait_ms;
	now = mono_us();
	ms = l->timers[0].due_us <= now ? 0 :
	    (l->timers[0].due_us - now + 999) / 1000;
	return max_wait_ms >= 0 && ms > max_wait_ms ? max_wait_ms : (int)ms;
}

int
loop_turn(struct loop *l, int max_wait_ms)
{
	struct loop_fd *f;
	unsigned ready;
	int n;

	if (l->before != NULL)
		l->before(l, l->before_arg);
	n = epoll_wait(l->ep, l->evs, MAX_EVENTS, wait_ms(l, max_wait_ms));
	if (l->after != NULL)
		l->after(l, l->after_arg);
	if (n == -1)
		return errno == EINTR ? 0 : -1;
	l->nevs = n;
	for (l->at = 0; l->at < n; l->at++) {
		if ((f = l->evs[l->at].data.ptr) == NULL)
			continue;	/* forgotten this turn */
		ready = (l->evs[l->at].events & (EPOLLIN | EPOLLHUP |
		    EPOLLERR | EPOLLRDHUP) ? LOOP_READABLE : 0) |
		    (l->evs[l->at].events & EPOLLOUT ? LOOP_WRITABLE : 0);
		f->proc(l, f, ready);
	}
	l->nevs = l->at = 0;
	if (l->ntimers > 0)
		timers_run(l, mono_us());
	return n;
}
