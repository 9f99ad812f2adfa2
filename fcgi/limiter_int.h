/*
 * limiter_int: the limiter's internals that its tests and lua_check read:
 * the row of <library>_decide's reply (lua/decide.lua) and its parser.
 * Not part of the limiter's contract (limiter.h).
 */
#ifndef RLG_LIMITER_INT_H
#define RLG_LIMITER_INT_H

#include <stddef.h>

#include "facts.h"

/*
 * One row of <library>_decide's reply (lua/decide.lua), a string: "ALLOWED
 * REMAINING LIMIT RESET_MS RETRY_AFTER_MS NOW_US DELAY_MS WINDOW_MS BURST
 * PRECISION_MS OVERRIDE UNDO WHY", 11 decimal integers, the undo token and
 * why joined by single spaces; why is the rest of the string (it may hold
 * spaces), the token holds none. f[] the integers in that order (facts.h's
 * RLG_DECIDE_ROW_ indexes, those before UNDO); undo and why point into the
 * row, "" when empty.
 */
struct limiter_row {
	long long	 f[RLG_DECIDE_ROW_UNDO];
	const char	*undo;
	size_t		 undo_len;
	const char	*why;
	size_t		 why_len;
};

/*
 * Parses the row s[0..len) into *row, strictly: each integer a whole
 * decimal (an optional -, digits) within 2^53 in magnitude, allowed 0 or 1,
 * override an enum rlg_override, every separator one space. Returns 0, or
 * -1 when s is anything else (*row then means nothing). Allocates nothing.
 */
int		 limiter_row(const char *s, size_t len, struct limiter_row *row);

#endif
