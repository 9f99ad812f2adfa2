/*
 * netaddr: addresses and CIDRs as a configuration writes them (see
 * netaddr.h). Form only: no name is resolved and no socket made here.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "ascii.h"
#include "conf_values.h"
#include "netaddr.h"

int
netaddr_check(const char *s, const char **why)
{
	struct sockaddr_un sun;
	struct in6_addr a6;
	char host[256];
	const char *colon, *p, *e;
	long long port;

	if (strncmp(s, "unix:", 5) == 0) {
		*why = "has no absolute socket path after unix:";
		if (s[5] != '/')
			return -1;
		*why = "has a socket path that is too long";
		return strlen(s + 5) < sizeof(sun.sun_path) ? 0 : -1;
	}
	if (s[0] == '[') {
		*why = "is not a bracketed IPv6 address with a port";
		if ((e = strchr(s, ']')) == NULL || e[1] != ':' ||
		    (size_t)(e - s - 1) >= sizeof(host))
			return -1;
		snprintf(host, sizeof(host), "%.*s", (int)(e - s - 1), s + 1);
		if (inet_pton(AF_INET6, host, &a6) != 1)
			return -1;
		colon = e + 1;
	} else {
		*why = "has no port";
		if ((colon = strrchr(s, ':')) == NULL)
			return -1;
		*why = "has no host (use 127.0.0.1 or 0.0.0.0 for every "
		    "interface)";
		if (colon == s)
			return -1;
		*why = "needs brackets around an IPv6 address";
		if (memchr(s, ':', (size_t)(colon - s)) != NULL)
			return -1;
		*why = "has a host name with characters a host name has not";
		for (p = s; p < colon; p++)
			if (!ascii_is_alnum(*p) && *p != '.' && *p != '-' &&
			    *p != '_')
				return -1;
	}
	*why = "has a port that is not a number from 1 to 65535";
	return conf_parse_int(colon + 1, 1, 65535, &port, &e);
}

const char *
netaddr_split(const char *addr, char *host, size_t hostlen)
{
	const char *colon = strrchr(addr, ':');
	int bracket = addr[0] == '[';
	size_t n;

	if (colon == NULL)
		return NULL;
	n = (size_t)(colon - addr) - (bracket ? 2 : 0);
	if ((size_t)(colon - addr) < (bracket ? 2u : 0u) || n >= hostlen)
		return NULL;
	memcpy(host, addr + bracket, n);
	host[n] = '\0';
	return colon + 1;
}

int
netaddr_parse_cidr(const char *tok, size_t len, struct cidr *out,
    const char **why)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash;
	long long bits;
	int i;

	*why = "is not an address or CIDR (use e.g. 10.0.0.0/8 or ::1/128)";
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, tok, len);
	buf[len] = '\0';
	if ((slash = strchr(buf, '/')) != NULL)
		*slash = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->addr) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, out->addr) == 1)
		out->family = AF_INET6;
	else
		return -1;
	out->bits = out->family == AF_INET ? 32 : 128;
	if (slash != NULL) {
		const char *e;

		*why = out->family == AF_INET ?
		    "has a prefix length that is not 0 to 32" :
		    "has a prefix length that is not 0 to 128";
		if (conf_parse_int(slash + 1, 0, out->bits, &bits, &e) == -1)
			return -1;
		out->bits = (int)bits;
	}
	/* Like nginx's set_real_ip_from: host bits past the prefix mean
	 * nothing, so 10.1.2.3/8 is 10.0.0.0/8. */
	for (i = out->bits; i < 128; i++)
		out->addr[i / 8] &= (unsigned char)~(0x80u >> (i % 8));
	return 0;
}

static int
prefix_match(const unsigned char *net, const unsigned char *addr, int bits)
{
	int whole = bits / 8, rest = bits % 8;
	unsigned char mask;

	if (memcmp(net, addr, (size_t)whole) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (unsigned char)(0xff << (8 - rest));
	return (net[whole] & mask) == (addr[whole] & mask);
}

int
netaddr_in_cidrs(const struct cidr *list, size_t n, int family,
    const unsigned char *addr)
{
	static const unsigned char v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};
	const unsigned char *v4 = NULL;
	size_t i;

	if (list == NULL || addr == NULL)
		return 0;
	/* A dual-stack socket shows IPv4 peers as ::ffff:a.b.c.d; the
	 * operator wrote a.b.c.d/n. */
	if (family == AF_INET)
		v4 = addr;
	else if (family == AF_INET6 && memcmp(addr, v4mapped, 12) == 0)
		v4 = addr + 12;
	for (i = 0; i < n; i++) {
		const struct cidr *c = &list[i];

		if (c->family == AF_INET && v4 != NULL &&
		    prefix_match(c->addr, v4, c->bits))
			return 1;
		if (c->family == AF_INET6 && family == AF_INET6 &&
		    prefix_match(c->addr, addr, c->bits))
			return 1;
	}
	return 0;
}
