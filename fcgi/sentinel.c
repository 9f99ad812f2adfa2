/*
 * sentinel: the master of a Sentinel-monitored set, found by asking the
 * Sentinels in turn and checked with ROLE, and one watcher thread per
 * process subscribed to +switch-master that bumps an epoch the event loops
 * read. It only finds and announces the master; the Redis layer
 * (redis*.c) connects, routes and closes the old connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "redis.h"
#include "redis_io.h"
#include "sentinel.h"
#include "slot.h"

#define WATCH_RETRY_MS	1000	/* between rounds of unreachable Sentinels */

/* Appends text to a list in buf ("A (why), B (why)"). */
static void
add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
add(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 2 >= len)
		return;
	if (n > 0) {
		memcpy(buf + n, ", ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* The next address of a blank-separated list: its length, 0 at the end. */
static size_t
next_address(const char **p, char *tok, size_t toklen)
{
	size_t len;

	*p += strspn(*p, " \t");
	if ((len = strcspn(*p, " \t")) == 0)
		return 0;
	snprintf(tok, toklen, "%.*s", (int)len, *p);
	*p += len;
	return len;
}

/* A connection to one Sentinel (AUTH with password when set). */
static redisContext *
dial_sentinel(const char *addr, const char *password, long long ct_ms,
    long long t_ms, char *err, size_t errlen)
{
	return redis_dial(addr, NULL, password, 0, ct_ms, t_ms, err, errlen);
}

/* Checks ROLE on ctx says master. 0, or -1 with err set. */
static int
check_role(redisContext *ctx, char *err, size_t errlen)
{
	redisReply *rep = redis_io_command(ctx, "ROLE");
	int rc = -1;

	if (rep == NULL)
		snprintf(err, errlen, "ROLE: %s", ctx->errstr);
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(err, errlen, "ROLE: %s", rep->str);
	else if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    rep->element[0]->type != REDIS_REPLY_STRING)
		snprintf(err, errlen, "ROLE: not an array with a role");
	else if (strcmp(rep->element[0]->str, "master") != 0)
		snprintf(err, errlen, "not a master (ROLE says %s)",
		    rep->element[0]->str);
	else
		rc = 0;
	freeReplyObject(rep);
	return rc;
}

/*
 * Each Sentinel with c's timeouts (AUTH with sentinel_password): SENTINEL
 * get-master-addr-by-name, then the address given (username, password,
 * database) must say master, else the next Sentinel. err: "no Sentinel
 * reachable (tried A (why), ...)", "no Sentinel knows master 'x' (asked
 * A, ...)", or what was wrong with the master each Sentinel named.
 */
redisContext *
sentinel_master(const struct conf *c, char *host, size_t hostlen, int *port,
    char *err, size_t errlen)
{
	char tok[RLG_REDIS_ADDR_SIZE], why[256], maddr[RLG_REDIS_ADDR_SIZE];
	char unreachable[1024] = "", unknowing[1024] = "", bad[1024] = "";
	const char *p = c->redis_address, *name = c->redis_master_name;
	redisContext *s, *m;
	redisReply *rep;
	long long v;
	const char *errstr;

	while (next_address(&p, tok, sizeof(tok)) > 0) {
		if ((s = dial_sentinel(tok, c->redis_sentinel_password,
		    c->redis_connect_timeout_ms, c->redis_timeout_ms, why,
		    sizeof(why))) == NULL) {
			add(unreachable, sizeof(unreachable), "%s (%s)", tok,
			    why);
			continue;
		}
		rep = redis_io_command(s, "SENTINEL get-master-addr-by-name %s",
		    name);
		if (rep == NULL) {
			add(unreachable, sizeof(unreachable), "%s (%s)", tok,
			    s->errstr);
			redis_io_free(s);
			continue;
		}
		redis_io_free(s);
		if (rep->type == REDIS_REPLY_NIL) {
			add(unknowing, sizeof(unknowing), "%s", tok);
			freeReplyObject(rep);
			continue;
		}
		if (rep->type == REDIS_REPLY_ERROR ||
		    rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
		    rep->element[0]->type != REDIS_REPLY_STRING ||
		    rep->element[1]->type != REDIS_REPLY_STRING ||
		    rep->element[0]->len >= hostlen ||
		    conf_parse_int(rep->element[1]->str, 1, 65535, &v,
		    &errstr) == -1) {
			add(unreachable, sizeof(unreachable), "%s (SENTINEL "
			    "get-master-addr-by-name: %s)", tok,
			    rep->type == REDIS_REPLY_ERROR ? rep->str :
			    "not {ip, port}");
			freeReplyObject(rep);
			continue;
		}
		snprintf(host, hostlen, "%s", rep->element[0]->str);
		*port = (int)v;
		freeReplyObject(rep);
		snprintf(maddr, sizeof(maddr), strchr(host, ':') ? "[%s]:%d" :
		    "%s:%d", host, *port);
		if ((m = redis_dial(maddr, c->redis_username,
		    c->redis_password, c->redis_database,
		    c->redis_connect_timeout_ms, c->redis_timeout_ms, why,
		    sizeof(why))) == NULL) {
			add(bad, sizeof(bad), "%s (from %s): %s", maddr, tok,
			    why);
			continue;
		}
		if (check_role(m, why, sizeof(why)) == -1) {
			add(bad, sizeof(bad), "%s (from %s): %s", maddr, tok,
			    why);
			redis_io_free(m);
			continue;
		}
		return m;
	}
	if (bad[0] != '\0')
		snprintf(err, errlen, "master '%s' not usable: %s%s%s", name,
		    bad, unreachable[0] ? "; no answer from " : "",
		    unreachable);
	else if (unknowing[0] != '\0')
		snprintf(err, errlen, "no Sentinel knows master '%s' (asked "
		    "%s%s%s)", name, unknowing, unreachable[0] ? "; tried " :
		    "", unreachable);
	else
		snprintf(err, errlen, "no Sentinel reachable (tried %s)",
		    unreachable[0] ? unreachable : "none");
	return NULL;
}

/* ---- the watcher ---------------------------------------------------- */

static pthread_mutex_t	watch_lock = PTHREAD_MUTEX_INITIALIZER;
static int		watch_refs;		/* under watch_lock */
static pthread_t	watch_thread;		/* under watch_lock */
static int		watch_pipe[2] = { -1, -1 };
static atomic_int	watch_stop;
static atomic_long	epoch;
/* What to watch, under watch_lock; gen counts changes. */
static char		*w_addrs, *w_name, *w_pass;
static long long	 w_ct_ms, w_t_ms;
static unsigned long	 w_gen;

long
sentinel_epoch(void)
{
	return atomic_load(&epoch);
}

/* Waits up to ms for fd (or -1: none) to be readable or the stop pipe.
 * 1 readable, 0 timeout, -1 stop. */
static int
wait_for(int fd, int ms)
{
	struct pollfd p[2] = { { watch_pipe[0], POLLIN, 0 },
	    { fd, POLLIN, 0 } };
	int rc;

	do
		rc = poll(p, fd >= 0 ? 2 : 1, ms);
	while (rc == -1 && errno == EINTR);
	if (atomic_load(&watch_stop) || p[0].revents != 0)
		return -1;
	return rc > 0 ? 1 : 0;
}

/* A +switch-master message: "<name> <old ip> <old port> <new ip> <new
 * port>". Bumps the epoch when it is about name. */
static void
switch_master(const redisReply *m, const char *name)
{
	size_t n = strlen(name);

	if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
	    m->element[2]->type != REDIS_REPLY_STRING ||
	    strncmp(m->element[2]->str, name, n) != 0 ||
	    m->element[2]->str[n] != ' ')
		return;
	atomic_fetch_add(&epoch, 1);
	log_info("sentinel: +switch-master %s", m->element[2]->str);
}

/* Listens on one subscribed Sentinel until it goes, the settings change or
 * the watch stops (-1). */
static int
listen_on(redisContext *s, const char *name, unsigned long gen)
{
	redisReply *m;
	int rc, changed;

	for (;;) {
		if ((rc = wait_for(s->fd, WATCH_RETRY_MS)) == -1)
			return -1;
		pthread_mutex_lock(&watch_lock);
		changed = gen != w_gen;
		pthread_mutex_unlock(&watch_lock);
		if (changed)
			return 0;
		if (rc == 0)
			continue;
		if (redis_io_read(s) == REDIS_ERR)
			return 0;
		for (;;) {
			m = NULL;
			if (redisGetReplyFromReader(s, (void **)&m) ==
			    REDIS_ERR)
				return 0;
			if (m == NULL)
				break;
			switch_master(m, name);
			freeReplyObject(m);
		}
	}
}

static void *
watch_main(void *arg)
{
	char tok[RLG_REDIS_ADDR_SIZE], why[256], *addrs, *name, *pass;
	long long ct, t;
	unsigned long gen;
	const char *p;
	redisContext *s;
	redisReply *rep;
	int subscribed;

	(void)arg;
	while (!atomic_load(&watch_stop)) {
		pthread_mutex_lock(&watch_lock);
		addrs = strdup(w_addrs);
		name = strdup(w_name);
		pass = w_pass != NULL ? strdup(w_pass) : NULL;
		ct = w_ct_ms;
		t = w_t_ms;
		gen = w_gen;
		pthread_mutex_unlock(&watch_lock);
		subscribed = 0;
		for (p = addrs; addrs != NULL && name != NULL &&
		    next_address(&p, tok, sizeof(tok)) > 0;) {
			if ((s = dial_sentinel(tok, pass, ct, t, why,
			    sizeof(why))) == NULL)
				continue;
			rep = redis_io_command(s, "SUBSCRIBE +switch-master");
			if (rep != NULL && rep->type == REDIS_REPLY_ARRAY) {
				subscribed = 1;
				/* A switch may have come while no one
				 * listened: the loops look again. */
				atomic_fetch_add(&epoch, 1);
				freeReplyObject(rep);
				rep = NULL;
				if (listen_on(s, name, gen) == -1) {
					redis_io_free(s);
					break;
				}
			}
			freeReplyObject(rep);
			redis_io_free(s);
			pthread_mutex_lock(&watch_lock);
			if (gen != w_gen)
				p = "";		/* new settings: start over */
			pthread_mutex_unlock(&watch_lock);
		}
		free(addrs);
		free(name);
		if (pass != NULL)
			explicit_bzero(pass, strlen(pass));
		free(pass);
		if (!subscribed && wait_for(-1, WATCH_RETRY_MS) == -1)
			break;
	}
	return NULL;
}

static void
set_watch(const struct conf *c)
{
	free(w_addrs);
	free(w_name);
	if (w_pass != NULL)
		explicit_bzero(w_pass, strlen(w_pass));
	free(w_pass);
	w_addrs = strdup(c->redis_address);
	w_name = c->redis_master_name ? strdup(c->redis_master_name) : NULL;
	w_pass = c->redis_sentinel_password ?
	    strdup(c->redis_sentinel_password) : NULL;
	w_ct_ms = c->redis_connect_timeout_ms;
	w_t_ms = c->redis_timeout_ms;
	w_gen++;
}

void
sentinel_watch(const struct conf *c)
{
	pthread_mutex_lock(&watch_lock);
	set_watch(c);
	if (watch_refs++ == 0) {
		atomic_store(&watch_stop, 0);
		if (pipe2(watch_pipe, O_CLOEXEC | O_NONBLOCK) == -1 ||
		    pthread_create(&watch_thread, NULL, watch_main, NULL)
		    != 0) {
			log_error("sentinel: cannot start the watcher (%s): "
			    "failovers are seen only when the master fails "
			    "us", strerror(errno));
			if (watch_pipe[0] >= 0) {
				close(watch_pipe[0]);
				close(watch_pipe[1]);
			}
			watch_pipe[0] = watch_pipe[1] = -1;
		}
	}
	pthread_mutex_unlock(&watch_lock);
}

void
sentinel_unwatch(void)
{
	pthread_t t;

	pthread_mutex_lock(&watch_lock);
	if (--watch_refs != 0 || watch_pipe[1] < 0) {
		pthread_mutex_unlock(&watch_lock);
		return;
	}
	atomic_store(&watch_stop, 1);
	(void)!write(watch_pipe[1], "x", 1);
	t = watch_thread;
	pthread_mutex_unlock(&watch_lock);
	/* The thread takes watch_lock: join without it. */
	pthread_join(t, NULL);
	pthread_mutex_lock(&watch_lock);
	close(watch_pipe[0]);
	close(watch_pipe[1]);
	watch_pipe[0] = watch_pipe[1] = -1;
	pthread_mutex_unlock(&watch_lock);
}
