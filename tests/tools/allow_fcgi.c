/*
 * allow_fcgi: the cost floor of a FastCGI hop, for `make bench`. A trivial
 * FastCGI authorizer that answers "Status: 200\r\n\r\n" to every request,
 * with FCGX_Accept_r in as many threads as rlgate runs workers, and
 * nothing else: no parsing, no Redis, no audit. What rlgate costs is what
 * it adds over this. A benchmark tool, not a test.
 *
 *   allow_fcgi -s HOST:PORT [-w WORKERS]
 *
 * SIGTERM/SIGINT: exit 0 after printing the number of requests answered
 * (on stderr: "allow_fcgi: N requests").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcgiapp.h>

static const char reply[] = "Status: 200\r\n\r\n";
static int listen_fd = -1;
static atomic_int stopping;
static atomic_llong answered;

static void *
worker_main(void *arg)
{
	FCGX_Request req;

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
		FCGX_PutStr(reply, (int)sizeof(reply) - 1, req.out);
		FCGX_Finish_r(&req);
		atomic_fetch_add_explicit(&answered, 1, memory_order_relaxed);
	}
	FCGX_Free(&req, 1);
	return NULL;
}

static int
open_tcp(const char *addr)
{
	struct sockaddr_in sin;
	char host[64];
	const char *colon = strrchr(addr, ':');
	int fd, one = 1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	sin.sin_port = htons((unsigned short)atoi(colon + 1));
	if (inet_pton(AF_INET, host[0] ? host : "127.0.0.1",
	    &sin.sin_addr) != 1)
		return -1;
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, 1024) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

int
main(int argc, char **argv)
{
	const char *addr = NULL;
	pthread_t *t;
	sigset_t sigs;
	int c, i, n = 16, sig;

	while ((c = getopt(argc, argv, "s:w:")) != -1) {
		switch (c) {
		case 's': addr = optarg; break;
		case 'w': n = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (addr == NULL || n < 1 || n > 1024)
		goto usage;
	if ((listen_fd = open_tcp(addr)) == -1) {
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
	return 0;
usage:
	fprintf(stderr, "usage: allow_fcgi -s HOST:PORT [-w WORKERS]\n");
	return 2;
}
