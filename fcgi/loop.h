/*
 * loop: one thread's event loop, after Redis's ae.c: file descriptors
 * (epoll on Linux), timers on the monotonic clock, and a before-sleep hook
 * where work gathered during a turn is done once. It knows nothing of its
 * users: FastCGI (conns.h), the batch (events.c). One loop per thread; no
 * function here is thread safe.
 */
#ifndef RLG_LOOP_H
#define RLG_LOOP_H

#define LOOP_READABLE	1u
#define LOOP_WRITABLE	2u
#define LOOP_EXCLUSIVE	4u	/* wake one of the loops sharing the fd
				 * (a listening socket), not all */

struct loop;
struct loop_fd;

/* Called with what fd is ready for (LOOP_READABLE, LOOP_WRITABLE). */
typedef void	 loop_fd_proc(struct loop *l, struct loop_fd *f,
		    unsigned ready);
typedef void	 loop_timer_proc(struct loop *l, void *arg);
typedef void	 loop_hook_proc(struct loop *l, void *arg);

/* A watched descriptor. The caller owns it (usually inside its own
 * object) and fills fd, proc and arg; mask is the loop's. */
struct loop_fd {
	int		 fd;
	unsigned	 mask;		/* what is watched now; 0: not */
	loop_fd_proc	*proc;
	void		*arg;
};

/* A new loop, or NULL with errno set. */
struct loop	*loop_new(void);

/* Frees l (not the descriptors it watched). Accepts NULL. */
void		 loop_free(struct loop *l);

/*
 * Watches f->fd for mask (LOOP_READABLE, LOOP_WRITABLE, LOOP_EXCLUSIVE);
 * 0 stops watching. Nothing is done when mask is f->mask. f must stay put
 * while watched. Returns 0, or -1 with errno set (f->mask unchanged).
 */
int		 loop_watch(struct loop *l, struct loop_fd *f, unsigned mask);

/*
 * Forgets f without asking the kernel, for a descriptor about to be
 * closed (closing removes it from epoll), and drops any event of this turn
 * still pending for it.
 */
void		 loop_forget(struct loop *l, struct loop_fd *f);

/*
 * Calls proc(l, arg) once, at or after due_us (mono_us()); timers due at
 * the same time run in the order they were added. Returns 0, or -1 when
 * out of memory (nothing added). Timers cannot be cancelled.
 */
int		 loop_timer(struct loop *l, long long due_us,
		    loop_timer_proc *proc, void *arg);

/* Timers not yet run. */
unsigned long	 loop_timers(const struct loop *l);

/* proc(l, arg) runs at the start of every turn, before the loop may
 * sleep (NULL: none); after: right after it woke. */
void		 loop_before_sleep(struct loop *l, loop_hook_proc *proc,
		    void *arg);
void		 loop_after_sleep(struct loop *l, loop_hook_proc *proc,
		    void *arg);

/*
 * One turn: the before-sleep hook, a wait of at most max_wait_ms (-1: no
 * bound but the next timer) for descriptors, the after-sleep hook, each
 * ready descriptor's proc, then the timers that are due. Returns the
 * number of descriptor events handled, or -1 with errno set when the wait
 * failed (EINTR is not a failure: 0).
 */
int		 loop_turn(struct loop *l, int max_wait_ms);

#endif
