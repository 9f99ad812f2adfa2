#!/bin/bash
# The C twin of the algorithms (fcgi/algo.c) against the Lua library in a
# private redis-server: tests/tools/twin_diff calls LIB_decide with random
# rules of every algorithm (edge parameters, costs, dry runs, overrides that
# change parameters between calls, batches of requests), with the clock in
# ARGV (bursts in one us, gaps, steps back) and with Redis TIME (the twin
# takes the now_us the Lua replied), and fails on the first reply field, or
# request's counted, that differs, printing the call. Seeded: TWIN_SEED=N
# repeats a run (default 1), TWIN_N=N sets the scenarios per clock.
. "$(dirname "$0")/../lib.sh"

TWIN=$TOP/tests/tools/twin_diff
[ -x "$TWIN" ] || { not_ok "tests/tools/twin_diff is built (make tests/tools/twin_diff)"; finish; exit; }
start_redis || { not_ok "redis-server starts"; finish; exit; }

"$TWIN" "$REDIS_PORT" "${TWIN_SEED:-1}" "${TWIN_N:-200}" > "$T/twin.log" 2>&1
rc=$?
cat "$T/twin.log"
p=$(grep -c '^ok - ' "$T/twin.log")
f=$(grep -c '^not ok - ' "$T/twin.log")
PASSED=$((PASSED + p))
FAILED=$((FAILED + f))
is "twin_diff exits 0 exactly when every check passed" "$([ "$f" = 0 ] && echo 0 || echo 1)" "$rc"
is "twin_diff ran its 3 checks" 3 "$((p + f))"
is "twin_diff left no key behind" 0 "$(rcli --scan --pattern 'twin_diff:*' | wc -l)"
finish
