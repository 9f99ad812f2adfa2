/*
 * freeport: prints a TCP port on 127.0.0.1 that was free a moment ago
 * (bound with port 0 and released), for tests that start servers.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
main(void)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return 1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) == -1)
		return 1;
	printf("%d\n", ntohs(sin.sin_port));
	close(fd);
	return 0;
}
