/*
 * tool.h: what the tools in tests/tools share. Header only: each
 * tool is one .c file built on its own.
 */
#ifndef RLG_TOOL_H
#define RLG_TOOL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * A TCP socket for HOST:PORT (IPv4; an empty host is 127.0.0.1): listening
 * (SO_REUSEADDR, backlog 1024) or connected (TCP_NODELAY). -1 on error,
 * with errno set.
 */
static inline int
tool_tcp(const char *addr, int listening)
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
	if (listening) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    listen(fd, 1024) == 0)
			return fd;
	} else {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
			return fd;
	}
	close(fd);
	return -1;
}

/* The whole file, NUL-terminated, malloc'd; NULL when it cannot be read. */
static inline char *
tool_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	long len;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 &&
	    (text = calloc(1, (size_t)len + 1)) != NULL &&
	    fread(text, 1, (size_t)len, f) != (size_t)len) {
		free(text);
		text = NULL;
	}
	fclose(f);
	return text;
}

/*
 * xorshift64*: the next number after *state, which it advances (never 0:
 * seed it with 1 or more). The random vectors of lua_check and twin_diff,
 * reproducible from a seed; nothing secret. Not thread-safe on one state.
 */
static inline uint64_t
tool_rnd(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 2685821657736338717ULL;
}

/* tool_rnd() uniform in [lo, hi] (lo <= hi). */
static inline long long
tool_between(uint64_t *state, long long lo, long long hi)
{
	return lo + (long long)(tool_rnd(state) % (uint64_t)(hi - lo + 1));
}

#endif
