/*
 * Unit tests for addresses and CIDRs (netaddr) as the configuration loads
 * them: Redis and listen addresses, trusted_proxies and the matching of
 * peers against them, host:port splitting.
 * Run from the repository root.
 */
#include <sys/stat.h>
#include <arpa/inet.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"
#include "conf_load.h"

static void
test_bad_cidrs(void **state)
{
	(void)state;
	expect_one("[gateway]\ntrusted_proxies = 10.0.0.0/8 10.0.0.300\n",
	    "2: [gateway] trusted_proxies: \"10.0.0.300\" is not an address or "
	    "CIDR (use e.g. 10.0.0.0/8 or ::1/128)", NULL);
	expect_one("[gateway]\ntrusted_proxies = 10.0.0.0/33\n",
	    "2: [gateway] trusted_proxies: \"10.0.0.0/33\" has a prefix length "
	    "that is not 0 to 32", NULL);
	expect_one("[gateway]\ntrusted_proxies = ::1/129\n",
	    "2: [gateway] trusted_proxies: \"::1/129\" has a prefix length that "
	    "is not 0 to 128", NULL);
	expect_one("[gateway]\ntrusted_proxies = ::1/\n",
	    "2: [gateway] trusted_proxies: \"::1/\" has a prefix length", NULL);
	expect_one("[gateway]\ntrusted_proxies = localhost\n",
	    "2: [gateway] trusted_proxies: \"localhost\" is not an address",
	    NULL);
	expect_one("[gateway]\ntrusted_proxies = ,\n",
	    "2: [gateway] trusted_proxies: \",\" lists no address", NULL);
}

static void
test_addresses(void **state)
{
	static const char *const good[] = {
		"127.0.0.1:6379", "redis.internal:1", "[::1]:65535",
		"[2001:db8::1]:6379", "unix:/run/redis/redis.sock",
	};
	static const struct {
		const char	*value;
		const char	*why;
	} bad[] = {
		{ "localhost", "has no port" },
		{ ":6379", "has no host" },
		{ "::1:6379", "needs brackets around an IPv6 address" },
		{ "[::1]6379", "is not a bracketed IPv6 address" },
		{ "[nope]:6379", "is not a bracketed IPv6 address" },
		{ "h:0", "has a port that is not a number from 1 to 65535" },
		{ "h:65536", "has a port that" },
		{ "h:http", "has a port that" },
		{ "h/x:1", "has a host name with characters" },
		{ "unix:run/redis.sock", "has no absolute socket path" },
		{ "unix:", "has no absolute socket path" },
	};
	char text[512], prefix[128];
	struct conf *c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\naddress = %s\n"
		    "[gateway]\nlisten = %s\n" RULE_OK, good[i], good[i]);
		c = load_ok(text);
		assert_string_equal(c->redis_address, good[i]);
		assert_string_equal(c->listen, good[i]);
		conf_free(c);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\naddress = %s\n",
		    bad[i].value);
		snprintf(prefix, sizeof(prefix), "2: [redis] address: \"%s\" %s",
		    bad[i].value, bad[i].why);
		expect_one(text, prefix, "(use host:port, [IPv6]:port or "
		    "unix:/path)");
	}
	expect_one("[gateway]\nlisten = 9000\n",
	    "2: [gateway] listen: \"9000\" has no port", NULL);
	expect_one("[redis]\naddress = unix:/"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.sock\n",
	    "2: [redis] address: ", "has a socket path that is too long");
}

static void
test_split_address(void **state)
{
	char host[16];

	(void)state;
	assert_string_equal(netaddr_split("127.0.0.1:9000", host,
	    sizeof(host)), "9000");
	assert_string_equal(host, "127.0.0.1");
	assert_string_equal(netaddr_split("[::1]:6379", host,
	    sizeof(host)), "6379");
	assert_string_equal(host, "::1");
	assert_null(netaddr_split("nocolon", host, sizeof(host)));
	assert_null(netaddr_split("a-very-long-host-name:1", host,
	    sizeof(host)));
}

static void
test_trusted(void **state)
{
	unsigned char a[16];
	struct conf *c;

	(void)state;
	c = load_ok("[gateway]\ntrusted_proxies = 127.0.0.1 10.1.2.3/8 "
	    "192.168.4.0/22 2001:db8::/32 ::1 fe80::/10\n" RULE_OK);
	assert_int_equal(c->ntrusted, 6);
	assert_int_equal(c->trusted[1].bits, 8);
	assert_int_equal(c->trusted[1].addr[1], 0);	/* host bits dropped */

#define V4(s)	(inet_pton(AF_INET, (s), a) == 1 ? a : NULL)
#define V6(s)	(inet_pton(AF_INET6, (s), a) == 1 ? a : NULL)
	assert_true(conf_trusted(c, AF_INET, V4("127.0.0.1")));
	assert_false(conf_trusted(c, AF_INET, V4("127.0.0.2")));
	assert_true(conf_trusted(c, AF_INET, V4("10.255.0.1")));
	assert_false(conf_trusted(c, AF_INET, V4("11.0.0.1")));
	assert_true(conf_trusted(c, AF_INET, V4("192.168.7.255")));
	assert_false(conf_trusted(c, AF_INET, V4("192.168.8.0")));
	assert_false(conf_trusted(c, AF_INET, V4("192.168.3.255")));
	assert_true(conf_trusted(c, AF_INET6, V6("2001:db8:ffff::1")));
	assert_false(conf_trusted(c, AF_INET6, V6("2001:db9::1")));
	assert_true(conf_trusted(c, AF_INET6, V6("::1")));
	assert_false(conf_trusted(c, AF_INET6, V6("::2")));
	assert_true(conf_trusted(c, AF_INET6, V6("febf::1")));
	assert_false(conf_trusted(c, AF_INET6, V6("fec0::1")));
	/* IPv4 peers on a dual-stack socket. */
	assert_true(conf_trusted(c, AF_INET6, V6("::ffff:10.9.8.7")));
	assert_false(conf_trusted(c, AF_INET6, V6("::ffff:11.9.8.7")));
	/* Families do not mix otherwise: 10.0.0.0/8 is not ::a00:0/8. */
	assert_false(conf_trusted(c, AF_INET6, V6("a00::1")));
	conf_free(c);

	c = load_ok("[gateway]\ntrusted_proxies = 0.0.0.0/0\n" RULE_OK);
	assert_true(conf_trusted(c, AF_INET, V4("203.0.113.9")));
	assert_false(conf_trusted(c, AF_INET6, V6("2001:db8::1")));
	conf_free(c);

	c = load_ok("[gateway]\n" RULE_OK);
	assert_int_equal(c->ntrusted, 0);
	assert_false(conf_trusted(c, AF_INET, V4("127.0.0.1")));
	conf_free(c);
	assert_false(conf_trusted(NULL, AF_INET, V4("127.0.0.1")));
#undef V4
#undef V6
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_cidrs),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_split_address),
		cmocka_unit_test(test_trusted),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
