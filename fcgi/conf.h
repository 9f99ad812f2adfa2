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
#define RLG_MS_SECOND		1000LL
#define RLG_MS_MINUTE		(60 * RLG_MS_SECOND)
#define RLG_MS_HOUR		(60 * RLG_MS_MINUTE)
#define RLG_MS_DAY		(24 * RLG_MS_HOUR)
#define RLG_MAX_RULE_NAME	64	/* bytes */
#define RLG_MAX_KEY_PREFIX	64	/* bytes of [redis] key_prefix */
#define RLG_MAX_REDIS_ADDRESSES	32	/* in [redis] address */

enum rlg_algorithm {
	RLG_FIXED_WINDOW,
	RLG_SLIDING_WINDOW,
	RLG_SLIDING_LOG,
	RLG_TOKEN_BUCKET,
	RLG_GCRA,
	RLG_LEAKY_BUCKET,
	RLG_ALGORITHM_COUNT
};

/*
 * What the scripts in lua/ accept (their args() functions are the contract;
 * conf_check_params() mirrors them).
 */
#define RLG_MAX_COUNT		1000000000LL	/* limit, burst, cost: 1e9 */
#define RLG_MAX_LOG_LIMIT	100000LL	/* sliding_log's limit */
#define RLG_MAX_WINDOW_MS	100000000000LL	/* window_ms: 1e11 */
#define RLG_MAX_BLOCKS		10000LL		/* sliding_window blocks */
#define RLG_EXACT_MAX		(1LL << 52)	/* the scripts' MAX */
#define RLG_EXACT		(1LL << 53)	/* the scripts' EXACT */
#define RLG_PARAM_UNSET		(-1LL)		/* an empty burst or precision */

/* The parameter a refusal of conf_check_params() is about. */
enum rlg_param {
	RLG_PARAM_OK,
	RLG_PARAM_COST,
	RLG_PARAM_LIMIT,
	RLG_PARAM_WINDOW,
	RLG_PARAM_BURST,
	RLG_PARAM_PRECISION
};

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
	RLG_ON_ERROR_DENY
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
	enum rlg_on_error	 on_error;	/* ALLOW or DENY */

	/* [audit] */
	char			*audit_database;	/* NULL = no audit */
	long long		 audit_flush_interval_ms;
	int			 audit_batch;
	int			 audit_queue;
	int			 audit_unmatched;
	/* the queue full: ALLOW serves without recording, DENY answers 503 */
	enum rlg_on_error	 audit_on_full;
	long long		 audit_keep_ms;	/* 0: dated files are kept */

	/* [cgi] */
	char			*cgi_upstream;	/* NULL = as the responder */

	struct rule		*rules;
	size_t			 nrules;
};

/*
 * Reads and checks the file at path. On success returns a conf the caller
 * releases with conf_free() and sets *errors to NULL. On failure returns
 * NULL and sets *errors to every problem found, one "FILE:LINE: ..." per
 * line, each ending in a newline, sorted by line, in a string the caller
 * frees (NULL only if even that could not be allocated). Checks form, not
 * existence: paths and addresses are not opened. Thread safe (no global
 * state; inih's run-time settings are left at their defaults).
 */
struct conf	*conf_load(const char *path, char **errors);

/* Frees c and everything it owns. Accepts NULL. */
void		 conf_free(struct conf *c);

/* Name of an algorithm as written in the file ("token_bucket"). */
const char	*conf_algorithm_name(enum rlg_algorithm a);

/* Does the algorithm take a burst (token_bucket, gcra, leaky_bucket)? */
int		 conf_algorithm_has_burst(enum rlg_algorithm a);

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

/*
 * The one bounded number parser: a decimal integer in [min, max], the whole
 * string. Returns 0 and stores it in *out, or -1 and points *errstr at a
 * static phrase ("is not a number", "is too small", "is too large").
 */
int		 conf_parse_int(const char *s, long long min, long long max,
		    long long *out, const char **errstr);

/*
 * A duration: an integer followed by ms, s, m, h or d ("250ms", "1s").
 * Stores milliseconds in *out_ms. Returns 0, or -1 with *errstr set.
 */
int		 conf_parse_duration(const char *s, long long *out_ms,
		    const char **errstr);

/*
 * ms written in the largest unit that holds it exactly ("1s", "1500ms",
 * "2h"; "0ms"), into buf (len bytes). Returns buf.
 */
char		*conf_format_duration(long long ms, char *buf, size_t len);

/*
 * The sliding_window precision a rule gets when it sets none: window/10
 * when that divides the window, else the largest divisor of the window
 * below window/10 (at least 1 ms), so that the blocks tile the window.
 */
long long	 conf_default_precision(long long window_ms);

/*
 * Would the algorithm's script accept these arguments? The very checks of
 * its args() in lua/, in its order: cost, limit, window_ms, burst and
 * precision_ms (ARGV[2..6]; burst and precision_ms RLG_PARAM_UNSET when
 * empty, then the script's default; each ignored by the scripts that do not
 * take it). Returns RLG_PARAM_OK, or the parameter to blame with a sentence
 * in why (len bytes) saying what is wrong and what would do, naming values
 * as the configuration file writes them (durations as "1s"), without the
 * parameter's name (conf_param_name()).
 */
enum rlg_param	 conf_check_params(enum rlg_algorithm alg, long long limit,
		    long long window_ms, long long burst, long long precision_ms,
		    long long cost, char *why, size_t len);

/* The parameter's key in the file: "cost", "limit", "window", ... */
const char	*conf_param_name(enum rlg_param p);

/* The greatest common divisor of a and b, never negative. */
long long	 conf_gcd(long long a, long long b);

/*
 * Is the address (AF_INET/AF_INET6 bytes) inside one of c's trusted CIDRs?
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is also checked against the
 * IPv4 CIDRs. Returns 1 or 0; c may be NULL (0).
 */
int		 conf_trusted(const struct conf *c, int family,
		    const unsigned char *addr);

#endif
