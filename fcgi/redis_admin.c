/*
 * redis_admin: what asks the deployment as a whole, above the running of
 * calls (redis.c) and the deployment (redis_deploy.c): the status
 * endpoint's health of each master, rlgate-ctl's connections (one key's
 * node, every master) and the start-up probe. Not on the request path;
 * not here: connections (redis_conn.c), the slot map and the master
 * (redis_deploy.c), running calls (redis.c).
 */
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
#include "replicas.h"
#include "sentinel.h"
#include "slot.h"

/* ---- status, probe, rlgate-ctl ---------------------------------------- */

/* Makes sure r knows its masters: the slot map (cluster) or the master
 * (sentinel). 0, or -1 with err set. */
static int
know_masters(struct redis *r, const struct conf *c, char *err, size_t errlen)
{
	int k;

	if (redis_deploy_prepare(r, c) == -1) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (c->redis_mode == RLG_REDIS_CLUSTER) {
		for (k = 0; k < r->nnodes && !r->nodes[k]->master; k++)
			;
		if ((k == r->nnodes || r->refresh_due) &&
		    redis_deploy_refresh(r, c, err, errlen) == -1 && k == r->nnodes)
			return -1;
	} else if (c->redis_mode == RLG_REDIS_SENTINEL &&
	    redis_deploy_find_master(r, c) == -1) {
		redis_conn_health_why(r->deploy, err, errlen);
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
		if (redis_conn_node_connect(r, c, k) == -1) {
			redis_conn_health_why(nd->h, e->errstr,
			    sizeof(e->errstr));
			continue;
		}
		t0 = mono_us();
		if ((rep = redis_io_command(nd->ctx, "PING")) == NULL ||
		    rep->type == REDIS_REPLY_ERROR) {
			if (rep != NULL)
				snprintf(e->errstr, sizeof(e->errstr),
				    "PING: %s", rep->str);
			else
				redis_why(nd->ctx, c->redis_timeout_ms,
				    e->errstr, sizeof(e->errstr));
			freeReplyObject(rep);
			redis_conn_node_close(nd);
			redis_conn_health_down(nd->h, e->errstr);
			metrics_redis_error(r->metrics);
			continue;
		}
		freeReplyObject(rep);
		e->latency_us = mono_us() - t0;
		if (atomic_load(&nd->h->lib_missing)) {
			/* Up, but no call of this build runs there: only a
			 * call's answer ends that outage. */
			redis_conn_health_why(nd->h, e->errstr,
			    sizeof(e->errstr));
			continue;
		}
		e->ok = 1;
		redis_conn_health_up(nd->h);
	}
	if (count == 0)
		snprintf(errbuf, errlen, "no master known");
	return count == 0 ? -1 : count;
}

/* Why a node failed, for a caller that names c->redis_address: the node
 * too, unless that is it (single mode). */
static void
node_error(const struct conf *c, char *errbuf, size_t errlen,
    const char *addr, const char *why)
{
	if (c->redis_mode == RLG_REDIS_SINGLE)
		snprintf(errbuf, errlen, "%s", why);
	else
		snprintf(errbuf, errlen, "%s: %s", addr, why);
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
		if ((ctx = redis_conn_dial_node(c, r->nodes[k]->host,
		    r->nodes[k]->port, why, sizeof(why))) == NULL) {
			node_error(c, errbuf, errlen, r->nodes[k]->addr, why);
			return -1;
		}
		rc = fn(arg, ctx, r->nodes[k]->addr);
		redis_io_free(ctx);
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
			node_error(c, errbuf, errlen, c->redis_address, why);
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
		else if ((ctx = redis_conn_dial_node(c, r->nodes[k]->host,
		    r->nodes[k]->port, why, sizeof(why))) == NULL)
			node_error(c, errbuf, errlen, r->nodes[k]->addr, why);
	}
	redis_free(r);
	return ctx;
}

/*
 * [redis] replicas: reads how many replicas the master at addr has
 * connected (ROLE) into its health record, which says (a warning, not an
 * error: replicas may attach later) when they are fewer: until it has
 * them, every admission there follows on_error. The requests' rounds then
 * know the count from the start.
 */
static void
probe_replicas(const struct conf *c, redisContext *ctx, const char *addr)
{
	const char *argv[1] = { "ROLE" };
	redisReply *rep = NULL;
	char why[256];
	int n;

	if (c->redis_replicas == 0 || redis_conn_command(ctx,
	    c->redis_timeout_ms, &rep, why, sizeof(why), 1, argv) == -1)
		return;
	if ((n = replicas_of_role(rep)) >= 0)
		redis_conn_replicas_seen(redis_conn_health_get(addr), n,
		    c->redis_replicas);
	freeReplyObject(rep);
}

/* This build's library on a master (host:port) and what the ACL user may
 * run of it. A library that cannot be there marks the master down, said:
 * the caller logs err, requests do not again. 0 or -1. */
static int
probe_library(const struct conf *c, redisContext *ctx, const char *host,
    int port, char *err, size_t errlen)
{
	struct health *h;

	if (redis_library(ctx, c->redis_timeout_ms, 0, err, errlen) == -1) {
		if (ctx->err == 0) {
			h = redis_conn_health_at(host, port);
			atomic_store(&h->lib_missing, 1);
			redis_conn_health_said(h, err);
		}
		return -1;
	}
	return redis_lib_acl(ctx, c->redis_timeout_ms, c->key_prefix, err,
	    errlen);
}

int
redis_probe(const struct conf *c, char *errbuf, size_t errlen)
{
	char host[RLG_HOST_SIZE], why[512], list[1024] = "";
	struct redis *r;
	redisContext *ctx;
	int port = 0, k, rc = 0;

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
		/* Dialled: an address that splits. */
		if (c->redis_mode == RLG_REDIS_SINGLE)
			(void)redis_conn_split_address(c->redis_address, host,
			    sizeof(host), &port);
		rc = probe_library(c, ctx, host, port, errbuf, errlen);
		if (rc == 0) {
			if (c->redis_mode == RLG_REDIS_SENTINEL)
				snprintf(why, sizeof(why), "%s:%d", host, port);
			probe_replicas(c, ctx, c->redis_mode ==
			    RLG_REDIS_SINGLE ? c->redis_address : why);
		}
		redis_io_free(ctx);
		return rc;
	}
	if ((r = redis_new()) == NULL) {
		snprintf(errbuf, errlen, "out of memory");
		return -1;
	}
	if (redis_deploy_prepare(r, c) == -1 ||
	    redis_deploy_refresh(r, c, errbuf, errlen) == -1) {
		redis_free(r);
		return -1;
	}
	for (k = 0; k < r->nnodes; k++) {
		if (!r->nodes[k]->master)
			continue;
		if ((ctx = redis_conn_dial_node(c, r->nodes[k]->host,
		    r->nodes[k]->port, why, sizeof(why))) == NULL ||
		    probe_library(c, ctx, r->nodes[k]->host, r->nodes[k]->port,
		    why, sizeof(why)) == -1) {
			redis_deploy_tried(list, sizeof(list), r->nodes[k]->addr, why);
			rc = -1;
		} else
			probe_replicas(c, ctx, r->nodes[k]->addr);
		if (ctx != NULL)
			redis_io_free(ctx);
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
