/*
 * Unit tests for the Redis layer's pure parts: the slot function (the
 * vectors of issue 20 and the Redis Cluster spec), MOVED/ASK parsing,
 * CLUSTER SLOTS and CLUSTER SHARDS replies built from RESP text (slot
 * numbers as integers and as strings), the rules of [redis] replicas (a
 * master's connected replicas from ROLE, WAIT or not, when the count is
 * read again), and the [redis] keys of conf
 * (mode, address lists, master_name, sentinel_password); and, without a
 * server, redis_run() against a port no one listens on: every call
 * UNSENT, the back-off, the node's error counter, a cluster's own outage
 * record apart from its lone seed's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "conf.h"
#include "redis.h"
#include "replicas.h"
#include "slot.h"

static void
test_crc16(void **state)
{
	(void)state;
	assert_int_equal(slot_crc16("123456789", 9), 0x31C3);
	assert_int_equal(slot_crc16("", 0), 0);
}

static void
test_slot_vectors(void **state)
{
	static const struct { const char *key; int slot; } v[] = {
		{ "123456789", 12739 },
		{ "{user1000}.following", 3443 },
		{ "{user1000}.followers", 3443 },
		{ "{}bar", 6479 },		/* empty tag: the whole key */
		{ "foo{}{bar}", 8363 },		/* the first tag is empty */
		{ "foo{{bar}}zap", 4015 },	/* tag "{bar" */
		{ "foo{bar}{zap}", 5061 },	/* tag "bar" */
		{ "a{b", 13340 },		/* no closing brace */
		{ "bar", 5061 },		/* = foo{bar}{zap} */
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		if (slot_of(v[i].key, strlen(v[i].key)) != v[i].slot)
			fail_msg("%s: slot %d, expected %d", v[i].key,
			    slot_of(v[i].key, strlen(v[i].key)), v[i].slot);
	}
	/* Any bytes, and only len of them. */
	assert_int_equal(slot_of("rl:{a\0b:c}x", 11),
	    (int)(slot_crc16("a\0b:c", 5) & 16383));
	assert_int_equal(slot_of("{bar}zzz", 5), 5061);
}

static void
test_redirects(void **state)
{
	struct slot_redirect rd;
	static const char *const bad[] = {
		"ERR unknown command", "MOVED", "MOVED 1", "MOVED 1 ",
		"MOVED x 127.0.0.1:6379", "MOVED 16384 127.0.0.1:6379",
		"MOVED -1 127.0.0.1:6379", "MOVED 1 127.0.0.1",
		"MOVED 1 127.0.0.1:0", "MOVED 1 127.0.0.1:65536",
		"ASK 1 host:port", "MOVEDX 1 a:1", "ask 1 a:1",
	};
	size_t i;

	(void)state;
	assert_int_equal(slot_parse_redirect("MOVED 3999 127.0.0.1:6381", 25,
	    &rd), 0);
	assert_int_equal(rd.ask, 0);
	assert_int_equal(rd.slot, 3999);
	assert_string_equal(rd.host, "127.0.0.1");
	assert_int_equal(rd.port, 6381);

	assert_int_equal(slot_parse_redirect("ASK 16383 node-2.local:7002",
	    27, &rd), 0);
	assert_int_equal(rd.ask, 1);
	assert_int_equal(rd.slot, 16383);
	assert_string_equal(rd.host, "node-2.local");
	assert_int_equal(rd.port, 7002);

	/* IPv6 as Redis writes it (no brackets), and with brackets. */
	assert_int_equal(slot_parse_redirect("MOVED 0 ::1:30002", 17, &rd), 0);
	assert_string_equal(rd.host, "::1");
	assert_int_equal(rd.port, 30002);
	assert_int_equal(slot_parse_redirect("MOVED 0 [fe80::1]:30002", 23,
	    &rd), 0);
	assert_string_equal(rd.host, "fe80::1");
	/* No host: the node that replied (cluster-announce unknown). */
	assert_int_equal(slot_parse_redirect("MOVED 7 :7000", 13, &rd), 0);
	assert_string_equal(rd.host, "");
	assert_int_equal(rd.port, 7000);
	/* Only len bytes count. */
	assert_int_equal(slot_parse_redirect("MOVED 7 a:7000junk", 14, &rd), 0);
	assert_int_equal(rd.port, 7000);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (slot_parse_redirect(bad[i], strlen(bad[i]), &rd) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
}

/* A reply tree from RESP text, as hiredis would read it. */
static redisReply *
resp(const char *text)
{
	redisReader *rd = redisReaderCreate();
	void *rep = NULL;

	assert_non_null(rd);
	assert_int_equal(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
	assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
	assert_non_null(rep);
	redisReaderFree(rd);
	return rep;
}

struct ranges {
	int		 n;
	int		 first[8], last[8], port[8];
	char		 host[8][64];
};

static int
collect(void *arg, int first, int last, const char *host, int port)
{
	struct ranges *r = arg;

	if (r->n == 8)
		return -1;
	r->first[r->n] = first;
	r->last[r->n] = last;
	r->port[r->n] = port;
	snprintf(r->host[r->n], sizeof(r->host[0]), "%s", host);
	r->n++;
	return 0;
}

static void
test_cluster_slots(void **state)
{
	/* Two ranges: integers (Redis), then strings (a proxy) and an empty
	 * host (the node asked); replicas after the master are skipped. */
	redisReply *rep = resp(
	    "*2\r\n"
	    "*4\r\n:0\r\n:8191\r\n"
	    "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
	    "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n"
	    "*3\r\n$4\r\n8192\r\n$5\r\n16383\r\n"
	    "*2\r\n$0\r\n\r\n$4\r\n7001\r\n");
	struct ranges r = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(slot_parse_slots(rep, collect, &r, err,
	    sizeof(err)), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.first[0], 0);
	assert_int_equal(r.last[0], 8191);
	assert_string_equal(r.host[0], "127.0.0.1");
	assert_int_equal(r.port[0], 7000);
	assert_int_equal(r.first[1], 8192);
	assert_int_equal(r.last[1], 16383);
	assert_string_equal(r.host[1], "");
	assert_int_equal(r.port[1], 7001);
	freeReplyObject(rep);

	/* Malformed: end before start, a slot past 16383, no master. */
	rep = resp("*1\r\n*3\r\n:10\r\n:9\r\n*2\r\n$1\r\na\r\n:1\r\n");
	assert_int_equal(slot_parse_slots(rep, collect, &r, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "CLUSTER SLOTS: entry 1 is not {start, end, "
	    "master...}");
	freeReplyObject(rep);
	rep = resp("*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n");
	assert_int_equal(slot_parse_slots(rep, collect, &r, err,
	    sizeof(err)), -1);
	freeReplyObject(rep);
	rep = resp("*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\na\r\n");
	assert_int_equal(slot_parse_slots(rep, collect, &r, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "CLUSTER SLOTS: entry 1 has no master "
	    "{host, port}");
	freeReplyObject(rep);
	rep = resp("-ERR This instance has cluster support disabled\r\n");
	assert_int_equal(slot_parse_slots(rep, collect, &r, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "CLUSTER SLOTS: ERR This instance has "
	    "cluster support disabled");
	freeReplyObject(rep);
}

static void
test_cluster_shards(void **state)
{
	/* Shard 1: two ranges as integers, its replica listed first. Shard
	 * 2: slots as strings, the master's address in "endpoint" only.
	 * Shard 3: no slots (skipped). */
	redisReply *rep = resp(
	    "*3\r\n"
	    "*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:299\r\n"
	    "$5\r\nnodes\r\n*2\r\n"
	    "*6\r\n$2\r\nip\r\n$8\r\n10.0.0.9\r\n$4\r\nport\r\n:7009\r\n"
	    "$4\r\nrole\r\n$7\r\nreplica\r\n"
	    "*8\r\n$2\r\nid\r\n$1\r\nx\r\n$2\r\nip\r\n$8\r\n10.0.0.1\r\n"
	    "$4\r\nport\r\n:7001\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
	    "*4\r\n$5\r\nslots\r\n*2\r\n$3\r\n100\r\n$3\r\n199\r\n"
	    "$5\r\nnodes\r\n*1\r\n"
	    "*6\r\n$8\r\nendpoint\r\n$6\r\nhost-b\r\n$4\r\nport\r\n"
	    "$4\r\n7002\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
	    "*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*0\r\n");
	struct ranges r = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(slot_parse_shards(rep, collect, &r, err,
	    sizeof(err)), 0);
	assert_int_equal(r.n, 3);
	assert_int_equal(r.first[0], 0);
	assert_int_equal(r.last[0], 99);
	assert_string_equal(r.host[0], "10.0.0.1");
	assert_int_equal(r.port[0], 7001);
	assert_int_equal(r.first[1], 200);
	assert_int_equal(r.last[1], 299);
	assert_int_equal(r.first[2], 100);
	assert_int_equal(r.last[2], 199);
	assert_string_equal(r.host[2], "host-b");
	assert_int_equal(r.port[2], 7002);
	freeReplyObject(rep);

	/* A shard with slots and no master. */
	rep = resp("*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:1\r\n"
	    "$5\r\nnodes\r\n*1\r\n*4\r\n$4\r\nport\r\n:1\r\n$4\r\nrole\r\n"
	    "$7\r\nreplica\r\n");
	r.n = 0;
	assert_int_equal(slot_parse_shards(rep, collect, &r, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "CLUSTER SHARDS: shard 1 has no master with "
	    "an address and port");
	assert_int_equal(r.n, 0);
	freeReplyObject(rep);
	/* An odd slots list. */
	rep = resp("*1\r\n*4\r\n$5\r\nslots\r\n*1\r\n:0\r\n$5\r\nnodes\r\n"
	    "*0\r\n");
	assert_int_equal(slot_parse_shards(rep, collect, &r, err,
	    sizeof(err)), -1);
	freeReplyObject(rep);
}

/* conf_load() of text; returns the conf, or NULL with *errors set. */
static struct conf *
load(const char *text, char **errors)
{
	char path[] = "/tmp/test_redis.XXXXXX";
	struct conf *c;
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	fchmod(fd, 0600);
	f = fdopen(fd, "w");
	fprintf(f, "%s\n[audit]\ndatabase =\n[rule:r]\npath = /\nlimit = 1\n"
	    "window = 1s\n", text);
	fclose(f);
	c = conf_load(path, errors);
	unlink(path);
	return c;
}

/* Does the error text hold needle? */
static void
has_error(const char *text, const char *needle)
{
	char *errors = NULL;
	struct conf *c = load(text, &errors);

	if (c != NULL)
		fail_msg("accepted: %s", text);
	if (errors == NULL || strstr(errors, needle) == NULL)
		fail_msg("errors \"%s\" lack \"%s\"", errors ? errors : "",
		    needle);
	free(errors);
}

static void
test_conf_modes(void **state)
{
	char *errors = NULL;
	struct conf *c;

	(void)state;
	c = load("[redis]", &errors);
	assert_non_null(c);
	assert_int_equal(c->redis_mode, RLG_REDIS_SINGLE);
	assert_string_equal(c->redis_address, "127.0.0.1:6379");
	conf_free(c);

	c = load("[redis]\nmode = cluster\naddress = 127.0.0.1:7000 "
	    "[::1]:7001\tlocalhost:7002", &errors);
	assert_non_null(c);
	assert_int_equal(c->redis_mode, RLG_REDIS_CLUSTER);
	assert_string_equal(c->redis_address,
	    "127.0.0.1:7000 [::1]:7001\tlocalhost:7002");
	conf_free(c);

	c = load("[redis]\nmode = sentinel\naddress = 127.0.0.1:26379 "
	    "127.0.0.1:26380\nmaster_name = mymaster\nsentinel_password = s",
	    &errors);
	assert_non_null(c);
	assert_int_equal(c->redis_mode, RLG_REDIS_SENTINEL);
	assert_string_equal(c->redis_master_name, "mymaster");
	assert_string_equal(c->redis_sentinel_password, "s");
	conf_free(c);

	has_error("[redis]\nmode = replica",
	    ":2: [redis] mode: \"replica\" is not a Redis mode (use single, "
	    "cluster or sentinel)");
	has_error("[redis]\naddress = 127.0.0.1:1 127.0.0.1:2",
	    ":2: [redis] address: lists 2 addresses, but mode = single "
	    "takes one (set mode = cluster or sentinel for a list)");
	has_error("[redis]\nmode = cluster\naddress = 127.0.0.1:1 nope",
	    ":3: [redis] address: \"nope\" has no port");
	has_error("[redis]\nmode = sentinel\naddress = 127.0.0.1:26379",
	    ":2: [redis] mode: is sentinel but master_name is not set");
	has_error("[redis]\nmaster_name = m",
	    ":2: [redis] master_name: is only for mode = sentinel (mode is "
	    "single)");
	has_error("[redis]\nmode = cluster\nsentinel_password = x",
	    ":3: [redis] sentinel_password: is only for mode = sentinel "
	    "(mode is cluster)");
	has_error("[redis]\nmode = cluster\ndatabase = 2",
	    ":3: [redis] database: is 2, but Redis Cluster has only database "
	    "0");
}

/*
 * [redis] replicas: ROLE's list of a master's replicas is its count; a
 * replica's ROLE, an error or a malformed reply is no count. A round waits
 * (WAIT) unless a known count is short; the count is read at first, then
 * once RLG_REPLICAS_EVERY_MS old.
 */
static void
test_replicas(void **state)
{
	redisReply *rep;

	(void)state;
	rep = resp("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
	assert_int_equal(replicas_of_role(rep), 0);
	freeReplyObject(rep);
	rep = resp("*3\r\n$6\r\nmaster\r\n:3100\r\n*2\r\n"
	    "*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7001\r\n$4\r\n3100\r\n"
	    "*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7002\r\n$4\r\n3000\r\n");
	assert_int_equal(replicas_of_role(rep), 2);
	freeReplyObject(rep);
	rep = resp("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7000\r\n"
	    "$9\r\nconnected\r\n:3100\r\n");
	assert_int_equal(replicas_of_role(rep), -1);
	freeReplyObject(rep);
	rep = resp("-NOPERM this user has no permissions to run the 'role' "
	    "command\r\n");
	assert_int_equal(replicas_of_role(rep), -1);
	freeReplyObject(rep);
	rep = resp("*2\r\n$6\r\nmaster\r\n:0\r\n");
	assert_int_equal(replicas_of_role(rep), -1);
	freeReplyObject(rep);
	rep = resp("*3\r\n$6\r\nmaster\r\n:0\r\n:0\r\n");
	assert_int_equal(replicas_of_role(rep), -1);
	freeReplyObject(rep);
	assert_int_equal(replicas_of_role(NULL), -1);

	assert_int_equal(replicas_wait(-1, 1), 1);	/* not known: WAIT */
	assert_int_equal(replicas_wait(0, 1), 0);
	assert_int_equal(replicas_wait(1, 2), 0);
	assert_int_equal(replicas_wait(2, 2), 1);
	assert_int_equal(replicas_wait(3, 2), 1);

	assert_int_equal(replicas_due(0, 5), 1);	/* never read */
	assert_int_equal(replicas_due(1000, 1000), 0);
	assert_int_equal(replicas_due(1000, 1000 + RLG_REPLICAS_EVERY_MS - 1),
	    0);
	assert_int_equal(replicas_due(1000, 1000 + RLG_REPLICAS_EVERY_MS), 1);
}

static void
test_unreachable(void **state)
{
	const char *argv[2] = { "GET", "k" };
	struct redis_call calls[2];
	struct redis *r = redis_new();
	struct redis_node_counters nc[8];
	char *errors = NULL;
	struct conf *c;
	size_t n, i;

	(void)state;
	/* Port 1 on loopback: refused at once. */
	c = load("[redis]\naddress = 127.0.0.1:1\nconnect_timeout = 50ms",
	    &errors);
	assert_non_null(c);
	assert_non_null(r);
	memset(calls, 0, sizeof(calls));
	calls[0].key = "k";
	calls[0].keylen = 1;
	calls[0].argc = 2;
	calls[0].argv = argv;
	calls[1] = calls[0];
	assert_int_equal(redis_run(r, c, calls, 2), 2);
	assert_int_equal(calls[0].status, RLG_CALL_UNSENT);
	assert_int_equal(calls[1].status, RLG_CALL_UNSENT);
	assert_null(calls[0].reply);
	assert_string_equal(redis_node_address(r, calls[0].node),
	    "127.0.0.1:1");
	/* Why, on the handle, naming the node. */
	printf("# redis_errstr: %s\n", redis_errstr(r));
	assert_int_equal(strncmp(redis_errstr(r), "redis 127.0.0.1:1: ", 19),
	    0);
	assert_non_null(strstr(redis_errstr(r), "refused"));
	/* Backed off: not tried again (one error counted, not two). */
	assert_int_equal(redis_run(r, c, calls, 1), 1);
	assert_int_equal(strncmp(redis_errstr(r), "redis 127.0.0.1:1: ", 19),
	    0);
	n = redis_counters(nc, 8);
	for (i = 0; i < n && i < 8; i++)
		if (strcmp(nc[i].address, "127.0.0.1:1") == 0)
			break;
	assert_true(i < n);
	assert_int_equal(nc[i].errors, 1);
	assert_int_equal(nc[i].redirects, 0);
	assert_int_equal(redis_run(r, c, calls, 0), 0);
	assert_string_equal(redis_errstr(r), "");
	redis_free(r);
	conf_free(c);
}

/* The errors counted for address (0 when it has no record). */
static long long
errors_of(const char *address)
{
	struct redis_node_counters nc[64];
	size_t n, i;

	n = redis_counters(nc, 64);
	for (i = 0; i < n && i < 64; i++)
		if (strcmp(nc[i].address, address) == 0)
			return nc[i].errors;
	return 0;
}

/*
 * A cluster with a lone seed that cannot be reached: the deployment's
 * outage ("no cluster node gave the slot map") is counted on its own
 * record, not on the seed's: the seed is a node whose back-off a map read
 * elsewhere must not reset.
 */
static void
test_deployment_record(void **state)
{
	const char *argv[2] = { "GET", "k" };
	struct redis_call call;
	struct redis *r = redis_new();
	char *errors = NULL;
	struct conf *c;

	(void)state;
	c = load("[redis]\nmode = cluster\naddress = 127.0.0.1:2\n"
	    "connect_timeout = 50ms", &errors);
	assert_non_null(c);
	assert_non_null(r);
	memset(&call, 0, sizeof(call));
	call.key = "k";
	call.keylen = 1;
	call.argc = 2;
	call.argv = argv;
	assert_int_equal(redis_run(r, c, &call, 1), 1);
	assert_int_equal(call.status, RLG_CALL_UNSENT);
	printf("# redis_errstr: %s\n", redis_errstr(r));
	assert_int_equal(strncmp(redis_errstr(r),
	    "redis cluster 127.0.0.1:2: ", 27), 0);
	assert_int_equal(errors_of("cluster 127.0.0.1:2"), 1);
	/* A seed is only tried: no outage of its own. */
	assert_int_equal(errors_of("127.0.0.1:2"), 0);
	redis_free(r);
	conf_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc16),
		cmocka_unit_test(test_slot_vectors),
		cmocka_unit_test(test_redirects),
		cmocka_unit_test(test_cluster_slots),
		cmocka_unit_test(test_cluster_shards),
		cmocka_unit_test(test_conf_modes),
		cmocka_unit_test(test_replicas),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_deployment_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
