/*
 * limiter: the only code that talks to Redis. One connection per process,
 * shared by all workers: the calls of requests that arrive while a round
 * trip is under way are sent together in the next one (one write, one
 * read, and one wake-up of Redis for all of them) by whichever worker
 * comes first, the "leader"; the others wait for their verdicts. Each call
 * is still one EVALSHA, atomic on its own in Redis, exactly as when every
 * worker had its own connection: batching changes the cost of a decision,
 * not the decision. Also shared is the knowledge that Redis is down, so a
 * dead server costs one probe per back-off period instead of one timeout
 * per request.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "limiter.h"
#include "log.h"
#include "scripts.h"

#define BACKOFF_FIRST_MS	50
#define BACKOFF_MAX_MS		500	/* back within half a second of Redis */
#define KEY_MAX			(RLG_MAX_KEY + 256)

/* A Redis connection and the scripts' SHA1s on it. */
struct conn {
	redisContext	*ctx;
	char		 target[512];	/* what ctx is connected to */
	char		 sha[RLG_ALGORITHM_COUNT][41];
};

enum { JOB_QUEUED, JOB_SENT, JOB_DONE };

/*
 * One per worker thread: the request it is deciding, while
 * limiter_decide() runs. Guarded by lane.mu, except m and v, which
 * belong to the leader while the job is JOB_SENT.
 */
struct limiter {
	pthread_cond_t		 cv;	/* done, or its turn to lead (CLOCK_MONOTONIC) */
	const struct conf	*c;
	const struct match	*m;
	size_t			 n;
	struct verdict		*v;
	int			 state;
	int			 rc;
	struct limiter		*next;	/* queue */
};

/* The process's way to Redis. */
static struct {
	pthread_mutex_t		 mu;
	struct limiter		*head, *tail;	/* queued jobs, oldest first */
	int			 busy;		/* a leader is talking to Redis */
	size_t			 users;		/* limiters alive */
	/* The leader's alone: */
	struct conn		 conn;
	struct limiter		**batch;	/* users entries */
	size_t			 batch_cap;
	struct { struct limiter *j; size_t i; } *retry;	/* NOSCRIPT calls */
	size_t			 retry_cap;
} lane = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Shared by all workers of the process: is Redis down, until when. */
static atomic_llong	down_until_ms;
static atomic_llong	backoff_ms;
static atomic_int	outage_logged;

static long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timeval
tv_ms(long long ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	return tv;
}

static void
disconnect(struct conn *k)
{
	if (k->ctx != NULL)
		redisFree(k->ctx);
	k->ctx = NULL;
}

/* Everything that, when changed by a reload, needs a new connection. */
static void
target_of(const struct conf *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s|%s|%s|%d", c->redis_address,
	    c->redis_username ? c->redis_username : "",
	    c->redis_password ? c->redis_password : "", c->redis_database);
}

/* Runs one command on k->ctx and checks its reply is not an error. */
static int
command_ok(struct conn *k, char *err, size_t errlen, int argc,
    const char **argv)
{
	redisReply *rep;
	int rc = -1;

	rep = redisCommandArgv(k->ctx, argc, argv, NULL);
	if (rep == NULL)
		snprintf(err, errlen, "%s: %s", argv[0], k->ctx->errstr);
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(err, errlen, "%s: %s", argv[0], rep->str);
	else
		rc = 0;
	freeReplyObject(rep);
	return rc;
}

static int
load_scripts(struct conn *k, char *err, size_t errlen)
{
	redisReply *rep;
	int a;

	for (a = 0; a < RLG_ALGORITHM_COUNT; a++) {
		const struct rlg_script *s =
		    scripts_find(conf_algorithm_name((enum rlg_algorithm)a));

		k->sha[a][0] = '\0';
		if (s == NULL)
			continue;
		rep = redisCommand(k->ctx, "SCRIPT LOAD %s", s->source);
		if (rep == NULL || rep->type != REDIS_REPLY_STRING ||
		    rep->len != 40) {
			snprintf(err, errlen, "SCRIPT LOAD %s.lua: %s", s->name,
			    rep == NULL ? k->ctx->errstr :
			    rep->type == REDIS_REPLY_ERROR ? rep->str :
			    "unexpected reply");
			freeReplyObject(rep);
			return -1;
		}
		memcpy(k->sha[a], rep->str, 41);
		freeReplyObject(rep);
	}
	return 0;
}

/* Opens, authenticates and prepares a connection. */
static int
connect_redis(struct conn *k, const struct conf *c, char *err,
    size_t errlen)
{
	const char *addr = c->redis_address;
	char host[256], db[16];
	struct timeval ct = tv_ms(c->redis_connect_timeout_ms);
	const char *colon;
	int port;

	disconnect(k);
	if (strncmp(addr, "unix:", 5) == 0) {
		k->ctx = redisConnectUnixWithTimeout(addr + 5, ct);
	} else {
		colon = strrchr(addr, ':');
		if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
			snprintf(err, errlen, "bad address");
			return -1;
		}
		/* "[::1]:6379": hiredis wants the bare address. */
		if (addr[0] == '[')
			snprintf(host, sizeof(host), "%.*s",
			    (int)(colon - addr - 2), addr + 1);
		else
			snprintf(host, sizeof(host), "%.*s",
			    (int)(colon - addr), addr);
		port = atoi(colon + 1);	/* checked by conf */
		k->ctx = redisConnectWithTimeout(host, port, ct);
	}
	if (k->ctx == NULL || k->ctx->err) {
		snprintf(err, errlen, "%s", k->ctx ? k->ctx->errstr :
		    "out of memory");
		goto fail;
	}
	if (redisSetTimeout(k->ctx, tv_ms(c->redis_timeout_ms)) != REDIS_OK) {
		snprintf(err, errlen, "cannot set timeout: %s", k->ctx->errstr);
		goto fail;
	}
	/* TCP only: on a unix socket it fails and leaves ctx in error. */
	if (strncmp(addr, "unix:", 5) != 0)
		redisEnableKeepAlive(k->ctx);
	if (c->redis_password != NULL) {
		const char *argv[3] = { "AUTH", c->redis_username,
		    c->redis_password };

		if (c->redis_username == NULL) {
			argv[1] = c->redis_password;
			if (command_ok(k, err, errlen, 2, argv) == -1)
				goto fail;
		} else if (command_ok(k, err, errlen, 3, argv) == -1)
			goto fail;
	}
	if (c->redis_database != 0) {
		const char *argv[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", c->redis_database);
		if (command_ok(k, err, errlen, 2, argv) == -1)
			goto fail;
	}
	if (load_scripts(k, err, errlen) == -1)
		goto fail;
	target_of(c, k->target, sizeof(k->target));
	return 0;
fail:
	disconnect(k);
	return -1;
}

/* Redis failed us: back off, and say so once per outage. */
static void
mark_down(const struct conf *c, const char *why)
{
	long long b = atomic_load(&backoff_ms);

	b = b == 0 ? BACKOFF_FIRST_MS : b * 2;
	if (b > BACKOFF_MAX_MS)
		b = BACKOFF_MAX_MS;
	atomic_store(&backoff_ms, b);
	atomic_store(&down_until_ms, mono_ms() + b);
	if (atomic_exchange(&outage_logged, 1) == 0)
		log_error("redis %s: %s; answering with on_error until it is "
		    "back", c->redis_address, why);
}

static void
mark_up(const struct conf *c)
{
	atomic_store(&backoff_ms, 0);
	atomic_store(&down_until_ms, 0);
	if (atomic_exchange(&outage_logged, 0) == 1)
		log_info("redis %s answers again", c->redis_address);
}

/*
 * Makes sure k has a usable connection. While Redis is known to be down,
 * only one attempt per back-off period is made.
 */
static int
ensure_connected(struct conn *k, const struct conf *c)
{
	char target[512], err[256];
	long long until, now;

	target_of(c, target, sizeof(target));
	if (k->ctx != NULL && strcmp(target, k->target) != 0)
		disconnect(k);	/* reloaded with another server or login */
	if (k->ctx != NULL)
		return 0;
	until = atomic_load(&down_until_ms);
	now = mono_ms();
	if (now < until)
		return -1;
	if (until != 0 && !atomic_compare_exchange_strong(&down_until_ms,
	    &until, now + atomic_load(&backoff_ms)))
		return -1;	/* another thread is probing */
	if (connect_redis(k, c, err, sizeof(err)) == -1) {
		mark_down(c, err);
		return -1;
	}
	mark_up(c);
	return 0;
}

static void
fmt_ll(char *buf, size_t len, long long v)
{
	snprintf(buf, len, "%lld", v);
}

/* The argv strings of one EVALSHA; hiredis copies them when appending. */
struct call {
	char	 key[KEY_MAX];
	char	 num[5][24];
	size_t	 keylen;
};

/* Appends EVALSHA for match m to k's output buffer (nothing is sent yet). */
static void
append_call(struct conn *k, const struct conf *c, const struct match *m)
{
	const struct rule *ru = m->rule;
	struct call cl;
	const char *argv[10];
	size_t argl[10];
	int i, n;

	n = snprintf(cl.key, sizeof(cl.key), "%s{%s:", c->key_prefix,
	    ru->name);
	memcpy(cl.key + n, m->key, m->key_len);
	cl.key[n + m->key_len] = '}';
	cl.keylen = (size_t)n + m->key_len + 1;
	fmt_ll(cl.num[0], sizeof(cl.num[0]), m->cost);
	fmt_ll(cl.num[1], sizeof(cl.num[1]), ru->limit);
	fmt_ll(cl.num[2], sizeof(cl.num[2]), ru->window_ms);
	cl.num[3][0] = cl.num[4][0] = '\0';
	if (ru->burst > 0)
		fmt_ll(cl.num[3], sizeof(cl.num[3]), ru->burst);
	if (ru->precision_ms > 0)
		fmt_ll(cl.num[4], sizeof(cl.num[4]), ru->precision_ms);

	argv[0] = "EVALSHA";
	argv[1] = k->sha[ru->algorithm];
	argv[2] = "1";
	argv[3] = cl.key;
	argv[4] = "";		/* now: Redis TIME, one clock for all gateways */
	for (i = 0; i < 5; i++)
		argv[5 + i] = cl.num[i];
	for (i = 0; i < 10; i++)
		argl[i] = strlen(argv[i]);
	argl[3] = cl.keylen;
	redisAppendCommandArgv(k->ctx, 10, argv, argl);
}

/* Reads one script reply into v. Returns 1 for NOSCRIPT, 0 done, -1 I/O. */
static int
read_verdict(struct conn *k, const struct match *m, struct verdict *v)
{
	redisReply *rep;
	long long *f[7];
	int i, rc = 0;

	if (redisGetReply(k->ctx, (void **)&rep) != REDIS_OK)
		return -1;
	memset(v, 0, sizeof(*v));
	if (rep->type == REDIS_REPLY_ERROR) {
		if (strncmp(rep->str, "NOSCRIPT", 8) == 0)
			rc = 1;
		else
			log_error("rule %s: redis: %s", m->rule->name, rep->str);
		freeReplyObject(rep);
		return rc;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 7) {
		log_error("rule %s: redis: the script's reply is not 7 integers",
		    m->rule->name);
		freeReplyObject(rep);
		return 0;
	}
	f[0] = &v->remaining;	/* allowed is an int: handled below */
	f[1] = &v->remaining;
	f[2] = &v->limit;
	f[3] = &v->reset_ms;
	f[4] = &v->retry_after_ms;
	f[5] = &v->now_us;
	f[6] = &v->delay_ms;
	for (i = 0; i < 7; i++)
		if (rep->element[i]->type != REDIS_REPLY_INTEGER)
			break;
	if (i == 7) {
		for (i = 1; i < 7; i++)
			*f[i] = rep->element[i]->integer;
		v->allowed = rep->element[0]->integer != 0;
		v->answered = 1;
	}
	freeReplyObject(rep);
	return 0;
}

struct limiter *
limiter_new(void)
{
	struct limiter *l, **batch;
	pthread_condattr_t ca;
	void *retry;
	int rc;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	if (pthread_condattr_init(&ca) != 0) {
		free(l);
		return NULL;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0) {
		free(l);
		return NULL;
	}
	/* Room for every worker's job in one batch: none is allocated per
	 * request. */
	pthread_mutex_lock(&lane.mu);
	if (lane.users + 1 > lane.batch_cap) {
		size_t cap = lane.batch_cap ? lane.batch_cap * 2 : 16;

		if ((batch = realloc(lane.batch, cap * sizeof(*batch))) != NULL)
			lane.batch = batch;
		if ((retry = realloc(lane.retry, cap * RLG_MAX_MATCHES *
		    sizeof(*lane.retry))) != NULL)
			lane.retry = retry;
		if (batch == NULL || retry == NULL) {
			pthread_mutex_unlock(&lane.mu);
			pthread_cond_destroy(&l->cv);
			free(l);
			return NULL;
		}
		lane.batch_cap = cap;
		lane.retry_cap = cap * RLG_MAX_MATCHES;
	}
	lane.users++;
	pthread_mutex_unlock(&lane.mu);
	return l;
}

void
limiter_free(struct limiter *l)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&lane.mu);
	/* The last one out closes the connection: nobody can be leading. */
	if (--lane.users == 0) {
		disconnect(&lane.conn);
		free(lane.batch);
		free(lane.retry);
		lane.batch = NULL;
		lane.retry = NULL;
		lane.batch_cap = lane.retry_cap = 0;
	}
	pthread_mutex_unlock(&lane.mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

/*
 * The leader's round trip for the jobs batch[0..nb), all of conf c: every
 * call in one write, every reply in one read (as far as the socket
 * allows), then once more for the calls that met NOSCRIPT (Redis
 * restarted or SCRIPT FLUSH). Sets each job's rc. Called without lane.mu.
 */
static void
run_batch(const struct conf *c, struct limiter **batch, size_t nb)
{
	struct conn *k = &lane.conn;
	size_t b, i, nretry = 0, r;
	int rc, pass;
	char err[256];

	for (b = 0; b < nb; b++)
		batch[b]->rc = -1;
	if (ensure_connected(k, c) == -1)
		return;
	for (b = 0; b < nb; b++)
		for (i = 0; i < batch[b]->n; i++)
			append_call(k, batch[b]->c, &batch[b]->m[i]);
	for (b = 0; b < nb; b++) {
		struct limiter *j = batch[b];

		for (i = 0; i < j->n; i++) {
			rc = read_verdict(k, &j->m[i], &j->v[i]);
			if (rc == -1)
				goto io_error;
			if (rc == 1) {
				lane.retry[nretry].j = j;
				lane.retry[nretry++].i = i;
			}
		}
	}
	for (pass = 1; pass < 2 && nretry > 0; pass++) {
		if (load_scripts(k, err, sizeof(err)) == -1) {
			mark_down(c, err);
			disconnect(k);
			return;
		}
		for (r = 0; r < nretry; r++)
			append_call(k, lane.retry[r].j->c,
			    &lane.retry[r].j->m[lane.retry[r].i]);
		for (r = 0; r < nretry; r++)
			if (read_verdict(k, &lane.retry[r].j->m[lane.retry[r].i],
			    &lane.retry[r].j->v[lane.retry[r].i]) == -1)
				goto io_error;
	}
	for (b = 0; b < nb; b++) {
		batch[b]->rc = 0;
		for (i = 0; i < batch[b]->n; i++)
			if (!batch[b]->v[i].answered)
				batch[b]->rc = -1;
	}
	return;
io_error:
	/* A timeout or a broken connection: replies still on their way would
	 * be read as someone else's, so the connection goes, and every job of
	 * the batch answers with on_error (verdicts not read stay unanswered). */
	mark_down(c, k->ctx->errstr[0] ? k->ctx->errstr : strerror(errno));
	disconnect(k);
}

/*
 * Called with lane.mu held and lane.busy clear, by a worker whose job is
 * queued or done: takes the queued jobs that share the oldest one's
 * configuration (all of them, except around a reload) and runs them.
 * Returns with lane.mu held.
 */
static void
lead(struct limiter *self)
{
	const struct conf *c = lane.head->c;
	size_t nb = 0, b;

	lane.busy = 1;
	while (lane.head != NULL && lane.head->c == c) {
		struct limiter *j = lane.head;

		lane.head = j->next;
		j->next = NULL;
		j->state = JOB_SENT;
		lane.batch[nb++] = j;
	}
	if (lane.head == NULL)
		lane.tail = NULL;
	pthread_mutex_unlock(&lane.mu);

	run_batch(c, lane.batch, nb);
	{ static long long nbt, nbj; nbt++; nbj += nb; if (nbt % 2000 == 0) fprintf(stderr, "DBG batches %lld jobs %lld avg %.2f\n", nbt, nbj, (double)nbj/nbt); }

	pthread_mutex_lock(&lane.mu);
	for (b = 0; b < nb; b++) {
		lane.batch[b]->state = JOB_DONE;
		if (lane.batch[b] != self)
			pthread_cond_signal(&lane.batch[b]->cv);
	}
	lane.busy = 0;
	/* The oldest waiting job's worker leads the next round trip. */
	if (lane.head != NULL && lane.head != self)
		pthread_cond_signal(&lane.head->cv);
}

/* Takes l's job out of the queue (it is queued). lane.mu held. */
static void
unqueue(struct limiter *l)
{
	struct limiter **pp, *prev = NULL;

	for (pp = &lane.head; *pp != NULL; prev = *pp, pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			if (lane.tail == l)
				lane.tail = prev;
			l->next = NULL;
			return;
		}
}

int
limiter_decide(struct limiter *l, const struct conf *c,
    const struct match *m, size_t n, struct verdict *v)
{
	struct timespec ts;
	long long deadline;
	int rc;

	memset(v, 0, n * sizeof(*v));
	if (n == 0)
		return 0;
	if (n > RLG_MAX_MATCHES)
		return -1;
	l->c = c;
	l->m = m;
	l->n = n;
	l->v = v;
	l->rc = -1;
	l->state = JOB_QUEUED;
	l->next = NULL;
	/* Waiting for a turn counts against [redis] timeout too. */
	deadline = mono_ms() + c->redis_timeout_ms;
	ts.tv_sec = deadline / 1000;
	ts.tv_nsec = (deadline % 1000) * 1000000;

	pthread_mutex_lock(&lane.mu);
	if (lane.tail != NULL)
		lane.tail->next = l;
	else
		lane.head = l;
	lane.tail = l;
	while (l->state != JOB_DONE) {
		if (!lane.busy) {
			lead(l);
			continue;
		}
		if (l->state == JOB_SENT) {
			/* In the leader's hands: Redis's timeout bounds it. */
			pthread_cond_wait(&l->cv, &lane.mu);
			continue;
		}
		if (pthread_cond_timedwait(&l->cv, &lane.mu, &ts) == ETIMEDOUT &&
		    l->state == JOB_QUEUED && lane.busy) {
			unqueue(l);
			l->state = JOB_DONE;
			l->rc = -1;
		}
	}
	rc = l->rc;
	pthread_mutex_unlock(&lane.mu);
	return rc;
}

int
limiter_probe(const struct conf *c, char *errbuf, size_t errlen)
{
	struct conn k;
	int rc;

	memset(&k, 0, sizeof(k));
	rc = connect_redis(&k, c, errbuf, errlen);
	disconnect(&k);
	return rc;
}
