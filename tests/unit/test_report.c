/*
 * Unit tests for rlgate-report's arithmetic: window alignment, UTC times,
 * durations, axis steps, and each --verify check at the edge of the slack
 * that millisecond timestamps allow (one ms less passes, one more fails),
 * driven through verify_check_run() (verify_int.h); and --verify's time
 * range on a database the gateway's own audit writer makes: --since
 * inclusive, --until exclusive; the what-if's requests, by request id, in
 * such a database. Linked with the report's objects
 * (Makefile), not their sources.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "audit.h"
#include "conf.h"
#include "../../reports/agg.h"
#include "../../reports/db.h"
#include "../../reports/intern.h"
#include "../../reports/rowids.h"
#include "../../reports/rowscan.h"
#include "../../reports/verify.h"
#include "../../reports/verify_int.h"
#include "../../reports/whatif_read.h"
#include "../../reports/window.h"

#define BASE	1763805600000LL		/* 2025-11-22 10:00:00.000 UTC */

static void
test_window_start(void **state)
{
	(void)state;
	assert_int_equal(window_start(1005, 1000), 1000);
	assert_int_equal(window_start(1000, 1000), 1000);
	assert_int_equal(window_start(999, 1000), 0);
	assert_int_equal(window_start(-1, 1000), -1000);
	assert_int_equal(window_start(BASE + 123, 1), BASE + 123);
	assert_int_equal(window_start(BASE + 59999, 60000), BASE);
	assert_int_equal(window_start(20, 7), 14);
}

static void
test_format_time(void **state)
{
	char b[RLG_TIME_LEN];

	(void)state;
	assert_string_equal(window_format_time(0, b), "1970-01-01 00:00:00.000");
	assert_string_equal(window_format_time(BASE, b), "2025-11-22 10:00:00.000");
	assert_string_equal(window_format_time(BASE + 86399999 - 36000000, b),
	    "2025-11-22 23:59:59.999");
	assert_string_equal(window_format_time(951782400123LL, b), "2000-02-29 00:00:00.123");
	assert_string_equal(window_format_time(-1, b), "1969-12-31 23:59:59.999");
}

static void
test_parse_time(void **state)
{
	int64_t ms;
	const char *e;
	static const char *bad[] = {
		"", "yesterday", "2025-13-01", "2025-00-10", "2025-02-29", "2025-11-31",
		"2025-11-22 24:00", "2025-11-22 10:60", "2025-11-22 10:00:60",
		"2025-11-22 10", "2025-11-22 10:00:00.", "2025-11-22 10:00:00.1234",
		"2025-11-22x", "25-11-22", "2025-11-22 10:00:00 UTC", "-5", "1e9",
	};

	(void)state;
	assert_int_equal(window_parse_time("2025-11-22 10:00:00.000", &ms, &e), 0);
	assert_int_equal(ms, BASE);
	assert_int_equal(window_parse_time("2025-11-22", &ms, &e), 0);
	assert_int_equal(ms, BASE - 36000000);
	assert_int_equal(window_parse_time("2025-11-22T10:00:05.5Z", &ms, &e), 0);
	assert_int_equal(ms, BASE + 5500);
	assert_int_equal(window_parse_time("2025-11-22 10:01", &ms, &e), 0);
	assert_int_equal(ms, BASE + 60000);
	assert_int_equal(window_parse_time("2024-02-29 00:00:00.007", &ms, &e), 0);
	assert_int_equal(ms, 1709164800007LL);
	assert_int_equal(window_parse_time("1763805600123", &ms, &e), 0);
	assert_int_equal(ms, BASE + 123);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (window_parse_time(bad[i], &ms, &e) != -1)
			fail_msg("\"%s\" parsed as %lld", bad[i], (long long)ms);
		assert_non_null(e);
	}
	/* Every formatted time parses back to itself. */
	for (int64_t t = BASE - 5000000000LL; t < BASE + 5000000000LL; t += 123456789) {
		char b[RLG_TIME_LEN];

		assert_int_equal(window_parse_time(window_format_time(t, b), &ms, &e), 0);
		assert_int_equal(ms, t);
	}
}

static void
test_durations_and_steps(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(window_format_duration(1, b, sizeof(b)), "1ms");
	assert_string_equal(window_format_duration(1000, b, sizeof(b)), "1s");
	assert_string_equal(window_format_duration(1500, b, sizeof(b)), "1500ms");
	assert_string_equal(window_format_duration(90000, b, sizeof(b)), "90s");
	assert_string_equal(window_format_duration(3600000, b, sizeof(b)), "1h");
	assert_string_equal(window_format_duration(172800000, b, sizeof(b)), "2d");
	assert_int_equal(window_axis_step(1), 1);
	assert_int_equal(window_axis_step(3), 5);
	assert_int_equal(window_axis_step(501), 1000);
	assert_int_equal(window_axis_step(50000), 60000);
	assert_int_equal(window_axis_step(604800001), 1209600000);
	assert_true(window_count_step(0.3) == 1);
	assert_true(window_count_step(3) == 5);
	assert_true(window_count_step(11) == 20);
	assert_true(window_count_step(2000) == 2000);
	assert_true(window_count_step(2001) == 5000);
	assert_int_equal(verify_default_precision(1000), 100);
	assert_int_equal(verify_default_precision(60000), 6000);
	assert_int_equal(verify_default_precision(250), 25);
	assert_int_equal(verify_default_precision(15), 1);
	assert_int_equal(verify_default_precision(7), 1);
	assert_int_equal(verify_default_precision(30), 3);
}

/* A replay harness: one key, rows at the given ms with cost 1 and delays. */
static struct verify V;
static struct priv P;
static const struct filter F = { NULL, NULL, INT64_MIN, INT64_MAX };

static size_t
replay(enum rlg_algorithm alg, int64_t limit, int64_t window_ms, int64_t burst,
    int64_t precision_ms, const int64_t *ts, const int64_t *delay, size_t n)
{
	struct ctx c = { &V, &P, &F, 0, 0, 0 };
	struct pinfo p = { "r", conf_algorithm_name(alg), (int)alg, limit, window_ms,
	    burst, precision_ms, "test", 0, 0, 0, 0, 0, 0 };
	struct rec r[64];
	uint32_t kid;

	assert_true(n <= 64);
	free(V.v);
	memset(&V, 0, sizeof(V));
	kid = intern_pair(&P.keys, "r", "k");
	for (size_t i = 0; i < n; i++)
		r[i] = (struct rec){ BASE + ts[i], kid, 0, (uint32_t)i, 1, delay ? delay[i] : 0 };
	assert_int_equal(verify_check_run(&c, r, n, &p), 0);
	assert_false(c.oom);
	return V.nv;
}

#define N(a)	(sizeof(a) / sizeof((a)[0]))
#define FIXED(limit, w, ...) ({ static const int64_t t_[] = { __VA_ARGS__ }; \
	replay(RLG_FIXED_WINDOW, limit, w, limit, 0, t_, NULL, N(t_)); })

static void
test_fixed_window(void **state)
{
	(void)state;
	/* The ms where a window ends may hold decisions of either window. */
	assert_int_equal(FIXED(1, 10, 0, 10), 0);
	assert_int_equal(FIXED(2, 10, 0, 9, 10, 10), 0);
	assert_int_equal(FIXED(2, 10, 0, 10, 10, 10), 0);	/* one in the old window */
	assert_int_equal(FIXED(2, 10, 0, 10, 10, 10, 10), 1);
	assert_int_equal(FIXED(2, 10, 0, 9, 10, 10, 10), 1);
	/* ...and the next window may open in that ms or at the next decision. */
	assert_int_equal(FIXED(2, 10, 0, 10, 11, 19, 21), 0);	/* opens at 11 */
	assert_int_equal(FIXED(2, 10, 0, 10, 11, 20, 20), 0);	/* opens at 10 */
	/* Inside a window there is no slack. */
	assert_int_equal(FIXED(2, 10, 0, 1, 2), 1);
	assert_string_equal(V.v[0].check, "window");
	assert_int_equal(V.v[0].from_ms, BASE);
	assert_int_equal(V.v[0].to_ms, BASE + 10);
	assert_int_equal(V.v[0].admitted, 3);
	assert_int_equal(FIXED(2, 10, 0, 5, 9, 20, 21, 22), 2);
	assert_int_equal(V.v[1].from_ms, BASE + 20);
	/* The seeds' boundary problem: 2 x limit within 2 ms is the promise. */
	assert_int_equal(FIXED(3, 1000, 999, 999, 999, 1999, 1999, 1999), 0);
	assert_int_equal(FIXED(3, 1000, 0, 999, 999, 999), 1);
}

static void
test_sliding_log(void **state)
{
	static const int64_t a[] = { 0, 999 }, b[] = { 0, 1000 }, c[] = { 5, 5, 5 };

	(void)state;
	/* Stamped W - 1 ms apart: less than W apart whatever the true times. */
	assert_int_equal(replay(RLG_SLIDING_LOG, 1, 1000, 1, 0, a, NULL, 2), 1);
	assert_int_equal(V.v[0].admitted, 2);
	assert_int_equal(V.v[0].to_ms, BASE + 1000);
	assert_int_equal(replay(RLG_SLIDING_LOG, 1, 1000, 1, 0, b, NULL, 2), 0);
	assert_int_equal(replay(RLG_SLIDING_LOG, 3, 1, 3, 0, c, NULL, 3), 0);
	assert_int_equal(replay(RLG_SLIDING_LOG, 2, 1, 2, 0, c, NULL, 3), 1);
}

static void
test_sliding_window(void **state)
{
	static const int64_t a[] = { 0, 999 }, b[] = { 0, 1000 }, c[] = { 99, 1000 },
	    d[] = { 100, 1000 };

	(void)state;
	/* Blocks start on whole ms: a decision's block is exact, no slack. */
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, a, NULL, 2), 1);
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, b, NULL, 2), 0);
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, c, NULL, 2), 0);
	assert_int_equal(replay(RLG_SLIDING_WINDOW, 1, 1000, 1, 100, d, NULL, 2), 1);
	assert_int_equal(V.v[0].from_ms, BASE + 100);
	assert_int_equal(V.v[0].to_ms, BASE + 1100);
}

static void
test_token_bucket(void **state)
{
	static const int64_t same[] = { 0, 0 }, a[] = { 0, 999 }, b[] = { 0, 1000 };

	(void)state;
	/* Two in one ms are up to 0.999 ms apart: 1.002 tokens/ms refills one. */
	assert_int_equal(replay(RLG_TOKEN_BUCKET, 1002, 1000, 1, 0, same, NULL, 2), 0);
	assert_int_equal(replay(RLG_TOKEN_BUCKET, 1001, 1000, 1, 0, same, NULL, 2), 1);
	assert_int_equal(V.v[0].admitted, 2);
	assert_string_equal(V.v[0].allowed, "1.999999");
	/* One token per second: stamped 999 ms apart is at most 999.999 ms. */
	assert_int_equal(replay(RLG_GCRA, 1, 1000, 1, 0, a, NULL, 2), 1);
	assert_int_equal(replay(RLG_GCRA, 1, 1000, 1, 0, b, NULL, 2), 0);
	/* A full bucket admits burst at once, not one more. */
	{
		int64_t t[11] = { 0 };

		assert_int_equal(replay(RLG_TOKEN_BUCKET, 1, 60000, 10, 0, t, NULL, 10), 0);
		assert_int_equal(replay(RLG_TOKEN_BUCKET, 1, 60000, 10, 0, t, NULL, 11), 1);
		assert_int_equal(V.v[0].decisions, 1);
	}
}

static void
test_leaky_bucket(void **state)
{
	static const int64_t t[] = { 0, 0 }, d10[] = { 0, 10 }, d9[] = { 0, 9 },
	    d8[] = { 0, 8 }, w10[] = { 10, 0 }, w11[] = { 11, 0 };

	(void)state;
	/* T = 10 ms: departures stamped 9 ms apart may be 10.998 ms apart. */
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 10, 0, t, d10, 2), 0);
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 10, 0, t, d9, 2), 0);
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 10, 0, t, d8, 2), 1);
	assert_string_equal(V.v[0].check, "spacing");
	/* burst 1 x T: a wait of 10 ms is allowed, a delay of 11 ms (> 10) not. */
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 1, 0, t, w10, 1), 0);
	assert_int_equal(replay(RLG_LEAKY_BUCKET, 1, 10, 1, 0, t, w11, 1), 1);
	assert_string_equal(V.v[0].check, "wait");
}

/* A row the gateway's audit writer stores: rule api, key org1, 100/s. */
struct trow {
	int64_t		 at;		/* ms after BASE */
	int		 allowed;
	const char	*reason;
};

/* Writes rows[0..n) into a new database under a fresh directory: its path
 * into path (dir is the directory, removed by rm_db()). */
static void
make_db(char *dir, char *path, size_t len, const struct trow *rows, size_t n)
{
	char err[256], id[16];
	struct audit *a;
	size_t i;

	assert_non_null(mkdtemp(dir));
	snprintf(path, len, "%s/audit.db", dir);
	assert_non_null(a = audit_open_inline(path, 64, err, sizeof(err)));
	for (i = 0; i < n; i++) {
		struct audit_row r = { BASE + rows[i].at, id, "api", "org1",
		    "fixed_window", rows[i].allowed, rows[i].reason, 1, 100,
		    1000, 100, -1, -1, -1, "GET", "/", "10.0.0.1",
		    rows[i].allowed ? 200 : 429, 10 };

		snprintf(id, sizeof(id), "r%zu", i);
		assert_int_equal(audit_push(a, &r), 0);
	}
	assert_int_equal(audit_close(a, 5000), 0);
}

static void
rm_db(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void
open_db(struct rdbs *dbs, const char *path)
{
	char err[512], *paths[1] = { (char *)path };

	memset(dbs, 0, sizeof(*dbs));
	if (db_open_all(dbs, paths, 1, err, sizeof(err)) == -1)
		fail_msg("%s", err);
}

/* --verify's count of rows admitted without a count in [since, until). */
static int64_t
unchecked_in(const char *path, int64_t since, int64_t until)
{
	struct filter f = { NULL, NULL, since, until };
	struct verify v;
	struct rdbs dbs;
	char err[512];
	int64_t n;

	open_db(&dbs, path);
	memset(&v, 0, sizeof(v));
	if (verify_run(&v, &dbs, &f, 0, 0, err, sizeof(err)) == -1)
		fail_msg("%s", err);
	n = v.unchecked;
	assert_int_equal(v.nrules, 1);
	assert_int_equal(v.rules[0].unchecked, n);
	verify_free(&v);
	db_close_all(&dbs);
	return n;
}

/* Admitted without a count (reason redis_error) at BASE + 999, 1000, 1500
 * and 2000: --verify counts those in [since, until). */
static void
test_verify_range(void **state)
{
	static const struct trow rows[] = { { 999, 1, "redis_error" },
	    { 1000, 1, "redis_error" }, { 1500, 1, "redis_error" },
	    { 2000, 1, "redis_error" } };
	char dir[] = "/tmp/rlgate-test-report.XXXXXX", path[64];

	(void)state;
	make_db(dir, path, sizeof(path), rows, 4);
	assert_int_equal(unchecked_in(path, INT64_MIN, INT64_MAX), 4);
	/* The row at exactly since counts; the one at until does not. */
	assert_int_equal(unchecked_in(path, BASE + 1000, BASE + 2000), 2);
	assert_int_equal(unchecked_in(path, BASE + 1001, BASE + 2000), 1);
	assert_int_equal(unchecked_in(path, BASE + 1000, BASE + 2001), 3);
	assert_int_equal(unchecked_in(path, BASE + 2000, INT64_MAX), 1);
	assert_int_equal(unchecked_in(path, INT64_MIN, BASE + 999), 0);
	assert_int_equal(unchecked_in(path, INT64_MIN, BASE + 1000), 1);
	rm_db(dir);
}

/* "start:allowed:denied:unchecked" of each window of the one series. */
static char *
windows(const char *path, int64_t width, int64_t since, int64_t until,
    char *buf, size_t len)
{
	struct filter f = { NULL, NULL, since, until };
	struct agg a;
	struct rdbs dbs;
	char err[512];
	size_t i, n = 0;

	open_db(&dbs, path);
	memset(&a, 0, sizeof(a));
	if (agg_run(&a, &dbs, &f, width, 0, err, sizeof(err)) == -1)
		fail_msg("%s", err);
	assert_int_equal(a.nseries, 1);
	buf[0] = '\0';
	for (i = 0; i < a.series[0].nwins; i++) {
		const struct win *w = &a.series[0].wins[i];

		n += (size_t)snprintf(buf + n, len - n, "%s%lld:%lld:%lld:%lld",
		    i ? " " : "", (long long)(w->start_ms - BASE),
		    (long long)w->allowed, (long long)w->denied,
		    (long long)w->unchecked);
	}
	agg_free(&a);
	db_close_all(&dbs);
	return buf;
}

/* A window is [start, start + width): a row at its end is the next one's;
 * --since and --until cut rows, never windows' arithmetic; unchecked are
 * the admitted redis_error rows only (on_error = deny's are denials). */
static void
test_agg_windows(void **state)
{
	static const struct trow rows[] = { { 0, 1, "limit" },
	    { 999, 0, "limit" }, { 1000, 1, "redis_error" },
	    { 1999, 1, "limit" }, { 2000, 0, "limit" }, { 2500, 0, "other_rule" },
	    { 2600, 0, "redis_error" } };
	char dir[] = "/tmp/rlgate-test-report.XXXXXX", path[64], b[256];

	(void)state;
	make_db(dir, path, sizeof(path), rows, 7);
	assert_string_equal(windows(path, 1000, INT64_MIN, INT64_MAX, b, sizeof(b)),
	    "0:1:1:0 1000:2:0:1 2000:0:3:0");
	assert_string_equal(windows(path, 1000, BASE + 999, BASE + 2000, b, sizeof(b)),
	    "0:0:1:0 1000:2:0:1");
	assert_string_equal(windows(path, 2000, INT64_MIN, INT64_MAX, b, sizeof(b)),
	    "0:3:1:1 2000:0:3:0");
	assert_string_equal(windows(path, 500, BASE + 1000, INT64_MAX, b, sizeof(b)),
	    "1000:1:0:1 1500:1:0:0 2000:0:1:0 2500:0:2:0");
	assert_string_equal(windows(path, 1, BASE + 999, BASE + 1001, b, sizeof(b)),
	    "999:0:1:0 1000:1:0:1");
	rm_db(dir);
	assert_true(agg_per_second(100, 1000) == 100.0);
	assert_true(agg_per_second(5, 10) == 500.0);
	assert_true(agg_per_second(3, 60000) == 0.05);
}

/* What a scan handed over (rowscan's consumer below). */
struct seen {
	int64_t		 n, last_id, keyless, at_sum;
	int64_t		 stop_at;	/* the row that stops the scan; 0: none */
	int		 disorder;	/* an id not above the one before */
};

/* Rows of (id, key, ts_ms). */
static int
see_row(void *arg, const int64_t *v, uint32_t nulls)
{
	struct seen *s = arg;

	s->disorder |= v[0] <= s->last_id;
	s->last_id = v[0];
	s->keyless += nulls == 2 && v[1] == 0;
	s->at_sum += v[2] - BASE;
	return ++s->n == s->stop_at;
}

static struct seen
scan_rows(const char *path, const struct filter *f, const char *where,
    int jobs, int64_t stop_at, int *rc)
{
	struct seen s = { 0, 0, 0, 0, stop_at, 0 };
	struct rowids x;
	struct rdbs dbs;
	char err[512];

	open_db(&dbs, path);
	assert_int_equal(rowids_load(&dbs.v[0], &x, err, sizeof(err)), 0);
	*rc = rowscan_run(&dbs.v[0], &x, f, "id, key, ts_ms", 3, where, jobs,
	    see_row, &s, err, sizeof(err));
	if (*rc == -1)
		fail_msg("%s", err);
	rowids_free(&x);
	db_close_all(&dbs);
	return s;
}

/* The same through rowscan_next(): rows a chunk at a time, by threads
 * threads (-1: any number). */
static struct seen
pull_rows(const char *path, const struct filter *f, int jobs, int threads)
{
	struct seen s = { 0, 0, 0, 0, 0, 0 };
	const int64_t *rows;
	struct rowscan *rs;
	struct rowids x;
	struct rdbs dbs;
	char err[512];
	size_t n;
	int rc;

	open_db(&dbs, path);
	assert_int_equal(rowids_load(&dbs.v[0], &x, err, sizeof(err)), 0);
	if ((rs = rowscan_open(&dbs.v[0], &x, f, "id, key, ts_ms", 3, "1", jobs,
	    err, sizeof(err))) == NULL)
		fail_msg("%s", err);
	if (threads >= 0)
		assert_int_equal(rowscan_threads(rs), threads);
	while ((rc = rowscan_next(rs, &rows, &n, err, sizeof(err))) == 1) {
		assert_true(n > 0 && n <= 8192);
		for (size_t i = 0; i < n; i++)
			see_row(&s, rows + i * 4 + 1, (uint32_t)rows[i * 4]);
	}
	if (rc == -1)
		fail_msg("%s", err);
	rowscan_close(rs);
	rowids_free(&x);
	db_close_all(&dbs);
	return s;
}

/*
 * 30000 rows, one a ms (ids 1 to 30000), every tenth without a key; ids
 * 9000 to 20999 deleted, a gap wider than a chunk. Every number of threads
 * hands over the same rows once, in id order: 18000, 1800 keyless, their
 * ms after BASE summing to 449985000 - 179982000; with a time filter, a
 * where clause, and a rule and key (found by id; none for names no row
 * has) as well; and the consumer stops a scan at its row; pulled a chunk
 * at a time, the same. Then ids that leap to 2^62 and 2^63 - 1.
 */
static void
test_rowscan(void **state)
{
	static const int jobs[] = { 1, 2, 3, 8 };
	const struct filter all = { NULL, NULL, INT64_MIN, INT64_MAX },
	    span = { NULL, NULL, BASE + 5000, BASE + 25000 },
	    org1 = { "api", "org1", INT64_MIN, INT64_MAX },
	    nokey = { "api", "org2", INT64_MIN, INT64_MAX },
	    norule = { "web", NULL, INT64_MIN, INT64_MAX };
	char dir[] = "/tmp/rlgate-test-report.XXXXXX", path[64], err[256];
	struct audit *a;
	struct seen s;
	sqlite3 *db;
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	/* The rows in one queue: inline, the writer takes them at the close. */
	assert_non_null(a = audit_open_inline(path, 30000, err, sizeof(err)));
	for (int i = 0; i < 30000; i++) {
		struct audit_row r = { BASE + i, "r", "api", i % 10 ? "org1" :
		    NULL, "fixed_window", 1, "limit", 1, 100, 1000, 100, -1, -1,
		    -1, "GET", "/", "10.0.0.1", 200, 10 };

		assert_int_equal(audit_push(a, &r), 0);
	}
	assert_int_equal(audit_close(a, 5000), 0);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DELETE FROM rlg_rows WHERE id "
	    "BETWEEN 9000 AND 20999", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
		s = scan_rows(path, &all, "1", jobs[j], 0, &rc);
		assert_int_equal(rc, 0);
		assert_int_equal(s.n, 18000);
		assert_int_equal(s.disorder, 0);
		assert_int_equal(s.last_id, 30000);
		assert_int_equal(s.keyless, 1800);
		assert_int_equal(s.at_sum, 449985000 - 179982000);
		/* ms 5000 to 8998 and 20999 to 24999. */
		s = scan_rows(path, &span, "1", jobs[j], 0, &rc);
		assert_int_equal(s.n, 3999 + 4001);
		assert_int_equal(s.disorder, 0);
		s = scan_rows(path, &all, "key IS NOT NULL", jobs[j], 0, &rc);
		assert_int_equal(s.n, 18000 - 1800);
		assert_int_equal(s.keyless, 0);
		/* The filter's rule and key, found by id. */
		s = scan_rows(path, &org1, "1", jobs[j], 0, &rc);
		assert_int_equal(s.n, 18000 - 1800);
		assert_int_equal(scan_rows(path, &nokey, "1", jobs[j], 0,
		    &rc).n, 0);
		assert_int_equal(scan_rows(path, &norule, "1", jobs[j], 0,
		    &rc).n, 0);
		s = scan_rows(path, &all, "1", jobs[j], 10000, &rc);
		assert_int_equal(rc, 1);
		assert_int_equal(s.n, 10000);
		/* Ids 1 to 30000: 4 chunks, as many threads as -j up to 4. */
		s = pull_rows(path, &all, jobs[j], jobs[j] == 1 ? 0 :
		    jobs[j] < 4 ? jobs[j] : 4);
		assert_int_equal(s.n, 18000);
		assert_int_equal(s.disorder, 0);
		assert_int_equal(s.keyless, 1800);
		assert_int_equal(s.at_sum, 449985000 - 179982000);
		assert_int_equal(pull_rows(path, &span, jobs[j], -1).n,
		    3999 + 4001);
	}
	/* Ids leaping to 2^62 and to the last one (a hand-made file): read
	 * by rows, on one thread whatever -j says, each row once. */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "INSERT INTO rlg_rows SELECT "
	    "4611686018427387904, ts_ms, rq, rn, rule, key, outcome, cost, "
	    "remaining, retry_after_ms, delay_ms, path, client_ip, latency_us "
	    "FROM rlg_rows WHERE id = 30000; INSERT INTO rlg_rows SELECT "
	    "9223372036854775807, ts_ms, rq, rn, rule, key, outcome, cost, "
	    "remaining, retry_after_ms, delay_ms, path, client_ip, latency_us "
	    "FROM rlg_rows WHERE id = 30000", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
		/* No threads: the ids are far too sparse to cut. */
		s = pull_rows(path, &all, jobs[j], 0);
		assert_int_equal(s.n, 18002);
		assert_int_equal(s.disorder, 0);
		assert_int_equal(s.last_id, INT64_MAX);
		s = scan_rows(path, &all, "1", jobs[j], 0, &rc);
		assert_int_equal(s.n, 18002);
		assert_int_equal(s.disorder, 0);
		assert_int_equal(s.last_id, INT64_MAX);
	}
	rm_db(dir);
}

/* A row of one request: its time (ms after BASE), request id and rule. */
struct qrow {
	int64_t		 at;
	const char	*id, *rule;
};

/* The what-if's requests of the rows, written by the gateway's writer
 * (second layout), as "ROW+ROW ROW ..." (rowids, a request each word). */
static char *
requests(const struct qrow *rows, size_t n, char *buf, size_t len)
{
	char dir[] = "/tmp/rlgate-test-report.XXXXXX", path[64], err[512];
	const struct wrow **g;
	struct wreader *r;
	struct rdbs dbs;
	struct audit *a;
	size_t i, ng, o = 0;
	int rc;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	assert_non_null(a = audit_open_inline(path, 64, err, sizeof(err)));
	for (i = 0; i < n; i++) {
		struct audit_row q = { BASE + rows[i].at, rows[i].id,
		    rows[i].rule, "k", "fixed_window", 1, "limit", 1, 100,
		    1000, 100, -1, -1, -1, "GET", "/", "10.0.0.1", 200, 10 };

		assert_int_equal(audit_push(a, &q), 0);
	}
	assert_int_equal(audit_close(a, 5000), 0);
	open_db(&dbs, path);
	if ((r = whatif_read_open(&dbs, INT64_MAX, 0, err, sizeof(err))) == NULL)
		fail_msg("%s", err);
	buf[0] = '\0';
	while ((rc = whatif_read_next(r, &g, &ng, err, sizeof(err))) == 1)
		for (i = 0; i < ng; i++)
			o += (size_t)snprintf(buf + o, len - o, "%s%lld",
			    i ? "+" : o ? " " : "", (long long)g[i]->id);
	if (rc == -1)
		fail_msg("%s", err);
	whatif_read_free(r);
	db_close_all(&dbs);
	rm_db(dir);
	return buf;
}

/*
 * One request per request id (fcgi/audit.h's three forms: "P-N", 16 hex
 * digits, other text), its rows at most RLG_WHATIF_GROUP_MS after its
 * first: a-1 is not b-1 (the same N), nor the 16-hex 1; a-1's rule c row
 * 200 ms after its first joins it, after z's row of that ms; b-1's rule a
 * row 201 ms after its
 * first is the next request of b-1, q's rule c 230 ms after its first
 * that of q; ffffffffffffffff (rn -1) is an id as any other.
 */
static void
test_whatif_requests(void **state)
{
	static const struct qrow rows[] = { { 0, "a-1", "a" },
	    { 0, "b-1", "b" }, { 0, "0000000000000001", "b" },
	    { 0, "a-1", "b" }, { 0, "ffffffffffffffff", "a" },
	    { 10, "ffffffffffffffff", "b" }, { 20, "q", "a" }, { 30, "q", "b" },
	    { 200, "z", "a" }, { 200, "a-1", "c" }, { 201, "b-1", "a" },
	    { 250, "q", "c" } };
	char b[256];

	(void)state;
	assert_string_equal(requests(rows, 12, b, sizeof(b)),
	    "1+4+10 2 3 5+6 7+8 9 11 12");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_start),
		cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_parse_time),
		cmocka_unit_test(test_durations_and_steps),
		cmocka_unit_test(test_fixed_window),
		cmocka_unit_test(test_sliding_log),
		cmocka_unit_test(test_sliding_window),
		cmocka_unit_test(test_token_bucket),
		cmocka_unit_test(test_leaky_bucket),
		cmocka_unit_test(test_verify_range),
		cmocka_unit_test(test_agg_windows),
		cmocka_unit_test(test_rowscan),
		cmocka_unit_test(test_whatif_requests),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	free(V.v);
	intern_free(&P.keys);
	return rc;
}
