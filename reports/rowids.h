/*
 * rowids: a file of the second layout read without its decisions view.
 * Its small interned tables (rlg_rules, rlg_outcomes, rlg_texts) are
 * loaded into memory once, as arrays indexed by their ids, and row readers
 * scan rlg_rows' integers (rowscan.h): no join, no lookup a row. Not for first-layout
 * files, whose rows hold their strings (readers keep db_select() there).
 */
#ifndef RLG_REPORT_ROWIDS_H
#define RLG_REPORT_ROWIDS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "intern.h"

/* A row of rlg_rules (algorithm cut at a NUL byte, as sqlite3_column_text). */
struct rowids_rule {
	const char	*name;		/* NULL: SQL NULL (the view's rule) */
	const char	*algorithm;
	unsigned char	 present;	/* a row with this id exists */
	int64_t		 limit_value, window_ms, burst;
	unsigned char	 has_limit, has_window, has_burst; /* not SQL NULL */
};

/* A row of rlg_outcomes; reason NULL: no such id. */
struct rowids_outcome {
	int		 allowed;
	const char	*reason;
};

struct rowids {
	struct rowids_rule	*rule;		/* by id */
	size_t			 nrule;
	struct rowids_outcome	*outcome;	/* by id */
	size_t			 noutcome;
	char			**text;		/* by id; NULL: no such id */
	size_t			 ntext;
};

/*
 * Loads d's interned tables. Texts are as db_column_str() gives them (a
 * NUL byte as C0 80). Returns 0; 1 when their ids are too sparse to index
 * (a damaged or hand-made file: read it through the view); -1 with a
 * sentence in err naming the file. rowids_free() accepts a zeroed or
 * half-loaded x.
 */
int		 rowids_load(struct rdb *d, struct rowids *x, char *err,
		    size_t errlen);
void		 rowids_free(struct rowids *x);

/*
 * The rule, outcome, text of an id; NULL where no row has the id (the
 * view's LEFT JOIN gives NULLs), or the text is NULL.
 */
const struct rowids_rule *rowids_rule(const struct rowids *x, int64_t id);
const struct rowids_outcome *rowids_outcome(const struct rowids *x, int64_t id);
const char	*rowids_text(const struct rowids *x, int64_t id);

/*
 * f's rule and key as conditions on rlg_rows' ids, found in x (no
 * subquery that each scan of a range would run again): " AND rule IN
 * (1, 4) AND key IN (7)"; " AND 0" where no id has the name; "" without
 * them. A string to free(), or NULL out of memory.
 */
char		*rowids_filter_sql(const struct rowids *x, const struct filter *f);

/*
 * Intern ids of (rule name, key) pairs, remembered by one database's key
 * id and rule id so that rows of a known pair skip the hash. Zero it
 * first; one per database and intern table.
 */
struct rowids_memo {
	uint64_t	*v;	/* by key id + 1 (0: no key): rule id << 32 | pair + 1 */
	size_t		 cap;
};

/*
 * intern_pair(in, name of rule_id, text of key_id), through m. key_id < 0:
 * no key. Returns the pair id, or RLG_INTERN_FAIL out of memory.
 */
uint32_t	 rowids_pair(struct rowids_memo *m, struct intern *in,
		    const struct rowids *x, int64_t rule_id, int64_t key_id);
void		 rowids_memo_free(struct rowids_memo *m);

#endif
