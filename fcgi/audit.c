/*
 * audit: the handle and its queue. Workers copy rows into a bounded queue
 * with audit_push(), which never waits; audit_open() starts the writer
 * thread (audit_writer.c), which takes a row off the queue only once the
 * transaction holding it has committed, and the checkpointer
 * (audit_ckpt.c). Both threads run at the process's priority, which is
 * the operator's to set. Not for reading the database: reports/ does
 * that; SQLite is audit_db.c's, dated names and retention audit_files.c's.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit_int.h"
#include "audit_files.h"
#include "clock.h"
#include "conf.h"
#include "decision.h"
#include "limiter.h"
#include "log.h"

/* audit_open()'s arguments: 0, or -1 with a sentence in errbuf. */
static int
check_args(const char *path, int queue_max, int batch,
    long long flush_interval_ms, char *errbuf, size_t errlen)
{
	if (path == NULL || *path == '\0') {
		snprintf(errbuf, errlen, "audit: no database path");
		return -1;
	}
	if (queue_max < 1 || batch < 1 || flush_interval_ms < 0) {
		snprintf(errbuf, errlen, "%s: queue (%d) and batch (%d) must "
		    "be at least 1, flush interval (%lld ms) at least 0",
		    path, queue_max, batch, flush_interval_ms);
		return -1;
	}
	return 0;
}

/*
 * The handle's names and sizes, and its queue's memory, into a (zeroed).
 * Returns 0, or -1 with errno set; what was allocated is a's to free.
 */
static int
init_queue(struct audit *a, const char *path, int queue_max, int batch,
    long long flush_interval_ms)
{
	if (strchr(path, '%') != NULL && (a->pattern = strdup(path)) == NULL)
		return -1;
	if (a->pattern != NULL ? audit_files_for(path, wall_ms(), a->path,
	    sizeof(a->path), &a->period_start_ms, &a->period_end_ms) == -1 :
	    snprintf(a->path, sizeof(a->path), "%s", path) >=
	    (int)sizeof(a->path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	a->cap = (size_t)queue_max;
	a->batch = (size_t)batch < a->cap ? (size_t)batch : a->cap;
	/* Beyond an hour it means "only full batches"; and no overflow. */
	a->flush_interval_ms = flush_interval_ms < 3600000 ? flush_interval_ms :
	    3600000;
	a->txn_max = a->batch > AUDIT_TXN_ROWS ? a->batch : AUDIT_TXN_ROWS;
	if (a->txn_max > a->cap)
		a->txn_max = a->cap;
	if ((a->ring = calloc(a->cap, sizeof(*a->ring))) == NULL ||
	    (a->txn = calloc(a->txn_max, sizeof(*a->txn))) == NULL ||
	    (a->counts = calloc(AUDIT_COUNTS, sizeof(*a->counts))) == NULL)
		return -1;
	return 0;
}

/* a's mutex and conditions: all of them (0), or none (-1, errno set). */
static int
init_locks(struct audit *a)
{
	pthread_condattr_t ca;
	int e;

	if ((e = pthread_mutex_init(&a->mu, NULL)) != 0)
		goto fail;
	if ((e = pthread_condattr_init(&ca)) != 0)
		goto fail_mu;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	e = pthread_cond_init(&a->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (e != 0)
		goto fail_mu;
	if ((e = pthread_cond_init(&a->ckpt, NULL)) != 0)
		goto fail_wake;
	return 0;
fail_wake:
	pthread_cond_destroy(&a->wake);
fail_mu:
	pthread_mutex_destroy(&a->mu);
fail:
	errno = e;
	return -1;
}

/*
 * Opens the database. Processes that create the file at once can deadlock
 * on the switch to WAL mode; SQLite then answers BUSY to one of them
 * without waiting, so the open is retried until AUDIT_OPEN_BUSY_MS.
 * Returns 0, or -1 with errbuf set.
 */
static int
open_db(struct audit *a, char *errbuf, size_t errlen)
{
	long long deadline = mono_ms() + AUDIT_OPEN_BUSY_MS;

	while (audit_db_open(a, errbuf, errlen) == -1) {
		if (!a->err_busy || mono_ms() >= deadline)
			return -1;
		sleep_ms(1 + getpid() % 10);	/* apart: forked alike */
	}
	return 0;
}

/* The checkpointer, then the writer. Returns 0, or -1 with errno set
 * when the writer could not start. */
static int
start_threads(struct audit *a)
{
	sigset_t all, old;
	int e;

	/* Signals are for the threads that serve; the writer only writes. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* Without a checkpointer the writer checkpoints itself. */
	a->ckpt_started = pthread_create(&a->ckpt_thread, NULL,
	    audit_ckpt_main, a) == 0;
	e = pthread_create(&a->thread, NULL, audit_writer_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return e != 0 ? -1 : 0;
}

/*
 * Frees a and what it holds: the rows still queued, the database, the
 * locks when locks_ok. Its threads have ended (or never started).
 */
static void
free_handle(struct audit *a, int locks_ok)
{
	size_t i;

	for (i = 0; i < a->count; i++)
		free(a->ring[(a->head + i) % a->cap]);
	audit_db_close(a);
	audit_ids_free(a);
	if (locks_ok) {
		pthread_cond_destroy(&a->ckpt);
		pthread_cond_destroy(&a->wake);
		pthread_mutex_destroy(&a->mu);
	}
	free(a->counts);
	free(a->txn);
	free(a->ring);
	free(a->pattern);
	free(a);
}

/* A checkpointer started for a handle that failed to open: ended. */
static void
stop_ckpt(struct audit *a)
{
	pthread_mutex_lock(&a->mu);
	a->closing = 1;
	pthread_cond_signal(&a->ckpt);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->ckpt_thread, NULL);
}

/* audit_open(), or with inline_mode set audit_open_inline(). */
static struct audit *
open_handle(const char *path, int queue_max, int batch,
    long long flush_interval_ms, int inline_mode, char *errbuf,
    size_t errlen)
{
	struct audit *a;
	char dummy[1];
	int locks_ok = 0;

	if (errbuf == NULL || errlen == 0) {
		errbuf = dummy;
		errlen = sizeof(dummy);
	}
	if (check_args(path, queue_max, batch, flush_interval_ms, errbuf,
	    errlen) == -1)
		return NULL;
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (init_queue(a, path, queue_max, batch, flush_interval_ms) == -1 ||
	    init_locks(a) == -1)
		goto fail_errno;
	locks_ok = 1;
	/* The database is opened by audit_close(), after the reply. */
	if ((a->inline_mode = inline_mode))
		return a;
	if (open_db(a, errbuf, errlen) == -1)
		goto fail;
	if (start_threads(a) == -1)
		goto fail_errno;
	return a;

fail_errno:
	snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
fail:
	if (a->ckpt_started)
		stop_ckpt(a);
	free_handle(a, locks_ok);
	return NULL;
}

struct audit *
audit_open(const char *path, int queue_max, int batch,
    long long flush_interval_ms, char *errbuf, size_t errlen)
{
	return open_handle(path, queue_max, batch, flush_interval_ms, 0,
	    errbuf, errlen);
}

struct audit *
audit_open_inline(const char *path, int queue_max, char *errbuf,
    size_t errlen)
{
	return open_handle(path, queue_max, queue_max, 0, 1, errbuf, errlen);
}

int
audit_trusted(const char *path, char *errbuf, size_t errlen)
{
	char file[PATH_MAX];
	long long start, end;

	if (path == NULL)
		return 0;
	/* A name that does not fit is audit_open()'s to report. */
	if (strchr(path, '%') != NULL ? audit_files_for(path, wall_ms(), file,
	    sizeof(file), &start, &end) == -1 : snprintf(file, sizeof(file),
	    "%s", path) >= (int)sizeof(file))
		return 0;
	return audit_files_trust(file, errbuf, errlen);
}

/*
 * A copy of row in one block: its strings, each cut at AUDIT_TEXT_MAX,
 * after it, and its pointers into them. NULL when out of memory.
 */
static struct qrow *
copy_row(const struct audit_row *row)
{
	const char *src[T_COUNT];
	const char **dst[T_COUNT];
	size_t len[T_COUNT], size = 0;
	struct qrow *q;
	char *p;
	int i;

	src[T_REQUEST_ID] = row->request_id;
	src[T_RULE] = row->rule;
	src[T_KEY] = row->key;
	src[T_ALGORITHM] = row->algorithm;
	src[T_REASON] = row->reason;
	src[T_METHOD] = row->method;
	src[T_PATH] = row->path;
	src[T_CLIENT_IP] = row->client_ip;
	for (i = 0; i < T_COUNT; i++) {
		len[i] = src[i] != NULL ? strnlen(src[i], AUDIT_TEXT_MAX) : 0;
		size += len[i] + 1;
	}

	if ((q = malloc(sizeof(*q) + size)) == NULL)
		return NULL;
	q->r = *row;
	q->r.allowed = row->allowed != 0;
	dst[T_REQUEST_ID] = &q->r.request_id;
	dst[T_RULE] = &q->r.rule;
	dst[T_KEY] = &q->r.key;
	dst[T_ALGORITHM] = &q->r.algorithm;
	dst[T_REASON] = &q->r.reason;
	dst[T_METHOD] = &q->r.method;
	dst[T_PATH] = &q->r.path;
	dst[T_CLIENT_IP] = &q->r.client_ip;
	p = q->text;
	for (i = 0; i < T_COUNT; i++) {
		q->len[i] = (int)len[i];
		if (src[i] == NULL) {
			*dst[i] = NULL;
			continue;
		}
		memcpy(p, src[i], len[i]);
		p[len[i]] = '\0';
		*dst[i] = p;
		p += len[i] + 1;
	}
	return q;
}

int
audit_push(struct audit *a, const struct audit_row *row)
{
	struct qrow *q;

	if (a == NULL || row == NULL || row->request_id == NULL ||
	    row->reason == NULL) {
		errno = EINVAL;
		return -1;
	}
	/* The copy is made before taking the lock: the writer waits less. */
	if ((q = copy_row(row)) == NULL)
		return -1;

	pthread_mutex_lock(&a->mu);
	if (a->stopping) {
		pthread_mutex_unlock(&a->mu);
		free(q);
		errno = EPIPE;
		return -1;
	}
	/* A request never waits for the disk: a row that finds no room is
	 * lost, counted, and logged by the writer. */
	if (a->count == a->cap) {
		a->lost++;
		pthread_mutex_unlock(&a->mu);
		free(q);
		errno = ENOSPC;
		return -1;
	}
	a->ring[(a->head + a->count) % a->cap] = q;
	a->count++;
	if (a->writer_waiting && (a->count == 1 || a->count >= a->batch))
		pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

void
audit_stop(struct audit *a)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->stopping = 1;
	pthread_mutex_unlock(&a->mu);
}

long long
audit_close(struct audit *a, long long give_up_ms)
{
	long long lost;

	if (a == NULL)
		return 0;
	pthread_mutex_lock(&a->mu);
	a->stopping = 1;
	a->closing = 1;
	a->give_up_at = mono_ms() + (give_up_ms > 0 ? give_up_ms : 0);
	pthread_cond_broadcast(&a->wake);
	pthread_cond_signal(&a->ckpt);
	pthread_mutex_unlock(&a->mu);
	if (a->inline_mode)
		audit_write_inline(a);
	else {
		pthread_join(a->thread, NULL);
		if (a->ckpt_started)
			pthread_join(a->ckpt_thread, NULL);
	}

	lost = (long long)a->count;
	free_handle(a, 1);
	return lost;
}

void
audit_on_write(struct audit *a, void (*fn)(void))
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->on_write = fn;
	pthread_mutex_unlock(&a->mu);
}

void
audit_keep_rows(struct audit *a, long long keep_rows_ms)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->keep_rows_ms = keep_rows_ms;
	pthread_mutex_unlock(&a->mu);
}

void
audit_keep(struct audit *a, long long keep_ms)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->keep_ms = keep_ms;
	pthread_mutex_unlock(&a->mu);
}

int
audit_full(struct audit *a)
{
	int full;

	if (a == NULL)
		return 0;
	pthread_mutex_lock(&a->mu);
	full = a->count == a->cap;
	pthread_mutex_unlock(&a->mu);
	return full;
}

void
audit_stats(struct audit *a, struct audit_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	st->queued = (long long)a->count;
	st->written = a->written;
	st->failures = a->failures;
	st->lost = a->lost;
	if (a->count > 0)
		st->oldest_ts_ms = a->ring[a->head]->r.ts_ms;
	pthread_mutex_unlock(&a->mu);
}

/* The row of a decision with no rule: a bad request, or none matched. */
static int
record_ruleless(struct audit *a, const struct decision *d,
    struct audit_row *row)
{
	if (d->bad_detail == NULL && !d->conf->audit_unmatched)
		return 0;
	row->rule = d->bad_rule ? d->bad_rule->name : NULL;
	row->allowed = d->allowed;
	row->reason = decision_reason_name(d->bad_detail ?
	    RLG_REASON_BAD_REQUEST : RLG_REASON_UNMATCHED);
	return audit_push(a, row);
}

int
audit_record(struct audit *a, const struct decision *d)
{
	struct audit_row row;
	long long ts_ms;
	size_t i;
	int rc = 0;

	if (a == NULL)
		return 0;
	memset(&row, 0, sizeof(row));
	row.request_id = d->req->id;
	row.method = d->req->method;
	row.path = d->req->path;
	row.client_ip = d->req->ip;
	row.status = d->status;
	row.latency_us = d->latency_us;
	row.ts_ms = ts_ms = wall_ms();
	row.cost = row.limit_value = row.window_ms = row.burst = -1;
	row.remaining = row.retry_after_ms = row.delay_ms = -1;
	if (d->n == 0 || d->bad_detail != NULL)
		return record_ruleless(a, d, &row);
	for (i = 0; i < d->n; i++) {
		const struct rule *ru = d->m[i].rule;
		const struct verdict *v = &d->v[i];

		row.rule = ru->name;
		row.key = d->m[i].key;
		row.algorithm = conf_algorithm_name(ru->algorithm);
		row.allowed = d->rule_allowed[i];
		row.reason = decision_reason_name(d->rule_reason[i]);
		row.cost = d->m[i].cost;
		/* The parameters the decision used: the rule's, or its
		 * override's in Redis (overrides = redis). */
		row.limit_value = v->limit;
		row.window_ms = v->window_ms;
		row.burst = v->burst;
		row.ts_ms = ts_ms;
		row.remaining = row.retry_after_ms = row.delay_ms = -1;
		if (v->answered) {
			/* Redis TIME: the clock every gateway shares. */
			row.ts_ms = v->now_us / 1000;
			row.remaining = v->remaining;
			row.retry_after_ms = v->retry_after_ms;
			row.delay_ms = v->delay_ms;
		}
		/* Unlimited: no limit applied, nothing was counted. */
		if (v->answered && v->override == RLG_OVERRIDE_UNLIMITED)
			row.limit_value = row.window_ms = row.burst =
			    row.remaining = -1;
		if (audit_push(a, &row) == -1 && rc == 0)
			rc = -1;
	}
	return rc;
}
