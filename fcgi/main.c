/*
 * main: start-up, signals and CGI mode. It loads the configuration,
 * opens the audit database and the listeners (its own, or those systemd
 * passes), starts the event loops
 * (events.c; what they share with CGI mode is gateway.c), and owns the
 * process's lifetime: reload on SIGHUP, drain on SIGTERM. Nothing here
 * decides anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netdb.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "audit.h"
#include "clock.h"
#include "conf.h"
#include "denycache.h"
#include "events.h"
#include "gateway.h"
#include "limiter.h"
#include "log.h"
#include "metrics.h"
#include "redis.h"
#include "redis_io.h"
#include "respond.h"
#include "scripts.h"

extern char **environ;

static void
usage(FILE *f)
{
	fprintf(f, "usage: rlgate [-t] [-c file] [-s unix:/path | host:port]\n"
	    "       rlgate -V | -h\n"
	    "  -c file  configuration (default $RLGATE_CONF, then %s)\n"
	    "  -s addr  listen here instead of on the socket inherited on "
	    "fd 0\n"
	    "  -t       check the configuration, print \"configuration OK\" "
	    "or every error\n"
	    "  -V       print the version\n"
	    "  -h       print this help\n", RLG_DEFAULT_CONF);
}

/* The number of event loops c asks for: workers, or one per CPU this
 * process may run on. */
static int
loops_of(const struct conf *c)
{
	cpu_set_t cpus;

	if (c->workers > 0)
		return c->workers;
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 &&
	    CPU_COUNT(&cpus) > 0)
		return CPU_COUNT(&cpus);
	return 1;
}

/* c's warnings, each on its own line: to f, or to the log when f is NULL. */
static void
show_warnings(const struct conf *c, FILE *f, const char *prefix)
{
	const char *p, *nl;

	for (p = c->warnings; p != NULL && *p != '\0'; p = nl + 1) {
		if ((nl = strchr(p, '\n')) == NULL)
			nl = p + strlen(p);
		if (f != NULL)
			fprintf(f, "%s%.*s\n", prefix, (int)(nl - p), p);
		else
			log_warn("%s%.*s", prefix, (int)(nl - p), p);
		if (*nl == '\0')
			break;
	}
}

static struct conf *
load(const char *path, FILE *errf)
{
	struct conf *c;
	char *errors = NULL, err[512];

	if ((c = conf_load(path, &errors)) == NULL) {
		fputs(errors ? errors : "out of memory\n", errf);
		free(errors);
		return NULL;
	}
	/* The TLS context, from the files as they are now: a reload
	 * takes renewed certificates. */
	if (redis_io_setup(c, err, sizeof(err)) == -1) {
		fprintf(errf, "%s: %s\n", path, err);
		conf_free(c);
		return NULL;
	}
	metrics_register_rules(c);
	return c;
}

/*
 * Whether this process may give the socket it binds to c's socket_group:
 * chown(2) gives a file only to a group its owner is a member of (root:
 * any), and a start that found out after bind() would fail with
 * "Operation not permitted". 0, or -1 with the sentence, for rlgate -t and
 * start-up alike, in why.
 */
static int
socket_group_ok(const struct conf *c, char *why, size_t len)
{
	struct passwd *pw;
	struct group *gr;
	gid_t *groups = NULL;
	int n, i, ok;

	if (c->socket_gid == -1 || geteuid() == 0 ||
	    (gid_t)c->socket_gid == getegid())
		return 0;
	ok = (n = getgroups(0, NULL)) > 0 &&
	    (groups = calloc((size_t)n, sizeof(*groups))) != NULL &&
	    (n = getgroups(n, groups)) > 0;
	for (i = 0; ok && i < n && groups[i] != (gid_t)c->socket_gid; i++)
		;
	ok = ok && i < n;
	free(groups);
	if (ok)
		return 0;
	pw = getpwuid(geteuid());
	gr = getgrgid((gid_t)c->socket_gid);
	snprintf(why, len, "%s: [gateway] socket_group %s: user %s is not a "
	    "member of it, and cannot give its socket to it (adduser %s %s, "
	    "then restart rlgate)", c->path, gr != NULL ? gr->gr_name : "?",
	    pw != NULL ? pw->pw_name : "?", pw != NULL ? pw->pw_name : "USER",
	    gr != NULL ? gr->gr_name : "GROUP");
	return -1;
}

/* The unix socket this process bound, removed at exit: a fatal() later in
 * the start must not leave a stale socket behind. */
static char bound_socket[sizeof(((struct sockaddr_un *)0)->sun_path)];

static void
remove_bound_socket(void)
{
	if (bound_socket[0] != '\0')
		unlink(bound_socket);
	bound_socket[0] = '\0';
}

/*
 * unix:/path or host:port, opened by us: FCGX_OpenSocket exits on error.
 * A unix socket gets c's socket_mode and socket_group: the web server's
 * group, not every local user, may talk FastCGI to rlgate.
 */
static int
open_listener(const char *addr, const struct conf *c)
{
	struct addrinfo hints, *res = NULL, *ai;
	char host[256], why[512];
	const char *port;
	int fd = -1, one = 1, rc;
	mode_t mask;

	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un sun;
		struct stat st;
		const char *path = addr + 5;

		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		if (strlen(path) >= sizeof(sun.sun_path))
			fatal("listen %s: path too long", addr);
		if (socket_group_ok(c, why, sizeof(why)) == -1)
			fatal("listen %s: %s", addr, why);
		strcpy(sun.sun_path, path);
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
			fatal("socket: %s", strerror(errno));
		/* Remove a stale socket, never a live one or another file. */
		if (lstat(path, &st) == 0) {
			if (!S_ISSOCK(st.st_mode))
				fatal("listen %s: exists and is not a socket",
				    addr);
			if (connect(fd, (struct sockaddr *)&sun,
			    sizeof(sun)) == 0)
				fatal("listen %s: another process listens "
				    "there", addr);
			unlink(path);
		}
		/* Born 0600: nobody connects before the group and mode are
		 * set (start-up is single-threaded: the umask is ours). */
		mask = umask(0177);
		rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
		umask(mask);
		if (rc == -1)
			fatal("listen %s: %s", addr, strerror(errno));
		strcpy(bound_socket, path);
		atexit(remove_bound_socket);
		if (c->socket_gid != -1 &&
		    chown(path, (uid_t)-1, (gid_t)c->socket_gid) == -1)
			fatal("listen %s: [gateway] socket_group %ld: %s", addr,
			    c->socket_gid, strerror(errno));
		if (chmod(path, (mode_t)c->socket_mode) == -1)
			fatal("listen %s: [gateway] socket_mode %04o: %s", addr,
			    c->socket_mode, strerror(errno));
	} else {
		if ((port = netaddr_split(addr, host,
		    sizeof(host))) == NULL)
			fatal("listen %s: use unix:/path or host:port", addr);
		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
		if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints,
		    &res)) != 0)
			fatal("listen %s: %s", addr, gai_strerror(rc));
		for (ai = res; ai != NULL; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype, 0);
			if (fd == -1)
				continue;
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
			    sizeof(one));
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0)
				break;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		if (fd == -1)
			fatal("listen %s: %s", addr, strerror(errno));
	}
	if (listen(fd, 1024) == -1)
		fatal("listen %s: %s", addr, strerror(errno));
	return fd;
}

static int
is_listener(int fd)
{
	int val = 0;
	socklen_t len = sizeof(val);

	return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len) == 0 &&
	    val != 0;
}

/* The first descriptor systemd passes (SD_LISTEN_FDS_START). */
#define LISTEN_FDS_START	3

/*
 * The listening sockets systemd passed (socket activation, the protocol of
 * sd_listen_fds(3)): when LISTEN_PID is this process, LISTEN_FDS sockets
 * from fd 3 on. Puts them in fds (RLG_MAX_LISTENERS of room) and returns
 * how many, 0 when none were passed to this process. The variables are
 * unset, so that no program started later (the CGI upstream) takes them
 * for its own. A passed descriptor that is not a listening stream socket
 * (a socket unit with Accept=yes) is fatal: there is nothing to accept on.
 */
static int
systemd_listeners(int *fds)
{
	const char *pid_s = getenv("LISTEN_PID"), *n_s = getenv("LISTEN_FDS");
	const char *errstr;
	long long pid, n = 0;
	int i, fd, type;
	socklen_t len = sizeof(type);

	if (pid_s != NULL && n_s != NULL &&
	    conf_parse_int(pid_s, 1, INT_MAX, &pid, &errstr) == 0 &&
	    pid == getpid()) {
		if (conf_parse_int(n_s, 0, RLG_MAX_LISTENERS, &n,
		    &errstr) == -1)
			fatal("LISTEN_FDS=%s from systemd %s (rlgate listens "
			    "on 0 to %d sockets)", n_s, errstr,
			    RLG_MAX_LISTENERS);
		for (i = 0; i < (int)n; i++) {
			fd = LISTEN_FDS_START + i;
			if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type,
			    &len) == -1 || type != SOCK_STREAM ||
			    !is_listener(fd))
				fatal("fd %d from systemd is not a listening "
				    "stream socket (the socket unit needs "
				    "ListenStream= and Accept=no)", fd);
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			fds[i] = fd;
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return (int)n;
}

static void
reload(const char *path)
{
	struct generation *was;
	struct conf *c;
	const struct conf *old;
	char *errors = NULL, err[512];
	FILE *mem;
	size_t size = 0;

	if ((mem = open_memstream(&errors, &size)) == NULL)
		return;
	c = load(path, mem);
	fclose(mem);
	if (c == NULL) {
		/* One log line per problem, then the verdict. */
		for (char *line = strtok(errors, "\n"); line != NULL;
		    line = strtok(NULL, "\n"))
			log_error("reload: %s", line);
		log_error("reload: %s has errors; keeping the running "
		    "configuration", path);
		free(errors);
		return;
	}
	free(errors);
	if (audit_trusted(c->audit_database, err, sizeof(err)) == -1) {
		log_error("reload: audit: %s; keeping the running "
		    "configuration", err);
		conf_free(c);
		return;
	}
	was = gen_acquire();
	old = was->conf;
	/* Remembered denials were decided by the old limits: a raised
	 * limit applies to the next request. After the load, so that no
	 * entry of a freed configuration's address can match the new one. */
	denycache_clear();
	show_warnings(c, NULL, "reload: ");
	if (loops_of(c) != gateway_threads)
		log_warn("reload: workers changes only on restart (%d kept)",
		    gateway_threads);
	if ((old->audit_database == NULL) != (c->audit_database == NULL) ||
	    (old->audit_database != NULL &&
	    strcmp(old->audit_database, c->audit_database) != 0))
		log_warn("reload: [audit] database changes only on restart");
	/* Out of memory: c is freed, the running configuration stays. */
	if (gen_install(c) == -1) {
		log_error("reload: out of memory; keeping the running "
		    "configuration");
		gen_release(was);
		return;
	}
	/* c is current now: only this thread installs another. */
	audit_keep(gateway_audit, c->audit_keep_ms);
	audit_keep_rows(gateway_audit, c->audit_keep_rows_ms);
	log_set_level(c->log_level);
	gen_release(was);
	log_info("reload: %s loaded, %zu rules", path, c->nrules);
}

static int
run_cgi(struct conf *c)
{
	struct redis *r = redis_new();
	struct limiter *lim = r != NULL ? limiter_new(r) : NULL;
	struct jobs *b = lim != NULL ? jobs_new(lim, NULL) : NULL;
	char *out = malloc(RLG_MAX_RESPONSE), errbuf[256], num[32];
	struct respond_summary s;
	struct job *j = b != NULL ? jobs_add(b) : NULL;
	sigset_t sigs;
	size_t len, n;
	int null_fd, allowed, summary;

	if (j == NULL || out == NULL)
		fatal("out of memory");
	/* No writer thread for one request: its rows are written by
	 * audit_close(), after the reply. */
	if (c->audit_database != NULL && (gateway_audit = audit_open_inline(
	    c->audit_database, c->audit_queue, errbuf, sizeof(errbuf))) ==
	    NULL)
		log_error("audit: %s; this request is not recorded", errbuf);
	audit_keep(gateway_audit, c->audit_keep_ms);
	audit_keep_rows(gateway_audit, c->audit_keep_rows_ms);
	/* CGI serves no status endpoint: every request is decided. */
	j->envp = environ;
	jobs_decide(b, c, 0);
	j = jobs_list(b, &n);
	len = respond_write(&j->d, out, RLG_MAX_RESPONSE);
	/* d's verdicts are the limiter's: read before it goes. */
	allowed = j->d.allowed;
	summary = respond_summary(&j->d, &s);
	/* leaky_bucket: the consumer waits its turn instead of failing. */
	if (allowed && j->d.delay_ms > 0)
		sleep_ms(j->d.delay_ms);
	jobs_free(b);
	limiter_free(lim);
	redis_free(r);
	if (allowed && c->cgi_upstream != NULL) {
		/* The program's output is the reply: the row comes first. */
		audit_close(gateway_audit, 5000);
		/* Wrapper mode: become the protected program, which gets
		 * our environment and the untouched stdin. */
		if (summary == 0) {
			setenv("RATELIMIT_POLICY", s.policy, 1);
			snprintf(num, sizeof(num), "%lld", s.limit);
			setenv("RATELIMIT_LIMIT", num, 1);
			snprintf(num, sizeof(num), "%lld", s.remaining);
			setenv("RATELIMIT_REMAINING", num, 1);
			snprintf(num, sizeof(num), "%lld", s.reset_s);
			setenv("RATELIMIT_RESET", num, 1);
		}
		execl(c->cgi_upstream, c->cgi_upstream, (char *)NULL);
		log_error("cgi: cannot run %s: %s", c->cgi_upstream,
		    strerror(errno));
		fputs("Status: 500 Internal Server Error\r\n"
		    "Content-Type: text/plain\r\n\r\nupstream failed\n",
		    stdout);
		free(out);
		return 1;
	}
	fwrite(out, 1, len, stdout);
	fflush(stdout);
	free(out);
	/*
	 * The end of our output is the end of the reply: the server answers
	 * now, while the row is written. It may then signal us (lighttpd
	 * sends SIGTERM to a CGI still running once it has answered): the
	 * row is written first. /dev/null takes fd 1, so that no file
	 * opened later lands on it.
	 */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGPIPE);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if ((null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) != -1) {
		dup2(null_fd, STDOUT_FILENO);
		close(null_fd);
	}
	audit_close(gateway_audit, 5000);
	return 0;
}

/*
 * Starts the event loops on fds[0..nfd) with c installed, says so, and
 * checks Redis once they serve.
 */
static void
serve(const struct conf *c, const int *fds, int nfd, const char *listen_addr)
{
	char errbuf[512];

	if (events_start(fds, nfd, gateway_threads) == -1)
		fatal("cannot start the event loops: %s", strerror(errno));
	if (listen_addr != NULL || fds[0] == 0)
		log_info("rlgate %s: %d event loops, %zu rules, listening on "
		    "%s", RLG_VERSION, gateway_threads, c->nrules,
		    listen_addr != NULL ? listen_addr : "fd 0");
	else
		log_info("rlgate %s: %d event loops, %zu rules, listening on "
		    "%d socket%s from systemd", RLG_VERSION, gateway_threads,
		    c->nrules, nfd, nfd == 1 ? "" : "s");
	/*
	 * The start-up check runs once the loops serve: the socket accepts
	 * from the start (a web server's, systemd's), and a request that came
	 * while a Redis that does not answer held the check would wait for it
	 * and then for its own round. The loops need nothing from it (a
	 * missing library is loaded by the first call). c stays installed:
	 * only this thread reloads, after it.
	 */
	if (redis_probe(c, errbuf, sizeof(errbuf)) == -1)
		log_warn("redis %s: %s; starting anyway (on_error applies "
		    "until it answers)", c->redis_address, errbuf);
}

/* rlgate -t: c checked as a start would (the group of a unix socket
 * too); frees c. Returns main's exit status. */
static int
check_only(struct conf *c, const char *listen_addr)
{
	const char *addr = listen_addr != NULL ? listen_addr : c->listen;
	char why[512];

	if (addr != NULL && strncmp(addr, "unix:", 5) == 0 &&
	    socket_group_ok(c, why, sizeof(why)) == -1) {
		fprintf(stderr, "%s\n", why);
		conf_free(c);
		return 1;
	}
	show_warnings(c, stderr, "warning: ");
	printf("configuration OK\n");
	conf_free(c);
	return 0;
}

/* After SIGTERM or SIGINT: the loops finish what is in flight, the audit
 * writes what it holds. Returns main's exit status: 1 when rows were
 * lost. */
static int
stop(void)
{
	long long lost;

	/* A slow web-server connection can hold a loop: do not let it hold
	 * the exit forever. */
	if (events_stop(10) == 0)
		gen_install(NULL);
	else {
		/* A late loop may still push rows: refuse them (the queued
		 * rows are still written), and give it a moment before the
		 * audit handle goes away. */
		audit_stop(gateway_audit);
		sleep_ms(1000);
	}
	/* audit_close() logs what it could not write. */
	lost = audit_close(gateway_audit, 30000);
	metrics_unshare();
	remove_bound_socket();
	log_info("stopped");
	return lost > 0 ? 1 : 0;
}

int
main(int argc, char *argv[])
{
	const char *path = getenv("RLGATE_CONF"), *listen_addr = NULL;
	struct conf *c;
	sigset_t sigs;
	int ch, test = 0, sig, i, cgi;
	int fds[RLG_MAX_LISTENERS], nfd;

	if (path == NULL || *path == '\0')
		path = RLG_DEFAULT_CONF;
	while ((ch = getopt(argc, argv, "c:s:tVh")) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 's': listen_addr = optarg; break;
		case 't': test = 1; break;
		case 'V':
			/* The library's name too: rlgate-ctl versions lists
			 * libraries, and this says which build runs which. */
			printf("rlgate %s (Lua library %s)\n", RLG_VERSION,
			    rlg_library_name);
			return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}
	if ((c = load(path, stderr)) == NULL)
		return 1;
	if (test)
		return check_only(c, listen_addr);
	log_set_level(c->log_level);
	show_warnings(c, NULL, "");
	/* Sockets systemd passes come first: the socket units say where
	 * rlgate listens, and a restart must not open another socket. */
	if ((nfd = systemd_listeners(fds)) > 0) {
		if (listen_addr != NULL || c->listen != NULL)
			log_warn("listening on the %d sockets systemd passed; "
			    "%s %s ignored", nfd, listen_addr != NULL ? "-s" :
			    "[gateway] listen", listen_addr != NULL ?
			    listen_addr : c->listen);
		listen_addr = NULL;
	} else if (listen_addr == NULL)
		listen_addr = c->listen;
	cgi = listen_addr == NULL && nfd == 0 && !is_listener(0);
	if (cgi && getenv("GATEWAY_INTERFACE") == NULL) {
		fprintf(stderr, "rlgate: no listening socket on fd 0 and no "
		    "listen address: use -s ADDR, [gateway] listen, "
		    "spawn-fcgi, or a systemd socket unit\n");
		conf_free(c);
		return 1;
	}
	if (cgi) {
		i = run_cgi(c);
		conf_free(c);
		return i;
	}

	if (nfd == 0) {
		fds[0] = listen_addr != NULL ? open_listener(listen_addr, c) : 0;
		nfd = 1;
	}
	/* spawn-fcgi -F N: /metrics counts every process on this socket;
	 * socket activation: the process before a restart is gone. */
	metrics_share(fds[0], c);
	/* Signals are taken by sigwait() below, never by a worker. */
	signal(SIGPIPE, SIG_IGN);
	/* A file-size limit (ulimit -f, systemd LimitFSIZE) reached by the
	 * audit database must fail the write, which is retried, not kill
	 * the gateway and the rows it holds. */
	signal(SIGXFSZ, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	if (c->audit_database != NULL) {
		char errbuf[512];

		if ((gateway_audit = audit_open(c->audit_database, c->audit_queue,
		    c->audit_batch, c->audit_flush_interval_ms, errbuf,
		    sizeof(errbuf))) == NULL)
			fatal("audit: %s", errbuf);
		audit_on_write(gateway_audit, gateway_publish);
		audit_keep(gateway_audit, c->audit_keep_ms);
		audit_keep_rows(gateway_audit, c->audit_keep_rows_ms);
	}
	gateway_threads = loops_of(c);
	if (gen_install(c) == -1)
		fatal("out of memory");
	serve(c, fds, nfd, listen_addr);
	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig == SIGHUP) {
			reload(path);
			continue;
		}
		break;
	}
	log_info("signal %d: finishing requests in flight", sig);
	return stop();
}
