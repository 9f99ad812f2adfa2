#!/bin/bash
# Benchmark of the rlgate Lua library (lua/) on a private redis-server (a benchmark,
# never a pass/fail test): decisions per second with redis-benchmark (keys
# spread over 100000 clients, and one hot key that is mostly denied), the
# server's CPU time per decision (INFO commandstats), memory per idle key
# (MEMORY USAGE and used_memory over 100000 keys), and how fast idle keys
# expire. BENCH_N=requests per run (default 200000), BENCH_C=clients (50).
. "$(dirname "$0")/../lib.sh"

N=${BENCH_N:-200000}
C=${BENCH_C:-50}
KEYS_N=100000
ALGS="fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket"

if [ -x "$TOP/tests/tools/freeport" ]; then FREEPORT=$TOP/tests/tools/freeport; else
	cc -o "$T/freeport" "$TOP/tests/tools/freeport.c" || exit 1
	FREEPORT=$T/freeport
fi
start_redis || exit 1

info_field() { rcli info "$1" | tr -d '\r' | sed -n "s/^$2:\(.*\)/\1/p"; }
usec_per_call() { rcli info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\(evalsha\|fcall\):.*usec_per_call=\([0-9.]*\).*/\2/p'; }

# bench COMMAND...: prints "rps p50_ms usec_per_call"
bench() {
	local csv rps p50
	rcli config resetstat > /dev/null
	csv=$(redis-benchmark -p "$REDIS_PORT" -n "$N" -c "$C" -r "$KEYS_N" --csv \
		"$@" 2>/dev/null | tail -1)
	rps=$(echo "$csv" | awk -F'","' '{print $2}')
	p50=$(echo "$csv" | awk -F'","' '{print $5}')
	printf '%10.0f %8s %8s\n' "$rps" "$p50" "$(usec_per_call)"
}

# The parameters of each row: limit 100 per second, cost 1, burst = limit.
args_for() {
	case $1 in
	sliding_window) echo "'' 1 100 1000 '' 100";;
	*) echo "'' 1 100 1000 '' ''";;
	esac
}

echo "# rlgate Lua library on redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# redis-benchmark -n $N -c $C, FCALL with NOW_US empty (Redis TIME), limit 100 per 1 s"
echo
printf '%-16s %10s %8s %8s   %10s %8s %8s\n' "" "spread" "" "" "hot key" "" ""
printf '%-16s %10s %8s %8s   %10s %8s %8s\n' "script" "decisions/s" "p50 ms" "us/call" "decisions/s" "p50 ms" "us/call"
floor=$(rcli script load "return {1, 0, 100, 0, 0, 0, 0}")
printf '%-16s %s   %s\n' "(return only)" "$(bench EVALSHA "$floor" 1 'rl:{b:__rand_int__}' '' 1 100 1000 '' '')" \
	"$(bench EVALSHA "$floor" 1 'rl:{b:hot}' '' 1 100 1000 '' '')"
# The same Redis commands as fixed_window, without its logic: the floor of
# a script that reads TIME and a hash and writes it with a TTL.
floor=$(rcli script load "local t = redis.call('TIME')
local h = redis.call('HMGET', KEYS[1], 'start', 'count')
redis.call('HSET', KEYS[1], 'start', t[1], 'count', 1)
redis.call('PEXPIRE', KEYS[1], 1000)
return {1, 0, 100, 0, 0, 0, 0}")
printf '%-16s %s   %s\n' "(4 commands)" "$(bench EVALSHA "$floor" 1 'rl:{b:__rand_int__}' '' 1 100 1000 '' '')" \
	"$(bench EVALSHA "$floor" 1 'rl:{b:hot}' '' 1 100 1000 '' '')"
rcli flushall > /dev/null
# shellcheck disable=SC2046
sh "$TOP/fcgi/embed.sh" -l "$TOP/lua/prelude.lua" $(ls "$TOP"/lua/*.lua | grep -v -e /prelude.lua -e /decide.lua -e /rlgate.lua | sort) \
	"$TOP/lua/decide.lua" > "$T/rlgate.lua" || exit 1
L=$(sed -n '1s/^#!lua name=//p' "$T/rlgate.lua")	# the functions' prefix
rcli -x function load replace < "$T/rlgate.lua" > /dev/null || exit 1
for alg in $ALGS; do
	eval "set -- $(args_for "$alg")"
	spread=$(bench FCALL "${L}_$alg" 1 "rl:{$alg:__rand_int__}" "$@")
	hot=$(bench FCALL "${L}_$alg" 1 "rl:{$alg:hot}" "$@")
	printf '%-16s %s   %s\n' "$alg" "$spread" "$hot"
	rcli flushall > /dev/null
done
# rlgate_decide: one rule, and three (fixed_window, token_bucket, gcra) in one
# call; each rule one argument, its signature.
one="'fixed_window - 1 100 1000  '"
three="$one 'token_bucket - 1 100 1000  ' 'gcra - 1 100 1000  '"
eval "set -- $one"
printf '%-16s %s   %s\n' "decide, 1 rule" "$(bench FCALL "${L}_decide" 1 'rl:{d:__rand_int__}' '' '' "$@")" \
	"$(bench FCALL "${L}_decide" 1 'rl:{d:hot}' '' '' "$@")"
rcli flushall > /dev/null
eval "set -- $three"
printf '%-16s %s   %s\n' "decide, 3 rules" \
	"$(bench FCALL "${L}_decide" 3 'rl:{d1:__rand_int__}' 'rl:{d2:__rand_int__}' 'rl:{d3:__rand_int__}' '' '' "$@")" \
	"$(bench FCALL "${L}_decide" 3 'rl:{d1:hot}' 'rl:{d2:hot}' 'rl:{d3:hot}' '' '' "$@")"
rcli flushall > /dev/null

# Memory per idle key: 100000 keys "rl:{user_list:N}" written with one
# decision each, through redis-cli --pipe. Parameters: limit 100 per 60 s;
# the buckets take cost 100 (emptied) so their keys also live 60 s.
resp() {	# resp ARG...: one command in RESP
	local a
	printf '*%d\r\n' "$#"
	for a in "$@"; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
}
gen() {	# gen FUNCTION COST WINDOW PRECISION: KEYS_N decisions in RESP
	awk -v fn="$1" -v cost="$2" -v win="$3" -v prec="$4" -v n="$KEYS_N" 'BEGIN {
		for (i = 0; i < n; i++) {
			k = "rl:{user_list:" i "}"
			printf "*10\r\n$5\r\nFCALL\r\n$%d\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n$0\r\n\r\n$%d\r\n%s\r\n$3\r\n100\r\n$%d\r\n%s\r\n$0\r\n\r\n$%d\r\n%s\r\n",
			    length(fn), fn, length(k), k, length(cost), cost, length(win), win, length(prec), prec
		}
	}'
}
echo
echo "# memory: $KEYS_N keys rl:{user_list:N}, one decision each, limit 100 per 60 s"
printf '%-16s %-34s %14s %14s %12s\n' "script" "value after one decision" "MEMORY USAGE" "used_memory/key" "full key"
for alg in $ALGS; do
	rcli flushall > /dev/null
	sha=${L}_$alg
	case $alg in token_bucket|gcra|leaky_bucket) cost=100;; *) cost=1;; esac
	prec=; [ "$alg" = sliding_window ] && prec=6000
	rcli memory purge > /dev/null
	before=$(info_field memory used_memory)
	gen "$sha" "$cost" 60000 "$prec" | rcli --pipe > /dev/null
	after=$(info_field memory used_memory)
	n=$(rcli dbsize)
	usage=$(rcli memory usage 'rl:{user_list:0}' samples 0)
	case $(rcli type 'rl:{user_list:0}') in
	string) value=$(rcli get 'rl:{user_list:0}');;
	hash) value=$(rcli hgetall 'rl:{user_list:0}' | paste -sd' ');;
	zset) value=$(rcli zrange 'rl:{user_list:0}' 0 -1 withscores | paste -sd' ');;
	esac
	# A key at its limit: 100 admissions (sliding_log: 100 members;
	# sliding_window: 10 blocks of 10).
	full=-
	case $alg in
	sliding_log)
		for i in $(seq 0 99); do resp FCALL "$sha" 1 'rl:{full}' "$((1700000000000000 + i * 600000))" 1 100 60000 '' ''; done \
			| rcli --pipe > /dev/null
		full=$(rcli memory usage 'rl:{full}' samples 0);;
	sliding_window)
		for i in $(seq 0 99); do resp FCALL "$sha" 1 'rl:{full}' "$((1700000000000000 + i * 600000))" 1 100 60000 '' ''; done \
			| rcli --pipe > /dev/null
		full=$(rcli memory usage 'rl:{full}' samples 0);;
	esac
	printf '%-16s %-34.34s %14s %14s %12s\n' "$alg" "$value" "$usage" \
		"$(( (after - before) / n ))" "$full"
done
# The value with a rate that is not a whole number of microseconds per token
# (7 per second), written and read in one redis-cli session.
rcli flushall > /dev/null
now=$(rcli time | paste -sd' ' | awk '{ printf "%d%06d", $1, $2 }')
tb=${L}_token_bucket
gc=${L}_gcra
printf '%s\n' \
	"FCALL $tb 1 rl:{frac:tb} $now 7 7 1000 \"\" \"\"" \
	"FCALL $tb 1 rl:{frac:tb} $((now + 200000)) 1 7 1000 \"\" \"\"" \
	"HGETALL rl:{frac:tb}" "MEMORY USAGE rl:{frac:tb} SAMPLES 0" \
	"FCALL $gc 1 rl:{frac:gcra} $now 3 7 1000 \"\" \"\"" \
	"GET rl:{frac:gcra}" "MEMORY USAGE rl:{frac:gcra} SAMPLES 0" |
	rcli > "$T/frac.out"
echo "# 7 per second (not a whole number of us per token):" \
	"token_bucket after 1.4 - 1 tokens: $(sed -n '15,18p' "$T/frac.out" | paste -sd' '), MEMORY USAGE $(sed -n 19p "$T/frac.out");" \
	"gcra after cost 3: $(sed -n 27p "$T/frac.out"), MEMORY USAGE $(sed -n 28p "$T/frac.out")"

# Expiry: 100000 keys whose TTL is about 1 s; time until Redis has removed
# them all (active expiry; nobody reads them).
echo
echo "# expiry: $KEYS_N idle keys, limit 100 per 1 s (buckets: cost 100), TTL about 1 s"
printf '%-16s %14s %22s\n' "script" "PTTL left (ms)" "all gone after (s)"
for alg in $ALGS; do
	rcli flushall > /dev/null
	sha=${L}_$alg
	case $alg in token_bucket|gcra|leaky_bucket) cost=100;; *) cost=1;; esac
	prec=; [ "$alg" = sliding_window ] && prec=100
	gen "$sha" "$cost" 1000 "$prec" | rcli --pipe > /dev/null
	t0=$(date +%s.%N)
	ttl=$(rcli pttl "rl:{user_list:$((KEYS_N - 1))}")
	while [ "$(rcli dbsize)" != 0 ]; do sleep 0.05; done
	t1=$(date +%s.%N)
	printf '%-16s %14s %22.2f\n' "$alg" "$ttl" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
done
