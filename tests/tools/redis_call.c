/*
 * redis_call: drives the Redis layer (fcgi/redis.c) from the shell, for
 * tests/it/it_cluster.sh and it_sentinel.sh. Reads a configuration, runs the
 * calls given in one redis_run() (optionally again and again on the same
 * struct redis, as an event loop would), and prints one line per call:
 *
 *   RUN<TAB>CALL<TAB>STATUS<TAB>NODE<TAB>REPLY
 *
 * STATUS is OK, FAILED or UNSENT; REPLY is the reply written compactly
 * (integers, strings, (nil), (error) text, [a, b] for arrays).
 *
 *   redis_call -c CONF [-r RUNS] [-i MS] [-U] [-w] [-S] KEY CMD ARG...
 *       [; KEY CMD ...]
 *   redis_call -c CONF -P        redis_probe(): "probe OK" or the error
 *   redis_call -c CONF -H        redis_health(): a line per master
 *   redis_call -c CONF -E        redis_each_master(): address and DBSIZE
 *
 * KEY "-" routes to any master. -U stops at the first run where every call
 * is OK after one where some were not. -w waits for a line on stdin before
 * each run after the first (the test changes the cluster in between); a
 * line "q" ends. -S prints redis_health()'s lines after the runs. Exit
 * status: 0 when the last run's calls were all OK.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "conf.h"
#include "log.h"
#include "redis.h"
#include "redis_io.h"

#define MAX_CALLS	256
#define MAX_ARGS	64

static void
print_reply(const redisReply *r)
{
	size_t i;

	if (r == NULL) {
		printf("-");
		return;
	}
	switch (r->type) {
	case REDIS_REPLY_INTEGER:
		printf("%lld", r->integer);
		break;
	case REDIS_REPLY_NIL:
		printf("(nil)");
		break;
	case REDIS_REPLY_ERROR:
		printf("(error) %s", r->str);
		break;
	case REDIS_REPLY_ARRAY:
		printf("[");
		for (i = 0; i < r->elements; i++) {
			if (i > 0)
				printf(", ");
			print_reply(r->element[i]);
		}
		printf("]");
		break;
	default:
		printf("%s", r->str);
	}
}

static const char *
status_name(enum rlg_call_status s)
{
	return s == RLG_CALL_OK ? "OK" : s == RLG_CALL_FAILED ? "FAILED" :
	    "UNSENT";
}

static int
print_master(void *arg, struct redisContext *ctx, const char *address)
{
	redisReply *r = redisCommand(ctx, "DBSIZE");

	(void)arg;
	printf("%s\t", address);
	print_reply(r);
	printf("\n");
	freeReplyObject(r);
	return 0;
}

/* redis_health(): address, role, ok|down, why, errors, redirects,
 * refreshes. */
static int
print_health(struct redis *r, const struct conf *c)
{
	struct redis_health h[64];
	char err[1024];
	int m = redis_health(r, c, h, 64, err, sizeof(err)), i;

	if (m < 0)
		printf("health: %s\n", err);
	for (i = 0; i < m && i < 64; i++)
		printf("health\t%s\t%s\t%s\t%s\t%lld\t%lld\t%lld\n",
		    h[i].address, h[i].role, h[i].ok ? "ok" : "down",
		    h[i].ok ? "-" : h[i].errstr, h[i].errors, h[i].redirects,
		    h[i].refreshes);
	fflush(stdout);
	return m;
}

static void
usage(void)
{
	fprintf(stderr, "usage: redis_call -c CONF [-r RUNS] [-i MS] [-U] "
	    "KEY CMD ARG... [; KEY CMD ...]\n"
	    "       redis_call -c CONF -P | -H | -E\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static struct redis_call calls[MAX_CALLS];
	static const char *args[MAX_CALLS][MAX_ARGS];
	const char *path = NULL;
	struct redis *r;
	struct conf *c;
	char *errors, err[1024];
	int ch, runs = 1, interval_ms = 100, until_ok = 0, what = 0;
	int run, bad = 0, i, j, wait_line = 0, stats = 0, failed = 0;
	char line[64];
	size_t n = 0;

	while ((ch = getopt(argc, argv, "c:r:i:UwSPHE")) != -1)
		switch (ch) {
		case 'c': path = optarg; break;
		case 'r': runs = atoi(optarg); break;
		case 'i': interval_ms = atoi(optarg); break;
		case 'U': until_ok = 1; break;
		case 'w': wait_line = 1; break;
		case 'S': stats = 1; break;
		case 'P': case 'H': case 'E': what = ch; break;
		default: usage();
		}
	if (path == NULL)
		usage();
	if (wait_line && runs == 1)
		runs = 1000000;	/* until "q" or the end of stdin */
	if ((c = conf_load(path, &errors)) == NULL) {
		fprintf(stderr, "%s", errors ? errors : "out of memory\n");
		return 2;
	}
	if (redis_io_setup(c, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 2;
	}
	log_set_level(c->log_level);
	if (what == 'P') {
		bad = redis_probe(c, err, sizeof(err));
		if (bad == -1)
			printf("probe: %s\n", err);
		else
			printf("probe OK\n");
		conf_free(c);
		return bad == -1;
	}
	if ((r = redis_new()) == NULL)
		return 2;
	if (what == 'H') {
		int m = print_health(r, c);

		redis_free(r);
		conf_free(c);
		return m < 0;
	}
	if (what == 'E') {
		bad = redis_each_master(r, c, print_master, NULL, err,
		    sizeof(err));
		if (bad == -1)
			printf("each: %s\n", err);
		redis_free(r);
		conf_free(c);
		return bad == -1;
	}
	for (i = optind; i < argc && n < MAX_CALLS; n++) {
		struct redis_call *cl = &calls[n];

		cl->key = strcmp(argv[i], "-") == 0 ? NULL : argv[i];
		cl->keylen = cl->key ? strlen(cl->key) : 0;
		cl->argv = args[n];
		for (i++, j = 0; i < argc && strcmp(argv[i], ";") != 0 &&
		    j < MAX_ARGS; i++)
			args[n][j++] = argv[i];
		if (j == 0)
			usage();
		cl->argc = j;
		i++;	/* the ";" */
	}
	if (n == 0)
		usage();
	for (run = 1; run <= runs; run++) {
		if (run > 1 && wait_line) {
			if (fgets(line, sizeof(line), stdin) == NULL ||
			    line[0] == 'q')
				break;
		} else if (run > 1)
			sleep_ms(interval_ms);
		bad = redis_run(r, c, calls, n);
		for (i = 0; i < (int)n; i++) {
			printf("%d\t%d\t%s\t%s\t", run, i + 1,
			    status_name(calls[i].status),
			    calls[i].node >= 0 ?
			    redis_node_address(r, calls[i].node) : "-");
			print_reply(calls[i].reply);
			printf("\n");
			freeReplyObject(calls[i].reply);
		}
		fflush(stdout);
		if (until_ok && bad == 0 && failed)
			break;
		failed |= bad != 0;
	}
	if (stats)
		print_health(r, c);
	redis_free(r);
	conf_free(c);
	return bad != 0;
}
