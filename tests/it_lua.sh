#!/bin/bash
# The six lua/*.lua scripts against a private redis-server: tests/tools/lua_check
# drives them with a virtual clock (hand-computed sequences, randomised
# arrivals against a model in C, the promises, retry_after, argument errors,
# TTLs, overrides in KEYS[2]), then a few redis-cli calls check the usage
# shown in lua/README.md, and that the functions every script carries are
# the same text in all six.
# LUA_SEED=N repeats a run; LUA_CHECK_N=N sets the requests per random run.
. "$(dirname "$0")/lib.sh"

# Use the tools make built; build them here when they are missing (the
# Makefile links tools with the gateway's objects, which may not build yet).
tool() {
	local name=$1
	if [ -x "$TOP/tests/tools/$name" ] && [ "$TOP/tests/tools/$name" -nt "$TOP/tests/tools/$name.c" ]; then
		echo "$TOP/tests/tools/$name"
		return
	fi
	cc -O2 -Wall -Wextra -o "$T/$name" "$TOP/tests/tools/$name.c" \
		$(pkg-config --cflags --libs hiredis) -lm || return 1
	echo "$T/$name"
}
FREEPORT=$(tool freeport) || { echo "# cannot build freeport"; not_ok "build tools"; finish; exit; }
LUA_CHECK=$(tool lua_check) || { echo "# cannot build lua_check"; not_ok "build tools"; finish; exit; }

start_redis || { not_ok "redis-server starts"; finish; exit; }

# 1. lua_check: its own "ok"/"not ok" lines, counted here.
"$LUA_CHECK" "$REDIS_PORT" "$TOP/lua" ${LUA_SEED:-} > "$T/lua_check.log" 2>&1
rc=$?
grep -v '^[0-9]* passed, [0-9]* failed$' "$T/lua_check.log"
p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$T/lua_check.log" | tail -1)
f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$T/lua_check.log" | tail -1)
PASSED=$((PASSED + ${p:-0}))
FAILED=$((FAILED + ${f:-0}))
if [ "$rc" != 0 ] && [ "${f:-0}" = 0 ]; then not_ok "lua_check exited with status $rc"; fi
check "lua_check ran checks" [ "${p:-0}" -gt 200 ]

# 2. The README's redis-cli usage, as a user would type it.
evalr() { rcli --eval "$TOP/lua/$1.lua" "$2" , "${@:3}" | tr '\n' ' ' | sed 's/ $//'; }
is "redis-cli --eval fixed_window, clock given" "1 2 3 1000 0 1000000 0" \
	"$(evalr fixed_window 'rl:{readme:fw}' 1000000 1 3 1000 '' '')"
is "redis-cli --eval token_bucket, clock given" "1 2 7 143 0 1000000 0" \
	"$(evalr token_bucket 'rl:{readme:tb}' 1000000 1 7 1000 3 '')"
is "redis-cli --eval gcra: redis-cell's CL.THROTTLE user123 15 30 60 1" "1 15 30 2000 0 1000000 0" \
	"$(evalr gcra 'rl:{readme:gcra}' 1000000 1 30 60000 16 '')"
is "redis-cli --eval sliding_log, clock given" "1 99 100 60000 0 1000000 0" \
	"$(evalr sliding_log 'rl:{readme:sl}' 1000000 1 100 60000 '' '')"
is "redis-cli --eval sliding_window, clock given" "1 9 10 1000 0 1000000 0" \
	"$(evalr sliding_window 'rl:{readme:sw}' 1000000 1 10 1000 '' 100)"
evalr leaky_bucket 'rl:{readme:lb}' 1000000 1 2 1000 5 '' > /dev/null
is "redis-cli --eval leaky_bucket: second request waits 500 ms" "1 4 2 1000 0 1000000 500" \
	"$(evalr leaky_bucket 'rl:{readme:lb}' 1000000 1 2 1000 5 '')"
# admitted_now REPLY: 7 integers, admitted, now_us after 2020.
admitted_now() {
	set -- $1
	[ "$#" = 7 ] && [ "$1" = 1 ] && [ "$6" -gt 1600000000000000 ]
}
for alg in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	out=$(evalr "$alg" "rl:{readme:time:$alg}" '' 1 10 60000 '' '')
	check "redis-cli --eval $alg with Redis TIME: admitted, now_us is Redis's clock ($out)" \
		admitted_now "$out"
	ttl=$(rcli pttl "rl:{readme:time:$alg}")
	check "$alg: the key has a TTL ($ttl ms)" [ "$ttl" -gt 0 ]
done
# lua/README.md's override example: set, broken, unlimited, cleared.
evalo() { rcli --eval "$TOP/lua/fixed_window.lua" 'rl:{user_list:org1}' 'rl:{user_list:org1}:override' , 1700000000000000 1 3 1000 | paste -sd' '; }
rcli hset 'rl:{user_list:org1}:override' limit 5 > /dev/null
is "README override: the override's limit 5 is used" "1 4 5 1000 0 1700000000000000 0 1000 0 0 1" "$(evalo)"
rcli hset 'rl:{user_list:org1}:override' limit 0 > /dev/null
is "README override: an invalid one is ignored, and says why" \
	"1 1 3 1000 0 1700000000000000 0 1000 0 0 3 override ignored: limit must be at least 1, got 0" "$(evalo)"
rcli hset 'rl:{user_list:org1}:override' unlimited 1 > /dev/null
is "README override: unlimited, not counted" "1 3 3 0 0 1700000000000000 0 1000 0 0 2" "$(evalo)"
rcli del 'rl:{user_list:org1}:override' > /dev/null
is "README override: cleared, ARGV's limit: the third admission" "1 0 3 1000 0 1700000000000000 0 1000 0 0 0" "$(evalo)"
sha=$(rcli script load "$(cat "$TOP/lua/gcra.lua")")
is "EVALSHA with the SCRIPT LOAD sha" "1 0 1 1000 0 5000000 0" \
	"$(rcli evalsha "$sha" 1 'rl:{readme:sha}' 5000000 1 1 1000 1 '' | tr '\n' ' ' | sed 's/ $//')"
err=$(rcli evalsha "$sha" 1 'rl:{readme:err}' '' 2 1 1000 1 '' 2>&1)
is "an argument error is one sentence" "rlgate: cost 2 is above burst 1: such a request could never be admitted" "$err"

# 3. Each script stands alone (DESIGN.md section 5), so the pieces they share
# are written in each: the same text in all six, or a fix made to one
# script and not to the others fails here.
# shared NAME FILE: the function NAME of FILE, from its "local function"
# line to the "end" that closes it.
shared() { awk -v name="$1" '$0 ~ "^local function " name "\\(" { p = 1 } p { print } p && /^end$/ { exit }' "$2"; }
check "shared() finds fixed_window.lua's apply_override(), 18 lines" \
	[ "$(shared apply_override "$TOP/lua/fixed_window.lua" | wc -l)" = 18 ]
# texts NAME: in how many scripts NAME is found, and in how many texts.
texts() {
	local f found=0
	for f in "$TOP"/lua/*.lua; do [ -n "$(shared "$1" "$f")" ] && found=$((found + 1)); done
	echo "$found $(for f in "$TOP"/lua/*.lua; do shared "$1" "$f" | md5sum; done | sort -u | wc -l)"
}
for fn in num fdiv arg_int apply_override reply; do
	is "the six scripts share $fn() letter for letter: found in 6, one text" "6 1" "$(texts "$fn")"
done

finish
