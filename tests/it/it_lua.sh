#!/bin/bash
# The rlgate Lua library (lua/) against a private redis-server:
# tests/tools/lua_check drives it with a virtual clock (hand-computed
# sequences, randomised arrivals against the C twin, the promises as
# rlgate-report --verify checks them,
# retry_after, argument errors, TTLs, overrides) through the standalone
# functions and through rlgate_decide with one rule (and rlgate_undo against
# a twin key); then
# redis-cli checks the usage shown in lua/README.md (rlgate_peek too), rlgate_decide with
# several rules and rlgate_undo, and that no algorithm redefines the prelude.
# LUA_SEED=N repeats a run; LUA_CHECK_N=N sets the requests per random run.
. "$(dirname "$0")/../lib.sh"

LUA_LIB="$TOP/lua/prelude.lua $(ls "$TOP"/lua/*.lua | grep -v -e '/prelude.lua$' -e '/decide.lua$' -e '/rlgate.lua$' | sort | tr '\n' ' ')$TOP/lua/decide.lua"
# shellcheck disable=SC2086
sh "$TOP/fcgi/embed.sh" -l $LUA_LIB > "$T/rlgate.lua" || { not_ok "embed.sh -l builds the library"; finish; exit; }

# Use the tools make built; build them here when they are missing (the
# Makefile links tools with the gateway's objects, which may not build yet).
# lua_check links the twin (fcgi/algo.c) and the report's promise checker:
# make builds it.
tool() {
	local name=$1
	local bin=$TOP/tests/tools/$name
	if [ "$name" = lua_check ]; then
		make --no-print-directory -s -C "$TOP" tests/tools/lua_check >&2 || return 1
		echo "$bin"
		return
	fi
	if [ -x "$bin" ] && [ "$bin" -nt "$TOP/tests/tools/$name.c" ]; then
		echo "$bin"
		return
	fi
	cc -O2 -Wall -Wextra -o "$T/$name" "$TOP/tests/tools/$name.c" \
		$(pkg-config --cflags --libs hiredis) -lm || return 1
	echo "$T/$name"
}
FREEPORT=$(tool freeport) || { echo "# cannot build freeport"; not_ok "build tools"; finish; exit; }
LUA_CHECK=$(tool lua_check) || { echo "# cannot build lua_check"; not_ok "build tools"; finish; exit; }

start_redis || { not_ok "redis-server starts"; finish; exit; }

# 1. lua_check: its own "ok"/"not ok" lines, counted here. The EVAL scripts
# are the library's text again: a third of the random requests for them.
lua_check() {
	local via=$1 min=$2
	shift 2
	env "$@" "$LUA_CHECK" "$REDIS_PORT" "$via" ${LUA_SEED:-} > "$T/lua_check.log" 2>&1
	local rc=$? p f
	grep -v '^[0-9]* passed, [0-9]* failed$' "$T/lua_check.log"
	p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$T/lua_check.log" | tail -1)
	f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$T/lua_check.log" | tail -1)
	PASSED=$((PASSED + ${p:-0}))
	FAILED=$((FAILED + ${f:-0}))
	if [ "$rc" != 0 ] && [ "${f:-0}" = 0 ]; then not_ok "lua_check $via exited with status $rc"; fi
	check "lua_check $via ran checks (${p:-0})" [ "${p:-0}" -gt "$min" ]
}
lua_check fcall 300
lua_check decide 300

# 2. The library as one file, loaded as lua/README.md shows.
# L: the library's name, rlgate_ and the version's first 12 hex digits;
# every function's name starts with it.
L=$(sed -n '1s/^#!lua name=//p' "$T/rlgate.lua")
check "the library's name is rlgate_ and 12 hex digits ($L)" grep -qx 'rlgate_[0-9a-f]\{12\}' <<<"$L"
rcli FUNCTION DELETE "$L" > /dev/null 2>&1	# lua_check loaded it
is "redis-cli -x FUNCTION LOAD, as lua/README.md shows" "$L" "$(rcli -x FUNCTION LOAD < "$T/rlgate.lua")"
version=$(rcli FCALL_RO "${L}_version" 0)
is "${L}_version is the sha1 of the sources (with the placeholders)" \
	"$(sed -e "s/$version/@RLGATE_VERSION@/" -e "s/$L/@RLGATE_LIB@/g" "$T/rlgate.lua" | sha1sum | cut -c1-40)" "$version"
is "the name is the version's first 12 hex digits" "rlgate_${version:0:12}" "$L"
is "the build embeds the same version" "1" \
	"$(grep -c "^const char rlg_library_version\[\] = \"$version\";" "$TOP/fcgi/scripts.c" 2>/dev/null || echo 0)"
line() { tr '\n' ' ' | sed 's/ $//'; }
fc() { rcli FCALL "${L}_$1" 1 "$2" "${@:3}" | line; }
# fc_kept: fc, then PERSIST on the key in the same connection. A clock
# given (1 s after 1970) makes the key's TTL the window's end less that
# clock, a real second: the peeks below read the state later, and a loaded
# machine can take that second first.
fc_kept() {
	{ printf 'FCALL %s_%s 1 %s' "$L" "$1" "$2"; printf " '%s'" "${@:3}"
	  printf '\nPERSIST %s\n' "$2"; } | rcli | sed '$d' | line
}
is "FCALL ${L}_fixed_window, clock given" "1 2 3 1000 0 1000000 0" \
	"$(fc_kept fixed_window 'rl:{readme:fw}' 1000000 1 3 1000 '' '')"
is "FCALL ${L}_token_bucket, clock given" "1 2 7 143 0 1000000 0" \
	"$(fc token_bucket 'rl:{readme:tb}' 1000000 1 7 1000 3 '')"
is "FCALL ${L}_gcra: redis-cell's CL.THROTTLE user123 15 30 60 1" "1 15 30 2000 0 1000000 0" \
	"$(fc gcra 'rl:{readme:gcra}' 1000000 1 30 60000 16 '')"
is "FCALL ${L}_sliding_log, clock given" "1 99 100 60000 0 1000000 0" \
	"$(fc sliding_log 'rl:{readme:sl}' 1000000 1 100 60000 '' '')"
is "FCALL ${L}_sliding_window, clock given" "1 9 10 1000 0 1000000 0" \
	"$(fc sliding_window 'rl:{readme:sw}' 1000000 1 10 1000 '' 100)"
fc_kept leaky_bucket 'rl:{readme:lb}' 1000000 1 2 1000 5 '' > /dev/null
is "FCALL ${L}_leaky_bucket: second request waits 500 ms" "1 4 2 1000 0 1000000 500" \
	"$(fc_kept leaky_bucket 'rl:{readme:lb}' 1000000 1 2 1000 5 '')"
is "FCALL ${L}_gcra, trailing arguments left out" "1 0 1 1000 0 5000000 0" \
	"$(fc gcra 'rl:{readme:short}' 5000000 1 1 1000)"
# admitted_now REPLY: 7 integers, admitted, now_us after 2020.
admitted_now() {
	set -- $1
	[ "$#" = 7 ] && [ "$1" = 1 ] && [ "$6" -gt 1600000000000000 ]
}
for alg in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	out=$(fc "$alg" "rl:{readme:time:$alg}" '' 1 10 60000 '' '')
	check "FCALL ${L}_$alg with Redis TIME: admitted, now_us is Redis's clock ($out)" \
		admitted_now "$out"
	ttl=$(rcli pttl "rl:{readme:time:$alg}")
	check "$alg: the key has a TTL ($ttl ms)" [ "$ttl" -gt 0 ]
done
# LIB_peek, as lua/README.md shows it: fields 1-12 and 14 (13, the TTL, is
# Redis's clock's), on the keys above, nothing written. (Before every step of
# lua_check's hand-computed sequences it agrees with the decision after it.)
pk() { rcli FCALL_RO "${L}_peek" 1 "$@" | sed 13d | paste -sd'|'; }
before=$(rcli DUMP 'rl:{readme:fw}' | od -An -tx1 | tr -d ' \n')
is "${L}_peek fixed_window 500 ms into the window: 2 left, reset 500 ms, its start and count" \
	"1|2|3|500|0|1500000|0|1000|0|0|0||window start=1000000 (500 ms ago) count=1" \
	"$(pk 'rl:{readme:fw}' fixed_window 1500000 1 3 1000 '' '')"
is "${L}_peek writes nothing (DUMP unchanged)" "$before" "$(rcli DUMP 'rl:{readme:fw}' | od -An -tx1 | tr -d ' \n')"
is "${L}_peek leaky_bucket after two at once: 4 left, the next waits 1000 ms" \
	"1|4|2|1000|0|1000000|1000|1000|5|0|0||queue drains at 2000000 (in 1000 ms)" \
	"$(pk 'rl:{readme:lb}' leaky_bucket 1000000 1 2 1000 5 '')"
is "${L}_peek another algorithm's state: a full bucket, and says so" \
	"1|3|3|0|0|1500000|0|1000|3|0|0||a hash, not gcra state: the next request replaces it" \
	"$(pk 'rl:{readme:fw}' gcra 1500000 1 3 1000 '' '')"
is "${L}_peek a key with no state: the whole limit, no TTL (-2)" \
	"1|3|3|0|0|1500000|0|1000|0|0|0||none (nothing counted: the whole limit is free) -2" \
	"$(pk 'rl:{readme:none}' sliding_log 1500000 1 3 1000 '' '') $(rcli FCALL_RO "${L}_peek" 1 'rl:{readme:none}' sliding_log '' 1 3 1000 '' '' | sed -n 13p)"
is "${L}_peek an unknown algorithm: an error" \
	"rlgate: unknown algorithm \"nosuch\": use fixed_window, sliding_window, sliding_log, token_bucket, gcra or leaky_bucket" \
	"$(rcli FCALL_RO "${L}_peek" 1 'rl:{readme:fw}' nosuch 1500000 1 3 1000 '' '' 2>&1)"
# lua/README.md's override example: set, broken, unlimited, cleared.
# (PERSIST in the same connection, as fc_kept: the clock given is in 2023.)
evalo() {
	printf 'FCALL %s_fixed_window 2 rl:{user_list:org1} rl:{user_list:org1}:override 1700000000000000 1 3 1000\nPERSIST rl:{user_list:org1}\n' "$L" |
		rcli | sed '$d' | paste -sd' '
}
rcli hset 'rl:{user_list:org1}:override' limit 5 > /dev/null
is "README override: the override's limit 5 is used" "1 4 5 1000 0 1700000000000000 0 1000 0 0 1" "$(evalo)"
rcli hset 'rl:{user_list:org1}:override' limit 0 > /dev/null
is "README override: an invalid one is ignored, and says why" \
	"1 1 3 1000 0 1700000000000000 0 1000 0 0 3 override ignored: limit must be at least 1, got 0" "$(evalo)"
rcli hset 'rl:{user_list:org1}:override' unlimited 1 > /dev/null
is "README override: unlimited, not counted" "1 3 3 0 0 1700000000000000 0 1000 0 0 2" "$(evalo)"
rcli del 'rl:{user_list:org1}:override' > /dev/null
is "README override: cleared, ARGV's limit: the third admission" "1 0 3 1000 0 1700000000000000 0 1000 0 0 0" "$(evalo)"
# LIB_override, as lua/README.md shows it: what a decision makes of an
# override, from the hash or from fields given (rlgate-ctl asks it).
ov() { rcli FCALL_RO "${L}_override" "$@" 2>&1 | paste -sd'|'; }
rcli hset 'rl:{user_list:org1}:override' limit 5 window_ms 2000 > /dev/null
is "${L}_override of the hash: applied, its limit and window" "1|5|2000|0|0|" \
	"$(ov 1 'rl:{user_list:org1}:override' fixed_window 1 3 1000 '' '')"
rcli del 'rl:{user_list:org1}:override' > /dev/null
is "${L}_override of no hash: none, the arguments'" "0|3|1000|0|0|" \
	"$(ov 1 'rl:{user_list:org1}:override' fixed_window 1 3 1000 '' '')"
is "${L}_override of fields: gcra's unset burst follows the override's limit" "1|7|1000|7|0|" \
	"$(ov 0 gcra 1 3 1000 '' '' 7 '' '' '' '')"
is "${L}_override of fields: sliding_window keeps the arguments' default precision" "1|3|2000|0|200|" \
	"$(ov 0 sliding_window 1 3 1000 '' '' '' 2000 '' '' '')"
is "${L}_override of fields: sliding_log above its limit, ignored, and why" \
	"3|3|1000|0|0|limit must be at most 100000, got 100001" \
	"$(ov 0 sliding_log 1 3 1000 '' '' 100001 '' '' '' '')"
is "${L}_override of fields: unlimited" "2|3|1000|0|0|" "$(ov 0 fixed_window 1 3 1000 '' '' '' '' '' '' 1)"
is "${L}_override: the arguments themselves wrong, an error" "rlgate: cost is missing (ARGV[2])" \
	"$(rcli FCALL_RO "${L}_override" 0 fixed_window '' 3 1000 '' '' 2>&1)"
err=$(rcli FCALL ${L}_gcra 1 'rl:{readme:err}' '' 2 1 1000 1 '' 2>&1)
is "an argument error is one sentence" "rlgate: cost 2 is above burst 1: such a request could never be admitted" "$err"
is "${L}_gcra with 3 keys: an error" "rlgate: ${L}_gcra takes 1 key (the state) or 2 (and its override), got 3" \
	"$(rcli FCALL ${L}_gcra 3 a b c '' 1 1 1000 2>&1)"

# 3. LIB_decide: the rules of one request, all or nothing.
# decide N KEYS... NOW RULE-ARGS...: the reply, "counted" first, then each
# rule's row (one string: 11 integers, the undo token, why, joined by single
# spaces), shown as its 11 integers, why ("" when empty) and the undo token
# as "undo" or "-". A row without its 12 spaces shows as "BAD".
decide() { rcli FCALL ${L}_decide "$@" | decide_rows; }
decide_rows() {
	awk 'NR == 1 { printf "%s", $0; next }
		{
			s = $0
			for (j = 1; j <= 12; j++) {
				p = index(s, " ")
				if (p == 0) { printf " | BAD"; next }
				f[j] = substr(s, 1, p - 1)
				s = substr(s, p + 1)
			}
			printf " |"
			for (j = 1; j <= 11; j++) printf " %s", f[j]
			printf " %s %s", s == "" ? "\"\"" : s, f[12] == "" ? "-" : "undo"
		} END { printf "\n" }'
}
# decide_kept: decide, then PERSIST on each of its keys in the same
# connection. With a clock given (1 s after 1970), a key's TTL is its
# state's end less that clock, real time: token_bucket's 100 ms here,
# which a loaded machine can pass before the next call reads the state.
decide_kept() {
	local a k
	{ printf 'FCALL %s_decide' "$L"; for a in "$@"; do printf ' "%s"' "$a"; done
	  printf '\n'; for k in "${@:2:$1}"; do printf 'PERSIST %s\n' "$k"; done; } |
		rcli | head -n "-$1" | decide_rows
}
# narrow (3 per minute) and wide (5 per minute), the same request to both
# (flag u: with undo tokens).
narrow_wide() { decide 2 'rl:{narrow:ip}' 'rl:{wide:ip}' "$version" 1000000 \
	'fixed_window u 1 3 60000  ' 'fixed_window u 1 5 60000  '; }
is "narrow/wide 1: both count" "1 | 1 2 3 60000 0 1000000 0 60000 0 0 0 \"\" undo | 1 4 5 60000 0 1000000 0 60000 0 0 0 \"\" undo" "$(narrow_wide)"
narrow_wide > /dev/null
is "narrow/wide 3: both count" "1 | 1 0 3 60000 0 1000000 0 60000 0 0 0 \"\" undo | 1 2 5 60000 0 1000000 0 60000 0 0 0 \"\" undo" "$(narrow_wide)"
is "narrow/wide 4: narrow denies, wide would admit: nothing counted, wide shows 2 left" \
	"0 | 0 0 3 60000 60000 1000000 0 60000 0 0 0 \"\" - | 1 2 5 60000 0 1000000 0 60000 0 0 0 \"\" -" "$(narrow_wide)"
for i in 5 6 7 8 9 10; do narrow_wide > /dev/null; done
is "narrow/wide: of 10 requests 3 were counted: wide's count is 3" "3" "$(rcli hget 'rl:{wide:ip}' count)"
is "without flag u, a counted rule gives no undo token (flag u on the other)" \
	"1 | 1 2 3 60000 0 1000000 0 60000 0 0 0 \"\" - | 1 2 3 60000 0 1000000 0 60000 0 0 0 \"\" undo" \
	"$(decide 2 'rl:{nou:a}' 'rl:{nou:b}' '' 1000000 'fixed_window - 1 3 60000  ' 'fixed_window u 1 3 60000  ')"
is "wide alone still admits 2 (the 4th and 5th of its 5)" "1 1 5 60000 0 1000000 0 | 1 0 5 60000 0 1000000 0 | 0 0 5 60000 60000 1000000 0" \
	"$(for i in 1 2 3; do fc fixed_window 'rl:{wide:ip}' 1000000 1 5 60000 '' ''; echo; done | paste -sd'|' | sed 's/|/ | /g')"

# Mixed: sliding_log 3 per 100 s, two leaky buckets (2 per 100 s burst 3:
# T = 50 s; 4 per 100 s burst 5: T = 25 s) and a token_bucket 10 per 100 s,
# all at once. (Windows of 100 s: no key expires in real time meanwhile.)
mixed() { decide 4 'rl:{m:sl}' 'rl:{m:lb2}' 'rl:{m:lb4}' 'rl:{m:tb}' "" "$1" \
	'sliding_log - 1 3 100000  ' 'leaky_bucket - 1 2 100000 3 ' 'leaky_bucket - 1 4 100000 5 ' \
	'token_bucket - 1 10 100000  '; }
# "allowed remaining reset_ms retry_after_ms delay_ms" of each rule, after counted.
short() { awk -F' [|] ' '{ printf "%s", $1; for (i = 2; i <= NF; i++) { split($i, f, " "); printf " | %s %s %s %s %s", f[1], f[2], f[4], f[5], f[7] } printf "\n" }'; }
is "mixed 1: all admit at once (delays 0, 0)" "1 | 1 2 100000 0 0 | 1 3 50000 0 0 | 1 5 25000 0 0 | 1 9 10000 0 0" "$(mixed 1000000 | short)"
is "mixed 2: the leaky buckets delay 50 and 25 s (the gateway holds the largest)" \
	"1 | 1 1 100000 0 0 | 1 2 100000 0 50000 | 1 4 50000 0 25000 | 1 8 20000 0 0" "$(mixed 1000000 | short)"
is "mixed 3: delays 100 and 50 s" "1 | 1 0 100000 0 0 | 1 1 150000 0 100000 | 1 3 75000 0 50000 | 1 7 30000 0 0" "$(mixed 1000000 | short)"
is "mixed 4: sliding_log denies (retry 100 s): nothing counted, no delay" \
	"0 | 0 0 100000 100000 0 | 1 1 150000 0 0 | 1 3 75000 0 0 | 1 7 30000 0 0" "$(mixed 1000000 | short)"
is "mixed 5, 100 s later: the 4th took nothing (leaky 2 per 100 s waits 50 s, not 100)" \
	"1 | 1 2 100000 0 0 | 1 2 100000 0 50000 | 1 5 25000 0 0 | 1 9 10000 0 0" "$(mixed 101000000 | short)"

# Dry run: a dry rule that would deny blocks nothing and is not counted; one
# that admits is counted with the others.
dry() { decide 2 'rl:{dry:a}' 'rl:{dry:b}' "" 1000000 'fixed_window d 1 2 60000  ' 'fixed_window - 1 5 60000  ' | short; }
is "dry 1: both count" "1 | 1 1 60000 0 0 | 1 4 60000 0 0" "$(dry)"
is "dry 2: both count" "1 | 1 0 60000 0 0 | 1 3 60000 0 0" "$(dry)"
is "dry 3: the dry rule denies: admitted, the other counts" "1 | 0 0 60000 60000 0 | 1 2 60000 0 0" "$(dry)"
dry > /dev/null
is "dry: counts 2 and 4 after 4 requests" "2 4" "$(rcli hget 'rl:{dry:a}' count) $(rcli hget 'rl:{dry:b}' count)"
dry2() { decide 2 'rl:{dry:c}' 'rl:{dry:d}' "" 1000000 'fixed_window - 1 1 60000  ' 'fixed_window d 1 5 60000  ' | short; }
dry2 > /dev/null
is "a dry rule that admits is not counted when another denies" "0 | 0 0 60000 60000 0 | 1 4 60000 0 0" "$(dry2)"
is "dry: its count stays 1" "1" "$(rcli hget 'rl:{dry:d}' count)"
# A batch: several requests in one call (flag n on the first rule of each
# after the first), each all or nothing, each on the state the ones before
# it left. Request 1: x (2 per minute) and y (1 per minute); request 2: x;
# request 3: x, now full, and z, which would admit: nothing counted.
batch() { rcli -2 --json FCALL "${L}_decide" "$@"; }
row_b() { printf '"%s %s %s %s %s 1000000 0 60000 0 0 0  "' "$@"; }
is "batch: three requests; x denies the third, so z is not counted" \
	"[1,$(row_b 1 1 2 60000 0),$(row_b 1 0 1 60000 0),1,$(row_b 1 0 2 60000 0),0,$(row_b 0 0 2 60000 60000),$(row_b 1 5 5 0 0)]" \
	"$(batch 5 'rl:{b:x}' 'rl:{b:y}' 'rl:{b:x}' 'rl:{b:x}' 'rl:{b:z}' "" 1000000 \
		'fixed_window - 1 2 60000  ' 'fixed_window - 1 1 60000  ' \
		'fixed_window n 1 2 60000  ' 'fixed_window n 1 2 60000  ' 'fixed_window - 1 5 60000  ')"
is "batch: x counted twice, y once, z never written" "2 1 0" \
	"$(rcli hget 'rl:{b:x}' count) $(rcli hget 'rl:{b:y}' count) $(rcli exists 'rl:{b:z}')"
# A denied request, then one on a fresh key, in one call: the second is
# decided on its own (counted 1 and written), whatever the first answered.
is "batch: x full denies request 1; request 2 on fresh key w is counted" \
	"[0,$(row_b 0 0 2 60000 60000),1,$(row_b 1 2 3 60000 0)]" \
	"$(batch 2 'rl:{b:x}' 'rl:{b:w}' "" 1000000 'fixed_window - 1 2 60000  ' 'fixed_window n 1 3 60000  ')"
is "batch: w counted once, x still 2" "1 2" "$(rcli hget 'rl:{b:w}' count) $(rcli hget 'rl:{b:x}' count)"
is "batch: a denied request between two on fresh keys: both of those counted" \
	"[1,\"1 2 3 20000 0 1000000 0 60000 3 0 0  \",0,$(row_b 0 0 2 60000 60000),1,$(row_b 1 2 3 60000 0)] 1 1" \
	"$(batch 3 'rl:{b:v1}' 'rl:{b:x}' 'rl:{b:v2}' "" 1000000 'gcra - 1 3 60000  ' 'fixed_window n 1 2 60000  ' \
		'sliding_log n 1 3 60000  ') $(rcli exists 'rl:{b:v1}') $(rcli zcard 'rl:{b:v2}')"
is "batch: one request's bad argument fails that request alone, its rule numbered in it" \
	"[1,$(row_b 1 2 3 60000 0),error:\"rlgate: rule 2 (gcra): cost 5 is above burst 3: such a request could never be admitted\",1,$(row_b 1 1 3 60000 0)]" \
	"$(batch 4 'rl:{be:a}' 'rl:{be:b}' 'rl:{be:c}' 'rl:{be:a}' "" 1000000 'fixed_window - 1 3 60000  ' \
		'fixed_window n 1 3 60000  ' 'gcra - 5 3 60000  ' 'fixed_window n 1 3 60000  ')"
is "batch: the failed request wrote nothing; the others counted once each" "2 0 0" \
	"$(rcli hget 'rl:{be:a}' count) $(rcli exists 'rl:{be:b}') $(rcli exists 'rl:{be:c}')"
is "batch: two requests may share a key, one request's rules may not" \
	"[1,\"1 2 3 334 0 1000000 0 1000 3 0 0  \",error:\"rlgate: rule 2 (gcra): its state key is also rule 1's: each rule needs a key of its own\"]" \
	"$(batch 3 'rl:{bk:a}' 'rl:{bk:a}' 'rl:{bk:a}' "" 1000000 'gcra - 1 3 1000  ' \
		'gcra n 1 3 1000  ' 'gcra - 1 3 1000  ')"
# Overrides and unlimited through decide: flag o takes the key after.
rcli hset 'rl:{ov:a}:override' limit 7 > /dev/null
rcli hset 'rl:{ov:b}:override' unlimited 1 > /dev/null
is "flag o: the override's limit 7; unlimited admits without an undo token" \
	"1 | 1 6 7 143 0 1000000 0 1000 7 0 1 \"\" undo | 1 3 3 0 0 1000000 0 1000 0 0 2 \"\" -" \
	"$(decide 4 'rl:{ov:a}' 'rl:{ov:a}:override' 'rl:{ov:b}' 'rl:{ov:b}:override' "" 1000000 \
		'gcra ou 1 7 1000  ' 'fixed_window uo 1 3 1000  ')"
is "unlimited: nothing written" "0" "$(rcli exists 'rl:{ov:b}')"
rcli hset 'rl:{ov:c}:override' limit 0 > /dev/null
is "an ignored override says why in field 12" \
	"1 | 1 2 3 1000 0 1000000 0 1000 0 100 3 override ignored: limit must be at least 1, got 0 undo" \
	"$(decide 2 'rl:{ov:c}' 'rl:{ov:c}:override' "" 1000000 'sliding_window ou 1 3 1000  ')"

# Errors: one sentence naming the rule; nothing written.
err() { rcli FCALL ${L}_decide "$@" 2>&1; }
is "version mismatch" "rlgate: library version $version is loaded, the caller expects 0123456789abcdef0123456789abcdef01234567" \
	"$(err 1 'rl:{e:v}' 0123456789abcdef0123456789abcdef01234567 1000000 'fixed_window - 1 3 1000  ')"
is "version mismatch: nothing written" "0" "$(rcli exists 'rl:{e:v}')"
is "rule 2's bad argument names it; rule 1 not written" \
	"rlgate: rule 2 (token_bucket): cost 11 is above burst 10: such a request could never be admitted 0" \
	"$(err 2 'rl:{e:1}' 'rl:{e:2}' "$version" 1000000 'fixed_window - 1 3 1000  ' 'token_bucket - 11 10 1000  ') $(rcli exists 'rl:{e:1}')"
is "a missing argument says where it is: its field of the rule's signature" "rlgate: rule 2 (gcra): limit is missing (field 4 of ARGV[4])" \
	"$(err 2 'rl:{e:1}' 'rl:{e:2}' '' 1000000 'fixed_window - 1 3 1000  ' 'gcra - 1  1000  ')"
is "an unknown algorithm" "rlgate: rule 1 (sliding_door): unknown algorithm: use fixed_window, sliding_window, sliding_log, token_bucket, gcra or leaky_bucket" \
	"$(err 1 'rl:{e:1}' '' 1000000 'sliding_door - 1 3 1000  ')"
is "bad flags" "rlgate: rule 1 (gcra): flags must be letters among d (dry run), o (override key), u (undo token) and n (a new request), or - for none, got \"x\"" \
	"$(err 1 'rl:{e:1}' '' 1000000 'gcra x 1 3 1000  ')"
is "too few keys for flag o" "rlgate: rule 1 (gcra): no key left for it: each rule takes its state key, and its override key after it with flag o (1 keys given)" \
	"$(err 1 'rl:{e:1}' '' 1000000 'gcra o 1 3 1000  ')"
is "one key too many" "rlgate: the rules take 1 keys, 2 given" "$(err 2 'rl:{e:1}' 'rl:{e:2}' '' 1000000 'gcra - 1 3 1000  ')"
is "two rules on one key" "rlgate: rule 2 (gcra): its state key is also rule 1's: each rule needs a key of its own" \
	"$(err 2 'rl:{e:1}' 'rl:{e:1}' '' 1000000 'gcra - 1 3 1000  ' 'gcra - 1 3 1000  ')"
is "no VERSION and NOW_US" "rlgate: ${L}_decide takes VERSION, NOW_US and a signature per rule (ALGORITHM FLAGS COST LIMIT WINDOW_MS BURST PRECISION_MS joined by single spaces), got 1 arguments" \
	"$(err 1 'rl:{e:1}' '')"
is "a bad clock" "rlgate: now (microseconds) must be an integer, got \"soon\"" \
	"$(err 1 'rl:{e:1}' '' soon 'gcra - 1 3 1000  ')"
# A rule's signature is one argument, its 7 fields joined by single
# spaces. One of another shape fails the call, naming the rule; the old
# layout, 7 arguments a rule, is such a shape.
SIG_FIELDS='its signature must be 7 fields joined by single spaces (ALGORITHM FLAGS COST LIMIT WINDOW_MS BURST PRECISION_MS)'
is "a signature of 6 fields" "rlgate: rule 2 (gcra): $SIG_FIELDS, got 6: \"gcra_-_1_3_1000_\"" \
	"$(err 2 'rl:{e:1}' 'rl:{e:2}' '' 1000000 'gcra - 1 3 1000  ' 'gcra - 1 3 1000 ')"
is "a signature of 8 fields" "rlgate: rule 1 (fixed_window): $SIG_FIELDS, got 8: \"fixed_window_-_1_3_1000___\"" \
	"$(err 1 'rl:{e:1}' '' 1000000 'fixed_window - 1 3 1000   ')"
is "the old layout, 7 arguments a rule: the first is a signature of 1 field" "rlgate: rule 1 (gcra): $SIG_FIELDS, got 1: \"gcra\"" \
	"$(err 1 'rl:{e:1}' '' 1000000 gcra - 1 3 1000 '' '')"
is "a signature that is not a number where one is due: the argument's sentence" \
	"rlgate: rule 1 (gcra): limit must be an integer, got \"ten\"" "$(err 1 'rl:{e:1}' '' 1000000 'gcra - 1 ten 1000  ')"
# A signature that failed is not kept: the same error each time, before
# and after a good one of the same rule was kept, nothing written.
bad_sig() { err 2 'rl:{e:1}' 'rl:{e:2}' '' 1000000 'fixed_window - 1 3 1000  ' 'token_bucket - 11 10 1000  '; }
bad_once=$(bad_sig)
is "a bad signature, seen once: its error" "rlgate: rule 2 (token_bucket): cost 11 is above burst 10: such a request could never be admitted" "$bad_once"
is "... the second time: the same error" "$bad_once" "$(bad_sig)"
is "... a good one of the same rule is admitted (limit 10, cost 10)" "1 | 1 0 10 1000 0 1000000 0 1000 10 0 0 \"\" -" \
	"$(decide 1 'rl:{e:good}' '' 1000000 'token_bucket - 10 10 1000  ')"
is "... the third time, after it: the same error" "$bad_once" "$(bad_sig)"
# (An hour's window: with the clock given, its TTL is the window less 1 s,
# real time the second call must come within.)
is "... in a batch, an error for its request each time, the other request counted" \
	"[error:\"rlgate: rule 1 (token_bucket): cost 11 is above burst 10: such a request could never be admitted\",1,\"1 0 1 3600000 0 1000000 0 3600000 0 0 0  \"]" \
	"$(batch 2 'rl:{e:1}' 'rl:{e:b2}' '' 1000000 'token_bucket - 11 10 1000  ' 'fixed_window n 1 1 3600000  ')"
is "... again: the same error, the other request now denied" \
	"[error:\"rlgate: rule 1 (token_bucket): cost 11 is above burst 10: such a request could never be admitted\",0,\"0 0 1 3600000 3600000 1000000 0 3600000 0 0 0  \"]" \
	"$(batch 2 'rl:{e:1}' 'rl:{e:b2}' '' 1000000 'token_bucket - 11 10 1000  ' 'fixed_window n 1 1 3600000  ')"
is "a bad flag, seen twice: the call's error each time" "2" \
	"$(for i in 1 2; do err 1 'rl:{e:1}' '' 1000000 'gcra x 1 3 1000  '; done | grep -c '^rlgate: rule 1 (gcra): flags must be letters')"
is "after all these errors no key was written" "0" "$(rcli exists 'rl:{e:1}' 'rl:{e:2}')"
# Signatures that differ in one field are two rules to the kept table:
# each row its own parameters, the first call (both parsed) and the second
# (both found kept). token_bucket 10 per 1000 ms, burst 5, cost 1: 4 left,
# full again in 100 ms; then burst 6, cost 2, limit 11 (a token each 90.9
# ms), a window of 2000 ms; sliding_window precision 100 and 200 ms.
sig_pairs() { decide_kept 7 'rl:{sig:1}' 'rl:{sig:2}' 'rl:{sig:3}' 'rl:{sig:4}' 'rl:{sig:5}' 'rl:{sig:6}' 'rl:{sig:7}' '' "$1" \
	'token_bucket - 1 10 1000 5 ' 'token_bucket - 1 10 1000 6 ' 'token_bucket - 2 10 1000 5 ' \
	'token_bucket - 1 11 1000 5 ' 'token_bucket - 1 10 2000 5 ' 'sliding_window - 1 10 1000  100' \
	'sliding_window - 1 10 1000  200' | sed 's/ | /\n/g'; }
is "signatures one field apart, parsed: each its own parameters" \
"1
1 4 10 100 0 1000000 0 1000 5 0 0 \"\" -
1 5 10 100 0 1000000 0 1000 6 0 0 \"\" -
1 3 10 200 0 1000000 0 1000 5 0 0 \"\" -
1 4 11 91 0 1000000 0 1000 5 0 0 \"\" -
1 4 10 200 0 1000000 0 2000 5 0 0 \"\" -
1 9 10 1000 0 1000000 0 1000 0 100 0 \"\" -
1 9 10 1000 0 1000000 0 1000 0 200 0 \"\" -" "$(sig_pairs 1000000)"
is "... kept: the same parameters, each count one more" \
"1
1 3 10 200 0 1000000 0 1000 5 0 0 \"\" -
1 4 10 200 0 1000000 0 1000 6 0 0 \"\" -
1 1 10 400 0 1000000 0 1000 5 0 0 \"\" -
1 3 11 182 0 1000000 0 1000 5 0 0 \"\" -
1 3 10 400 0 1000000 0 2000 5 0 0 \"\" -
1 8 10 1000 0 1000000 0 1000 0 100 0 \"\" -
1 8 10 1000 0 1000000 0 1000 0 200 0 \"\" -" "$(sig_pairs 1000000)"
# An hour's window: with the clock given, a key's TTL is the window less
# that clock (gcra's a tenth of it), real time that must outlast the calls.
is "one field apart in the algorithm: fixed_window's state (a hash), gcra's (a string)" "hash string" \
	"$(decide 2 'rl:{sig:fw}' 'rl:{sig:gc}' '' 1000000 'fixed_window - 1 10 3600000  ' 'gcra - 1 10 3600000  ' > /dev/null
	   rcli type 'rl:{sig:fw}') $(rcli type 'rl:{sig:gc}')"
is "one field apart in the flags: the dry rule's denial blocks nothing, the other's does" "1 0" \
	"$(decide 1 'rl:{sig:d}' '' 1000000 'fixed_window - 1 1 3600000  ' > /dev/null
	   decide 1 'rl:{sig:d}' '' 1000000 'fixed_window d 1 1 3600000  ' | cut -c1) $(decide 1 'rl:{sig:d}' '' 1000000 'fixed_window - 1 1 3600000  ' | cut -c1)"

# The library keeps the arguments it parsed (params_of), at most 4096 sets:
# 30000 different limits leave its memory about as 4096 do (each set kept
# costs about 700 bytes: 30000 kept would take over 20 MB).
vm_mem() { rcli info memory | tr -d '\r' | sed -n 's/^used_memory_vm_functions:\(.*\)/\1/p'; }
m0=$(vm_mem)
awk -v f="${L}_decide" 'BEGIN { for (i = 1; i <= 30000; i++) printf "FCALL " f " 1 rl:{kept} \"\" 1000000 \"fixed_window - 1 %d 60000  \"\n", i }' |
	rcli > "$T/kept.out"
m1=$(vm_mem)
is "30000 argument sets: 30000 replies of 2 lines, no error" "60000 0" \
	"$(wc -l < "$T/kept.out") $(grep -c rlgate: "$T/kept.out")"
check "30000 argument sets: the library's memory grew by less than 8 MB ($((m1 - m0)) bytes)" [ $((m1 - m0)) -lt 8000000 ]

# fixed_window with Redis's clock: an admission in the window the key holds
# writes only its count; the TTL its opening set (PEXPIRETIME: 1 or 2 ms
# after the window's last millisecond) still ends the window. A changed
# window length, a removed TTL or a start written otherwise is rewritten as
# before. (lua_check's virtual clock and PERSIST take the other path.)
fwk='rl:{fast:fw}'
fw_fast() { decide 1 "$fwk" '' '' "fixed_window ${1:--} 2 100 60000  "; }
cmd_calls() { rcli info commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:calls=\([0-9]*\).*/\1/p"; }
# timed CMD...: runs CMD and sets SPAN_MS to the ms of Redis's clock it took,
# rounded up: a PEXPIRE in a call may read the clock that much later than
# the call's TIME did (a server preempted mid-call).
redis_us() { rcli time | tr -d '\r' | paste -sd' ' | awk '{ printf "%d%06d\n", $1, $2 }'; }
timed() {
	local t0
	t0=$(redis_us)
	"$@" > /dev/null
	SPAN_MS=$(( ($(redis_us) - t0 + 999) / 1000 ))
}
# window_end_ok WINDOW_MS: PEXPIRETIME is the last ms of [start, start +
# window) + 1 or + 2, as PEXPIRE reset_ms + 1 puts it, or up to SPAN_MS
# (timed) later: never before the window's end.
window_end_ok() {
	local start at last
	start=$(rcli hget "$fwk" start) at=$(rcli pexpiretime "$fwk")
	last=$(( (start + $1 * 1000 - 1) / 1000 ))
	[ "$at" -ge $((last + 1)) ] && [ "$at" -le $((last + 2 + SPAN_MS)) ] ||
		{ echo "# start $start, window $1 ms: PEXPIRETIME $at, last ms $last, calls took $SPAN_MS ms"; return 1; }
}
fw_twenty() { for i in $(seq 20); do out="$out$(fw_fast | cut -d' ' -f3,4);"; done; }
fw_second() { for i in 1 2 3; do decide 1 "$fwk" '' '' 'fixed_window - 1 100 5000  '; sleep 0.2; done; }
rcli config resetstat > /dev/null
out=
timed fw_twenty
is "fixed_window, Redis's clock: 20 admissions of cost 2, remaining exact" \
	"1 98;1 96;1 94;1 92;1 90;1 88;1 86;1 84;1 82;1 80;1 78;1 76;1 74;1 72;1 70;1 68;1 66;1 64;1 62;1 60;" "$out"
is "... the count is exactly 40" "40" "$(rcli hget "$fwk" count)"
is "... 20 HSET, 19 PEXPIRETIME" "20 19" "$(cmd_calls hset) $(cmd_calls pexpiretime)"
# One PEXPIRE, the opening's; a second only when Redis's clock passed 2 ms
# between a call's TIME and its PEXPIRE (a server preempted mid-call).
check "... one PEXPIRE (the opening), at most two" test "$(cmd_calls pexpire)" -le 2
check "... the TTL still ends when the window closes" window_end_ok 60000
tok=$(rcli FCALL ${L}_decide 1 "$fwk" '' '' 'fixed_window u 2 100 60000  ' | sed -n 2p | cut -d' ' -f12)
at=$(rcli pexpiretime "$fwk")
is "... undo of an admission in the window: count 40 again, TTL untouched" "1 40 $at" \
	"$(rcli FCALL ${L}_undo 1 "$fwk" '' fixed_window "$tok") $(rcli hget "$fwk" count) $(rcli pexpiretime "$fwk")"
rcli hset 'rl:{fast:fw}:override' window_ms 120000 > /dev/null
timed decide 2 "$fwk" 'rl:{fast:fw}:override' '' '' 'fixed_window o 2 100 60000  '
check "a longer window (override): the same window, its TTL moved to its new end" window_end_ok 120000
is "... the count kept: 42" "42" "$(rcli hget "$fwk" count)"
rcli del 'rl:{fast:fw}:override' > /dev/null
timed fw_fast
check "the override removed: the TTL back at the 60 s window's end" window_end_ok 60000
rcli persist "$fwk" > /dev/null
timed fw_fast
check "a key whose TTL was removed gets it back at the next admission" window_end_ok 60000
start=$(rcli hget "$fwk" start)
rcli hset "$fwk" start "0$start" > /dev/null
fw_fast > /dev/null
is "a start written with a leading 0: the same window, the start rewritten as the library writes it" \
	"$start 48" "$(rcli hget "$fwk" start) $(rcli hget "$fwk" count)"
# Real expiry: a 5 s window (a loaded machine's calls and checks fit in
# it), admissions in it, the key gone once Redis's clock passes its end.
rcli del "$fwk" > /dev/null
timed fw_second
is "a 5 s window, 3 admissions 200 ms apart: count 3" "3" "$(rcli hget "$fwk" count)"
check "... and its TTL ends with the window" window_end_ok 5000
at=$(rcli pexpiretime "$fwk")
past() { [ "$(( $(redis_us) / 1000 ))" -gt "$1" ]; }
check "... Redis's clock passes the window's end" wait_for 10 past "$at"
is "... the key is gone when the window closed" "0" "$(rcli exists "$fwk")"

# sliding_log with Redis's clock: an admission reads the members of its
# microsecond (ZCOUNT now now) only when the newest logged one is at or
# after now, which one call's TIME almost never meets: 10 admissions, 10
# ZCOUNTs (the check's), and 10 members. Two requests of one batch on one
# key share now: the second finds the first's member and takes seq 1.
slk='rl:{fast:sl}'
rcli config resetstat > /dev/null
for i in $(seq 10); do decide 1 "$slk" '' '' 'sliding_log - 1 100 60000  ' > /dev/null; done
is "sliding_log, Redis's clock: 10 admissions, 10 ZCOUNT, 10 members" "10 10" \
	"$(redis_calls zcount) $(rcli zcard "$slk")"
rcli del "$slk" > /dev/null
decide 1 "$slk" '' '' 'sliding_log - 1 100 60000  ' > /dev/null
out=$(rcli FCALL ${L}_decide 2 "$slk" "$slk" '' '' 'sliding_log - 2 100 60000  ' \
	'sliding_log n 1 100 60000  ' | cut -d' ' -f1,2 | paste -sd';')
now=$(rcli zrange "$slk" -1 -1 withscores | tail -1)
is "... a batch of two requests on it: both counted (97, then 96 left)" "1;1 97;1;1 96" "$out"
is "... its members at one now: seq 0, 1 (cost 2), then 2" "$now:0 $now:1 $now:2" \
	"$(rcli zrangebyscore "$slk" "$now" "$now" | sort | paste -sd' ')"
is "... 4 members in all" "4" "$(rcli zcard "$slk")"

# 4. LIB_undo, per algorithm: a request decided then undone leaves the
# same state as one never sent: the same replies afterwards as a twin key.
# (Randomised: lua_check decide.) Here 10 per 100 s: one extra request of
# cost 3 at 1.5 s, undone at 2.5 s, then cost 2 at 3 s and at 33 s.
undo_case() {
	local alg=$1 prec=$2 burst=$3 x="rl:{undo:$1:x}" y="rl:{undo:$1:y}" tok out_x out_y t k
	for k in "$x" "$y"; do decide 1 "$k" '' 1000000 "$alg - 2 10 100000 $burst $prec" > /dev/null; done
	tok=$(rcli FCALL ${L}_decide 1 "$x" '' 1500000 "$alg u 3 10 100000 $burst $prec" | sed -n 2p | cut -d' ' -f12)
	check "$alg: the counted request has an undo token ($tok)" [ -n "$tok" ]
	is "$alg: ${L}_undo takes it back: 1 rule" "1" "$(rcli FCALL ${L}_undo 1 "$x" 2500000 "$alg" "$tok")"
	out_x= out_y=
	for t in 3000000 3000000 3000000 3000000 3000000 33000000 33000000 33000000 33000000; do
		out_x="$out_x$(decide 1 "$x" '' $t "$alg - 2 10 100000 $burst $prec" | cut -d' ' -f1-9);"
		out_y="$out_y$(decide 1 "$y" '' $t "$alg - 2 10 100000 $burst $prec" | cut -d' ' -f1-9);"
	done
	is "$alg: after the undo, the same decisions as a twin never sent the request" "$out_y" "$out_x"
	check "$alg: ... and some were denied ($out_y)" [ "${out_y#*0 | 0}" != "$out_y" ]
	is "$alg: the token of an uncounted rule (\"\") is skipped" "0" "$(rcli FCALL ${L}_undo 1 "$x" 34000000 "$alg" '')"
}
undo_case fixed_window '' ''
undo_case sliding_window 10000 ''
undo_case sliding_log '' ''
undo_case token_bucket '' ''
undo_case gcra '' ''
undo_case leaky_bucket '' 3
is "undo: a token of another algorithm is an error" \
	"rlgate: rule 1 (gcra): undo token \"5_3\" is not one ${L}_decide gives for this algorithm" \
	"$(rcli FCALL ${L}_undo 1 'rl:{undo:gcra:x}' '' gcra '5:3' 2>&1)"
is "undo: keys and arguments must match" \
	"rlgate: ${L}_undo takes one key and 2 arguments per rule (ALGORITHM UNDO) after NOW_US: 2 keys and 3 arguments given" \
	"$(rcli FCALL ${L}_undo 2 a b '' gcra '' 2>&1)"
# Never more than is there: a gcra request undone after its time has passed
# takes nothing; a fixed_window token of a closed window touches nothing
# (an hour's window, so that the new one's key outlasts the calls).
rcli FCALL ${L}_fixed_window 1 'rl:{undo:late}' 1000000 1 3 3600000 > /dev/null
tok=$(rcli FCALL ${L}_decide 1 'rl:{undo:late}' '' 1000000 'fixed_window u 1 3 3600000  ' | sed -n 2p | cut -d' ' -f12)
rcli FCALL ${L}_fixed_window 1 'rl:{undo:late}' 3601000000 1 3 3600000 > /dev/null
is "fixed_window: undo after its window closed: nothing taken from the new window" "0 1" \
	"$(rcli FCALL ${L}_undo 1 'rl:{undo:late}' 3601000000 fixed_window "$tok") $(rcli hget 'rl:{undo:late}' count)"
tok=$(rcli FCALL ${L}_decide 1 'rl:{undo:lateg}' '' 1000000 'gcra u 1 10 1000  ' | sed -n 2p | cut -d' ' -f12)
is "gcra: undo once the bucket refilled: nothing" "0" "$(rcli FCALL ${L}_undo 1 'rl:{undo:lateg}' 1100000 gcra "$tok")"

# LIB_acl: the commands of decide.lua's CALLS are every command the
# library runs; it names those the caller's ACL user may not run on a key.
runs=$(cat "$TOP"/lua/*.lua | grep -v '^[[:space:]]*--' | grep -o "redis\.p\{0,1\}call('[A-Za-z]*'" | sed "s/.*('//; s/'//" | tr a-z A-Z | sort -u | paste -sd' ')
calls=$(sed -n '/^local CALLS = /,/}}$/p' "$TOP/lua/decide.lua" | grep -o "{'[A-Z]*'" | tr -d "{'" | sort -u | paste -sd' ')
check "the library runs commands ($runs)" [ "$(echo $runs | wc -w)" -ge 15 ]
is "CALLS lists every command the library runs" "$runs" "$calls"
is "${L}_acl: the default user may run all of them" "" "$(rcli FCALL_RO "${L}_acl" 0 'rl:{acl}')"
rcli ACL SETUSER acltest on '>pw' '~rl:*' -@all +fcall_ro +@read +@write -time -hincrby > /dev/null
is "${L}_acl: a user without TIME and HINCRBY" "TIME HINCRBY" \
	"$(redis-cli -p "$REDIS_PORT" --user acltest --pass pw --no-auth-warning FCALL_RO "${L}_acl" 0 'rl:{acl}')"
is "${L}_acl: a key outside the user's pattern: none of them" "$(echo $calls | wc -w)" \
	"$(redis-cli -p "$REDIS_PORT" --user acltest --pass pw --no-auth-warning FCALL_RO "${L}_acl" 0 'other' | wc -w)"

# 5. The prelude holds what the algorithms share: no algorithm (nor
# decide.lua) defines a function or a top-level local of the prelude again.
prelude_names() { sed -n 's/^local function \([a-z_]*\).*/\1/p; s/^local \([a-zA-Z_, ]*\) =.*/\1/p' "$TOP/lua/prelude.lua" | tr ',' '\n' | tr -d ' ' | sort -u; }
names=$(prelude_names)
check "the prelude's names are found ($(echo $names | wc -w): $(echo $names))" [ "$(echo $names | wc -w)" -ge 20 ]
redefined=
for f in "$TOP"/lua/*.lua; do
	case $f in */prelude.lua|*/rlgate.lua) continue ;; esac
	for n in $names; do
		grep -qE "^[[:space:]]*(local[[:space:]]+function[[:space:]]+$n[[:space:]]*\(|local[[:space:]]+([a-zA-Z_]+,[[:space:]]*)*$n([[:space:]]*,[^=]*)?[[:space:]]*=|function[[:space:]]+$n[[:space:]]*\()" "$f" &&
			redefined="$redefined $(basename "$f"):$n"
	done
done
is "no algorithm redefines a prelude function or constant" "" "$redefined"
# The check finds a redefinition (a copy of fdiv in an algorithm).
mkdir -p "$T/lua_copy"
{ echo 'local function fdiv(a, b) return a / b end'; cat "$TOP/lua/gcra.lua"; } > "$T/lua_copy/gcra.lua"
check "the check sees a copy of fdiv" grep -qE "^[[:space:]]*local[[:space:]]+function[[:space:]]+fdiv[[:space:]]*\(" "$T/lua_copy/gcra.lua"

finish
