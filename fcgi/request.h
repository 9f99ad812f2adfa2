/*
 * request: a read-only view of one request's FastCGI (or CGI) params:
 * method, path, query, host, headers and the client address after
 * trusted-proxy handling. It copies nothing but what it must normalise,
 * and it never writes a reply: deciding what a bad field means is the
 * caller's business.
 */
#ifndef RLG_REQUEST_H
#define RLG_REQUEST_H

#include <arpa/inet.h>
#include <stddef.h>

#include "conf.h"

#define RLG_MAX_PATH	2048	/* decoded path; longer is a 414 */
#define RLG_MAX_HOST	256
#define RLG_REQUEST_ID	40	/* 16 random hex digits, a dash, a counter */

enum rlg_role {
	RLG_ROLE_RESPONDER,	/* nginx auth_request, check API, CGI */
	RLG_ROLE_AUTHORIZER	/* lighttpd authorizer, mod_authnz_fcgi */
};

struct request {
	char		**envp;		/* "NAME=value" strings, not owned */
	enum rlg_role	 role;
	int		 apache;	/* FCGI_APACHE_ROLE is set */
	const char	*method;	/* REQUEST_METHOD, "GET" when absent */
	const char	*query;		/* raw, from REQUEST_URI; "" if none */
	size_t		 query_len;
	char		 path[RLG_MAX_PATH];	/* percent-decoded once */
	char		 host[RLG_MAX_HOST];	/* lower case, without port */
	char		 ip[INET6_ADDRSTRLEN];	/* "" when unknown */
	char		 id[RLG_REQUEST_ID];
};

/*
 * Fills r from envp, which must outlive r: path, query, host, method and
 * the client address (c's trusted proxies decide X-Forwarded-For). 0, or
 * an HTTP status (400, 414) with *errstr naming the field. Thread safe.
 */
int		 request_init(struct request *r, char **envp,
		    const struct conf *c, const char **errstr);

/* The param called name (REMOTE_USER, HTTP_X_COST, ...) or NULL. */
const char	*request_env(const struct request *r, const char *name);

/*
 * The request header called name as a client writes it ("X-Api-Key"), or
 * NULL. Content-Type and Content-Length are found too.
 */
const char	*request_header(const struct request *r, const char *name);

/*
 * Copies the percent-decoded value of the first query parameter called
 * name into out (NUL-terminated). Returns the value's length, -1 when the
 * parameter is absent, -2 when the value does not fit in outlen.
 */
long		 request_query(const struct request *r, const char *name,
		    char *out, size_t outlen);

/*
 * Percent-decodes src[0..len) into out (at most outlen-1 bytes plus NUL);
 * '+' becomes a space when plus is set. Malformed escapes stay as they
 * are. Returns the decoded length, or -1 when it does not fit.
 */
long		 request_decode(const char *src, size_t len, int plus,
		    char *out, size_t outlen);

/*
 * Normalises an address written as text (IPv4, IPv6, IPv4-mapped IPv6)
 * into out. Returns its family (AF_INET, AF_INET6) with the bytes in
 * addr, or -1 when text is not an address.
 */
int		 request_parse_ip(const char *text, size_t len,
		    unsigned char addr[16], char out[INET6_ADDRSTRLEN]);

#endif
