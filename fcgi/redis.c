/*
 * redis: the Redis layer on hiredis (0.14: no cluster client, so it routes
 * by itself). Connections per node made lazily, the slot map (cluster),
 * the master (single, sentinel), one pipelined round trip to all nodes at
 * once, redirects, the function library, per-node back-off and outage
 * logs. Not here: what a call means (limiter), the slot function and reply
 * parsers (slot.c), asking the Sentinels (sentinel.c).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "netaddr.h"
#include "redis.h"
#include "scripts.h"
#include "sentinel.h"
#include "slot.h"


#define BACKOFF_FIRST_MS	50
#define BACKOFF_MAX_MS		500	/* back within half a second */
#define MAX_REDIRECTS		5	/* per call and run */
#define MAX_ROUNDS		16	/* round trips per run, all causes */
#define MAX_NODES		1024	/* per struct redis */
#define MAX_HEALTH		1024	/* addresses per process */
#define REFRESH_MIN_MS		100	/* between slot map refreshes */
#define TRYAGAIN_PAUSE_MS	10
#define NO_NODE			0xffff

/* What the process knows of one address, shared by every loop. */
struct health {
	char		 addr[RLG_REDIS_ADDR_SIZE];
	atomic_llong	 down_until_ms;	/* back-off: no try before */
	atomic_llong	 backoff_ms;	/* 0: up */
	atomic_long	 epoch;		/* outages so far */
	atomic_int	 logged;	/* this outage is logged */
	atomic_int	 lib_logged;	/* a failed FUNCTION LOAD is */
	atomic_llong	 errors;
	atomic_llong	 redirects;
	atomic_llong	 refreshes;
	char		 why[256];	/* last outage's reason, health_lock */
};

static pthread_mutex_t	health_lock = PTHREAD_MUTEX_INITIALIZER;
static struct health	healths[MAX_HEALTH];	/* addr set under the lock */
static atomic_int	nhealth;

/* The masters of the last slot map any loop (or the start-up probe) read,
 * and the seeds of that cluster: where a loop that cannot reach its own
 * masters or the seeds asks for the map. Under known_lock. */
static pthread_mutex_t	known_lock = PTHREAD_MUTEX_INITIALIZER;
static char		*known_seeds;
static struct health	*known[MAX_HEALTH];
static int		 nknown;

/* A node one loop knows: a master, a seed, or the single server. */
struct node {
	char		 addr[RLG_REDIS_ADDR_SIZE];
	char		 host[RLG_HOST_SIZE];	/* or the unix socket path */
	int		 port;		/* 0: unix socket */
	int		 master;	/* serves slots (cluster) */
	redisContext	*ctx;
	long		 epoch;		/* h->epoch when ctx was made */
	struct health	*h;
	/* One run's round: the replies expected, in order. */
	int		 head, tail;	/* into r->ent, -1: none */
	int		 load;		/* FUNCTION LOAD goes first */
	int		 loaded;	/* it went, this run */
	int		 checked;	/* its connection, this run */
	int		 busy;		/* has entries this round */
};

/* A reply a node owes this round: a call's, or ASKING's or FUNCTION
 * LOAD's. */
#define ENT_ASKING	(-1)
#define ENT_LOAD	(-2)
struct entry {
	int		 call;
	int		 next;
};

/* What a run knows of each call. */
struct pend {
	int		 done;
	int		 target;	/* forced node (ASK, reload), or -1 */
	int		 asking;
	int		 redirects;
	int		 reloaded;
	int		 retried;	/* READONLY, sent again once */
	int		 node;		/* routed and connected this round, or
					 * -1 */
};

struct redis {
	struct node	**nodes;	/* each its own allocation: pointers
					 * to a node stay valid */
	int		 nnodes, capnodes;
	uint16_t	*slots;		/* cluster: RLG_SLOTS node indexes */
	int		 master;	/* single, sentinel: its node, or -1 */
	int		 rediscover;	/* sentinel: ask again before use */
	long long	 asked_ms;	/* sentinel: last asked */
	long		 sentinel_epoch;
	int		 watching;	/* holds a sentinel_watch() */
	int		 refresh_due;
	long long	 refreshed_ms;
	unsigned long	 conf_id;
	char		*target;	/* what the nodes were made for */
	struct health	*deploy;	/* the deployment's own outages (no
					 * seed, no Sentinel) */
	struct metrics_worker *metrics;
	struct pend	*pend;
	size_t		 pendcap;
	struct entry	*ent;
	int		 nent, capent;
	struct pollfd	*pfd;
	int		*pfdnode;
	int		 cappfd;
};

/* ---- health: back-off and logs, per address, process-wide ---------- */

static struct health *
health_get(const char *addr)
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
static void
health_down(struct health *h, const char *why)
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

/* h answered: ends an outage, if there was one (a load on the request
 * path, a store only then). */
static void
health_up(struct health *h)
{
	if (atomic_load(&h->backoff_ms) == 0)
		return;
	atomic_store(&h->backoff_ms, 0);
	atomic_store(&h->down_until_ms, 0);
	if (atomic_exchange(&h->logged, 0) == 1)
		log_info("redis %s answers again", h->addr);
}

static void
health_why(struct health *h, char *buf, size_t len)
{
	pthread_mutex_lock(&health_lock);
	snprintf(buf, len, "%s", h->why[0] ? h->why : "not connected");
	pthread_mutex_unlock(&health_lock);
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
 * unavailable" for a timeout of a blocking call. */
static void
ctx_why(const redisContext *ctx, long long timeout_ms, char *buf,
    size_t len)
{
	if (ctx == NULL)
		snprintf(buf, len, "out of memory");
	else if (ctx->err == REDIS_ERR_IO &&
	    (strcmp(ctx->errstr, strerror(EAGAIN)) == 0 ||
	    strcmp(ctx->errstr, strerror(ETIMEDOUT)) == 0))
		snprintf(buf, len, "timed out after %lld ms", timeout_ms);
	else if (ctx->err == REDIS_ERR_EOF)
		snprintf(buf, len, "connection closed by the server");
	else
		snprintf(buf, len, "%s", ctx->errstr[0] ? ctx->errstr :
		    "connection lost");
}

/* Runs one command on a blocking ctx; 0 when its reply is no error.
 * *out, when given, takes the reply. */
static int
command(redisContext *ctx, long long timeout_ms, redisReply **out,
    char *err, size_t errlen, int argc, const char **argv)
{
	redisReply *rep;
	char why[160];

	rep = redisCommandArgv(ctx, argc, argv, NULL);
	if (rep == NULL) {
		ctx_why(ctx, timeout_ms, why, sizeof(why));
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
static int
split_address(const char *addr, char *host, size_t hostlen, int *port)
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
			ctx_why(ctx, timeout_ms, err, errlen);
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
	if (password != NULL) {
		const char *argv[3] = { "AUTH", username, password };

		if (username == NULL) {
			argv[1] = password;
			if (command(ctx, timeout_ms, NULL, err, errlen, 2,
			    argv) == -1)
				goto fail;
		} else if (command(ctx, timeout_ms, NULL, err, errlen, 3,
		    argv) == -1)
			goto fail;
	}
	if (database != 0) {
		const char *argv[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", database);
		if (command(ctx, timeout_ms, NULL, err, errlen, 2, argv) == -1)
			goto fail;
	}
	return ctx;
fail:
	if (ctx != NULL)
		redisFree(ctx);
	return NULL;
}

redisContext *
redis_dial(const char *address, const char *username, const char *password,
    int database, long long connect_timeout_ms, long long timeout_ms,
    char *err, size_t errlen)
{
	char host[RLG_HOST_SIZE];
	int port;

	if (split_address(address, host, sizeof(host), &port) == -1) {
		snprintf(err, errlen, "not an address (host:port or "
		    "unix:/path)");
		return NULL;
	}
	return dial_host(host, port, username, password, database,
	    connect_timeout_ms, timeout_ms, err, errlen);
}

/* A connection to a data node as c configures them. */
static redisContext *
dial_node(const struct conf *c, const char *host, int port, char *err,
    size_t errlen)
{
	return dial_host(host, port, c->redis_username, c->redis_password,
	    c->redis_mode == RLG_REDIS_CLUSTER ? 0 : c->redis_database,
	    c->redis_connect_timeout_ms, c->redis_timeout_ms, err, errlen);
}

/* The server's major version from INFO server, or -1 with err set. */
static int
server_version(redisContext *ctx, long long timeout_ms, char *ver,
    size_t verlen, char *err, size_t errlen)
{
	const char *argv[2] = { "INFO", "server" };
	redisReply *rep = NULL;
	const char *p;
	size_t n;

	if (command(ctx, timeout_ms, &rep, err, errlen, 2, argv) == -1)
		return -1;
	if (rep->type != REDIS_REPLY_STRING ||
	    (p = strstr(rep->str, "redis_version:")) == NULL) {
		snprintf(err, errlen, "INFO server: no redis_version");
		freeReplyObject(rep);
		return -1;
	}
	p += strlen("redis_version:");
	n = strcspn(p, "\r\n");
	snprintf(ver, verlen, "%.*s", (int)n, p);
	freeReplyObject(rep);
	return atoi(ver);	/* the digits before the first '.' */
}

/*
 * Loads the library on a blocking ctx: FUNCTION LOAD REPLACE. Checks the
 * version first, so that an old server gets a sentence, not "unknown
 * command". 0, or -1 with err set.
 */
static int
load_library(redisContext *ctx, long long timeout_ms, char *err,
    size_t errlen)
{
	const char *rargv[4] = { "FUNCTION", "LOAD", "REPLACE", rlg_library };
	char ver[32];
	int major;

	if ((major = server_version(ctx, timeout_ms, ver, sizeof(ver), err,
	    errlen)) == -1)
		return -1;
	if (major < 7) {
		snprintf(err, errlen, "Redis 7.0 or later is needed (this "
		    "server is %s)", ver);
		return -1;
	}
	return command(ctx, timeout_ms, NULL, err, errlen, 4, rargv);
}

/* ---- nodes ------------------------------------------------------------ */

static void
node_close(struct node *nd)
{
	if (nd->ctx != NULL)
		redisFree(nd->ctx);
	nd->ctx = NULL;
}

/* The index of the node at host:port, made (unconnected) if new; -1 when
 * r holds MAX_NODES already or is out of memory. */
static int
node_get(struct redis *r, const char *host, int port)
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
	nd->h = health_get(nd->addr);
	nd->head = nd->tail = -1;
	return r->nnodes++;
}

/* Forgets every node and the slot map: the deployment changed. */
static void
reset(struct redis *r)
{
	int i;

	for (i = 0; i < r->nnodes; i++) {
		node_close(r->nodes[i]);
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

/* Has the connection been closed (or spoken) since its last reply? A
 * server restarted while we were idle: reconnect before sending, so that
 * the calls are not lost on a dead connection. */
static int
stale(redisContext *ctx)
{
	struct pollfd p = { ctx->fd, POLLIN, 0 };

	return poll(&p, 1, 0) != 0;
}

/*
 * Makes sure node k has a usable connection, honouring its back-off.
 * 0, or -1 (its calls are not sent) with the node marked down when a try
 * failed.
 */
static int
node_connect(struct redis *r, const struct conf *c, int k)
{
	struct node *nd = r->nodes[k];
	char err[256];

	/* Once per run: a syscall, and a node may get many calls. */
	if (nd->ctx != NULL && !nd->checked &&
	    (nd->epoch != atomic_load(&nd->h->epoch) || stale(nd->ctx)))
		node_close(nd);	/* made before an outage, or dead */
	nd->checked = 1;
	if (nd->ctx != NULL)
		return 0;
	if (health_wait(nd->h))
		return -1;
	if ((nd->ctx = dial_node(c, nd->host, nd->port, err,
	    sizeof(err))) == NULL) {
		health_down(nd->h, err);
		metrics_redis_error(r->metrics);
		return -1;
	}
	/* Connected is not up: a server that accepts connections but fails
	 * every command must not end the outage. Only an answer does. */
	nd->epoch = atomic_load(&nd->h->epoch);
	return 0;
}

/* ---- the deployment: single, cluster, sentinel ---------------------- */

/* Everything that, changed by a reload, needs new connections. */
static char *
target_of(const struct conf *c)
{
	char *s;

	if (asprintf(&s, "%d|%s|%s|%s|%d|%s|%s", (int)c->redis_mode,
	    c->redis_address, c->redis_username ? c->redis_username : "",
	    c->redis_password ? c->redis_password : "", c->redis_database,
	    c->redis_master_name ? c->redis_master_name : "",
	    c->redis_sentinel_password ? c->redis_sentinel_password :
	    "") == -1)
		return NULL;
	return s;
}

/* Called by the slot map parsers: slots first..last are host:port's. */
struct map_build {
	struct redis	*r;
	const char	*asked_host;	/* for a master without an address */
	uint16_t	*slots;
};

static int
map_range(void *arg, int first, int last, const char *host, int port)
{
	struct map_build *b = arg;
	int k, s;

	if ((k = node_get(b->r, host[0] != '\0' ? host : b->asked_host,
	    port)) == -1)
		return -1;
	b->r->nodes[k]->master = 1;
	for (s = first; s <= last; s++)
		b->slots[s] = (uint16_t)k;
	return 0;
}

/* Asks node k for the slot map into slots[]. 0, or -1 with err set. */
static int
map_from(struct redis *r, const struct conf *c, int k, uint16_t *slots,
    char *err, size_t errlen)
{
	const char *sargv[2] = { "CLUSTER", "SLOTS" };
	const char *hargv[2] = { "CLUSTER", "SHARDS" };
	struct map_build b = { r, r->nodes[k]->host, slots };
	redisReply *rep = NULL;
	char why[256];
	int i, rc;

	for (i = 0; i < RLG_SLOTS; i++)
		slots[i] = NO_NODE;
	if (command(r->nodes[k]->ctx, c->redis_timeout_ms, &rep, why,
	    sizeof(why), 2, sargv) == 0)
		rc = slot_parse_slots(rep, map_range, &b, why, sizeof(why));
	else if (strstr(why, "cluster support disabled") != NULL) {
		snprintf(err, errlen, "cluster support is disabled there: "
		    "mode = cluster needs cluster-enabled yes");
		return -1;
	} else if (r->nodes[k]->ctx->err == 0 &&
	    command(r->nodes[k]->ctx, c->redis_timeout_ms, &rep, why,
	    sizeof(why), 2, hargv) == 0)
		rc = slot_parse_shards(rep, map_range, &b, why, sizeof(why));
	else
		rc = -1;
	freeReplyObject(rep);
	if (rc == -1)
		snprintf(err, errlen, "%s", why);
	return rc;
}

/* r's masters are the cluster's with seeds c->redis_address: what the
 * process knows of it now. */
static void
known_set(const struct redis *r, const struct conf *c)
{
	int k;

	pthread_mutex_lock(&known_lock);
	if (known_seeds == NULL || strcmp(known_seeds, c->redis_address) != 0) {
		free(known_seeds);
		known_seeds = strdup(c->redis_address);
	}
	nknown = 0;
	for (k = 0; k < r->nnodes && nknown < MAX_HEALTH; k++)
		if (r->nodes[k]->master)
			known[nknown++] = r->nodes[k]->h;
	pthread_mutex_unlock(&known_lock);
}

/* Copies up to max of the masters the process knows of the cluster with
 * seeds c->redis_address into out; returns how many. */
static int
known_get(const struct conf *c, struct health **out, int max)
{
	int n = 0;

	pthread_mutex_lock(&known_lock);
	if (known_seeds != NULL && strcmp(known_seeds, c->redis_address) == 0)
		for (; n < nknown && n < max; n++)
			out[n] = known[n];
	pthread_mutex_unlock(&known_lock);
	return n;
}

/* Adds node k to order[] unless it is there. */
static void
order_add(int *order, int *norder, int k)
{
	int i;

	for (i = 0; i < *norder && order[i] != k; i++)
		;
	if (i == *norder)
		order[(*norder)++] = k;
}

/* Appends "addr (why)" to a list of tries. */
static void
tried(char *buf, size_t len, const char *addr, const char *why)
{
	size_t n = strlen(buf);

	if (n < len)
		snprintf(buf + n, len - n, "%s%s (%s)", n ? ", " : "", addr,
		    why);
}

/*
 * Reads the slot map from the first node that gives one: r's masters, then
 * the masters the process knows (another loop's or the start-up probe's
 * map: a loop that never read the map, or whose masters all left, still
 * finds the cluster when its seeds are gone), then the seeds. 0, or -1
 * with err naming each address tried and why (r's map then unchanged).
 */
static int
refresh(struct redis *r, const struct conf *c, char *err, size_t errlen)
{
	char host[RLG_HOST_SIZE], why[256], list[1024];
	const char *p = c->redis_address;
	struct health **seen = NULL;
	uint16_t *slots;
	int *order = NULL, norder = 0, nmasters, nseen, k, i, port, rc = -1;
	size_t len;

	r->refresh_due = 0;
	r->refreshed_ms = mono_ms();
	list[0] = '\0';
	if ((slots = malloc(RLG_SLOTS * sizeof(*slots))) == NULL ||
	    (seen = malloc(MAX_HEALTH * sizeof(*seen))) == NULL ||
	    (order = malloc((size_t)(r->nnodes + MAX_HEALTH +
	    RLG_MAX_REDIS_ADDRESSES) * sizeof(*order))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	/* Connected masters first: no new connection, no seed that left. */
	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i]->master && r->nodes[i]->ctx != NULL)
			order[norder++] = i;
	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i]->master && r->nodes[i]->ctx == NULL)
			order[norder++] = i;
	nseen = known_get(c, seen, MAX_HEALTH);
	for (i = 0; i < nseen; i++)
		if (split_address(seen[i]->addr, host, sizeof(host),
		    &port) == 0 && (k = node_get(r, host, port)) != -1)
			order_add(order, &norder, k);
	nmasters = norder;
	for (; *p != '\0'; p += len) {
		char tok[RLG_REDIS_ADDR_SIZE];

		p += strspn(p, " \t");
		if ((len = strcspn(p, " \t")) == 0)
			break;
		snprintf(tok, sizeof(tok), "%.*s", (int)len, p);
		if (split_address(tok, host, sizeof(host), &port) == 0 &&
		    (k = node_get(r, host, port)) != -1)
			order_add(order, &norder, k);
	}
	for (i = 0; i < norder && rc == -1; i++) {
		struct node *nd = r->nodes[order[i]];
		int master = i < nmasters;

		/* A master (the process has seen it serve slots) is
		 * connected as calls connect (back-off, outage logs); a seed
		 * that serves nothing is only tried: it is no outage while
		 * another one answers. */
		if (master ? node_connect(r, c, order[i]) == -1 :
		    nd->ctx == NULL && (nd->ctx = dial_node(c, nd->host,
		    nd->port, why, sizeof(why))) == NULL) {
			if (master)
				health_why(nd->h, why, sizeof(why));
			tried(list, sizeof(list), nd->addr, why);
			continue;
		}
		if (!master)
			nd->epoch = atomic_load(&nd->h->epoch);
		if (map_from(r, c, order[i], slots, why, sizeof(why)) == -1) {
			tried(list, sizeof(list), nd->addr, why);
			if (nd->ctx->err != 0) {
				health_down(nd->h, why);
				node_close(nd);
			}
			continue;
		}
		atomic_fetch_add(&nd->h->refreshes, 1);
		for (k = 0; k < r->nnodes; k++)
			r->nodes[k]->master = 0;
		for (k = 0; k < RLG_SLOTS; k++)
			if (slots[k] != NO_NODE)
				r->nodes[slots[k]]->master = 1;
		memcpy(r->slots, slots, RLG_SLOTS * sizeof(*slots));
		known_set(r, c);
		rc = 0;
	}
	if (rc == -1)
		snprintf(err, errlen, "no cluster node gave the slot map "
		    "(tried %s)", list[0] ? list : "none");
done:
	free(order);
	free(seen);
	free(slots);
	return rc;
}

/*
 * The deployment's own outages (no seed gave the slot map, no Sentinel
 * answered): a record named "cluster ADDRESSES" or "sentinel ADDRESSES",
 * never a node's address. With a lone seed the address list is that
 * node's address, and its outages and back-off are its own: a map read
 * from another master must not end them.
 */
static struct health *
deploy_health(const struct conf *c)
{
	char name[RLG_REDIS_ADDR_SIZE];

	snprintf(name, sizeof(name), "%s %s", c->redis_mode ==
	    RLG_REDIS_CLUSTER ? "cluster" : c->redis_mode ==
	    RLG_REDIS_SENTINEL ? "sentinel" : "single", c->redis_address);
	return health_get(name);
}

/* Makes r fit c: a reload may have changed the deployment. */
static int
prepare(struct redis *r, const struct conf *c)
{
	char *t;

	if (r->conf_id == c->id && r->target != NULL)
		return 0;
	if ((t = target_of(c)) == NULL)
		return -1;
	if (r->target == NULL || strcmp(t, r->target) != 0) {
		reset(r);
		if (r->target != NULL)
			explicit_bzero(r->target, strlen(r->target));
		free(r->target);
		r->target = t;
		r->deploy = deploy_health(c);
		if (r->watching)
			sentinel_unwatch();
		r->watching = 0;
		if (c->redis_mode == RLG_REDIS_SENTINEL) {
			sentinel_watch(c);
			r->watching = 1;
			r->sentinel_epoch = sentinel_epoch();
		}
		if (c->redis_mode == RLG_REDIS_CLUSTER && r->slots == NULL) {
			if ((r->slots = malloc(RLG_SLOTS *
			    sizeof(*r->slots))) == NULL)
				return -1;
			memset(r->slots, 0xff, RLG_SLOTS * sizeof(*r->slots));
		}
		if (c->redis_mode == RLG_REDIS_SINGLE) {
			char host[RLG_HOST_SIZE];
			int port;

			if (split_address(c->redis_address, host, sizeof(host),
			    &port) == -1 ||
			    (r->master = node_get(r, host, port)) == -1)
				return -1;
			r->nodes[r->master]->master = 1;
		}
	} else {
		explicit_bzero(t, strlen(t));
		free(t);
	}
	r->conf_id = c->id;
	return 0;
}

/*
 * Sentinel: finds the master again when asked to (a failover announced, a
 * lost connection, READONLY), at most once per REFRESH_MIN_MS unless a
 * failover was announced, and closes every connection to the old one.
 * 0, or -1 when there is no master for now (logged once per outage).
 */
static int
find_master(struct redis *r, const struct conf *c)
{
	char host[RLG_HOST_SIZE], err[1024];
	long epoch = sentinel_epoch();
	int port, k, old = r->master, announced = 0;
	redisContext *ctx;

	if (epoch != r->sentinel_epoch) {
		r->sentinel_epoch = epoch;
		r->rediscover = announced = 1;
	}
	if (!r->rediscover && old >= 0)
		return 0;
	if (!announced && r->asked_ms != 0 &&
	    mono_ms() - r->asked_ms < REFRESH_MIN_MS)
		return old >= 0 ? 0 : -1;
	r->asked_ms = mono_ms();
	if ((ctx = sentinel_master(c, host, sizeof(host), &port, err,
	    sizeof(err))) == NULL) {
		health_down(r->deploy, err);
		metrics_redis_error(r->metrics);
		return -1;
	}
	health_up(r->deploy);
	r->rediscover = 0;
	if ((k = node_get(r, host, port)) == -1) {
		redisFree(ctx);
		return -1;
	}
	if (old >= 0 && (old != k || announced))
		node_close(r->nodes[old]);
	r->master = k;
	r->nodes[k]->master = 1;
	if (r->nodes[k]->ctx == NULL) {
		/* Checked by ROLE just now: the connection to use. */
		r->nodes[k]->ctx = ctx;
		r->nodes[k]->epoch = atomic_load(&r->nodes[k]->h->epoch);
	} else
		redisFree(ctx);
	return 0;
}

/* ---- one run ------------------------------------------------------------ */

struct redis *
redis_new(void)
{
	struct redis *r = calloc(1, sizeof(*r));

	if (r != NULL)
		r->master = -1;
	return r;
}

void
redis_free(struct redis *r)
{
	if (r == NULL)
		return;
	reset(r);
	if (r->watching)
		sentinel_unwatch();
	free(r->nodes);
	free(r->slots);
	if (r->target != NULL)
		explicit_bzero(r->target, strlen(r->target));
	free(r->target);
	free(r->pend);
	free(r->ent);
	free(r->pfd);
	free(r->pfdnode);
	free(r);
}

void
redis_set_metrics(struct redis *r, struct metrics_worker *w)
{
	r->metrics = w;
}

const char *
redis_node_address(const struct redis *r, int i)
{
	return i >= 0 && i < r->nnodes ? r->nodes[i]->addr : "";
}

/* Room for n calls' state and their entries (each call may bring ASKING,
 * each node a FUNCTION LOAD). */
static int
room(struct redis *r, size_t n)
{
	size_t ne = 2 * n + (size_t)r->nnodes + 1;

	if (n > r->pendcap) {
		struct pend *p = reallocarray(r->pend, n, sizeof(*p));

		if (p == NULL)
			return -1;
		r->pend = p;
		r->pendcap = n;
	}
	if (ne > (size_t)r->capent) {
		struct entry *e = reallocarray(r->ent, ne, sizeof(*e));

		if (e == NULL)
			return -1;
		r->ent = e;
		r->capent = (int)ne;
	}
	return 0;
}

/* The node for a call this round, or -1 (then *why says why). */
static int
route(struct redis *r, const struct conf *c, const struct redis_call *call,
    const struct pend *p, const char **why)
{
	int k, i;

	if (p->target >= 0)
		return p->target;
	*why = NULL;
	if (c->redis_mode != RLG_REDIS_CLUSTER)
		return r->master;
	if (call->key != NULL) {
		k = r->slots[slot_of(call->key, call->keylen)];
		if (k == NO_NODE) {
			*why = "no node serves its slot";
			return -1;
		}
		return k;
	}
	/* Any master: the first one not backed off. */
	for (k = -1, i = 0; i < r->nnodes; i++)
		if (r->nodes[i]->master) {
			if (k < 0)
				k = i;
			if (atomic_load(&r->nodes[i]->h->down_until_ms) == 0)
				return i;
		}
	if (k < 0)
		*why = "no master known";
	return k;
}

static void
ent_add(struct redis *r, int k, int call)
{
	struct node *nd = r->nodes[k];
	int e = r->nent++;

	r->ent[e].call = call;
	r->ent[e].next = -1;
	if (nd->tail >= 0)
		r->ent[nd->tail].next = e;
	else
		nd->head = e;
	nd->tail = e;
	nd->busy = 1;
}

static void
call_end(struct redis_call *call, struct pend *p, enum rlg_call_status st)
{
	call->status = st;
	p->done = 1;
}

/* Node k failed this round: its calls not answered yet end st, and the
 * node is backed off (and closed: its pipeline is out of step). */
static void
node_fail(struct redis *r, const struct conf *c, struct redis_call *calls,
    int k, enum rlg_call_status st, const char *why)
{
	struct node *nd = r->nodes[k];
	int e;

	for (e = nd->head; e >= 0; e = r->ent[e].next)
		if (r->ent[e].call >= 0) {
			call_end(&calls[r->ent[e].call],
			    &r->pend[r->ent[e].call], st);
			metrics_redis_error(r->metrics);
		}
	nd->head = nd->tail = -1;
	nd->busy = 0;
	node_close(nd);
	health_down(nd->h, why);
	if (c->redis_mode == RLG_REDIS_CLUSTER)
		r->refresh_due = 1;
	else if (c->redis_mode == RLG_REDIS_SENTINEL && k == r->master)
		r->rediscover = 1;
}

/* Error replies that say the server cannot run anything for now: an
 * outage to back off from and log once, not one call's problem. */
static int
server_refuses(const char *s)
{
	static const char *const codes[] = { "BUSY", "LOADING", "MASTERDOWN",
	    "READONLY", "NOAUTH", "NOPERM", "WRONGPASS", "OOM", "MISCONF",
	    "NOREPLICAS", "CLUSTERDOWN", "TRYAGAIN" };
	size_t i, n;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		n = strlen(codes[i]);
		if (strncmp(s, codes[i], n) == 0 &&
		    (s[n] == ' ' || s[n] == '\0'))
			return 1;
	}
	return 0;
}

static int
starts(const redisReply *rep, const char *prefix)
{
	return strncmp(rep->str, prefix, strlen(prefix)) == 0;
}

/* The library is missing or not this build's: reload, then the call
 * again. */
static int
wants_library(const redisReply *rep)
{
	return rlg_library[0] != '\0' && (starts(rep, "ERR Function not "
	    "found") || strstr(rep->str, "rlgate: library version") != NULL);
}

/* A FUNCTION LOAD reply, in the run: failures said once per node. */
static void
load_done(struct node *nd, redisReply *rep)
{
	if (rep->type != REDIS_REPLY_ERROR) {
		atomic_store(&nd->h->lib_logged, 0);
	} else if (atomic_exchange(&nd->h->lib_logged, 1) == 0)
		log_error("redis %s: FUNCTION LOAD of the rlgate library: "
		    "%s%s", nd->addr, rep->str, strstr(rep->str, "unknown "
		    "command") != NULL ? " (Redis 7.0 or later is needed)" :
		    "");
	freeReplyObject(rep);
}

/*
 * A call's answer from node k: done, or set up to go again (redirect,
 * library, TRYAGAIN). *again is set when it goes again; *pause when only
 * after a pause.
 */
static void
answer(struct redis *r, const struct conf *c, struct redis_call *call,
    struct pend *p, int k, long long start_ms, int *again, int *pause)
{
	struct node *nd = r->nodes[k];
	redisReply *rep = call->reply;
	struct slot_redirect rd;
	char host[RLG_HOST_SIZE];
	int t, asking = p->asking;

	p->target = -1;
	p->asking = 0;
	if (rep->type != REDIS_REPLY_ERROR) {
		health_up(nd->h);
		call_end(call, p, RLG_CALL_OK);
		return;
	}
	if (c->redis_mode == RLG_REDIS_CLUSTER &&
	    slot_parse_redirect(rep->str, rep->len, &rd) == 0 &&
	    p->redirects < MAX_REDIRECTS) {
		health_up(nd->h);
		atomic_fetch_add(&nd->h->redirects, 1);
		snprintf(host, sizeof(host), "%s", rd.host[0] ? rd.host :
		    nd->host);
		if ((t = node_get(r, host, rd.port)) >= 0) {
			p->redirects++;
			if (rd.ask) {
				p->target = t;
				p->asking = 1;
			} else {
				r->slots[rd.slot] = (uint16_t)t;
				r->nodes[t]->master = 1;
				r->refresh_due = 1;
			}
			goto again;
		}
	}
	if (wants_library(rep) && !p->reloaded) {
		health_up(nd->h);
		p->reloaded = 1;
		p->target = k;
		p->asking = asking;	/* an importing node: ASKING again */
		nd->load = 1;
		goto again;
	}
	if ((starts(rep, "TRYAGAIN") || starts(rep, "CLUSTERDOWN")) &&
	    mono_ms() - start_ms < c->redis_timeout_ms) {
		*again = *pause = 1;
		return;
	}
	if (starts(rep, "READONLY") && c->redis_mode != RLG_REDIS_SINGLE &&
	    !p->retried) {
		/* A master turned replica: find the new one (sentinel) or
		 * the new map (cluster) and send it there; it did not run. */
		p->retried = 1;
		if (c->redis_mode == RLG_REDIS_SENTINEL)
			r->rediscover = 1;
		else
			r->refresh_due = 1;
		goto again;
	}
	/* "ERR Protocol error: unauthenticated multibulk length": a server
	 * that wants AUTH refuses a long command unread and closes the
	 * connection. Not the call's answer: an outage. */
	if (server_refuses(rep->str) || starts(rep, "ERR Protocol error")) {
		health_down(nd->h, rep->str);
		metrics_redis_error(r->metrics);
		call_end(call, p, RLG_CALL_UNSENT);
		return;
	}
	/* An error of the call's own (bad arguments...): its answer. An
	 * old server is said once per node: the caller sees only the
	 * error. */
	if (starts(rep, "ERR unknown command 'FCALL") &&
	    atomic_exchange(&nd->h->lib_logged, 1) == 0)
		log_error("redis %s: %s (Redis 7.0 or later is needed)",
		    nd->addr, rep->str);
	health_up(nd->h);
	call_end(call, p, RLG_CALL_OK);
	return;
again:
	freeReplyObject(call->reply);
	call->reply = NULL;
	*again = 1;
}

/* Writes node k's pipeline. 0, or -1 (the node failed). */
static int
flush(struct node *nd)
{
	int done = 0;

	while (!done)
		if (redisBufferWrite(nd->ctx, &done) == REDIS_ERR)
			return -1;
	return 0;
}

/*
 * Reads every node's replies until each has answered all it owes or the
 * deadline passes: one poll over all of them, so the round trips overlap.
 */
static void
read_all(struct redis *r, const struct conf *c, struct redis_call *calls,
    long long deadline_us, long long start_ms, int *again, int *pause)
{
	char why[256];
	redisReply *rep;
	int i, k, e, np, waiting, rc;
	long long left;

	if (r->nnodes > r->cappfd) {
		struct pollfd *pf = reallocarray(r->pfd, (size_t)r->nnodes,
		    sizeof(*pf));
		int *pn;

		if (pf != NULL)
			r->pfd = pf;
		pn = reallocarray(r->pfdnode, (size_t)r->nnodes, sizeof(*pn));
		if (pn != NULL)
			r->pfdnode = pn;
		if (pf != NULL && pn != NULL)
			r->cappfd = r->nnodes;
		else {
			for (k = 0; k < r->nnodes; k++)
				if (r->nodes[k]->busy)
					node_fail(r, c, calls, k,
					    RLG_CALL_FAILED, "out of memory");
			return;
		}
	}
	for (;;) {
		np = 0;
		for (k = 0; k < r->nnodes; k++)
			if (r->nodes[k]->busy) {
				r->pfd[np].fd = r->nodes[k]->ctx->fd;
				r->pfd[np].events = POLLIN;
				r->pfd[np].revents = 0;
				r->pfdnode[np++] = k;
			}
		if (np == 0)
			return;
		left = deadline_us - mono_us();
		if (left <= 0 || (rc = poll(r->pfd, (nfds_t)np,
		    (int)((left + 999) / 1000))) == 0) {
			snprintf(why, sizeof(why), "timed out after %lld ms",
			    c->redis_timeout_ms);
			for (i = 0; i < np; i++)
				node_fail(r, c, calls, r->pfdnode[i],
				    RLG_CALL_FAILED, why);
			return;
		}
		if (rc < 0)
			continue;	/* EINTR */
		for (i = 0; i < np; i++) {
			struct node *nd = r->nodes[r->pfdnode[i]];

			if (r->pfd[i].revents == 0)
				continue;
			k = r->pfdnode[i];
			if (redisBufferRead(nd->ctx) == REDIS_ERR) {
				ctx_why(nd->ctx, c->redis_timeout_ms, why,
				    sizeof(why));
				node_fail(r, c, calls, k, RLG_CALL_FAILED,
				    why);
				continue;
			}
			waiting = 1;
			while (waiting && nd->head >= 0) {
				rep = NULL;
				if (redisGetReplyFromReader(nd->ctx,
				    (void **)&rep) == REDIS_ERR) {
					ctx_why(nd->ctx, c->redis_timeout_ms,
					    why, sizeof(why));
					node_fail(r, c, calls, k,
					    RLG_CALL_FAILED, why);
					break;
				}
				if (rep == NULL) {
					waiting = 0;
					break;
				}
				e = nd->head;
				nd->head = r->ent[e].next;
				if (nd->head < 0) {
					nd->tail = -1;
					nd->busy = 0;
				}
				if (r->ent[e].call == ENT_ASKING)
					freeReplyObject(rep);
				else if (r->ent[e].call == ENT_LOAD)
					load_done(nd, rep);
				else {
					struct redis_call *cl =
					    &calls[r->ent[e].call];

					freeReplyObject(cl->reply);
					cl->reply = rep;
					cl->node = k;
					answer(r, c, cl,
					    &r->pend[r->ent[e].call], k,
					    start_ms, again, pause);
				}
			}
		}
	}
}

static void
append(struct redis *r, int k, struct redis_call *call, int i)
{
	struct node *nd = r->nodes[k];

	if (nd->load && !nd->loaded) {
		const char *argv[4] = { "FUNCTION", "LOAD", "REPLACE",
		    rlg_library };

		redisAppendCommandArgv(nd->ctx, 4, argv, NULL);
		ent_add(r, k, ENT_LOAD);
		nd->loaded = 1;
	}
	if (r->pend[i].asking) {
		redisAppendCommand(nd->ctx, "ASKING");
		ent_add(r, k, ENT_ASKING);
	}
	redisAppendCommandArgv(nd->ctx, call->argc, call->argv,
	    call->argvlen);
	ent_add(r, k, i);
	call->node = k;
}

/* Cluster: reads the slot map now; the deployment is down when no node
 * gives it. */
static void
update_map(struct redis *r, const struct conf *c)
{
	char err[1024];

	if (refresh(r, c, err, sizeof(err)) == 0)
		health_up(r->deploy);
	else
		health_down(r->deploy, err);
}

/* Routes and connects every call not done yet (pend's node); returns how
 * many have no node to go to. */
static int
route_all(struct redis *r, const struct conf *c, struct redis_call *calls,
    size_t n)
{
	const char *why;
	int k, lost = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (r->pend[i].done)
			continue;
		k = route(r, c, &calls[i], &r->pend[i], &why);
		if (k < 0 || node_connect(r, c, k) == -1) {
			calls[i].node = k;
			k = -1;
			lost++;
		}
		r->pend[i].node = k;
	}
	return lost;
}

/* The deployment cannot be reached at all: every call unsent, said once. */
static int
all_unsent(struct redis *r, struct redis_call *calls, size_t n,
    const char *why)
{
	size_t i;

	if (why != NULL)
		health_down(r->deploy, why);
	for (i = 0; i < n; i++) {
		calls[i].status = RLG_CALL_UNSENT;
		metrics_redis_error(r->metrics);
	}
	return (int)n;
}

int
redis_run(struct redis *r, const struct conf *c, struct redis_call *calls,
    size_t n)
{
	long long start_ms = mono_ms(), t0, deadline;
	int round, k, again, pause, answered = 0, bad = 0, looked = 0;
	char err[1024];
	size_t i;

	for (i = 0; i < n; i++) {
		calls[i].reply = NULL;
		calls[i].status = RLG_CALL_UNSENT;
		calls[i].node = -1;
	}
	if (n == 0)
		return 0;
	if (prepare(r, c) == -1 || room(r, n) == -1)
		return all_unsent(r, calls, n, NULL);
	memset(r->pend, 0, n * sizeof(*r->pend));
	for (i = 0; i < n; i++)
		r->pend[i].target = -1;
	for (k = 0; k < r->nnodes; k++)
		r->nodes[k]->load = r->nodes[k]->loaded =
		    r->nodes[k]->checked = 0;
	t0 = mono_us();
	for (round = 0; round < MAX_ROUNDS; round++) {
		if (c->redis_mode == RLG_REDIS_CLUSTER && r->refresh_due &&
		    (round == 0 || r->refreshed_ms == 0) &&
		    mono_ms() - r->refreshed_ms >= REFRESH_MIN_MS) {
			update_map(r, c);
			looked = 1;
		}
		if (c->redis_mode == RLG_REDIS_SENTINEL)
			find_master(r, c);
		/* Route and connect, then append each call to its node. */
		r->nent = 0;
		for (k = 0; k < r->nnodes; k++) {
			r->nodes[k]->head = r->nodes[k]->tail = -1;
			r->nodes[k]->busy = 0;
		}
		if (route_all(r, c, calls, n) > 0 && !looked &&
		    c->redis_mode != RLG_REDIS_SINGLE &&
		    mono_ms() - start_ms < c->redis_timeout_ms) {
			/* A call with no node to go to did not run: after a
			 * failover the map (the master) still names the dead
			 * node. Look again now, once per run, within the
			 * timeout (and at most once per REFRESH_MIN_MS, as
			 * find_master() too), and route again: the first
			 * request after a failover is decided, not on_error.
			 * Nothing is appended yet: the blocking commands of a
			 * refresh share no pipeline with calls. */
			looked = 1;
			if (c->redis_mode == RLG_REDIS_CLUSTER &&
			    mono_ms() - r->refreshed_ms >= REFRESH_MIN_MS)
				update_map(r, c);
			else if (c->redis_mode == RLG_REDIS_SENTINEL) {
				r->rediscover = 1;
				find_master(r, c);
			}
			route_all(r, c, calls, n);
		}
		for (i = 0; i < n; i++) {
			if (r->pend[i].done)
				continue;
			if ((k = r->pend[i].node) < 0) {
				/* Not sent: a refresh may find its node, the
				 * Sentinels a new master, at the next run. */
				if (c->redis_mode == RLG_REDIS_CLUSTER)
					r->refresh_due = 1;
				else if (c->redis_mode == RLG_REDIS_SENTINEL)
					r->rediscover = 1;
				call_end(&calls[i], &r->pend[i],
				    RLG_CALL_UNSENT);
				metrics_redis_error(r->metrics);
				continue;
			}
			append(r, k, &calls[i], (int)i);
		}
		for (k = 0; k < r->nnodes; k++)
			if (r->nodes[k]->busy && flush(r->nodes[k]) == -1) {
				ctx_why(r->nodes[k]->ctx, c->redis_timeout_ms,
				    err, sizeof(err));
				node_fail(r, c, calls, k, RLG_CALL_FAILED,
				    err);
			}
		again = pause = 0;
		deadline = mono_us() + c->redis_timeout_ms * 1000;
		read_all(r, c, calls, deadline, start_ms, &again, &pause);
		answered = 1;
		if (!again)
			break;
		if (pause)
			sleep_ms(TRYAGAIN_PAUSE_MS);
	}
	/* Calls still going again after MAX_ROUNDS keep their last reply. */
	for (i = 0; i < n; i++) {
		if (!r->pend[i].done)
			calls[i].status = calls[i].reply != NULL &&
			    calls[i].reply->type == REDIS_REPLY_ERROR ?
			    RLG_CALL_UNSENT : RLG_CALL_FAILED;
		if (calls[i].status != RLG_CALL_OK)
			bad++;
	}
	if (answered && bad < (int)n)
		metrics_redis_latency(r->metrics, mono_us() - t0);
	return bad;
}

/* ---- status, probe, rlgate-ctl ---------------------------------------- */

/* Makes sure r knows its masters: the slot map (cluster) or the master
 * (sentinel). 0, or -1 with err set. */
static int
know_masters(struct redis *r, const struct conf *c, char *err, size_t errlen)
{
	int k;

	if (prepare(r, c) == -1) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (c->redis_mode == RLG_REDIS_CLUSTER) {
		for (k = 0; k < r->nnodes && !r->nodes[k]->master; k++)
			;
		if ((k == r->nnodes || r->refresh_due) &&
		    refresh(r, c, err, errlen) == -1 && k == r->nnodes)
			return -1;
	} else if (c->redis_mode == RLG_REDIS_SENTINEL &&
	    find_master(r, c) == -1) {
		health_why(r->deploy, err, errlen);
		return -1;
	}
	return 0;
}

static int
is_master(const struct redis *r, const struct conf *c, int k)
{
	return c->redis_mode == RLG_REDIS_CLUSTER ? r->nodes[k]->master :
	    k == r->master;
}

int
redis_health(struct redis *r, const struct conf *c, struct redis_health *h,
    size_t max, char *errbuf, size_t errlen)
{
	struct redis_health *e;
	struct node *nd;
	redisReply *rep;
	long long t0;
	int k, count = 0;

	if (know_masters(r, c, errbuf, errlen) == -1)
		return -1;
	for (k = 0; k < r->nnodes; k++) {
		if (!is_master(r, c, k))
			continue;
		if ((size_t)count++ >= max)
			continue;
		nd = r->nodes[k];
		e = &h[count - 1];
		memset(e, 0, sizeof(*e));
		snprintf(e->address, sizeof(e->address), "%s", nd->addr);
		snprintf(e->role, sizeof(e->role), "master");
		e->errors = atomic_load(&nd->h->errors);
		e->redirects = atomic_load(&nd->h->redirects);
		e->refreshes = atomic_load(&nd->h->refreshes);
		nd->checked = 0;
		if (node_connect(r, c, k) == -1) {
			health_why(nd->h, e->errstr, sizeof(e->errstr));
			continue;
		}
		t0 = mono_us();
		if ((rep = redisCommand(nd->ctx, "PING")) == NULL ||
		    rep->type == REDIS_REPLY_ERROR) {
			if (rep != NULL)
				snprintf(e->errstr, sizeof(e->errstr),
				    "PING: %s", rep->str);
			else
				ctx_why(nd->ctx, c->redis_timeout_ms,
				    e->errstr, sizeof(e->errstr));
			freeReplyObject(rep);
			node_close(nd);
			health_down(nd->h, e->errstr);
			metrics_redis_error(r->metrics);
			continue;
		}
		freeReplyObject(rep);
		e->latency_us = mono_us() - t0;
		e->ok = 1;
		health_up(nd->h);
	}
	if (count == 0)
		snprintf(errbuf, errlen, "no master known");
	return count == 0 ? -1 : count;
}

int
redis_each_master(struct redis *r, const struct conf *c, redis_master_fn fn,
    void *arg, char *errbuf, size_t errlen)
{
	redisContext *ctx;
	char why[256];
	int k, rc;

	if (know_masters(r, c, errbuf, errlen) == -1)
		return -1;
	for (k = 0; k < r->nnodes; k++) {
		if (!is_master(r, c, k))
			continue;
		/* A connection of its own: a SCAN loop must not share a
		 * pipeline with redis_run(). */
		if ((ctx = dial_node(c, r->nodes[k]->host, r->nodes[k]->port,
		    why, sizeof(why))) == NULL) {
			snprintf(errbuf, errlen, "%s: %s", r->nodes[k]->addr,
			    why);
			return -1;
		}
		rc = fn(arg, ctx, r->nodes[k]->addr);
		redisFree(ctx);
		if (rc == -1)
			return -1;
	}
	return 0;
}

redisContext *
redis_connect(const struct conf *c, const char *key, size_t keylen,
    char *errbuf, size_t errlen)
{
	char host[RLG_HOST_SIZE], why[256];
	struct redis *r;
	redisContext *ctx = NULL;
	int port, k;

	switch (c->redis_mode) {
	case RLG_REDIS_SINGLE:
		if ((ctx = redis_dial(c->redis_address, c->redis_username,
		    c->redis_password, c->redis_database,
		    c->redis_connect_timeout_ms, c->redis_timeout_ms, why,
		    sizeof(why))) == NULL)
			snprintf(errbuf, errlen, "%s: %s", c->redis_address,
			    why);
		return ctx;
	case RLG_REDIS_SENTINEL:
		return sentinel_master(c, host, sizeof(host), &port, errbuf,
		    errlen);
	case RLG_REDIS_CLUSTER:
		break;
	}
	if ((r = redis_new()) == NULL) {
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	if (know_masters(r, c, errbuf, errlen) == 0) {
		k = r->slots[slot_of(key != NULL ? key : "", key != NULL ?
		    keylen : 0)];
		if (k == NO_NODE)
			snprintf(errbuf, errlen, "no node serves the key's "
			    "slot");
		else if ((ctx = dial_node(c, r->nodes[k]->host,
		    r->nodes[k]->port, why, sizeof(why))) == NULL)
			snprintf(errbuf, errlen, "%s: %s", r->nodes[k]->addr,
			    why);
	}
	redis_free(r);
	return ctx;
}

int
redis_probe(const struct conf *c, char *errbuf, size_t errlen)
{
	char host[RLG_HOST_SIZE], why[512], list[1024] = "";
	struct redis *r;
	redisContext *ctx;
	int port, k, rc = 0;

	if (c->redis_mode != RLG_REDIS_CLUSTER) {
		ctx = c->redis_mode == RLG_REDIS_SINGLE ?
		    redis_dial(c->redis_address, c->redis_username,
		    c->redis_password, c->redis_database,
		    c->redis_connect_timeout_ms, c->redis_timeout_ms, errbuf,
		    errlen) :
		    sentinel_master(c, host, sizeof(host), &port, errbuf,
		    errlen);
		if (ctx == NULL)
			return -1;
		rc = load_library(ctx, c->redis_timeout_ms, errbuf, errlen);
		redisFree(ctx);
		return rc;
	}
	if ((r = redis_new()) == NULL) {
		snprintf(errbuf, errlen, "out of memory");
		return -1;
	}
	if (prepare(r, c) == -1 || refresh(r, c, errbuf, errlen) == -1) {
		redis_free(r);
		return -1;
	}
	for (k = 0; k < r->nnodes; k++) {
		if (!r->nodes[k]->master)
			continue;
		if ((ctx = dial_node(c, r->nodes[k]->host, r->nodes[k]->port,
		    why, sizeof(why))) == NULL ||
		    load_library(ctx, c->redis_timeout_ms, why,
		    sizeof(why)) == -1) {
			tried(list, sizeof(list), r->nodes[k]->addr, why);
			rc = -1;
		}
		if (ctx != NULL)
			redisFree(ctx);
	}
	for (k = 0; k < RLG_SLOTS && r->slots[k] != NO_NODE; k++)
		;
	if (rc == -1)
		snprintf(errbuf, errlen, "cluster masters failed: %s", list);
	else if (k < RLG_SLOTS) {
		snprintf(errbuf, errlen, "no master serves slot %d (the "
		    "cluster does not cover every slot)", k);
		rc = -1;
	}
	redis_free(r);
	return rc;
}
