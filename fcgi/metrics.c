/*
 * metrics: per-worker counters and the texts the status endpoint serves.
 * The counters live in one table: private memory, or, once metrics_share()
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
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "redis.h"

/* Redis round-trip histogram bounds, in microseconds (le labels in s). */
static const long long bounds_us[] = {
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
	250000, 500000, 1000000
};
#define NBOUNDS	(sizeof(bounds_us) / sizeof(bounds_us[0]))

static const char *const outcome_names[RLG_OUT_COUNT] = {
	"allowed", "denied", "redis_error", "dry_run", "bad_request",
	"local_cache", "other_rule"
};

#ifndef MAX_WORKERS		/* tests/fuzz_metrics.c: a smaller table */
#define MAX_WORKERS	1024	/* worker slots of every process sharing */
#define MAX_PROCS	256	/* processes sharing */
#endif
#define TABLE_MAGIC	"rlgate metrics table 1"

struct metrics_worker {
	atomic_int		 pid;		/* owner; 0: free (counts stay) */
	int			 unused;	/* was "own": kept for the layout */
	atomic_int		 busy;
	atomic_ullong		 requests;
	atomic_ullong		 redis_errors;
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
	char real[PATH_MAX], key[64];
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
		if (shm_st.st_uid != geteuid() ||
		    (shm_st.st_mode & 077) != 0) {
			log_error("metrics: /dev/shm%s is owned by uid %ju "
			    "with mode %04o, not by this process's uid %ju "
			    "with no group or other access: refused; "
			    "/metrics shows this process only", shm_name,
			    (uintmax_t)shm_st.st_uid,
			    (unsigned)(shm_st.st_mode & 07777),
			    (uintmax_t)geteuid());
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
	for (b = 0; b < NBOUNDS && us > bounds_us[b]; b++)
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

/* Slots a scrape reads: every one ever taken. */
static int
nworkers(void)
{
	return table != NULL ? load_count(&table->nworkers, MAX_WORKERS) : 0;
}

/* Busy workers of the processes still running. */
static int
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

/* A bounded appender that keeps counting what it could not write. */
struct out {
	char	*p;
	size_t	 len;	/* needed so far */
	size_t	 cap;
};

static void put(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->len < o->cap ? o->p + o->len : NULL,
	    o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

static void
header(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One metric with a single integer sample: HELP, TYPE, the value. */
static void
metric(struct out *o, const char *name, const char *type, const char *help,
    long long v)
{
	header(o, name, type, help);
	put(o, "%s %lld\n", name, v);
}

/* A label value: backslash, quote and newline escaped. */
static void
put_label(struct out *o, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			put(o, "\\%c", *s);
		else if (*s == '\n')
			put(o, "\\n");
		else
			put(o, "%c", *s);
	}
}

/* Each master's series: up at this scrape, and the Redis layer's counts. */
static void
node_metrics(struct out *o, const struct metrics_process *p)
{
	static const struct {
		const char	*name, *type, *help;
	} fam[] = {
		{ "rlgate_redis_node_up", "gauge",
		    "Each Redis master: 1 when it answered a PING at this "
		    "scrape." },
		{ "rlgate_redis_node_errors_total", "counter",
		    "Calls to this node that failed (no answer, refused, not "
		    "sent)." },
		{ "rlgate_redis_node_redirects_total", "counter",
		    "MOVED and ASK redirects this node answered (cluster)." },
		{ "rlgate_redis_node_slot_refreshes_total", "counter",
		    "Slot maps read from this node (cluster)." },
	};
	long long v;
	size_t f;
	int i;

	for (f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		header(o, fam[f].name, fam[f].type, fam[f].help);
		for (i = 0; i < p->nnodes; i++) {
			const struct redis_health *n = &p->nodes[i];

			v = f == 0 ? n->ok : f == 1 ? n->errors : f == 2 ?
			    n->redirects : n->refreshes;
			put(o, "%s{node=\"", fam[f].name);
			put_label(o, n->address);
			put(o, "\"} %lld\n", v);
		}
	}
}

size_t
metrics_prometheus(const struct metrics_process *p, char *out, size_t outlen)
{
	unsigned long long requests = 0, errors = 0, lat[NBOUNDS + 1] = { 0 };
	unsigned long long sum_us = 0, lat_count = 0, cum, v;
	struct out o = { out, 0, outlen };
	struct metrics_worker *w;
	int nw = nworkers(), nnames, s, k, i;
	size_t b;

	if (outlen > 0)
		out[0] = '\0';
	for (i = 0; i < nw; i++) {
		w = &table->workers[i];
		requests += get(&w->requests);
		errors += get(&w->redis_errors);
		for (b = 0; b <= NBOUNDS; b++)
			lat[b] += get(&w->lat_bucket[b]);
		sum_us += get(&w->lat_sum_us);
		lat_count += get(&w->lat_count);
	}

	header(&o, "rlgate_decisions_total", "counter",
	    "Rule decisions by rule and outcome (rule=\"\": a bad request no "
	    "rule is named for).");
	nnames = table != NULL ? load_count(&table->nnames,
	    RLG_METRICS_RULES) : 0;
	for (s = 0; s <= nnames; s++) {
		const char *name = s < nnames ? table->names[s] : "";
		int slot = s < nnames ? s : RLG_METRICS_RULES;

		for (k = 0; k < RLG_OUT_COUNT; k++) {
			v = 0;
			for (i = 0; i < nw; i++)
				v += get(&table->workers[i].decisions[slot][k]);
			/* Bad requests without a rule: once there are some. */
			if (s == nnames && v == 0)
				continue;
			/* Rule names are [A-Za-z0-9_.-]: nothing to escape.
			 * A stored one may lack its NUL: its bytes only. */
			put(&o, "rlgate_decisions_total{rule=\"%.*s\","
			    "outcome=\"%s\"} %llu\n", RLG_MAX_RULE_NAME, name,
			    outcome_names[k], v);
		}
	}

	metric(&o, "rlgate_requests_total", "counter",
	    "Requests decided (the status endpoint is not counted).",
	    (long long)requests);
	metric(&o, "rlgate_redis_errors_total", "counter",
	    "Calls to Redis that failed: connect, timeout, error reply.",
	    (long long)errors);
	header(&o, "rlgate_redis_latency_seconds", "histogram",
	    "Round trip of one pipelined decision call to Redis.");
	for (b = 0, cum = 0; b < NBOUNDS; b++) {
		cum += lat[b];
		put(&o, "rlgate_redis_latency_seconds_bucket{le=\"%g\"} %llu\n",
		    (double)bounds_us[b] / 1e6, cum);
	}
	cum += lat[NBOUNDS];
	put(&o, "rlgate_redis_latency_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	put(&o, "rlgate_redis_latency_seconds_sum %.6f\n",
	    (double)sum_us / 1e6);
	put(&o, "rlgate_redis_latency_seconds_count %llu\n", lat_count);

	node_metrics(&o, p);

	metric(&o, "rlgate_audit_rows_written_total", "counter",
	    "Audit rows committed to the database.", p->audit_written);
	metric(&o, "rlgate_audit_rows_queued", "gauge",
	    "Audit rows waiting in memory to be written.", p->audit_queued);
	metric(&o, "rlgate_audit_retries_total", "counter",
	    "Audit writes that failed and were retried.", p->audit_retries);
	metric(&o, "rlgate_audit_rows_lost_total", "counter",
	    "Audit rows lost: the queue was full ([audit] on_full).",
	    p->audit_lost);
	header(&o, "rlgate_audit_lag_seconds", "gauge",
	    "Age of the oldest audit row waiting to be written.");
	put(&o, "rlgate_audit_lag_seconds %.3f\n",
	    (double)p->audit_lag_ms / 1e3);
	metric(&o, "rlgate_workers_busy", "gauge",
	    "Worker threads serving a request (this scrape included).",
	    (long long)metrics_workers_busy());
	metric(&o, "rlgate_workers", "gauge", "Worker threads.",
	    (long long)p->workers);
	metric(&o, "rlgate_processes", "gauge",
	    "Processes serving this socket and configuration, counted here.",
	    (long long)p->processes);
	metric(&o, "rlgate_deny_cache_entries", "gauge",
	    "Denials remembered by the deny cache.",
	    (long long)p->deny_cache_entries);
	metric(&o, "rlgate_config_generation", "gauge",
	    "Configurations loaded since start (1 at start, +1 per reload).",
	    p->generation);
	header(&o, "rlgate_config_loaded_timestamp_seconds", "gauge",
	    "When the configuration in force was loaded.");
	put(&o, "rlgate_config_loaded_timestamp_seconds %.3f\n",
	    (double)p->loaded_ms / 1e3);
	return o.len;
}

/* s as a JSON string (the inputs are paths, addresses and messages). */
static void
put_str(struct out *o, const char *s)
{
	size_t at = o->len < o->cap ? o->len : o->cap;
	size_t end;

	if (s == NULL) {
		put(o, "null");
		return;
	}
	end = respond_json_string(o->p, at, o->cap, s, strlen(s));
	/* Cut: count it as if written so the caller sees the overflow. */
	o->len = end >= o->cap ? o->cap + strlen(s) + 2 : end;
}

static void
put_time(struct out *o, long long ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	put(o, "\"%s.%03lldZ\"", buf, ms % 1000);
}

size_t
metrics_health_json(const struct metrics_health *h, char *out,
    size_t outlen, int *healthy)
{
	struct out o = { out, 0, outlen };
	int audit_ok = !h->p.audit || h->p.audit_lag_ms <= h->audit_lag_max_ms;
	const char *sep = "";
	int i;

	*healthy = h->redis_ok && audit_ok;
	put(&o, "{\"status\":\"%s\",\"version\":", *healthy ? "ok" :
	    "unavailable");
	put_str(&o, h->version);
	put(&o, ",\"redis\":{\"reachable\":%s,\"address\":",
	    h->redis_ok ? "true" : "false");
	put_str(&o, h->redis_address);
	if (h->redis_ok)
		put(&o, ",\"latency_ms\":%.3f",
		    (double)h->redis_latency_us / 1e3);
	else {
		put(&o, ",\"error\":");
		put_str(&o, h->redis_error);
	}
	put(&o, ",\"nodes\":[");
	for (i = 0; i < h->nnodes; i++) {
		const struct redis_health *n = &h->nodes[i];

		put(&o, "%s{\"address\":", i ? "," : "");
		put_str(&o, n->address);
		put(&o, ",\"role\":");
		put_str(&o, n->role);
		put(&o, ",\"reachable\":%s", n->ok ? "true" : "false");
		if (n->ok)
			put(&o, ",\"latency_ms\":%.3f}",
			    (double)n->latency_us / 1e3);
		else {
			put(&o, ",\"error\":");
			put_str(&o, n->errstr);
			put(&o, "}");
		}
	}
	put(&o, "]}");
	put(&o, ",\"audit\":{\"enabled\":%s", h->p.audit ? "true" : "false");
	if (h->p.audit)
		put(&o, ",\"queued\":%lld,\"lag_ms\":%lld,\"written\":%lld,"
		    "\"retries\":%lld,\"lost\":%lld,\"lag_max_ms\":%lld",
		    h->p.audit_queued, h->p.audit_lag_ms, h->p.audit_written,
		    h->p.audit_retries, h->p.audit_lost, h->audit_lag_max_ms);
	put(&o, "},\"config\":{\"generation\":%lld,\"loaded_at\":",
	    h->p.generation);
	put_time(&o, h->p.loaded_ms);
	put(&o, ",\"loaded_ms\":%lld,\"path\":", h->p.loaded_ms);
	put_str(&o, h->config_path);
	put(&o, ",\"rules\":%zu},\"processes\":%d,\"workers\":{\"busy\":%d,"
	    "\"total\":%d},\"deny_cache\":{\"entries\":%zu},\"problems\":[",
	    h->rules, h->p.processes, metrics_workers_busy(), h->p.workers,
	    h->p.deny_cache_entries);
	if (!h->redis_ok) {
		put(&o, "\"redis does not answer\"");
		sep = ",";
	}
	if (!audit_ok)
		put(&o, "%s\"the audit database is %lld ms behind\"", sep,
		    h->p.audit_lag_ms);
	put(&o, "]}\n");
	return o.len < outlen ? o.len : outlen;
}
