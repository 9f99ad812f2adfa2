/*
 * gen_audit: writes an audit database (the first layout, a decisions table:
 * tests/tools/audit_copy writes its rows in the gateway's own) full of
 * decisions that keep their promise, fast, for rlgate-report's tests and
 * benchmark. Each key gets random arrivals in microseconds, decided by the
 * C twin of lua/ (fcgi/algo.c), and rows are written as the gateway writes
 * them (ts_ms = now_us / 1000). Not a test of the Lua scripts: they have
 * their own.
 *
 * usage: gen_audit -o DB [-O DB2] [-n rows] [-a algorithm|mix] [-l limit]
 *        [-w window_ms] [-b burst] [-p precision_ms] [-k keys] [-r rate/s per key]
 *        [-c max_cost] [-s seed] [-t start_ms] [-R rule]
 * With -O, each row goes to one of the two databases at random (two gateway
 * hosts sharing one Redis). -a mix: six rules, one per algorithm.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "algo.h"
#include "audit.h"
#include "conf.h"

static const enum rlg_algorithm algs[] = { RLG_FIXED_WINDOW,
	RLG_SLIDING_WINDOW, RLG_SLIDING_LOG, RLG_TOKEN_BUCKET, RLG_GCRA,
	RLG_LEAKY_BUCKET };
#define NALG	((int)(sizeof(algs) / sizeof(algs[0])))

struct key {
	int			 rule;		/* index into rules */
	char			 name[48];
	int64_t			 next_us;	/* next arrival */
	struct algo_state	 st;		/* entries grown as needed */
};

struct grule {
	char			 name[32];
	enum rlg_algorithm	 alg;
	int64_t			 limit, window_ms, burst, precision_ms;
};

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Exponential gap in us for a rate per second (bursty enough to hit limits). */
static int64_t
gap_us(double rate)
{
	double u = ((double)(rng() >> 11) + 1) / 9007199254740993.0;
	double g = -1e6 / rate * __builtin_log(u);

	return g < 0 ? 0 : (int64_t)g;
}

/* r's parameters with a cost; 0, or -1 with the Lua's sentence in err. */
static int
params(struct algo_params *p, const struct grule *r, int64_t cost, char *err,
    size_t len)
{
	return algo_params(p, r->alg, cost, r->limit, r->window_ms, r->burst,
	    r->precision_ms, err, len);
}

/* One decision, the Lua's (a request of one rule): v, the reply. */
static void
decide(const struct grule *r, struct key *k, int64_t now, int64_t cost,
    long long v[ALGO_NFIELDS])
{
	struct algo_params p;

	params(&p, r, cost, NULL, 0);	/* checked with the largest cost */
	/* Grown before it is full: every decision exact. */
	if (algo_state_full(&k->st)) {
		size_t cap = k->st.cap ? 2 * k->st.cap : 64;
		struct algo_entry *old = k->st.e, *e = malloc(cap * sizeof(*e));

		if (e == NULL) {
			fprintf(stderr, "gen_audit: out of memory\n");
			exit(1);
		}
		algo_state_grow(&k->st, e, cap);
		free(old);
	}
	algo_decide(&p, &k->st, now, v);
}

static long long
arg(const char *s, long long min, long long max)
{
	long long v;
	const char *errstr;

	if (conf_parse_int(s, min, max, &v, &errstr) == -1) {
		fprintf(stderr, "gen_audit: \"%s\" %s\n", s, errstr);
		exit(2);
	}
	return v;
}

static void
usage(void)
{
	fputs("usage: gen_audit -o DB [-O DB2] [-n rows] [-a algorithm|mix] [-l limit] "
	    "[-w window_ms] [-b burst] [-p precision_ms] [-k keys] [-r rate] [-c max_cost] "
	    "[-s seed] [-t start_ms] [-R rule]\n", stderr);
	exit(2);
}

static sqlite3 *
open_db(const char *path, sqlite3_stmt **ins)
{
	sqlite3 *db;

	unlink(path);
	if (sqlite3_open(path, &db) != SQLITE_OK)
		goto fail;
	/* A throwaway file: no journal; indexes built once, at the end. */
	if (sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
	    "PRAGMA cache_size=-262144;", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, RLG_AUDIT_SCHEMA_V1, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "DROP INDEX decisions_ts; DROP INDEX decisions_rule_key_ts; "
	    "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO decisions (ts_ms, request_id, rule, key, "
	    "algorithm, allowed, reason, cost, limit_value, window_ms, burst, remaining, "
	    "retry_after_ms, delay_ms, method, path, client_ip, status, latency_us) VALUES "
	    "(?1, ?2, ?3, ?4, ?5, ?6, 'limit', ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'GET', ?14, "
	    "?15, ?16, ?17)", -1, ins, NULL) != SQLITE_OK)
		goto fail;
	return db;
fail:
	fprintf(stderr, "gen_audit: %s: %s\n", path, sqlite3_errmsg(db));
	exit(1);
}

static void
close_db(sqlite3 *db, sqlite3_stmt *ins, const char *path)
{
	sqlite3_finalize(ins);
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, RLG_AUDIT_SCHEMA_V1, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "gen_audit: %s: %s\n", path, sqlite3_errmsg(db));
		exit(1);
	}
	sqlite3_close(db);
}

/* Moves heap[p] down until no child of it arrives earlier. */
static void
sift_down(const struct key *keys, size_t *heap, size_t n, size_t p)
{
	for (;;) {
		size_t l = 2 * p + 1, m = p, t;

		if (l < n && keys[heap[l]].next_us < keys[heap[m]].next_us)
			m = l;
		if (l + 1 < n && keys[heap[l + 1]].next_us < keys[heap[m]].next_us)
			m = l + 1;
		if (m == p)
			return;
		t = heap[p];
		heap[p] = heap[m];
		heap[m] = t;
		p = m;
	}
}

/*
 * The rules of -a alg (a name, or mix: one per algorithm) into rules; their
 * count, or exits when alg is none. A burst or precision not given is the
 * configuration's (the limit; conf_default_precision).
 */
static int
make_rules(struct grule *rules, const char *alg, const char *rname,
    long long limit, long long window, long long burst, long long precision)
{
	int nrules = 0;

	for (int a = 0; a < NALG; a++) {
		const char *name = conf_algorithm_name(algs[a]);
		struct grule *r;

		if (strcmp(alg, "mix") != 0 && strcmp(alg, name) != 0)
			continue;
		r = &rules[nrules++];
		snprintf(r->name, sizeof(r->name), "%s", rname &&
		    strcmp(alg, "mix") != 0 ? rname : name);
		r->alg = algs[a];
		r->limit = limit;
		r->window_ms = window;
		r->burst = burst >= 0 ? burst : limit;
		r->precision_ms = precision > 0 ? precision :
		    conf_default_precision(window);
	}
	if (nrules == 0) {
		fprintf(stderr, "gen_audit: unknown algorithm %s\n", alg);
		exit(2);
	}
	return nrules;
}

int
main(int argc, char **argv)
{
	const char *out = NULL, *out2 = NULL, *alg = "fixed_window", *rname = NULL;
	long long nrows = 1000, limit = 100, window = 1000, burst = -1, precision = -1;
	long long nkeys = 10, maxcost = 1, seed = 1, start_ms = 1763805600000LL;
	double rate = -1;
	struct grule rules[NALG];
	int nrules = 0, ch;
	struct key *keys;
	sqlite3 *db[2] = { NULL, NULL };
	sqlite3_stmt *ins[2] = { NULL, NULL };
	long long allowed = 0, denied = 0;

	while ((ch = getopt(argc, argv, "o:O:n:a:l:w:b:p:k:r:c:s:t:R:")) != -1) {
		switch (ch) {
		case 'o': out = optarg; break;
		case 'O': out2 = optarg; break;
		case 'n': nrows = arg(optarg, 1, 4000000000LL); break;
		case 'a': alg = optarg; break;
		case 'l': limit = arg(optarg, 1, 1000000000LL); break;
		case 'w': window = arg(optarg, 1, 86400000LL*366); break;
		case 'b': burst = arg(optarg, 0, 1000000000LL); break;
		case 'p': precision = arg(optarg, 1, 86400000LL); break;
		case 'k': nkeys = arg(optarg, 1, 10000000); break;
		case 'r': rate = (double)arg(optarg, 1, 100000000); break;
		case 'c': maxcost = arg(optarg, 1, 1000000); break;
		case 's': seed = arg(optarg, 0, LLONG_MAX); break;
		case 't': start_ms = arg(optarg, 0, 253402300799999LL); break;
		case 'R': rname = optarg; break;
		default: usage();
		}
	}
	if (out == NULL || nrows < 1 || limit < 1 || window < 1 || nkeys < 1 || maxcost < 1)
		usage();
	nrules = make_rules(rules, alg, rname, limit, window, burst, precision);
	if (maxcost > limit)
		maxcost = limit;
	for (int i = 0; i < nrules; i++) {
		struct algo_params p;
		char err[256];

		if (params(&p, &rules[i], maxcost, err, sizeof(err)) == -1) {
			fprintf(stderr, "gen_audit: %s: %s\n", rules[i].name, err);
			return 2;
		}
	}
	/* Default rate: a little over the limit, so that some are denied. */
	if (rate <= 0)
		rate = 1.5 * (double)limit * 1000.0 / (double)window / ((double)(maxcost + 1) / 2);
	rng_state ^= (uint64_t)seed * 0x9e3779b97f4a7c15ULL;
	if ((keys = calloc((size_t)nkeys, sizeof(*keys))) == NULL)
		return 1;
	for (long long i = 0; i < nkeys; i++) {
		struct key *k = &keys[i];

		k->rule = (int)(i % nrules);
		snprintf(k->name, sizeof(k->name), "k%05lld", i);
		k->next_us = start_ms * 1000 + gap_us(rate);
		algo_state_init(&k->st, NULL, 0);
	}
	db[0] = open_db(out, &ins[0]);
	if (out2)
		db[1] = open_db(out2, &ins[1]);

	/* A binary heap of keys by next arrival: rows come out in time order. */
	{
		size_t n = (size_t)nkeys, *heap = malloc(n * sizeof(*heap));
		char rid[48], ip[32], path[64];

		for (size_t i = 0; i < n; i++)
			heap[i] = i;
		for (size_t i = n / 2 + 1; i-- > 0;)
			sift_down(keys, heap, n, i);
		for (long long row = 0; row < nrows; row++) {
			struct key *k = &keys[heap[0]];
			const struct grule *r = &rules[k->rule];
			int64_t now = k->next_us, cost = 1 + (int64_t)(rng() % (uint64_t)maxcost);
			int which = out2 && (rng() & 1);
			sqlite3_stmt *st = ins[which];
			long long v[ALGO_NFIELDS];

			decide(r, k, now, cost, v);
			allowed += v[RLG_REPLY_ALLOWED];
			denied += !v[RLG_REPLY_ALLOWED];
			/* As the gateway writes them: its process's random
			 * prefix and a counter (rng() still drawn: the same
			 * seed gives the same decisions as before). */
			(void)rng();
			snprintf(rid, sizeof(rid), "%016" PRIx64 "-%llx",
			    (uint64_t)(0x9e3779b97f4a7c15ULL *
			    (unsigned long long)(seed + which)),
			    (unsigned long long)row);
			snprintf(ip, sizeof(ip), "10.%d.%d.%d", (int)(heap[0] >> 16 & 255),
			    (int)(heap[0] >> 8 & 255), (int)(heap[0] & 255));
			snprintf(path, sizeof(path), "/api/%s", k->name);
			sqlite3_bind_int64(st, 1, now / 1000);
			sqlite3_bind_text(st, 2, rid, -1, SQLITE_TRANSIENT);
			sqlite3_bind_text(st, 3, r->name, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 4, k->name, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 5, conf_algorithm_name(r->alg), -1, SQLITE_STATIC);
			sqlite3_bind_int(st, 6, (int)v[RLG_REPLY_ALLOWED]);
			sqlite3_bind_int64(st, 7, cost);
			sqlite3_bind_int64(st, 8, r->limit);
			sqlite3_bind_int64(st, 9, r->window_ms);
			sqlite3_bind_int64(st, 10, r->burst);
			sqlite3_bind_int64(st, 11, v[RLG_REPLY_REMAINING]);
			sqlite3_bind_int64(st, 12, v[RLG_REPLY_RETRY_AFTER_MS]);
			sqlite3_bind_int64(st, 13, v[RLG_REPLY_DELAY_MS]);
			sqlite3_bind_text(st, 14, path, -1, SQLITE_TRANSIENT);
			sqlite3_bind_text(st, 15, ip, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(st, 16, v[RLG_REPLY_ALLOWED] ? 200 : 429);
			sqlite3_bind_int64(st, 17, 20 + (int64_t)(rng() % 200));
			if (sqlite3_step(st) != SQLITE_DONE) {
				fprintf(stderr, "gen_audit: insert: %s\n",
				    sqlite3_errmsg(db[which]));
				return 1;
			}
			sqlite3_reset(st);
			k->next_us = now + gap_us(rate);
			sift_down(keys, heap, n, 0);
		}
		free(heap);
	}
	close_db(db[0], ins[0], out);
	if (db[1])
		close_db(db[1], ins[1], out2);
	printf("gen_audit: %lld rows (%lld allowed, %lld denied), %lld keys, %d rule%s\n",
	    nrows, allowed, denied, nkeys, nrules, nrules == 1 ? "" : "s");
	for (long long i = 0; i < nkeys; i++) {
		free(keys[i].st.e);
	}
	free(keys);
	return 0;
}
