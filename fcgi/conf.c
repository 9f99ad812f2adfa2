/*
 * conf: reads the INI file into an immutable struct conf (see conf.h):
 * lines counted, over-long ones refused, [sections] followed here, each
 * value handed to its key's setter (conf_keys.c), the checks between keys
 * run at the end (conf_finish.c), every error collected (conf_errors.c)
 * as "FILE:LINE: [section] key: ..." and returned in file order. Form
 * only: nothing is opened or connected here (the audit module creates its
 * database, the limiter dials Redis).
 */
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "ascii.h"
#include "conf_int.h"

/*
 * Debian's libinih reads a line in one fgets() of INI_MAX_LINE bytes and
 * silently hands the rest to the next call as if it were a new line. The
 * reader below refuses longer lines before inih can split them.
 */
_Static_assert(RLG_MAX_LINE < INI_MAX_LINE,
    "libinih must be able to read a whole accepted line at once");

#define SECTIONS_USE	"[gateway], [redis], [audit], [cgi] or [rule:NAME]"

static const char *const section_names[] = {
	[S_GATEWAY] = "gateway",
	[S_REDIS] = "redis",
	[S_AUDIT] = "audit",
	[S_CGI] = "cgi",
};

/* ---- small helpers, and the sections --------------------------------- */

static char *
lskip(char *s)
{
	while (ascii_is_blank(*s))
		s++;
	return s;
}

static char *
trim(char *s)
{
	char *e;

	s = lskip(s);
	e = s + strlen(s);
	while (e > s && ascii_is_blank(e[-1]))
		*--e = '\0';
	return s;
}

/* Checks that need a whole section of the file, once it is over. */
static void
finish_section(struct loader *l)
{
	if (l->section == S_RULE)
		conf_finish_rule(l);
}

static int
valid_rule_name(const char *s)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (!ascii_is_alnum(s[n]) && s[n] != '_' && s[n] != '.' &&
		    s[n] != '-')
			return 0;
	return n >= 1 && n <= RLG_MAX_RULE_NAME;
}

/* [rule:NAME]: a new rule with its defaults. */
static void
open_rule(struct loader *l, const char *name)
{
	struct conf *c = l->c;
	struct rule *r;
	size_t i;
	int k;

	if (!valid_rule_name(name))
		conf_error(l, l->lineno, l->secname, NULL, "\"%s\" is not a rule "
		    "name (use 1 to %d letters, digits, _, . or -)", name,
		    RLG_MAX_RULE_NAME);
	for (i = 0; i < c->nrules; i++)
		if (strcmp(c->rules[i].name, name) == 0)
			conf_error(l, l->lineno, l->secname, NULL, "this rule name is "
			    "already used on line %d; give each rule its own "
			    "name", c->rules[i].line);
	if (c->nrules == RLG_MAX_RULES) {
		conf_error(l, l->lineno, l->secname, NULL, "too many rules (at most "
		    "%d)", RLG_MAX_RULES);
		return;
	}
	if (c->nrules == l->rulecap) {
		size_t cap = l->rulecap ? l->rulecap * 2 : 8;

		if ((r = reallocarray(c->rules, cap, sizeof(*r))) == NULL) {
			l->oom = 1;
			return;
		}
		c->rules = r;
		l->rulecap = cap;
	}
	/* Counted before anything is allocated: conf_free() then frees
	 * whatever a failure below leaves. */
	r = &c->rules[c->nrules++];
	memset(r, 0, sizeof(*r));
	r->line = l->lineno;
	r->path_kind = RLG_PATH_ANY;
	r->algorithm = RLG_FIXED_WINDOW;
	r->cost = 1;
	r->on_error = RLG_ON_ERROR_INHERIT;
	r->metrics_slot = -1;
	if ((r->name = conf_strdup(l, name)) == NULL)
		return;
	if (tmpl_init_ip(&r->key) == -1)
		l->oom = 1;
	l->rule = c->nrules - 1;
	l->section = S_RULE;
	for (k = 0; k < NKEYS; k++) {
		if (conf_keys[k].section != S_RULE)
			continue;
		l->seen[k] = 0;
		l->state[k] = KS_ABSENT;
	}
}

/* A "[...]" line; s points at the '['. */
static void
section_line(struct loader *l, char *s)
{
	char *end, *rest, *name;
	int i;

	finish_section(l);
	l->section = S_SKIP;
	if ((end = strchr(s, ']')) == NULL) {
		conf_error(l, l->lineno, NULL, NULL, "\"%s\" has no closing ] (use "
		    SECTIONS_USE ")", s);
		return;
	}
	rest = lskip(end + 1);
	*end = '\0';
	name = trim(s + 1);
	snprintf(l->secname, sizeof(l->secname), "%s", name);
	if (*rest != '\0' && *rest != ';' && *rest != '#') {
		conf_error(l, l->lineno, l->secname, NULL, "unexpected \"%s\" after "
		    "the ] (only a ; comment may follow)", rest);
		return;
	}
	for (i = S_GATEWAY; i <= S_CGI; i++) {
		if (strcmp(name, section_names[i]) == 0) {
			l->section = (enum section)i;
			return;
		}
	}
	if (strncmp(name, "rule:", 5) == 0)
		open_rule(l, name + 5);
	else if (strcmp(name, "rule") == 0)
		conf_error(l, l->lineno, l->secname, NULL, "a rule needs a name: "
		    "[rule:NAME]");
	else
		conf_error(l, l->lineno, l->secname, NULL, "unknown section (use "
		    SECTIONS_USE ")");
}

/* ---- inih glue ---------------------------------------------------- */

/*
 * inih reads through this, one physical line per call, so l->lineno is
 * the line its handler is called for. inih sees only "key = value" lines,
 * left-trimmed: sections are followed here because inih cuts section names
 * at 49 characters and says nothing when one starts, and without leading
 * blanks inih's multi-line values (an indented line continues the previous
 * key) cannot happen. Everything else reaches inih as an empty line.
 */
static char *
reader(char *str, int num, void *stream)
{
	struct loader *l = stream;
	size_t max = (size_t)num - 1, n, i;
	ssize_t got;
	char *line, *s;

	if (max > RLG_MAX_LINE)
		max = RLG_MAX_LINE;
	if (l->too_many || l->oom)
		return NULL;
	if ((got = getline(&l->buf, &l->bufsz, l->fp)) == -1) {
		char ebuf[128];

		if (ferror(l->fp))
			conf_error(l, l->lineno + 1, NULL, NULL, "cannot read: %s",
			    strerror_r(errno, ebuf, sizeof(ebuf)));
		return NULL;
	}
	l->lineno++;
	line = l->buf;
	n = (size_t)got;
	if (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	if (n > 0 && line[n - 1] == '\r')
		line[--n] = '\0';
	if (l->lineno == 1 && n >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
		line += 3;
		n -= 3;
	}
	str[0] = '\0';
	if (n > max) {
		/* Keys after a lost section header would land in the
		 * section before it. */
		if (*lskip(line) == '[') {
			finish_section(l);
			l->section = S_SKIP;
		}
		conf_error(l, l->lineno, NULL, NULL, "line is longer than %zu "
		    "characters (shorten it)", max);
		return str;
	}
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)line[i];

		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			conf_error(l, l->lineno, NULL, NULL, "control character "
			    "0x%02x at column %zu (only text and tabs may "
			    "appear)", ch, i + 1);
			return str;
		}
	}
	s = lskip(line);
	if (*s == '\0' || *s == ';' || *s == '#')
		return str;
	if (*s == '[') {
		section_line(l, s);
		return str;
	}
	/* As inih finds it: the first = or :, unless a " ;" comes first. */
	for (i = 0; s[i] != '\0' && s[i] != '=' && s[i] != ':'; i++)
		if (s[i] == ';' && i > 0 && ascii_is_blank(s[i - 1]))
			break;
	if (s[i] != '=' && s[i] != ':') {
		conf_error(l, l->lineno, NULL, NULL, "\"%s\" is not \"key = value\"%s",
		    s, s > line ? " (values cannot continue on an indented "
		    "line)" : "");
		return str;
	}
	memcpy(str, s, strlen(s) + 1);
	return str;
}

static int
key_lookup(enum section sec, const char *name)
{
	int k;

	for (k = 0; k < NKEYS; k++)
		if (conf_keys[k].section == sec && strcmp(conf_keys[k].name, name) == 0)
			return k;
	return -1;
}

static void
unknown_key(struct loader *l, const char *name)
{
	char use[512];
	size_t len = 0;
	int k;

	use[0] = '\0';
	for (k = 0; k < NKEYS; k++)
		/* engine is gone: known, to say so, but not suggested. */
		if (conf_keys[k].section == l->section && k != K_ENGINE)
			len += (size_t)snprintf(use + len, sizeof(use) - len,
			    "%s%s", len ? ", " : "", conf_keys[k].name);
	conf_error(l, l->lineno, l->secname, name, "unknown key (the keys of "
	    "[%s] are %s)", l->section == S_RULE ? "rule:NAME" : l->secname,
	    use);
}

/* inih's section argument is ignored: see reader(). */
static int
handler(void *user, const char *section, const char *name, const char *value)
{
	struct loader *l = user;
	const struct key *key;
	void *base;
	int k;

	(void)section;
	if (l->section == S_SKIP)
		return 1;
	if (*name == '\0') {
		conf_error(l, l->lineno, NULL, NULL, "a value with no key before the "
		    "= (use key = value)");
		return 1;
	}
	if (l->section == S_NONE) {
		conf_error(l, l->lineno, NULL, name, "is set before any section (put "
		    "it under " SECTIONS_USE ")");
		return 1;
	}
	if ((k = key_lookup(l->section, name)) == -1) {
		unknown_key(l, name);
		return 1;
	}
	key = &conf_keys[k];
	if (l->seen[k] != 0) {
		conf_error(l, l->lineno, l->secname, name, "is set twice (first on "
		    "line %d); keep one", l->seen[k]);
		/* Given, then, but which value the user meant is unknown:
		 * neither "missing" nor checks against other keys apply. */
		l->state[k] = KS_BAD;
		return 1;
	}
	l->seen[k] = l->lineno;
	base = l->section == S_RULE ? (void *)&l->c->rules[l->rule] :
	    (void *)l->c;
	if (*value == '\0') {
		/* An empty value leaves the default, except where empty is
		 * itself the setting ([audit] database = : no audit). */
		if (key->empty_clears) {
			free(*FIELD(base, key, char *));
			*FIELD(base, key, char *) = NULL;
		}
		l->state[k] = KS_EMPTY;
		return 1;
	}
	l->state[k] = key->set(l, key, base, value) == 0 ? KS_OK : KS_BAD;
	return 1;
}

/* ---- the interface ------------------------------------------------ */

static atomic_ulong	conf_ids;

static struct conf *
conf_new(struct loader *l, const char *path)
{
	struct conf *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		l->oom = 1;
		return NULL;
	}
	/* Lets holders tell configurations apart without comparing them. */
	c->id = atomic_fetch_add(&conf_ids, 1) + 1;
	c->socket_mode = RLG_SOCKET_MODE;
	c->socket_gid = -1;
	c->workers = 0;		/* one loop per CPU (main.c) */
	c->deny_status = 429;
	c->headers = RLG_HEADERS_IETF;
	c->log_level = RLG_LOG_INFO;
	c->redis_database = 0;
	c->redis_connect_timeout_ms = 200;
	c->redis_timeout_ms = 100;
	c->on_error = RLG_ON_ERROR_ALLOW;
	c->local_share_num = c->local_share_den = 1;
	c->audit_flush_interval_ms = RLG_AUDIT_FLUSH_MS;
	c->audit_batch = RLG_AUDIT_BATCH;
	c->audit_queue = RLG_AUDIT_QUEUE;
	c->audit_unmatched = 1;
	c->audit_on_full = RLG_ON_ERROR_ALLOW;
	c->path = conf_strdup(l, path);
	c->redis_address = conf_strdup(l, "127.0.0.1:6379");
	c->key_prefix = conf_strdup(l, "rl:");
	c->audit_database = conf_strdup(l, "/var/lib/rlgate/audit.db");
	/* status_allow: loopback only, until the file says otherwise. */
	if ((c->status_allow = calloc(2, sizeof(*c->status_allow))) == NULL) {
		l->oom = 1;
		return c;
	}
	c->status_allow[0].family = AF_INET;
	c->status_allow[0].bits = 32;
	inet_pton(AF_INET, "127.0.0.1", c->status_allow[0].addr);
	c->status_allow[1].family = AF_INET6;
	c->status_allow[1].bits = 128;
	inet_pton(AF_INET6, "::1", c->status_allow[1].addr);
	c->nstatus_allow = 2;
	return c;
}

static void
loader_free(struct loader *l)
{
	size_t i;

	for (i = 0; i < l->nerrs; i++)
		free(l->errs[i].text);
	free(l->errs);
	free(l->warnings);
	free(l->buf);
	if (l->fp != NULL)
		fclose(l->fp);
}

/*
 * The tls_* files' contents are redis_io_setup()'s to check. *errors is
 * NULL after a failure only when even it could not be allocated. Thread
 * safe: no global state, and inih's run-time settings stay at their
 * defaults.
 */
struct conf *
conf_load(const char *path, char **errors)
{
	struct loader l;
	struct stat st;
	char ebuf[128];
	int rc;

	memset(&l, 0, sizeof(l));
	l.file = path;
	*errors = NULL;
	if ((l.c = conf_new(&l, path)) == NULL || l.oom)
		goto fail;
	if ((l.fp = fopen(path, "re")) == NULL) {
		conf_error(&l, 0, NULL, NULL, "cannot open: %s",
		    strerror_r(errno, ebuf, sizeof(ebuf)));
		goto fail;
	}
	if (fstat(fileno(l.fp), &st) == -1) {
		conf_error(&l, 0, NULL, NULL, "cannot read: %s",
		    strerror_r(errno, ebuf, sizeof(ebuf)));
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		conf_error(&l, 0, NULL, NULL, "cannot read: it is a directory");
		goto fail;
	}
	l.mode = st.st_mode;
	/* The handler never fails (it collects errors in l), and the reader
	 * hands inih only lines it can parse: inih should not fail either. */
	rc = ini_parse_stream(reader, &l, handler, &l);
	if (rc > 0)
		conf_error(&l, rc, NULL, NULL, "libinih cannot parse this line");
	else if (rc < 0)
		l.oom = 1;
	if (!l.too_many && !l.oom) {
		finish_section(&l);
		conf_finish(&l);
	}
	if (l.nerrs > 0 || l.too_many || l.oom)
		goto fail;
	l.c->warnings = l.warnings;
	l.warnings = NULL;
	loader_free(&l);
	return l.c;
fail:
	*errors = conf_join_errors(&l);
	loader_free(&l);
	conf_free(l.c);
	return NULL;
}

static void
rule_free(struct rule *r)
{
	char **m;

	free(r->name);
	if (r->path_kind == RLG_PATH_REGEX)
		regfree(&r->path_re);
	free(r->path);
	for (m = r->methods; m != NULL && *m != NULL; m++)
		free(*m);
	free(r->methods);
	free(r->host);
	tmpl_free(&r->key);
	tmpl_free(&r->cost_tmpl);
}

void
conf_free(struct conf *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->nrules; i++)
		rule_free(&c->rules[i]);
	free(c->rules);
	free(c->path);
	free(c->warnings);
	free(c->listen);
	free(c->trusted);
	free(c->status_path);
	free(c->status_allow);
	free(c->redis_address);
	free(c->redis_master_name);
	if (c->redis_sentinel_password != NULL)
		explicit_bzero(c->redis_sentinel_password,
		    strlen(c->redis_sentinel_password));
	free(c->redis_sentinel_password);
	free(c->redis_username);
	free(c->redis_tls_ca_file);
	free(c->redis_tls_server_name);
	free(c->redis_tls_cert_file);
	free(c->redis_tls_key_file);
	if (c->redis_password != NULL)
		explicit_bzero(c->redis_password, strlen(c->redis_password));
	free(c->redis_password);
	free(c->key_prefix);
	free(c->audit_database);
	free(c->cgi_upstream);
	free(c);
}

int
conf_trusted(const struct conf *c, int family, const unsigned char *addr)
{
	if (c == NULL)
		return 0;
	return netaddr_in_cidrs(c->trusted, c->ntrusted, family, addr);
}
