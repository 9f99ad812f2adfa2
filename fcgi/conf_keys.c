/*
 * conf_keys: the file format as one table of typed keys, section by
 * section, and the setters that check and store each kind of value
 * (lighttpd style: each key declared once). A setter sees one value; what
 * needs several keys is conf_finish.c's, reading the file is conf.c's.
 */
#include <sys/stat.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "conf_int.h"
#include "recheck.h"

#define ADDRESS_USE	"(use host:port, [IPv6]:port or unix:/path)"

static const struct enum_name yes_no[] = {
	{ "yes", 1, 0 }, { "no", 0, 0 },
	{ "true", 1, 1 }, { "false", 0, 1 }, { "on", 1, 1 }, { "off", 0, 1 },
	{ "1", 1, 1 }, { "0", 0, 1 },
	{ NULL, 0, 0 }
};

static const struct enum_name header_styles[] = {
	{ "ietf", RLG_HEADERS_IETF, 0 },
	{ "legacy", RLG_HEADERS_LEGACY, 0 },
	{ "both", RLG_HEADERS_BOTH, 0 },
	{ "none", RLG_HEADERS_NONE, 0 },
	{ NULL, 0, 0 }
};

static const struct enum_name log_levels[] = {
	{ "error", RLG_LOG_ERROR, 0 },
	{ "warn", RLG_LOG_WARN, 0 },
	{ "info", RLG_LOG_INFO, 0 },
	{ "debug", RLG_LOG_DEBUG, 0 },
	{ "warning", RLG_LOG_WARN, 1 },
	{ NULL, 0, 0 }
};

static const struct enum_name on_errors[] = {
	{ "allow", RLG_ON_ERROR_ALLOW, 0 },
	{ "deny", RLG_ON_ERROR_DENY, 0 },
	{ "local", RLG_ON_ERROR_LOCAL, 0 },
	{ NULL, 0, 0 }
};

/* [audit] on_full: the queue full has no local stand-in. */
static const struct enum_name on_fulls[] = {
	{ "allow", RLG_ON_ERROR_ALLOW, 0 },
	{ "deny", RLG_ON_ERROR_DENY, 0 },
	{ NULL, 0, 0 }
};

static const struct enum_name redis_modes[] = {
	{ "single", RLG_REDIS_SINGLE, 0 },
	{ "cluster", RLG_REDIS_CLUSTER, 0 },
	{ "sentinel", RLG_REDIS_SENTINEL, 0 },
	{ NULL, 0, 0 }
};

static const struct enum_name on_missings[] = {
	{ "skip", 0, 0 },
	{ "deny", 1, 0 },
	{ NULL, 0, 0 }
};

static const struct enum_name override_sources[] = {
	{ "none", 0, 0 },
	{ "redis", 1, 0 },
	{ NULL, 0, 0 }
};

static int	set_int(struct loader *, const struct key *, void *,
		    const char *);
static int	set_llong(struct loader *, const struct key *, void *,
		    const char *);
static int	set_duration(struct loader *, const struct key *, void *,
		    const char *);
static int	set_share(struct loader *, const struct key *, void *,
		    const char *);
static int	set_enum(struct loader *, const struct key *, void *,
		    const char *);
static int	set_engine(struct loader *, const struct key *, void *,
		    const char *);
static int	set_string(struct loader *, const struct key *, void *,
		    const char *);
static int	set_password(struct loader *, const struct key *, void *,
		    const char *);
static int	set_program(struct loader *, const struct key *, void *,
		    const char *);
static int	set_mode(struct loader *, const struct key *, void *,
		    const char *);
static int	set_group(struct loader *, const struct key *, void *,
		    const char *);
static int	set_address(struct loader *, const struct key *, void *,
		    const char *);
static int	set_addresses(struct loader *, const struct key *, void *,
		    const char *);
static int	set_key_prefix(struct loader *, const struct key *, void *,
		    const char *);
static int	set_trusted(struct loader *, const struct key *, void *,
		    const char *);
static int	set_status_path(struct loader *, const struct key *, void *,
		    const char *);
static int	set_status_allow(struct loader *, const struct key *, void *,
		    const char *);
static int	set_path(struct loader *, const struct key *, void *,
		    const char *);
static int	set_methods(struct loader *, const struct key *, void *,
		    const char *);
static int	set_host(struct loader *, const struct key *, void *,
		    const char *);
static int	set_template(struct loader *, const struct key *, void *,
		    const char *);
static int	set_cost(struct loader *, const struct key *, void *,
		    const char *);

#define C(f)	offsetof(struct conf, f)
#define R(f)	offsetof(struct rule, f)

/* The whole file format, lighttpd style: each key declared once. */
const struct key conf_keys[NKEYS] = {
	[K_LISTEN] = { S_GATEWAY, "listen", set_address, C(listen),
	    0, 0, NULL, NULL, 0 },
	[K_SOCKET_MODE] = { S_GATEWAY, "socket_mode", set_mode,
	    C(socket_mode), 0, 0777, NULL, NULL, 0 },
	[K_SOCKET_GROUP] = { S_GATEWAY, "socket_group", set_group,
	    C(socket_gid), 0, 0, NULL, NULL, 0 },
	[K_ENGINE] = { S_GATEWAY, "engine", set_engine, 0,
	    0, 0, NULL, NULL, 0 },
	[K_WORKERS] = { S_GATEWAY, "workers", set_int, C(workers),
	    1, 1024, NULL, NULL, 0 },
	[K_DENY_STATUS] = { S_GATEWAY, "deny_status", set_int,
	    C(deny_status), 400, 599, NULL, NULL, 0 },
	[K_HEADERS] = { S_GATEWAY, "headers", set_enum, C(headers),
	    0, 0, header_styles, "a header style", 0 },
	[K_TRUSTED] = { S_GATEWAY, "trusted_proxies", set_trusted, 0,
	    0, 0, NULL, NULL, 0 },
	[K_LOG_LEVEL] = { S_GATEWAY, "log_level", set_enum, C(log_level),
	    0, 0, log_levels, "a log level", 0 },
	[K_GATEWAY_DRY_RUN] = { S_GATEWAY, "dry_run", set_enum, C(dry_run),
	    0, 0, yes_no, "a boolean", 0 },
	[K_STATUS_PATH] = { S_GATEWAY, "status_path", set_status_path,
	    C(status_path), 0, 0, NULL, NULL, 0 },
	[K_STATUS_ALLOW] = { S_GATEWAY, "status_allow", set_status_allow, 0,
	    0, 0, NULL, NULL, 0 },

	[K_REDIS_MODE] = { S_REDIS, "mode", set_enum, C(redis_mode),
	    0, 0, redis_modes, "a Redis mode", 0 },
	[K_ADDRESS] = { S_REDIS, "address", set_addresses, C(redis_address),
	    0, 0, NULL, NULL, 0 },
	[K_USERNAME] = { S_REDIS, "username", set_string,
	    C(redis_username), 0, 0, NULL, NULL, 0 },
	[K_PASSWORD] = { S_REDIS, "password", set_password,
	    C(redis_password), 0, 0, NULL, NULL, 0 },
	[K_DATABASE] = { S_REDIS, "database", set_int, C(redis_database),
	    0, INT_MAX, NULL, NULL, 0 },
	[K_CONNECT_TIMEOUT] = { S_REDIS, "connect_timeout", set_duration,
	    C(redis_connect_timeout_ms), 1, RLG_MS_HOUR, NULL, NULL, 0 },
	[K_TIMEOUT] = { S_REDIS, "timeout", set_duration,
	    C(redis_timeout_ms), 1, RLG_MS_HOUR, NULL, NULL, 0 },
	[K_KEY_PREFIX] = { S_REDIS, "key_prefix", set_key_prefix,
	    C(key_prefix), 0, 0, NULL, NULL, 0 },
	[K_ON_ERROR] = { S_REDIS, "on_error", set_enum, C(on_error),
	    0, 0, on_errors, "an error policy", 0 },
	[K_MASTER_NAME] = { S_REDIS, "master_name", set_string,
	    C(redis_master_name), 0, 0, NULL, NULL, 1 },
	[K_SENTINEL_PASSWORD] = { S_REDIS, "sentinel_password", set_password,
	    C(redis_sentinel_password), 0, 0, NULL, NULL, 1 },
	[K_REPLICAS] = { S_REDIS, "replicas", set_int, C(redis_replicas),
	    0, RLG_MAX_REPLICAS, NULL, NULL, 0 },
	[K_TLS] = { S_REDIS, "tls", set_enum, C(redis_tls),
	    0, 0, yes_no, "a boolean", 0 },
	[K_TLS_CA_FILE] = { S_REDIS, "tls_ca_file", set_string,
	    C(redis_tls_ca_file), 0, 0, NULL, NULL, 1 },
	[K_TLS_SERVER_NAME] = { S_REDIS, "tls_server_name", set_string,
	    C(redis_tls_server_name), 0, 0, NULL, NULL, 1 },
	[K_TLS_CERT_FILE] = { S_REDIS, "tls_cert_file", set_string,
	    C(redis_tls_cert_file), 0, 0, NULL, NULL, 1 },
	[K_TLS_KEY_FILE] = { S_REDIS, "tls_key_file", set_string,
	    C(redis_tls_key_file), 0, 0, NULL, NULL, 1 },
	[K_LOCAL_SHARE] = { S_REDIS, "local_share", set_share, 0,
	    0, 0, NULL, NULL, 0 },

	[K_AUDIT_DATABASE] = { S_AUDIT, "database", set_string,
	    C(audit_database), 0, 0, NULL, NULL, 1 },
	[K_FLUSH_INTERVAL] = { S_AUDIT, "flush_interval", set_duration,
	    C(audit_flush_interval_ms), 1, RLG_MS_HOUR, NULL, NULL, 0 },
	[K_BATCH] = { S_AUDIT, "batch", set_int, C(audit_batch),
	    1, 1000000, NULL, NULL, 0 },
	[K_QUEUE] = { S_AUDIT, "queue", set_int, C(audit_queue),
	    1, 100000000, NULL, NULL, 0 },
	[K_UNMATCHED] = { S_AUDIT, "unmatched", set_enum,
	    C(audit_unmatched), 0, 0, yes_no, "a boolean", 0 },
	[K_ON_FULL] = { S_AUDIT, "on_full", set_enum, C(audit_on_full),
	    0, 0, on_fulls, "a queue-full policy", 0 },
	[K_KEEP] = { S_AUDIT, "keep", set_duration, C(audit_keep_ms),
	    RLG_MS_HOUR, 3650 * RLG_MS_DAY, NULL, NULL, 0 },
	[K_KEEP_ROWS] = { S_AUDIT, "keep_rows", set_duration,
	    C(audit_keep_rows_ms), RLG_MS_HOUR, 3650 * RLG_MS_DAY, NULL, NULL,
	    0 },

	[K_UPSTREAM] = { S_CGI, "upstream", set_program, C(cgi_upstream),
	    0, 0, NULL, NULL, 0 },

	[K_PATH] = { S_RULE, "path", set_path, 0, 0, 0, NULL, NULL, 0 },
	[K_METHOD] = { S_RULE, "method", set_methods, R(methods),
	    0, 0, NULL, NULL, 0 },
	[K_HOST] = { S_RULE, "host", set_host, R(host), 0, 0, NULL, NULL, 0 },
	[K_KEY] = { S_RULE, "key", set_template, R(key), 0, 0, NULL, NULL, 0 },
	[K_ALGORITHM] = { S_RULE, "algorithm", set_enum, R(algorithm),
	    0, 0, conf_algorithms, "an algorithm", 0 },
	[K_LIMIT] = { S_RULE, "limit", set_llong, R(limit),
	    1, RLG_MAX_COUNT, NULL, NULL, 0 },
	[K_WINDOW] = { S_RULE, "window", set_duration, R(window_ms),
	    1, 366 * RLG_MS_DAY, NULL, NULL, 0 },
	[K_BURST] = { S_RULE, "burst", set_llong, R(burst),
	    1, RLG_MAX_COUNT, NULL, NULL, 0 },
	[K_PRECISION] = { S_RULE, "precision", set_duration,
	    R(precision_ms), 1, 366 * RLG_MS_DAY, NULL, NULL, 0 },
	[K_COST] = { S_RULE, "cost", set_cost, 0, 1, RLG_MAX_COUNT,
	    NULL, NULL, 0 },
	[K_ON_MISSING] = { S_RULE, "on_missing", set_enum,
	    R(on_missing_deny), 0, 0, on_missings, "a missing-field policy", 0 },
	[K_RULE_ON_ERROR] = { S_RULE, "on_error", set_enum, R(on_error),
	    0, 0, on_errors, "an error policy", 0 },
	[K_DRY_RUN] = { S_RULE, "dry_run", set_enum, R(dry_run),
	    0, 0, yes_no, "a boolean", 0 },
	[K_DENY_CACHE] = { S_RULE, "deny_cache", set_enum, R(deny_cache),
	    0, 0, yes_no, "a boolean", 0 },
	[K_OVERRIDES] = { S_RULE, "overrides", set_enum, R(overrides),
	    0, 0, override_sources, "an override source", 0 },
};

/* ---- setters: one per kind of value; report and return -1 on error --- */

/* v as a whole number in [k->min, k->max] into *n; reports otherwise. */
static int
parse_key_int(struct loader *l, const struct key *k, const char *v,
    long long *n)
{
	const char *e;

	if (conf_parse_int(v, k->min, k->max, n, &e) == -1) {
		kerr(l, k, "\"%s\" %s (use %lld to %lld)", v, e, k->min,
		    k->max);
		return -1;
	}
	return 0;
}

static int
set_int(struct loader *l, const struct key *k, void *base, const char *v)
{
	long long n;

	if (parse_key_int(l, k, v, &n) == -1)
		return -1;
	*FIELD(base, k, int) = (int)n;
	return 0;
}

static int
set_llong(struct loader *l, const struct key *k, void *base, const char *v)
{
	return parse_key_int(l, k, v, FIELD(base, k, long long));
}

static int
set_duration(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	char lim[32];
	const char *e;
	long long ms;

	if (conf_parse_duration(v, &ms, &e) == -1) {
		kerr(l, k, "\"%s\" %s", v, e);
		return -1;
	}
	if (ms < k->min) {
		kerr(l, k, "\"%s\" is too short (use at least %s)", v,
		    conf_format_duration(k->min, lim, sizeof(lim)));
		return -1;
	}
	if (ms > k->max) {
		kerr(l, k, "\"%s\" is too long (use at most %s)", v,
		    conf_format_duration(k->max, lim, sizeof(lim)));
		return -1;
	}
	*FIELD(base, k, long long) = ms;
	return 0;
}

static int
set_enum(struct loader *l, const struct key *k, void *base, const char *v)
{
	char use[256];
	size_t i, n = 0, shown = 0, len = 0;

	for (i = 0; k->names[i].name != NULL; i++) {
		if (strcmp(v, k->names[i].name) == 0) {
			*FIELD(base, k, int) = k->names[i].value;
			return 0;
		}
		n += !k->names[i].alias;
	}
	/* "a, b, c or d" from the names users are meant to write. */
	for (i = 0; k->names[i].name != NULL; i++) {
		if (k->names[i].alias)
			continue;
		shown++;
		len += (size_t)snprintf(use + len, sizeof(use) - len, "%s%s",
		    shown == 1 ? "" : shown == n ? " or " : ", ",
		    k->names[i].name);
	}
	kerr(l, k, "\"%s\" is not %s (use %s)", v, k->what, use);
	return -1;
}

/*
 * [redis] local_share: a fraction "N/D" (1 <= N <= D <= 1000000) or a
 * decimal in (0, 1] with at most 6 digits after the point ("0.25", "1").
 * Kept as num/den, so that limit x share rounds down exactly.
 */
static int
set_share(struct loader *l, const struct key *k, void *base, const char *v)
{
	struct conf *c = base;
	long long num, den = 1, frac = 0;
	const char *slash = strchr(v, '/'), *dot = strchr(v, '.'), *e;
	char ip[32];
	size_t n;

	if (slash != NULL) {
		n = (size_t)(slash - v);
		if (n == 0 || n >= sizeof(ip))
			goto bad;
		memcpy(ip, v, n);
		ip[n] = '\0';
		if (conf_parse_int(ip, 1, 1000000, &num, &e) == -1 ||
		    conf_parse_int(slash + 1, 1, 1000000, &den, &e) == -1)
			goto bad;
	} else {
		n = dot != NULL ? (size_t)(dot - v) : strlen(v);
		if (n == 0 || n >= sizeof(ip))
			goto bad;
		memcpy(ip, v, n);
		ip[n] = '\0';
		if (conf_parse_int(ip, 0, 1, &num, &e) == -1)
			goto bad;
		if (dot != NULL) {
			if (strlen(dot + 1) == 0 || strlen(dot + 1) > 6 ||
			    conf_parse_int(dot + 1, 0, 999999, &frac, &e) == -1)
				goto bad;
			for (n = strlen(dot + 1); n > 0; n--)
				den *= 10;
			num = num * den + frac;
		}
	}
	if (num < 1 || num > den)
		goto bad;
	c->local_share_num = num;
	c->local_share_den = den;
	return 0;
bad:
	kerr(l, k, "\"%s\" is not a share (use a fraction N/D such as 1/4, "
	    "or a decimal in (0, 1] such as 0.25)", v);
	return -1;
}

/*
 * [gateway] engine is gone: rlgate has one engine. "events" named it and
 * still loads (with a warning); anything else was another engine, and
 * silently serving differently from what the file says is worse than
 * refusing to start.
 */
static int
set_engine(struct loader *l, const struct key *k, void *base, const char *v)
{
	(void)base;
	if (strcmp(v, "events") == 0) {
		conf_warn(l, l->lineno, l->secname, k->name, "the key is gone: "
		    "rlgate has one engine, event loops ([gateway] workers of "
		    "them, one per CPU by default); remove this line");
		return 0;
	}
	kerr(l, k, "\"%s\": the key is gone: rlgate has one engine, event "
	    "loops ([gateway] workers of them, one per CPU by default), and "
	    "no %s engine; remove this line%s", v, v,
	    strcmp(v, "threads") == 0 ? " (a kept-alive connection no longer "
	    "holds a worker: the event loops serve any number at once)" : "");
	return -1;
}

static int
set_string(struct loader *l, const struct key *k, void *base, const char *v)
{
	char **field = FIELD(base, k, char *);

	free(*field);
	*field = conf_strdup(l, v);
	return *field == NULL ? -1 : 0;
}

static int
set_password(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	if (set_string(l, k, base, v) == -1)
		return -1;
	/* 640 lets the group rlgate runs as read it; others never may. */
	if (l->mode & S_IROTH) {
		kerr(l, k, "%s holds a password but every user can read it "
		    "(mode %03o); run chmod 640 %s (or 600)", l->file,
		    (unsigned)(l->mode & 0777), l->file);
		return -1;
	}
	return 0;
}

static int
set_program(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	/* A relative path would depend on the directory the web server
	 * happens to start CGI programs in. */
	if (v[0] != '/') {
		kerr(l, k, "\"%s\" is not an absolute path (use e.g. "
		    "/usr/lib/cgi-bin/app.cgi)", v);
		return -1;
	}
	return set_string(l, k, base, v);
}

/* An octal file mode, 0 to k->max: 660 or 0660. */
static int
set_mode(struct loader *l, const struct key *k, void *base, const char *v)
{
	const char *p;
	long long n = 0;

	for (p = v; *p >= '0' && *p <= '7' && n <= k->max; p++)
		n = n * 8 + (*p - '0');
	if (p == v || *p != '\0' || n > k->max) {
		kerr(l, k, "\"%s\" is not an octal mode (use e.g. 0660, at "
		    "most %llo)", v, (unsigned long long)k->max);
		return -1;
	}
	*FIELD(base, k, int) = (int)n;
	return 0;
}

/* A group that exists on this host, by name or number: checked at load so
 * that a typo stops the start (and rlgate -t), not the first connection. */
static int
set_group(struct loader *l, const struct key *k, void *base, const char *v)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long n;

	if (*v == '\0') {
		*FIELD(base, k, long) = -1;
		return 0;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (ascii_is_digit(*v) && *end == '\0' && errno == 0 &&
	    n <= 0x7fffffffUL) {
		*FIELD(base, k, long) = (long)n;
		return 0;
	}
	if (getgrnam_r(v, &gr, buf, sizeof(buf), &res) != 0 || res == NULL) {
		kerr(l, k, "\"%s\" is not a group of this host (use a name "
		    "from /etc/group or a number)", v);
		return -1;
	}
	*FIELD(base, k, long) = (long)res->gr_gid;
	return 0;
}

static int
set_address(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	const char *why;

	if (netaddr_check(v, &why) == -1) {
		kerr(l, k, "\"%s\" %s " ADDRESS_USE, v, why);
		return -1;
	}
	return set_string(l, k, base, v);
}

/* [redis] address: one address or, for cluster and sentinel, several
 * separated by blanks (how many the mode takes is conf_finish()'s). */
static int
set_addresses(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	char tok[RLG_MAX_LINE + 1];
	const char *why, *p = v;
	size_t len, n = 0;
	int bad = 0;

	for (; *p != '\0'; p += len) {
		p += strspn(p, " \t");
		if ((len = strcspn(p, " \t")) == 0)
			break;
		snprintf(tok, sizeof(tok), "%.*s", (int)len, p);
		if (netaddr_check(tok, &why) == -1) {
			kerr(l, k, "\"%s\" %s " ADDRESS_USE, tok, why);
			bad = 1;
		}
		n++;
	}
	if (n > RLG_MAX_REDIS_ADDRESSES) {
		kerr(l, k, "lists %zu addresses (at most %d)", n,
		    RLG_MAX_REDIS_ADDRESSES);
		bad = 1;
	}
	return bad ? -1 : set_string(l, k, base, v);
}

static int
set_key_prefix(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	/* The limiter wraps each rule's key in {} to make it one Redis
	 * Cluster hash slot; a brace in the prefix would move the tag. */
	if (strpbrk(v, "{} \t") != NULL) {
		kerr(l, k, "\"%s\" contains a brace or a blank (use letters, "
		    "digits and punctuation such as rl: or myapp:rl:)", v);
		return -1;
	}
	if (strlen(v) > RLG_MAX_KEY_PREFIX) {
		kerr(l, k, "\"%s\" is longer than %d characters", v,
		    RLG_MAX_KEY_PREFIX);
		return -1;
	}
	return set_string(l, k, base, v);
}

/* How many items a list separated by blanks or commas holds. */
size_t
conf_count_tokens(const char *v)
{
	size_t n = 0, len;

	for (; *v != '\0'; v += len) {
		v += strspn(v, " \t,");
		if ((len = strcspn(v, " \t,")) > 0)
			n++;
	}
	return n;
}

/* A list of CIDRs separated by blanks or commas into *out, *nout. */
static int
parse_cidrs(struct loader *l, const struct key *k, const char *v,
    struct cidr **out, size_t *nout)
{
	struct cidr *list;
	const char *p, *why;
	size_t n = conf_count_tokens(v), len;

	if (n == 0) {
		kerr(l, k, "\"%s\" lists no address (use e.g. 127.0.0.1/32 "
		    "::1/128)", v);
		return -1;
	}
	if ((list = calloc(n, sizeof(*list))) == NULL) {
		l->oom = 1;
		return -1;
	}
	for (n = 0, p = v; *p != '\0'; p += len) {
		p += strspn(p, " \t,");
		if ((len = strcspn(p, " \t,")) == 0)
			continue;
		if (netaddr_parse_cidr(p, len, &list[n], &why) == -1) {
			kerr(l, k, "\"%.*s\" %s", (int)len, p, why);
			free(list);
			return -1;
		}
		n++;
	}
	*out = list;
	*nout = n;
	return 0;
}

static int
set_trusted(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	struct conf *c = base;

	return parse_cidrs(l, k, v, &c->trusted, &c->ntrusted);
}

static int
set_status_allow(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	struct conf *c = base;
	struct cidr *list;
	size_t n;

	if (parse_cidrs(l, k, v, &list, &n) == -1)
		return -1;
	free(c->status_allow);	/* the default */
	c->status_allow = list;
	c->nstatus_allow = n;
	return 0;
}

/* "/rlgate-status": a path prefix of its own, without the trailing '/'. */
static int
set_status_path(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	char *p;

	if (v[0] != '/' || strpbrk(v, " \t?#*%{}") != NULL) {
		kerr(l, k, "\"%s\" is not a plain path (use e.g. "
		    "/rlgate-status)", v);
		return -1;
	}
	if (set_string(l, k, base, v) == -1)
		return -1;
	p = *FIELD(base, k, char *);
	for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
		p[n - 1] = '\0';
	if (strcmp(p, "/") == 0) {
		kerr(l, k, "\"%s\" would take every request (use a path of "
		    "its own, e.g. /rlgate-status)", v);
		return -1;
	}
	return 0;
}

static int
set_path(struct loader *l, const struct key *k, void *base, const char *v)
{
	struct rule *r = base;
	char err[256];
	const char *src, *at, *star;
	int rc;

	if (v[0] == '~') {
		for (src = v + 1; ascii_is_blank(*src); src++)
			;
		if (*src == '\0') {
			kerr(l, k, "\"%s\" has no regular expression after ~ "
			    "(use e.g. ~^/user/[0-9]+$)", v);
			return -1;
		}
		switch (recheck_regex(src, &at)) {
		case RECHECK_OK:
			break;
		case RECHECK_STACKED:
			kerr(l, k, "\"%s\" repeats a repetition (\"%.2s\"), "
			    "which POSIX leaves undefined; use one (e.g. [0-9]+)",
			    v, at - 1);
			return -1;
		case RECHECK_DEEP:
			kerr(l, k, "\"%s\" nests groups more than %d deep",
			    v, RECHECK_DEPTH);
			return -1;
		case RECHECK_LARGE:
			kerr(l, k, "\"%s\" is too large once its repetitions "
			    "are expanded (over %d characters from \"%.20s\"); "
			    "use smaller counts", v, RECHECK_POSITIONS, at);
			return -1;
		}
		if ((rc = regcomp(&r->path_re, src,
		    REG_EXTENDED | REG_NOSUB)) != 0) {
			regerror(rc, &r->path_re, err, sizeof(err));
			regfree(&r->path_re);
			kerr(l, k, "\"%s\" is not a POSIX extended regular "
			    "expression: %s", v, err);
			return -1;
		}
		/* From here conf_free() owns path_re. */
		r->path_kind = RLG_PATH_REGEX;
		if ((r->path = conf_strdup(l, src)) == NULL)
			return -1;
		r->path_len = strlen(r->path);
		return 0;
	}
	if (v[0] != '/') {
		kerr(l, k, "\"%s\" is not a path (use /exact, /prefix/* or "
		    "~regex)", v);
		return -1;
	}
	if (strpbrk(v, " \t?#") != NULL) {
		kerr(l, k, "\"%s\" has a blank, ? or # in it (a path is matched "
		    "without the query string; use ~regex for patterns)", v);
		return -1;
	}
	star = strchr(v, '*');
	if (star != NULL && star[1] != '\0') {
		kerr(l, k, "\"%s\" has a * that is not at the end (use "
		    "/prefix/* or ~regex)", v);
		return -1;
	}
	if ((r->path = conf_strdup(l, v)) == NULL)
		return -1;
	r->path_len = strlen(r->path);
	r->path_kind = RLG_PATH_EXACT;
	if (star != NULL) {
		r->path[--r->path_len] = '\0';
		r->path_kind = RLG_PATH_PREFIX;
	}
	return 0;
}

static int
set_methods(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	char ***field = FIELD(base, k, char **), **list;
	const char *p, *bad;
	size_t n = conf_count_tokens(v), len, i;

	if (n == 0) {
		kerr(l, k, "\"%s\" lists no method (use e.g. GET POST)", v);
		return -1;
	}
	if ((list = calloc(n + 1, sizeof(*list))) == NULL) {
		l->oom = 1;
		return -1;
	}
	*field = list;
	for (n = 0, p = v; *p != '\0'; p += len) {
		p += strspn(p, " \t,");
		if ((len = strcspn(p, " \t,")) == 0)
			continue;
		for (bad = p; bad < p + len && ascii_is_tchar(*bad); bad++)
			;
		if (bad < p + len) {
			kerr(l, k, "\"%.*s\" is not a method name (use tokens "
			    "such as GET POST, separated by spaces)",
			    (int)len, p);
			return -1;
		}
		if ((list[n] = strndup(p, len)) == NULL) {
			l->oom = 1;
			return -1;
		}
		/* HTTP methods are case-sensitive and registered in upper
		 * case; "get" in a config can only mean GET. */
		for (i = 0; i < len; i++)
			if (list[n][i] >= 'a' && list[n][i] <= 'z')
				list[n][i] = (char)(list[n][i] - 'a' + 'A');
		n++;
	}
	return 0;
}

static int
set_host(struct loader *l, const struct key *k, void *base, const char *v)
{
	if (strpbrk(v, " \t,/*") != NULL) {
		kerr(l, k, "\"%s\" is not one host name (give one exact host, "
		    "e.g. api.example.com)", v);
		return -1;
	}
	return set_string(l, k, base, v);
}

static int
set_template(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	struct tmpl *field = FIELD(base, k, struct tmpl), t = { 0 };
	char why[512];

	if (tmpl_parse(v, &t, why, sizeof(why)) == -1 ||
	    tmpl_ambiguous(&t, why, sizeof(why))) {
		if (why[0] == '\0')
			l->oom = 1;
		else
			kerr(l, k, "\"%s\" %s", v, why);
		tmpl_free(&t);
		return -1;
	}
	tmpl_free(field);
	*field = t;
	return 0;
}

static int
set_cost(struct loader *l, const struct key *k, void *base, const char *v)
{
	struct rule *r = base;
	struct tmpl t = { 0 };
	char why[512];
	const char *e;

	if (strpbrk(v, "{}") == NULL) {
		if (conf_parse_int(v, k->min, k->max, &r->cost, &e) == -1) {
			kerr(l, k, "\"%s\" %s (use a whole number from %lld to "
			    "%lld, or a template such as {header.X-Cost})", v,
			    e, k->min, k->max);
			return -1;
		}
		return 0;
	}
	if (tmpl_parse(v, &t, why, sizeof(why)) == -1) {
		if (why[0] == '\0')
			l->oom = 1;
		else
			kerr(l, k, "\"%s\" %s", v, why);
		tmpl_free(&t);
		return -1;
	}
	r->cost_tmpl = t;
	return 0;
}

