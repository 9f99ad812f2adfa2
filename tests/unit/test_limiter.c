/*
 * Unit tests for the limiter. limiter_row(): the row of
 * <library>_decide's reply as the gateway reads it (lua/decide.lua writes
 * it); well-formed rows give their fields exactly, anything else is
 * refused, never guessed at (the rows written here as lua/README.md shows
 * them). limiter_decide(): against a real redis-server this test starts
 * (one node, then a three-master cluster), a batch of requests in one call
 * per node or slot, each request all or nothing on the state the ones
 * before it left (a denial never leaks into the next request's verdicts),
 * and a cluster's undo of what one slot counted when another denied.
 * The verdict is final when limiter_decide() returns: on_error allow, deny
 * and local against a Redis that does not answer, dry run against one
 * that does.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "conf.h"
#include "limiter.h"
#include "limiter_int.h"
#include "local.h"
#include "redis.h"
#include "slot.h"

static int
parse(const char *s, struct limiter_row *row)
{
	return limiter_row(s, strlen(s), row);
}

static void
test_fields(void **state)
{
	static const long long want[RLG_DECIDE_ROW_UNDO] = {
		1, 2, 3, 1000, 0, 1000000, 0, 1000, 0, 100, 3
	};
	const char *s = "1 2 3 1000 0 1000000 0 1000 0 100 3 10:1 override "
	    "ignored: limit must be at least 1, got 0";
	struct limiter_row row;
	int k;

	(void)state;
	assert_int_equal(parse(s, &row), 0);
	for (k = 0; k < RLG_DECIDE_ROW_UNDO; k++)
		assert_int_equal(row.f[k], want[k]);
	assert_int_equal(row.undo_len, 4);
	assert_memory_equal(row.undo, "10:1", 4);
	/* why: the rest, spaces and all, pointing into the row */
	assert_string_equal(row.why,
	    "override ignored: limit must be at least 1, got 0");
	assert_int_equal(row.why_len, strlen(row.why));
	assert_ptr_equal(row.undo, s + strlen("1 2 3 1000 0 1000000 0 1000 0 100 3 "));
}

static void
test_empty_strings(void **state)
{
	struct limiter_row row;

	(void)state;
	/* No undo token, no why: 12 spaces still, the last two ending it. */
	assert_int_equal(parse("0 -4 3 334 120 1795730692424132 0 1000 3 0 2  ",
	    &row), 0);
	assert_int_equal(row.f[RLG_DECIDE_ROW_ALLOWED], 0);
	assert_int_equal(row.f[RLG_DECIDE_ROW_REMAINING], -4);
	assert_int_equal(row.f[RLG_DECIDE_ROW_RETRY_AFTER_MS], 120);
	assert_int_equal(row.f[RLG_DECIDE_ROW_NOW_US], 1795730692424132LL);
	assert_int_equal(row.f[RLG_DECIDE_ROW_BURST], 3);
	assert_int_equal(row.f[RLG_DECIDE_ROW_OVERRIDE], RLG_OVERRIDE_UNLIMITED);
	assert_int_equal(row.undo_len, 0);
	assert_int_equal(row.why_len, 0);
	/* A token and no why. */
	assert_int_equal(parse("1 0 3 60000 0 1000000 0 60000 0 0 0 1000000:1 ",
	    &row), 0);
	assert_int_equal(row.undo_len, 9);
	assert_int_equal(row.why_len, 0);
	/* 2^53 either way is the bound, and within it. */
	assert_int_equal(parse("1 9007199254740992 -9007199254740992 0 0 0 0 0 0 0 0  ",
	    &row), 0);
	assert_int_equal(row.f[RLG_DECIDE_ROW_REMAINING], 9007199254740992LL);
	assert_int_equal(row.f[RLG_DECIDE_ROW_LIMIT], -9007199254740992LL);
}

static void
test_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"1 2 3",				/* too few fields */
		"1 2 3 1000 0 1000000 0 1000 0 100 0",	/* no undo, no why */
		"1 2 3 1000 0 1000000 0 1000 0 100 0 ",	/* no why's space */
		"2 2 3 1000 0 1000000 0 1000 0 100 0  ", /* allowed 2 */
		"-1 2 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 2 3 1000 0 1000000 0 1000 0 100 4  ", /* override 4 */
		"1 2 3 1000 0 1000000 0 1000 0 100 -1  ",
		"1  2 3 1000 0 1000000 0 1000 0 100 0  ", /* two spaces */
		" 1 2 3 1000 0 1000000 0 1000 0 100 0  ", /* leading space */
		"1 x 3 1000 0 1000000 0 1000 0 100 0  ", /* not a number */
		"1 2a 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 +2 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 - 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 2.0 3 1000 0 1000000 0 1000 0 100 0  ",
		"1 9007199254740993 3 1000 0 1000000 0 1000 0 100 0  ", /* > 2^53 */
		"1 99999999999999999999999 3 1000 0 1000000 0 1000 0 100 0  ",
		"1\t2 3 1000 0 1000000 0 1000 0 100 0  ", /* a tab */
	};
	struct limiter_row row;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &row) != -1)
			fail_msg("row %zu \"%s\" was read", i, bad[i]);
	/* A NUL inside a field: refused, not read up to it. */
	assert_int_equal(limiter_row("1 2\0009 3 1000 0 1000000 0 1000 0 100 0  ",
	    sizeof("1 2\0009 3 1000 0 1000000 0 1000 0 100 0  ") - 1, &row), -1);
	/* The length bounds the row: the whole of it is read, one byte
	 * less (its last space) is refused. */
	assert_int_equal(limiter_row("1 2 3 1000 0 1000000 0 1000 0 100 0  ",
	    strlen("1 2 3 1000 0 1000000 0 1000 0 100 0  "), &row), 0);
	assert_int_equal(limiter_row("1 2 3 1000 0 1000000 0 1000 0 100 0  ",
	    strlen("1 2 3 1000 0 1000000 0 1000 0 100 0 "), &row), -1);
	assert_int_equal(limiter_row(NULL, 0, &row), -1);
}

/* The redis-servers this test started, in a private directory. */
#define MAX_NODES	3
static char	 rdir[] = "/tmp/test_limiter.XXXXXX";
static pid_t	 node_pid[MAX_NODES];
static int	 node_port[MAX_NODES];
static int	 nnodes;

/* A port no one listens on now (the kernel's pick). */
static int
any_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&a, sizeof(a)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) == -1)
		fail_msg("no free port");
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Such a port whose cluster bus port (10000 above) is a port too. */
static int
free_port(void)
{
	int port, tries;

	for (tries = 0; tries < 100; tries++)
		if ((port = any_port()) < 55000)
			return port;
	fail_msg("no free port below 55000");
	return -1;
}

static redisReply *
cmd(int node, const char *fmt, ...)
{
	redisContext *c = redisConnect("127.0.0.1", node_port[node]);
	redisReply *rep = NULL;
	va_list ap;

	if (c != NULL && c->err == 0) {
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	redisFree(c);
	return rep;
}

/* The integer or status text of a command's reply, as a string. */
static const char *
cmd_str(int node, char *buf, size_t len, const char *fmt, ...)
{
	redisContext *c = redisConnect("127.0.0.1", node_port[node]);
	redisReply *rep = NULL;
	va_list ap;

	buf[0] = '\0';
	if (c != NULL && c->err == 0) {
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (rep != NULL && rep->type == REDIS_REPLY_INTEGER)
		snprintf(buf, len, "%lld", rep->integer);
	else if (rep != NULL && rep->str != NULL)
		snprintf(buf, len, "%s", rep->str);
	freeReplyObject(rep);
	redisFree(c);
	return buf;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Starts node i (cluster-enabled when cluster) and waits for its PONG. */
static int
start_node(int i, int cluster)
{
	char port[16], log[PATH_MAX], nodes[PATH_MAX];
	redisReply *rep = NULL;
	int tries;

	node_port[i] = free_port();
	snprintf(port, sizeof(port), "%d", node_port[i]);
	snprintf(log, sizeof(log), "%s/redis-%d.log", rdir, node_port[i]);
	snprintf(nodes, sizeof(nodes), "%s/nodes-%d.conf", rdir, node_port[i]);
	if ((node_pid[i] = fork()) == 0) {
		/* Not our stdout: a reader of it would wait for the node. */
		int null_fd = open("/dev/null", O_RDWR);

		dup2(null_fd, 1);
		dup2(null_fd, 2);
		execlp("redis-server", "redis-server", "--port", port, "--bind",
		    "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
		    rdir, "--logfile", log, "--cluster-enabled",
		    cluster ? "yes" : "no", "--cluster-config-file", nodes,
		    (char *)NULL);
		_exit(127);
	}
	nnodes = i + 1;
	for (tries = 0; tries < 200; tries++) {
		if ((rep = cmd(i, "PING")) != NULL)
			break;
		sleep_ms(50);
	}
	freeReplyObject(rep);
	return rep != NULL ? 0 : -1;
}

static void
stop_nodes(void)
{
	int i;

	for (i = 0; i < nnodes; i++)
		if (node_pid[i] > 0) {
			kill(node_pid[i], SIGTERM);
			waitpid(node_pid[i], NULL, 0);
			node_pid[i] = 0;
		}
	nnodes = 0;
}

/*
 * A configuration for the nodes started: rule a (fixed_window, 2 a minute
 * per {query.k}) and rule b (fixed_window, 10 a minute per {query.id}).
 */
static struct conf *
load_conf(const char *redis_lines)
{
	char path[PATH_MAX], *errors = NULL;
	struct conf *c;
	FILE *f;

	snprintf(path, sizeof(path), "%s/rlgate.ini", rdir);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "[redis]\n%s\ntimeout = 2s\nconnect_timeout = 1s\n"
	    "[audit]\ndatabase =\n"
	    "[rule:a]\npath = /a\nkey = {query.k}\nlimit = 2\nwindow = 1m\n"
	    "[rule:b]\npath = /a\nkey = {query.id}\nlimit = 10\nwindow = 1m\n",
	    redis_lines);
	fclose(f);
	chmod(path, 0600);
	c = conf_load(path, &errors);
	if (c == NULL)
		fail_msg("%s", errors);
	return c;
}

/* One request to decide: rule a on key ka, and rule b on kb when given. */
struct treq {
	struct match	 m[2];
	struct decision	 d;
	struct request	 req;
};

static void
treq_set(struct treq *t, struct decision **lr, const struct conf *c,
    const char *ka, const char *kb)
{
	memset(t, 0, sizeof(*t));
	t->m[0].rule = &c->rules[0];
	t->m[1].rule = &c->rules[1];
	t->m[0].key_len = strlen(ka);
	memcpy(t->m[0].key, ka, t->m[0].key_len);
	if (kb != NULL) {
		t->m[1].key_len = strlen(kb);
		memcpy(t->m[1].key, kb, t->m[1].key_len);
	}
	t->m[0].cost = t->m[1].cost = 1;
	t->d.conf = c;
	t->d.req = &t->req;
	t->d.m = t->m;
	t->d.n = kb != NULL ? 2 : 1;
	*lr = &t->d;
}

/* The count rule ru (index) keeps for key, on the node that holds it. */
static long long
count_of(const struct conf *c, size_t ru, const char *key)
{
	char k[RLG_REDIS_KEY_SIZE];
	size_t n = limiter_key(c, &c->rules[ru], key, strlen(key), 0, k,
	    sizeof(k));
	redisReply *rep;
	int i;

	for (i = 0; i < nnodes; i++) {
		/* In a cluster, the node whose slots hold it: the others
		 * answer MOVED. */
		rep = cmd(i, "HGET %b count", k, n);
		if (rep == NULL)
			fail_msg("node %d does not answer", i);
		if (rep->type == REDIS_REPLY_ERROR) {
			freeReplyObject(rep);
			continue;
		}
		if (rep->type == REDIS_REPLY_NIL) {
			freeReplyObject(rep);
			return 0;
		}
		n = (size_t)atoll(rep->str);
		freeReplyObject(rep);
		return (long long)n;
	}
	fail_msg("no node holds %s", k);
	return -1;
}

/* FCALLs the nodes ran, summed (INFO commandstats). */
static long long
fcalls(void)
{
	long long sum = 0;
	redisReply *rep;
	const char *p;
	int i;

	for (i = 0; i < nnodes; i++) {
		assert_non_null(rep = cmd(i, "INFO commandstats"));
		if ((p = strstr(rep->str, "cmdstat_fcall:calls=")) != NULL)
			sum += atoll(p + strlen("cmdstat_fcall:calls="));
		freeReplyObject(rep);
	}
	return sum;
}

#define ASSERT_V(v, a, c) do {						\
	if ((v).answered != 1 || (v).allowed != (a) || (v).counted != (c))	\
		fail_msg("%s: answered %d allowed %d counted %d, expected "	\
		    "1 %d %d", #v, (v).answered, (v).allowed, (v).counted,	\
		    (a), (c));						\
} while (0)

/*
 * One node: six requests in one limiter_decide(), one FCALL. Rule a, 2 a
 * minute: x admitted twice, then denied; the request it denies with b on
 * i2 counts b nothing; the next request, on fresh keys, counts both.
 */
static void
test_batch_one_node(void **state)
{
	struct treq t[6];
	struct decision *lr[6];
	struct redis *r;
	struct limiter *l;
	struct conf *c;
	long long f0;
	char buf[64];

	(void)state;
	assert_int_equal(start_node(0, 0), 0);
	snprintf(buf, sizeof(buf), "address = 127.0.0.1:%d", node_port[0]);
	c = load_conf(buf);
	assert_non_null(r = redis_new());
	assert_non_null(l = limiter_new(r));
	/* The first call loads the library: not this test's count. */
	treq_set(&t[0], &lr[0], c, "warm", NULL);
	assert_int_equal(limiter_decide(l, c, lr, 1), 0);
	ASSERT_V(t[0].d.v[0], 1, 1);
	f0 = fcalls();
	treq_set(&t[0], &lr[0], c, "x", NULL);
	treq_set(&t[1], &lr[1], c, "x", NULL);
	treq_set(&t[2], &lr[2], c, "x", "i2");
	treq_set(&t[3], &lr[3], c, "fresh", "i3");
	treq_set(&t[4], &lr[4], c, "x", NULL);
	treq_set(&t[5], &lr[5], c, "fresh2", NULL);
	assert_int_equal(limiter_decide(l, c, lr, 6), 0);
	assert_int_equal(fcalls() - f0, 1);
	ASSERT_V(t[0].d.v[0], 1, 1);
	assert_int_equal(t[0].d.v[0].remaining, 1);
	ASSERT_V(t[1].d.v[0], 1, 1);
	assert_int_equal(t[1].d.v[0].remaining, 0);
	ASSERT_V(t[2].d.v[0], 0, 0);
	assert_true(t[2].d.v[0].retry_after_ms > 0);
	ASSERT_V(t[2].d.v[1], 1, 0);	/* b admits; a denied: not counted */
	ASSERT_V(t[3].d.v[0], 1, 1);
	assert_int_equal(t[3].d.v[0].remaining, 1);
	ASSERT_V(t[3].d.v[1], 1, 1);
	assert_int_equal(t[3].d.v[1].remaining, 9);
	ASSERT_V(t[4].d.v[0], 0, 0);
	ASSERT_V(t[5].d.v[0], 1, 1);
	assert_int_equal(count_of(c, 0, "x"), 2);
	assert_int_equal(count_of(c, 0, "fresh"), 1);
	assert_int_equal(count_of(c, 0, "fresh2"), 1);
	assert_int_equal(count_of(c, 1, "i2"), 0);
	assert_int_equal(count_of(c, 1, "i3"), 1);
	limiter_free(l);
	redis_free(r);
	conf_free(c);
	stop_nodes();
}

/* Two keys of rule a and b whose slots differ, found by name. */
static void
keys_apart(const struct conf *c, const char *prefix, char *ka, char *kb,
    size_t len)
{
	char k1[RLG_REDIS_KEY_SIZE], k2[RLG_REDIS_KEY_SIZE];
	size_t n1, n2;
	int i;

	for (i = 0; i < 1000; i++) {
		snprintf(ka, len, "%sa%d", prefix, i);
		snprintf(kb, len, "%sb%d", prefix, i);
		n1 = limiter_key(c, &c->rules[0], ka, strlen(ka), 0, k1, sizeof(k1));
		n2 = limiter_key(c, &c->rules[1], kb, strlen(kb), 0, k2, sizeof(k2));
		if (slot_of(k1, n1) / 5461 != slot_of(k2, n2) / 5461)
			return;		/* and on two masters */
	}
	fail_msg("no keys apart");
}

/* The hash slots the rules of r[0..n) fall in, each counted once. */
static long long
slots_of(const struct conf *c, struct decision *const *r, size_t n)
{
	static unsigned char seen[16384];
	char k[RLG_REDIS_KEY_SIZE];
	long long count = 0;
	size_t i, j, len;
	int s;

	memset(seen, 0, sizeof(seen));
	for (i = 0; i < n; i++)
		for (j = 0; j < r[i]->n; j++) {
			len = limiter_key(c, r[i]->m[j].rule, r[i]->m[j].key,
			    r[i]->m[j].key_len, 0, k, sizeof(k));
			s = slot_of(k, len);
			count += !seen[s];
			seen[s] = 1;
		}
	return count;
}

/*
 * A cluster of three masters: a request whose rules fall in two slots is
 * two calls; when a's slot denies, what b's slot counted is taken back
 * (LIB_undo, a second round), and the verdict says not counted. A request
 * both slots admit stays counted in both.
 */
static void
test_cluster_undo(void **state)
{
	static const char *const ranges[3][2] = { { "0", "5460" },
	    { "5461", "10922" }, { "10923", "16383" } };
	struct treq t[3];
	struct decision *lr[3];
	char buf[256], xa[32], xb[32], ya[32], yb[32];
	struct redis *r;
	struct limiter *l;
	struct conf *c;
	long long f0;
	int i, ok = 0, tries;

	(void)state;
	for (i = 0; i < 3; i++)
		assert_int_equal(start_node(i, 1), 0);
	for (i = 0; i < 3; i++)
		freeReplyObject(cmd(i, "CLUSTER ADDSLOTSRANGE %s %s",
		    ranges[i][0], ranges[i][1]));
	for (i = 1; i < 3; i++)
		freeReplyObject(cmd(0, "CLUSTER MEET 127.0.0.1 %d", node_port[i]));
	for (tries = 0; tries < 200 && ok < 3; tries++) {
		sleep_ms(50);
		for (ok = 0, i = 0; i < 3; i++)
			ok += strstr(cmd_str(i, buf, sizeof(buf), "CLUSTER INFO"),
			    "cluster_state:ok") != NULL;
	}
	if (ok < 3)
		fail_msg("the cluster did not form");
	snprintf(buf, sizeof(buf), "mode = cluster\naddress = 127.0.0.1:%d",
	    node_port[0]);
	c = load_conf(buf);
	assert_non_null(r = redis_new());
	assert_non_null(l = limiter_new(r));
	keys_apart(c, "x", xa, xb, sizeof(xa));
	keys_apart(c, "y", ya, yb, sizeof(ya));
	/* x: a full (two admitted, both slots counted), then denied. */
	treq_set(&t[0], &lr[0], c, xa, xb);
	treq_set(&t[1], &lr[1], c, xa, xb);
	assert_int_equal(limiter_decide(l, c, lr, 2), 0);
	ASSERT_V(t[0].d.v[0], 1, 1);
	ASSERT_V(t[0].d.v[1], 1, 1);
	ASSERT_V(t[1].d.v[0], 1, 1);
	ASSERT_V(t[1].d.v[1], 1, 1);
	assert_int_equal(count_of(c, 1, xb), 2);
	/* A batch: x again (a denies in its slot; b's count taken back), then
	 * y on fresh keys (counted in both): one call per hash slot the batch
	 * touches, then one undo. */
	treq_set(&t[0], &lr[0], c, xa, xb);
	treq_set(&t[1], &lr[1], c, ya, yb);
	f0 = fcalls();
	assert_int_equal(limiter_decide(l, c, lr, 2), 0);
	assert_int_equal(fcalls() - f0, slots_of(c, lr, 2) + 1);
	ASSERT_V(t[0].d.v[0], 0, 0);
	ASSERT_V(t[0].d.v[1], 1, 0);
	ASSERT_V(t[1].d.v[0], 1, 1);
	ASSERT_V(t[1].d.v[1], 1, 1);
	assert_int_equal(count_of(c, 0, xa), 2);
	assert_int_equal(count_of(c, 1, xb), 2);	/* 3 counted, 1 undone */
	assert_int_equal(count_of(c, 0, ya), 1);
	assert_int_equal(count_of(c, 1, yb), 1);
	limiter_free(l);
	redis_free(r);
	conf_free(c);
	stop_nodes();
}

/* A configuration of four rules on /p, /q, /r and /s, each limit 2 a
 * minute, with extra lines for [redis]; rule d (/s) is in dry run. */
static struct conf *
policy_conf(const char *redis_lines)
{
	char path[PATH_MAX], *errors = NULL;
	struct conf *c;
	FILE *f;

	snprintf(path, sizeof(path), "%s/policy.ini", rdir);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "[redis]\n%s\ntimeout = 200ms\nconnect_timeout = 100ms\n"
	    "local_share = 1/2\n[audit]\ndatabase =\n"
	    "[rule:a]\npath = /p\nlimit = 2\nwindow = 1m\non_error = allow\n"
	    "[rule:b]\npath = /q\nlimit = 2\nwindow = 1m\non_error = deny\n"
	    "[rule:c]\npath = /r\nlimit = 2\nwindow = 1m\non_error = local\n"
	    "[rule:d]\npath = /s\nlimit = 1\nwindow = 1m\non_error = deny\n"
	    "dry_run = yes\n", redis_lines);
	fclose(f);
	chmod(path, 0600);
	c = conf_load(path, &errors);
	if (c == NULL)
		fail_msg("%s", errors);
	return c;
}

/* Decides one request of rule ru (index) on key k into t; returns
 * limiter_decide()'s result. */
static int
decide_one(struct limiter *l, const struct conf *c, struct treq *t, size_t ru,
    const char *k)
{
	struct decision *d;

	treq_set(t, &d, c, k, NULL);
	t->m[0].rule = &c->rules[ru];
	return limiter_decide(l, c, &d, 1);
}

#define ASSERT_FINAL(t, st, ok, reason) do {				\
	assert_int_equal((t).d.status, (st));				\
	assert_int_equal((t).d.allowed, (ok));				\
	assert_int_equal((t).d.rule_reason[0], (reason));		\
} while (0)

/*
 * Redis does not answer (nothing listens on its socket): what
 * limiter_decide() returns is final, each rule's on_error applied there.
 * allow: 200, redis_error; deny: 503; local: decided in memory on half
 * the limit (one admitted, then deny_status, reason local); deny in dry
 * run: 200, never 503.
 */
static void
test_verdict_on_error(void **state)
{
	struct treq t;
	struct redis *r;
	struct limiter *l;
	struct conf *c;
	char buf[PATH_MAX + 32];

	(void)state;
	local_reset();
	snprintf(buf, sizeof(buf), "address = unix:%s/none.sock", rdir);
	c = policy_conf(buf);
	assert_non_null(r = redis_new());
	assert_non_null(l = limiter_new(r));
	assert_int_equal(decide_one(l, c, &t, 0, "x"), -1);
	assert_string_not_equal(limiter_errstr(l), "");
	ASSERT_FINAL(t, 200, 1, RLG_REASON_REDIS_ERROR);
	assert_int_equal(t.d.rule_allowed[0], 1);
	assert_int_equal(decide_one(l, c, &t, 1, "x"), -1);
	ASSERT_FINAL(t, 503, 0, RLG_REASON_REDIS_ERROR);
	assert_int_equal(t.d.rule_allowed[0], 0);
	assert_int_equal(decide_one(l, c, &t, 2, "x"), -1);
	ASSERT_FINAL(t, 200, 1, RLG_REASON_LOCAL);
	assert_int_equal(t.d.v[0].limit, 1);		/* 2 x 1/2 */
	assert_int_equal(decide_one(l, c, &t, 2, "x"), -1);
	ASSERT_FINAL(t, 429, 0, RLG_REASON_LOCAL);
	assert_true(t.d.retry_after_ms > 0);
	assert_int_equal(decide_one(l, c, &t, 3, "x"), -1);
	ASSERT_FINAL(t, 200, 1, RLG_REASON_REDIS_ERROR);
	assert_int_equal(t.d.rule_allowed[0], 0);
	limiter_free(l);
	redis_free(r);
	conf_free(c);
}

/*
 * Redis answers: a rule over its limit denies (deny_status, reason limit)
 * unless in dry run, where the request goes through (200, reason dry_run,
 * the rule itself not allowed) and nothing is counted.
 */
static void
test_verdict_dry_run(void **state)
{
	struct treq t;
	struct redis *r;
	struct limiter *l;
	struct conf *c;
	char buf[64];

	(void)state;
	assert_int_equal(start_node(0, 0), 0);
	snprintf(buf, sizeof(buf), "address = 127.0.0.1:%d", node_port[0]);
	c = policy_conf(buf);
	assert_non_null(r = redis_new());
	assert_non_null(l = limiter_new(r));
	assert_int_equal(decide_one(l, c, &t, 0, "y"), 0);
	ASSERT_FINAL(t, 200, 1, RLG_REASON_LIMIT);
	assert_int_equal(decide_one(l, c, &t, 0, "y"), 0);
	ASSERT_FINAL(t, 200, 1, RLG_REASON_LIMIT);
	assert_int_equal(decide_one(l, c, &t, 0, "y"), 0);
	ASSERT_FINAL(t, 429, 0, RLG_REASON_LIMIT);
	assert_int_equal(decide_one(l, c, &t, 3, "y"), 0);
	ASSERT_FINAL(t, 200, 1, RLG_REASON_LIMIT);
	assert_int_equal(decide_one(l, c, &t, 3, "y"), 0);
	ASSERT_FINAL(t, 200, 1, RLG_REASON_DRY_RUN);
	assert_int_equal(t.d.rule_allowed[0], 0);
	assert_int_equal(t.d.v[0].allowed, 0);
	assert_string_equal(limiter_errstr(l), "");
	limiter_free(l);
	redis_free(r);
	conf_free(c);
	stop_nodes();
}

static int
group_setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	return mkdtemp(rdir) != NULL ? 0 : -1;
}

/* After each test, passed or failed: its nodes go. */
static int
teardown(void **state)
{
	(void)state;
	stop_nodes();
	return 0;
}

static int
group_teardown(void **state)
{
	char rm[PATH_MAX + 16];

	(void)state;
	stop_nodes();
	snprintf(rm, sizeof(rm), "rm -rf '%s'", rdir);
	return system(rm) == 0 ? 0 : -1;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_empty_strings),
		cmocka_unit_test(test_refused),
		cmocka_unit_test_teardown(test_batch_one_node, teardown),
		cmocka_unit_test_teardown(test_cluster_undo, teardown),
		cmocka_unit_test(test_verdict_on_error),
		cmocka_unit_test_teardown(test_verdict_dry_run, teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
