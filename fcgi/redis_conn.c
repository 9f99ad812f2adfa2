/*
 * redis_conn: the Redis layer's connections. Each address's health,
 * process-wide (back-off, once-per-outage logs, counters); dialling a
 * node (timeouts, AUTH, SELECT), blocking commands; a loop's nodes and
 * their connections. Not here: which node a call goes to (redis.c), the
 * slot map and the master (redis_deploy.c), the function library
 * (redis_lib.c).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "netaddr.h"
#include "redis_int.h"
#include "redis_io.h"
#include "replicas.h"

#define BACKOFF_FIRST_MS	50
#define BACKOFF_MAX_MS		500	/* back within half a second */
#define MAX_NODES		1024	/* per struct redis */

static pthread_mutex_t	health_lock = PTHREAD_MUTEX_INITIALIZER;
static struct health	healths[MAX_HEALTH];	/* addr set under the lock */
static atomic_int	nhealth;

/* ---- health: back-off and logs, per address, process-wide ---------- */

struct health *
redis_conn_health_get(const char *addr)
{
	int i, n;

	n = atomic_load(&nhealth);
	for (i = 0; i < n; i++)
		if (strcmp(healths[i].addr, addr) == 0)
			return &healths[i];
	pthread_mutex_lock(&health_lock);
	n = atomic_load(&nhealth);
	for (i = 0; i < n; i++)
		if (strcmp(healths[i].addr, addr) == 0)
			break;
	if (i == n && n < MAX_HEALTH) {
		snprintf(healths[n].addr, sizeof(healths[n].addr), "%s", addr);
		atomic_store(&healths[n].replicas, -1);
		atomic_store(&nhealth, n + 1);
	} else if (i == n)
		i = MAX_HEALTH - 1;	/* shared by the rest: never reached
					 * in practice */
	pthread_mutex_unlock(&health_lock);
	return &healths[i];
}

/* Is h backed off now? 0: go ahead (and, when it was down, this loop is
 * the one that probes it for this back-off period). */
static int
health_wait(struct health *h)
{
	long long until = atomic_load(&h->down_until_ms), now = mono_ms();

	if (until == 0)
		return 0;
	if (now < until)
		return 1;
	return atomic_compare_exchange_strong(&h->down_until_ms, &until,
	    now + atomic_load(&h->backoff_ms)) ? 0 : 1;
}

/* h failed us: back off, and say so once per outage. */
void
redis_conn_health_down(struct health *h, const char *why)
{
	long long b = atomic_load(&h->backoff_ms);

	b = b == 0 ? BACKOFF_FIRST_MS : b * 2;
	if (b > BACKOFF_MAX_MS)
		b = BACKOFF_MAX_MS;
	atomic_store(&h->backoff_ms, b);
	atomic_store(&h->down_until_ms, mono_ms() + b);
	atomic_fetch_add(&h->epoch, 1);
	atomic_fetch_add(&h->errors, 1);
	pthread_mutex_lock(&health_lock);
	snprintf(h->why, sizeof(h->why), "%s", why);
	pthread_mutex_unlock(&health_lock);
	if (atomic_exchange(&h->logged, 1) == 0)
		log_error("redis %s: %s; answering with on_error until it is "
		    "back", h->addr, why);
}

/* Down, the outage said already: its caller logs why. */
void
redis_conn_health_said(struct health *h, const char *why)
{
	atomic_store(&h->logged, 1);
	redis_conn_health_down(h, why);
}

/* h answered: ends an outage, if there was one (a load on the request
 * path, a store only then). */
void
redis_conn_health_up(struct health *h)
{
	if (atomic_load(&h->backoff_ms) == 0)
		return;
	atomic_store(&h->backoff_ms, 0);
	atomic_store(&h->down_until_ms, 0);
	atomic_store(&h->lib_missing, 0);
	if (atomic_exchange(&h->logged, 0) == 1)
		log_info("redis %s answers again", h->addr);
}

void
redis_conn_health_why(struct health *h, char *buf, size_t len)
{
	pthread_mutex_lock(&health_lock);
	snprintf(buf, len, "%s", h->why[0] ? h->why : "not connected");
	pthread_mutex_unlock(&health_lock);
}

int
redis_conn_replicas(struct health *h)
{
	return atomic_load(&h->replicas);
}

void
redis_conn_replicas_seen(struct health *h, int n, int want)
{
	atomic_store(&h->replicas, n);
	atomic_store(&h->replicas_ms, mono_ms());
	if (n >= 0 && n < want) {
		if (atomic_exchange(&h->replicas_short, 1) == 0)
			log_warn("redis %s: %d replica%s connected, but "
			    "[redis] replicas = %d: until %d are, every "
			    "request counted there follows on_error, at once "
			    "(no WAIT)", h->addr, n, n == 1 ? "" : "s", want,
			    want);
	} else if (n >= want && atomic_exchange(&h->replicas_short, 0) == 1)
		log_info("redis %s: %d replica%s connected again: requests "
		    "counted there wait for %d (WAIT)", h->addr, n,
		    n == 1 ? "" : "s", want);
}

int
redis_conn_replicas_due(struct health *h)
{
	long long read = atomic_load(&h->replicas_ms), now = mono_ms();

	/* One loop of the process claims the read; the others use the
	 * count as it is. */
	return replicas_due(read, now) &&
	    atomic_compare_exchange_strong(&h->replicas_ms, &read, now);
}

int
redis_conn_role_seen(struct health *h, const redisReply *rep, int want)
{
	int n = rep->type == REDIS_REPLY_ERROR ? -1 : replicas_of_role(rep);

	redis_conn_replicas_seen(h, n, want);
	if (rep->type == REDIS_REPLY_ERROR &&
	    atomic_exchange(&h->role_logged, 1) == 0)
		log_warn("redis %s: ROLE: %s; [redis] replicas cannot tell how "
		    "many replicas are connected (the ACL user needs +role), "
		    "so every request counted there waits for WAIT", h->addr,
		    rep->str);
	return n;
}

size_t
redis_counters(struct redis_node_counters *out, size_t max)
{
	size_t i, n = (size_t)atomic_load(&nhealth);

	for (i = 0; i < n && i < max; i++) {
		out[i].address = healths[i].addr;
		out[i].errors = atomic_load(&healths[i].errors);
		out[i].redirects = atomic_load(&healths[i].redirects);
		out[i].refreshes = atomic_load(&healths[i].refreshes);
	}
	return n;
}

/* ---- connections ------------------------------------------------------ */

static struct timeval
tv_ms(long long ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };

	return tv;
}

/* Why ctx failed, in words: hiredis says "Resource temporarily
 * unavailable" for a timeout of a blocking call. A TLS port resets (or
 * closes) a plain connection without a word: the only sign of tls = no
 * against it. */
void
redis_why(const redisContext *ctx, long long timeout_ms, char *buf,
    size_t len)
{
	int eof = ctx != NULL && ctx->err == REDIS_ERR_EOF;

	if (ctx == NULL)
		snprintf(buf, len, "out of memory");
	else if (ctx->err == REDIS_ERR_IO &&
	    (strcmp(ctx->errstr, strerror(EAGAIN)) == 0 ||
	    strcmp(ctx->errstr, strerror(ETIMEDOUT)) == 0))
		snprintf(buf, len, "timed out after %lld ms", timeout_ms);
	else if (ctx->connection_type == REDIS_CONN_TCP &&
	    !redis_io_heard(ctx) && (eof || (ctx->err == REDIS_ERR_IO &&
	    strcmp(ctx->errstr, strerror(ECONNRESET)) == 0)))
		snprintf(buf, len, "%s before the server said anything (is it "
		    "a TLS port? then set tls = yes)", eof ? "connection "
		    "closed" : ctx->errstr);
	else if (eof)
		snprintf(buf, len, "connection closed by the server");
	else
		snprintf(buf, len, "%s", ctx->errstr[0] ? ctx->errstr :
		    "connection lost");
}

/* Runs one command on a blocking ctx; 0 when its reply is no error.
 * *out, when given, takes the reply. */
int
redis_conn_command(redisContext *ctx, long long timeout_ms, redisReply **out,
    char *err, size_t errlen, int argc, const char **argv)
{
	redisReply *rep;
	char why[160];

	rep = redis_io_command_argv(ctx, argc, argv);
	if (rep == NULL) {
		redis_why(ctx, timeout_ms, why, sizeof(why));
		snprintf(err, errlen, "%s: %s", argv[0], why);
		return -1;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "%s: %s", argv[0], rep->str);
		freeReplyObject(rep);
		return -1;
	}
	if (out != NULL)
		*out = rep;
	else
		freeReplyObject(rep);
	return 0;
}

/* Splits host:port, [v6]:port or unix:/path; port 0 for unix. */
int
redis_conn_split_address(const char *addr, char *host, size_t hostlen,
    int *port)
{
	const char *p;
	long long v;
	const char *errstr;

	if (strncmp(addr, "unix:", 5) == 0) {
		*port = 0;
		return snprintf(host, hostlen, "%s", addr + 5) <
		    (int)hostlen ? 0 : -1;
	}
	if ((p = netaddr_split(addr, host, hostlen)) == NULL ||
	    conf_parse_int(p, 1, 65535, &v, &errstr) == -1)
		return -1;
	*port = (int)v;
	return 0;
}

static void
format_address(char *buf, size_t len, const char *host, int port)
{
	if (port == 0)
		snprintf(buf, len, "unix:%s", host);
	else if (strchr(host, ':') != NULL)
		snprintf(buf, len, "[%s]:%d", host, port);
	else
		snprintf(buf, len, "%s:%d", host, port);
}

struct health *
redis_conn_health_at(const char *host, int port)
{
	char addr[RLG_REDIS_ADDR_SIZE];

	format_address(addr, sizeof(addr), host, port);
	return redis_conn_health_get(addr);
}

static redisContext *
dial_host(const char *host, int port, const char *username,
    const char *password, int database, long long connect_timeout_ms,
    long long timeout_ms, char *err, size_t errlen)
{
	struct timeval ct = tv_ms(connect_timeout_ms);
	redisContext *ctx;
	char db[16];

	ctx = port == 0 ? redisConnectUnixWithTimeout(host, ct) :
	    redisConnectWithTimeout(host, port, ct);
	if (ctx == NULL || ctx->err) {
		if (ctx != NULL && ctx->err == REDIS_ERR_IO &&
		    strcmp(ctx->errstr, strerror(ETIMEDOUT)) == 0)
			snprintf(err, errlen, "connect timed out after %lld ms",
			    connect_timeout_ms);
		else
			redis_why(ctx, timeout_ms, err, errlen);
		goto fail;
	}
	if (redisSetTimeout(ctx, tv_ms(timeout_ms)) != REDIS_OK) {
		snprintf(err, errlen, "cannot set the timeout: %s",
		    ctx->errstr);
		goto fail;
	}
	/* TCP only: on a unix socket it fails and leaves ctx in error. */
	if (port != 0)
		redisEnableKeepAlive(ctx);
	if (port != 0 && redis_io_start(ctx, host, timeout_ms, err,
	    errlen) == -1)
		goto fail;
	if (password != NULL) {
		const char *argv[3] = { "AUTH", username, password };

		if (username == NULL) {
			argv[1] = password;
			if (redis_conn_command(ctx, timeout_ms, NULL, err,
			    errlen, 2, argv) == -1)
				goto fail;
		} else if (redis_conn_command(ctx, timeout_ms, NULL, err,
		    errlen, 3, argv) == -1)
			goto fail;
	}
	if (database != 0) {
		const char *argv[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", database);
		if (redis_conn_command(ctx, timeout_ms, NULL, err, errlen, 2,
		    argv) == -1)
			goto fail;
	}
	return ctx;
fail:
	redis_io_free(ctx);
	return NULL;
}

redisContext *
redis_dial(const char *address, const char *username, const char *password,
    int database, long long connect_timeout_ms, long long timeout_ms,
    char *err, size_t errlen)
{
	char host[RLG_HOST_SIZE];
	int port;

	if (redis_conn_split_address(address, host, sizeof(host),
	    &port) == -1) {
		snprintf(err, errlen, "not an address (host:port or "
		    "unix:/path)");
		return NULL;
	}
	return dial_host(host, port, username, password, database,
	    connect_timeout_ms, timeout_ms, err, errlen);
}

/* A connection to a data node as c configures them. */
redisContext *
redis_conn_dial_node(const struct conf *c, const char *host, int port,
    char *err, size_t errlen)
{
	return dial_host(host, port, c->redis_username, c->redis_password,
	    c->redis_mode == RLG_REDIS_CLUSTER ? 0 : c->redis_database,
	    c->redis_connect_timeout_ms, c->redis_timeout_ms, err, errlen);
}

/* ---- nodes ------------------------------------------------------------ */

void
redis_conn_node_close(struct node *nd)
{
	redis_io_free(nd->ctx);
	nd->ctx = NULL;
}

/* The index of the node at host:port, made (unconnected) if new; -1 when
 * r holds MAX_NODES already or is out of memory. */
int
redis_conn_node_get(struct redis *r, const char *host, int port)
{
	struct node *nd, **nn;
	int i;

	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i]->port == port &&
		    strcmp(r->nodes[i]->host, host) == 0)
			return i;
	if (r->nnodes == MAX_NODES)
		return -1;
	if (r->nnodes == r->capnodes) {
		int cap = r->capnodes ? r->capnodes * 2 : 8;

		if ((nn = reallocarray(r->nodes, (size_t)cap,
		    sizeof(*nn))) == NULL)
			return -1;
		r->nodes = nn;
		r->capnodes = cap;
	}
	if ((nd = calloc(1, sizeof(*nd))) == NULL)
		return -1;
	r->nodes[r->nnodes] = nd;
	snprintf(nd->host, sizeof(nd->host), "%s", host);
	nd->port = port;
	format_address(nd->addr, sizeof(nd->addr), host, port);
	nd->h = redis_conn_health_get(nd->addr);
	nd->head = nd->tail = nd->first = -1;
	return r->nnodes++;
}

/* Forgets every node and the slot map: the deployment changed. */
void
redis_conn_reset(struct redis *r)
{
	int i;

	for (i = 0; i < r->nnodes; i++) {
		redis_conn_node_close(r->nodes[i]);
		free(r->nodes[i]);
	}
	r->nnodes = 0;
	r->master = -1;
	r->rediscover = 1;
	r->refresh_due = 1;
	r->refreshed_ms = 0;
	if (r->slots != NULL)
		for (i = 0; i < RLG_SLOTS; i++)
			r->slots[i] = NO_NODE;
}

/*
 * Makes sure node k has a usable connection, honouring its back-off.
 * 0, or -1 (its calls are not sent) with the node marked down when a try
 * failed.
 */
int
redis_conn_node_connect(struct redis *r, const struct conf *c, int k)
{
	struct node *nd = r->nodes[k];
	char err[256];

	/* Once per run: a syscall, and a node may get many calls. Made
	 * before an outage, or closed (or spoken) since its last reply: a
	 * server restarted while we were idle; reconnect before sending, so
	 * that the calls are not lost on a dead connection. */
	if (nd->ctx != NULL && !nd->checked &&
	    (nd->epoch != atomic_load(&nd->h->epoch) ||
	    redis_io_stale(nd->ctx)))
		redis_conn_node_close(nd);
	nd->checked = 1;
	if (nd->ctx != NULL)
		return 0;
	if (health_wait(nd->h))
		return -1;
	if ((nd->ctx = redis_conn_dial_node(c, nd->host, nd->port, err,
	    sizeof(err))) == NULL) {
		redis_conn_health_down(nd->h, err);
		metrics_redis_error(r->metrics);
		return -1;
	}
	/* Connected is not up: a server that accepts connections but fails
	 * every command must not end the outage. Only an answer does. */
	nd->epoch = atomic_load(&nd->h->epoch);
	return 0;
}
