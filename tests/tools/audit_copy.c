/*
 * audit_copy: writes every row of an audit database (either layout, read
 * through decisions, in id order) into another file through the gateway's
 * own writer (audit_open, audit_push, audit_close), as rlgate would have
 * written them. For tests that need a file of the layout rlgate writes with
 * known rows (the first layout's fixture), and for measuring the bytes a
 * layout takes for the same rows. Not a migration: rlgate migrates in place.
 *
 *   audit_copy SRC DST      DST is created or appended to; exit 0, or 1
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sqlite3.h>

#include "audit.h"

static const char *
text(sqlite3_stmt *st, int c)
{
	return (const char *)sqlite3_column_text(st, c);
}

/* Below 0 is how audit_row says NULL. */
static int64_t
opt(sqlite3_stmt *st, int c)
{
	return sqlite3_column_type(st, c) == SQLITE_NULL ? -1 :
	    sqlite3_column_int64(st, c);
}

int
main(int argc, char **argv)
{
	struct audit_row r;
	struct audit *a;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char err[512];
	long long n = 0, lost;

	if (argc != 3) {
		fputs("usage: audit_copy SRC DST\n", stderr);
		return 2;
	}
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK || sqlite3_prepare_v2(db, "SELECT ts_ms, request_id, "
	    "rule, key, algorithm, allowed, reason, cost, limit_value, "
	    "window_ms, burst, remaining, retry_after_ms, delay_ms, method, "
	    "path, client_ip, status, latency_us FROM decisions ORDER BY id",
	    -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "audit_copy: %s: %s\n", argv[1],
		    sqlite3_errmsg(db));
		return 1;
	}
	if ((a = audit_open(argv[2], 100000, 1000, 50, err, sizeof(err))) ==
	    NULL) {
		fprintf(stderr, "audit_copy: %s\n", err);
		return 1;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		r.ts_ms = sqlite3_column_int64(st, 0);
		r.request_id = text(st, 1);
		r.rule = text(st, 2);
		r.key = text(st, 3);
		r.algorithm = text(st, 4);
		r.allowed = sqlite3_column_int(st, 5);
		r.reason = text(st, 6);
		r.cost = opt(st, 7);
		r.limit_value = opt(st, 8);
		r.window_ms = opt(st, 9);
		r.burst = opt(st, 10);
		r.remaining = opt(st, 11);
		r.retry_after_ms = opt(st, 12);
		r.delay_ms = opt(st, 13);
		r.method = text(st, 14);
		r.path = text(st, 15);
		r.client_ip = text(st, 16);
		r.status = opt(st, 17);
		r.latency_us = opt(st, 18);
		/* A full queue: the writer catches up. */
		while (audit_push(a, &r) == -1) {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
		n++;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	if ((lost = audit_close(a, 10000)) != 0) {
		fprintf(stderr, "audit_copy: %s: %lld rows not written\n",
		    argv[2], lost);
		return 1;
	}
	printf("%lld rows\n", n);
	return 0;
}
