#!/bin/bash
# The build's own promises, asked of make itself (-n -W FILE: what it would
# run were FILE just changed; nothing is built or touched): every test
# program (tests/tools/NAME, build/tests/unit/test_NAME) is linked again
# when the source of any object it links changes, or a header they include,
# or the Lua that scripts.c and facts.h are made from; lua_check when its
# model changes. And no test includes a .c file: a test links the object
# the gateway links.
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 1

var() { make -s --no-print-directory --eval 'it-make-print-%: ; @echo $($*)' "it-make-print-$1"; }
lib=$(var LIB_SRCS)
progs="$(var TOOL_BINS) $(var UNIT_BINS)"
check "make names the gateway's sources" [ "$(wc -w <<<"$lib")" -ge 30 ]
check "make names the test programs" [ "$(wc -w <<<"$progs")" -ge 15 ]

# What follows asks what one change would relink: only of a built tree.
stale=$(make -n $progs 2>&1 | sed -n 's/.* -o \([^ ]*\) .*/\1/p' | paste -sd' ')
is "the test programs are up to date (make them first)" "" "$stale"

# relinked FILE PROGRAM...: the programs make -n -W FILE would not link again.
relinked() {
	local f=$1 out p miss=""
	shift
	out=$(make -n -W "$f" "$@" 2>&1)
	for p in "$@"; do grep -qF -- "-o $p " <<<"$out" || miss="$miss $p"; done
	echo "${miss# }"
}
for f in $lib fcgi/conf.h fcgi/conf_values.h fcgi/limiter.h lua/prelude.lua lua/decide.lua; do
	is "a change to $f links every test program again" "" "$(relinked "$f" $progs)"
done
is "a change to reports/verify_api.c links lua_check again" "" \
	"$(relinked reports/verify_api.c tests/tools/lua_check)"
is "no test includes a .c file" "" \
	"$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*\.c"' tests --include='*.c' --include='*.h')"
finish
