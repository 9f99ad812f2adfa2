/*
 * recheck: bounds a path regex's cost before regcomp() sees it (see
 * recheck.h). Not a regex parser: it follows groups, repetitions and
 * bracket expressions only as far as sizing them needs.
 */
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "recheck.h"

/*
 * The copies of its atom that the repetition at p makes ("+": 2, "{2,5}":
 * 5, "{2,}": 3), and in *end where it ends; 0 when regcomp() is left to
 * refuse it.
 */
static unsigned long long
re_copies(const char *p, const char **end)
{
	unsigned long long m = 0, n;
	char *e = (char *)p + 1;

	*end = p;
	if (*p != '{')
		return *p == '+' ? 2 : 1;	/* glibc: a+ is a a* */
	if (ascii_is_digit(*e))
		m = strtoull(e, &e, 10);
	else if (*e != ',')
		return 0;
	n = m;
	if (*e == ',') {
		e++;
		n = ascii_is_digit(*e) ? strtoull(e, &e, 10) : m + 1;
	}
	if (*e != '}')
		return 0;
	*end = e;
	return n > RECHECK_POSITIONS ? RECHECK_POSITIONS + 1 : n > 0 ? n : 1;
}

/*
 * glibc's regcomp() copies what a repetition repeats, nested ones
 * included, so that its memory grows with the size of the expanded
 * expression: the product of nested counts. A repetition straight after
 * another (which POSIX leaves undefined) copies the expression once per
 * repetition, so a run of them grows as fast; so do empty groups repeated
 * within each other.
 */
enum recheck_fault
recheck_regex(const char *re, const char **at)
{
	unsigned long long size[RECHECK_DEPTH + 1] = { 0 }, last = 0, k;
	int depth = 0, after_repeat = 0;
	const char *p;

	for (p = re; *p != '\0'; p++) {
		*at = p;
		if (strchr("*+?{", *p) != NULL) {
			if (after_repeat)
				return RECHECK_STACKED;
			if ((k = re_copies(p, &p)) == 0)
				return RECHECK_OK;	/* regcomp() says what is wrong */
			size[depth] += last * (k - 1);
			if (size[depth] > RECHECK_POSITIONS)
				return RECHECK_LARGE;
			after_repeat = 1;
			continue;
		}
		after_repeat = 0;
		if (*p == '(') {
			if (depth == RECHECK_DEPTH)
				return RECHECK_DEEP;
			size[++depth] = last = 0;
			continue;
		}
		if (*p == ')' && depth > 0) {
			/* Even an empty group is copied: "((){200}){200}"
			 * grows as surely as with an atom in it. */
			last = size[depth] > 0 ? size[depth] : 1;
			depth--;
			if ((size[depth] += last) > RECHECK_POSITIONS)
				return RECHECK_LARGE;
			continue;
		}
		if (*p == '|') {
			last = 0;
			continue;
		}
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == '[') {
			/* A bracket expression: a "]" first is a member, and
			 * [:class:] [.coll.] [=equiv=] hold their own "]". */
			p += p[1] == '^' ? 2 : 1;
			if (*p == ']')
				p++;
			for (; *p != '\0' && *p != ']'; p++) {
				if (p[0] == '[' && p[1] != '\0' &&
				    strchr(":.=", p[1]) != NULL) {
					char end[3] = { p[1], ']', '\0' };

					if ((p = strstr(p + 2, end)) == NULL)
						return RECHECK_OK;
					p++;
				}
			}
			if (*p == '\0')
				return RECHECK_OK;
		}
		last = 1;
		if (++size[depth] > RECHECK_POSITIONS)
			return RECHECK_LARGE;
	}
	return RECHECK_OK;
}

