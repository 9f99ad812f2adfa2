/*
 * limiter: the only code that talks to Redis. Each worker owns a struct
 * limiter (a hiredis connection and the scripts' SHA1s); what is shared is
 * only the knowledge that Redis is down, so that a dead server costs one
 * probe per back-off period instead of one timeout per request.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "denycache.h"
#include "clock.h"
#include "limiter.h"
#include "log.h"
#include "metrics.h"
#include "scripts.h"

#define BACKOFF_FIRST_MS	50
#define BACKOFF_MAX_MS		500	/* back within half a second of Redis */
#define IGNORED_LOG_MS		10000	/* a line per ignored-override burst */

struct limiter {
	redisContext	*ctx;
	long		 epoch;		/* outage count when ctx was made */
	char		 target[512];	/* what ctx is connected to */
	unsigned long	 conf_id;	/* the conf target was last checked for */
	char		 sha[RLG_ALGORITHM_COUNT][41];
	char		 refused[256];	/* why Redis refused a call */
	struct metrics_worker *metrics;	/* the worker's counters, or NULL */
	size_t		*idx;		/* limiter_decide()'s list: n */
	size_t		 idx_cap;
};

/* Shared by all workers of the process: is Redis down, until when. */
static atomic_llong	down_until_ms;
static atomic_llong	backoff_ms;
static atomic_long	outage_epoch;
static atomic_int	outage_logged;
static atomic_llong	ignored_logged_ms;	/* last "ignored" line */
static atomic_long	ignored_quiet;		/* ignored since, not logged */
static pthread_mutex_t	why_lock = PTHREAD_MUTEX_INITIALIZER;
static char		down_why[256];	/* last outage's reason, why_lock */

static struct timeval
tv_ms(long long ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };

	return tv;
}

struct limiter *
limiter_new(void)
{
	struct limiter *l = calloc(1, sizeof(*l));
	const struct rlg_script *sc;
	int a;

	for (a = 0; l != NULL && a < RLG_ALGORITHM_COUNT; a++)
		if ((sc = scripts_find(conf_algorithm_name(a))) != NULL)
			memcpy(l->sha[a], sc->sha1, 41);
	return l;
}

static void
disconnect(struct limiter *l)
{
	if (l->ctx != NULL)
		redisFree(l->ctx);
	l->ctx = NULL;
}

void
limiter_free(struct limiter *l)
{
	if (l == NULL)
		return;
	disconnect(l);
	free(l->idx);
	free(l);
}

/* Everything that, when changed by a reload, needs a new connection. */
static void
target_of(const struct conf *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s|%s|%s|%d", c->redis_address,
	    c->redis_username ? c->redis_username : "",
	    c->redis_password ? c->redis_password : "", c->redis_database);
}

/* Runs one command on l->ctx and checks its reply is not an error. */
static int
command_ok(struct limiter *l, char *err, size_t errlen, int argc,
    const char **argv)
{
	redisReply *rep;
	int rc = -1;

	rep = redisCommandArgv(l->ctx, argc, argv, NULL);
	if (rep == NULL)
		snprintf(err, errlen, "%s: %s", argv[0], l->ctx->errstr);
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(err, errlen, "%s: %s", argv[0], rep->str);
	else
		rc = 0;
	freeReplyObject(rep);
	return rc;
}

/*
 * Loads every embedded script in one round trip. Needed only after
 * NOSCRIPT (a restarted or flushed Redis) and by limiter_probe(): the
 * SHA1s are known at build time, so a new connection goes straight to
 * EVALSHA and costs no more round trips than the decision itself.
 */
static int
load_scripts(struct limiter *l, char *err, size_t errlen)
{
	redisReply *rep;
	size_t i;
	int rc = 0;

	for (i = 0; i < rlg_nscripts; i++)
		redisAppendCommand(l->ctx, "SCRIPT LOAD %s",
		    rlg_scripts[i].source);
	for (i = 0; i < rlg_nscripts; i++) {
		if (redisGetReply(l->ctx, (void **)&rep) != REDIS_OK) {
			snprintf(err, errlen, "SCRIPT LOAD: %s",
			    l->ctx->errstr);
			return -1;	/* the connection is unusable */
		}
		if (rc == 0 && (rep->type != REDIS_REPLY_STRING ||
		    strcmp(rep->str, rlg_scripts[i].sha1) != 0)) {
			snprintf(err, errlen, "SCRIPT LOAD %s.lua: %s",
			    rlg_scripts[i].name,
			    rep->type == REDIS_REPLY_ERROR ? rep->str :
			    "Redis names it differently than this build");
			rc = -1;
		}
		freeReplyObject(rep);
	}
	return rc;
}

/* Opens and authenticates a connection (no scripts yet). */
static int
dial(struct limiter *l, const struct conf *c, char *err, size_t errlen)
{
	const char *addr = c->redis_address;
	char host[256], db[16];
	struct timeval ct = tv_ms(c->redis_connect_timeout_ms);
	const char *portstr;
	int port;

	disconnect(l);
	if (strncmp(addr, "unix:", 5) == 0) {
		l->ctx = redisConnectUnixWithTimeout(addr + 5, ct);
	} else {
		/* "[::1]:6379": hiredis wants the bare address. */
		if ((portstr = netaddr_split(addr, host,
		    sizeof(host))) == NULL) {
			snprintf(err, errlen, "bad address");
			return -1;
		}
		port = atoi(portstr);	/* checked by conf */
		l->ctx = redisConnectWithTimeout(host, port, ct);
	}
	if (l->ctx == NULL || l->ctx->err) {
		snprintf(err, errlen, "%s", l->ctx ? l->ctx->errstr :
		    "out of memory");
		goto fail;
	}
	if (redisSetTimeout(l->ctx, tv_ms(c->redis_timeout_ms)) != REDIS_OK) {
		snprintf(err, errlen, "cannot set timeout: %s", l->ctx->errstr);
		goto fail;
	}
	/* TCP only: on a unix socket it fails and leaves ctx in error. */
	if (strncmp(addr, "unix:", 5) != 0)
		redisEnableKeepAlive(l->ctx);
	if (c->redis_password != NULL) {
		const char *argv[3] = { "AUTH", c->redis_username,
		    c->redis_password };

		if (c->redis_username == NULL) {
			argv[1] = c->redis_password;
			if (command_ok(l, err, errlen, 2, argv) == -1)
				goto fail;
		} else if (command_ok(l, err, errlen, 3, argv) == -1)
			goto fail;
	}
	if (c->redis_database != 0) {
		const char *argv[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", c->redis_database);
		if (command_ok(l, err, errlen, 2, argv) == -1)
			goto fail;
	}
	return 0;
fail:
	disconnect(l);
	return -1;
}

/* Opens, authenticates and prepares a connection. */
static int
connect_redis(struct limiter *l, const struct conf *c, char *err,
    size_t errlen)
{
	if (dial(l, c, err, errlen) == -1)
		return -1;
	target_of(c, l->target, sizeof(l->target));
	l->conf_id = c->id;
	l->epoch = atomic_load(&outage_epoch);
	return 0;
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
	atomic_fetch_add(&outage_epoch, 1);
	pthread_mutex_lock(&why_lock);
	snprintf(down_why, sizeof(down_why), "%s", why);
	pthread_mutex_unlock(&why_lock);
	if (atomic_exchange(&outage_logged, 1) == 0)
		log_error("redis %s: %s; answering with on_error until it is "
		    "back", c->redis_address, why);
}

/* Redis answered: ends an outage, if there was one (a load, no store, on
 * the request path). */
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

/*
 * Makes sure l has a usable connection. While Redis is known to be down,
 * only one worker per back-off period gets to try.
 */
static int
ensure_connected(struct limiter *l, const struct conf *c)
{
	char target[512], err[256];
	long long until, now;

	/* Only a reload can change where Redis is: look once per conf. */
	if (l->ctx != NULL && l->conf_id != c->id) {
		target_of(c, target, sizeof(target));
		if (strcmp(target, l->target) != 0)
			disconnect(l);
		l->conf_id = c->id;
	}
	if (l->ctx != NULL && l->epoch != atomic_load(&outage_epoch))
		disconnect(l);	/* made before an outage */
	if (l->ctx != NULL)
		return 0;
	until = atomic_load(&down_until_ms);
	now = mono_ms();
	if (now < until)
		return -1;
	if (until != 0 && !atomic_compare_exchange_strong(&down_until_ms,
	    &until, now + atomic_load(&backoff_ms)))
		return -1;	/* another worker is probing */
	if (connect_redis(l, c, err, sizeof(err)) == -1) {
		metrics_redis_error(l->metrics);
		mark_down(c, err);
		return -1;
	}
	/* Connected is not up: a server that accepts connections but fails
	 * every command must not reset the back-off. Only an answered
	 * decision (or PING) marks Redis up again. */
	return 0;
}

static void
fmt_ll(char *buf, size_t len, long long v)
{
	snprintf(buf, len, "%lld", v);
}

size_t
limiter_key(const struct conf *c, const struct rule *ru, const char *key,
    size_t keylen, int override, char *out, size_t outlen)
{
	size_t n = (size_t)snprintf(out, outlen, "%s{%s:", c->key_prefix,
	    ru->name);
	const char *tail = override ? "}" RLG_OVERRIDE_SUFFIX : "}";
	size_t tlen = strlen(tail);

	if (n + keylen + tlen < outlen) {
		memcpy(out + n, key, keylen);
		memcpy(out + n + keylen, tail, tlen + 1);
	}
	return n + keylen + tlen;
}

/*
 * Appends the EVALSHA call of match m to l's pipeline. hiredis copies the
 * arguments into its buffer: nothing here outlives the call.
 */
static void
append_call(struct limiter *l, const struct conf *c, const struct match *m)
{
	const struct rule *ru = m->rule;
	const char *argv[11];
	size_t argl[11], keylen;
	char key[RLG_REDIS_KEY_SIZE], num[5][24];
	int i, o;

	/* overrides = redis: the override hash as KEYS[2], same hash tag
	 * and so the same slot; the script reads it in the same call. Both
	 * keys are one buffer: KEYS[1] is the override key's beginning. */
	o = ru->overrides ? 1 : 0;
	keylen = limiter_key(c, ru, m->key, m->key_len, o, key, sizeof(key));
	fmt_ll(num[0], sizeof(num[0]), m->cost);
	fmt_ll(num[1], sizeof(num[1]), ru->limit);
	fmt_ll(num[2], sizeof(num[2]), ru->window_ms);
	num[3][0] = num[4][0] = '\0';
	if (ru->burst > 0)
		fmt_ll(num[3], sizeof(num[3]), ru->burst);
	if (ru->precision_ms > 0)
		fmt_ll(num[4], sizeof(num[4]), ru->precision_ms);

	argv[0] = "EVALSHA";
	argv[1] = l->sha[ru->algorithm];
	argv[2] = o ? "2" : "1";
	argv[3] = argv[3 + o] = key;
	argl[3 + o] = keylen;
	argl[3] = keylen - (o ? sizeof(RLG_OVERRIDE_SUFFIX) - 1 : 0);
	argv[4 + o] = "";	/* now: Redis TIME, one clock for all */
	for (i = 0; i < 5; i++)
		argv[5 + o + i] = num[i];
	/* The keys are counted, not terminated (they may hold any byte): no
	 * strlen() on them, which would read past their end. */
	for (i = 0; i < 10 + o; i++)
		if (i < 3 || i > 3 + o)
			argl[i] = strlen(argv[i]);
	redisAppendCommandArgv(l->ctx, 10 + o, argv, argl);
}

/* An ignored override: its sentence, rate-limited process-wide. */
static void
log_ignored(const struct match *m, const char *why, size_t whylen)
{
	long long now = mono_ms(), last = atomic_load(&ignored_logged_ms);
	long quiet;

	if ((last != 0 && now - last < IGNORED_LOG_MS) ||
	    !atomic_compare_exchange_strong(&ignored_logged_ms, &last, now)) {
		atomic_fetch_add(&ignored_quiet, 1);
		return;
	}
	quiet = atomic_exchange(&ignored_quiet, 0);
	log_warn("rule %s key %.*s: %.*s; the rule's own limit applies (%ld "
	    "more ignored overrides not logged in the last %d s)",
	    m->rule->name, (int)m->key_len, m->key, (int)whylen, why, quiet,
	    IGNORED_LOG_MS / 1000);
}

/*
 * Error replies that say Redis cannot run scripts at all for now (a long
 * script holds it, it is loading its data, out of memory, a read-only
 * replica, a changed password...): an outage to back off from and log
 * once, not one request's problem to log every time.
 */
static int
server_refuses(const char *s)
{
	static const char *const codes[] = { "BUSY", "LOADING", "MASTERDOWN",
	    "READONLY", "NOAUTH", "NOPERM", "WRONGPASS", "OOM", "MISCONF",
	    "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS" };
	size_t i, n;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		n = strlen(codes[i]);
		if (strncmp(s, codes[i], n) == 0 &&
		    (s[n] == ' ' || s[n] == '\0'))
			return 1;
	}
	return 0;
}

/* The rule's own parameters: what a verdict says until Redis says
 * otherwise (an override), and all it says when Redis cannot answer. */
static void
rule_params(struct verdict *v, const struct rule *ru)
{
	v->limit = ru->limit;
	v->window_ms = ru->window_ms;
	v->burst = conf_capacity(ru, ru->limit);
	v->override = RLG_OVERRIDE_NONE;
}

/*
 * Reads one script reply into v. Returns 1 for NOSCRIPT, 0 done, -1 I/O,
 * -2 when Redis refuses scripts for now (l->refused says why).
 */
static int
read_verdict(struct limiter *l, const struct match *m, struct verdict *v)
{
	const redisReply *why;
	redisReply *rep;
	long long *f[7];
	int i, rc = 0;

	if (redisGetReply(l->ctx, (void **)&rep) != REDIS_OK)
		return -1;
	if (rep->type == REDIS_REPLY_ERROR) {
		if (strncmp(rep->str, "NOSCRIPT", 8) == 0)
			rc = 1;
		else if (server_refuses(rep->str)) {
			snprintf(l->refused, sizeof(l->refused), "%s",
			    rep->str);
			rc = -2;
		} else
			log_error("rule %s: redis: %s", m->rule->name,
			    rep->str);
		freeReplyObject(rep);
		return rc;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 7 ||
	    (m->rule->overrides && rep->elements < 11)) {
		log_error("rule %s: redis: the script's reply is not %d "
		    "integers", m->rule->name, m->rule->overrides ? 11 : 7);
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
	/* Without KEYS[2] the rule's parameters were used: limiter_decide()
	 * set them. */
	if (v->answered && m->rule->overrides) {
		/* {..., window_ms, burst, precision_ms, override[, why]} */
		for (i = 7; i < 11; i++)
			if (rep->element[i]->type != REDIS_REPLY_INTEGER)
				break;
		if (i < 11 || rep->element[10]->integer < RLG_OVERRIDE_NONE ||
		    rep->element[10]->integer > RLG_OVERRIDE_IGNORED) {
			log_error("rule %s: redis: the script's reply has no "
			    "parameters (elements 8-11)", m->rule->name);
			rule_params(v, m->rule);
			v->answered = 0;
		} else {
			v->window_ms = rep->element[7]->integer;
			v->burst = conf_algorithm_has_burst(m->rule->algorithm) ?
			    rep->element[8]->integer :
			    conf_capacity(m->rule, v->limit);
			v->override =
			    (enum rlg_override)rep->element[10]->integer;
			why = rep->elements > 11 && rep->element[11]->type ==
			    REDIS_REPLY_STRING ? rep->element[11] : NULL;
			if (v->override == RLG_OVERRIDE_IGNORED)
				log_ignored(m, why != NULL ? why->str :
				    "override ignored", why != NULL ? why->len :
				    strlen("override ignored"));
		}
	}
	freeReplyObject(rep);
	return 0;
}

/* Rules in dry run never deny, so nothing of theirs is remembered; nor
 * of a rule whose limit Redis may raise (conf refuses the pair anyway). */
static int
cacheable(const struct conf *c, const struct rule *ru)
{
	return ru->deny_cache && !ru->dry_run && !c->dry_run &&
	    !ru->overrides;
}

/* Fills v from the deny cache when it remembers m denied. Returns 1 then. */
static int
cached(const struct conf *c, const struct match *m, long long now,
    struct verdict *v)
{
	const struct rule *ru = m->rule;
	struct denial dn;

	if (!cacheable(c, ru) || !denycache_get(c, ru->name, m->key,
	    m->key_len, m->cost, now, &dn))
		return 0;
	v->answered = 1;
	v->allowed = 0;
	v->local = 1;
	v->remaining = dn.remaining;
	v->limit = dn.limit;
	/* Rounded up like the scripts' own: never early. */
	v->retry_after_ms = (dn.until_us - now + 999) / 1000;
	v->reset_ms = dn.reset_at_us > now ? (dn.reset_at_us - now + 999) /
	    1000 : 0;
	v->now_us = dn.now_us + (now - dn.at_us);	/* on Redis's clock */
	v->delay_ms = 0;
	return 1;
}

/*
 * Remembers a denial Redis gave. sent is when the call was sent: Redis
 * decided later, so the entry ends no later than retry_after says.
 */
static void
remember(const struct conf *c, const struct match *m, const struct verdict *v,
    long long sent)
{
	struct denial dn;

	if (!cacheable(c, m->rule) || !v->answered || v->allowed ||
	    v->retry_after_ms <= 0)
		return;
	dn.cost = m->cost;
	dn.remaining = v->remaining;
	dn.limit = v->limit;
	dn.until_us = sent + v->retry_after_ms * 1000;
	dn.reset_at_us = sent + v->reset_ms * 1000;
	dn.now_us = v->now_us;
	dn.at_us = sent;
	denycache_put(c, m->rule->name, m->key, m->key_len, &dn);
}

int
limiter_decide(struct limiter *l, const struct conf *c,
    const struct match *m, size_t n, struct verdict *v)
{
	size_t i, k, *retry, nretry = 0;
	long long sent;
	int rc, pass;
	char err[256];

	memset(v, 0, n * sizeof(*v));
	for (i = 0; i < n; i++)
		rule_params(&v[i], m[i].rule);
	if (n == 0)
		return 0;
	if (n > l->idx_cap) {
		size_t *p = realloc(l->idx, n * sizeof(*p));

		if (p == NULL)
			return -1;
		l->idx = p;
		l->idx_cap = n;
	}
	retry = l->idx;
	/* Denials the deny cache remembers need no round trip. */
	sent = mono_us();
	for (i = 0; i < n; i++)
		if (!cached(c, &m[i], sent, &v[i]))
			retry[nretry++] = i;
	if (nretry == 0)
		return 0;
	if (ensure_connected(l, c) == -1)
		return -1;
	sent = mono_us();
	/* Pass 0 is the normal round trip; pass 1 runs again only the calls
	 * that met NOSCRIPT (Redis restarted or SCRIPT FLUSH), once. */
	for (pass = 0; pass < 2 && nretry > 0; pass++) {
		/* The calls that met NOSCRIPT stay in retry[], in place: the
		 * list only shrinks as it is read. */
		k = nretry;
		nretry = 0;
		for (i = 0; i < k; i++)
			append_call(l, c, &m[retry[i]]);
		for (i = 0; i < k; i++) {
			rc = read_verdict(l, &m[retry[i]], &v[retry[i]]);
			if (rc < 0) {
				/* Broken, timed out, or refusing scripts for
				 * now (BUSY, LOADING...): an outage either
				 * way. */
				metrics_redis_error(l->metrics);
				mark_down(c, rc == -2 ? l->refused :
				    l->ctx->errstr[0] ? l->ctx->errstr :
				    strerror(errno));
				disconnect(l);
				return -1;
			}
			if (rc == 1)
				retry[nretry++] = retry[i];
		}
		if (nretry > 0 && load_scripts(l, err, sizeof(err)) == -1) {
			metrics_redis_error(l->metrics);
			mark_down(c, err);
			disconnect(l);
			return -1;
		}
	}
	metrics_redis_latency(l->metrics, mono_us() - sent);
	mark_up(c);
	rc = 0;
	for (i = 0; i < n; i++) {
		if (!v[i].answered) {
			/* An error reply. */
			metrics_redis_error(l->metrics);
			rc = -1;
		} else if (!v[i].local)
			remember(c, &m[i], &v[i], sent);
	}
	return rc;
}

void
limiter_set_metrics(struct limiter *l, struct metrics_worker *w)
{
	l->metrics = w;
}

int
limiter_ping(struct limiter *l, const struct conf *c, long long *latency_us,
    char *errbuf, size_t errlen)
{
	redisReply *rep;
	long long t0;

	if (ensure_connected(l, c) == -1) {
		pthread_mutex_lock(&why_lock);
		snprintf(errbuf, errlen, "%s", down_why[0] ? down_why :
		    "not connected");
		pthread_mutex_unlock(&why_lock);
		return -1;
	}
	t0 = mono_us();
	rep = redisCommand(l->ctx, "PING");
	if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
		snprintf(errbuf, errlen, "PING: %s", rep != NULL ? rep->str :
		    l->ctx->errstr[0] ? l->ctx->errstr : strerror(errno));
		freeReplyObject(rep);
		metrics_redis_error(l->metrics);
		mark_down(c, errbuf);
		disconnect(l);
		return -1;
	}
	freeReplyObject(rep);
	*latency_us = mono_us() - t0;
	mark_up(c);
	return 0;
}

struct redisContext *
limiter_connect(const struct conf *c, char *errbuf, size_t errlen)
{
	struct limiter l;

	memset(&l, 0, sizeof(l));
	if (dial(&l, c, errbuf, errlen) == -1)
		return NULL;
	return l.ctx;
}

int
limiter_probe(const struct conf *c, char *errbuf, size_t errlen)
{
	struct limiter l;
	int rc;

	memset(&l, 0, sizeof(l));
	rc = connect_redis(&l, c, errbuf, errlen);
	if (rc == 0)
		rc = load_scripts(&l, errbuf, errlen);
	disconnect(&l);
	return rc;
}
