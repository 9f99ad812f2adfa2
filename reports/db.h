/*
 * db: the audit databases the report reads, opened read-only and checked to
 * be rlgate audit databases of either layout (RLG_AUDIT_SCHEMA_V1's
 * decisions table, or RLG_AUDIT_SCHEMA's tables and decisions view, in
 * fcgi/audit.h): readers select from decisions, the same in both, except
 * the row scans, which read a second-layout file by id (rowids.h).
 * Several may be given, one per gateway host, of either layout; every
 * reader in reports/ loops over all of them.
 */
#ifndef RLG_REPORT_DB_H
#define RLG_REPORT_DB_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

struct rdb {
	char		*path;	/* as given on the command line */
	sqlite3		*db;
	int		 layout; /* 1: a decisions table; RLG_AUDIT_LAYOUT */
	int		 rows_gone; /* its rows deleted ([audit] keep_rows),
				     * its per-second summaries left */
};

struct rdbs {
	struct rdb	*v;
	size_t		 n;
	int		 jobs;	/* threads that decode a file's rows (rowscan.h) */
};

/*
 * The database files the command line's arguments name, in order: a file;
 * a directory's "*.db" files; a glob(3) pattern's files; each path once.
 * Returns 0 and (*paths, *n), freed by the caller with db_paths_free(), or
 * -1 with a sentence in err (a directory without .db files, no match).
 */
int		 db_expand(char **args, size_t nargs, char ***paths, size_t *n,
		    char *err, size_t errlen);
void		 db_paths_free(char **paths, size_t n);

/*
 * Opens every path read-only and checks its schema. On failure closes what
 * was opened and writes one sentence naming the file into err ("audit.db:
 * no such file", "x.db: not an rlgate audit database (no decisions
 * table)"). Returns 0 or -1. The paths are copied.
 */
int		 db_open_all(struct rdbs *dbs, char **paths, size_t n, char *err,
		    size_t errlen);

/*
 * A read-only connection to path, as every reader opens one (waits for a
 * writer's locks, maps the file). Returns 0, or -1 with a sentence in err;
 * *db is to be closed either way.
 */
int		 db_connect(const char *path, sqlite3 **db, char *err,
		    size_t errlen);

/* Closes every database. Accepts a zeroed or half-opened set. */
void		 db_close_all(struct rdbs *dbs);

/*
 * Prepares sql on one database. Returns the statement, or NULL with a
 * sentence in err naming the file.
 */
sqlite3_stmt	*db_prepare(struct rdb *d, const char *sql, char *err, size_t errlen);

/*
 * Does any database hold a decision for rule (and key, when not NULL)?
 * Returns 1, 0, or -1 with a sentence in err.
 */
int		 db_has(struct rdbs *dbs, const char *rule, const char *key,
		    char *err, size_t errlen);

/* "PATH: cannot read: SQLite's message" into err, for a statement of d
 * that stopped short of SQLITE_DONE. Returns -1. */
int		 db_read_error(const struct rdb *d, char *err, size_t errlen);

/*
 * The distinct rule names in all databases, sorted, joined with ", " and
 * cut to about len bytes, into buf (for "unknown rule" messages).
 */
void		 db_rule_names(struct rdbs *dbs, char *buf, size_t len);

/*
 * A growable buffer for db_column_str(); zero it first, free buf with
 * free().
 */
struct db_str {
	char		*buf;
	size_t		 cap;
};

/*
 * The text of column col of st's current row as a C string (NULL for SQL
 * NULL), each NUL byte as C0 80 ("modified UTF-8"; escape.h writes it).
 * Valid until the next step of st or the next call with sb (one sb per
 * column). Out of memory, the text is cut at its first NUL.
 */
const char	*db_column_str(sqlite3_stmt *st, int col, struct db_str *sb);

/* A row filter shared by every reader: rule, key, [since, until). */
struct filter {
	const char	*rule;		/* NULL = every rule */
	const char	*key;		/* NULL = every key */
	int64_t		 since_ms;	/* INT64_MIN = from the start */
	int64_t		 until_ms;	/* INT64_MAX = to the end (exclusive) */
};

/*
 * Prepares "SELECT cols FROM decisions WHERE where" on d, with f's clauses
 * added and bound. Returns the statement, or NULL with a sentence in err
 * naming the file.
 */
sqlite3_stmt	*db_select(struct rdb *d, const struct filter *f, const char *cols,
		    const char *where, char *err, size_t errlen);

/*
 * The same from table, where f's rule and key are tested by rule_is and
 * key_is (SQL that reads ?1 and ?2; the second layout's rows hold ids).
 */
sqlite3_stmt	*db_select_from(struct rdb *d, const struct filter *f,
		    const char *cols, const char *table, const char *rule_is,
		    const char *key_is, const char *where, char *err,
		    size_t errlen);

#endif
