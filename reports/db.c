/*
 * db: opens the audit databases read-only and refuses anything that is not
 * an rlgate audit database. The expected columns are read from
 * RLG_AUDIT_SCHEMA itself (applied to an in-memory database), so the
 * gateway's header stays the one definition of the schema; the first
 * layout's table has the same ones.
 */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit.h"
#include "db.h"

#define MAX_COLUMNS	64

struct columns {
	char	*name[MAX_COLUMNS];
	int	 n;
};

static int	layout_items(sqlite3 *, char *, size_t);

static void
columns_free(struct columns *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->name[i]);
	c->n = 0;
}

/* Columns of table decisions in db; c->n == 0 when there is no table. */
static int
read_columns(sqlite3 *db, struct columns *c)
{
	sqlite3_stmt *st;
	int rc;

	c->n = 0;
	if (sqlite3_prepare_v2(db, "PRAGMA table_info(decisions)", -1, &st,
	    NULL) != SQLITE_OK)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && c->n < MAX_COLUMNS) {
		const unsigned char *name = sqlite3_column_text(st, 1);

		if (name == NULL || (c->name[c->n] = strdup((const char *)name)) == NULL)
			break;
		c->n++;
	}
	rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? 0 : -1;
	sqlite3_finalize(st);
	return rc;
}

static int
expected_columns(struct columns *c, char *items, size_t len)
{
	sqlite3 *mem;
	int rc = -1;

	if (sqlite3_open(":memory:", &mem) != SQLITE_OK)
		goto out;
	if (sqlite3_exec(mem, RLG_AUDIT_SCHEMA, NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if (layout_items(mem, items, len) == -1)
		goto out;
	rc = read_columns(mem, c);
out:
	sqlite3_close(mem);
	return rc;
}

/* The file's layout: RLG_AUDIT_LAYOUT when its header says so, else 1. */
static int
read_layout(sqlite3 *db)
{
	sqlite3_stmt *st;
	int layout = 1;

	if (sqlite3_prepare_v2(db, "SELECT (SELECT application_id FROM "
	    "pragma_application_id), (SELECT user_version FROM "
	    "pragma_user_version)", -1, &st, NULL) != SQLITE_OK)
		return layout;
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_int64(st, 0) == RLG_AUDIT_APP_ID)
		layout = sqlite3_column_int(st, 1);
	sqlite3_finalize(st);
	return layout;
}

/*
 * The second layout's tables and columns in db, "t.c,t.c,...", sorted,
 * into buf. 0, or -1 when they cannot be read.
 */
static int
layout_items(sqlite3 *db, char *buf, size_t len)
{
	sqlite3_stmt *st;
	const char *s;
	int rc = -1;

	buf[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT group_concat(x, ',') FROM (SELECT "
	    "m.name || '.' || p.name AS x FROM sqlite_schema m, "
	    "pragma_table_info(m.name) p WHERE m.type = 'table' AND "
	    "m.name LIKE 'rlg!_%' ESCAPE '!' ORDER BY 1)", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		s = (const char *)sqlite3_column_text(st, 0);
		snprintf(buf, len, "%s", s != NULL ? s : "");
		rc = 0;
	}
	sqlite3_finalize(st);
	return rc;
}

/*
 * A file of the second layout must hold every table and column of
 * RLG_AUDIT_SCHEMA (want, from layout_items()): else it is damaged, and
 * err names the first part missing.
 */
static int
check_layout(struct rdb *d, const char *want, char *err, size_t errlen)
{
	char have[2048], item[128];
	const char *p, *end;
	size_t n;

	if (layout_items(d->db, have, sizeof(have)) == -1) {
		db_read_error(d, err, errlen);
		return -1;
	}
	for (p = want; *p != '\0'; p = *end != '\0' ? end + 1 : end) {
		end = strchr(p, ',');
		end = end != NULL ? end : p + strlen(p);
		n = (size_t)(end - p) < sizeof(item) - 2 ?
		    (size_t)(end - p) : sizeof(item) - 2;
		/* ",t.c," inside ",have,": the column is there. */
		snprintf(item, sizeof(item), ",%.*s,", (int)n, p);
		{
			char wrapped[sizeof(have) + 2];

			snprintf(wrapped, sizeof(wrapped), ",%s,", have);
			if (strstr(wrapped, item) != NULL)
				continue;
		}
		snprintf(err, errlen, "%s: a damaged rlgate audit database "
		    "(column %.*s of its layout is missing)", d->path, (int)n,
		    p);
		return -1;
	}
	return 0;
}

/* A file whose rows [audit] keep_rows deleted: summaries, no row. */
static int
rows_gone(sqlite3 *db)
{
	sqlite3_stmt *st;
	int gone = 0;

	if (sqlite3_prepare_v2(db, "SELECT NOT EXISTS (SELECT 1 FROM rlg_rows) "
	    "AND EXISTS (SELECT 1 FROM rlg_counts)", -1, &st, NULL) !=
	    SQLITE_OK)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		gone = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return gone;
}

static int
check_schema(struct rdb *d, const struct columns *want, const char *items,
    char *err, size_t errlen)
{
	struct columns have;
	int rc = -1;

	if (read_columns(d->db, &have) == -1) {
		columns_free(&have);
		if (sqlite3_errcode(d->db) == SQLITE_NOTADB)
			snprintf(err, errlen, "%s: not an SQLite database", d->path);
		else
			db_read_error(d, err, errlen);
		return -1;
	}
	if (have.n == 0) {
		snprintf(err, errlen, "%s: not an rlgate audit database (no decisions table)",
		    d->path);
		goto out;
	}
	d->layout = read_layout(d->db);
	if (d->layout >= 2 && check_layout(d, items, err, errlen) == -1)
		goto out;
	d->rows_gone = d->layout >= 2 && rows_gone(d->db);
	for (int i = 0; i < want->n; i++) {
		int found = 0;

		for (int j = 0; j < have.n && !found; j++)
			found = strcmp(want->name[i], have.name[j]) == 0;
		if (!found) {
			snprintf(err, errlen, "%s: not an rlgate audit database "
			    "(table decisions has no column %s)", d->path, want->name[i]);
			goto out;
		}
	}
	rc = 0;
out:
	columns_free(&have);
	return rc;
}

struct paths {
	char	**v;
	size_t	  n, cap;
};

static int
paths_add(struct paths *p, const char *path)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i], path) == 0)
			return 0;
	if (p->n == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 16;
		char **v = realloc(p->v, ncap * sizeof(*v));

		if (v == NULL)
			return -1;
		p->v = v;
		p->cap = ncap;
	}
	if ((p->v[p->n] = strdup(path)) == NULL)
		return -1;
	p->n++;
	return 0;
}

static int
is_db_name(const struct dirent *e)
{
	size_t len = strlen(e->d_name);

	return e->d_name[0] != '.' && len > 3 && strcmp(e->d_name + len - 3, ".db") == 0;
}

static int
cmp_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every .db file of directory dir, sorted by name. */
static int
add_dir(struct paths *p, const char *dir, char *err, size_t errlen)
{
	struct dirent **list;
	struct stat sb;
	size_t added = 0;
	int n, ret = 0;

	if ((n = scandir(dir, &list, is_db_name, cmp_name)) == -1) {
		snprintf(err, errlen, "%s: cannot read the directory: %s", dir,
		    strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];

		if (ret == 0 && (size_t)snprintf(path, sizeof(path), "%s/%s", dir,
		    list[i]->d_name) < sizeof(path) && stat(path, &sb) == 0 &&
		    S_ISREG(sb.st_mode)) {
			if (paths_add(p, path) == -1) {
				snprintf(err, errlen, "out of memory");
				ret = -1;
			}
			added++;
		}
		free(list[i]);
	}
	free(list);
	if (ret == 0 && added == 0) {
		snprintf(err, errlen, "%s: a directory without audit databases (no "
		    "*.db file in it)", dir);
		ret = -1;
	}
	return ret;
}

/*
 * A directory: its files ending in ".db", not starting with ".", sorted by
 * name, which is by date for the gateway's audit-%Y-%m-%d.db. A pattern
 * (holding * ? or [) only when it is not a file itself; its files sorted.
 */
int
db_expand(char **args, size_t nargs, char ***paths, size_t *n, char *err,
    size_t errlen)
{
	struct paths p = { NULL, 0, 0 };
	struct stat sb;

	for (size_t i = 0; i < nargs; i++) {
		glob_t g;
		int rc;

		if (stat(args[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (add_dir(&p, args[i], err, errlen) == -1)
				goto fail;
			continue;
		}
		/* A file (or a missing one, which db_open_all names) as it is. */
		if (strpbrk(args[i], "*?[") == NULL || lstat(args[i], &sb) == 0) {
			if (paths_add(&p, args[i]) == -1)
				goto oom;
			continue;
		}
		if ((rc = glob(args[i], 0, NULL, &g)) != 0) {
			if (rc == GLOB_NOSPACE)
				goto oom;
			snprintf(err, errlen, "%s: no file matches", args[i]);
			goto fail;
		}
		for (size_t k = 0; k < g.gl_pathc; k++)
			if (paths_add(&p, g.gl_pathv[k]) == -1) {
				globfree(&g);
				goto oom;
			}
		globfree(&g);
	}
	*paths = p.v;
	*n = p.n;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	db_paths_free(p.v, p.n);
	return -1;
}

void
db_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

int
db_connect(const char *path, sqlite3 **db, char *err, size_t errlen)
{
	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
	    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
		    *db ? sqlite3_errmsg(*db) : "out of memory");
		return -1;
	}
	/* A gateway may be writing (WAL): wait for its locks, never fail. */
	sqlite3_busy_timeout(*db, 10000);
	/* Reading ten million rows: map the file rather than copy each page. */
	sqlite3_exec(*db, "PRAGMA mmap_size = 1099511627776", NULL, NULL, NULL);
	return 0;
}

int
db_open_all(struct rdbs *dbs, char **paths, size_t n, char *err, size_t errlen)
{
	struct columns want = { .n = 0 };
	char items[2048];
	struct stat sb;
	size_t i;

	dbs->n = 0;
	if ((dbs->v = calloc(n, sizeof(*dbs->v))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (expected_columns(&want, items, sizeof(items)) == -1) {
		snprintf(err, errlen, "cannot apply the audit schema in memory");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		struct rdb *d = &dbs->v[i];

		/* SQLite's own message for these is "unable to open database file". */
		if (stat(paths[i], &sb) == -1) {
			snprintf(err, errlen, "%s: %s", paths[i], errno == ENOENT ?
			    "no such file" : strerror(errno));
			goto fail;
		}
		if (S_ISDIR(sb.st_mode)) {
			snprintf(err, errlen, "%s: is a directory, not an audit database",
			    paths[i]);
			goto fail;
		}
		if ((d->path = strdup(paths[i])) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		dbs->n++;
		if (db_connect(paths[i], &d->db, err, errlen) == -1)
			goto fail;
		if (check_schema(d, &want, items, err, errlen) == -1)
			goto fail;
	}
	columns_free(&want);
	return 0;
fail:
	columns_free(&want);
	db_close_all(dbs);
	return -1;
}

void
db_close_all(struct rdbs *dbs)
{
	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_close(dbs->v[i].db);
		free(dbs->v[i].path);
	}
	free(dbs->v);
	dbs->v = NULL;
	dbs->n = 0;
}

sqlite3_stmt *
db_prepare(struct rdb *d, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(d->db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot query: %s", d->path,
		    sqlite3_errmsg(d->db));
		return NULL;
	}
	return st;
}

int
db_read_error(const struct rdb *d, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: cannot read: %s", d->path,
	    sqlite3_errmsg(d->db));
	return -1;
}

int
db_has(struct rdbs *dbs, const char *rule, const char *key, char *err,
    size_t errlen)
{
	const char *sql = key ?
	    "SELECT 1 FROM decisions WHERE rule = ?1 AND key = ?2 LIMIT 1" :
	    "SELECT 1 FROM decisions WHERE rule = ?1 LIMIT 1";
	const char *sql_key = "SELECT 1 FROM decisions WHERE key = ?2 LIMIT 1";

	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_stmt *st;
		int rc;

		if ((st = db_prepare(&dbs->v[i], rule ? sql : sql_key, err, errlen)) == NULL)
			return -1;
		if (rule)
			sqlite3_bind_text(st, 1, rule, -1, SQLITE_STATIC);
		if (key)
			sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc == SQLITE_ROW)
			return 1;
		if (rc != SQLITE_DONE) {
			snprintf(err, errlen, "%s: cannot query: %s", dbs->v[i].path,
			    sqlite3_errmsg(dbs->v[i].db));
			return -1;
		}
	}
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void
db_rule_names(struct rdbs *dbs, char *buf, size_t len)
{
	char *names[64];
	size_t n = 0, off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_stmt *st;

		/* The (rule, key, ts_ms) index makes DISTINCT rule a skip scan. */
		if (sqlite3_prepare_v2(dbs->v[i].db, "SELECT DISTINCT rule FROM "
		    "decisions WHERE rule IS NOT NULL LIMIT 64", -1, &st, NULL) != SQLITE_OK)
			continue;
		while (sqlite3_step(st) == SQLITE_ROW && n < 64) {
			const char *r = (const char *)sqlite3_column_text(st, 0);
			int dup = 0;

			for (size_t j = 0; j < n && !dup; j++)
				dup = strcmp(names[j], r) == 0;
			if (!dup && (names[n] = strdup(r)) != NULL)
				n++;
		}
		sqlite3_finalize(st);
	}
	qsort(names, n, sizeof(names[0]), cmp_str);
	for (size_t j = 0; j < n; j++) {
		if (off + strlen(names[j]) + 8 < len)
			off += snprintf(buf + off, len - off, "%s%s", j ? ", " : "", names[j]);
		else if (off + 5 < len && (off == 0 || buf[off - 1] != '.'))
			off += snprintf(buf + off, len - off, ", ...");
		free(names[j]);
	}
}

/*
 * A client's bytes are stored as they came: a text holding NUL bytes is not
 * cut at the first one. output.c writes C0 80 as \u0000 in JSON and U+FFFD
 * elsewhere.
 */
const char *
db_column_str(sqlite3_stmt *st, int col, struct db_str *sb)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	size_t n, need, o = 0;

	if (t == NULL)
		return NULL;
	n = (size_t)sqlite3_column_bytes(st, col);
	if (memchr(t, '\0', n) == NULL)
		return t;
	need = 2 * n + 1;
	if (need > sb->cap) {
		char *b = realloc(sb->buf, need);

		if (b == NULL)
			return t;	/* cut at the NUL, as SQLite's C string is */
		sb->buf = b;
		sb->cap = need;
	}
	for (size_t i = 0; i < n; i++) {
		if (t[i] == '\0') {
			sb->buf[o++] = (char)0xc0;
			sb->buf[o++] = (char)0x80;
		} else
			sb->buf[o++] = t[i];
	}
	sb->buf[o] = '\0';
	return sb->buf;
}

/*
 * The table to scan for f: "decisions", or "decisions NOT INDEXED" when f
 * picks a rule that holds a good share of the rows (and no key or time
 * range): the rule index would turn the scan into a random lookup per
 * row, slower than reading the whole table in order.
 */
static const char *
scan_table(struct rdb *d, const struct filter *f)
{
	sqlite3_stmt *st;
	int64_t rows = 0, all = 0;

	/* The second layout has no index on its rows. */
	if (d->layout != 1 || f->rule == NULL || f->key != NULL ||
	    f->since_ms != INT64_MIN || f->until_ms != INT64_MAX)
		return "decisions";
	/* A count over the covering rule index, and the highest id: both cheap. */
	if (sqlite3_prepare_v2(d->db, "SELECT (SELECT count(*) FROM decisions WHERE "
	    "rule = ?1), (SELECT max(id) FROM decisions)", -1, &st, NULL) != SQLITE_OK)
		return "decisions";
	sqlite3_bind_text(st, 1, f->rule, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		rows = sqlite3_column_int64(st, 0);
		all = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	return rows > all / 20 ? "decisions NOT INDEXED" : "decisions";
}

sqlite3_stmt *
db_select_from(struct rdb *d, const struct filter *f, const char *cols,
    const char *table, const char *rule_is, const char *key_is,
    const char *where, char *err, size_t errlen)
{
	char sql[768];
	sqlite3_stmt *st;
	int rc = SQLITE_OK;

	snprintf(sql, sizeof(sql), "SELECT %s FROM %s WHERE %s%s%s%s%s", cols,
	    table, where, f->rule ? rule_is : "", f->key ? key_is : "",
	    f->since_ms != INT64_MIN ? " AND ts_ms >= ?3" : "",
	    f->until_ms != INT64_MAX ? " AND ts_ms < ?4" : "");
	if ((st = db_prepare(d, sql, err, errlen)) == NULL)
		return NULL;
	if (f->rule)
		rc = sqlite3_bind_text(st, 1, f->rule, -1, SQLITE_STATIC);
	if (f->key && rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, 2, f->key, -1, SQLITE_STATIC);
	if (f->since_ms != INT64_MIN && rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, f->since_ms);
	if (f->until_ms != INT64_MAX && rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, f->until_ms);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot bind the filter", d->path);
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

sqlite3_stmt *
db_select(struct rdb *d, const struct filter *f, const char *cols,
    const char *where, char *err, size_t errlen)
{
	return db_select_from(d, f, cols, scan_table(d, f), " AND rule = ?1",
	    " AND key = ?2", where, err, errlen);
}
