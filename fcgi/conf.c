/*
 * conf: the file format, one table of typed keys, read with libinih into an
 * immutable struct conf, finding at load time everything a user can get
 * wrong in it. The parsers that are their own subject live beside it:
 * numbers, durations and algorithm parameters (conf_values.c), templates
 * (tmpl.c), addresses and CIDRs (netaddr.c), the path-regex check
 * (recheck.c). Form only: nothing is opened or connected here (the audit
 * module creates its database, the limiter dials Redis).
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
#include <unistd.h>

#include <ini.h>

#include "ascii.h"
#include "conf.h"
#include "recheck.h"

/*
 * Debian's libinih reads a line in one fgets() of INI_MAX_LINE bytes and
 * silently hands the rest to the next call as if it were a new line. The
 * reader below refuses longer lines before inih can split them.
 */
_Static_assert(RLG_MAX_LINE < INI_MAX_LINE,
    "libinih must be able to read a whole accepted line at once");

#define MAX_ERRORS	100		/* then stop: the rest is likely noise */

#define SECTIONS_USE	"[gateway], [redis], [audit], [cgi] or [rule:NAME]"
#define ADDRESS_USE	"(use host:port, [IPv6]:port or unix:/path)"

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
	K_ON_FULL, K_KEEP,
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
	char		*warnings;	/* becomes c->warnings */
	size_t		 warnlen;
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
static int	set_engine(struct loader *, const struct key *, void *,
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
	    0, 0, on_errors, "a queue-full policy", 0 },
	[K_KEEP] = { S_AUDIT, "keep", set_duration, C(audit_keep_ms),
	    RLG_MS_HOUR, 3650 * RLG_MS_DAY, NULL, NULL, 0 },

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

#define FIELD(base, k, type)	((type *)(void *)((char *)(base) + (k)->off))

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

/*
 * Records the warning "FILE:LINE: [sec] key: message" for c->warnings:
 * the file loads, but the user likely meant something else.
 */
static void __attribute__((format(printf, 5, 6)))
lwarn(struct loader *l, int line, const char *sec, const char *key,
    const char *fmt, ...)
{
	char msg[1024], *text, *more;
	size_t len;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (asprintf(&text, "%s:%d: [%s] %s: %s\n", l->file, line, sec, key,
	    msg) == -1) {
		l->oom = 1;
		return;
	}
	len = strlen(text);
	if ((more = realloc(l->warnings, l->warnlen + len + 1)) == NULL) {
		free(text);
		l->oom = 1;
		return;
	}
	memcpy(more + l->warnlen, text, len + 1);
	l->warnings = more;
	l->warnlen += len;
	free(text);
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

static char *
lskip(char *s)
{
	while (ascii_is_blank(*s))
		s++;
	return s;
}

static char *
trim(char *s)
{
	char *e;

	s = lskip(s);
	e = s + strlen(s);
	while (e > s && ascii_is_blank(e[-1]))
		*--e = '\0';
	return s;
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
		lwarn(l, l->lineno, l->secname, k->name, "the key is gone: "
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

/* ---- sections -------------------------------------------------------- */

static int
given(const struct loader *l, enum key_id k)
{
	return l->state[k] == KS_OK || l->state[k] == KS_BAD;
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

/*
 * What is wrong with an [audit] database name that holds strftime fields,
 * or NULL: only %Y %m %d %H (and %%), in the file's name, each finer field
 * with every coarser one, so that a name never comes back.
 */
static const char *
dated_name_problem(const char *path)
{
	const char *p, *base = strrchr(path, '/');
	int y = 0, m = 0, d = 0, h = 0;

	for (p = path; *p != '\0'; p++) {
		if (*p != '%')
			continue;
		if (base != NULL && p < base)
			return "a date goes in the file's name, not in its "
			    "directory";
		switch (*++p) {
		case 'Y': y = 1; break;
		case 'm': m = 1; break;
		case 'd': d = 1; break;
		case 'H': h = 1; break;
		case '%': break;
		default:
			return "a dated name may hold %Y, %m, %d and %H (and "
			    "%% for a %), nothing else";
		}
	}
	if ((m && !y) || (d && !m) || (h && !d))
		return "each date field needs the ones before it: %Y, %m, "
		    "%d, %H (e.g. audit-%Y-%m-%d.db), or names would come back";
	return NULL;
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

/* Checks between keys of [gateway], [redis], [audit], and that there is a
 * rule, at the end. */
static void
finish_conf(struct loader *l)
{
	struct conf *c = l->c;
	const char *why;
	long cpus;

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
	/* Each loop is a thread that never sleeps while there is work: more
	 * of them than CPUs only take turns on the same CPUs. */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (l->state[K_WORKERS] == KS_OK && cpus > 0 && c->workers > cpus)
		lwarn(l, l->seen[K_WORKERS], "gateway", "workers", "%d event "
		    "loops on %ld CPUs: more loops than CPUs only add context "
		    "switches (one loop serves any number of connections); "
		    "leave workers empty for one per CPU, the default",
		    c->workers, cpus);
	if (c->audit_database != NULL &&
	    (why = dated_name_problem(c->audit_database)) != NULL)
		lerr(l, l->seen[K_AUDIT_DATABASE], "audit", "database",
		    "\"%s\": %s", c->audit_database, why);
	if (c->audit_keep_ms > 0 && l->state[K_AUDIT_DATABASE] != KS_BAD &&
	    (c->audit_database == NULL ||
	    strchr(c->audit_database, '%') == NULL))
		lerr(l, l->seen[K_KEEP], "audit", "keep", "deletes dated "
		    "files only: put a date in [audit] database (e.g. "
		    "audit-%%Y-%%m-%%d.db, a file a day), or remove keep");
	/* A rule with errors still counts here: its own error says what
	 * is wrong, and "no rule" would be noise beside it. */
	if (c->nrules == 0)
		lerr(l, 0, NULL, NULL, "no [rule:NAME] section: rlgate would "
		    "limit nothing; add a rule (dry_run = yes records "
		    "without limiting)");
}

static int
valid_rule_name(const char *s)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (!ascii_is_alnum(s[n]) && s[n] != '_' && s[n] != '.' &&
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
	if (tmpl_init_ip(&r->key) == -1)
		l->oom = 1;
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
		if (s[i] == ';' && i > 0 && ascii_is_blank(s[i - 1]))
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
		/* engine is gone: known, to say so, but not suggested. */
		if (keys[k].section == l->section && k != K_ENGINE)
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
	c->workers = 0;		/* one loop per CPU (main.c) */
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
	c->audit_on_full = RLG_ON_ERROR_ALLOW;
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
	free(l->warnings);
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
	l.c->warnings = l.warnings;
	l.warnings = NULL;
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
	free(c->warnings);
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

int
conf_trusted(const struct conf *c, int family, const unsigned char *addr)
{
	if (c == NULL)
		return 0;
	return netaddr_in_cidrs(c->trusted, c->ntrusted, family, addr);
}
