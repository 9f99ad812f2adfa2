/*
 * fcgi_raw: a FastCGI client for tests that writes exactly the records a
 * script says (wrong ones too) and prints the records it reads, decoded,
 * one per line, for a shell test to compare. It reads only when told to.
 *
 *   fcgi_raw [-t MS] ADDR [COMMAND...]      ADDR: host:port or unix:/path
 *
 * Commands: one per argument, else one per line on stdin. What they write
 * is sent in one write at the next command that reads, waits, switches or
 * closes the connection, at flush, and at the end.
 *   conn N                   use connection N (0 at start), opened on use
 *   begin ID ROLE [keep]     ROLE: responder, authorizer, filter or a number
 *   param ID NAME VALUE      a PARAMS record, one pair (VALUE: rest of line)
 *   param-bytes ID NAME VALUE  the same, VALUE written as TEXT is (\x00...)
 *   big-param ID NAME LEN    one pair, LEN bytes of 'x', in records of 65535
 *   params-end ID | stdin-end ID | abort ID
 *   request ID ROLE keep|close METHOD URI [CLIENT]
 *                            as nginx's auth_request: BEGIN, the params,
 *                            the end of PARAMS and the empty STDIN
 *   get-values NAME...       FCGI_GET_VALUES
 *   record TYPE ID [TEXT]    any record (5: STDIN);  text TEXT: bare bytes
 *   flush | sleep MS | close | shut-wr
 *   read [N]                 read and print N records (default 1)
 *   wait-reply ID            read and print up to ID's END_REQUEST
 *   expect-eof               read and print up to the end
 *   pending [MS]             PENDING if nothing comes within MS (default
 *                            0), else READABLE; nothing is read
 * TEXT may hold \r \n \t \\ and \xHH. Output lines: STDOUT ID TEXT (escaped
 * the same way; "STDOUT ID" when empty), STDERR ID TEXT, END_REQUEST ID
 * app=N proto=N, GET_VALUES_RESULT NAME=VALUE... (MALFORMED last when the
 * pairs do not fit the record), UNKNOWN_TYPE T, RECORD type=T id=I len=L,
 * EOF, RESET, WRITE_ERROR why. A read that waits -t ms
 * (default 5000) prints TIMEOUT and exits 3; a bad script exits 2, a
 * failed connect 1.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/un.h>

#include <fastcgi.h>

#include "clock.h"
#include "tool.h"

#define MAX_CONNS	1024
#define MAX_RECORD	(FCGI_HEADER_LEN + FCGI_MAX_LENGTH + 255)

struct fconn {
	int		 fd, eof;
};

static struct fconn	 conns[MAX_CONNS];
static struct fconn	*cur = &conns[0];	/* only it has output pending */
static const char	*addr;
static int		 timeout_ms = 5000;
static unsigned char	*out, in[MAX_RECORD], buf[MAX_RECORD];
static size_t		 out_len, out_cap, in_len;

static void
die(int status, const char *what, const char *arg)
{
	fprintf(stderr, "fcgi_raw: %s: %s\n", what, arg ? arg : "(missing)");
	exit(status);
}

static long
num(const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = s ? strtol(s, &end, 10) : 0;
	if (s == NULL || *s == '\0' || *end != '\0' || errno || v < min || v > max)
		die(2, "not a number in range", s);
	return v;
}

static void
put(const void *p, size_t n)
{
	if (out_len + n > out_cap) {
		out_cap = (out_len + n) * 2;
		if ((out = realloc(out, out_cap)) == NULL)
			die(1, "out of memory", NULL);
	}
	if (n > 0)
		memcpy(out + out_len, p, n);
	out_len += n;
}

static void
record(int type, int id, const void *body, size_t len)
{
	unsigned char h[8] = { 1, (unsigned char)type, (unsigned char)(id >> 8),
	    (unsigned char)id, (unsigned char)(len >> 8), (unsigned char)len, 0, 0 };

	put(h, 8);
	put(body, len);
}

/* Writes a name-value pair into b (room is the caller's); returns its size. */
static size_t
pair(unsigned char *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
	size_t n = 0, len[2] = { nlen, vlen };

	for (int i = 0; i < 2; i++) {
		if (len[i] > 127)
			for (int k = 3; k > 0; k--)
				b[n++] = (unsigned char)(len[i] >> 8 * k | (k == 3 ? 0x80 : 0));
		b[n++] = (unsigned char)len[i];
	}
	memcpy(b + n, name, nlen);
	memcpy(b + n + nlen, value, vlen);
	return n + nlen + vlen;
}

/* Turns \r \n \t \\ \xHH in s into bytes, in place; returns the length. */
static size_t
unescape(char *s)
{
	size_t i, n = 0;
	unsigned x;

	for (i = 0; s[i]; i++) {
		if (s[i] != '\\' || s[i + 1] == '\0')
			s[n++] = s[i];
		else if (s[++i] == 'x' && sscanf(s + i + 1, "%2x", &x) == 1) {
			s[n++] = (char)x;
			i += 2;
		} else
			s[n++] = s[i] == 'r' ? '\r' : s[i] == 'n' ? '\n' : s[i] == 't' ? '\t' : s[i];
	}
	return n;
}

static void
print_escaped(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\r' || p[i] == '\n' || p[i] == '\t' || p[i] == '\\')
			printf("\\%c", p[i] == '\r' ? 'r' : p[i] == '\n' ? 'n' : p[i] == '\t' ? 't' : '\\');
		else if (p[i] < 0x20 || p[i] > 0x7e)
			printf("\\x%02x", p[i]);
		else
			putchar(p[i]);
	}
}

static void
open_conn(struct fconn *c)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	if (c->fd >= 0 || c->eof)
		return;
	if (strncmp(addr, "unix:", 5) == 0) {
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", addr + 5);
		if ((c->fd = socket(AF_UNIX, SOCK_STREAM, 0)) != -1 &&
		    connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
			close(c->fd);
			c->fd = -1;
		}
	} else
		c->fd = tool_tcp(addr, 0);
	if (c->fd == -1)
		die(1, "cannot connect", strerror(errno));
}

/* Sends what the current connection has pending. */
static void
flush(void)
{
	size_t off = 0;
	ssize_t n;

	if (out_len > 0)
		open_conn(cur);
	while (off < out_len && cur->fd >= 0) {
		if ((n = write(cur->fd, out + off, out_len - off)) > 0)
			off += (size_t)n;
		else if (errno != EINTR) {
			printf("WRITE_ERROR %s\n", strerror(errno));
			break;
		}
	}
	out_len = 0;
}

/* Reads one whole record from cur into in[]: 1, 0 at EOF, -1 reset, -2
 * past the deadline. */
static int
read_record(long long deadline)
{
	struct pollfd pfd = { .events = POLLIN };
	size_t need;
	ssize_t n;

	flush();
	open_conn(cur);
	for (in_len = 0;;) {
		need = in_len < 8 ? 8 : 8 + ((size_t)in[4] << 8 | in[5]) + in[6];
		if (in_len >= 8 && in_len == need)
			return 1;
		if (cur->eof)
			return cur->eof == 1 ? 0 : -1;
		pfd.fd = cur->fd;
		if (poll(&pfd, 1, (int)(deadline > mono_ms() ? deadline - mono_ms() : 0)) == 0)
			return -2;
		if ((n = read(cur->fd, in + in_len, need - in_len)) > 0)
			in_len += (size_t)n;
		else if (n == 0 || (errno != EINTR && errno != EAGAIN))
			cur->eof = n == 0 ? 1 : -1;
	}
}

/* A name-value pair's length at b[*off] (1 byte, or 4 with the top bit
 * set), within len; moves *off past it. -1 when it does not fit. */
static int
nv_len(const unsigned char *b, size_t len, size_t *off, size_t *n)
{
	if (*off < len && b[*off] < 0x80) {
		*n = b[(*off)++];
		return 0;
	}
	if (*off + 4 > len)
		return -1;
	*n = ((size_t)b[*off] & 0x7f) << 24 | (size_t)b[*off + 1] << 16 |
	    (size_t)b[*off + 2] << 8 | b[*off + 3];
	*off += 4;
	return 0;
}

/* Prints records until type `until` comes for id, or count are read;
 * -1 at the end of the connection. */
static int
read_print(int until, int id, long count)
{
	long long deadline = mono_ms() + timeout_ms;
	unsigned char *b = in + 8;
	size_t len, off, nl, vl;
	int rc, type, rid;

	while (count-- > 0) {
		if ((rc = read_record(deadline)) <= 0) {
			puts(rc == 0 ? "EOF" : rc == -1 ? "RESET" : "TIMEOUT");
			if (rc == -2)
				exit(3);
			return -1;
		}
		type = in[1];
		rid = in[2] << 8 | in[3];
		len = (size_t)in[4] << 8 | in[5];
		if (type == FCGI_STDOUT || type == FCGI_STDERR) {
			printf("%s %d%s", type == FCGI_STDOUT ? "STDOUT" : "STDERR", rid, len ? " " : "");
			print_escaped(b, len);
			putchar('\n');
		} else if (type == FCGI_END_REQUEST && len >= 8)
			printf("END_REQUEST %d app=%u proto=%d\n", rid, (unsigned)b[0] << 24 |
			    (unsigned)b[1] << 16 | (unsigned)b[2] << 8 | b[3], b[4]);
		else if (type == FCGI_GET_VALUES_RESULT) {
			fputs("GET_VALUES_RESULT", stdout);
			for (off = 0; off < len; off += nl + vl) {
				if (nv_len(b, len, &off, &nl) == -1 || nv_len(b, len, &off, &vl) == -1 ||
				    nl + vl > len - off) {
					fputs(" MALFORMED", stdout);
					break;
				}
				printf(" %.*s=%.*s", (int)nl, b + off, (int)vl, b + off + nl);
			}
			putchar('\n');
		} else if (type == FCGI_UNKNOWN_TYPE && len >= 1)
			printf("UNKNOWN_TYPE %d\n", b[0]);
		else
			printf("RECORD type=%d id=%d len=%zu\n", type, rid, len);
		if (type == until && rid == id)
			break;
	}
	return 0;
}

/* The next blank-separated word of *p, or NULL; *p is left past the one
 * blank after it, at the rest of the line. */
static char *
word(char **p)
{
	char *w = *p + strspn(*p, " ");

	if (*w == '\0')
		return NULL;
	*p = w + strcspn(w, " ");
	if (**p != '\0')
		*(*p)++ = '\0';
	return w;
}

static int
next_id(char **p)
{
	return (int)num(word(p), 0, 65535);
}

static void
begin(int id, const char *role, const char *keep)
{
	int r = role == NULL ? -1 : !strcmp(role, "responder") ? 1 :
	    !strcmp(role, "authorizer") ? 2 : !strcmp(role, "filter") ? 3 :
	    (int)num(role, 0, 65535);
	unsigned char b[8] = { (unsigned char)(r >> 8), (unsigned char)r,
	    keep != NULL && strcmp(keep, "keep") == 0 };

	if (r == -1)
		die(2, "begin ID ROLE [keep]", NULL);
	record(FCGI_BEGIN_REQUEST, id, b, 8);
}

/* What nginx's auth_request sends: a[] is ROLE, keep|close, METHOD, URI
 * and the client address (or NULL). */
static void
request(int id, char *a[5])
{
	const char *env[][2] = { { "REQUEST_METHOD", a[2] }, { "REQUEST_URI", a[3] },
	    { "QUERY_STRING", "" }, { "REMOTE_ADDR", a[4] ? a[4] : "127.0.0.1" },
	    { "REMOTE_PORT", "40000" }, { "SERVER_PROTOCOL", "HTTP/1.1" },
	    { "GATEWAY_INTERFACE", "CGI/1.1" }, { "HTTP_HOST", "localhost" } };
	size_t i, len = 0;

	if (a[3] == NULL || strlen(a[3]) > 4096)
		die(2, "request ID ROLE keep|close METHOD URI [CLIENT]", a[3]);
	for (i = 0; i < sizeof(env) / sizeof(env[0]); i++)
		len += pair(buf + len, env[i][0], strlen(env[i][0]), env[i][1],
		    strlen(env[i][1]));
	begin(id, a[0], a[1]);
	record(FCGI_PARAMS, id, buf, len);
	record(FCGI_PARAMS, id, NULL, 0);
	record(FCGI_STDIN, id, NULL, 0);
}

/* One pair NAME=xxx... (n bytes of value) in as many PARAMS as it takes. */
static void
big_param(int id, const char *name, long n)
{
	unsigned char *b = malloc((size_t)n + strlen(name) + 8);
	char *x = malloc((size_t)n + 1);
	size_t len, off;

	if (b == NULL || x == NULL)
		die(1, "out of memory", NULL);
	memset(x, 'x', (size_t)n);
	len = pair(b, name, strlen(name), x, (size_t)n);
	for (off = 0; off < len; off += FCGI_MAX_LENGTH)
		record(FCGI_PARAMS, id, b + off, len - off < FCGI_MAX_LENGTH ?
		    len - off : FCGI_MAX_LENGTH);
	free(b);
	free(x);
}

static void
command(char *p)
{
	char *cmd = word(&p), *a[5];
	struct pollfd pfd = { .events = POLLIN };
	size_t len;
	long n;
	int id, i;

	if (cmd == NULL || cmd[0] == '#')
		return;
	if (!strcmp(cmd, "text"))
		put(p, unescape(p));
	else if (!strcmp(cmd, "conn")) {
		flush();
		cur = &conns[num(word(&p), 0, MAX_CONNS - 1)];
		open_conn(cur);
	} else if (!strcmp(cmd, "begin")) {
		id = next_id(&p);
		a[0] = word(&p);
		begin(id, a[0], word(&p));
	} else if (!strcmp(cmd, "param") || !strcmp(cmd, "param-bytes")) {
		id = next_id(&p);
		if ((a[0] = word(&p)) == NULL || strlen(a[0]) + strlen(p) + 8 >
		    FCGI_MAX_LENGTH)
			die(2, "param ID NAME VALUE, in one record", a[0]);
		len = cmd[5] == '-' ? unescape(p) : strlen(p);
		record(FCGI_PARAMS, id, buf, pair(buf, a[0], strlen(a[0]), p, len));
	} else if (!strcmp(cmd, "big-param")) {
		id = next_id(&p);
		if ((a[0] = word(&p)) == NULL)
			die(2, "big-param ID NAME LEN", NULL);
		big_param(id, a[0], num(word(&p), 0, 64L << 20));
	} else if (!strcmp(cmd, "params-end") || !strcmp(cmd, "stdin-end") ||
	    !strcmp(cmd, "abort"))
		record(cmd[0] == 'p' ? FCGI_PARAMS : cmd[0] == 's' ?
		    FCGI_STDIN : FCGI_ABORT_REQUEST, next_id(&p), NULL, 0);
	else if (!strcmp(cmd, "record")) {
		n = num(word(&p), 0, 255);
		id = next_id(&p);
		record((int)n, id, p, unescape(p));
	} else if (!strcmp(cmd, "request")) {
		id = next_id(&p);
		for (i = 0; i < 5; i++)
			a[i] = word(&p);
		request(id, a);
	} else if (!strcmp(cmd, "get-values")) {
		for (len = 0; (a[0] = word(&p)) != NULL && len + strlen(a[0]) < 65000; )
			len += pair(buf + len, a[0], strlen(a[0]), "", 0);
		record(FCGI_GET_VALUES, 0, buf, len);
	} else if (!strcmp(cmd, "flush"))
		flush();
	else if (!strcmp(cmd, "sleep")) {
		n = num(word(&p), 0, 600000);
		flush();
		sleep_ms(n);
	} else if (!strcmp(cmd, "shut-wr") || !strcmp(cmd, "close")) {
		flush();
		if (cmd[0] == 's')
			shutdown(cur->fd, SHUT_WR);
		else if (close(cur->fd) == 0)
			cur->fd = -1, cur->eof = 1;
	} else if (!strcmp(cmd, "read"))
		read_print(0, -1, (a[0] = word(&p)) ? num(a[0], 1, 1000000) : 1);
	else if (!strcmp(cmd, "wait-reply"))
		read_print(3, next_id(&p), 1000000);
	else if (!strcmp(cmd, "expect-eof"))
		while (read_print(0, -1, 1) == 0)
			;
	else if (!strcmp(cmd, "pending")) {
		n = (a[0] = word(&p)) ? num(a[0], 0, 600000) : 0;
		flush();
		open_conn(cur);
		pfd.fd = cur->fd;
		puts(poll(&pfd, 1, (int)n) != 0 ? "READABLE" : "PENDING");
	} else
		die(2, "unknown command", cmd);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	char line[8192];
	int c, i;

	while ((c = getopt(argc, argv, "+t:")) != -1) {
		if (c != 't')
			die(2, "usage", "fcgi_raw [-t MS] ADDR [COMMAND...]");
		timeout_ms = (int)num(optarg, 1, 3600000);
	}
	if (optind >= argc)
		die(2, "usage", "fcgi_raw [-t MS] ADDR [COMMAND...]");
	addr = argv[optind++];
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < MAX_CONNS; i++)
		conns[i].fd = -1;
	if (optind == argc)
		while (fgets(line, sizeof(line), stdin) != NULL) {
			line[strcspn(line, "\r\n")] = '\0';
			command(line);
		}
	for (; optind < argc; optind++)
		command(argv[optind]);
	flush();
	fflush(stdout);
	return 0;
}
