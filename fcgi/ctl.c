/*
 * rlgate-ctl: the operator's view of the limit state in Redis, through the
 * gateway's own configuration and Redis layer (a single server, a
 * cluster's masters, or the master Sentinel names): peek at a key without
 * consuming anything, reset it, list a rule's keys (on every master), set
 * a key's override (its own limit, read by the library in the same call);
 * list the versions of the Lua library loaded and unload unused ones (on
 * every master). It deletes state and writes overrides only. peek asks the
 * library's read-only LIB_peek (FCALL_RO), which runs each algorithm's own
 * check: how an algorithm's state is read lives in lua/ alone. It never
 * runs a function that counts a request, and never decides one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "conf.h"
#include "limiter.h"
#include "redis.h"
#include "ctl_redis.h"
#include "redis_io.h"
#include "ctl_versions.h"
#include "rule.h"
#include "scripts.h"
#include "version.h"	/* RLG_VERSION, made from debian/changelog */

/* Exit statuses, as rlgate-ctl(8) documents them. */
#define EXIT_DONE	0	/* the command did what it says */
#define EXIT_USAGE	1	/* bad command line, configuration or rule */
#define EXIT_REDIS	2	/* Redis cannot be reached or failed */

static const char *progname = "rlgate-ctl";

static void
usage(FILE *f)
{
	fprintf(f, "usage: rlgate-ctl [-c file] peek RULE KEY\n"
	    "       rlgate-ctl [-c file] reset RULE KEY\n"
	    "       rlgate-ctl [-c file] list RULE [PATTERN]\n"
	    "       rlgate-ctl [-c file] override RULE KEY [limit=N] [window=DUR] "
	    "[burst=N] [precision=DUR]\n"
	    "       rlgate-ctl [-c file] override RULE KEY unlimited | clear\n"
	    "       rlgate-ctl [-c file] versions | load | prune\n"
	    "       rlgate-ctl [-c file] unload LIBRARY\n"
	    "       rlgate-ctl -V | -h\n"
	    "  -c file  configuration (default $RLGATE_CONF, then %s)\n"
	    "  peek     show a key's state, remaining and reset, consuming "
	    "nothing\n"
	    "  reset    delete a key's state: its next request starts afresh\n"
	    "  list     the keys of a rule in Redis (SCAN), matching a glob "
	    "PATTERN\n"
	    "  override show, set (replacing), or clear a key's own limit "
	    "(overrides = redis)\n"
	    "  versions the rlgate Lua libraries loaded, on how many "
	    "masters; this build's marked\n"
	    "  load     load this build's library on every master (never "
	    "replacing one)\n"
	    "  unload   delete one library (not this build's) from every "
	    "master\n"
	    "  prune    delete every library but this build's from every "
	    "master\n"
	    "exit status: 0 done, 1 bad usage, configuration or rule, "
	    "2 Redis unreachable or failing\n", RLG_DEFAULT_CONF);
}

/* ---- overrides ------------------------------------------------------- */

/*
 * The fields of an override hash that rlgate-ctl sets: their names on the
 * command line and in the hash, and whether each is a duration (in ms in
 * the hash). What the library makes of them it says itself (LIB_override):
 * rlgate-ctl checks nothing of the library's rules twice.
 */
enum { OV_LIMIT, OV_WINDOW, OV_BURST, OV_PRECISION, OV_COUNT };

struct override {
	long long	 v[OV_COUNT];	/* -1: not given */
};

static const struct {
	const char	*arg, *hash;
	int		 duration;
} ov_field[OV_COUNT] = {
	[OV_LIMIT] = { "limit", "limit", 0 },
	[OV_WINDOW] = { "window", "window_ms", 1 },
	[OV_BURST] = { "burst", "burst", 0 },
	[OV_PRECISION] = { "precision", "precision_ms", 1 },
};

/* The rule's COST LIMIT WINDOW_MS BURST PRECISION_MS as the gateway sends
 * them (burst and precision "" when unset; a cost template's cost 1). */
static void
rule_args(const struct rule *ru, char num[5][24])
{
	long long cost = ru->cost_tmpl.nparts == 0 ? ru->cost : 1;

	snprintf(num[0], sizeof(num[0]), "%lld", cost);
	snprintf(num[1], sizeof(num[1]), "%lld", ru->limit);
	snprintf(num[2], sizeof(num[2]), "%lld", ru->window_ms);
	snprintf(num[3], sizeof(num[3]), ru->burst > 0 ? "%lld" : "",
	    ru->burst);
	snprintf(num[4], sizeof(num[4]), ru->precision_ms > 0 ? "%lld" : "",
	    ru->precision_ms);
}

/*
 * Asks the library what a decision of ru makes of an override
 * (FCALL_RO LIB_override): the hash at okey, or, okey NULL, one holding
 * o's fields. Returns its code (enum rlg_override), with *eff the
 * parameters a decision would use and why (whylen bytes) its sentence when
 * it is ignored; or -1 after complaining (Redis failed or answered
 * otherwise).
 */
static int
ask_override(redisContext *rc, const struct conf *c, const struct rule *ru,
    const char *okey, const struct override *o, struct rule *eff, char *why,
    size_t whylen)
{
	char fn[64], num[5][24], ov[OV_COUNT][24];
	const char *argv[4 + 6 + OV_COUNT + 1];
	long long f[RLG_OVERRIDE_REPLY_FIELDS];
	redisReply *r, **el;
	int argc = 0, i, code;

	snprintf(fn, sizeof(fn), "%s_override", rlg_library_name);
	rule_args(ru, num);
	argv[argc++] = "FCALL_RO";
	argv[argc++] = fn;
	argv[argc++] = okey != NULL ? "1" : "0";
	if (okey != NULL)
		argv[argc++] = okey;
	argv[argc++] = conf_algorithm_name(ru->algorithm);
	for (i = 0; i < 5; i++)
		argv[argc++] = num[i];
	for (i = 0; okey == NULL && i < OV_COUNT; i++) {
		snprintf(ov[i], sizeof(ov[i]), o->v[i] == -1 ? "" : "%lld",
		    o->v[i]);
		argv[argc++] = ov[i];
	}
	if ((r = ctl_fcall_ro(rc, c, argc, argv)) == NULL)
		return -1;
	el = r->element;
	for (i = 0; r->type == REDIS_REPLY_ARRAY &&
	    r->elements == RLG_OVERRIDE_REPLY_FIELDS &&
	    i < RLG_OVERRIDE_REPLY_FIELDS; i++) {
		if (el[i]->type != (i == RLG_OVERRIDE_REPLY_WHY ?
		    REDIS_REPLY_STRING : REDIS_REPLY_INTEGER))
			break;
		f[i] = el[i]->integer;
	}
	if (i != RLG_OVERRIDE_REPLY_FIELDS) {
		ctl_complain("redis %s: %s: unexpected reply (is this build's "
		    "library there?)", c->redis_address, fn);
		freeReplyObject(r);
		return -1;
	}
	*eff = *ru;
	eff->limit = f[RLG_OVERRIDE_REPLY_LIMIT];
	eff->window_ms = f[RLG_OVERRIDE_REPLY_WINDOW_MS];
	eff->burst = f[RLG_OVERRIDE_REPLY_BURST];
	eff->precision_ms = f[RLG_OVERRIDE_REPLY_PRECISION_MS];
	snprintf(why, whylen, "%s", el[RLG_OVERRIDE_REPLY_WHY]->str);
	code = (int)f[RLG_OVERRIDE_REPLY_OVERRIDE];
	freeReplyObject(r);
	return code;
}

/* "limit 200 per 1000 ms, burst 300, precision 100 ms" for r. */
static void
describe_limit(const struct rule *r, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%lld per %lld ms", r->limit, r->window_ms);

	if (conf_algorithm_has_burst(r->algorithm) && r->burst > 0)
		n += snprintf(buf + n, len - (size_t)n, ", burst %lld", r->burst);
	if (r->algorithm == RLG_SLIDING_WINDOW)
		snprintf(buf + n, len - (size_t)n, ", precision %lld ms",
		    r->precision_ms);
}

/* Parses one NAME=VALUE of the command line into o. Returns 0 or -1. */
static int
parse_assignment(const struct rule *ru, const char *arg, struct override *o)
{
	const char *eq = strchr(arg, '='), *v, *e;
	long long n;
	size_t len;
	int f;

	if (eq == NULL) {
		ctl_complain("\"%s\": use limit=N, window=DURATION, burst=N, "
		    "precision=DURATION, unlimited or clear", arg);
		return -1;
	}
	len = (size_t)(eq - arg);
	v = eq + 1;
	for (f = 0; f < OV_COUNT; f++)
		if (strlen(ov_field[f].arg) == len &&
		    strncmp(arg, ov_field[f].arg, len) == 0)
			break;
	if (f == OV_COUNT) {
		ctl_complain("\"%.*s\" is not an override (use limit, window, burst "
		    "or precision)", (int)len, arg);
		return -1;
	}
	if (o->v[f] != -1) {
		ctl_complain("%.*s is given twice", (int)len, arg);
		return -1;
	}
	if (f == OV_BURST && !conf_algorithm_has_burst(ru->algorithm)) {
		ctl_complain("rule %s uses %s, which has no burst (only token_bucket, "
		    "gcra and leaky_bucket do)", ru->name,
		    conf_algorithm_name(ru->algorithm));
		return -1;
	}
	if (f == OV_PRECISION && ru->algorithm != RLG_SLIDING_WINDOW) {
		ctl_complain("rule %s uses %s, which has no precision (only "
		    "sliding_window does)", ru->name,
		    conf_algorithm_name(ru->algorithm));
		return -1;
	}
	if (ov_field[f].duration ? conf_parse_duration(v, &n, &e) == -1 :
	    conf_parse_int(v, 1, RLG_MAX_COUNT, &n, &e) == -1) {
		if (ov_field[f].duration)
			ctl_complain("%s: \"%s\" %s", arg, v, e);
		else
			ctl_complain("%s: \"%s\" %s (use a whole number, 1 to "
			    "%lld)", arg, v, e, RLG_MAX_COUNT);
		return -1;
	}
	o->v[f] = n;
	return 0;
}

/*
 * peek: the library's LIB_peek (FCALL_RO) with the rule's arguments, as
 * the gateway sends them; it runs the algorithm's own check on the state
 * and the override, at Redis TIME, and writes nothing. Printed here.
 */
static int
cmd_peek(redisContext *rc, const struct conf *c, const struct rule *ru,
    const char *key)
{
	char rkey[RLG_REDIS_KEY_SIZE], okey[RLG_REDIS_KEY_SIZE], fn[64];
	char num[5][24], lim[96], own[96];
	const char *argv[12];
	long long cost = ru->cost_tmpl.nparts == 0 ? ru->cost : 1;
	long long f[RLG_PEEK_FIELDS];
	const char *why, *state;
	struct rule eff = *ru;
	redisReply *r, **el;
	int argc = 0, i;

	limiter_key(c, ru, key, strlen(key), 0, rkey, sizeof(rkey));
	limiter_key(c, ru, key, strlen(key), 1, okey, sizeof(okey));
	snprintf(fn, sizeof(fn), "%s_peek", rlg_library_name);
	rule_args(ru, num);
	argv[argc++] = "FCALL_RO";
	argv[argc++] = fn;
	argv[argc++] = ru->overrides ? "2" : "1";
	argv[argc++] = rkey;
	if (ru->overrides)
		argv[argc++] = okey;
	argv[argc++] = conf_algorithm_name(ru->algorithm);
	argv[argc++] = "";		/* NOW_US: Redis TIME */
	for (i = 0; i < 5; i++)
		argv[argc++] = num[i];
	if ((r = ctl_fcall_ro(rc, c, argc, argv)) == NULL)
		return EXIT_REDIS;
	el = r->element;
	for (i = 0; r->type == REDIS_REPLY_ARRAY &&
	    r->elements == RLG_PEEK_FIELDS && i < RLG_PEEK_FIELDS; i++) {
		if (el[i]->type != (i == RLG_PEEK_WHY || i == RLG_PEEK_STATE ?
		    REDIS_REPLY_STRING : REDIS_REPLY_INTEGER))
			break;
		f[i] = el[i]->integer;
	}
	if (i != RLG_PEEK_FIELDS) {
		ctl_complain("redis %s: %s: unexpected reply (is this build's library "
		    "there?)", c->redis_address, fn);
		freeReplyObject(r);
		return EXIT_REDIS;
	}
	why = el[RLG_PEEK_WHY]->str;
	state = el[RLG_PEEK_STATE]->str;
	describe_limit(ru, own, sizeof(own));
	if (f[RLG_PEEK_OVERRIDE] == RLG_OVERRIDE_APPLIED) {
		eff.limit = f[RLG_PEEK_LIMIT];
		eff.window_ms = f[RLG_PEEK_WINDOW_MS];
		eff.burst = f[RLG_PEEK_BURST];
		eff.precision_ms = f[RLG_PEEK_PRECISION_MS];
	}
	describe_limit(&eff, lim, sizeof(lim));
	printf("rule            %s\n", ru->name);
	printf("key             %s\n", key);
	printf("redis_key       %s\n", rkey);
	printf("algorithm       %s\n", conf_algorithm_name(ru->algorithm));
	printf("limit           %s\n", lim);
	if (ru->overrides) {
		if (f[RLG_PEEK_OVERRIDE] == RLG_OVERRIDE_NONE)
			printf("override        none\n");
		else if (f[RLG_PEEK_OVERRIDE] == RLG_OVERRIDE_APPLIED)
			printf("override        applied (the rule: %s)\n", own);
		else if (f[RLG_PEEK_OVERRIDE] == RLG_OVERRIDE_UNLIMITED)
			printf("override        unlimited: admitted, nothing "
			    "counted\n");
		else
			printf("override        ignored: %s\n", why);
	}
	printf("now_us          %lld\n", f[RLG_PEEK_NOW_US]);
	printf("state           %s\n", state);
	printf("ttl_ms          %lld\n", f[RLG_PEEK_TTL_MS]);
	if (f[RLG_PEEK_OVERRIDE] == RLG_OVERRIDE_UNLIMITED)
		printf("remaining       unlimited\n");
	else
		printf("remaining       %lld\n", f[RLG_PEEK_REMAINING]);
	printf("reset_ms        %lld\n", f[RLG_PEEK_RESET_MS]);
	printf("retry_after_ms  %lld\n", f[RLG_PEEK_RETRY_AFTER_MS]);
	printf("cost            %lld\n", cost);
	if (ru->algorithm == RLG_LEAKY_BUCKET)
		printf("delay_ms        %lld\n", f[RLG_PEEK_DELAY_MS]);
	freeReplyObject(r);
	return EXIT_DONE;
}

static int
cmd_reset(redisContext *rc, const struct conf *c, const struct rule *ru,
    const char *key)
{
	char rkey[RLG_REDIS_KEY_SIZE];
	const char *argv[2] = { "DEL", rkey };
	redisReply *r;

	limiter_key(c, ru, key, strlen(key), 0, rkey, sizeof(rkey));
	if ((r = ctl_call(rc, c, 2, argv)) == NULL)
		return EXIT_REDIS;
	if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
		printf("deleted %s\n", rkey);
	else
		printf("%s: no state, nothing deleted\n", rkey);
	freeReplyObject(r);
	return EXIT_DONE;
}

/* override RULE KEY: what applies to the key, as the library reads it. */
static int
show_override(redisContext *rc, const struct conf *c, const struct rule *ru,
    const char *okey)
{
	char why[512], was[96], now[96];
	struct rule eff;
	int st;

	if ((st = ask_override(rc, c, ru, okey, NULL, &eff, why,
	    sizeof(why))) == -1)
		return EXIT_REDIS;
	describe_limit(ru, was, sizeof(was));
	describe_limit(&eff, now, sizeof(now));
	if (st == RLG_OVERRIDE_NONE)
		printf("%s: none; the rule's %s applies\n", okey, was);
	else if (st == RLG_OVERRIDE_UNLIMITED)
		printf("%s: unlimited (admitted, nothing counted)\n", okey);
	else if (st == RLG_OVERRIDE_APPLIED)
		printf("%s: %s (the rule: %s)\n", okey, now, was);
	else
		printf("%s: ignored, %s; the rule's %s applies\n", okey, why,
		    was);
	return EXIT_DONE;
}

/*
 * override RULE KEY NAME=VALUE...: the fields replace the hash, in one
 * transaction, once the library says a decision would apply them (what
 * it would ignore is refused here, not silently per request).
 */
static int
set_override(redisContext *rc, const struct conf *c, const struct rule *ru,
    const char *okey, int argc, char **argv)
{
	char why[512], was[96], now[96], num[OV_COUNT][24];
	const char *hset[2 + 2 * OV_COUNT + 1] = { "HSET", okey };
	const char *del[] = { "DEL", okey, NULL };
	const char *const *cmds[2] = { del, hset };
	struct override o = { { -1, -1, -1, -1 } };
	struct rule eff;
	int i, n = 2, st;

	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "clear") == 0 ||
		    strcmp(argv[i], "unlimited") == 0) {
			ctl_complain("%s stands alone", argv[i]);
			return EXIT_USAGE;
		}
		if (parse_assignment(ru, argv[i], &o) == -1)
			return EXIT_USAGE;
	}
	if ((st = ask_override(rc, c, ru, NULL, &o, &eff, why,
	    sizeof(why))) == -1)
		return EXIT_REDIS;
	if (st != RLG_OVERRIDE_APPLIED) {
		ctl_complain("rule %s: %s%s", ru->name, why,
		    ru->algorithm == RLG_SLIDING_WINDOW && o.v[OV_WINDOW] != -1 &&
		    o.v[OV_PRECISION] == -1 ? " (give precision= as well)" : "");
		return EXIT_USAGE;
	}
	for (i = 0; i < OV_COUNT; i++) {
		if (o.v[i] == -1)
			continue;
		snprintf(num[i], sizeof(num[i]), "%lld", o.v[i]);
		hset[n++] = ov_field[i].hash;
		hset[n++] = num[i];
	}
	hset[n] = NULL;
	/* One transaction: a replaced override, never a mix of two. */
	if (ctl_transaction(rc, c, cmds, 2, NULL) == -1)
		return EXIT_REDIS;
	describe_limit(ru, was, sizeof(was));
	describe_limit(&eff, now, sizeof(now));
	printf("%s: %s from the next request (the rule: %s)\n", okey, now, was);
	return EXIT_DONE;
}

static int
cmd_override(redisContext *rc, const struct conf *c, const struct rule *ru,
    const char *key, int argc, char **argv)
{
	char okey[RLG_REDIS_KEY_SIZE], was[96];
	const char *hset[] = { "HSET", okey, "unlimited", "1", NULL };
	const char *del[] = { "DEL", okey, NULL };
	const char *const *cmds[2] = { del, hset };
	redisReply *r;

	limiter_key(c, ru, key, strlen(key), 1, okey, sizeof(okey));
	describe_limit(ru, was, sizeof(was));
	if (argc == 0)
		return show_override(rc, c, ru, okey);
	if (argc == 1 && strcmp(argv[0], "clear") == 0) {
		if ((r = ctl_call(rc, c, 2, del)) == NULL)
			return EXIT_REDIS;
		if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
			printf("%s: cleared; the rule's %s applies from the "
			    "next request\n", okey, was);
		else
			printf("%s: no override, nothing cleared\n", okey);
		freeReplyObject(r);
		return EXIT_DONE;
	}
	if (argc == 1 && strcmp(argv[0], "unlimited") == 0) {
		if (ctl_transaction(rc, c, cmds, 2, NULL) == -1)
			return EXIT_REDIS;
		printf("%s: unlimited from the next request (admitted, nothing "
		    "counted; the rule: %s)\n", okey, was);
		return EXIT_DONE;
	}
	return set_override(rc, c, ru, okey, argc, argv);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends s to out, a backslash before each of Redis's glob characters. */
static size_t
glob_escape(char *out, size_t pos, size_t outlen, const char *s)
{
	for (; *s != '\0' && pos + 3 < outlen; s++) {
		if (strchr("*?[]\\", *s) != NULL)
			out[pos++] = '\\';
		out[pos++] = *s;
	}
	out[pos] = '\0';
	return pos;
}

/* What list collects from every master. */
struct listing {
	const struct conf *c;
	const char	*match;		/* the SCAN pattern */
	size_t		 head;		/* bytes before the KEY part */
	char		**keys;
	size_t		 n, cap;
	int		 oom;
};

/* SCANs one master for the rule's keys (a redis_master_fn). */
static int
scan_master(void *arg, redisContext *rc, const char *address)
{
	struct listing *ls = arg;
	char cursor[32] = "0";
	const char *argv[6] = { "SCAN", cursor, "MATCH", ls->match, "COUNT",
	    "1000" };
	char **bigger, why[256];
	redisReply *r;
	size_t i, len;

	do {
		if ((r = redis_io_command_argv(rc, 6, argv)) == NULL) {
			redis_why(rc, ls->c->redis_timeout_ms, why, sizeof(why));
			ctl_complain("redis %s: SCAN: %s", address, why);
			return -1;
		}
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			ctl_complain("redis %s: SCAN: %s", address,
			    r->type == REDIS_REPLY_ERROR ? r->str :
			    "unexpected reply");
			freeReplyObject(r);
			return -1;
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		for (i = 0; i < r->element[1]->elements; i++) {
			const redisReply *k = r->element[1]->element[i];

			if (k->type != REDIS_REPLY_STRING ||
			    k->len < ls->head + 1)
				continue;
			if (ls->n == ls->cap) {
				ls->cap = ls->cap ? ls->cap * 2 : 256;
				if ((bigger = realloc(ls->keys, ls->cap *
				    sizeof(*ls->keys))) == NULL) {
					ls->oom = 1;
					freeReplyObject(r);
					return -1;
				}
				ls->keys = bigger;
			}
			/* The KEY part: between "<prefix>{<rule>:" and "}". */
			len = k->len - ls->head - 1;
			if ((ls->keys[ls->n] = strndup(k->str + ls->head,
			    len)) != NULL)
				ls->n++;
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return 0;
}

static int
cmd_list(const struct conf *c, const struct rule *ru, const char *pattern)
{
	char match[RLG_MAX_KEY + 512], err[512];
	struct listing ls;
	struct redis *r;
	size_t pos, i;
	int rc_exit = EXIT_REDIS;

	memset(&ls, 0, sizeof(ls));
	/* <prefix>{<rule>:PATTERN}: the prefix and name taken literally. */
	pos = glob_escape(match, 0, sizeof(match), c->key_prefix);
	pos += (size_t)snprintf(match + pos, sizeof(match) - pos, "{");
	pos = glob_escape(match, pos, sizeof(match), ru->name);
	snprintf(match + pos, sizeof(match) - pos, ":%s}", pattern);
	ls.c = c;
	ls.match = match;
	ls.head = strlen(c->key_prefix) + strlen(ru->name) + 2;
	/* Every master holds some slots: each is scanned. */
	if ((r = redis_new()) == NULL) {
		ctl_complain("out of memory");
		return EXIT_USAGE;
	}
	err[0] = '\0';
	if (redis_each_master(r, c, scan_master, &ls, err,
	    sizeof(err)) == -1) {
		if (ls.oom)
			ctl_complain("out of memory");
		else if (err[0] != '\0')
			ctl_complain("redis %s: %s", c->redis_address, err);
		rc_exit = ls.oom ? EXIT_USAGE : EXIT_REDIS;
		goto done;
	}
	/* SCAN may return a key twice: sorted, each once. */
	if (ls.n > 0)
		qsort(ls.keys, ls.n, sizeof(*ls.keys), cmp_str);
	for (i = 0; i < ls.n; i++)
		if (i == 0 || strcmp(ls.keys[i], ls.keys[i - 1]) != 0)
			printf("%s\n", ls.keys[i]);
	rc_exit = EXIT_DONE;
done:
	for (i = 0; i < ls.n; i++)
		free(ls.keys[i]);
	free(ls.keys);
	redis_free(r);
	return rc_exit;
}

static const struct rule *
find_rule(const struct conf *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nrules; i++)
		if (strcmp(c->rules[i].name, name) == 0)
			return &c->rules[i];
	return NULL;
}

/* The configuration, and the TLS context it names (redis_io.c); NULL
 * with the reasons said. */
static struct conf *
load(const char *path)
{
	struct conf *c;
	char *errors = NULL, err[512];

	if ((c = conf_load(path, &errors)) == NULL) {
		fputs(errors != NULL ? errors : "out of memory\n", stderr);
		free(errors);
		return NULL;
	}
	if (redis_io_setup(c, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s: %s\n", path, err);
		conf_free(c);
		return NULL;
	}
	return c;
}

/* rlgate-ctl versions | load | unload LIBRARY | prune: no rule, every
 * master. */
static int
main_versions(const char *path, const char *cmd, int argc, char *argv[])
{
	struct conf *c;
	char err[512];
	int status;

	if (argc != (strcmp(cmd, "unload") == 0 ? 2 : 1)) {
		ctl_complain("%s takes %s", cmd, strcmp(cmd, "unload") == 0 ?
		    "LIBRARY (a name versions lists)" : "no argument");
		usage(stderr);
		return EXIT_USAGE;
	}
	if ((c = load(path)) == NULL)
		return EXIT_USAGE;
	err[0] = '\0';
	switch (ctl_versions(c, cmd, argc == 2 ? argv[1] : NULL, err,
	    sizeof(err))) {
	case 0: status = EXIT_DONE; break;
	case -1: status = EXIT_USAGE; break;
	default: status = EXIT_REDIS; break;
	}
	if (err[0] != '\0')
		ctl_complain("%s", err);
	conf_free(c);
	if (fflush(stdout) == EOF && status == EXIT_DONE) {
		ctl_complain("standard output: %s", strerror(errno));
		status = EXIT_USAGE;
	}
	return status;
}

int
main(int argc, char *argv[])
{
	const char *path = getenv("RLGATE_CONF"), *cmd, *key = NULL;
	const struct rule *ru;
	char err[512], rkey[RLG_REDIS_KEY_SIZE];
	redisContext *rc;
	struct conf *c;
	int ch, want, status;
	size_t i, klen;

	if (path == NULL || *path == '\0')
		path = RLG_DEFAULT_CONF;
	/* '+': options only before the command, so a KEY may start with '-'. */
	while ((ch = getopt(argc, argv, "+c:hV")) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'h': usage(stdout); return EXIT_DONE;
		case 'V': printf("rlgate-ctl %s\n", RLG_VERSION); return EXIT_DONE;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[0];
	if (strcmp(cmd, "versions") == 0 || strcmp(cmd, "prune") == 0 ||
	    strcmp(cmd, "unload") == 0 || strcmp(cmd, "load") == 0)
		return main_versions(path, cmd, argc, argv);
	if (strcmp(cmd, "peek") == 0 || strcmp(cmd, "reset") == 0)
		want = 3;
	else if (strcmp(cmd, "list") == 0)
		want = argc == 3 ? 3 : 2;
	else if (strcmp(cmd, "override") == 0)
		want = argc >= 3 ? argc : 3;
	else {
		ctl_complain("unknown command \"%s\" (use peek, reset, list, "
		    "override, versions, load, unload or prune)", cmd);
		return EXIT_USAGE;
	}
	if (argc != want) {
		ctl_complain("%s takes %s", cmd, strcmp(cmd, "list") == 0 ?
		    "RULE [PATTERN]" : strcmp(cmd, "override") == 0 ?
		    "RULE KEY [limit=N window=DURATION burst=N | unlimited | "
		    "clear]" : "RULE KEY");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (argc >= 3) {
		key = argv[2];
		if (strlen(key) > RLG_MAX_KEY) {
			ctl_complain("a key is at most %d bytes", RLG_MAX_KEY);
			return EXIT_USAGE;
		}
	}
	if ((c = load(path)) == NULL)
		return EXIT_USAGE;
	if ((ru = find_rule(c, argv[1])) == NULL) {
		fprintf(stderr, "%s: %s has no rule \"%s\"", progname, path,
		    argv[1]);
		for (i = 0; i < c->nrules; i++)
			fprintf(stderr, "%s%s", i == 0 ? " (its rules: " : ", ",
			    c->rules[i].name);
		fprintf(stderr, "%s\n", c->nrules > 0 ? ")" : " (it has none)");
		conf_free(c);
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "override") == 0 && !ru->overrides) {
		ctl_complain("rule %s has overrides = none: rlgate would not read an "
		    "override for it (set overrides = redis in [rule:%s] of %s)",
		    ru->name, ru->name, path);
		conf_free(c);
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "list") == 0) {
		status = cmd_list(c, ru, key != NULL ? key : "*");
		goto done;
	}
	/* A key's state and its override share a hash slot: one node,
	 * the master of that slot in a cluster, holds both. */
	klen = limiter_key(c, ru, key, strlen(key), 0, rkey, sizeof(rkey));
	if ((rc = redis_connect(c, rkey, klen, err, sizeof(err))) == NULL) {
		ctl_complain("redis %s: %s", c->redis_address, err);
		conf_free(c);
		return EXIT_REDIS;
	}
	if (strcmp(cmd, "peek") == 0)
		status = cmd_peek(rc, c, ru, key);
	else if (strcmp(cmd, "reset") == 0)
		status = cmd_reset(rc, c, ru, key);
	else
		status = cmd_override(rc, c, ru, key, argc - 3, argv + 3);
	redis_io_free(rc);
done:
	conf_free(c);
	if (fflush(stdout) == EOF && status == EXIT_DONE) {
		ctl_complain("standard output: %s", strerror(errno));
		status = EXIT_USAGE;
	}
	return status;
}
