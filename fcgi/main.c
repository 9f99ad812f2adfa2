/*
 * main: start-up, signals, the threads engine (workers in FCGX_Accept_r)
 * and CGI mode; the events engine is events.c. Each request goes one way:
 * request -> rule -> limiter -> respond -> audit, in job_begin() and
 * job_end() around the Redis round trip, whatever the engine. Nothing here
 * decides anything; it wires the modules together and owns the process's
 * lifetime (reload on SIGHUP, drain on SIGTERM).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "audit.h"
#include "clock.h"
#include "conf.h"
#include "denycache.h"
#include "events.h"
#include "gateway.h"
#include "limiter.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "respond.h"
#include "rule.h"
#include "scripts.h"

#define RLG_VERSION	"0.1.0"
/* /health answers 503 when the oldest audit row waits longer than this. */
#define RLG_HEALTH_AUDIT_LAG_MS	10000

extern char **environ;

struct worker {
	pthread_t	 thread;
	struct limiter	*limiter;
	FCGX_Request	 fcgi;
	char		*out;		/* RLG_MAX_RESPONSE bytes */
	struct match	 m[RLG_MAX_MATCHES];
	struct verdict	 v[RLG_MAX_MATCHES];
	struct metrics_worker *metrics;
	struct page	 status;	/* status page, grown as needed */
};

static pthread_mutex_t	 gen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct generation *current;
static struct audit	*audit;
static int		 listen_fd = -1;
static atomic_int	 stopping;
static long long	 generations;	/* under gen_lock */
int			 gateway_threads;
static enum rlg_engine	 engine;

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

struct generation *
gen_acquire(void)
{
	struct generation *g;

	pthread_mutex_lock(&gen_lock);
	g = current;
	g->refs++;
	pthread_mutex_unlock(&gen_lock);
	return g;
}

void
gen_release(struct generation *g)
{
	int last;

	pthread_mutex_lock(&gen_lock);
	last = --g->refs == 0;
	pthread_mutex_unlock(&gen_lock);
	if (last) {
		conf_free(g->conf);
		free(g);
	}
}

static void
gen_install(struct conf *c)
{
	struct generation *g, *old;

	if ((g = calloc(1, sizeof(*g))) == NULL)
		fatal("out of memory");
	g->conf = c;
	g->refs = 1;
	g->loaded_ms = wall_ms();
	pthread_mutex_lock(&gen_lock);
	g->number = ++generations;
	old = current;
	current = g;
	pthread_mutex_unlock(&gen_lock);
	if (old != NULL)
		gen_release(old);
}

/* The number of threads c asks for: workers, or the engine's default (a
 * loop per CPU, or 16 threads). */
static int
threads_of(const struct conf *c)
{
	cpu_set_t cpus;

	if (c->workers > 0)
		return c->workers;
	if (c->engine == RLG_ENGINE_THREADS)
		return 16;
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 &&
	    CPU_COUNT(&cpus) > 0)
		return CPU_COUNT(&cpus);
	return 1;
}

/* Every rule needs its algorithm's script in this binary. */
static int
check_scripts(const struct conf *c, FILE *errf)
{
	int bad = 0;

	for (size_t i = 0; i < c->nrules; i++) {
		const struct rule *ru = &c->rules[i];

		if (scripts_find(conf_algorithm_name(ru->algorithm)) == NULL) {
			fprintf(errf, "%s:%d: [rule:%s] algorithm: %s is not "
			    "built into this rlgate\n", c->path, ru->line,
			    ru->name, conf_algorithm_name(ru->algorithm));
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

static struct conf *
load(const char *path, FILE *errf)
{
	struct conf *c;
	char *errors = NULL;

	if ((c = conf_load(path, &errors)) == NULL) {
		fputs(errors ? errors : "out of memory\n", errf);
		free(errors);
		return NULL;
	}
	if (check_scripts(c, errf) == -1) {
		conf_free(c);
		return NULL;
	}
	metrics_register_rules(c);
	return c;
}

/* Writes the audit rows of one decided request. */
static void
record(const struct decision *d, long long latency_us)
{
	struct audit_row row;
	long long ts_ms;
	size_t i;

	if (audit == NULL)
		return;
	memset(&row, 0, sizeof(row));
	row.request_id = d->req->id;
	row.method = d->req->method;
	row.path = d->req->path;
	row.client_ip = d->req->ip;
	row.status = d->status;
	row.latency_us = latency_us;
	row.ts_ms = ts_ms = wall_ms();
	row.cost = row.limit_value = row.window_ms = row.burst = -1;
	row.remaining = row.retry_after_ms = row.delay_ms = -1;

	if (d->n == 0) {
		if (d->bad_detail == NULL &&
		    !d->conf->audit_unmatched)
			return;
		row.rule = d->bad_rule ? d->bad_rule->name : NULL;
		row.allowed = d->allowed;
		row.reason = respond_reason_name(d->bad_detail ?
		    RLG_REASON_BAD_REQUEST : RLG_REASON_UNMATCHED);
		audit_push(audit, &row);
		return;
	}
	for (i = 0; i < d->n; i++) {
		const struct rule *ru = d->m[i].rule;
		const struct verdict *v = &d->v[i];

		row.rule = ru->name;
		row.key = d->m[i].key;
		row.algorithm = conf_algorithm_name(ru->algorithm);
		row.allowed = d->rule_allowed[i];
		row.reason = respond_reason_name(d->rule_reason[i]);
		row.cost = d->m[i].cost;
		/* The parameters the decision used: the rule's, or its
		 * override's in Redis (overrides = redis). */
		row.limit_value = v->limit;
		row.window_ms = v->window_ms;
		row.burst = v->burst;
		row.ts_ms = ts_ms;
		row.remaining = row.retry_after_ms = row.delay_ms = -1;
		if (v->answered) {
			/* Redis TIME: the clock every gateway shares. */
			row.ts_ms = v->now_us / 1000;
			row.remaining = v->remaining;
			row.retry_after_ms = v->retry_after_ms;
			row.delay_ms = v->delay_ms;
		}
		/* Unlimited: no limit applied, nothing was counted. */
		if (d->rule_reason[i] == RLG_REASON_UNLIMITED)
			row.limit_value = row.window_ms = row.burst =
			    row.remaining = -1;
		audit_push(audit, &row);
	}
}

static void
sleep_ms(long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
	    (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Is r's path c's status path, or under it? */
static int
for_status(const struct conf *c, const struct request *r)
{
	size_t n;

	if (c->status_path == NULL)
		return 0;
	n = strlen(c->status_path);
	return strncmp(r->path, c->status_path, n) == 0 &&
	    (r->path[n] == '\0' || r->path[n] == '/');
}

void
job_begin(struct job *j, const struct conf *c, char **envp, int status,
    struct match *m)
{
	const char *errstr = NULL;
	int n = 0;

	memset(&j->d, 0, sizeof(j->d));
	j->start_us = mono_us();
	j->d.conf = c;
	j->d.req = &j->req;
	j->status = 0;
	j->bad_status = request_init(&j->req, envp, c, &errstr);
	if (j->bad_status != 0)
		j->d.bad_detail = errstr;
	else if (status && for_status(c, &j->req))
		j->status = 1;
	else if ((n = rule_match(c, &j->req, m, RLG_MAX_MATCHES,
	    &j->d.bad_rule, &errstr)) == -1) {
		j->d.bad_detail = errstr;
		n = 0;
	}
	j->d.n = (size_t)n;
}

size_t
job_end(struct job *j, const struct match *m, const struct verdict *v,
    struct metrics_worker *w, char *out)
{
	size_t len;

	j->d.m = m;
	j->d.v = v;
	respond_decide(&j->d, j->bad_status);
	len = respond_write(&j->d, out, RLG_MAX_RESPONSE);
	record(&j->d, mono_us() - j->start_us);
	metrics_decided(w, &j->d);
	return len;
}

/*
 * Decides j (job_begin() done) and writes its reply into out, the
 * threads' way: one round trip, then leaky_bucket's wait in this thread.
 * Returns the reply's length.
 */
static size_t
serve(const struct conf *c, struct limiter *lim, struct job *j,
    struct match *m, struct verdict *v, struct metrics_worker *w, char *out)
{
	size_t len;

	if (j->d.n > 0)
		limiter_decide(lim, c, m, j->d.n, v);
	len = job_end(j, m, v, w, out);
	/* leaky_bucket: the consumer waits its turn instead of failing. */
	if (j->d.allowed && j->d.delay_ms > 0)
		sleep_ms(j->d.delay_ms);
	return len;
}

/* What the status pages show besides the counters. */
static void
process_numbers(struct metrics_process *p)
{
	struct audit_stats st;
	long long now = wall_ms();

	memset(p, 0, sizeof(*p));
	p->workers = gateway_threads;
	p->audit = audit != NULL;
	audit_stats(audit, &st);
	p->audit_written = st.written;
	p->audit_queued = st.queued;
	p->audit_retries = st.failures;
	/* Rows carry Redis TIME: a little clock skew is not lag. */
	if (st.queued > 0 && st.oldest_ts_ms > 0 && now > st.oldest_ts_ms)
		p->audit_lag_ms = now - st.oldest_ts_ms;
	pthread_mutex_lock(&gen_lock);
	p->generation = current->number;
	p->loaded_ms = current->loaded_ms;
	pthread_mutex_unlock(&gen_lock);
	p->deny_cache_entries = denycache_size();
}

/* Room for n bytes in p. */
static int
page_room(struct page *p, size_t n)
{
	char *bigger;

	if (n <= p->cap)
		return 0;
	if ((bigger = realloc(p->buf, n + 4096)) == NULL)
		return -1;
	p->buf = bigger;
	p->cap = n + 4096;
	return 0;
}

/*
 * Puts the headers of a status page in front of its body, which is
 * body_len bytes at p->buf + PAGE_HEAD. Returns the reply's length.
 */
#define PAGE_HEAD	128
static size_t
page_reply(struct page *p, int status, const char *type, size_t body_len)
{
	char head[PAGE_HEAD];
	int n;

	n = snprintf(head, sizeof(head), "Status: %d %s\r\nContent-Type: %s\r\n"
	    "Cache-Control: no-store\r\n\r\n", status,
	    respond_reason_phrase(status), type);
	if (n < 0 || n >= (int)sizeof(head))	/* our own short strings */
		abort();
	memmove(p->buf + n, p->buf + PAGE_HEAD, body_len);
	memcpy(p->buf, head, (size_t)n);
	return (size_t)n + body_len;
}

/*
 * The status endpoint: <status_path>/health and <status_path>/metrics for
 * status_allow clients, when the web server maps the path to rlgate as a
 * responder. Asked as an authorizer about such a path (lighttpd asks its
 * "/" authorizer before it runs the responder), rlgate says "go on" with
 * no decision and no audit row: a scrape is never rate-limited. Returns
 * the length of the reply it wrote into p (0 when out of memory).
 */
size_t
status_page(const struct conf *c, const struct job *j, struct limiter *l,
    struct page *p)
{
	static const char go_on[] = "Status: 200 OK\r\n\r\n";
	const struct request *req = &j->req;
	const char *sub = req->path + strlen(c->status_path);
	struct metrics_health h;
	unsigned char addr[16];
	char ip[INET6_ADDRSTRLEN], err[256], *body;
	size_t len, room;
	int family, healthy;

	if (page_room(p, PAGE_HEAD + 4096) == -1)
		return 0;
	if (req->role == RLG_ROLE_AUTHORIZER) {
		memcpy(p->buf, go_on, sizeof(go_on) - 1);
		return sizeof(go_on) - 1;
	}
	body = p->buf + PAGE_HEAD;
	room = p->cap - PAGE_HEAD;
	family = request_parse_ip(req->ip, strlen(req->ip), addr, ip);
	if (family == -1 || !conf_in_cidrs(c->status_allow, c->nstatus_allow,
	    family, addr)) {
		len = (size_t)snprintf(body, room, "{\"type\":"
		    "\"about:blank\",\"title\":\"Forbidden\",\"status\":403,"
		    "\"detail\":\"the status endpoint answers only the "
		    "addresses in [gateway] status_allow\"}\n");
		return page_reply(p, 403, "application/problem+json", len);
	}
	if (strcmp(sub, "/metrics") == 0) {
		struct metrics_process mp;

		process_numbers(&mp);
		while ((len = metrics_prometheus(&mp, p->buf + PAGE_HEAD,
		    p->cap - PAGE_HEAD)) >= p->cap - PAGE_HEAD)
			if (page_room(p, PAGE_HEAD + len + 1) == -1) {
				len = p->cap - PAGE_HEAD - 1;
				break;
			}
		return page_reply(p, 200,
		    "text/plain; version=0.0.4; charset=utf-8", len);
	}
	if (strcmp(sub, "/health") == 0) {
		memset(&h, 0, sizeof(h));
		h.version = RLG_VERSION;
		h.redis_address = c->redis_address;
		h.redis_ok = limiter_ping(l, c, &h.redis_latency_us, err,
		    sizeof(err)) == 0;
		h.redis_error = err;
		process_numbers(&h.p);
		h.config_path = c->path;
		h.rules = c->nrules;
		h.audit_lag_max_ms = RLG_HEALTH_AUDIT_LAG_MS;
		len = metrics_health_json(&h, body, room, &healthy);
		return page_reply(p, healthy ? 200 : 503, "application/json",
		    len);
	}
	len = (size_t)snprintf(body, room, "{\"type\":"
	    "\"about:blank\",\"title\":\"Not Found\",\"status\":404,"
	    "\"detail\":\"try %s/health or %s/metrics\"}\n",
	    c->status_path, c->status_path);
	return page_reply(p, 404, "application/problem+json", len);
}

/*
 * FCGX_Finish_r, closing at once when that is safe. libfcgi closes the
 * careful way: shutdown(), then it waits for the web server to close its
 * end (up to 2 s), because closing a socket with input still unread makes
 * the kernel send RST, which can destroy the response before the server
 * has read it. That wait holds this worker for a round trip and costs a
 * sleep and a wake-up per request. It protects nothing once everything
 * the server sends for the request has been read: for a request without a
 * body (the authorizer and auth_request case) that is the empty record
 * ending stdin, normally read with the parameters. So: without a body,
 * read the end of stdin without ever waiting (non-blocking), and when it
 * was there and the socket holds nothing more, close without the wait.
 * Anything else, or any doubt, closes the careful way.
 */
static void
finish(FCGX_Request *r)
{
	const char *cl = FCGX_GetParam("CONTENT_LENGTH", r->envp);
	char buf[64];
	int unread = -1;

	/* An accepted socket starts with no status flags (accept(2) does not
	 * inherit them): O_NONBLOCK on, then all off again. */
	if (!r->keepConnection && r->ipcFd >= 0 && r->in != NULL &&
	    (cl == NULL || strcmp(cl, "") == 0 || strcmp(cl, "0") == 0) &&
	    fcntl(r->ipcFd, F_SETFL, O_NONBLOCK) != -1) {
		/* Not there yet: read() says EAGAIN, the stream records an
		 * error, and FCGX_Finish_r closes the careful way. */
		while (FCGX_GetStr(buf, sizeof(buf), r->in) > 0)
			;
		fcntl(r->ipcFd, F_SETFL, 0);
		if (FCGX_HasSeenEOF(r->in) == EOF &&
		    FCGX_GetError(r->in) == 0 &&
		    ioctl(r->ipcFd, FIONREAD, &unread) == 0 && unread == 0)
			FCGX_Detach(r);	/* libfcgi: close() without the wait */
	}
	FCGX_Finish_r(r);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct generation *g;
	struct job j;
	size_t len;

	if (FCGX_InitRequest(&w->fcgi, listen_fd, 0) != 0) {
		log_error("cannot set up a FastCGI request");
		return NULL;
	}
	for (;;) {
		if (FCGX_Accept_r(&w->fcgi) < 0) {
			if (atomic_load(&stopping))
				break;
			/* Out of descriptors or a broken peer: not fatal. */
			sleep_ms(10);
			continue;
		}
		metrics_busy(w->metrics, 1);
		g = gen_acquire();
		job_begin(&j, g->conf, w->fcgi.envp, 1, w->m);
		if (j.status) {
			len = status_page(g->conf, &j, w->limiter, &w->status);
			FCGX_PutStr(w->status.buf, (int)len, w->fcgi.out);
		} else {
			len = serve(g->conf, w->limiter, &j, w->m, w->v,
			    w->metrics, w->out);
			FCGX_PutStr(w->out, (int)len, w->fcgi.out);
		}
		gen_release(g);
		finish(&w->fcgi);
		metrics_busy(w->metrics, 0);
	}
	FCGX_Free(&w->fcgi, 1);
	return NULL;
}

static struct worker	*workers;

static int
threads_start(int n)
{
	if (FCGX_Init() != 0) {
		errno = EINVAL;
		return -1;
	}
	if ((workers = calloc((size_t)n, sizeof(*workers))) == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		workers[i].limiter = limiter_new();
		workers[i].out = malloc(RLG_MAX_RESPONSE);
		workers[i].metrics = metrics_worker_new();
		if (workers[i].limiter == NULL || workers[i].out == NULL ||
		    workers[i].metrics == NULL) {
			errno = ENOMEM;
			return -1;
		}
		limiter_set_metrics(workers[i].limiter, workers[i].metrics);
		if ((errno = pthread_create(&workers[i].thread, NULL,
		    worker_main, &workers[i])) != 0)
			return -1;
	}
	return 0;
}

/* Returns the number of workers still running after timeout_s seconds. */
static int
threads_stop(int timeout_s)
{
	struct timespec deadline;
	int i, late = 0;

	atomic_store(&stopping, 1);
	FCGX_ShutdownPending();
	/* Wakes every FCGX_Accept_r blocked in accept(). */
	shutdown(listen_fd, SHUT_RDWR);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_s;
	for (i = 0; i < gateway_threads; i++) {
		if (pthread_timedjoin_np(workers[i].thread, NULL,
		    &deadline) != 0) {
			log_warn("worker %d did not finish in %d s", i,
			    timeout_s);
			late++;
			continue;
		}
		limiter_free(workers[i].limiter);
		free(workers[i].out);
		free(workers[i].status.buf);
		metrics_worker_free(workers[i].metrics);
	}
	/* A worker still running uses its slot. */
	if (late == 0)
		free(workers);
	return late;
}

/* unix:/path or host:port, opened by us: FCGX_OpenSocket exits on error. */
static int
open_listener(const char *addr)
{
	struct addrinfo hints, *res = NULL, *ai;
	char host[256];
	const char *port;
	int fd = -1, one = 1, rc;

	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un sun;
		struct stat st;
		const char *path = addr + 5;

		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		if (strlen(path) >= sizeof(sun.sun_path))
			fatal("listen %s: path too long", addr);
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
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
			fatal("listen %s: %s", addr, strerror(errno));
		/* The web server runs as another user; guard access with the
		 * directory the socket lives in. */
		chmod(path, 0666);
	} else {
		if ((port = conf_split_address(addr, host,
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
fd0_is_listener(void)
{
	int val = 0;
	socklen_t len = sizeof(val);

	return getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &val, &len) == 0 &&
	    val != 0;
}

static void
reload(const char *path)
{
	struct conf *c, *old = current->conf;
	char *errors = NULL;
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
	/* Remembered denials were decided by the old limits: a raised
	 * limit applies to the next request. After the load, so that no
	 * entry of a freed configuration's address can match the new one. */
	denycache_clear();
	if (old->engine != c->engine)
		log_warn("reload: engine changes only on restart");
	if (threads_of(c) != gateway_threads)
		log_warn("reload: workers changes only on restart (%d kept)",
		    gateway_threads);
	if ((old->audit_database == NULL) != (c->audit_database == NULL) ||
	    (old->audit_database != NULL &&
	    strcmp(old->audit_database, c->audit_database) != 0))
		log_warn("reload: [audit] database changes only on restart");
	log_set_level(c->log_level);
	gen_install(c);
	log_info("reload: %s loaded, %zu rules", path, c->nrules);
}

static int
run_cgi(struct conf *c)
{
	struct limiter *lim = limiter_new();
	struct match *m = calloc(RLG_MAX_MATCHES, sizeof(*m));
	struct verdict *v = calloc(RLG_MAX_MATCHES, sizeof(*v));
	char *out = malloc(RLG_MAX_RESPONSE), errbuf[256], num[32];
	struct respond_summary s;
	struct job j;
	size_t len;

	if (lim == NULL || m == NULL || v == NULL || out == NULL)
		fatal("out of memory");
	if (c->audit_database != NULL && (audit = audit_open(c->audit_database,
	    c->audit_queue, c->audit_batch, c->audit_flush_interval_ms,
	    errbuf, sizeof(errbuf))) == NULL)
		log_error("audit: %s; this request is not recorded", errbuf);
	/* CGI serves no status endpoint: every request is decided. */
	job_begin(&j, c, environ, 0, m);
	len = serve(c, lim, &j, m, v, NULL, out);
	audit_close(audit, 5000);
	limiter_free(lim);
	if (j.d.allowed && c->cgi_upstream != NULL) {
		/* Wrapper mode: become the protected program, which gets
		 * our environment and the untouched stdin. */
		if (respond_summary(&j.d, &s) == 0) {
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
		return 1;
	}
	fwrite(out, 1, len, stdout);
	fflush(stdout);
	return 0;
}

int
main(int argc, char *argv[])
{
	const char *path = getenv("RLGATE_CONF"), *listen_addr = NULL;
	struct conf *c;
	sigset_t sigs;
	int ch, test = 0, sig, i, cgi;
	long long lost;

	if (path == NULL || *path == '\0')
		path = RLG_DEFAULT_CONF;
	while ((ch = getopt(argc, argv, "c:s:tVh")) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 's': listen_addr = optarg; break;
		case 't': test = 1; break;
		case 'V': printf("rlgate %s\n", RLG_VERSION); return 0;
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
	if (test) {
		printf("configuration OK\n");
		conf_free(c);
		return 0;
	}
	log_set_level(c->log_level);
	if (listen_addr == NULL)
		listen_addr = c->listen;
	cgi = listen_addr == NULL && !fd0_is_listener();
	if (cgi && getenv("GATEWAY_INTERFACE") == NULL) {
		fprintf(stderr, "rlgate: no listening socket on fd 0 and no "
		    "listen address: use -s ADDR, [gateway] listen, or "
		    "spawn-fcgi\n");
		conf_free(c);
		return 1;
	}
	if (cgi) {
		i = run_cgi(c);
		conf_free(c);
		return i;
	}

	listen_fd = listen_addr != NULL ? open_listener(listen_addr) : 0;
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

		if ((audit = audit_open(c->audit_database, c->audit_queue,
		    c->audit_batch, c->audit_flush_interval_ms, errbuf,
		    sizeof(errbuf))) == NULL)
			fatal("audit: %s", errbuf);
	}
	{
		char errbuf[256];

		if (limiter_probe(c, errbuf, sizeof(errbuf)) == -1)
			log_warn("redis %s: %s; starting anyway (on_error "
			    "applies until it answers)", c->redis_address,
			    errbuf);
	}
	gateway_threads = threads_of(c);
	engine = c->engine;
	gen_install(c);
	if ((engine == RLG_ENGINE_EVENTS ?
	    events_start(listen_fd, gateway_threads) :
	    threads_start(gateway_threads)) == -1)
		fatal("cannot start the %s: %s", engine == RLG_ENGINE_EVENTS ?
		    "event loops" : "workers", strerror(errno));
	log_info("rlgate %s: %d %s, %zu rules, listening on %s",
	    RLG_VERSION, gateway_threads, engine == RLG_ENGINE_EVENTS ?
	    "event loops" : "workers", c->nrules,
	    listen_addr != NULL ? listen_addr : "fd 0");

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
	/* A kept-alive web-server connection can hold a worker in read(),
	 * a slow one a loop: do not let them hold the exit forever. */
	if ((engine == RLG_ENGINE_EVENTS ? events_stop(10) :
	    threads_stop(10)) == 0)
		gen_release(current);
	else {
		/* One may wait in audit_push on a full queue: release it
		 * (its push fails, the queued rows are still written), and
		 * give it a moment before the audit handle goes away. */
		audit_stop(audit);
		sleep_ms(1000);
	}
	/* audit_close() logs what it could not write. */
	lost = audit_close(audit, 30000);
	if (listen_addr != NULL && strncmp(listen_addr, "unix:", 5) == 0)
		unlink(listen_addr + 5);
	log_info("stopped");
	return lost > 0 ? 1 : 0;
}
