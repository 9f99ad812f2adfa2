/*
 * conf: the INI file turned into an immutable struct conf.
 *
 * Everything a user can get wrong in the file is found here, at load time,
 * and reported as "FILE:LINE: [section] key: what is wrong, and what is
 * expected". Nothing in this module knows about requests, Redis or SQLite;
 * reports/ links it for its duration and number parsers.
 */
#ifndef RLG_CONF_H
#define RLG_CONF_H

#include <netinet/in.h>
#include <regex.h>
#include <stddef.h>

#include "conf_values.h"
#include "netaddr.h"
#include "tmpl.h"

#define RLG_DEFAULT_CONF	"/etc/rlgate/rlgate.ini"
/* [audit] defaults; also tests/tools/audit_bench's. The writer writes as
 * soon as a batch waits: a smaller batch means shorter writes under load
 * (DESIGN.md's example says 1000). */
#define RLG_AUDIT_FLUSH_MS	50
#define RLG_AUDIT_BATCH		200
#define RLG_AUDIT_QUEUE		100000
/*
 * Longest line accepted in the INI file, in bytes without the line end.
 * Debian's libinih reads a line in one buffer of INI_MAX_LINE (200) bytes
 * and splits longer ones silently; conf refuses them with a message.
 */
#define RLG_MAX_LINE		199
#define RLG_MAX_RULES		256
/* [gateway] socket_mode's default: the owner and socket_group only. */
#define RLG_SOCKET_MODE		0660
#define RLG_MAX_RULE_NAME	64	/* bytes */
#define RLG_MAX_KEY_PREFIX	64	/* bytes of [redis] key_prefix */
#define RLG_MAX_REDIS_ADDRESSES	32	/* in [redis] address */
#define RLG_MAX_REPLICAS	16	/* [redis] replicas */

enum rlg_headers {
	RLG_HEADERS_IETF,
	RLG_HEADERS_LEGACY,
	RLG_HEADERS_BOTH,
	RLG_HEADERS_NONE
};

enum rlg_redis_mode {
	RLG_REDIS_SINGLE,	/* one server (or a proxy) */
	RLG_REDIS_CLUSTER,	/* Redis Cluster: address lists seed nodes */
	RLG_REDIS_SENTINEL	/* address lists the Sentinels */
};

enum rlg_on_error {
	RLG_ON_ERROR_INHERIT,	/* rule only: use [redis] on_error */
	RLG_ON_ERROR_ALLOW,
	RLG_ON_ERROR_DENY,
	RLG_ON_ERROR_LOCAL	/* on_error only: decide in process memory
				 * on local_share of the limit (local.h) */
};

enum rlg_path_kind {
	RLG_PATH_ANY,		/* no path = every path */
	RLG_PATH_EXACT,		/* /user/list */
	RLG_PATH_PREFIX,	/* /api/ *, stored without the '*' */
	RLG_PATH_REGEX		/* ~^/user/[0-9]+$ */
};

enum rlg_log_level {
	RLG_LOG_ERROR,
	RLG_LOG_WARN,
	RLG_LOG_INFO,
	RLG_LOG_DEBUG
};

struct rule {
	char			*name;
	int			 line;		/* of the [rule:NAME] header */
	enum rlg_path_kind	 path_kind;
	char			*path;		/* exact, prefix or regex */
	size_t			 path_len;
	regex_t			 path_re;	/* RLG_PATH_REGEX only */
	char			**methods;	/* NULL-terminated, upper
						 * case; NULL = any */
	char			*host;		/* as written; NULL = any */
	struct tmpl		 key;
	enum rlg_algorithm	 algorithm;
	long long		 limit;
	long long		 window_ms;
	long long		 burst;		/* 0 = not set (limit) */
	/* sliding_window: as set, or conf_default_precision(); 0 for the
	 * others */
	long long		 precision_ms;
	/* when cost_tmpl.nparts == 0; never above burst (or limit) but
	 * for leaky_bucket */
	long long		 cost;
	struct tmpl		 cost_tmpl;
	int			 on_missing_deny;
	enum rlg_on_error	 on_error;
	int			 dry_run;
	int			 deny_cache;	/* remember denials */
	/* 1: read <key>:override in Redis (overrides = redis); never with
	 * deny_cache */
	int			 overrides;
	/* set by metrics_register_rules(); -1 until then */
	int			 metrics_slot;
};

struct conf {
	char			*path;
	unsigned long		 id;		/* unique per conf_load() in a process */
	/* What is valid but likely unintended, one "FILE:LINE: ..." per line,
	 * each ending in a newline; NULL: nothing. The caller shows them
	 * (rlgate -t, the start-up and reload logs). */
	char			*warnings;

	/* [gateway] */
	char			*listen;	/* NULL = the socket on fd 0 */
	/* The unix socket rlgate binds itself (-s, listen): its mode and
	 * group; socket_gid -1: the process's own group. */
	int			 socket_mode;
	long			 socket_gid;
	int			 workers;	/* event loops; 0: one per CPU */
	int			 deny_status;
	enum rlg_headers	 headers;
	struct cidr		*trusted;
	size_t			 ntrusted;
	enum rlg_log_level	 log_level;
	int			 dry_run;	/* decide, but never deny */
	char			*status_path;	/* NULL = no status endpoint */
	struct cidr		*status_allow;	/* who may read it */
	size_t			 nstatus_allow;

	/* [redis] */
	enum rlg_redis_mode	 redis_mode;
	char			*redis_address;	/* host:port, [v6]:port,
						 * unix:/path; cluster and
						 * sentinel: a list of them
						 * separated by blanks */
	char			*redis_master_name;	/* sentinel */
	char			*redis_sentinel_password; /* or NULL */
	char			*redis_username;
	char			*redis_password;
	int			 redis_database;
	long long		 redis_connect_timeout_ms;
	long long		 redis_timeout_ms;
	char			*key_prefix;
	enum rlg_on_error	 on_error;	/* ALLOW, DENY or LOCAL */
	/* on_error = local: the share of each limit one process enforces
	 * in memory, local_share_num / local_share_den, in (0, 1];
	 * default 1/1 */
	long long		 local_share_num;
	long long		 local_share_den;
	int			 redis_replicas;	/* WAIT for this many
						 * after each decision
						 * call; 0: none */
	int			 redis_tls;	/* TLS to every node and
						 * Sentinel (redis_io.c) */
	char			*redis_tls_ca_file;	/* NULL: the system's */
	char			*redis_tls_server_name;	/* NULL: each host */
	char			*redis_tls_cert_file;	/* client certificate */
	char			*redis_tls_key_file;	/* its key */

	/* [audit] */
	char			*audit_database;	/* NULL = no audit */
	long long		 audit_flush_interval_ms;
	int			 audit_batch;
	int			 audit_queue;
	int			 audit_unmatched;
	/* the queue full: ALLOW serves without recording, DENY answers 503 */
	enum rlg_on_error	 audit_on_full;
	long long		 audit_keep_ms;	/* 0: dated files are kept */
	/* 0: rows stay with their file; else their rows deleted, the
	 * summaries kept */
	long long		 audit_keep_rows_ms;

	/* [cgi] */
	char			*cgi_upstream;	/* NULL = as the responder */

	struct rule		*rules;
	size_t			 nrules;
};

/*
 * Reads and checks the file at path (its form: nothing is opened but the
 * [redis] tls_* files, which must be readable). Returns a conf the caller
 * frees with conf_free() and *errors NULL, or NULL and *errors, every
 * problem as "FILE:LINE: ...\n" by line (the caller frees it). Thread safe.
 */
struct conf	*conf_load(const char *path, char **errors);

/* Frees c and everything it owns. Accepts NULL. */
void		 conf_free(struct conf *c);

/*
 * What rule ru can hold at once with limit (its own, or an override's):
 * its burst when set, else the limit. The cap of a request's cost. (Only
 * the algorithms with a burst have one: conf refuses it elsewhere.)
 */
static inline long long
conf_capacity(const struct rule *ru, long long limit)
{
	return ru->burst > 0 ? ru->burst : limit;
}

/* What rule ru does when Redis cannot answer: its own on_error, or
 * [redis]'s. */
static inline enum rlg_on_error
conf_on_error(const struct conf *c, const struct rule *ru)
{
	return ru->on_error != RLG_ON_ERROR_INHERIT ? ru->on_error :
	    c->on_error;
}

/*
 * Is the address (AF_INET/AF_INET6 bytes) inside one of c's trusted CIDRs?
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is also checked against the
 * IPv4 CIDRs. Returns 1 or 0; c may be NULL (0).
 */
int		 conf_trusted(const struct conf *c, int family,
		    const unsigned char *addr);

#endif
