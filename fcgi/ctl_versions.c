/*
 * ctl_versions: rlgate-ctl versions, unload, prune and load: the rlgate Lua
 * libraries (one per version, rlgate_<12 hex>) on every master, listed or
 * deleted with FUNCTION LIST and FUNCTION DELETE (never this build's own),
 * or this build's loaded (redis_library(), the gateway's routine). Not the
 * limit state (ctl.c).
 */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "conf.h"
#include "ctl_redis.h"
#include "ctl_versions.h"
#include "redis.h"
#include "redis_io.h"
#include "scripts.h"

#define LIBS_MAX	64	/* libraries listed; more are not rlgate's */

/* What versions collects: each rlgate_<12 hex> library and on how many
 * masters it is. */
struct libs {
	const struct conf *c;
	char		 name[LIBS_MAX][20];
	int		 on[LIBS_MAX];
	int		 n, masters;
	const char	*drop;		/* unload: this one; prune: NULL */
	int		 dropped;
	int		 failed;	/* load: masters it failed on */
};

/* rlgate_ and 12 lower-case hex digits: a library's name as fcgi/embed.sh
 * makes it. Libraries of other names are not rlgate's to touch. */
static int
is_lib_name(const char *s)
{
	return strncmp(s, "rlgate_", 7) == 0 && strlen(s) == 19 &&
	    strspn(s + 7, "0123456789abcdef") == 12;
}

/* FUNCTION LIST LIBRARYNAME rlgate_*: the rlgate libraries on one master
 * into ls (a redis_master_fn). */
static int
list_master(void *arg, redisContext *rc, const char *address)
{
	struct libs *ls = arg;
	const char *argv[4] = { "FUNCTION", "LIST", "LIBRARYNAME", "rlgate_*" };
	redisReply *r, *lib;
	size_t i, j;
	int k;

	char why[256];

	if ((r = redis_io_command_argv(rc, 4, argv)) == NULL ||
	    r->type != REDIS_REPLY_ARRAY) {
		if (r == NULL)
			redis_why(rc, ls->c->redis_timeout_ms, why, sizeof(why));
		ctl_complain("redis %s: FUNCTION LIST: %s", address, r == NULL ?
		    why : r->type == REDIS_REPLY_ERROR ? r->str :
		    "unexpected reply");
		freeReplyObject(r);
		return -1;
	}
	ls->masters++;
	for (i = 0; i < r->elements; i++) {
		lib = r->element[i];
		for (j = 0; lib->type == REDIS_REPLY_ARRAY &&
		    j + 1 < lib->elements; j += 2) {
			const redisReply *v = lib->element[j + 1];

			if (lib->element[j]->type != REDIS_REPLY_STRING ||
			    strcmp(lib->element[j]->str, "library_name") != 0 ||
			    v->type != REDIS_REPLY_STRING ||
			    !is_lib_name(v->str))
				continue;
			for (k = 0; k < ls->n &&
			    strcmp(ls->name[k], v->str) != 0; k++)
				;
			if (k == ls->n && ls->n < LIBS_MAX)
				snprintf(ls->name[ls->n++], sizeof(ls->name[0]),
				    "%s", v->str);
			if (k < ls->n)
				ls->on[k]++;
		}
	}
	freeReplyObject(r);
	return 0;
}

/* FUNCTION DELETE of ls->drop, or of every rlgate library but this
 * build's (prune), on one master (a redis_master_fn). A library this
 * master does not hold is no error: it was loaded where it was used. */
static int
delete_master(void *arg, redisContext *rc, const char *address)
{
	struct libs *ls = arg;
	const char *argv[3] = { "FUNCTION", "DELETE", NULL };
	struct libs here;
	redisReply *r;
	char why[256];
	int k;

	memset(&here, 0, sizeof(here));
	here.c = ls->c;
	if (list_master(&here, rc, address) == -1)
		return -1;
	for (k = 0; k < here.n; k++) {
		if (strcmp(here.name[k], rlg_library_name) == 0 ||
		    (ls->drop != NULL && strcmp(here.name[k], ls->drop) != 0))
			continue;
		argv[2] = here.name[k];
		if ((r = redis_io_command_argv(rc, 3, argv)) == NULL ||
		    r->type == REDIS_REPLY_ERROR) {
			if (r == NULL)
				redis_why(rc, ls->c->redis_timeout_ms, why,
				    sizeof(why));
			ctl_complain("redis %s: FUNCTION DELETE %s: %s", address,
			    here.name[k], r == NULL ? why : r->str);
			freeReplyObject(r);
			return -1;
		}
		freeReplyObject(r);
		printf("%s: unloaded %s\n", address, here.name[k]);
		ls->dropped++;
	}
	return 0;
}

/* This build's library on one master (a redis_master_fn): redis_library()
 * with its code compared, as an operator's user may (FUNCTION LIST). A
 * failure is said, and the other masters are still visited. */
static int
load_master(void *arg, redisContext *rc, const char *address)
{
	struct libs *ls = arg;
	char why[512];
	int loaded;

	if ((loaded = redis_library(rc, ls->c->redis_timeout_ms, 1, why,
	    sizeof(why))) == -1) {
		ctl_complain("redis %s: %s", address, why);
		ls->failed++;
		return 0;
	}
	printf(loaded ? "%s: loaded %s\n" : "%s: %s is there already\n",
	    address, rlg_library_name);
	return 0;
}

/* What each command runs on every master. */
static redis_master_fn
master_fn(const char *cmd)
{
	if (strcmp(cmd, "versions") == 0)
		return list_master;
	if (strcmp(cmd, "load") == 0)
		return load_master;
	return delete_master;
}

/*
 * cmd "versions": prints each rlgate library (rlgate_ and 12 hex digits)
 * on the masters c names, one line each: name, a tab, "N/M masters", and
 * a tab and "this build" for the library this binary carries; when there
 * is none, one line that says so.
 * cmd "unload" with lib: FUNCTION DELETE of lib on every master holding
 * it; "prune" (lib NULL): of every rlgate library but this build's. Each
 * deletion is printed "address: unloaded name".
 * cmd "load": this build's library on every master (redis_library(), its
 * code compared): "address: loaded name", or "address: name is there
 * already"; a library of its name that is not this build's is left as it
 * is, and said.
 */
int
ctl_versions(const struct conf *c, const char *cmd, const char *lib,
    char *err, size_t errlen)
{
	struct libs ls;
	struct redis *r;
	char why[512];
	int k, rc;

	memset(&ls, 0, sizeof(ls));
	ls.c = c;
	err[0] = '\0';
	if (lib != NULL && !is_lib_name(lib)) {
		snprintf(err, errlen, "\"%s\" is not an rlgate library's name "
		    "(rlgate_ and 12 hex digits, as versions lists them)", lib);
		return -1;
	}
	if (lib != NULL && strcmp(lib, rlg_library_name) == 0) {
		snprintf(err, errlen, "%s is this build's library: rlgate-ctl "
		    "does not unload it (gateways of this build use it)", lib);
		return -1;
	}
	ls.drop = lib;
	if ((r = redis_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	why[0] = '\0';
	rc = redis_each_master(r, c, master_fn(cmd), &ls, why, sizeof(why));
	redis_free(r);
	if (rc == -1 || ls.failed > 0) {
		if (why[0] != '\0')
			snprintf(err, errlen, "redis %s: %s", c->redis_address,
			    why);
		return -2;
	}
	if (strcmp(cmd, "versions") == 0 && ls.n == 0)
		printf("no rlgate library on the %d master%s (this build's, "
		    "%s: rlgate-ctl load)\n", ls.masters, ls.masters == 1 ?
		    "" : "s", rlg_library_name);
	else if (strcmp(cmd, "versions") == 0)
		for (k = 0; k < ls.n; k++)
			printf("%s\t%d/%d masters%s\n", ls.name[k], ls.on[k],
			    ls.masters, strcmp(ls.name[k], rlg_library_name) ==
			    0 ? "\tthis build" : "");
	else if (lib != NULL && ls.dropped == 0) {
		snprintf(err, errlen, "%s is not loaded on any master", lib);
		return -1;
	}
	return 0;
}
