/*
 * whatif: rlgate-report --what-if NEW.ini. Replays every recorded attempt,
 * in time order, through the C twin of the algorithms (fcgi/algo.h) with
 * NEW.ini's rules (matched by name; a rule NEW.ini lacks keeps its recorded
 * parameters), all or nothing per request as Redis decides, and counts
 * per rule and window what was recorded against what the what-if admits
 * and denies, and the keys whose fate changed. Memory: the keys in flight
 * (an idle key's state is dropped), the windows, the changed keys.
 * Not here: reading the rows (whatif_read.c), NEW.ini's checks
 * (whatif_conf.c), the formats (whatif_out.c).
 */
#ifndef RLG_REPORT_WHATIF_H
#define RLG_REPORT_WHATIF_H

#include <stddef.h>
#include <stdint.h>

#include "agg.h"
#include "db.h"

struct whatif_conf;

/*
 * Loads NEW.ini with the gateway's conf_load() and refuses a new rule that
 * needs request fields the audit does not keep. Returns 0 and *wc (free
 * with whatif_conf_free()), or -1 and *errors, one "FILE:LINE: ..." per
 * line, a string the caller frees.
 */
int		 whatif_conf_load(struct whatif_conf **wc, const char *path,
		    struct rdbs *dbs, char **errors);
void		 whatif_conf_free(struct whatif_conf *wc);

/* NEW.ini's warnings ("FILE:LINE: ..." lines, as rlgate -t shows them),
 * or NULL. */
const char	*whatif_conf_warnings(const struct whatif_conf *wc);

/* Does NEW.ini have a rule called name? */
int		 whatif_conf_has(const struct whatif_conf *wc, const char *name);

struct whatif_win {
	int64_t		 start_ms;
	int64_t		 rec_allowed, rec_denied;	/* as recorded */
	int64_t		 wi_allowed, wi_denied;		/* in the what-if */
};

/* A key whose fate changed: some of its requests admitted in one and
 * denied in the other. */
struct whatif_key {
	char		*key;
	int64_t		 rec_denied, wi_denied;
	int64_t		 newly_denied, newly_admitted;	/* requests */
};

struct whatif_rule {
	char		*rule;
	struct params	 recorded;	/* its latest recorded row's */
	struct params	 what_if;	/* NEW.ini's, or recorded (in_conf 0) */
	int64_t		 precision_ms;	/* sliding_window in NEW.ini, else 0 */
	int		 in_conf;	/* NEW.ini has it */
	int		 in_audit;	/* the databases have it */
	int64_t		 rec_allowed, rec_denied, wi_allowed, wi_denied;
	int64_t		 differ;	/* rows decided otherwise than recorded */
	int64_t		 newly_denied_keys, newly_admitted_keys;
	struct whatif_key *top;		/* the most changed first */
	size_t		 ntop;
	struct whatif_win *wins;	/* by start_ms, only windows with rows */
	size_t		 nwins, wcap;
};

struct whatif {
	const char	*conf_path;
	int64_t		 width_ms;
	struct whatif_rule *rules;	/* by name: the record's and NEW.ini's */
	size_t		 nrules;
	int64_t		 requests;	/* requests replayed (in range) */
	int64_t		 rows;		/* attempts counted (in range) */
	int64_t		 differ;	/* of them decided otherwise */
	int64_t		 differ_undecided; /* of those, rows Redis had not
					 * decided (redis_error, local,
					 * local_cache) */
	int64_t		 undecided;	/* rows replayed that Redis had not
					 * decided */
	int64_t		 bad;		/* attempts the parameters refuse
					 * (a cost above the burst): denied */
	int64_t		 skipped;	/* rows not replayable (bad_request,
					 * no key, no parameters) */
	int64_t		 late;		/* rows replayed out of time order */
	int64_t		 keys_peak;	/* keys in flight, at most */
	int64_t		 first_ms, last_ms;
};

/*
 * Replays every database's rows before f->until_ms through wc's rules, and
 * counts those of f's rule, key and time range in windows of width_ms;
 * at most ntop changed keys a rule. Returns 0, or -1 with one sentence in
 * err. Free w (zeroed by the caller first) with whatif_free() either way.
 */
int		 whatif_run(struct whatif *w, const struct whatif_conf *wc,
		    struct rdbs *dbs, const struct filter *f, int64_t width_ms,
		    size_t ntop, char *err, size_t errlen);
void		 whatif_free(struct whatif *w);

#endif
