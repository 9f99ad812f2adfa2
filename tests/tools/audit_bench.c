/*
 * audit_bench: pushes N rows from several threads through audit into a
 * fresh SQLite file and prints the rows written per second (first push to
 * audit_close() returning), the latency of audit_push() (a push the full
 * queue refused is tried again after 0.1 ms, inside the measured time), and
 * the rows lost (counted in the database afterwards; must be 0). A
 * benchmark, not a test.
 *
 *   audit_bench [-n ROWS] [-t THREADS] [-q QUEUE] [-b BATCH] [-f FLUSH_MS] [DB]
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit.h"
#include "conf.h"

struct pusher {
	pthread_t	 thread;
	struct audit	*audit;
	int		 id;
	long long	 rows;
	uint32_t	*lat_ns;	/* one per push */
	long long	 failed;
	double		 cpu;		/* this thread's CPU seconds */
};

static double
thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *
push_main(void *arg)
{
	struct pusher *p = arg;
	struct audit_row row;
	struct timespec wait = { 0, 100000 };
	char request_id[48], key[32], ip[32];
	long long i, t0, t1;
	int rc;

	memset(&row, 0, sizeof(row));
	row.request_id = request_id;
	row.rule = "user_list";
	row.key = key;
	row.algorithm = "fixed_window";
	row.reason = "limit";
	row.method = "GET";
	row.path = "/user/list";
	row.client_ip = ip;
	row.cost = 1;
	row.limit_value = 100;
	row.window_ms = 1000;
	row.burst = -1;
	row.delay_ms = 0;
	row.status = 200;
	for (i = 0; i < p->rows; i++) {
		/* As the gateway writes them: a process's random prefix,
		 * a counter in hex. */
		snprintf(request_id, sizeof(request_id), "%016llx-%llx",
		    0x9e3779b97f4a7c15ULL * (unsigned long long)(p->id + 1),
		    (unsigned long long)i);
		snprintf(key, sizeof(key), "org%lld/user/list", i % 97);
		snprintf(ip, sizeof(ip), "10.0.%d.%lld", p->id, i % 251);
		t0 = now_ns();
		row.ts_ms = t0 / 1000000;
		row.allowed = i % 10 != 0;
		row.remaining = row.allowed ? 99 - i % 100 : 0;
		row.retry_after_ms = row.allowed ? 0 : 420;
		row.latency_us = 100 + i % 900;
		/* A full queue refuses the row: a producer that can wait
		 * tries again, so that what is measured is the writer. */
		while ((rc = audit_push(p->audit, &row)) == -1 &&
		    errno == ENOSPC)
			nanosleep(&wait, NULL);
		if (rc == -1)
			p->failed++;
		t1 = now_ns();
		p->lat_ns[i] = t1 - t0 > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)(t1 - t0);
	}
	p->cpu = thread_cpu();
	return NULL;
}

static int
cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return (a > b) - (a < b);
}

static long long
number(const char *s, long long min, long long max, const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "audit_bench: %s: \"%s\" is not a number in "
		    "[%lld, %lld]\n", what, s, min, max);
		exit(2);
	}
	return v;
}

static long long
count_rows(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	long long n = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	    SQLITE_OK && sqlite3_prepare_v2(db, "SELECT count(*), "
	    "count(DISTINCT request_id) FROM decisions", -1, &st, NULL) ==
	    SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_int64(st, 0) == sqlite3_column_int64(st, 1))
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

int
main(int argc, char **argv)
{
	long long rows = 1000000, flush_ms = RLG_AUDIT_FLUSH_MS, t0, t_pushed;
	long long t_closed;
	long long not_written, in_db, failed = 0, i, k, total;
	int threads = 4, queue = RLG_AUDIT_QUEUE, batch = RLG_AUDIT_BATCH, c;
	char dir[] = "/tmp/audit_bench.XXXXXX", path[PATH_MAX], err[512];
	struct pusher *p;
	struct audit *a;
	uint32_t *all;
	struct stat sb;
	struct rusage ru;
	double secs, cpu, cpu_others;
	int keep = 0;

	while ((c = getopt(argc, argv, "n:t:q:b:f:")) != -1) {
		switch (c) {
		case 'n': rows = number(optarg, 1, 1LL << 32, "-n"); break;
		case 't': threads = (int)number(optarg, 1, 256, "-t"); break;
		case 'q': queue = (int)number(optarg, 1, INT_MAX, "-q"); break;
		case 'b': batch = (int)number(optarg, 1, INT_MAX, "-b"); break;
		case 'f': flush_ms = number(optarg, 0, 60000, "-f"); break;
		default:
			fprintf(stderr, "usage: audit_bench [-n ROWS] [-t THREADS] "
			    "[-q QUEUE] [-b BATCH] [-f FLUSH_MS] [DB]\n");
			return 2;
		}
	}
	if (optind < argc) {
		snprintf(path, sizeof(path), "%s", argv[optind]);
		keep = 1;
		if (access(path, F_OK) == 0) {
			fprintf(stderr, "audit_bench: %s exists; give a new "
			    "file\n", path);
			return 2;
		}
	} else {
		if (mkdtemp(dir) == NULL) {
			perror("mkdtemp");
			return 1;
		}
		snprintf(path, sizeof(path), "%s/audit.db", dir);
	}

	if ((a = audit_open(path, queue, batch, flush_ms, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "audit_bench: %s\n", err);
		return 1;
	}
	if ((p = calloc((size_t)threads, sizeof(*p))) == NULL ||
	    (all = malloc((size_t)rows * sizeof(*all))) == NULL) {
		perror("malloc");
		return 1;
	}
	for (i = 0, k = 0; i < threads; i++) {
		p[i].audit = a;
		p[i].id = (int)i;
		p[i].rows = rows / threads + (i < rows % threads);
		p[i].lat_ns = all + k;
		k += p[i].rows;
	}

	t0 = now_ns();
	for (i = 0; i < threads; i++)
		if (pthread_create(&p[i].thread, NULL, push_main, &p[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
	cpu_others = 0;
	for (i = 0; i < threads; i++) {
		pthread_join(p[i].thread, NULL);
		failed += p[i].failed;
		cpu_others += p[i].cpu;
	}
	t_pushed = now_ns();
	not_written = audit_close(a, 5000);
	t_closed = now_ns();
	cpu_others += thread_cpu();

	getrusage(RUSAGE_SELF, &ru);
	cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	in_db = count_rows(path);
	total = rows - failed;
	qsort(all, (size_t)rows, sizeof(*all), cmp_u32);
	secs = (double)(t_closed - t0) / 1e9;
	printf("audit_bench: %lld rows, %d threads, queue %d, batch %d, "
	    "flush %lld ms\n", rows, threads, queue, batch, flush_ms);
	printf("written:  %lld rows in %.3f s = %.0f rows/s (pushes done "
	    "after %.3f s)\n", in_db, secs, (double)in_db / secs,
	    (double)(t_pushed - t0) / 1e9);
	/* On a loaded machine wall time says little; CPU time still does. */
	printf("cpu:      %.3f s user+sys, all threads; writer thread %.3f s "
	    "= %.0f rows per writer CPU second\n", cpu, cpu - cpu_others,
	    (double)in_db / (cpu - cpu_others));
	printf("push:     p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f "
	    "us\n", all[rows / 2] / 1e3, all[rows * 99 / 100] / 1e3,
	    all[rows * 999 / 1000] / 1e3, all[rows - 1] / 1e3);
	if (stat(path, &sb) == 0)
		printf("database: %s, %.1f MB\n", path, sb.st_size / 1e6);
	printf("lost:     %lld (push refused %lld, not written at close %lld, "
	    "missing or duplicated in db %lld)\n",
	    failed + not_written + (in_db < 0 ? total : total - in_db),
	    failed, not_written, in_db < 0 ? total : total - in_db);

	if (!keep) {
		char f[PATH_MAX + 8];
		const char *sfx[] = { "", "-wal", "-shm" };

		for (i = 0; i < 3; i++) {
			snprintf(f, sizeof(f), "%s%s", path, sfx[i]);
			unlink(f);
		}
		rmdir(dir);
	}
	free(all);
	free(p);
	return failed == 0 && not_written == 0 && in_db == rows ? 0 : 1;
}
