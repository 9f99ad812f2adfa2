/*
 * redis_deploy: the deployment as [redis] mode says: the single server,
 * the cluster's slot map (read from masters, the masters other loops
 * saw, the seeds), the Sentinels' master; and what asks the deployment as
 * a whole. Not here: connections (redis_conn.c), running calls
 * (redis.c), asking the Sentinels (sentinel.c), the status endpoint's,
 * the start-up probe's and rlgate-ctl's questions (redis_admin.c, above
 * redis.c and this file).
 */
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
#include "redis_int.h"
#include "redis_io.h"
#include "sentinel.h"
#include "slot.h"

/* The masters of the last slot map any loop (or the start-up probe) read,
 * and the seeds of that cluster: where a loop that cannot reach its own
 * masters or the seeds asks for the map. Under known_lock. */
static pthread_mutex_t	known_lock = PTHREAD_MUTEX_INITIALIZER;
static char		*known_seeds;
static struct health	*known[MAX_HEALTH];
static int		 nknown;

/* ---- the deployment: single, cluster, sentinel ---------------------- */

/* Everything that, changed by a reload, needs new connections. */
static char *
target_of(const struct conf *c)
{
	char *s;

	if (asprintf(&s, "%d|%s|%s|%s|%d|%s|%s|%d|%s|%s|%s|%s",
	    (int)c->redis_mode,
	    c->redis_address, c->redis_username ? c->redis_username : "",
	    c->redis_password ? c->redis_password : "", c->redis_database,
	    c->redis_master_name ? c->redis_master_name : "",
	    c->redis_sentinel_password ? c->redis_sentinel_password : "",
	    c->redis_tls, c->redis_tls_ca_file ? c->redis_tls_ca_file : "",
	    c->redis_tls_server_name ? c->redis_tls_server_name : "",
	    c->redis_tls_cert_file ? c->redis_tls_cert_file : "",
	    c->redis_tls_key_file ? c->redis_tls_key_file : "") == -1)
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

	if ((k = redis_conn_node_get(b->r, host[0] != '\0' ? host :
	    b->asked_host, port)) == -1)
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
	if (redis_conn_command(r->nodes[k]->ctx, c->redis_timeout_ms, &rep, why,
	    sizeof(why), 2, sargv) == 0)
		rc = slot_parse_slots(rep, map_range, &b, why, sizeof(why));
	else if (strstr(why, "cluster support disabled") != NULL) {
		snprintf(err, errlen, "cluster support is disabled there: "
		    "mode = cluster needs cluster-enabled yes");
		return -1;
	} else if (strstr(why, "NOPERM") != NULL) {
		/* The ACL user lacks cluster|slots: say so, not what
		 * CLUSTER SHARDS (for servers without SLOTS) would. */
		snprintf(err, errlen, "%s", why);
		return -1;
	} else if (r->nodes[k]->ctx->err == 0 &&
	    redis_conn_command(r->nodes[k]->ctx, c->redis_timeout_ms, &rep, why,
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

/* Appends "addr (why)" to a list of tries (redis_int.h). */
void
redis_deploy_tried(char *buf, size_t len, const char *addr, const char *why)
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
int
redis_deploy_refresh(struct redis *r, const struct conf *c, char *err, size_t errlen)
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
		if (redis_conn_split_address(seen[i]->addr, host,
		    sizeof(host), &port) == 0 &&
		    (k = redis_conn_node_get(r, host, port)) != -1)
			order_add(order, &norder, k);
	nmasters = norder;
	for (; *p != '\0'; p += len) {
		char tok[RLG_REDIS_ADDR_SIZE];

		p += strspn(p, " \t");
		if ((len = strcspn(p, " \t")) == 0)
			break;
		snprintf(tok, sizeof(tok), "%.*s", (int)len, p);
		if (redis_conn_split_address(tok, host, sizeof(host),
		    &port) == 0 &&
		    (k = redis_conn_node_get(r, host, port)) != -1)
			order_add(order, &norder, k);
	}
	for (i = 0; i < norder && rc == -1; i++) {
		struct node *nd = r->nodes[order[i]];
		int master = i < nmasters;

		/* A master (the process has seen it serve slots) is
		 * connected as calls connect (back-off, outage logs); a seed
		 * that serves nothing is only tried: it is no outage while
		 * another one answers. */
		if (master ? redis_conn_node_connect(r, c, order[i]) == -1 :
		    nd->ctx == NULL && (nd->ctx = redis_conn_dial_node(c,
		    nd->host, nd->port, why, sizeof(why))) == NULL) {
			if (master)
				redis_conn_health_why(nd->h, why, sizeof(why));
			redis_deploy_tried(list, sizeof(list), nd->addr, why);
			continue;
		}
		if (!master)
			nd->epoch = atomic_load(&nd->h->epoch);
		if (map_from(r, c, order[i], slots, why, sizeof(why)) == -1) {
			redis_deploy_tried(list, sizeof(list), nd->addr, why);
			if (nd->ctx->err != 0) {
				redis_conn_health_down(nd->h, why);
				redis_conn_node_close(nd);
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

/* Cluster: reads the slot map now; the deployment is down when no node
 * gives it. */
void
redis_deploy_update_map(struct redis *r, const struct conf *c)
{
	char err[1024];

	if (redis_deploy_refresh(r, c, err, sizeof(err)) == 0)
		redis_conn_health_up(r->deploy);
	else
		redis_conn_health_down(r->deploy, err);
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
	return redis_conn_health_get(name);
}

/* Makes r fit c: a reload may have changed the deployment. */
int
redis_deploy_prepare(struct redis *r, const struct conf *c)
{
	char *t;

	if (r->conf_id == c->id && r->target != NULL)
		return 0;
	if ((t = target_of(c)) == NULL)
		return -1;
	if (r->target == NULL || strcmp(t, r->target) != 0) {
		redis_conn_reset(r);
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

			if (redis_conn_split_address(c->redis_address, host,
			    sizeof(host), &port) == -1 ||
			    (r->master = redis_conn_node_get(r, host,
			    port)) == -1)
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
int
redis_deploy_find_master(struct redis *r, const struct conf *c)
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
		redis_conn_health_down(r->deploy, err);
		metrics_redis_error(r->metrics);
		return -1;
	}
	redis_conn_health_up(r->deploy);
	r->rediscover = 0;
	if ((k = redis_conn_node_get(r, host, port)) == -1) {
		redis_io_free(ctx);
		return -1;
	}
	if (old >= 0 && (old != k || announced))
		redis_conn_node_close(r->nodes[old]);
	r->master = k;
	r->nodes[k]->master = 1;
	if (r->nodes[k]->ctx == NULL) {
		/* Checked by ROLE just now: the connection to use. */
		r->nodes[k]->ctx = ctx;
		r->nodes[k]->epoch = atomic_load(&r->nodes[k]->h->epoch);
	} else
		redis_io_free(ctx);
	return 0;
}
