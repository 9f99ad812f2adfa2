/*
 * gen_audit: writes an audit database (the first layout, a decisions table:
 * tests/tools/audit_copy writes its rows in the gateway's own) full of
 * decisions that keep their promise, fast, for rlgate-report's tests and
 * benchmark. Each key gets random arrivals in microseconds; each algorithm
 * is modelled in exact integer arithmetic the way lua/ decides, and rows are
 * written as the gateway writes them (ts_ms = now_us / 1000, delay_ms =
 * ceil(wait)). Not a test of the Lua scripts: they have their own.
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

#include "audit.h"
#include "conf.h"

typedef __int128 i128;

enum alg { FIXED, SWINDOW, SLOG, TOKEN, GCRA, LEAKY, NALG };
static const char *alg_names[NALG] = { "fixed_window", "sliding_window",
	"sliding_log", "token_bucket", "gcra", "leaky_bucket" };

struct logent { int64_t t_us; int64_t cost; };

struct key {
	int		 rule;		/* index into rules */
	char		 name[48];
	int64_t		 next_us;	/* next arrival */
	/* algorithm state */
	int64_t		 a, b;		/* fixed: start, count; token: ts; leaky/gcra: Q scaled */
	i128		 tokens;
	struct logent	*log;		/* sliding_log ring; sliding_window blocks */
	size_t		 lhead, ln, lcap;
	int64_t		*blk_idx, *blk_cost;	/* sliding_window: ring of n blocks */
};

struct grule {
	char		 name[32];
	enum alg	 alg;
	int64_t		 limit, window_ms, burst, precision_ms;
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

static int64_t
cdiv(int64_t a, int64_t b)
{
	return a <= 0 ? 0 : (a + b - 1) / b;
}

struct out {
	int64_t		 allowed, remaining, retry_ms, delay_ms;
};

static int
log_push(struct key *k, int64_t t, int64_t cost)
{
	if (k->ln == k->lcap) {
		size_t ncap = k->lcap ? k->lcap * 2 : 64;
		struct logent *l = malloc(ncap * sizeof(*l));

		if (l == NULL)
			return -1;
		for (size_t i = 0; i < k->ln; i++)
			l[i] = k->log[(k->lhead + i) % k->lcap];
		free(k->log);
		k->log = l;
		k->lhead = 0;
		k->lcap = ncap;
	}
	k->log[(k->lhead + k->ln++) % k->lcap] = (struct logent){ t, cost };
	return 0;
}

/* One decision, exactly as the script would take it. */
static void
decide(const struct grule *r, struct key *k, int64_t now, int64_t cost, struct out *o)
{
	int64_t W = r->window_ms * 1000, N = r->limit, B = r->burst;

	memset(o, 0, sizeof(*o));
	switch (r->alg) {
	case FIXED:
		if (k->b == 0 || now >= k->a + W) {
			k->a = now;
			k->b = 0;
		}
		if (k->b + cost <= N) {
			k->b += cost;
			o->allowed = 1;
		} else
			o->retry_ms = cdiv(k->a + W - now, 1000);
		o->remaining = N - k->b;
		break;
	case SLOG: {
		int64_t sum = 0;

		while (k->ln > 0 && k->log[k->lhead].t_us <= now - W) {
			k->lhead = (k->lhead + 1) % k->lcap;
			k->ln--;
		}
		for (size_t i = 0; i < k->ln; i++)
			sum += k->log[(k->lhead + i) % k->lcap].cost;
		if (sum + cost <= N) {
			log_push(k, now, cost);
			o->allowed = 1;
			sum += cost;
		} else {
			int64_t need = sum + cost - N;

			for (size_t i = 0; i < k->ln && need > 0; i++) {
				struct logent *e = &k->log[(k->lhead + i) % k->lcap];

				need -= e->cost;
				if (need <= 0)
					o->retry_ms = cdiv(e->t_us + W - now, 1000);
			}
		}
		o->remaining = N - sum;
		break;
	}
	case SWINDOW: {
		int64_t P = r->precision_ms * 1000, n = W / P, j = now / P, sum = 0;

		for (int64_t q = 0; q < n; q++) {
			int64_t slot = (j - q) % n;

			if (k->blk_idx[slot] == j - q)
				sum += k->blk_cost[slot];
		}
		if (sum + cost <= N) {
			if (k->blk_idx[j % n] != j) {
				k->blk_idx[j % n] = j;
				k->blk_cost[j % n] = 0;
			}
			k->blk_cost[j % n] += cost;
			o->allowed = 1;
			sum += cost;
		} else {
			/* Oldest blocks drop out at (index + n) * P: a block boundary. */
			int64_t need = sum + cost - N;

			for (int64_t q = n - 1; q >= 0 && need > 0; q--) {
				int64_t slot = (j - q) % n;

				if (k->blk_idx[slot] != j - q)
					continue;
				need -= k->blk_cost[slot];
				if (need <= 0)
					o->retry_ms = cdiv((j - q + n) * P - now, 1000);
			}
		}
		o->remaining = N - sum;
		break;
	}
	case TOKEN:
	case GCRA: {
		/* tokens scaled by W (us): capacity B * W, N per us. */
		i128 full = (i128)B * W;

		if (k->a == 0) {
			k->tokens = full;
			k->a = now;
		}
		if (now > k->a) {
			k->tokens += (i128)N * (now - k->a);
			if (k->tokens > full)
				k->tokens = full;
			k->a = now;
		}
		if (k->tokens >= (i128)cost * W) {
			k->tokens -= (i128)cost * W;
			o->allowed = 1;
		} else
			o->retry_ms = cdiv((int64_t)(((i128)cost * W - k->tokens + N - 1) / N), 1000);
		o->remaining = (int64_t)(k->tokens / W);
		break;
	}
	case LEAKY: {
		/* Q scaled by N: the queue drains at Q / N us. */
		i128 nowN = (i128)now * N, w = k->tokens - nowN;

		if (w < 0)
			w = 0;
		if (w <= (i128)B * W) {
			o->allowed = 1;
			o->delay_ms = (int64_t)((w + (i128)1000 * N - 1) / ((i128)1000 * N));
			k->tokens = nowN + w + (i128)cost * W;
		} else
			o->retry_ms = (int64_t)((w - (i128)B * W + (i128)1000 * N - 1) /
			    ((i128)1000 * N));
		o->remaining = 0;
		break;
	}
	default:
		break;
	}
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
	for (int a = 0; a < NALG; a++) {
		if (strcmp(alg, "mix") != 0 && strcmp(alg, alg_names[a]) != 0)
			continue;
		struct grule *r = &rules[nrules++];

		snprintf(r->name, sizeof(r->name), "%s", rname && strcmp(alg, "mix") != 0 ?
		    rname : alg_names[a]);
		r->alg = (enum alg)a;
		r->limit = limit;
		r->window_ms = window;
		r->burst = burst >= 0 ? burst : limit;
		r->precision_ms = precision > 0 ? precision : (window % 10 == 0 ? window / 10 : 1);
	}
	if (nrules == 0) {
		fprintf(stderr, "gen_audit: unknown algorithm %s\n", alg);
		return 2;
	}
	if (maxcost > limit)
		maxcost = limit;
	/* Default rate: a little over the limit, so that some are denied. */
	if (rate <= 0)
		rate = 1.5 * (double)limit * 1000.0 / (double)window / ((double)(maxcost + 1) / 2);
	rng_state ^= (uint64_t)seed * 0x9e3779b97f4a7c15ULL;
	if ((keys = calloc((size_t)nkeys, sizeof(*keys))) == NULL)
		return 1;
	for (long long i = 0; i < nkeys; i++) {
		struct key *k = &keys[i];
		const struct grule *r;

		k->rule = (int)(i % nrules);
		r = &rules[k->rule];
		snprintf(k->name, sizeof(k->name), "k%05lld", i);
		k->next_us = start_ms * 1000 + gap_us(rate);
		if (r->alg == SWINDOW) {
			int64_t n = r->window_ms / r->precision_ms;

			k->blk_idx = malloc((size_t)n * sizeof(*k->blk_idx));
			k->blk_cost = calloc((size_t)n, sizeof(*k->blk_cost));
			for (int64_t q = 0; q < n; q++)
				k->blk_idx[q] = -1;
		}
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
			struct out o;

			decide(r, k, now, cost, &o);
			allowed += o.allowed;
			denied += !o.allowed;
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
			sqlite3_bind_text(st, 5, alg_names[r->alg], -1, SQLITE_STATIC);
			sqlite3_bind_int(st, 6, (int)o.allowed);
			sqlite3_bind_int64(st, 7, cost);
			sqlite3_bind_int64(st, 8, r->limit);
			sqlite3_bind_int64(st, 9, r->window_ms);
			sqlite3_bind_int64(st, 10, r->burst);
			sqlite3_bind_int64(st, 11, o.remaining);
			sqlite3_bind_int64(st, 12, o.retry_ms);
			sqlite3_bind_int64(st, 13, o.delay_ms);
			sqlite3_bind_text(st, 14, path, -1, SQLITE_TRANSIENT);
			sqlite3_bind_text(st, 15, ip, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(st, 16, o.allowed ? 200 : 429);
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
		free(keys[i].log);
		free(keys[i].blk_idx);
		free(keys[i].blk_cost);
	}
	free(keys);
	return 0;
}
