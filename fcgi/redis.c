/*
 * redis: the Redis layer on hiredis (0.14: no cluster client, so it routes
 * by itself): redis.h's handle and one run, one pipelined round trip to
 * all nodes at once: routing, redirects, the library reloaded where it is
 * missing, TRYAGAIN. Not here: what a call means (limiter), connections
 * and health (redis_conn.c), the slot map and the master
 * (redis_deploy.c), the slot function and reply parsers (slot.c).
 */
#include <poll.h>
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
#include "scripts.h"
#include "sentinel.h"
#include "slot.h"

#define MAX_REDIRECTS		5	/* per call and run */
#define MAX_ROUNDS		16	/* round trips per run, all causes */
#define TRYAGAIN_PAUSE_MS	10

/* A reply a node owes this round: a call's, or ASKING's, WAIT's or
 * ROLE's. */
#define ENT_ASKING	(-1)
#define ENT_WAIT	(-2)
#define ENT_ROLE	(-3)
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
	redis_conn_reset(r);
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

int
redis_keys_together(const struct conf *c)
{
	return c->redis_mode != RLG_REDIS_CLUSTER;
}

int
redis_key_group(const struct conf *c, const char *key, size_t keylen)
{
	return redis_keys_together(c) ? 0 : slot_of(key, keylen);
}

/* Room for n calls' state and their entries in a round: each call and
 * its ASKING, a WAIT and a ROLE per node with calls (at most n each). */
static int
room(struct redis *r, size_t n)
{
	size_t ne = 4 * n + 1;

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
	if (nd->first < 0)
		nd->first = e;
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
	redis_conn_node_close(nd);
	redis_conn_health_down(nd->h, why);
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

/* This build's library is missing there (a new or flushed node, or
 * rlgate-ctl prune): made sure of (library_at()), then the call again. */
static int
wants_library(const redisReply *rep)
{
	return rlg_library[0] != '\0' && starts(rep, "ERR Function not found");
}

/*
 * Node k lacks this build's library: redis_library() on its connection,
 * between round trips (its pipeline is empty then), once per run. Where
 * it cannot be there (the user may not load it, another library holds its
 * name), the node is down: its calls follow on_error, why is logged once
 * per outage, and it is tried again after the back-off.
 */
static void
library_at(struct redis *r, const struct conf *c, int k)
{
	struct node *nd = r->nodes[k];
	char why[512];

	nd->loaded = 1;
	if (nd->ctx == NULL || redis_library(nd->ctx, c->redis_timeout_ms, 0,
	    why, sizeof(why)) != -1)
		return;
	redis_conn_node_close(nd);
	atomic_store(&nd->h->lib_missing, 1);
	redis_conn_health_down(nd->h, why);
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
		redis_conn_health_up(nd->h);
		call_end(call, p, RLG_CALL_OK);
		return;
	}
	if (c->redis_mode == RLG_REDIS_CLUSTER &&
	    slot_parse_redirect(rep->str, rep->len, &rd) == 0 &&
	    p->redirects < MAX_REDIRECTS) {
		redis_conn_health_up(nd->h);
		atomic_fetch_add(&nd->h->redirects, 1);
		snprintf(host, sizeof(host), "%s", rd.host[0] ? rd.host :
		    nd->host);
		if ((t = redis_conn_node_get(r, host, rd.port)) >= 0) {
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
		redis_conn_health_down(nd->h, rep->str);
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
	redis_conn_health_up(nd->h);
	call_end(call, p, RLG_CALL_OK);
	return;
again:
	freeReplyObject(call->reply);
	call->reply = NULL;
	*again = 1;
}

/*
 * WAIT's reply on node nd: how many replicas hold every write of the
 * round's pipeline, for each call of the round that asked (the entries
 * read stay linked from nd->first). A call that goes again this run gets
 * the number of its next round instead.
 */
static void
wait_done(struct redis *r, struct redis_call *calls, struct node *nd,
    redisReply *rep)
{
	int e, acked = rep->type == REDIS_REPLY_INTEGER &&
	    rep->integer >= 0 && rep->integer < 1000 ? (int)rep->integer : -1;

	for (e = nd->first; e >= 0; e = r->ent[e].next)
		if (r->ent[e].call >= 0 && calls[r->ent[e].call].waited)
			calls[r->ent[e].call].acked = acked;
	freeReplyObject(rep);
}

/*
 * ROLE's reply on node nd, first in its pipeline: the master's count of
 * replicas, read again. It serves the next rounds, as this one's WAIT went
 * (or not) by the count before; but where it is short, this round's WAIT
 * could only time out: it is not awaited (wait_late() once the calls are
 * answered), and the calls that asked get the count as acked, as if no
 * WAIT had gone.
 */
static void
role_done(struct redis *r, const struct conf *c, struct redis_call *calls,
    struct node *nd, redisReply *rep)
{
	int e, n = redis_conn_role_seen(nd->h, rep, c->redis_replicas);

	freeReplyObject(rep);
	if (replicas_wait(n, c->redis_replicas))
		return;
	nd->wait = 0;
	for (e = nd->first; e >= 0; e = r->ent[e].next)
		if (r->ent[e].call >= 0 && calls[r->ent[e].call].wait) {
			calls[r->ent[e].call].acked = n;
			calls[r->ent[e].call].waited = 0;
		}
}

/*
 * Node k answered every call of the round, but not the WAIT after them,
 * at the round's deadline (Redis ends a WAIT that times out only at its
 * next cron tick, every 1000 / hz ms, which may come later), or its ROLE
 * said the WAIT cannot be met. Not an outage: the calls' replies are in,
 * and their acked stays as it is (-1 after a late WAIT). The connection is
 * closed, not backed off: the server runs nothing more from it before
 * that WAIT ends.
 */
static void
wait_late(struct redis *r, int k)
{
	struct node *nd = r->nodes[k];

	nd->head = nd->tail = -1;
	nd->busy = 0;
	redis_conn_node_close(nd);
}

/* Writes node k's pipeline. 0, or -1 (the node failed). */
static int
flush(struct node *nd)
{
	int done = 0;

	while (!done)
		if (redis_io_write(nd->ctx, &done) == REDIS_ERR)
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
			for (i = 0; i < np; i++) {
				k = r->pfdnode[i];
				if (r->ent[r->nodes[k]->head].call == ENT_WAIT)
					wait_late(r, k);
				else
					node_fail(r, c, calls, k,
					    RLG_CALL_FAILED, why);
			}
			return;
		}
		if (rc < 0)
			continue;	/* EINTR */
		for (i = 0; i < np; i++) {
			struct node *nd = r->nodes[r->pfdnode[i]];

			if (r->pfd[i].revents == 0)
				continue;
			k = r->pfdnode[i];
			if (redis_io_read(nd->ctx) == REDIS_ERR) {
				redis_why(nd->ctx,
				    c->redis_timeout_ms, why, sizeof(why));
				node_fail(r, c, calls, k, RLG_CALL_FAILED,
				    why);
				continue;
			}
			waiting = 1;
			while (waiting && nd->head >= 0) {
				rep = NULL;
				if (redisGetReplyFromReader(nd->ctx,
				    (void **)&rep) == REDIS_ERR) {
					redis_why(nd->ctx,
					    c->redis_timeout_ms, why,
					    sizeof(why));
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
				else if (r->ent[e].call == ENT_WAIT)
					wait_done(r, calls, nd, rep);
				else if (r->ent[e].call == ENT_ROLE)
					role_done(r, c, calls, nd, rep);
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
				if (nd->head >= 0 && !nd->wait &&
				    r->ent[nd->head].call == ENT_WAIT)
					wait_late(r, k);
			}
		}
	}
}

static void
append(struct redis *r, const struct conf *c, int k, struct redis_call *call,
    int i)
{
	struct node *nd = r->nodes[k];
	int counts = call->wait && c->redis_replicas > 0;

	/* The count of replicas read again in the round, not before it: no
	 * round trip, nor time, of its own. */
	if (counts && !nd->role) {
		nd->role = 1;
		if (redis_conn_replicas_due(nd->h)) {
			redisAppendCommand(nd->ctx, "ROLE");
			ent_add(r, k, ENT_ROLE);
		}
	}
	if (r->pend[i].asking) {
		redisAppendCommand(nd->ctx, "ASKING");
		ent_add(r, k, ENT_ASKING);
	}
	redisAppendCommandArgv(nd->ctx, call->argc, call->argv,
	    call->argvlen);
	ent_add(r, k, i);
	call->node = k;
	call->acked = -1;
	call->waited = 0;
	if (counts) {
		int n = redis_conn_replicas(nd->h);

		if (replicas_wait(n, c->redis_replicas))
			nd->wait = call->waited = 1;
		else
			call->acked = n;
	}
}

/* WAIT last on each node whose pipeline may write: one per node and
 * round, as WAIT covers every write its connection made before it. */
static void
append_waits(struct redis *r)
{
	const char *argv[3] = { "WAIT", r->wait_n, r->wait_ms };
	int k;

	for (k = 0; k < r->nnodes; k++)
		if (r->nodes[k]->busy && r->nodes[k]->wait) {
			redisAppendCommandArgv(r->nodes[k]->ctx, 3, argv, NULL);
			ent_add(r, k, ENT_WAIT);
		}
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
		if (k < 0 || redis_conn_node_connect(r, c, k) == -1) {
			calls[i].node = k;
			k = -1;
			lost++;
		}
		r->pend[i].node = k;
	}
	return lost;
}

/* r's err and errstr for a run of calls[0..n) of which bad were not
 * answered: why the first was not, naming its node. Returns bad. */
static int
run_err(struct redis *r, const struct redis_call *calls, size_t n, int bad)
{
	const struct redis_call *call = NULL;
	char why[256];
	size_t i;

	r->err = bad;
	r->errstr[0] = '\0';
	for (i = 0; i < n && call == NULL; i++)
		if (calls[i].status != RLG_CALL_OK)
			call = &calls[i];
	if (call == NULL)
		return bad;
	if (call->reply != NULL && call->reply->type == REDIS_REPLY_ERROR)
		snprintf(why, sizeof(why), "%s", call->reply->str);
	else if (call->node >= 0)
		redis_conn_health_why(r->nodes[call->node]->h, why,
		    sizeof(why));
	else if (r->deploy != NULL)
		redis_conn_health_why(r->deploy, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "no node to send it to");
	snprintf(r->errstr, sizeof(r->errstr), "redis %s: %s",
	    call->node >= 0 ? r->nodes[call->node]->h->addr :
	    r->deploy != NULL ? r->deploy->addr : "", why);
	return bad;
}

const char *
redis_errstr(const struct redis *r)
{
	return r->errstr;
}

/* The deployment cannot be reached at all: every call unsent, said once. */
static int
all_unsent(struct redis *r, struct redis_call *calls, size_t n,
    const char *why)
{
	size_t i;

	if (why != NULL)
		redis_conn_health_down(r->deploy, why);
	for (i = 0; i < n; i++) {
		calls[i].status = RLG_CALL_UNSENT;
		metrics_redis_error(r->metrics);
	}
	return (int)n;
}

/*
 * redis_run(): calls[0..n) go pipelined per node, written to every node
 * first and then read from all at once (one round trip however many nodes).
 * Routes each call by the slot of its key (cluster), follows MOVED (fixes
 * that slot, refreshes the whole map at the next run) and ASK (with ASKING,
 * the map unchanged), retries TRYAGAIN and CLUSTERDOWN until c's timeout
 * has passed, at most 5 redirects per call. Where a node answers "ERR
 * Function not found" (that call did not run), makes sure of rlg_library
 * there with redis_library() before the next round trip and runs the call
 * once more; where the library cannot be there (the user may not load it,
 * another library holds its name), the node is down: its calls are unsent,
 * why is logged once per outage. A call that timed out or lost its
 * connection is never sent again. With [redis] replicas = N > 0, each node
 * whose pipeline holds a call with wait set gets WAIT N T after it, T half
 * of c's timeout (never 0, with which WAIT would block): its reply fills
 * those calls' acked; the layer does not judge it. Not where the master has
 * fewer than N replicas connected (ROLE, first in that node's pipeline once
 * a second per master and process, so within the round's timeout; logged
 * once when fewer, once when back): acked is then that number, and a WAIT
 * sent before the count was known is not awaited. A WAIT not answered by
 * the round's deadline (Redis ends it at a cron tick) leaves acked -1 and
 * closes that connection; it is no outage: the calls' replies came. Follows
 * a Sentinel failover (+switch-master, a lost connection, READONLY). A call
 * whose node cannot be reached before sending (it did not run) is routed
 * again after the slot map is read (the master asked for) once more in the
 * same run, at most once per run and per 100 ms: after a failover the first
 * request is decided, not on_error. A node that fails is backed off
 * process-wide (50 ms doubling to 500 ms; one loop probes): only the calls
 * for it fail, the others go on. Each outage is logged once per node with
 * its address and why ("timed out after 100 ms"), its end once. Connects as
 * needed, and again after a reload changed the addresses, credentials or
 * mode. Waits at most c's connect timeout plus timeout per attempt. Returns
 * the number of calls not RLG_CALL_OK.
 */
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
		calls[i].acked = -1;
		calls[i].waited = 0;
	}
	if (n == 0)
		return run_err(r, calls, 0, 0);
	/* Half the timeout: WAIT answers (0 acknowledged, at worst) while
	 * the round still waits for it, when Redis's cron tick comes in
	 * time (else wait_late()); conf makes it 1 ms at least. */
	if (c->redis_replicas > 0) {
		snprintf(r->wait_n, sizeof(r->wait_n), "%d", c->redis_replicas);
		snprintf(r->wait_ms, sizeof(r->wait_ms), "%lld",
		    c->redis_timeout_ms / 2);
	}
	if (redis_deploy_prepare(r, c) == -1 || room(r, n) == -1)
		return run_err(r, calls, n, all_unsent(r, calls, n, NULL));
	memset(r->pend, 0, n * sizeof(*r->pend));
	for (i = 0; i < n; i++)
		r->pend[i].target = -1;
	for (k = 0; k < r->nnodes; k++)
		r->nodes[k]->load = r->nodes[k]->loaded =
		    r->nodes[k]->checked = r->nodes[k]->role = 0;
	t0 = mono_us();
	for (round = 0; round < MAX_ROUNDS; round++) {
		if (c->redis_mode == RLG_REDIS_CLUSTER && r->refresh_due &&
		    (round == 0 || r->refreshed_ms == 0) &&
		    mono_ms() - r->refreshed_ms >= REFRESH_MIN_MS) {
			redis_deploy_update_map(r, c);
			looked = 1;
		}
		if (c->redis_mode == RLG_REDIS_SENTINEL)
			redis_deploy_find_master(r, c);
		for (k = 0; k < r->nnodes; k++)
			if (r->nodes[k]->load && !r->nodes[k]->loaded)
				library_at(r, c, k);
		/* Route and connect, then append each call to its node. */
		r->nent = 0;
		for (k = 0; k < r->nnodes; k++) {
			r->nodes[k]->head = r->nodes[k]->tail = -1;
			r->nodes[k]->first = -1;
			r->nodes[k]->busy = r->nodes[k]->wait = 0;
		}
		if (route_all(r, c, calls, n) > 0 && !looked &&
		    c->redis_mode != RLG_REDIS_SINGLE &&
		    mono_ms() - start_ms < c->redis_timeout_ms) {
			/* A call with no node to go to did not run: after a
			 * failover the map (the master) still names the dead
			 * node. Look again now, once per run, within the
			 * timeout (and at most once per REFRESH_MIN_MS, as
			 * redis_deploy_find_master() too), and route again:
			 * the first request after a failover is decided, not
			 * on_error.
			 * Nothing is appended yet: the blocking commands of a
			 * refresh share no pipeline with calls. */
			looked = 1;
			if (c->redis_mode == RLG_REDIS_CLUSTER &&
			    mono_ms() - r->refreshed_ms >= REFRESH_MIN_MS)
				redis_deploy_update_map(r, c);
			else if (c->redis_mode == RLG_REDIS_SENTINEL) {
				r->rediscover = 1;
				redis_deploy_find_master(r, c);
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
			append(r, c, k, &calls[i], (int)i);
		}
		append_waits(r);
		for (k = 0; k < r->nnodes; k++)
			if (r->nodes[k]->busy && flush(r->nodes[k]) == -1) {
				redis_why(r->nodes[k]->ctx,
				    c->redis_timeout_ms, err, sizeof(err));
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
	return bad == 0 && r->err == 0 ? 0 : run_err(r, calls, n, bad);
}
