/*
 * allow_fcgi: the cost floor of a FastCGI hop, for `make bench`. A trivial
 * FastCGI authorizer that answers "Status: 200\r\n\r\n" to every request,
 * with FCGX_Accept_r in as many threads as rlgate runs workers, and
 * nothing else: no parsing, no Redis, no audit. What rlgate costs is what
 * it adds over this. A benchmark tool, not a test.
 *
 * With -r, every request first waits for a Redis PING on its worker's own
 * connection, as rlgate waits for its scripts: the cost of the one round
 * trip the design puts on every request, with nothing else of rlgate's
 * (no script, no audit). With -e as well, the round trip runs that script
 * instead of PING, as rlgate would for one rule: EVALSHA with the key
 * allow_fcgi:floor and ARGV "" 1 1000000000 1000 (cost 1 against a limit
 * of 10^9 per second: always admitted). A failed round trip is a 500 and
 * a new connection.
 *
 *   allow_fcgi -s HOST:PORT|/PATH [-w WORKERS] [-r REDIS_HOST:PORT [-e SCRIPT]]
 *
 * SIGTERM/SIGINT: exit 0 after printing the number of requests answered
 * (on stderr: "allow_fcgi: N requests").
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>
#include <hiredis/hiredis.h>

#include "tool.h"

static const char reply[] = "Status: 200\r\n\r\n";
static const char failed[] = "Status: 500\r\n\r\n";
static int listen_fd = -1;
static char redis_host[64];
static int redis_port;
static char *script;	/* -e: its text, loaded on every new connection */
static atomic_int stopping;
static atomic_llong answered;

/*
 * One round trip on *c (PING, or the script), connecting first when
 * needed; sha holds the script's SHA1 from the SCRIPT LOAD on connecting.
 * 0 when the expected reply came back.
 */
static int
round_trip(redisContext **c, char sha[41])
{
	redisReply *r;
	int ok;

	if (*c == NULL && (*c = redisConnect(redis_host, redis_port)) != NULL &&
	    (*c)->err) {
		redisFree(*c);
		*c = NULL;
	}
	if (*c == NULL)
		return -1;
	if (script != NULL && sha[0] == '\0') {
		r = redisCommand(*c, "SCRIPT LOAD %s", script);
		if (r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40)
			memcpy(sha, r->str, 41);
		if (r != NULL)
			freeReplyObject(r);
	}
	if (script == NULL) {
		r = redisCommand(*c, "PING");
		ok = r != NULL && r->type == REDIS_REPLY_STATUS;
	} else {
		r = redisCommand(*c, "EVALSHA %s 1 allow_fcgi:floor %s 1 "
		    "1000000000 1000", sha, "");
		ok = r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements > 0 && r->element[0]->integer == 1;
	}
	if (r != NULL)
		freeReplyObject(r);
	if (!ok) {
		redisFree(*c);
		*c = NULL;
		sha[0] = '\0';
	}
	return ok ? 0 : -1;
}

static void *
worker_main(void *arg)
{
	FCGX_Request req;
	redisContext *redis = NULL;
	char sha[41] = "";
	int ok;

	(void)arg;
	if (FCGX_InitRequest(&req, listen_fd, 0) != 0)
		return NULL;
	for (;;) {
		if (FCGX_Accept_r(&req) < 0) {
			if (atomic_load(&stopping))
				break;
			usleep(10000);
			continue;
		}
		ok = redis_port == 0 || round_trip(&redis, sha) == 0;
		if (ok)
			FCGX_PutStr(reply, (int)sizeof(reply) - 1, req.out);
		else
			FCGX_PutStr(failed, (int)sizeof(failed) - 1, req.out);
		FCGX_Finish_r(&req);
		atomic_fetch_add_explicit(&answered, 1, memory_order_relaxed);
	}
	FCGX_Free(&req, 1);
	if (redis != NULL)
		redisFree(redis);
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *addr = NULL, *colon;
	pthread_t *t;
	sigset_t sigs;
	int c, i, n = 16, sig;

	while ((c = getopt(argc, argv, "e:r:s:w:")) != -1) {
		switch (c) {
		case 'e':
			if ((script = tool_read_file(optarg)) == NULL) {
				fprintf(stderr, "allow_fcgi: %s: cannot read\n",
				    optarg);
				return 1;
			}
			break;
		case 'r':
			colon = strrchr(optarg, ':');
			if (colon == NULL || colon == optarg ||
			    (size_t)(colon - optarg) >= sizeof(redis_host) ||
			    (redis_port = atoi(colon + 1)) <= 0)
				goto usage;
			snprintf(redis_host, sizeof(redis_host), "%.*s",
			    (int)(colon - optarg), optarg);
			break;
		case 's': addr = optarg; break;
		case 'w': n = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (addr == NULL || n < 1 || n > 1024 ||
	    (script != NULL && redis_port == 0))
		goto usage;
	/* A path is a unix socket (libfcgi's, backlog as tool_tcp's). */
	if ((listen_fd = addr[0] == '/' ? FCGX_OpenSocket(addr, 1024) :
	    tool_tcp(addr, 1)) == -1) {
		fprintf(stderr, "allow_fcgi: %s: %s\n", addr, strerror(errno));
		return 1;
	}
	if (FCGX_Init() != 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if ((t = calloc((size_t)n, sizeof(*t))) == NULL)
		return 1;
	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker_main, NULL) != 0)
			return 1;
	while (sigwait(&sigs, &sig) != 0)
		;
	atomic_store(&stopping, 1);
	FCGX_ShutdownPending();
	shutdown(listen_fd, SHUT_RDWR);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	fprintf(stderr, "allow_fcgi: %lld requests\n", atomic_load(&answered));
	free(t);
	free(script);
	return 0;
usage:
	fprintf(stderr, "usage: allow_fcgi -s HOST:PORT|/PATH [-w WORKERS] "
	    "[-r REDIS_HOST:PORT [-e SCRIPT]]\n");
	return 2;
}
