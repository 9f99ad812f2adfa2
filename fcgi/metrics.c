/*
 * metrics: per-worker counters and their sums, for the status endpoint
 * (status.c writes the texts it serves). The counters live in one table: private memory, or, once metrics_share()
 * has found the processes serving the same socket and configuration, a
 * POSIX shared memory object they all map, each worker with a slot of its
 * own. A worker only ever writes its own slot (relaxed atomic stores, so a
 * scrape in any process reads whole values); rule names and slots change
 * only at start, on reload and at exit, under a mutex and (shared) an
 * flock on the object. Nothing here decides or answers a request.
 */
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "metrics_int.h"
#include "trust.h"

const long long metrics_bounds_us[RLG_METRICS_BOUNDS] = {
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
	250000, 500000, 1000000
};
#define NBOUNDS	RLG_METRICS_BOUNDS

static const char *const outcome_names[RLG_OUT_COUNT] = {
	"allowed", "denied", "redis_error", "dry_run", "bad_request",
	"local_cache", "other_rule"
};

#ifndef MAX_WORKERS	/* the Makefile's fuzz_metrics: a smaller table */
#define MAX_WORKERS	1024	/* worker slots of every process sharing */
#define MAX_PROCS	256	/* processes sharing */
#endif
#define TABLE_MAGIC	"rlgate metrics table 3"

struct metrics_worker {
	atomic_int		 pid;		/* owner; 0: free (counts stay) */
	int			 unused;	/* was "own": kept for the layout */
	atomic_int		 busy;
	atomic_ullong		 requests;
	atomic_ullong		 redis_errors;
	atomic_ullong		 replica_timeouts;
	atomic_ullong		 local[2];	/* on_error = local: allowed,
						 * denied (rule decisions) */
	atomic_ullong		 lat_bucket[NBOUNDS + 1];	/* last: +Inf */
	atomic_ullong		 lat_sum_us;
	atomic_ullong		 lat_count;
	/* [slot][outcome]; slot RLG_METRICS_RULES: no rule (bad requests) */
	atomic_ullong
	    decisions[RLG_METRICS_RULES + 1][RLG_OUT_COUNT];
} __attribute__((aligned(64)));

/* A process's struct metrics_process, as it last published it. */
struct proc {
	atomic_int		 pid;		/* 0: free */
	atomic_llong		 workers, audit, written, queued, retries,
				 lost, lag_ms, generation, loaded_ms,
				 deny_cache;
};

struct table {
	char			 magic[32];
	size_t			 size;
	atomic_int		 nworkers;	/* slots ever taken */
	atomic_int		 nnames;
	/* The audit counters of processes gone, so that totals never
	 * go down when one exits. */
	atomic_llong		 gone_written, gone_retries, gone_lost;
	char			 names[RLG_METRICS_RULES][RLG_MAX_RULE_NAME + 1];
	struct proc		 procs[MAX_PROCS];
	struct metrics_worker	 workers[MAX_WORKERS];
};

static pthread_mutex_t	 reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct table	*table;		/* set under reg_lock, then kept */
static int		 shm_fd = -1;	/* shared: the object, for flock */
static char		 shm_name[40];
static struct proc	*self_proc;	/* shared: this process's entry */
static int		 full_logged;	/* under reg_lock */

/* The owner's increment: one writer, so no read-modify-write atomics. */
static void
bump(atomic_ullong *x, unsigned long long by)
{
	atomic_store_explicit(x, atomic_load_explicit(x,
	    memory_order_relaxed) + by, memory_order_relaxed);
}

static unsigned long long
get(atomic_ullong *x)
{
	return atomic_load_explicit(x, memory_order_relaxed);
}

/* reg_lock, then (shared) the other processes out. */
static void
lock(void)
{
	pthread_mutex_lock(&reg_lock);
	if (shm_fd != -1)
		while (flock(shm_fd, LOCK_EX) == -1 && errno == EINTR)
			;
}

static void
unlock(void)
{
	if (shm_fd != -1)
		flock(shm_fd, LOCK_UN);
	pthread_mutex_unlock(&reg_lock);
}

/* The table, private until metrics_share(); NULL when out of memory.
 * Under reg_lock. Untouched pages cost nothing. */
static struct table *
table_get(void)
{
	void *p;

	if (table != NULL)
		return table;
	p = mmap(NULL, sizeof(struct table), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	table = p;
	return table;
}

int
metrics_fill_table(const unsigned char *data, size_t size)
{
	struct table *t;
	size_t span = sizeof(struct table), i, len;

	pthread_mutex_lock(&reg_lock);
	t = table_get();
	pthread_mutex_unlock(&reg_lock);
	if (t == NULL || size == 0)
		return -1;
	for (i = 0; i < span; i += len) {
		len = span - i < size ? span - i : size;
		memcpy((char *)t + i, data, len);
	}
	self_proc = &t->procs[data[0] % MAX_PROCS];
	atomic_store(&self_proc->pid, getpid());
	return 0;
}

int
metrics_sharing(void)
{
	return self_proc != NULL;
}

/*
 * Is pid, a process that took a slot, still running? Only a positive pid
 * names one process: kill(0 or less, 0) would ask about groups.
 */
static int
alive(int pid)
{
	if (pid <= 0)
		return 0;
	return pid == getpid() || kill(pid, 0) == 0 || errno == EPERM;
}

/*
 * A count read from the table, as an index bound: 0 to max. The shared
 * table is written by other processes (and, were it ever someone else's,
 * could hold anything): nothing read from it is used unchecked.
 */
static int
load_count(atomic_int *x, int max)
{
	int n = atomic_load(x);

	return n < 0 ? 0 : n > max ? max : n;
}

/* Another process's figure, 0 to FIGURE_MAX: MAX_PROCS + 1 of them, and
 * this process's own, add up without overflow. */
#define FIGURE_MAX	(1LL << 52)
static long long
load_figure(atomic_llong *x)
{
	long long v = atomic_load(x);

	return v < 0 ? 0 : v > FIGURE_MAX ? FIGURE_MAX : v;
}

struct metrics_worker *
metrics_worker_new(void)
{
	struct metrics_worker *w = NULL;
	struct table *t;
	int i, n, pid;

	lock();
	if ((t = table_get()) != NULL) {
		n = load_count(&t->nworkers, MAX_WORKERS);
		/* A slot freed, or left by a process killed: its counts
		 * stay in the totals, the new owner adds to them. */
		for (i = 0; i < n && w == NULL; i++)
			if ((pid = atomic_load(&t->workers[i].pid)) == 0 ||
			    !alive(pid))
				w = &t->workers[i];
		if (w == NULL && n < MAX_WORKERS) {
			w = &t->workers[n];
			atomic_store(&t->nworkers, n + 1);
		}
		if (w != NULL) {
			atomic_store(&w->busy, 0);
			atomic_store(&w->pid, getpid());
		} else if (!full_logged) {
			log_warn("metrics: more than %d workers share the "
			    "counters; the next ones are not in the totals",
			    MAX_WORKERS);
			full_logged = 1;
		}
	}
	unlock();
	/* Counted, not scraped: still a worker that runs. */
	if (w == NULL && (w = aligned_alloc(_Alignof(struct metrics_worker),
	    sizeof(*w))) != NULL) {
		memset(w, 0, sizeof(*w));
	}
	return w;
}

void
metrics_worker_free(struct metrics_worker *w)
{
	if (w == NULL)
		return;
	/* Where w lies says whose it is, not a flag in memory that other
	 * processes share and could have written. The table is never
	 * replaced once a worker counts (metrics_share()). */
	if (table == NULL || (uintptr_t)w < (uintptr_t)&table->workers[0] ||
	    (uintptr_t)w >= (uintptr_t)&table->workers[MAX_WORKERS]) {
		free(w);
		return;
	}
	lock();
	atomic_store(&w->busy, 0);
	atomic_store(&w->pid, 0);
	unlock();
}

void
metrics_register_rules(struct conf *c)
{
	struct table *t;
	size_t i;
	int s, n;

	lock();
	t = table_get();
	n = t != NULL ? load_count(&t->nnames, RLG_METRICS_RULES) : 0;
	for (i = 0; i < c->nrules; i++) {
		struct rule *ru = &c->rules[i];

		/* A stored name may lack its NUL: compare within its bytes. */
		for (s = 0; s < n; s++)
			if (strncmp(t->names[s], ru->name,
			    sizeof(t->names[s])) == 0)
				break;
		if (s == n) {
			if (t == NULL || n == RLG_METRICS_RULES ||
			    strlen(ru->name) > RLG_MAX_RULE_NAME) {
				if (!full_logged)
					log_warn("metrics: more than %d rule "
					    "names seen; rule %s is not "
					    "counted", RLG_METRICS_RULES,
					    ru->name);
				full_logged = 1;
				ru->metrics_slot = -1;
				continue;
			}
			/* The name first: a scrape reads nnames, then
			 * the names below it. */
			strcpy(t->names[s], ru->name);
			atomic_store(&t->nnames, ++n);
		}
		ru->metrics_slot = s;
	}
	unlock();
}

/* FNV-1a, 64 bits: a name for what identifies the group. */
static uint64_t
fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n-- > 0)
		h = (h ^ *b++) * 0x100000001b3ULL;
	return h;
}

/* Takes an entry in t->procs for this process. Under lock(). */
static struct proc *
take_proc(struct table *t)
{
	struct proc *pr;
	int i, pid;

	for (i = 0; i < MAX_PROCS; i++) {
		pr = &t->procs[i];
		if ((pid = atomic_load(&pr->pid)) != 0 && alive(pid))
			continue;
		if (pid != 0) {		/* killed: keep its counters */
			atomic_fetch_add(&t->gone_written,
			    atomic_load(&pr->written));
			atomic_fetch_add(&t->gone_retries,
			    atomic_load(&pr->retries));
			atomic_fetch_add(&t->gone_lost,
			    atomic_load(&pr->lost));
		}
		atomic_store(&pr->workers, 0);
		atomic_store(&pr->audit, 0);
		atomic_store(&pr->written, 0);
		atomic_store(&pr->queued, 0);
		atomic_store(&pr->retries, 0);
		atomic_store(&pr->lost, 0);
		atomic_store(&pr->lag_ms, 0);
		atomic_store(&pr->deny_cache, 0);
		atomic_store(&pr->generation, 0);
		atomic_store(&pr->loaded_ms, 0);
		atomic_store(&pr->pid, getpid());
		return pr;
	}
	return NULL;
}

int
metrics_share(int listen_fd, struct conf *c)
{
	char real[PATH_MAX], key[64], why[160];
	const char *conf_path = c->path;
	struct stat st, shm_st;
	struct table *t = MAP_FAILED;
	uint64_t h = 0xcbf29ce484222325ULL;
	int fd = -1, tries, n;

	if (fstat(listen_fd, &st) == -1)
		return -1;
	if (realpath(conf_path, real) != NULL)
		conf_path = real;
	n = snprintf(key, sizeof(key), "%ju:%ju:", (uintmax_t)st.st_dev,
	    (uintmax_t)st.st_ino);
	h = fnv1a(fnv1a(h, key, (size_t)n), conf_path, strlen(conf_path));
	snprintf(shm_name, sizeof(shm_name), "/rlgate-%016jx", (uintmax_t)h);

	/* The last process out removes the object: one that opened it
	 * meanwhile finds it unlinked once it has the lock, and retries. */
	for (tries = 0; tries < 10; tries++) {
		/* Made here, or opened as it is and checked below. */
		fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600);
		if (fd == -1 && errno == EEXIST)
			fd = shm_open(shm_name, O_RDWR | O_CLOEXEC, 0);
		if (fd == -1 && errno == ENOENT)
			continue;	/* removed in between: make it */
		if (fd == -1)
			goto fail;
		if (fstat(fd, &shm_st) == -1)
			goto fail;
		/* The name can be computed by anyone: an object another
		 * user made, or may write, would let them write what this
		 * process reads and counts in. */
		if (trust_check(&shm_st, 0, 077, "group or other access",
		    why, sizeof(why)) == -1) {
			log_error("metrics: /dev/shm%s is %s: refused; "
			    "/metrics shows this process only", shm_name, why);
			close(fd);
			return -1;
		}
		while (flock(fd, LOCK_EX) == -1)
			if (errno != EINTR)
				goto fail;
		if (fstat(fd, &shm_st) == -1)
			goto fail;
		if (shm_st.st_nlink > 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd == -1) {
		errno = EAGAIN;
		goto fail;
	}
	if (shm_st.st_size == 0 &&
	    ftruncate(fd, (off_t)sizeof(struct table)) == -1)
		goto fail;
	if (shm_st.st_size != 0 &&
	    shm_st.st_size != (off_t)sizeof(struct table)) {
		errno = EPROTO;		/* another version's */
		goto fail;
	}
	t = mmap(NULL, sizeof(struct table), PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0);
	if (t == MAP_FAILED)
		goto fail;
	if (shm_st.st_size == 0) {
		strcpy(t->magic, TABLE_MAGIC);
		t->size = sizeof(struct table);
	} else if (strcmp(t->magic, TABLE_MAGIC) != 0 ||
	    t->size != sizeof(struct table)) {
		errno = EPROTO;
		goto fail;
	}
	pthread_mutex_lock(&reg_lock);
	if ((self_proc = take_proc(t)) == NULL) {
		pthread_mutex_unlock(&reg_lock);
		errno = EUSERS;
		goto fail;
	}
	/* No worker counts yet: the private table goes. */
	if (table != NULL)
		munmap(table, sizeof(struct table));
	table = t;
	shm_fd = fd;
	flock(fd, LOCK_UN);
	pthread_mutex_unlock(&reg_lock);
	metrics_register_rules(c);
	/* A fatal() later in the start must not leave the object behind. */
	atexit(metrics_unshare);
	log_debug("metrics: shared in /dev/shm%s", shm_name);
	return 0;
fail:
	log_warn("metrics: cannot share the counters in /dev/shm%s: %s; "
	    "/metrics shows this process only", shm_name, strerror(errno));
	if (t != MAP_FAILED)
		munmap(t, sizeof(struct table));
	if (fd != -1)
		close(fd);
	return -1;
}

void
metrics_unshare(void)
{
	struct table *t = table;
	int i, pid, others = 0;

	if (self_proc == NULL)
		return;
	lock();
	atomic_fetch_add(&t->gone_written, atomic_load(&self_proc->written));
	atomic_fetch_add(&t->gone_retries, atomic_load(&self_proc->retries));
	atomic_fetch_add(&t->gone_lost, atomic_load(&self_proc->lost));
	atomic_store(&self_proc->pid, 0);
	self_proc = NULL;
	for (i = 0; i < load_count(&t->nworkers, MAX_WORKERS); i++)
		if (atomic_load(&t->workers[i].pid) == getpid()) {
			atomic_store(&t->workers[i].busy, 0);
			atomic_store(&t->workers[i].pid, 0);
		}
	for (i = 0; i < MAX_PROCS; i++)
		if ((pid = atomic_load(&t->procs[i].pid)) != 0 && alive(pid))
			others++;
	if (others == 0)
		shm_unlink(shm_name);
	unlock();
}

void
metrics_publish(const struct metrics_process *p)
{
	struct proc *pr = self_proc;

	if (pr == NULL)
		return;
	atomic_store(&pr->workers, p->workers);
	atomic_store(&pr->audit, p->audit);
	atomic_store(&pr->written, p->audit_written);
	atomic_store(&pr->queued, p->audit_queued);
	atomic_store(&pr->retries, p->audit_retries);
	atomic_store(&pr->lost, p->audit_lost);
	atomic_store(&pr->lag_ms, p->audit_lag_ms);
	atomic_store(&pr->generation, p->generation);
	atomic_store(&pr->loaded_ms, p->loaded_ms);
	atomic_store(&pr->deny_cache, (long long)p->deny_cache_entries);
}

void
metrics_total(struct metrics_process *p)
{
	struct table *t = table;
	struct proc *pr;
	long long v;
	int i, pid;

	p->processes = 1;
	if (self_proc == NULL)
		return;
	p->audit_written += load_figure(&t->gone_written);
	p->audit_retries += load_figure(&t->gone_retries);
	p->audit_lost += load_figure(&t->gone_lost);
	for (i = 0; i < MAX_PROCS; i++) {
		pr = &t->procs[i];
		if (pr == self_proc || (pid = atomic_load(&pr->pid)) == 0 ||
		    !alive(pid))
			continue;
		p->processes++;
		if ((v = load_figure(&pr->workers)) > MAX_WORKERS)
			v = MAX_WORKERS;
		p->workers += (int)v;
		p->audit |= atomic_load(&pr->audit) != 0;
		p->audit_written += load_figure(&pr->written);
		p->audit_queued += load_figure(&pr->queued);
		p->audit_retries += load_figure(&pr->retries);
		p->audit_lost += load_figure(&pr->lost);
		if ((v = load_figure(&pr->lag_ms)) > p->audit_lag_ms)
			p->audit_lag_ms = v;
		p->deny_cache_entries += (size_t)load_figure(&pr->deny_cache);
		/* The oldest configuration in force anywhere. */
		if ((v = load_figure(&pr->generation)) > 0 &&
		    v < p->generation)
			p->generation = v;
		if ((v = load_figure(&pr->loaded_ms)) > 0 && v < p->loaded_ms)
			p->loaded_ms = v;
	}
}

static void
count(struct metrics_worker *w, const struct rule *ru, enum metrics_outcome o)
{
	int slot = ru == NULL ? RLG_METRICS_RULES : ru->metrics_slot;

	if (slot >= 0)
		bump(&w->decisions[slot][o], 1);
}

void
metrics_decided(struct metrics_worker *w, const struct decision *d)
{
	size_t i;

	if (w == NULL)
		return;
	bump(&w->requests, 1);
	if (d->n == 0) {
		/* A 503 with a detail was refused for the audit (on_full =
		 * deny): rlgate_audit_rows_lost_total counts it. */
		if (d->bad_detail != NULL && d->status != 503)
			count(w, d->bad_rule, RLG_OUT_BAD_REQUEST);
		return;
	}
	for (i = 0; i < d->n; i++) {
		enum metrics_outcome o;

		if (d->rule_reason[i] == RLG_REASON_LOCAL)
			bump(&w->local[d->rule_allowed[i] ? 0 : 1], 1);
		switch (d->rule_reason[i]) {
		case RLG_REASON_REDIS_ERROR:
			o = RLG_OUT_REDIS_ERROR;
			break;
		case RLG_REASON_DRY_RUN:
			o = RLG_OUT_DRY_RUN;
			break;
		case RLG_REASON_LOCAL_CACHE:
			o = RLG_OUT_LOCAL_CACHE;
			break;
		case RLG_REASON_OTHER_RULE:
			o = RLG_OUT_OTHER_RULE;
			break;
		default:
			o = d->rule_allowed[i] ? RLG_OUT_ALLOWED :
			    RLG_OUT_DENIED;
			break;
		}
		count(w, d->m[i].rule, o);
	}
}

void
metrics_busy(struct metrics_worker *w, int busy)
{
	if (w != NULL)
		atomic_store_explicit(&w->busy, busy != 0,
		    memory_order_relaxed);
}

void
metrics_redis_latency(struct metrics_worker *w, long long us)
{
	size_t b;

	if (w == NULL)
		return;
	if (us < 0)
		us = 0;
	for (b = 0; b < NBOUNDS && us > metrics_bounds_us[b]; b++)
		;
	bump(&w->lat_bucket[b], 1);
	bump(&w->lat_sum_us, (unsigned long long)us);
	bump(&w->lat_count, 1);
}

void
metrics_redis_error(struct metrics_worker *w)
{
	if (w != NULL)
		bump(&w->redis_errors, 1);
}

void
metrics_replica_timeout(struct metrics_worker *w)
{
	if (w != NULL)
		bump(&w->replica_timeouts, 1);
}

/* Slots a scrape reads: every one ever taken. */
static int
nworkers(void)
{
	return table != NULL ? load_count(&table->nworkers, MAX_WORKERS) : 0;
}

int
metrics_workers_busy(void)
{
	struct metrics_worker *w;
	int i, n = 0, pid, nw = nworkers();

	for (i = 0; i < nw; i++) {
		w = &table->workers[i];
		if ((pid = atomic_load(&w->pid)) != 0 && alive(pid))
			n += atomic_load_explicit(&w->busy,
			    memory_order_relaxed) != 0;
	}
	return n;
}

void
metrics_counts(struct metrics_counts *n)
{
	struct metrics_worker *w;
	int nw = nworkers(), i;
	size_t b;

	memset(n, 0, sizeof(*n));
	for (i = 0; i < nw; i++) {
		w = &table->workers[i];
		n->requests += get(&w->requests);
		n->redis_errors += get(&w->redis_errors);
		n->replica_timeouts += get(&w->replica_timeouts);
		n->local_allowed += get(&w->local[0]);
		n->local_denied += get(&w->local[1]);
		for (b = 0; b <= NBOUNDS; b++)
			n->latency[b] += get(&w->lat_bucket[b]);
		n->latency_sum_us += get(&w->lat_sum_us);
		n->latency_count += get(&w->lat_count);
	}
}

int
metrics_rules_named(void)
{
	return table != NULL ? load_count(&table->nnames,
	    RLG_METRICS_RULES) : 0;
}

const char *
metrics_rule_name(int slot)
{
	return table->names[slot];
}

unsigned long long
metrics_decisions(int slot, enum metrics_outcome o)
{
	unsigned long long v = 0;
	int i, nw = nworkers();

	if (slot == RLG_METRICS_NO_RULE)
		slot = RLG_METRICS_RULES;
	for (i = 0; i < nw; i++)
		v += get(&table->workers[i].decisions[slot][o]);
	return v;
}

const char *
metrics_outcome_name(enum metrics_outcome o)
{
	return outcome_names[o];
}
