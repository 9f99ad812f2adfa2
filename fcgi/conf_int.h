/*
 * conf_int: what the pieces of the configuration loader share, and only
 * they: the loader's state while a file is read (conf.c), the key table
 * its setters fill (conf_keys.c), the checks between keys run at the
 * end of a section and of the file (conf_finish.c), and the messages all
 * three collect (conf_errors.c, below them). Not a contract for anything
 * outside conf*.c: conf.h is.
 */
#ifndef RLG_CONF_INT_H
#define RLG_CONF_INT_H

#include <sys/types.h>
#include <stdio.h>

#include "conf.h"

enum section {
	S_NONE,		/* before the first [section] */
	S_GATEWAY,
	S_REDIS,
	S_AUDIT,
	S_CGI,
	S_RULE,
	S_SKIP		/* a bad section header, already reported */
};

/* Every key of the file; the order of conf_keys[]. */
enum key_id {
	K_LISTEN, K_SOCKET_MODE, K_SOCKET_GROUP, K_ENGINE, K_WORKERS, K_DENY_STATUS, K_HEADERS, K_TRUSTED, K_LOG_LEVEL,
	K_GATEWAY_DRY_RUN, K_STATUS_PATH, K_STATUS_ALLOW,
	K_REDIS_MODE, K_ADDRESS, K_USERNAME, K_PASSWORD, K_DATABASE, K_CONNECT_TIMEOUT,
	K_TIMEOUT, K_KEY_PREFIX, K_ON_ERROR, K_MASTER_NAME, K_SENTINEL_PASSWORD,
	K_REPLICAS, K_TLS, K_TLS_CA_FILE, K_TLS_SERVER_NAME, K_TLS_CERT_FILE,
	K_TLS_KEY_FILE,
	K_LOCAL_SHARE,
	K_AUDIT_DATABASE, K_FLUSH_INTERVAL, K_BATCH, K_QUEUE, K_UNMATCHED,
	K_ON_FULL, K_KEEP, K_KEEP_ROWS,
	K_UPSTREAM,
	K_PATH, K_METHOD, K_HOST, K_KEY, K_ALGORITHM, K_LIMIT, K_WINDOW,
	K_BURST, K_PRECISION, K_COST, K_ON_MISSING, K_RULE_ON_ERROR, K_DRY_RUN,
	K_DENY_CACHE, K_OVERRIDES,
	NKEYS
};

/* What the loader knows about one key of the current section. */
enum key_state {
	KS_ABSENT,
	KS_EMPTY,	/* "key =": not set, the default stays */
	KS_OK,
	KS_BAD		/* reported; its value must not feed other checks */
};

struct lerror {
	int		 line;
	size_t		 seq;	/* keeps the order of errors on one line */
	char		*text;
};

/* One file being read: what conf.c, the setters and the checks share. */
struct loader {
	struct conf	*c;
	const char	*file;		/* as the user named it, for messages */
	FILE		*fp;
	mode_t		 mode;
	char		*buf;		/* getline() */
	size_t		 bufsz;
	int		 lineno;	/* physical line being handled */
	enum section	 section;
	char		 secname[RLG_MAX_LINE + 1];
	size_t		 rule;		/* index of the current rule in c */
	size_t		 rulecap;
	int		 seen[NKEYS];	/* line a key was set on, 0 = not */
	enum key_state	 state[NKEYS];
	struct lerror	*errs;
	size_t		 nerrs;
	size_t		 errcap;
	int		 too_many;
	int		 oom;
	char		*warnings;	/* becomes c->warnings */
	size_t		 warnlen;
};

struct key;
typedef int (*set_fn)(struct loader *, const struct key *, void *,
    const char *);

struct key {
	enum section		 section;
	const char		*name;
	set_fn			 set;
	size_t			 off;	/* into struct conf or struct rule */
	long long		 min, max;
	const struct enum_name	*names;
	const char		*what;	/* "is not <what>" for enums */
	int			 empty_clears;	/* "key =" sets NULL, not default */
};

/* The whole file format, one entry per key (conf_keys.c). */
extern const struct key conf_keys[NKEYS];

#define FIELD(base, k, type)	((type *)(void *)((char *)(base) + (k)->off))

/* ---- conf_errors.c ---- */

/*
 * Records "FILE:LINE: [sec] key: message". line 0 leaves out the line,
 * sec and key may be NULL. Never fails loudly: out of memory is noted and
 * becomes the one message conf_load() returns.
 */
void	conf_error(struct loader *l, int line, const char *sec,
	    const char *key, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));
/*
 * Records the warning "FILE:LINE: [sec] key: message" for c->warnings:
 * the file loads, but the user likely meant something else.
 */
void	conf_warn(struct loader *l, int line, const char *sec,
	    const char *key, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));
/* An error about the value of key k on the current line. */
#define kerr(l, k, ...) \
	conf_error((l), (l)->lineno, (l)->secname, (k)->name, __VA_ARGS__)

/*
 * All errors in file order, one per line (or the one out-of-memory
 * message), in a string the caller frees; NULL if even that failed.
 */
char	*conf_join_errors(struct loader *l);

/* strdup() that notes out of memory in l; the caller frees the copy. */
char	*conf_strdup(struct loader *l, const char *s);

/* ---- conf_keys.c ---- */

/* How many items a list separated by blanks or commas holds. */
size_t	 conf_count_tokens(const char *v);

/* Checks what needs the whole [rule:NAME] section (conf_finish.c). */
void	 conf_finish_rule(struct loader *l);
/* Checks between keys of [gateway], [redis], [audit], and that there is a
 * rule, at the end of the file (conf_finish.c). */
void	 conf_finish(struct loader *l);

#endif
