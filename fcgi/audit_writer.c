/*
 * audit_writer: writing the queue. The writer thread waits for a batch
 * (or the flush interval), takes a transaction's worth of the oldest
 * rows, writes them into the file of their period, and takes them off the
 * queue once committed; on failure it keeps them, backs off, retries and
 * logs each episode once; it logs the rows the full queue lost. An inline
 * handle's rows are written the same way on the caller's thread. Not the
 * queue itself (audit.c), SQLite (audit_db.c), checkpoints (audit_ckpt.c),
 * nor which file a dated name means (audit_files.c).
 */
#include <sys/stat.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit_int.h"
#include "audit_files.h"
#include "clock.h"
#include "log.h"

/* The writer thread's own state between attempts. */
struct writer {
	struct audit	*a;
	long long	 due;		/* monotonic ms: a partial batch goes */
	long long	 retry_at;	/* monotonic ms: the next attempt */
	long long	 backoff;	/* ms, while failing */
	long long	 failing_since;	/* monotonic ms: the episode's start */
	size_t		 most;		/* rows a transaction at most */
	int		 failing;	/* the last attempt failed */
	int		 reported;	/* the episode is logged */
};

static void
wait_until(pthread_cond_t *c, pthread_mutex_t *m, long long at_ms)
{
	struct timespec ts;

	ts.tv_sec = at_ms / 1000;
	ts.tv_nsec = (at_ms % 1000) * 1000000;
	pthread_cond_timedwait(c, m, &ts);
}

/* The files of a's dated name past [audit] keep (see audit_files.h),
 * and the rows of those past keep_rows. */
static void
delete_old_files(struct audit *a)
{
	long long keep, keep_rows;

	pthread_mutex_lock(&a->mu);
	keep = a->keep_ms;
	keep_rows = a->keep_rows_ms;
	pthread_mutex_unlock(&a->mu);
	if (a->pattern == NULL)
		return;
	audit_files_delete_old(a->pattern, a->path, keep, wall_ms());
	if (keep_rows > 0)
		audit_files_each_ended(a->pattern, a->path, keep_rows,
		    wall_ms(), audit_db_drop_rows);
}

/* Whether an inline handle of a dated name with a keep has the turn. */
static int
keep_due(struct audit *a)
{
	long long keep;

	pthread_mutex_lock(&a->mu);
	keep = a->keep_ms;
	pthread_mutex_unlock(&a->mu);
	return keep > 0 && audit_files_sweep_due(a->pattern, wall_ms());
}

/*
 * The rows of a dated name go to the file of their own time (Redis TIME,
 * which every gateway shares): moves a to the file of time ms. The first
 * to a new file deletes the files past keep.
 */
static int
move_to(struct audit *a, long long ms)
{
	char file[PATH_MAX];
	long long start, end;
	struct stat st;

	if (audit_files_for(a->pattern, ms, file, sizeof(file), &start, &end) == -1) {
		snprintf(a->err, sizeof(a->err), "%s: the name is too long",
		    a->pattern);
		return -1;
	}
	if (strcmp(file, a->path) != 0)
		audit_db_close(a);
	pthread_mutex_lock(&a->mu);
	memcpy(a->path, file, sizeof(file));
	a->period_start_ms = start;
	a->period_end_ms = end;
	pthread_mutex_unlock(&a->mu);
	if (stat(file, &st) == -1 && errno == ENOENT)
		delete_old_files(a);
	return 0;
}

/*
 * A dated name: one transaction, one file. Moves a to the file of
 * rows[0]'s period and returns how many of rows[0..n) (n at least 1)
 * belong to it, or 0 with a->err set.
 */
static size_t
rows_of_period(struct audit *a, struct qrow **rows, size_t n)
{
	size_t i;

	if ((rows[0]->r.ts_ms < a->period_start_ms ||
	    rows[0]->r.ts_ms >= a->period_end_ms) &&
	    move_to(a, rows[0]->r.ts_ms) == -1) {
		a->err_busy = a->err_full = 0;
		return 0;
	}
	for (i = 1; i < n && rows[i]->r.ts_ms >= a->period_start_ms &&
	    rows[i]->r.ts_ms < a->period_end_ms; i++)
		;
	/* An inline handle serves one CGI request: the many processes of a
	 * CGI deployment take turns (audit_files_sweep_due()). */
	if (!a->swept) {
		a->swept = 1;
		if (!a->inline_mode || keep_due(a))
			delete_old_files(a);
	}
	return i;
}

/*
 * Writes the first rows of rows[0..n) in one transaction, into the file
 * of their period. Returns how many were committed (at least 1), or -1
 * with a->err set and nothing written.
 */
static long long
write_rows(struct audit *a, struct qrow **rows, size_t n)
{
	long long done;

	if (a->pattern != NULL && (n = rows_of_period(a, rows, n)) == 0)
		return -1;
	if (audit_db_ready(a) == -1)
		return -1;
	audit_ckpt_truncate(a);
	if ((done = audit_db_write(a, rows, n)) == -1) {
		if (a->err_full)
			a->truncate_wal = 1;
		return -1;
	}
	audit_ckpt_after_commit(a);
	return done;
}

/*
 * The n oldest rows into a->txn. Only the writer removes rows and pushers
 * only append, so they stay put while a->mu is released.
 */
static void
take_rows(struct audit *a, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		a->txn[i] = a->ring[(a->head + i) % a->cap];
}

/* The first n rows of a->txn, committed, off the queue (a->mu held). */
static void
drop_rows(struct audit *a, size_t n)
{
	a->head = (a->head + n) % a->cap;
	a->count -= n;
	a->written += (long long)n;
}

/*
 * The rows audit_push() could not queue since the last such line, in one
 * line every AUDIT_LOST_LOG_MS at most (force: now, at the end). Under mu.
 */
static void
log_lost(struct audit *a, int force)
{
	long long now = mono_ms();

	if (a->lost == a->lost_logged ||
	    (!force && now - a->lost_log_at < AUDIT_LOST_LOG_MS))
		return;
	log_error("audit: %s: the queue is full (%zu rows): %lld rows not "
	    "recorded since the last line, %lld in all", a->path, a->cap,
	    a->lost - a->lost_logged, a->lost);
	a->lost_logged = a->lost;
	a->lost_log_at = now;
}

/* An empty queue: waits (a->mu held) for rows or closing. */
static void
wait_for_rows(struct writer *w)
{
	struct audit *a = w->a;

	a->writer_waiting = 1;
	pthread_cond_wait(&a->wake, &a->mu);
	a->writer_waiting = 0;
	w->due = mono_ms() + a->flush_interval_ms;
}

/*
 * Rows wait (a->mu held): returns 0 when it is time to write them, or 1
 * after waiting until then, or for a push, or for closing.
 */
static int
wait_for_turn(struct writer *w)
{
	struct audit *a = w->a;
	long long now = mono_ms(), at;

	if (w->failing) {
		at = w->retry_at;
		if (a->closing && a->give_up_at < at)
			at = a->give_up_at;
	} else if (a->closing || a->count >= a->batch)
		at = now;
	else
		at = w->due;
	if (now >= at)
		return 0;
	/* Backing off, pushes need not wake the writer. */
	a->writer_waiting = !w->failing;
	wait_until(&a->wake, &a->mu, at);
	a->writer_waiting = 0;
	return 1;
}

/* n rows were committed: off the queue, and the episode, if any, is
 * over. Called without a->mu; returns with it. */
static void
written(struct writer *w, size_t n)
{
	struct audit *a = w->a;
	struct timespec gap = { 0, AUDIT_GAP_US * 1000 };
	size_t i;

	/* Out of the ring first: audit_stats() reads its head. */
	pthread_mutex_lock(&a->mu);
	drop_rows(a, n);
	pthread_mutex_unlock(&a->mu);
	for (i = 0; i < n; i++)
		free(a->txn[i]);
	if (a->on_write != NULL)
		a->on_write();
	pthread_mutex_lock(&a->mu);
	if (w->reported)
		log_info("audit: %s: recovered, %zu rows written, %zu waiting",
		    a->path, n, a->count);
	w->failing = w->reported = 0;
	if ((w->most *= 2) > a->txn_max)
		w->most = a->txn_max;
	w->due = mono_ms() + a->flush_interval_ms;
	if (a->count >= a->batch || (a->closing && a->count > 0)) {
		/*
		 * Back to back, our BEGIN would follow our COMMIT within
		 * microseconds, and a writer in another process, polling for
		 * the lock, would starve.
		 */
		pthread_mutex_unlock(&a->mu);
		nanosleep(&gap, NULL);
		pthread_mutex_lock(&a->mu);
	}
}

/*
 * The attempt begun at attempt_at failed: counted, the next one backed
 * off, the episode logged once. Called without a->mu; returns with it.
 * Returns -1 when closing and give_up_at has passed (logged), else 0.
 */
static int
failed(struct writer *w, long long attempt_at)
{
	struct audit *a = w->a;
	long long now;

	pthread_mutex_lock(&a->mu);
	a->failures++;
	/* Little room: fewer rows a transaction, down to one, so that what
	 * space there is gets used. */
	if (a->err_full && (w->most /= 2) == 0)
		w->most = 1;
	if (a->on_write != NULL) {
		pthread_mutex_unlock(&a->mu);
		a->on_write();
		pthread_mutex_lock(&a->mu);
	}
	now = mono_ms();
	if (!w->failing) {
		w->failing = 1;
		w->failing_since = attempt_at;
		w->backoff = AUDIT_BACKOFF_MIN_MS;
	} else if ((w->backoff *= 2) > AUDIT_BACKOFF_MAX_MS)
		w->backoff = AUDIT_BACKOFF_MAX_MS;
	/* Other writers' short turns are normal; a lock held for long is
	 * not. */
	if (!w->reported && (!a->err_busy ||
	    now - w->failing_since >= AUDIT_BUSY_REPORT_MS)) {
		w->reported = 1;
		log_error("audit: %s: cannot write: %s; %zu rows waiting, "
		    "kept and retried", a->path, a->err, a->count);
	}
	w->retry_at = now + w->backoff;
	if (a->closing && now >= a->give_up_at) {
		log_error("audit: %s: giving up at shutdown: %s; %zu rows not "
		    "written", a->path, a->err, a->count);
		return -1;
	}
	return 0;
}

void *
audit_writer_main(void *arg)
{
	struct writer w = { .a = arg };
	struct audit *a = arg;
	long long attempt_at, done;
	size_t n;

	pthread_setname_np(pthread_self(), "audit-writer");
	w.most = a->txn_max;
	pthread_mutex_lock(&a->mu);
	w.due = mono_ms() + a->flush_interval_ms;
	for (;;) {
		log_lost(a, 0);
		if (a->count == 0) {
			if (a->closing)
				break;
			wait_for_rows(&w);
			continue;
		}
		if (wait_for_turn(&w))
			continue;
		n = a->count < w.most ? a->count : w.most;
		take_rows(a, n);
		pthread_mutex_unlock(&a->mu);

		attempt_at = mono_ms();
		if ((done = write_rows(a, a->txn, n)) > 0)
			written(&w, (size_t)done);
		else if (failed(&w, attempt_at) == -1)
			break;
	}
	log_lost(a, 1);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

void
audit_write_inline(struct audit *a)
{
	long long done, backoff = AUDIT_BACKOFF_MIN_MS;
	size_t n, i;

	while (a->count > 0) {
		n = a->count < a->txn_max ? a->count : a->txn_max;
		take_rows(a, n);
		if ((done = write_rows(a, a->txn, n)) > 0) {
			for (i = 0; i < (size_t)done; i++)
				free(a->txn[i]);
			drop_rows(a, (size_t)done);
			continue;
		}
		a->failures++;
		if (mono_ms() + backoff > a->give_up_at) {
			log_error("audit: %s: cannot write: %s; %zu rows not "
			    "written", a->path, a->err, a->count);
			break;
		}
		sleep_ms(backoff);
		if ((backoff *= 2) > AUDIT_BACKOFF_MAX_MS)
			backoff = AUDIT_BACKOFF_MAX_MS;
	}
}
