/*
 * TEMPORARY stand-in for branch redis's Redis layer: single mode only, one
 * connection per struct redis, so that branch limiter builds and its tests
 * run before branch redis lands. `git merge redis` takes theirs.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "scripts.h"

#define BACKOFF_FIRST_MS	50
#define BACKOFF_MAX_MS		500

/* TEMPORARY: fcgi/scripts.c's, from branch lua. */
const char rlg_library[] = "";
const char rlg_library_version[] = "";

struct redis {
	redisContext	*ctx;
	unsigned long	 conf_id;
	long		 epoch;
	struct metrics_worker *metrics;
};

static atomic_llong	down_until_ms;
static atomic_llong	backoff_ms;
static atomic_long	outage_epoch;
static atomic_int	outage_logged;

static struct timeval
tv_ms(long long ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };

	return tv;
}

struct redis *
redis_new(void)
{
	return calloc(1, sizeof(struct redis));
}

static void
disconnect(struct redis *r)
{
	if (r->ctx != NULL)
		redisFree(r->ctx);
	r->ctx = NULL;
}

void
redis_free(struct redis *r)
{
	if (r == NULL)
		return;
	disconnect(r);
	free(r);
}

void
redis_set_metrics(struct redis *r, struct metrics_worker *w)
{
	r->metrics = w;
}

int
slot_of(const char *key, size_t len)
{
	unsigned crc = 0;
	size_t i, s, e;
	int b;

	for (s = 0; s < len && key[s] != '{'; s++)
		;
	if (s < len) {
		for (e = s + 1; e < len && key[e] != '}'; e++)
			;
		if (e < len && e > s + 1) {
			key += s + 1;
			len = e - s - 1;
		}
	}
	for (i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)key[i] << 8;
		for (b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
	}
	return (int)(crc & 0xffff & 16383);
}

static int
command_ok(redisContext *ctx, char *err, size_t errlen, int argc,
    const char **argv)
{
	redisReply *rep;
	int rc = -1;

	rep = redisCommandArgv(ctx, argc, argv, NULL);
	if (rep == NULL)
		snprintf(err, errlen, "%s: %s", argv[0], ctx->errstr);
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(err, errlen, "%s: %s", argv[0], rep->str);
	else
		rc = 0;
	freeReplyObject(rep);
	return rc;
}

static redisContext *
dial(const struct conf *c, char *err, size_t errlen)
{
	const char *addr = c->redis_address, *portstr;
	struct timeval ct = tv_ms(c->redis_connect_timeout_ms);
	redisContext *ctx;
	char host[256], db[16];

	if (strncmp(addr, "unix:", 5) == 0)
		ctx = redisConnectUnixWithTimeout(addr + 5, ct);
	else {
		if ((portstr = conf_split_address(addr, host,
		    sizeof(host))) == NULL) {
			snprintf(err, errlen, "bad address");
			return NULL;
		}
		ctx = redisConnectWithTimeout(host, atoi(portstr), ct);
	}
	if (ctx == NULL || ctx->err) {
		snprintf(err, errlen, "%s", ctx ? ctx->errstr : "out of memory");
		goto fail;
	}
	if (redisSetTimeout(ctx, tv_ms(c->redis_timeout_ms)) != REDIS_OK) {
		snprintf(err, errlen, "cannot set timeout: %s", ctx->errstr);
		goto fail;
	}
	if (c->redis_password != NULL) {
		const char *argv[3] = { "AUTH", c->redis_username,
		    c->redis_password };

		if (c->redis_username == NULL) {
			argv[1] = c->redis_password;
			if (command_ok(ctx, err, errlen, 2, argv) == -1)
				goto fail;
		} else if (command_ok(ctx, err, errlen, 3, argv) == -1)
			goto fail;
	}
	if (c->redis_database != 0) {
		const char *argv[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", c->redis_database);
		if (command_ok(ctx, err, errlen, 2, argv) == -1)
			goto fail;
	}
	return ctx;
fail:
	if (ctx != NULL)
		redisFree(ctx);
	return NULL;
}

static int
load_library(redisContext *ctx, char *err, size_t errlen)
{
	const char *argv[4] = { "FUNCTION", "LOAD", "REPLACE", rlg_library };

	return command_ok(ctx, err, errlen, 4, argv);
}

static void
mark_down(const struct conf *c, const char *why)
{
	long long b = atomic_load(&backoff_ms);

	b = b == 0 ? BACKOFF_FIRST_MS : b * 2;
	if (b > BACKOFF_MAX_MS)
		b = BACKOFF_MAX_MS;
	atomic_store(&backoff_ms, b);
	atomic_store(&down_until_ms, mono_ms() + b);
	atomic_fetch_add(&outage_epoch, 1);
	if (atomic_exchange(&outage_logged, 1) == 0)
		log_error("redis %s: %s; answering with on_error until it is "
		    "back", c->redis_address, why);
}

static void
mark_up(const struct conf *c)
{
	if (atomic_load(&backoff_ms) == 0)
		return;
	atomic_store(&backoff_ms, 0);
	atomic_store(&down_until_ms, 0);
	if (atomic_exchange(&outage_logged, 0) == 1)
		log_info("redis %s answers again", c->redis_address);
}

static int
ensure(struct redis *r, const struct conf *c)
{
	char err[256];
	long long until, now;

	if (r->ctx != NULL && (r->conf_id != c->id ||
	    r->epoch != atomic_load(&outage_epoch)))
		disconnect(r);
	if (r->ctx != NULL)
		return 0;
	until = atomic_load(&down_until_ms);
	now = mono_ms();
	if (now < until)
		return -1;
	if (until != 0 && !atomic_compare_exchange_strong(&down_until_ms,
	    &until, now + atomic_load(&backoff_ms)))
		return -1;
	if ((r->ctx = dial(c, err, sizeof(err))) == NULL) {
		metrics_redis_error(r->metrics);
		mark_down(c, err);
		return -1;
	}
	r->conf_id = c->id;
	r->epoch = atomic_load(&outage_epoch);
	return 0;
}

static int
needs_library(const redisReply *rep)
{
	return rep != NULL && rep->type == REDIS_REPLY_ERROR &&
	    (strncmp(rep->str, "ERR Function not found", 22) == 0 ||
	    strncmp(rep->str, "rlgate: library version", 23) == 0);
}

int
redis_run(struct redis *r, const struct conf *c, struct redis_call *calls,
    size_t n)
{
	size_t i, bad = 0;
	long long t0;
	int pass, again;
	redisReply *rep;
	char err[256];

	for (i = 0; i < n; i++) {
		calls[i].reply = NULL;
		calls[i].status = RLG_CALL_UNSENT;
		calls[i].node = -1;
	}
	if (n == 0)
		return 0;
	if (ensure(r, c) == -1)
		return (int)n;
	t0 = mono_us();
	for (pass = 0; pass < 2; pass++) {
		again = 0;
		for (i = 0; i < n; i++)
			if (calls[i].status == RLG_CALL_UNSENT)
				redisAppendCommandArgv(r->ctx, calls[i].argc,
				    calls[i].argv, calls[i].argvlen);
		for (i = 0; i < n; i++) {
			if (calls[i].status != RLG_CALL_UNSENT)
				continue;
			if (redisGetReply(r->ctx, (void **)&rep) != REDIS_OK) {
				metrics_redis_error(r->metrics);
				mark_down(c, r->ctx->errstr[0] ? r->ctx->errstr :
				    strerror(errno));
				disconnect(r);
				for (; i < n; i++)
					if (calls[i].status == RLG_CALL_UNSENT)
						calls[i].status = RLG_CALL_FAILED;
				goto count;
			}
			if (pass == 0 && needs_library(rep)) {
				freeReplyObject(rep);
				again = 1;
				continue;
			}
			calls[i].reply = rep;
			calls[i].status = RLG_CALL_OK;
			calls[i].node = 0;
		}
		if (!again)
			break;
		if (load_library(r->ctx, err, sizeof(err)) == -1) {
			mark_down(c, err);
			disconnect(r);
			goto count;
		}
	}
	mark_up(c);
	metrics_redis_latency(r->metrics, mono_us() - t0);
count:
	for (i = 0; i < n; i++)
		bad += calls[i].status != RLG_CALL_OK;
	return (int)bad;
}

const char *
redis_node_address(const struct redis *r, int i)
{
	(void)r;
	(void)i;
	return "";
}

int
redis_health(struct redis *r, const struct conf *c, struct redis_health *h,
    size_t max, char *errbuf, size_t errlen)
{
	const char *argv[1] = { "PING" };
	redisReply *rep;
	long long t0;

	(void)errbuf;
	(void)errlen;
	if (max == 0)
		return 1;
	memset(h, 0, sizeof(*h));
	snprintf(h->address, sizeof(h->address), "%s", c->redis_address);
	snprintf(h->role, sizeof(h->role), "master");
	if (ensure(r, c) == -1) {
		snprintf(h->errstr, sizeof(h->errstr), "not connected");
		return 1;
	}
	t0 = mono_us();
	rep = redisCommandArgv(r->ctx, 1, argv, NULL);
	if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
		snprintf(h->errstr, sizeof(h->errstr), "PING: %s", rep != NULL ?
		    rep->str : r->ctx->errstr);
		freeReplyObject(rep);
		mark_down(c, h->errstr);
		disconnect(r);
		return 1;
	}
	freeReplyObject(rep);
	h->ok = 1;
	h->latency_us = mono_us() - t0;
	mark_up(c);
	return 1;
}

int
redis_probe(const struct conf *c, char *errbuf, size_t errlen)
{
	redisContext *ctx = dial(c, errbuf, errlen);
	int rc;

	if (ctx == NULL)
		return -1;
	rc = load_library(ctx, errbuf, errlen);
	redisFree(ctx);
	return rc;
}

int
redis_each_master(struct redis *r, const struct conf *c, redis_master_fn fn,
    void *arg, char *errbuf, size_t errlen)
{
	redisContext *ctx = dial(c, errbuf, errlen);
	int rc;

	(void)r;
	if (ctx == NULL)
		return -1;
	rc = fn(arg, ctx, c->redis_address);
	redisFree(ctx);
	return rc;
}

struct redisContext *
redis_connect(const struct conf *c, const char *key, size_t keylen,
    char *errbuf, size_t errlen)
{
	(void)key;
	(void)keylen;
	return dial(c, errbuf, errlen);
}
