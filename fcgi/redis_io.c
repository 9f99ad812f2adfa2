/*
 * redis_io: the socket under hiredis, plain or TLS. One SSL_CTX per
 * process, built where the configuration is loaded; a connection's SSL
 * session hangs on its hiredis reader (redisReader.privdata: hiredis's
 * own reply functions never read it), so it goes wherever the context
 * goes. Without TLS every call is hiredis's own. Not here: commands,
 * replies' meaning, health and back-off (redis_conn.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "conf.h"
#include "redis_io.h"

static pthread_mutex_t	tls_lock = PTHREAD_MUTEX_INITIALIZER;
static SSL_CTX		*tls_ctx;		/* NULL: TLS is off */
static char		 tls_name[256];		/* tls_server_name, or "" */

/* OpenSSL's last reason, in words, and its queue emptied. */
static const char *
ssl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *s = e != 0 ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return s != NULL ? s : "unknown error";
}

/*
 * The server asked for a client certificate and none is configured: the
 * session is marked, and its failures say so. Under TLS 1.3 a server that
 * requires one refuses only after the handshake, and its alert is lost
 * when the connection is reset first; the mark is not.
 */
static int
asked_for_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
	(void)x509;
	(void)pkey;
	SSL_set_app_data(ssl, (char *)"asked");
	return 0;	/* none sent */
}

static SSL_CTX *
build(const struct conf *c, char *err, size_t errlen)
{
	SSL_CTX *n;

	if ((n = SSL_CTX_new(TLS_client_method())) == NULL) {
		snprintf(err, errlen, "[redis] tls: %s", ssl_reason());
		return NULL;
	}
	SSL_CTX_set_min_proto_version(n, TLS1_2_VERSION);
	/* A server that closes without close_notify has closed. */
	SSL_CTX_set_options(n, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_verify(n, SSL_VERIFY_PEER, NULL);
	if (c->redis_tls_ca_file != NULL) {
		if (SSL_CTX_load_verify_locations(n, c->redis_tls_ca_file,
		    NULL) != 1) {
			snprintf(err, errlen, "[redis] tls_ca_file %s: no CA "
			    "certificate read from it (%s)",
			    c->redis_tls_ca_file, ssl_reason());
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(n) != 1) {
		snprintf(err, errlen, "[redis] tls: the system's CA "
		    "certificates: %s", ssl_reason());
		goto fail;
	}
	if (c->redis_tls_cert_file == NULL)
		SSL_CTX_set_client_cert_cb(n, asked_for_cert);
	else {
		if (SSL_CTX_use_certificate_chain_file(n,
		    c->redis_tls_cert_file) != 1) {
			snprintf(err, errlen, "[redis] tls_cert_file %s: no "
			    "certificate read from it (%s)",
			    c->redis_tls_cert_file, ssl_reason());
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(n, c->redis_tls_key_file,
		    SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(n) != 1) {
			snprintf(err, errlen, "[redis] tls_key_file %s: not the "
			    "key of tls_cert_file %s (%s)",
			    c->redis_tls_key_file, c->redis_tls_cert_file,
			    ssl_reason());
			goto fail;
		}
	}
	return n;
fail:
	SSL_CTX_free(n);
	return NULL;
}

/*
 * The context holds the CA, the client certificate and key and the server
 * name. Called where the configuration is loaded (start-up, rlgate -t, a
 * reload, rlgate-ctl): the connections open keep the context they started
 * with.
 */
int
redis_io_setup(const struct conf *c, char *err, size_t errlen)
{
	SSL_CTX *n = NULL, *old;

	if (c->redis_tls && (n = build(c, err, errlen)) == NULL)
		return -1;
	pthread_mutex_lock(&tls_lock);
	old = tls_ctx;
	tls_ctx = n;
	snprintf(tls_name, sizeof(tls_name), "%s",
	    c->redis_tls_server_name != NULL ? c->redis_tls_server_name : "");
	pthread_mutex_unlock(&tls_lock);
	SSL_CTX_free(old);	/* the sessions open hold their reference */
	return 0;
}

/* A plain connection's reader->privdata points here once the server has
 * sent something on it (a TLS connection's holds its session). */
static char heard_mark;

static SSL *
tls_of(const redisContext *ctx)
{
	void *p = ctx->reader != NULL ? ctx->reader->privdata : NULL;

	return p != &heard_mark ? p : NULL;
}

/* rc, a plain read's: where it read, the server has spoken. */
static int
plain_read(redisContext *ctx, int rc)
{
	if (rc == REDIS_OK && ctx->reader != NULL)
		ctx->reader->privdata = &heard_mark;
	return rc;
}

int
redis_io_heard(const redisContext *ctx)
{
	return ctx->reader != NULL && ctx->reader->privdata != NULL;
}

static void
set_error(redisContext *ctx, int type, const char *what)
{
	ctx->err = type;
	snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", what);
}

/* An SSL_read/SSL_write/SSL_connect that returned n, as ctx's error:
 * a timeout reads as hiredis's (EAGAIN), a close as its EOF. */
static void
io_error(redisContext *ctx, SSL *ssl, int n)
{
	char why[128];
	int saved = errno, e = SSL_get_error(ssl, n);

	switch (e) {
	case SSL_ERROR_ZERO_RETURN:
		set_error(ctx, REDIS_ERR_EOF, "Server closed the connection");
		break;
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		set_error(ctx, REDIS_ERR_IO, strerror(EAGAIN));
		break;
	case SSL_ERROR_SYSCALL:
		if (saved == EAGAIN || saved == EWOULDBLOCK)
			set_error(ctx, REDIS_ERR_IO, strerror(EAGAIN));
		else if (saved == 0)
			set_error(ctx, REDIS_ERR_EOF,
			    "Server closed the connection");
		else
			set_error(ctx, REDIS_ERR_IO, strerror(saved));
		break;
	default:
		snprintf(why, sizeof(why), "TLS: %s", ssl_reason());
		set_error(ctx, REDIS_ERR_IO, why);
		break;
	}
	ERR_clear_error();
	if (SSL_get_app_data(ssl) != NULL && strcmp(ctx->errstr,
	    strerror(EAGAIN)) != 0) {
		snprintf(why, sizeof(why), "%.60s (the server asked for a client "
		    "certificate: tls_cert_file)", ctx->errstr);
		set_error(ctx, ctx->err, why);
	}
}

/*
 * Sends SNI; waits at most ctx's timeout (timeout_ms is for the message).
 */
int
redis_io_start(redisContext *ctx, const char *host, long long timeout_ms,
    char *err, size_t errlen)
{
	unsigned char ip[16];
	char name[256];
	const char *why;
	SSL *ssl;
	long v;
	int n;

	pthread_mutex_lock(&tls_lock);
	ssl = tls_ctx != NULL ? SSL_new(tls_ctx) : NULL;
	snprintf(name, sizeof(name), "%s", tls_name[0] ? tls_name : host);
	n = tls_ctx != NULL;
	pthread_mutex_unlock(&tls_lock);
	if (!n)
		return 0;
	if (ssl == NULL || SSL_set_fd(ssl, ctx->fd) != 1) {
		snprintf(err, errlen, "TLS: %s", ssl_reason());
		SSL_free(ssl);
		return -1;
	}
	/* An address is checked against the certificate's IP names; a name
	 * is sent (SNI) and checked against its DNS names. */
	if (inet_pton(AF_INET, name, ip) == 1 ||
	    inet_pton(AF_INET6, name, ip) == 1)
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
	else {
		SSL_set_tlsext_host_name(ssl, name);
		SSL_set1_host(ssl, name);
	}
	ERR_clear_error();
	if ((n = SSL_connect(ssl)) == 1) {
		ctx->reader->privdata = ssl;
		return 0;
	}
	if ((v = SSL_get_verify_result(ssl)) != X509_V_OK)
		snprintf(err, errlen, "TLS handshake: certificate verify "
		    "failed (%s%s%s)", X509_verify_cert_error_string(v),
		    v == X509_V_ERR_HOSTNAME_MISMATCH ||
		    v == X509_V_ERR_IP_ADDRESS_MISMATCH ? ": not " : "",
		    v == X509_V_ERR_HOSTNAME_MISMATCH ||
		    v == X509_V_ERR_IP_ADDRESS_MISMATCH ? name : "");
	else {
		io_error(ctx, ssl, n);
		why = ctx->errstr;
		if (ctx->err == REDIS_ERR_IO && strcmp(why,
		    strerror(EAGAIN)) == 0)
			snprintf(err, errlen, "TLS handshake: timed out after "
			    "%lld ms (is it a TLS port?)", timeout_ms);
		else if (ctx->err == REDIS_ERR_EOF)
			snprintf(err, errlen, "TLS handshake: connection "
			    "closed by the server (is it a TLS port?)");
		else
			snprintf(err, errlen, "TLS handshake: %s%s",
			    strncmp(why, "TLS: ", 5) == 0 ? why + 5 : why,
			    strstr(why, "wrong version") != NULL ?
			    " (is it a TLS port?)" : "");
		ctx->err = 0;
		ctx->errstr[0] = '\0';
	}
	ERR_clear_error();
	SSL_free(ssl);
	return -1;
}

int
redis_io_write(redisContext *ctx, int *done)
{
	SSL *ssl = tls_of(ctx);
	size_t len;
	int n;

	if (ssl == NULL)
		return redisBufferWrite(ctx, done);
	if (ctx->err)
		return REDIS_ERR;
	if ((len = sdslen(ctx->obuf)) > 0) {
		ERR_clear_error();
		if ((n = SSL_write(ssl, ctx->obuf, (int)(len > INT32_MAX ?
		    INT32_MAX : len))) <= 0) {
			io_error(ctx, ssl, n);
			return REDIS_ERR;
		}
		sdsrange(ctx->obuf, n, -1);
	}
	if (done != NULL)
		*done = sdslen(ctx->obuf) == 0;
	return REDIS_OK;
}

int
redis_io_read(redisContext *ctx)
{
	SSL *ssl = tls_of(ctx);
	char buf[16 * 1024];
	int n;

	if (ssl == NULL)
		return plain_read(ctx, redisBufferRead(ctx));
	if (ctx->err)
		return REDIS_ERR;
	do {
		ERR_clear_error();
		if ((n = SSL_read(ssl, buf, sizeof(buf))) <= 0) {
			io_error(ctx, ssl, n);
			return REDIS_ERR;
		}
		if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK) {
			set_error(ctx, ctx->reader->err, ctx->reader->errstr);
			return REDIS_ERR;
		}
	} while (SSL_pending(ssl) > 0);
	return REDIS_OK;
}

int
redis_io_get_reply(redisContext *ctx, void **reply)
{
	void *aux = NULL;
	int done = 0;

	if (tls_of(ctx) == NULL)
		return plain_read(ctx, redisGetReply(ctx, reply));
	if (redisGetReplyFromReader(ctx, &aux) == REDIS_ERR)
		return REDIS_ERR;
	if (aux == NULL) {
		do
			if (redis_io_write(ctx, &done) == REDIS_ERR)
				return REDIS_ERR;
		while (!done);
		do
			if (redis_io_read(ctx) == REDIS_ERR ||
			    redisGetReplyFromReader(ctx, &aux) == REDIS_ERR)
				return REDIS_ERR;
		while (aux == NULL);
	}
	if (reply != NULL)
		*reply = aux;
	else
		freeReplyObject(aux);
	return REDIS_OK;
}

/* The reply of a command just appended, or NULL (ctx->errstr says why). */
static redisReply *
command_reply(redisContext *ctx, int appended)
{
	void *rep = NULL;

	if (appended != REDIS_OK || redis_io_get_reply(ctx, &rep) != REDIS_OK)
		return NULL;
	return rep;
}

redisReply *
redis_io_command_argv(redisContext *ctx, int argc, const char **argv)
{
	return command_reply(ctx, redisAppendCommandArgv(ctx, argc, argv,
	    NULL));
}

redisReply *
redis_io_command(redisContext *ctx, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = redisvAppendCommand(ctx, fmt, ap);
	va_end(ap);
	return command_reply(ctx, rc);
}

int
redis_io_stale(redisContext *ctx)
{
	struct pollfd p = { ctx->fd, POLLIN, 0 };
	SSL *ssl = tls_of(ctx);
	int fl, n, e;
	char b;

	if (poll(&p, 1, 0) == 0)
		return 0;
	if (ssl == NULL)
		return 1;
	/* Readable may be a record for OpenSSL alone: peek without waiting. */
	if ((fl = fcntl(ctx->fd, F_GETFL)) == -1 ||
	    fcntl(ctx->fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return 1;
	ERR_clear_error();
	n = SSL_peek(ssl, &b, 1);
	e = SSL_get_error(ssl, n);
	ERR_clear_error();
	if (fcntl(ctx->fd, F_SETFL, fl) == -1)
		return 1;
	return !(n <= 0 && e == SSL_ERROR_WANT_READ);
}

void
redis_io_free(redisContext *ctx)
{
	if (ctx == NULL)
		return;
	SSL_free(tls_of(ctx));
	redisFree(ctx);
}
