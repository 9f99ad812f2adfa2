/*
 * conf_finish: the checks that need more than one key, run once a
 * [rule:NAME] section is over and once the whole file is read: required
 * keys, an algorithm's parameters together, [redis] mode against the keys
 * that depend on it, [audit] batch/queue, keep and dated names, and that
 * there is a rule. One value's form is conf_keys.c's setters'.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conf_int.h"

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
void
conf_finish_rule(struct loader *l)
{
	struct rule *r = &l->c->rules[l->rule];
	const char *algo = conf_algorithm_name(r->algorithm);
	char why[512];

	tmpl_escapes(&r->key, r->name);
	tmpl_escapes(&r->cost_tmpl, r->name);

	if (!given(l, K_LIMIT))
		conf_error(l, r->line, l->secname, "limit", "is missing: every rule "
		    "needs one (cost units per window, e.g. limit = 100)");
	if (!given(l, K_WINDOW))
		conf_error(l, r->line, l->secname, "window", "is missing: every rule "
		    "needs one (e.g. window = 1s)");
	if (l->state[K_ALGORITHM] == KS_BAD)
		return;
	if (given(l, K_BURST) && !conf_algorithm_has_burst(r->algorithm))
		conf_error(l, l->seen[K_BURST], l->secname, "burst", "%s has no "
		    "burst (only token_bucket, gcra and leaky_bucket do); "
		    "remove it or change the algorithm", algo);
	if (given(l, K_PRECISION) && r->algorithm != RLG_SLIDING_WINDOW)
		conf_error(l, l->seen[K_PRECISION], l->secname, "precision", "%s has "
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
			conf_error(l, param_line(l, r, p), l->secname,
			    conf_param_name(p), "%s", why);
	}
	/* A process remembers a denial until its retry_after without asking
	 * Redis, so it would not see a limit raised there meanwhile. */
	if (r->deny_cache && r->overrides)
		conf_error(l, l->seen[K_DENY_CACHE] > l->seen[K_OVERRIDES] ?
		    l->seen[K_DENY_CACHE] : l->seen[K_OVERRIDES], l->secname,
		    l->seen[K_DENY_CACHE] > l->seen[K_OVERRIDES] ? "deny_cache" :
		    "overrides", "deny_cache = on and overrides = redis do not go "
		    "together: a denial remembered by a process would outlive a "
		    "limit raised in Redis until its retry_after; turn one off");
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


/* [redis] tls_*: only with tls = yes, a key with its certificate, files
 * that can be read (rlgate runs with them; OpenSSL reads them at start-up
 * and on a reload, redis_io.c). */
static void
finish_tls(struct loader *l)
{
	static const struct { int k; size_t off; int file; } keys[] = {
		{ K_TLS_CA_FILE, offsetof(struct conf, redis_tls_ca_file), 1 },
		{ K_TLS_SERVER_NAME,
		    offsetof(struct conf, redis_tls_server_name), 0 },
		{ K_TLS_CERT_FILE, offsetof(struct conf, redis_tls_cert_file),
		    1 },
		{ K_TLS_KEY_FILE, offsetof(struct conf, redis_tls_key_file), 1 },
	};
	const struct conf *c = l->c;
	const char *v;
	size_t i;

	if (l->state[K_TLS] == KS_BAD)
		return;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		v = *(char *const *)(const void *)((const char *)c +
		    keys[i].off);
		if (v == NULL || l->state[keys[i].k] == KS_BAD)
			continue;
		if (!c->redis_tls)
			conf_error(l, l->seen[keys[i].k], "redis",
			    conf_keys[keys[i].k].name, "is set but tls is "
			    "not on; set tls = yes, or remove it");
		else if (keys[i].file && access(v, R_OK) == -1)
			conf_error(l, l->seen[keys[i].k], "redis",
			    conf_keys[keys[i].k].name, "%s cannot be read: %s "
			    "(a PEM file rlgate's user may read)", v,
			    strerror(errno));
	}
	if (!c->redis_tls)
		return;
	if (c->redis_address != NULL && strncmp(c->redis_address, "unix:",
	    5) == 0)
		conf_error(l, l->seen[K_TLS], "redis", "tls", "is yes, but "
		    "address %s is a unix socket: Redis serves TLS on TCP "
		    "only (use host:port, the server's tls-port)",
		    c->redis_address);
	if ((c->redis_tls_key_file == NULL) != (c->redis_tls_cert_file ==
	    NULL)) {
		int k = c->redis_tls_key_file != NULL ? K_TLS_KEY_FILE :
		    K_TLS_CERT_FILE;

		conf_error(l, l->seen[k], "redis", conf_keys[k].name, "is set "
		    "without %s; a client certificate needs both (or neither)",
		    k == K_TLS_KEY_FILE ? "tls_cert_file" : "tls_key_file");
	}
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
	    conf_count_tokens(c->redis_address) > 1)
		conf_error(l, l->seen[K_ADDRESS], "redis", "address", "lists %zu "
		    "addresses, but mode = single takes one (set mode = "
		    "cluster or sentinel for a list)",
		    conf_count_tokens(c->redis_address));
	if (c->redis_mode == RLG_REDIS_SENTINEL &&
	    c->redis_master_name == NULL)
		conf_error(l, line, "redis", "mode", "is sentinel but master_name "
		    "is not set; set it to the name the Sentinels monitor "
		    "(e.g. master_name = mymaster)");
	if (c->redis_mode != RLG_REDIS_SENTINEL &&
	    c->redis_master_name != NULL)
		conf_error(l, l->seen[K_MASTER_NAME], "redis", "master_name", "is "
		    "only for mode = sentinel (mode is %s)", mode);
	if (c->redis_mode != RLG_REDIS_SENTINEL &&
	    c->redis_sentinel_password != NULL &&
	    l->state[K_SENTINEL_PASSWORD] != KS_BAD)
		conf_error(l, l->seen[K_SENTINEL_PASSWORD], "redis",
		    "sentinel_password", "is only for mode = sentinel (mode "
		    "is %s)", mode);
	if (c->redis_mode == RLG_REDIS_CLUSTER && c->redis_database != 0 &&
	    l->state[K_DATABASE] != KS_BAD)
		conf_error(l, l->seen[K_DATABASE], "redis", "database", "is %d, but "
		    "Redis Cluster has only database 0; remove it or set 0",
		    c->redis_database);
	finish_tls(l);
	/* WAIT gets half the timeout (redis.c), and WAIT 0 would block. */
	if (c->redis_replicas > 0 && c->redis_timeout_ms < 2 &&
	    l->state[K_TIMEOUT] != KS_BAD)
		conf_error(l, l->seen[K_REPLICAS], "redis", "replicas", "is %d, "
		    "but timeout is %lld ms: WAIT for replicas takes half the "
		    "timeout; set timeout = 2ms or more", c->redis_replicas,
		    c->redis_timeout_ms);
}

/* Checks between keys of [gateway], [redis], [audit], and that there is a
 * rule, at the end. */
void
conf_finish(struct loader *l)
{
	struct conf *c = l->c;
	const char *why;
	long cpus;

	if (c->audit_batch > c->audit_queue &&
	    l->state[K_BATCH] != KS_BAD && l->state[K_QUEUE] != KS_BAD) {
		int by_batch = given(l, K_BATCH);

		conf_error(l, by_batch ? l->seen[K_BATCH] : l->seen[K_QUEUE],
		    "audit", by_batch ? "batch" : "queue", "a batch of %d "
		    "rows cannot come from a queue of %d; use a batch no "
		    "larger than the queue", c->audit_batch, c->audit_queue);
	}
	finish_redis(l);
	if (c->redis_username != NULL && c->redis_password == NULL &&
	    l->state[K_PASSWORD] != KS_BAD)
		conf_error(l, l->seen[K_USERNAME], "redis", "username", "is set "
		    "without a password (Redis AUTH takes both); set password "
		    "or remove username");
	/* Each loop is a thread that never sleeps while there is work: more
	 * of them than CPUs only take turns on the same CPUs. */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (l->state[K_WORKERS] == KS_OK && cpus > 0 && c->workers > cpus)
		conf_warn(l, l->seen[K_WORKERS], "gateway", "workers", "%d event "
		    "loops on %ld CPUs: more loops than CPUs only add context "
		    "switches (one loop serves any number of connections); "
		    "leave workers empty for one per CPU, the default",
		    c->workers, cpus);
	if (c->audit_database != NULL &&
	    (why = dated_name_problem(c->audit_database)) != NULL)
		conf_error(l, l->seen[K_AUDIT_DATABASE], "audit", "database",
		    "\"%s\": %s", c->audit_database, why);
	if (c->audit_keep_ms > 0 && l->state[K_AUDIT_DATABASE] != KS_BAD &&
	    (c->audit_database == NULL ||
	    strchr(c->audit_database, '%') == NULL))
		conf_error(l, l->seen[K_KEEP], "audit", "keep", "deletes dated "
		    "files only: put a date in [audit] database (e.g. "
		    "audit-%%Y-%%m-%%d.db, a file a day), or remove keep");
	if (c->audit_keep_rows_ms > 0 && l->state[K_AUDIT_DATABASE] != KS_BAD &&
	    (c->audit_database == NULL ||
	    strchr(c->audit_database, '%') == NULL))
		conf_error(l, l->seen[K_KEEP_ROWS], "audit", "keep_rows",
		    "deletes the rows of dated files only: put a date in "
		    "[audit] database (e.g. audit-%%Y-%%m-%%d.db), or remove "
		    "keep_rows");
	else if (c->audit_keep_rows_ms > 0 && c->audit_keep_ms > 0 &&
	    c->audit_keep_rows_ms >= c->audit_keep_ms)
		conf_error(l, l->seen[K_KEEP_ROWS], "audit", "keep_rows",
		    "must be shorter than keep (%lld ms against %lld ms): keep "
		    "deletes whole files, rows and summaries, keep_rows only "
		    "the rows before that", c->audit_keep_rows_ms,
		    c->audit_keep_ms);
	/* A rule with errors still counts here: its own error says what
	 * is wrong, and "no rule" would be noise beside it. */
	if (c->nrules == 0)
		conf_error(l, 0, NULL, NULL, "no [rule:NAME] section: rlgate would "
		    "limit nothing; add a rule (dry_run = yes records "
		    "without limiting)");
}

