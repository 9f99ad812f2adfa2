/*
 * redis_int: what the pieces of the Redis layer share, and only they: the
 * handle (struct redis), a loop's nodes, each address's health record,
 * and the helpers one piece gives the others. redis_conn.c: health,
 * connections, nodes; redis_deploy.c: the deployment (slot map, master);
 * redis.c: the handle and one run; redis_lib.c: the function library on
 * a server; redis_admin.c, above them: status, probe, rlgate-ctl's
 * connections. Not a contract for
 * anything outside redis*.c: redis.h is.
 */
#ifndef RLG_REDIS_INT_H
#define RLG_REDIS_INT_H

#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "conf.h"
#include "redis.h"
#include "slot.h"

#define MAX_HEALTH		1024	/* addresses per process */
#define REFRESH_MIN_MS		100	/* between slot map refreshes */
#define NO_NODE			0xffff

/* What the process knows of one address, shared by every loop. */
struct health {
	char		 addr[RLG_REDIS_ADDR_SIZE];
	atomic_llong	 down_until_ms;	/* back-off: no try before */
	atomic_llong	 backoff_ms;	/* 0: up */
	atomic_long	 epoch;		/* outages so far */
	atomic_int	 logged;	/* this outage is logged */
	atomic_int	 lib_logged;	/* a server before Redis 7.0 is */
	atomic_int	 lib_missing;	/* this build's library cannot be
					 * there: an outage that a PING does
					 * not end, only a call's answer */
	atomic_llong	 errors;
	atomic_llong	 redirects;
	atomic_llong	 refreshes;
	char		 why[256];	/* last outage's reason, health_lock */
	/* [redis] replicas: the master's replicas, by ROLE. */
	atomic_int	 replicas;	/* connected; -1: not known */
	atomic_llong	 replicas_ms;	/* when read; 0: never */
	atomic_int	 replicas_short; /* fewer than wanted: logged */
	atomic_int	 role_logged;	/* a failed ROLE is */
};

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
	int		 first;		/* the round's first entry, -1: none */
	int		 wait;		/* a WAIT goes last, this round, and
					 * its reply is awaited */
	int		 role;		/* ROLE considered, this run */
	int		 load;		/* the library is missing there */
	int		 loaded;	/* redis_library() ran, this run */
	int		 checked;	/* its connection, this run */
	int		 busy;		/* has entries this round */
};

/* One run's state (redis.c). */
struct entry;
struct pend;

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
	char		 wait_n[16];	/* WAIT's arguments, for the run */
	char		 wait_ms[24];
	struct pollfd	*pfd;
	int		*pfdnode;
	int		 cappfd;
	/* The last run's: how many calls were not answered, and why the
	 * first was not (redis_errstr()). */
	int		 err;
	char		 errstr[RLG_REDIS_ADDR_SIZE + 256 + 16];
};

/* ---- redis_conn.c: health, connections, nodes ----------------------- */

/* The health record of addr (a node's address, or a deployment's name),
 * made if new. Lives as long as the process. Thread safe. */
struct health	*redis_conn_health_get(const char *addr);
/* h failed us: back off (50 ms doubling to 500 ms), count an error, and
 * log why once per outage. Thread safe. */
void		 redis_conn_health_down(struct health *h, const char *why);
/* h failed at start-up and the caller logs why: down, as
 * redis_conn_health_down(), but not logged again. */
void		 redis_conn_health_said(struct health *h, const char *why);
/* The health record of the node at host:port (port 0: a unix socket). */
struct health	*redis_conn_health_at(const char *host, int port);
/* h answered: ends an outage, if there was one (logged once), the
 * library's too (lib_missing). */
void		 redis_conn_health_up(struct health *h);
/* Why h's last outage happened, into buf ("not connected" if none). */
void		 redis_conn_health_why(struct health *h, char *buf,
		    size_t len);

/* Runs one command on a blocking ctx: 0 when its reply is no error, else
 * -1 with "ARGV0: why" in err. *out, when out is given, takes the reply
 * (the caller frees it). */
int		 redis_conn_command(redisContext *ctx, long long timeout_ms,
		    redisReply **out, char *err, size_t errlen, int argc,
		    const char **argv);
/* Splits host:port, [v6]:port or unix:/path; port 0 for unix. 0 or -1. */
int		 redis_conn_split_address(const char *addr, char *host,
		    size_t hostlen, int *port);
/* A blocking connection to a data node as c configures them (no SELECT in
 * a cluster); NULL with why in err. The caller frees it. */
redisContext	*redis_conn_dial_node(const struct conf *c, const char *host,
		    int port, char *err, size_t errlen);
/* Once the library is on ctx (redis_library()), asks it whether the ACL
 * user may run every command it runs on keys under key_prefix (FCALL_RO
 * LIB_acl): Redis's own error for those, at request time, does not name
 * the command. 0, or -1 with err naming them. (redis_lib.c) */
int		 redis_lib_acl(redisContext *ctx, long long timeout_ms,
		    const char *key_prefix, char *err, size_t errlen);

/* [redis] replicas: how many replicas h's master has connected, as last
 * read (-1: not known). Thread safe. */
int		 redis_conn_replicas(struct health *h);
/* h's master has n replicas connected (-1: not known), seen just now:
 * logged once when fewer than want, and once when back. Thread safe. */
void		 redis_conn_replicas_seen(struct health *h, int n,
		    int want);
/* Whether the caller reads h's count again now (ROLE, in its round): 1
 * when it is RLG_REPLICAS_EVERY_MS old and this caller claimed the read
 * (one per process at a time). Thread safe. */
int		 redis_conn_replicas_due(struct health *h);
/* ROLE's reply rep from h's master: its count of replicas (-1: not known;
 * an error is logged once, as the ACL user then lacks +role), stored as
 * redis_conn_replicas_seen() does, and returned. rep stays the caller's.
 * Thread safe. */
int		 redis_conn_role_seen(struct health *h, const redisReply *rep,
		    int want);

/* Closes nd's connection, if any. */
void		 redis_conn_node_close(struct node *nd);
/* The index of r's node at host:port, made (unconnected) if new; -1 when
 * r holds too many already or is out of memory. */
int		 redis_conn_node_get(struct redis *r, const char *host,
		    int port);
/* Forgets every node and the slot map: the deployment changed. */
void		 redis_conn_reset(struct redis *r);
/* Makes sure node k has a usable connection, honouring its back-off. 0,
 * or -1 (its calls are not sent) with the node marked down when a try
 * failed. */
int		 redis_conn_node_connect(struct redis *r, const struct conf *c,
		    int k);

/* ---- redis_deploy.c: the deployment ---------------------------------- */

/* Makes r fit c (a reload may have changed the deployment). 0, or -1 out
 * of memory or an address that is none. */
int		 redis_deploy_prepare(struct redis *r, const struct conf *c);
/* Cluster: reads the slot map now; the deployment is down when no node
 * gives it. */
void		 redis_deploy_update_map(struct redis *r,
		    const struct conf *c);
/* Sentinel: asks for the master again when due (at most once per
 * REFRESH_MIN_MS unless a failover was announced). 0, or -1 when there is
 * no master for now (logged once per outage). */
int		 redis_deploy_find_master(struct redis *r,
		    const struct conf *c);
/* Cluster: reads the slot map from the first node that gives one (r's
 * masters, the masters the process knows, the seeds). 0, or -1 with err
 * naming each address tried and why (r's map then unchanged). */
int		 redis_deploy_refresh(struct redis *r, const struct conf *c,
		    char *err, size_t errlen);
/* Appends "addr (why)" to the list of tries in buf (len bytes). */
void		 redis_deploy_tried(char *buf, size_t len, const char *addr,
		    const char *why);

#endif
