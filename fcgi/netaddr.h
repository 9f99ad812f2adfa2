/*
 * netaddr: the network addresses a configuration names, as text: a
 * listening or Redis address (host:port, [IPv6]:port, unix:/path) and
 * CIDRs (10.0.0.0/8, ::1/128), and matching a client address against a
 * CIDR list. Pure code: nothing is resolved, opened or connected here.
 */
#ifndef RLG_NETADDR_H
#define RLG_NETADDR_H

#include <stddef.h>

struct cidr {
	int			 family;	/* AF_INET or AF_INET6 */
	unsigned char		 addr[16];	/* host bits past bits are 0 */
	int			 bits;
};

/*
 * Is s host:port, [IPv6]:port or unix:/path (an absolute path that fits
 * in sun_path)? A host is a name or an IPv4 address; the port 1 to 65535.
 * Returns 0, or -1 with *why pointing at a static phrase that follows the
 * value in a message ("has no port").
 */
int		 netaddr_check(const char *s, const char **why);

/*
 * Splits "host:port" or "[v6]:port" (as netaddr_check() accepts) into
 * host, without brackets, and returns the port part (inside addr); NULL
 * when addr has no ':' or the host does not fit in hostlen.
 */
const char	*netaddr_split(const char *addr, char *host, size_t hostlen);

/*
 * The len bytes at tok, "10.0.0.0/8", "::1/128" or a bare address (/32,
 * /128), into *out, with the host bits past the prefix cleared
 * (10.1.2.3/8 is 10.0.0.0/8, as nginx's set_real_ip_from reads it).
 * Returns 0, or -1 with *why pointing at a static phrase.
 */
int		 netaddr_parse_cidr(const char *tok, size_t len,
		    struct cidr *out, const char **why);

/*
 * Is the address (AF_INET/AF_INET6 bytes) inside one of list[0..n)? An
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d) also matches IPv4 CIDRs.
 * Returns 1 or 0 (0 for a NULL list or addr).
 */
int		 netaddr_in_cidrs(const struct cidr *list, size_t n,
		    int family, const unsigned char *addr);

#endif
