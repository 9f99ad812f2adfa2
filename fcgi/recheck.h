/*
 * recheck: finds, before regcomp() sees it, a POSIX extended regular
 * expression whose compilation would take unbounded memory (glibc's
 * regcomp() copies what a repetition repeats). Pure code; it does not
 * compile or validate the expression otherwise: regcomp() does that.
 */
#ifndef RLG_RECHECK_H
#define RLG_RECHECK_H

#define RECHECK_DEPTH		32	/* groups inside groups */
#define RECHECK_POSITIONS	20000	/* atoms once every repetition is
					 * expanded */

enum recheck_fault {
	RECHECK_OK,		/* within bounds, or left to regcomp() */
	RECHECK_STACKED,	/* a repetition right after another */
	RECHECK_DEEP,		/* groups nested over RECHECK_DEPTH */
	RECHECK_LARGE		/* over RECHECK_POSITIONS atoms expanded */
};

/*
 * What is wrong with re (NUL-terminated) for regcomp(); *at points into re
 * at the fault (set for every result but RECHECK_OK). The expanded size
 * is an upper bound: alternatives count as if all were taken, and an empty
 * group counts as one atom (regcomp() copies it all the same).
 */
enum recheck_fault recheck_regex(const char *re, const char **at);

#endif
