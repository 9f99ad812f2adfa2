/*
 * verify_local: what --verify needs for the rows on_error = local decided
 * (reason = local). Each gateway process enforces local_share of the limit
 * on its own (fcgi/local.h), and the audit knows the process only by the
 * request_id's prefix (16 hex digits, random per process, before the
 * '-'): so local rows are replayed per process, as a timeline of their own
 * apart from Redis's, against the parameters stored in them (the share).
 * That is what can be proved; a per-host bound is not (no host column).
 */
#ifndef RLG_REPORT_VERIFY_LOCAL_H
#define RLG_REPORT_VERIFY_LOCAL_H

#include <stddef.h>

/* SQL: the row's process for a local row, NULL otherwise. */
#define VERIFY_LOCAL_PROCESS \
	"CASE WHEN reason = 'local' THEN substr(request_id, 1, " \
	"instr(request_id, '-') - 1) END"
/* SQL: the reasons verify replays (besides redis_error admissions). */
#define VERIFY_LOCAL_REASON	"reason = 'local'"

/*
 * The rule and key names a local row is replayed under: "RULE (local)" and
 * "KEY (process P)", written into rbuf and kbuf (cut to fit). Returns 0.
 */
int	 verify_local_names(const char *rule, const char *key, const char *proc,
	    char *rbuf, size_t rlen, char *kbuf, size_t klen);

#endif
