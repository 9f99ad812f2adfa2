/*
 * conf: reads rlgate.ini with libinih into an immutable struct conf and
 * finds, at load time, everything a user can get wrong in it. It checks
 * paths and addresses for form only: nothing is opened or connected here
 * (the audit module creates its database, the limiter dials Redis).
 */
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "conf.h"

/*
 * Debian's libinih reads a line in one fgets() of INI_MAX_LINE bytes and
 * silently hands the rest to the next call as if it were a new line. The
 * reader below refuses longer lines before inih can split them.
 */
_Static_assert(RLG_MAX_LINE < INI_MAX_LINE,
    "libinih must be able to read a whole accepted line at once");

#define MAX_ERRORS	100		/* then stop: the rest is likely noise */
#define MS_SECOND	1000LL
#define MS_MINUTE	(60 * MS_SECOND)
#define MS_HOUR		(60 * MS_MINUTE)
#define MS_DAY		(24 * MS_HOUR)

#define DURATION_USE	"(use 500ms, 1s, 1m, 1h, 1d)"
#define SECTIONS_USE	"[gateway], [redis], [audit], [cgi] or [rule:NAME]"
#define ADDRESS_USE	"(use host:port, [IPv6]:port or unix:/path)"
#define TMPL_FIELDS_USE	"{ip}, {path}, {method}, {host}, {rule}, " \
			"{query.NAME}, {header.NAME} or {env.NAME}"

enum section {
	S_NONE,		/* before the first [section] */
	S_GATEWAY,
	S_REDIS,
	S_AUDIT,
	S_CGI,
	S_RULE,
	S_SKIP		/* a bad section header, already reported */
};

static const char *const section_names[] = {
	[S_GATEWAY] = "gateway",
	[S_REDIS] = "redis",
	[S_AUDIT] = "audit",
	[S_CGI] = "cgi",
};

/* Every key of the file; the order of keys[] below. */
enum key_id {
	K_LISTEN, K_ENGINE, K_WORKERS, K_DENY_STATUS, K_HEADERS, K_TRUSTED, K_LOG_LEVEL,
	K_GATEWAY_DRY_RUN, K_STATUS_PATH, K_STATUS_ALLOW,
	K_REDIS_MODE, K_ADDRESS, K_USERNAME, K_PASSWORD, K_DATABASE, K_CONNECT_TIMEOUT,
	K_TIMEOUT, K_KEY_PREFIX, K_ON_ERROR, K_MASTER_NAME, K_SENTINEL_PASSWORD,
	K_AUDIT_DATABASE, K_FLUSH_INTERVAL, K_BATCH, K_QUEUE, K_UNMATCHED,
	K_UPSTREAM,
	K_PATH, K_METHOD, K_HOST, K_KEY, K_ALGORITHM, K_LIMIT, K_WINDOW,
	K_BURST, K_PRECISION, K_COST, K_ON_MISSING, K_RULE_ON_ERROR, K_DRY_RUN,
	K_DENY_CACHE, K_OVERRIDES,
	NKEYS
};

/* What the loader knows about one key of the current section. */
enum key_state {
	KS_ABSENT,
	KS_EMPTY,	/* "key =": not set, the default stays */
	KS_OK,
	KS_BAD		/* reported; its value must not feed other checks */
};

struct lerror {
	int		 line;
	size_t		 seq;	/* keeps the order of errors on one line */
	char		*text;
};

struct loader {
	struct conf	*c;
	const char	*file;		/* as the user named it, for messages */
	FILE		*fp;
	mode_t		 mode;
	char		*buf;		/* getline() */
	size_t		 bufsz;
	int		 lineno;	/* physical line being handled */
	enum section	 section;
	char		 secname[RLG_MAX_LINE + 1];
	size_t		 rule;		/* index of the current rule in c */
	size_t		 rulecap;
	int		 seen[NKEYS];	/* line a key was set on, 0 = not */
	enum key_state	 state[NKEYS];
	struct lerror	*errs;
	size_t		 nerrs;
	size_t		 errcap;
	int		 too_many;
	int		 oom;
};

struct enum_name {
	const char	*name;
	int		 value;
	int		 alias;		/* accepted, not suggested */
};

struct key;
typedef int (*set_fn)(struct loader *, const struct key *, void *,
    const char *);

struct key {
	enum section		 section;
	const char		*name;
	set_fn			 set;
	size_t			 off;	/* into struct conf or struct rule */
	long long		 min, max;
	const struct enum_name	*names;
	const char		*what;	/* "is not <what>" for enums */
	int			 empty_clears;	/* "key =" sets NULL, not default */
};

static const struct enum_name yes_no[] = {
	{ "yes", 1, 0 }, { "no", 0, 0 },
	{ "true", 1, 1 }, { "false", 0, 1 }, { "on", 1, 1 }, { "off", 0, 1 },
	{ "1", 1, 1 }, { "0", 0, 1 },
	{ NULL, 0, 0 }
};

static const struct enum_name engines[] = {
	{ "events", RLG_ENGINE_EVENTS, 0 },
	{ "threads", RLG_ENGINE_THREADS, 0 },
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

static const struct enum_name algorithms[] = {
	{ "fixed_window", RLG_FIXED_WINDOW, 0 },
	{ "sliding_window", RLG_SLIDING_WINDOW, 0 },
	{ "sliding_log", RLG_SLIDING_LOG, 0 },
	{ "token_bucket", RLG_TOKEN_BUCKET, 0 },
	{ "gcra", RLG_GCRA, 0 },
	{ "leaky_bucket", RLG_LEAKY_BUCKET, 0 },
	{ NULL, 0, 0 }
};

static int	set_int(struct loader *, const struct key *, void *,
		    const char *);
static int	set_llong(struct loader *, const struct key *, void *,
		    const char *);
static int	set_duration(struct loader *, const struct key *, void *,
		    const char *);
static int	set_enum(struct loader *, const struct key *, void *,
		    const char *);
static int	set_string(struct loader *, const struct key *, void *,
		    const char *);
static int	set_password(struct loader *, const struct key *, void *,
		    const char *);
static int	set_program(struct loader *, const struct key *, void *,
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
static const struct key keys[NKEYS] = {
	[K_LISTEN] = { S_GATEWAY, "listen", set_address, C(listen),
	    0, 0, NULL, NULL, 0 },
	[K_ENGINE] = { S_GATEWAY, "engine", set_enum, C(engine),
	    0, 0, engines, "an engine", 0 },
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
	    C(redis_connect_timeout_ms), 1, MS_HOUR, NULL, NULL, 0 },
	[K_TIMEOUT] = { S_REDIS, "timeout", set_duration,
	    C(redis_timeout_ms), 1, MS_HOUR, NULL, NULL, 0 },
	[K_KEY_PREFIX] = { S_REDIS, "key_prefix", set_key_prefix,
	    C(key_prefix), 0, 0, NULL, NULL, 0 },
	[K_ON_ERROR] = { S_REDIS, "on_error", set_enum, C(on_error),
	    0, 0, on_errors, "an error policy", 0 },
	[K_MASTER_NAME] = { S_REDIS, "master_name", set_string,
	    C(redis_master_name), 0, 0, NULL, NULL, 1 },
	[K_SENTINEL_PASSWORD] = { S_REDIS, "sentinel_password", set_password,
	    C(redis_sentinel_password), 0, 0, NULL, NULL, 1 },

	[K_AUDIT_DATABASE] = { S_AUDIT, "database", set_string,
	    C(audit_database), 0, 0, NULL, NULL, 1 },
	[K_FLUSH_INTERVAL] = { S_AUDIT, "flush_interval", set_duration,
	    C(audit_flush_interval_ms), 1, MS_HOUR, NULL, NULL, 0 },
	[K_BATCH] = { S_AUDIT, "batch", set_int, C(audit_batch),
	    1, 1000000, NULL, NULL, 0 },
	[K_QUEUE] = { S_AUDIT, "queue", set_int, C(audit_queue),
	    1, 100000000, NULL, NULL, 0 },
	[K_UNMATCHED] = { S_AUDIT, "unmatched", set_enum,
	    C(audit_unmatched), 0, 0, yes_no, "a boolean", 0 },

	[K_UPSTREAM] = { S_CGI, "upstream", set_program, C(cgi_upstream),
	    0, 0, NULL, NULL, 0 },

	[K_PATH] = { S_RULE, "path", set_path, 0, 0, 0, NULL, NULL, 0 },
	[K_METHOD] = { S_RULE, "method", set_methods, R(methods),
	    0, 0, NULL, NULL, 0 },
	[K_HOST] = { S_RULE, "host", set_host, R(host), 0, 0, NULL, NULL, 0 },
	[K_KEY] = { S_RULE, "key", set_template, R(key), 0, 0, NULL, NULL, 0 },
	[K_ALGORITHM] = { S_RULE, "algorithm", set_enum, R(algorithm),
	    0, 0, algorithms, "an algorithm", 0 },
	[K_LIMIT] = { S_RULE, "limit", set_llong, R(limit),
	    1, RLG_MAX_COUNT, NULL, NULL, 0 },
	[K_WINDOW] = { S_RULE, "window", set_duration, R(window_ms),
	    1, 366 * MS_DAY, NULL, NULL, 0 },
	[K_BURST] = { S_RULE, "burst", set_llong, R(burst),
	    1, RLG_MAX_COUNT, NULL, NULL, 0 },
	[K_PRECISION] = { S_RULE, "precision", set_duration,
	    R(precision_ms), 1, 366 * MS_DAY, NULL, NULL, 0 },
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

#define FIELD(base, k, type)	((type *)(void *)((char *)(base) + (k)->off))

/* Template fields: {NAME} or, with needs_name, {NAME.ARG}. */
static const struct {
	const char		*name;
	enum rlg_part_kind	 kind;
	int			 needs_name;
} tmpl_fields[] = {
	{ "ip", RLG_PART_IP, 0 },
	{ "path", RLG_PART_PATH, 0 },
	{ "method", RLG_PART_METHOD, 0 },
	{ "host", RLG_PART_HOST, 0 },
	{ "rule", RLG_PART_RULE, 0 },
	{ "query", RLG_PART_QUERY, 1 },
	{ "header", RLG_PART_HEADER, 1 },
	{ "env", RLG_PART_ENV, 1 },
};

/* ---- errors ---------------------------------------------------------- */

/*
 * Records "FILE:LINE: [sec] key: message". line 0 leaves out the line,
 * sec and key may be NULL. Never fails loudly: out of memory is noted and
 * becomes the one message conf_load() returns.
 */
static void __attribute__((format(printf, 5, 6)))
lerr(struct loader *l, int line, const char *sec, const char *key,
    const char *fmt, ...)
{
	char where[64], ctx[RLG_MAX_LINE + 80], msg[1024];
	struct lerror *e;
	va_list ap;

	if (l->nerrs >= MAX_ERRORS) {
		l->too_many = 1;
		return;
	}
	if (l->nerrs == l->errcap) {
		size_t cap = l->errcap ? l->errcap * 2 : 16;

		if ((e = reallocarray(l->errs, cap, sizeof(*e))) == NULL) {
			l->oom = 1;
			return;
		}
		l->errs = e;
		l->errcap = cap;
	}
	where[0] = ctx[0] = '\0';
	if (line > 0)
		snprintf(where, sizeof(where), ":%d", line);
	if (sec != NULL && key != NULL)
		snprintf(ctx, sizeof(ctx), "[%s] %s: ", sec, key);
	else if (sec != NULL)
		snprintf(ctx, sizeof(ctx), "[%s]: ", sec);
	else if (key != NULL)
		snprintf(ctx, sizeof(ctx), "%s: ", key);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = &l->errs[l->nerrs];
	if (asprintf(&e->text, "%s%s: %s%s", l->file, where, ctx, msg) == -1) {
		l->oom = 1;
		return;
	}
	e->line = line;
	e->seq = l->nerrs++;
}

/* An error about the value of key k on the current line. */
#define kerr(l, k, ...) \
	lerr((l), (l)->lineno, (l)->secname, (k)->name, __VA_ARGS__)

static int
lerror_cmp(const void *a, const void *b)
{
	const struct lerror *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* All errors in file order, one per line, in a string the caller frees. */
static char *
join_errors(struct loader *l)
{
	char *out, *p;
	size_t i, len = 1;

	if (l->oom) {
		char *s;

		return asprintf(&s, "%s: out of memory\n", l->file) == -1 ?
		    NULL : s;
	}
	qsort(l->errs, l->nerrs, sizeof(*l->errs), lerror_cmp);
	for (i = 0; i < l->nerrs; i++)
		len += strlen(l->errs[i].text) + 1;
	if (l->too_many)
		len += strlen(l->file) + 64;
	if ((out = malloc(len)) == NULL)
		return NULL;
	p = out;
	for (i = 0; i < l->nerrs; i++)
		p += sprintf(p, "%s\n", l->errs[i].text);
	if (l->too_many)
		sprintf(p, "%s: too many errors, stopped after %d\n", l->file,
		    MAX_ERRORS);
	return out;
}

/* ---- small parsers ------------------------------------------------- */

static int
is_digit(int ch)
{
	return ch >= '0' && ch <= '9';
}

static int
is_alnum(int ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') ||
	    (ch >= 'A' && ch <= 'Z');
}

static int
is_blank(int ch)
{
	return ch == ' ' || ch == '\t';
}

/* RFC 9110 token characters: method and header names. */
static int
is_tchar(int ch)
{
	return is_alnum(ch) || (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch));
}

static char *
lskip(char *s)
{
	while (is_blank(*s))
		s++;
	return s;
}

static char *
trim(char *s)
{
	char *e;

	s = lskip(s);
	e = s + strlen(s);
	while (e > s && is_blank(e[-1]))
		*--e = '\0';
	return s;
}

int
conf_parse_int(const char *s, long long min, long long max, long long *out,
    const char **errstr)
{
	const char *p = s;
	long long v;

	*errstr = "is not a whole number";
	if (s == NULL)
		return -1;
	if (*p == '-')
		p++;
	if (!is_digit(*p))
		return -1;
	while (is_digit(*p))
		p++;
	if (*p != '\0')
		return -1;
	/* Only digits are left, so strtoll's one remaining failure is range. */
	errno = 0;
	v = strtoll(s, NULL, 10);
	if ((errno == ERANGE && v == LLONG_MIN) || v < min) {
		*errstr = "is too small";
		return -1;
	}
	if (errno == ERANGE || v > max) {
		*errstr = "is too large";
		return -1;
	}
	*errstr = NULL;
	*out = v;
	return 0;
}

int
conf_parse_duration(const char *s, long long *out_ms, const char **errstr)
{
	static const struct {
		const char	*unit;
		long long	 ms;
	} units[] = {
		{ "ms", 1 }, { "s", MS_SECOND }, { "m", MS_MINUTE },
		{ "h", MS_HOUR }, { "d", MS_DAY },
	};
	const char *p = s;
	long long n = 0;
	size_t i;

	*errstr = "is not a duration " DURATION_USE;
	if (s == NULL || !is_digit(*p))
		return -1;
	for (; is_digit(*p); p++) {
		if (n > (LLONG_MAX - (*p - '0')) / 10) {
			*errstr = "is too large";
			return -1;
		}
		n = n * 10 + (*p - '0');
	}
	if (*p == '\0') {
		*errstr = "has no unit " DURATION_USE;
		return -1;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].unit) != 0)
			continue;
		if (n > LLONG_MAX / units[i].ms) {
			*errstr = "is too large";
			return -1;
		}
		*out_ms = n * units[i].ms;
		*errstr = NULL;
		return 0;
	}
	return -1;
}

char *
conf_format_duration(long long ms, char *buf, size_t len)
{
	if (ms != 0 && ms % MS_DAY == 0)
		snprintf(buf, len, "%lldd", ms / MS_DAY);
	else if (ms != 0 && ms % MS_HOUR == 0)
		snprintf(buf, len, "%lldh", ms / MS_HOUR);
	else if (ms != 0 && ms % MS_MINUTE == 0)
		snprintf(buf, len, "%lldm", ms / MS_MINUTE);
	else if (ms != 0 && ms % MS_SECOND == 0)
		snprintf(buf, len, "%llds", ms / MS_SECOND);
	else
		snprintf(buf, len, "%lldms", ms);
	return buf;
}

const char *
conf_algorithm_name(enum rlg_algorithm a)
{
	size_t i;

	for (i = 0; algorithms[i].name != NULL; i++)
		if (algorithms[i].value == (int)a)
			return algorithms[i].name;
	return "unknown";
}

static char *
lstrdup(struct loader *l, const char *s)
{
	char *d;

	if ((d = strdup(s)) == NULL)
		l->oom = 1;
	return d;
}

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

static int
set_string(struct loader *l, const struct key *k, void *base, const char *v)
{
	char **field = FIELD(base, k, char *);

	free(*field);
	*field = lstrdup(l, v);
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

/* Checks host:port, [v6]:port or unix:/path; *why says what is wrong. */
static int
check_address(const char *s, const char **why)
{
	struct sockaddr_un sun;
	struct in6_addr a6;
	char host[256];
	const char *colon, *p, *e;
	long long port;

	if (strncmp(s, "unix:", 5) == 0) {
		*why = "has no absolute socket path after unix:";
		if (s[5] != '/')
			return -1;
		*why = "has a socket path that is too long";
		return strlen(s + 5) < sizeof(sun.sun_path) ? 0 : -1;
	}
	if (s[0] == '[') {
		*why = "is not a bracketed IPv6 address with a port";
		if ((e = strchr(s, ']')) == NULL || e[1] != ':' ||
		    (size_t)(e - s - 1) >= sizeof(host))
			return -1;
		snprintf(host, sizeof(host), "%.*s", (int)(e - s - 1), s + 1);
		if (inet_pton(AF_INET6, host, &a6) != 1)
			return -1;
		colon = e + 1;
	} else {
		*why = "has no port";
		if ((colon = strrchr(s, ':')) == NULL)
			return -1;
		*why = "has no host (use 127.0.0.1 or 0.0.0.0 for every "
		    "interface)";
		if (colon == s)
			return -1;
		*why = "needs brackets around an IPv6 address";
		if (memchr(s, ':', (size_t)(colon - s)) != NULL)
			return -1;
		*why = "has a host name with characters a host name has not";
		for (p = s; p < colon; p++)
			if (!is_alnum(*p) && *p != '.' && *p != '-' &&
			    *p != '_')
				return -1;
	}
	*why = "has a port that is not a number from 1 to 65535";
	return conf_parse_int(colon + 1, 1, 65535, &port, &e);
}

static int
set_address(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	const char *why;

	if (check_address(v, &why) == -1) {
		kerr(l, k, "\"%s\" %s " ADDRESS_USE, v, why);
		return -1;
	}
	return set_string(l, k, base, v);
}

/* [redis] address: one address or, for cluster and sentinel, several
 * separated by blanks (how many the mode takes is finish_conf()'s). */
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
		if (check_address(tok, &why) == -1) {
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
static size_t
count_tokens(const char *v)
{
	size_t n = 0, len;

	for (; *v != '\0'; v += len) {
		v += strspn(v, " \t,");
		if ((len = strcspn(v, " \t,")) > 0)
			n++;
	}
	return n;
}

/* "10.0.0.0/8", "::1/128" or a bare address (/32, /128). */
static int
parse_cidr(const char *tok, size_t len, struct cidr *out, const char **why)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash;
	long long bits;
	int i;

	*why = "is not an address or CIDR (use e.g. 10.0.0.0/8 or ::1/128)";
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, tok, len);
	buf[len] = '\0';
	if ((slash = strchr(buf, '/')) != NULL)
		*slash = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->addr) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, out->addr) == 1)
		out->family = AF_INET6;
	else
		return -1;
	out->bits = out->family == AF_INET ? 32 : 128;
	if (slash != NULL) {
		const char *e;

		*why = out->family == AF_INET ?
		    "has a prefix length that is not 0 to 32" :
		    "has a prefix length that is not 0 to 128";
		if (conf_parse_int(slash + 1, 0, out->bits, &bits, &e) == -1)
			return -1;
		out->bits = (int)bits;
	}
	/* Like nginx's set_real_ip_from: host bits past the prefix mean
	 * nothing, so 10.1.2.3/8 is 10.0.0.0/8. */
	for (i = out->bits; i < 128; i++)
		out->addr[i / 8] &= (unsigned char)~(0x80u >> (i % 8));
	return 0;
}

/* A list of CIDRs separated by blanks or commas into *out, *nout. */
static int
parse_cidrs(struct loader *l, const struct key *k, const char *v,
    struct cidr **out, size_t *nout)
{
	struct cidr *list;
	const char *p, *why;
	size_t n = count_tokens(v), len;

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
		if (parse_cidr(p, len, &list[n], &why) == -1) {
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

/* Bounds on a path regex, checked before regcomp(): see re_check(). */
#define RE_DEPTH	32	/* groups inside groups */
#define RE_POSITIONS	20000	/* atoms once every repetition is expanded */

enum re_fault { RE_OK, RE_STACKED, RE_DEEP, RE_LARGE };

/*
 * The copies of its atom that the repetition at p makes ("+": 2, "{2,5}":
 * 5, "{2,}": 3), and in *end where it ends; 0 when regcomp() is left to
 * refuse it.
 */
static unsigned long long
re_copies(const char *p, const char **end)
{
	unsigned long long m = 0, n;
	char *e = (char *)p + 1;

	*end = p;
	if (*p != '{')
		return *p == '+' ? 2 : 1;	/* glibc: a+ is a a* */
	if (is_digit(*e))
		m = strtoull(e, &e, 10);
	else if (*e != ',')
		return 0;
	n = m;
	if (*e == ',') {
		e++;
		n = is_digit(*e) ? strtoull(e, &e, 10) : m + 1;
	}
	if (*e != '}')
		return 0;
	*end = e;
	return n > RE_POSITIONS ? RE_POSITIONS + 1 : n > 0 ? n : 1;
}

/*
 * What re_check() finds wrong with the regex re before regcomp() sees it;
 * *at points at the fault. glibc's regcomp() copies what a repetition
 * repeats, nested ones included, so that its memory grows with the size
 * of the expanded expression: "((a{50}){50}){50}" takes 28 MB and one
 * more level gigabytes. A repetition straight after another (which POSIX
 * leaves undefined) copies the expression once per repetition: fuzz_conf
 * found "[0-9]+++...+" taking gigabytes, and empty groups repeated within
 * each other, which count as one atom here. The size counted here is an
 * upper bound: alternatives count as if all were taken.
 */
static enum re_fault
re_check(const char *re, const char **at)
{
	unsigned long long size[RE_DEPTH + 1] = { 0 }, last = 0, k;
	int depth = 0, after_repeat = 0;
	const char *p;

	for (p = re; *p != '\0'; p++) {
		*at = p;
		if (strchr("*+?{", *p) != NULL) {
			if (after_repeat)
				return RE_STACKED;
			if ((k = re_copies(p, &p)) == 0)
				return RE_OK;	/* regcomp() says what is wrong */
			size[depth] += last * (k - 1);
			if (size[depth] > RE_POSITIONS)
				return RE_LARGE;
			after_repeat = 1;
			continue;
		}
		after_repeat = 0;
		if (*p == '(') {
			if (depth == RE_DEPTH)
				return RE_DEEP;
			size[++depth] = last = 0;
			continue;
		}
		if (*p == ')' && depth > 0) {
			/* Even an empty group is copied: "((){200}){200}"
			 * takes gigabytes as surely as with an atom in it. */
			last = size[depth] > 0 ? size[depth] : 1;
			depth--;
			if ((size[depth] += last) > RE_POSITIONS)
				return RE_LARGE;
			continue;
		}
		if (*p == '|') {
			last = 0;
			continue;
		}
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == '[') {
			/* A bracket expression: a "]" first is a member, and
			 * [:class:] [.coll.] [=equiv=] hold their own "]". */
			p += p[1] == '^' ? 2 : 1;
			if (*p == ']')
				p++;
			for (; *p != '\0' && *p != ']'; p++) {
				if (p[0] == '[' && p[1] != '\0' &&
				    strchr(":.=", p[1]) != NULL) {
					char end[3] = { p[1], ']', '\0' };

					if ((p = strstr(p + 2, end)) == NULL)
						return RE_OK;
					p++;
				}
			}
			if (*p == '\0')
				return RE_OK;
		}
		last = 1;
		if (++size[depth] > RE_POSITIONS)
			return RE_LARGE;
	}
	return RE_OK;
}

static int
set_path(struct loader *l, const struct key *k, void *base, const char *v)
{
	struct rule *r = base;
	char err[256];
	const char *src, *at, *star;
	int rc;

	if (v[0] == '~') {
		for (src = v + 1; is_blank(*src); src++)
			;
		if (*src == '\0') {
			kerr(l, k, "\"%s\" has no regular expression after ~ "
			    "(use e.g. ~^/user/[0-9]+$)", v);
			return -1;
		}
		switch (re_check(src, &at)) {
		case RE_OK:
			break;
		case RE_STACKED:
			kerr(l, k, "\"%s\" repeats a repetition (\"%.2s\"), "
			    "which POSIX leaves undefined; use one (e.g. [0-9]+)",
			    v, at - 1);
			return -1;
		case RE_DEEP:
			kerr(l, k, "\"%s\" nests groups more than %d deep",
			    v, RE_DEPTH);
			return -1;
		case RE_LARGE:
			kerr(l, k, "\"%s\" is too large once its repetitions "
			    "are expanded (over %d characters from \"%.20s\"); "
			    "use smaller counts", v, RE_POSITIONS, at);
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
		if ((r->path = lstrdup(l, src)) == NULL)
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
	if ((r->path = lstrdup(l, v)) == NULL)
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
	size_t n = count_tokens(v), len, i;

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
		for (bad = p; bad < p + len && is_tchar(*bad); bad++)
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

static void
tmpl_free(struct tmpl *t)
{
	size_t i;

	for (i = 0; i < t->nparts; i++)
		free(t->parts[i].text);
	free(t->parts);
	t->parts = NULL;
	t->nparts = 0;
}

/* Checks NAME of {query.NAME}, {header.NAME} or {env.NAME}. */
static const char *
tmpl_bad_name(enum rlg_part_kind kind, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		int ch = (unsigned char)s[i];

		if (kind == RLG_PART_HEADER && !is_tchar(ch))
			return "is not a header name";
		if (kind == RLG_PART_ENV && !is_alnum(ch) && ch != '_')
			return "is not a variable name (letters, digits, _)";
		if (kind == RLG_PART_QUERY && is_blank(ch))
			return "is not a query parameter name";
	}
	return NULL;
}

static int
tmpl_add(struct loader *l, struct tmpl *t, enum rlg_part_kind kind,
    const char *text, size_t len)
{
	struct tmpl_part *p = &t->parts[t->nparts];

	p->kind = kind;
	p->len = len;
	p->text = NULL;
	if (text != NULL && (p->text = strndup(text, len)) == NULL) {
		l->oom = 1;
		return -1;
	}
	t->nparts++;
	return 0;
}

/*
 * Parses s into t (literal runs and {fields}). Returns 0, or -1 with why
 * filled in (or l->oom set). t is left for tmpl_free() either way.
 */
static int
tmpl_parse(struct loader *l, const char *s, struct tmpl *t, char *why,
    size_t whylen)
{
	const char *p, *open, *close, *dot, *bad;
	size_t i, max = 1, flen, nlen;

	for (p = s; *p != '\0'; p++)
		max += *p == '{' ? 2 : 0;
	if ((t->parts = calloc(max, sizeof(*t->parts))) == NULL) {
		l->oom = 1;
		return -1;
	}
	for (p = s; *p != '\0'; p = close + 1) {
		open = p + strcspn(p, "{}");
		if (open > p && tmpl_add(l, t, RLG_PART_LITERAL, p,
		    (size_t)(open - p)) == -1)
			return -1;
		if (*open == '\0')
			break;
		if (*open == '}') {
			snprintf(why, whylen, "has a } with no { before it "
			    "(at character %zu)", (size_t)(open - s) + 1);
			return -1;
		}
		close = open + 1 + strcspn(open + 1, "{}");
		if (*close != '}') {
			snprintf(why, whylen, "has a { that is not closed (at "
			    "character %zu)", (size_t)(open - s) + 1);
			return -1;
		}
		flen = (size_t)(close - open - 1);
		dot = memchr(open + 1, '.', flen);
		nlen = dot != NULL ? (size_t)(dot - open - 1) : flen;
		for (i = 0; i < sizeof(tmpl_fields) / sizeof(tmpl_fields[0]);
		    i++)
			if (strlen(tmpl_fields[i].name) == nlen &&
			    memcmp(tmpl_fields[i].name, open + 1, nlen) == 0)
				break;
		if (i == sizeof(tmpl_fields) / sizeof(tmpl_fields[0])) {
			snprintf(why, whylen, "has {%.*s}, which is not a field "
			    "(use %s)", (int)flen, open + 1, TMPL_FIELDS_USE);
			return -1;
		}
		if (!tmpl_fields[i].needs_name) {
			if (dot != NULL) {
				snprintf(why, whylen, "has {%.*s}, but {%s} "
				    "takes no .NAME", (int)flen, open + 1,
				    tmpl_fields[i].name);
				return -1;
			}
			if (tmpl_add(l, t, tmpl_fields[i].kind, NULL, 0) == -1)
				return -1;
			continue;
		}
		if (dot == NULL || dot + 1 == close) {
			snprintf(why, whylen, "has {%.*s} with no name (use "
			    "{%s.NAME})", (int)flen, open + 1,
			    tmpl_fields[i].name);
			return -1;
		}
		bad = tmpl_bad_name(tmpl_fields[i].kind, dot + 1,
		    (size_t)(close - dot - 1));
		if (bad != NULL) {
			snprintf(why, whylen, "has {%.*s}: \"%.*s\" %s",
			    (int)flen, open + 1, (int)(close - dot - 1),
			    dot + 1, bad);
			return -1;
		}
		if (tmpl_add(l, t, tmpl_fields[i].kind, dot + 1,
		    (size_t)(close - dot - 1)) == -1)
			return -1;
	}
	return 0;
}

/*
 * Two request values side by side ({query.a}{query.b}) can be split more
 * than one way, so two clients could share a key by choice. rule.c escapes
 * the template's literal characters (and '/' before a {path}) inside
 * values, which keeps every other key unambiguous; this is the one shape
 * escaping cannot fix. {x}{path} is fine: a path starts with '/'.
 */
static int
tmpl_ambiguous(const struct tmpl *t, char *why, size_t whylen)
{
	size_t i;

	for (i = 1; i < t->nparts; i++) {
		/* {rule} is constant text, as good as a literal. */
		if (t->parts[i - 1].kind == RLG_PART_LITERAL ||
		    t->parts[i].kind == RLG_PART_LITERAL ||
		    t->parts[i - 1].kind == RLG_PART_RULE ||
		    t->parts[i].kind == RLG_PART_RULE)
			continue;
		if (t->parts[i].kind == RLG_PART_PATH &&
		    t->parts[i - 1].kind != RLG_PART_PATH)
			continue;
		snprintf(why, whylen, "has two fields with nothing between "
		    "them (parts %zu and %zu): put a separator such as ':' "
		    "between them, or different values could make one key",
		    i, i + 1);
		return 1;
	}
	return 0;
}

static int
set_template(struct loader *l, const struct key *k, void *base,
    const char *v)
{
	struct tmpl *field = FIELD(base, k, struct tmpl), t = { 0 };
	char why[512];

	if (tmpl_parse(l, v, &t, why, sizeof(why)) == -1 ||
	    tmpl_ambiguous(&t, why, sizeof(why))) {
		if (!l->oom)
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
	if (tmpl_parse(l, v, &t, why, sizeof(why)) == -1) {
		if (!l->oom)
			kerr(l, k, "\"%s\" %s", v, why);
		tmpl_free(&t);
		return -1;
	}
	r->cost_tmpl = t;
	return 0;
}

/* ---- sections -------------------------------------------------------- */

static int
given(const struct loader *l, enum key_id k)
{
	return l->state[k] == KS_OK || l->state[k] == KS_BAD;
}

int
conf_algorithm_has_burst(enum rlg_algorithm a)
{
	return a == RLG_TOKEN_BUCKET || a == RLG_GCRA ||
	    a == RLG_LEAKY_BUCKET;
}

long long
conf_default_precision(long long window_ms)
{
	long long best = 1, i;

	for (i = 1; i <= window_ms / i; i++) {
		if (window_ms % i != 0)
			continue;
		if (i * 10 <= window_ms && i > best)
			best = i;
		if (window_ms / i * 10 <= window_ms && window_ms / i > best)
			best = window_ms / i;
	}
	return best;
}

long long
conf_gcd(long long a, long long b)
{
	while (b != 0) {
		long long t = a % b;

		a = b;
		b = t;
	}
	return a < 0 ? -a : a;
}

const char *
conf_param_name(enum rlg_param p)
{
	static const char *const names[] = {
		[RLG_PARAM_OK] = "",
		[RLG_PARAM_COST] = "cost",
		[RLG_PARAM_LIMIT] = "limit",
		[RLG_PARAM_WINDOW] = "window",
		[RLG_PARAM_BURST] = "burst",
		[RLG_PARAM_PRECISION] = "precision"
	};

	return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "";
}

/*
 * The scripts keep exact integer arithmetic in Lua numbers (doubles) and
 * bound what they store; they refuse other arguments per request. This is
 * each script's args(), check for check: what it refuses is refused here
 * (at load time, by rlgate-ctl before it writes an override), and nothing
 * else. The products below are exact in __int128; the scripts' are exact
 * too below 2^53 and round to at least 2^53 above, so the comparisons agree.
 */
enum rlg_param
conf_check_params(enum rlg_algorithm alg, long long limit, long long window_ms,
    long long burst, long long precision_ms, long long cost, char *why,
    size_t len)
{
	const char *name = conf_algorithm_name(alg);
	long long max_limit = alg == RLG_SLIDING_LOG ? RLG_MAX_LOG_LIMIT :
	    RLG_MAX_COUNT;
	long long window_us, scale, cap;
	char a[32], b[32], c[48], hint[32];

	if (cost < 1 || cost > RLG_MAX_COUNT) {
		snprintf(why, len, "%lld is out of range (use 1 to %lld)", cost,
		    RLG_MAX_COUNT);
		return RLG_PARAM_COST;
	}
	if (alg == RLG_SLIDING_LOG && limit > max_limit) {
		snprintf(why, len, "%lld is more than sliding_log keeps (one "
		    "entry per admitted unit, at most %lld); use sliding_window "
		    "or gcra for large limits", limit, max_limit);
		return RLG_PARAM_LIMIT;
	}
	if (limit < 1 || limit > max_limit) {
		snprintf(why, len, "%lld is out of range (use 1 to %lld)", limit,
		    max_limit);
		return RLG_PARAM_LIMIT;
	}
	if (window_ms < 1 || window_ms > RLG_MAX_WINDOW_MS) {
		snprintf(why, len, "%lld ms is out of range (use 1ms to %s)",
		    window_ms, conf_format_duration(RLG_MAX_WINDOW_MS, a,
		    sizeof(a)));
		return RLG_PARAM_WINDOW;
	}
	conf_format_duration(window_ms, b, sizeof(b));
	switch (alg) {
	case RLG_FIXED_WINDOW:
	case RLG_SLIDING_LOG:
	case RLG_SLIDING_WINDOW:
		if (alg == RLG_SLIDING_WINDOW) {
			conf_format_duration(conf_default_precision(window_ms),
			    hint, sizeof(hint));
			if (precision_ms == RLG_PARAM_UNSET &&
			    window_ms % 10 != 0) {
				snprintf(why, len, "is not set and the window "
				    "(%s) is not a multiple of 10ms; use a "
				    "divisor of the window, e.g. %s", b, hint);
				return RLG_PARAM_PRECISION;
			}
			if (precision_ms == RLG_PARAM_UNSET)
				precision_ms = window_ms / 10;
			if (precision_ms < 1) {
				snprintf(why, len, "%lld ms is too small; use "
				    "a divisor of the window, e.g. %s",
				    precision_ms, hint);
				return RLG_PARAM_PRECISION;
			}
			conf_format_duration(precision_ms, a, sizeof(a));
			if (precision_ms > window_ms) {
				snprintf(why, len, "%s is longer than the "
				    "window (%s); use a divisor of the window, "
				    "e.g. %s", a, b, hint);
				return RLG_PARAM_PRECISION;
			}
			if (window_ms % precision_ms != 0) {
				snprintf(why, len, "the window (%s) is not a "
				    "whole number of blocks of %s; use a "
				    "divisor of the window, e.g. %s", b, a,
				    hint);
				return RLG_PARAM_PRECISION;
			}
			if (window_ms / precision_ms > RLG_MAX_BLOCKS) {
				snprintf(why, len, "%s makes %lld blocks per "
				    "window; at most %lld are kept (set a "
				    "coarser precision that divides the "
				    "window)", a, window_ms / precision_ms,
				    RLG_MAX_BLOCKS);
				return RLG_PARAM_PRECISION;
			}
		}
		if (cost > limit) {
			snprintf(why, len, "%lld is more than the rule can ever "
			    "admit (limit = %lld), so every request would be "
			    "denied; lower the cost or raise limit", cost, limit);
			return RLG_PARAM_COST;
		}
		return RLG_PARAM_OK;
	case RLG_TOKEN_BUCKET:
	case RLG_GCRA:
	case RLG_LEAKY_BUCKET:
		break;
	default:
		snprintf(why, len, "algorithm %d is unknown", (int)alg);
		return RLG_PARAM_LIMIT;
	}
	cap = burst == RLG_PARAM_UNSET ? limit : burst;
	if (cap < (alg == RLG_LEAKY_BUCKET ? 0 : 1) || cap > RLG_MAX_COUNT) {
		snprintf(why, len, "%lld is out of range (use %d to %lld)", cap,
		    alg == RLG_LEAKY_BUCKET ? 0 : 1, RLG_MAX_COUNT);
		return RLG_PARAM_BURST;
	}
	/* leaky_bucket admits any cost into an empty queue. */
	if (alg != RLG_LEAKY_BUCKET && cost > cap) {
		snprintf(why, len, "%lld is more than the rule can ever admit "
		    "(burst = %lld), so every request would be denied; lower "
		    "the cost or raise burst", cost, cap);
		return RLG_PARAM_COST;
	}
	/* Time per unit is window/limit, kept as an exact fraction with
	 * denominator limit/gcd: what the state holds, in units of
	 * gcd/window_us, must stay exact. */
	window_us = window_ms * 1000;
	scale = window_us / conf_gcd(limit, window_us);
	if (alg == RLG_LEAKY_BUCKET ?
	    (__int128)(cap + cost) * scale >= RLG_EXACT_MAX :
	    (__int128)cap * scale >= RLG_EXACT) {
		if (alg == RLG_LEAKY_BUCKET)
			snprintf(c, sizeof(c), " and a cost of %lld", cost);
		else
			c[0] = '\0';
		snprintf(why, len, "%lld per %s cannot be kept exactly by %s "
		    "with a capacity of %lld%s (the time per unit is too fine "
		    "a fraction: %s * window_us / gcd(limit, window_us) must "
		    "stay below 2^%d); use a limit that divides the window in "
		    "microseconds, e.g. a round number", limit, b, name, cap,
		    c, alg == RLG_LEAKY_BUCKET ? "(burst + cost)" : "burst",
		    alg == RLG_LEAKY_BUCKET ? 52 : 53);
		return RLG_PARAM_LIMIT;
	}
	return RLG_PARAM_OK;
}

/* The line of the key p stands for: where it is set, else the rule's. */
static int
param_line(const struct loader *l, const struct rule *r, enum rlg_param p)
{
	static const enum key_id param_key[] = {
		[RLG_PARAM_COST] = K_COST,
		[RLG_PARAM_LIMIT] = K_LIMIT,
		[RLG_PARAM_WINDOW] = K_WINDOW,
		[RLG_PARAM_BURST] = K_BURST,
		[RLG_PARAM_PRECISION] = K_PRECISION
	};

	if (p == RLG_PARAM_OK || !given(l, param_key[p]))
		return r->line;
	return l->seen[param_key[p]];
}

/* Sets t's escape tables (see struct tmpl) for a rule named rule_name. */
static void
tmpl_escapes(struct tmpl *t, const char *rule_name)
{
	size_t i, j;
	int has_path = 0;

	for (i = 0; i < 256; i++)
		t->esc[i] = i <= ' ' || i == 0x7f || i == '%' || i == '{' ||
		    i == '}';
	for (i = 0; i < t->nparts; i++) {
		const struct tmpl_part *p = &t->parts[i];

		if (p->kind == RLG_PART_PATH)
			has_path = 1;
		if (p->kind == RLG_PART_LITERAL)
			for (j = 0; j < p->len; j++)
				t->esc[(unsigned char)p->text[j]] = 1;
		if (p->kind == RLG_PART_RULE)
			for (j = 0; rule_name[j] != '\0'; j++)
				t->esc[(unsigned char)rule_name[j]] = 1;
	}
	memcpy(t->esc_path, t->esc, sizeof(t->esc));
	/* A {path} is where a raw '/' says "the path starts here": its own
	 * '/' stay as they are even when the literal text has one. */
	t->esc_path['/'] = 0;
	if (has_path)
		t->esc['/'] = 1;
}

/* Checks what needs the whole [rule:NAME] section: required keys and
 * contradictions between keys. */
static void
finish_rule(struct loader *l)
{
	struct rule *r = &l->c->rules[l->rule];
	const char *algo = conf_algorithm_name(r->algorithm);
	char why[512];

	tmpl_escapes(&r->key, r->name);
	tmpl_escapes(&r->cost_tmpl, r->name);

	if (!given(l, K_LIMIT))
		lerr(l, r->line, l->secname, "limit", "is missing: every rule "
		    "needs one (cost units per window, e.g. limit = 100)");
	if (!given(l, K_WINDOW))
		lerr(l, r->line, l->secname, "window", "is missing: every rule "
		    "needs one (e.g. window = 1s)");
	if (l->state[K_ALGORITHM] == KS_BAD)
		return;
	if (given(l, K_BURST) && !conf_algorithm_has_burst(r->algorithm))
		lerr(l, l->seen[K_BURST], l->secname, "burst", "%s has no "
		    "burst (only token_bucket, gcra and leaky_bucket do); "
		    "remove it or change the algorithm", algo);
	if (given(l, K_PRECISION) && r->algorithm != RLG_SLIDING_WINDOW)
		lerr(l, l->seen[K_PRECISION], l->secname, "precision", "%s has "
		    "no precision (only sliding_window does); remove it or "
		    "change the algorithm", algo);
	if (r->algorithm == RLG_SLIDING_WINDOW && !given(l, K_PRECISION) &&
	    l->state[K_WINDOW] == KS_OK)
		r->precision_ms = conf_default_precision(r->window_ms);
	/* What the rule's script would refuse on every request. A cost
	 * template is checked at its worst: the request's cost is refused
	 * above the burst (or limit) before it reaches the script. Without a
	 * window (reported above) only the cost against what the rule holds
	 * is checked: that does not depend on the window, and 1ms in one
	 * block passes every check that does. */
	if (l->state[K_LIMIT] == KS_OK && l->state[K_BURST] != KS_BAD &&
	    l->state[K_PRECISION] != KS_BAD && l->state[K_COST] != KS_BAD) {
		int has_burst = conf_algorithm_has_burst(r->algorithm) &&
		    r->burst > 0, win = l->state[K_WINDOW] == KS_OK;
		long long cost = r->cost_tmpl.nparts > 0 ?
		    conf_capacity(r, r->limit) : r->cost;
		enum rlg_param p;

		p = conf_check_params(r->algorithm, r->limit,
		    win ? r->window_ms : 1,
		    has_burst ? r->burst : RLG_PARAM_UNSET,
		    r->algorithm != RLG_SLIDING_WINDOW ? RLG_PARAM_UNSET :
		    win ? r->precision_ms : 1, cost, why, sizeof(why));
		if (p != RLG_PARAM_OK && (win || p == RLG_PARAM_COST))
			lerr(l, param_line(l, r, p), l->secname,
			    conf_param_name(p), "%s", why);
	}
	/* A process remembers a denial until its retry_after without asking
	 * Redis, so it would not see a limit raised there meanwhile. */
	if (r->deny_cache && r->overrides)
		lerr(l, l->seen[K_DENY_CACHE] > l->seen[K_OVERRIDES] ?
		    l->seen[K_DENY_CACHE] : l->seen[K_OVERRIDES], l->secname,
		    l->seen[K_DENY_CACHE] > l->seen[K_OVERRIDES] ? "deny_cache" :
		    "overrides", "deny_cache = on and overrides = redis do not go "
		    "together: a denial remembered by a process would outlive a "
		    "limit raised in Redis until its retry_after; turn one off");
}

/* Checks that need a whole section of the file, once it is over. */
static void
finish_section(struct loader *l)
{
	if (l->section == S_RULE)
		finish_rule(l);
}

/* [redis] mode against the keys that depend on it. */
static void
finish_redis(struct loader *l)
{
	static const char *const mode_names[] = { "single", "cluster",
	    "sentinel" };
	const struct conf *c = l->c;
	const char *mode = mode_names[c->redis_mode];
	int line = l->seen[K_REDIS_MODE];

	if (l->state[K_REDIS_MODE] == KS_BAD)
		return;
	if (c->redis_mode == RLG_REDIS_SINGLE && l->state[K_ADDRESS] == KS_OK &&
	    count_tokens(c->redis_address) > 1)
		lerr(l, l->seen[K_ADDRESS], "redis", "address", "lists %zu "
		    "addresses, but mode = single takes one (set mode = "
		    "cluster or sentinel for a list)",
		    count_tokens(c->redis_address));
	if (c->redis_mode == RLG_REDIS_SENTINEL &&
	    c->redis_master_name == NULL)
		lerr(l, line, "redis", "mode", "is sentinel but master_name "
		    "is not set; set it to the name the Sentinels monitor "
		    "(e.g. master_name = mymaster)");
	if (c->redis_mode != RLG_REDIS_SENTINEL &&
	    c->redis_master_name != NULL)
		lerr(l, l->seen[K_MASTER_NAME], "redis", "master_name", "is "
		    "only for mode = sentinel (mode is %s)", mode);
	if (c->redis_mode != RLG_REDIS_SENTINEL &&
	    c->redis_sentinel_password != NULL &&
	    l->state[K_SENTINEL_PASSWORD] != KS_BAD)
		lerr(l, l->seen[K_SENTINEL_PASSWORD], "redis",
		    "sentinel_password", "is only for mode = sentinel (mode "
		    "is %s)", mode);
	if (c->redis_mode == RLG_REDIS_CLUSTER && c->redis_database != 0 &&
	    l->state[K_DATABASE] != KS_BAD)
		lerr(l, l->seen[K_DATABASE], "redis", "database", "is %d, but "
		    "Redis Cluster has only database 0; remove it or set 0",
		    c->redis_database);
}

/* Checks between keys of [gateway], [redis], [audit] at the end. */
static void
finish_conf(struct loader *l)
{
	struct conf *c = l->c;

	if (c->audit_batch > c->audit_queue &&
	    l->state[K_BATCH] != KS_BAD && l->state[K_QUEUE] != KS_BAD) {
		int by_batch = given(l, K_BATCH);

		lerr(l, by_batch ? l->seen[K_BATCH] : l->seen[K_QUEUE],
		    "audit", by_batch ? "batch" : "queue", "a batch of %d "
		    "rows cannot come from a queue of %d; use a batch no "
		    "larger than the queue", c->audit_batch, c->audit_queue);
	}
	finish_redis(l);
	if (c->redis_username != NULL && c->redis_password == NULL &&
	    l->state[K_PASSWORD] != KS_BAD)
		lerr(l, l->seen[K_USERNAME], "redis", "username", "is set "
		    "without a password (Redis AUTH takes both); set password "
		    "or remove username");
}

static void
tmpl_set_ip(struct loader *l, struct tmpl *t)
{
	if ((t->parts = calloc(1, sizeof(*t->parts))) == NULL) {
		l->oom = 1;
		return;
	}
	t->parts[0].kind = RLG_PART_IP;
	t->nparts = 1;
}

static int
valid_rule_name(const char *s)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (!is_alnum(s[n]) && s[n] != '_' && s[n] != '.' &&
		    s[n] != '-')
			return 0;
	return n >= 1 && n <= RLG_MAX_RULE_NAME;
}

/* [rule:NAME]: a new rule with its defaults. */
static void
open_rule(struct loader *l, const char *name)
{
	struct conf *c = l->c;
	struct rule *r;
	size_t i;
	int k;

	if (!valid_rule_name(name))
		lerr(l, l->lineno, l->secname, NULL, "\"%s\" is not a rule "
		    "name (use 1 to %d letters, digits, _, . or -)", name,
		    RLG_MAX_RULE_NAME);
	for (i = 0; i < c->nrules; i++)
		if (strcmp(c->rules[i].name, name) == 0)
			lerr(l, l->lineno, l->secname, NULL, "this rule name is "
			    "already used on line %d; give each rule its own "
			    "name", c->rules[i].line);
	if (c->nrules == RLG_MAX_RULES) {
		lerr(l, l->lineno, l->secname, NULL, "too many rules (at most "
		    "%d)", RLG_MAX_RULES);
		return;
	}
	if (c->nrules == l->rulecap) {
		size_t cap = l->rulecap ? l->rulecap * 2 : 8;

		if ((r = reallocarray(c->rules, cap, sizeof(*r))) == NULL) {
			l->oom = 1;
			return;
		}
		c->rules = r;
		l->rulecap = cap;
	}
	/* Counted before anything is allocated: conf_free() then frees
	 * whatever a failure below leaves. */
	r = &c->rules[c->nrules++];
	memset(r, 0, sizeof(*r));
	r->line = l->lineno;
	r->path_kind = RLG_PATH_ANY;
	r->algorithm = RLG_FIXED_WINDOW;
	r->cost = 1;
	r->on_error = RLG_ON_ERROR_INHERIT;
	r->metrics_slot = -1;
	if ((r->name = lstrdup(l, name)) == NULL)
		return;
	tmpl_set_ip(l, &r->key);
	l->rule = c->nrules - 1;
	l->section = S_RULE;
	for (k = 0; k < NKEYS; k++) {
		if (keys[k].section != S_RULE)
			continue;
		l->seen[k] = 0;
		l->state[k] = KS_ABSENT;
	}
}

/* A "[...]" line; s points at the '['. */
static void
section_line(struct loader *l, char *s)
{
	char *end, *rest, *name;
	int i;

	finish_section(l);
	l->section = S_SKIP;
	if ((end = strchr(s, ']')) == NULL) {
		lerr(l, l->lineno, NULL, NULL, "\"%s\" has no closing ] (use "
		    SECTIONS_USE ")", s);
		return;
	}
	rest = lskip(end + 1);
	*end = '\0';
	name = trim(s + 1);
	snprintf(l->secname, sizeof(l->secname), "%s", name);
	if (*rest != '\0' && *rest != ';' && *rest != '#') {
		lerr(l, l->lineno, l->secname, NULL, "unexpected \"%s\" after "
		    "the ] (only a ; comment may follow)", rest);
		return;
	}
	for (i = S_GATEWAY; i <= S_CGI; i++) {
		if (strcmp(name, section_names[i]) == 0) {
			l->section = (enum section)i;
			return;
		}
	}
	if (strncmp(name, "rule:", 5) == 0)
		open_rule(l, name + 5);
	else if (strcmp(name, "rule") == 0)
		lerr(l, l->lineno, l->secname, NULL, "a rule needs a name: "
		    "[rule:NAME]");
	else
		lerr(l, l->lineno, l->secname, NULL, "unknown section (use "
		    SECTIONS_USE ")");
}

/* ---- inih glue ---------------------------------------------------- */

/*
 * inih reads through this, one physical line per call, so l->lineno is
 * the line its handler is called for. inih sees only "key = value" lines,
 * left-trimmed: sections are followed here because inih cuts section names
 * at 49 characters and says nothing when one starts, and without leading
 * blanks inih's multi-line values (an indented line continues the previous
 * key) cannot happen. Everything else reaches inih as an empty line.
 */
static char *
reader(char *str, int num, void *stream)
{
	struct loader *l = stream;
	size_t max = (size_t)num - 1, n, i;
	ssize_t got;
	char *line, *s;

	if (max > RLG_MAX_LINE)
		max = RLG_MAX_LINE;
	if (l->too_many || l->oom)
		return NULL;
	if ((got = getline(&l->buf, &l->bufsz, l->fp)) == -1) {
		char ebuf[128];

		if (ferror(l->fp))
			lerr(l, l->lineno + 1, NULL, NULL, "cannot read: %s",
			    strerror_r(errno, ebuf, sizeof(ebuf)));
		return NULL;
	}
	l->lineno++;
	line = l->buf;
	n = (size_t)got;
	if (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	if (n > 0 && line[n - 1] == '\r')
		line[--n] = '\0';
	if (l->lineno == 1 && n >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
		line += 3;
		n -= 3;
	}
	str[0] = '\0';
	if (n > max) {
		/* Keys after a lost section header would land in the
		 * section before it. */
		if (*lskip(line) == '[') {
			finish_section(l);
			l->section = S_SKIP;
		}
		lerr(l, l->lineno, NULL, NULL, "line is longer than %zu "
		    "characters (shorten it)", max);
		return str;
	}
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)line[i];

		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			lerr(l, l->lineno, NULL, NULL, "control character "
			    "0x%02x at column %zu (only text and tabs may "
			    "appear)", ch, i + 1);
			return str;
		}
	}
	s = lskip(line);
	if (*s == '\0' || *s == ';' || *s == '#')
		return str;
	if (*s == '[') {
		section_line(l, s);
		return str;
	}
	/* As inih finds it: the first = or :, unless a " ;" comes first. */
	for (i = 0; s[i] != '\0' && s[i] != '=' && s[i] != ':'; i++)
		if (s[i] == ';' && i > 0 && is_blank(s[i - 1]))
			break;
	if (s[i] != '=' && s[i] != ':') {
		lerr(l, l->lineno, NULL, NULL, "\"%s\" is not \"key = value\"%s",
		    s, s > line ? " (values cannot continue on an indented "
		    "line)" : "");
		return str;
	}
	memcpy(str, s, strlen(s) + 1);
	return str;
}

static int
key_lookup(enum section sec, const char *name)
{
	int k;

	for (k = 0; k < NKEYS; k++)
		if (keys[k].section == sec && strcmp(keys[k].name, name) == 0)
			return k;
	return -1;
}

static void
unknown_key(struct loader *l, const char *name)
{
	char use[512];
	size_t len = 0;
	int k;

	use[0] = '\0';
	for (k = 0; k < NKEYS; k++)
		if (keys[k].section == l->section)
			len += (size_t)snprintf(use + len, sizeof(use) - len,
			    "%s%s", len ? ", " : "", keys[k].name);
	lerr(l, l->lineno, l->secname, name, "unknown key (the keys of "
	    "[%s] are %s)", l->section == S_RULE ? "rule:NAME" : l->secname,
	    use);
}

/* inih's section argument is ignored: see reader(). */
static int
handler(void *user, const char *section, const char *name, const char *value)
{
	struct loader *l = user;
	const struct key *key;
	void *base;
	int k;

	(void)section;
	if (l->section == S_SKIP)
		return 1;
	if (*name == '\0') {
		lerr(l, l->lineno, NULL, NULL, "a value with no key before the "
		    "= (use key = value)");
		return 1;
	}
	if (l->section == S_NONE) {
		lerr(l, l->lineno, NULL, name, "is set before any section (put "
		    "it under " SECTIONS_USE ")");
		return 1;
	}
	if ((k = key_lookup(l->section, name)) == -1) {
		unknown_key(l, name);
		return 1;
	}
	key = &keys[k];
	if (l->seen[k] != 0) {
		lerr(l, l->lineno, l->secname, name, "is set twice (first on "
		    "line %d); keep one", l->seen[k]);
		/* Given, then, but which value the user meant is unknown:
		 * neither "missing" nor checks against other keys apply. */
		l->state[k] = KS_BAD;
		return 1;
	}
	l->seen[k] = l->lineno;
	base = l->section == S_RULE ? (void *)&l->c->rules[l->rule] :
	    (void *)l->c;
	if (*value == '\0') {
		/* An empty value leaves the default, except where empty is
		 * itself the setting ([audit] database = : no audit). */
		if (key->empty_clears) {
			free(*FIELD(base, key, char *));
			*FIELD(base, key, char *) = NULL;
		}
		l->state[k] = KS_EMPTY;
		return 1;
	}
	l->state[k] = key->set(l, key, base, value) == 0 ? KS_OK : KS_BAD;
	return 1;
}

/* ---- the interface ------------------------------------------------ */

static atomic_ulong	conf_ids;

static struct conf *
conf_new(struct loader *l, const char *path)
{
	struct conf *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		l->oom = 1;
		return NULL;
	}
	/* Lets holders tell configurations apart without comparing them. */
	c->id = atomic_fetch_add(&conf_ids, 1) + 1;
	c->engine = RLG_ENGINE_EVENTS;
	c->workers = 0;		/* the engine's default (threads_of() in main.c) */
	c->deny_status = 429;
	c->headers = RLG_HEADERS_IETF;
	c->log_level = RLG_LOG_INFO;
	c->redis_database = 0;
	c->redis_connect_timeout_ms = 200;
	c->redis_timeout_ms = 100;
	c->on_error = RLG_ON_ERROR_ALLOW;
	c->audit_flush_interval_ms = RLG_AUDIT_FLUSH_MS;
	c->audit_batch = RLG_AUDIT_BATCH;
	c->audit_queue = RLG_AUDIT_QUEUE;
	c->audit_unmatched = 1;
	c->path = lstrdup(l, path);
	c->redis_address = lstrdup(l, "127.0.0.1:6379");
	c->key_prefix = lstrdup(l, "rl:");
	c->audit_database = lstrdup(l, "/var/lib/rlgate/audit.db");
	/* status_allow: loopback only, until the file says otherwise. */
	if ((c->status_allow = calloc(2, sizeof(*c->status_allow))) == NULL) {
		l->oom = 1;
		return c;
	}
	c->status_allow[0].family = AF_INET;
	c->status_allow[0].bits = 32;
	inet_pton(AF_INET, "127.0.0.1", c->status_allow[0].addr);
	c->status_allow[1].family = AF_INET6;
	c->status_allow[1].bits = 128;
	inet_pton(AF_INET6, "::1", c->status_allow[1].addr);
	c->nstatus_allow = 2;
	return c;
}

static void
loader_free(struct loader *l)
{
	size_t i;

	for (i = 0; i < l->nerrs; i++)
		free(l->errs[i].text);
	free(l->errs);
	free(l->buf);
	if (l->fp != NULL)
		fclose(l->fp);
}

struct conf *
conf_load(const char *path, char **errors)
{
	struct loader l;
	struct stat st;
	char ebuf[128];
	int rc;

	memset(&l, 0, sizeof(l));
	l.file = path;
	*errors = NULL;
	if ((l.c = conf_new(&l, path)) == NULL || l.oom)
		goto fail;
	if ((l.fp = fopen(path, "re")) == NULL) {
		lerr(&l, 0, NULL, NULL, "cannot open: %s",
		    strerror_r(errno, ebuf, sizeof(ebuf)));
		goto fail;
	}
	if (fstat(fileno(l.fp), &st) == -1) {
		lerr(&l, 0, NULL, NULL, "cannot read: %s",
		    strerror_r(errno, ebuf, sizeof(ebuf)));
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		lerr(&l, 0, NULL, NULL, "cannot read: it is a directory");
		goto fail;
	}
	l.mode = st.st_mode;
	/* The handler never fails (it collects errors in l), and the reader
	 * hands inih only lines it can parse: inih should not fail either. */
	rc = ini_parse_stream(reader, &l, handler, &l);
	if (rc > 0)
		lerr(&l, rc, NULL, NULL, "libinih cannot parse this line");
	else if (rc < 0)
		l.oom = 1;
	if (!l.too_many && !l.oom) {
		finish_section(&l);
		finish_conf(&l);
	}
	if (l.nerrs > 0 || l.too_many || l.oom)
		goto fail;
	loader_free(&l);
	return l.c;
fail:
	*errors = join_errors(&l);
	loader_free(&l);
	conf_free(l.c);
	return NULL;
}

static void
rule_free(struct rule *r)
{
	char **m;

	free(r->name);
	if (r->path_kind == RLG_PATH_REGEX)
		regfree(&r->path_re);
	free(r->path);
	for (m = r->methods; m != NULL && *m != NULL; m++)
		free(*m);
	free(r->methods);
	free(r->host);
	tmpl_free(&r->key);
	tmpl_free(&r->cost_tmpl);
}

void
conf_free(struct conf *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->nrules; i++)
		rule_free(&c->rules[i]);
	free(c->rules);
	free(c->path);
	free(c->listen);
	free(c->trusted);
	free(c->status_path);
	free(c->status_allow);
	free(c->redis_address);
	free(c->redis_master_name);
	if (c->redis_sentinel_password != NULL)
		explicit_bzero(c->redis_sentinel_password,
		    strlen(c->redis_sentinel_password));
	free(c->redis_sentinel_password);
	free(c->redis_username);
	if (c->redis_password != NULL)
		explicit_bzero(c->redis_password, strlen(c->redis_password));
	free(c->redis_password);
	free(c->key_prefix);
	free(c->audit_database);
	free(c->cgi_upstream);
	free(c);
}

static int
prefix_match(const unsigned char *net, const unsigned char *addr, int bits)
{
	int whole = bits / 8, rest = bits % 8;
	unsigned char mask;

	if (memcmp(net, addr, (size_t)whole) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (unsigned char)(0xff << (8 - rest));
	return (net[whole] & mask) == (addr[whole] & mask);
}

int
conf_in_cidrs(const struct cidr *list, size_t n, int family,
    const unsigned char *addr)
{
	static const unsigned char v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};
	const unsigned char *v4 = NULL;
	size_t i;

	if (list == NULL || addr == NULL)
		return 0;
	/* A dual-stack socket shows IPv4 peers as ::ffff:a.b.c.d; the
	 * operator wrote a.b.c.d/n. */
	if (family == AF_INET)
		v4 = addr;
	else if (family == AF_INET6 && memcmp(addr, v4mapped, 12) == 0)
		v4 = addr + 12;
	for (i = 0; i < n; i++) {
		const struct cidr *c = &list[i];

		if (c->family == AF_INET && v4 != NULL &&
		    prefix_match(c->addr, v4, c->bits))
			return 1;
		if (c->family == AF_INET6 && family == AF_INET6 &&
		    prefix_match(c->addr, addr, c->bits))
			return 1;
	}
	return 0;
}

int
conf_trusted(const struct conf *c, int family, const unsigned char *addr)
{
	if (c == NULL)
		return 0;
	return conf_in_cidrs(c->trusted, c->ntrusted, family, addr);
}

const char *
conf_split_address(const char *addr, char *host, size_t hostlen)
{
	const char *colon = strrchr(addr, ':');
	int bracket = addr[0] == '[';
	size_t n;

	if (colon == NULL)
		return NULL;
	n = (size_t)(colon - addr) - (bracket ? 2 : 0);
	if ((size_t)(colon - addr) < (bracket ? 2u : 0u) || n >= hostlen)
		return NULL;
	memcpy(host, addr + bracket, n);
	host[n] = '\0';
	return colon + 1;
}
