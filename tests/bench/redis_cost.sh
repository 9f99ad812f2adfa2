#!/bin/bash
# redis_cost.sh: the instructions redis-server executes per call of rlgate's
# Lua library and of the probes that split that cost (issue 27), counted by
# callgrind. Instructions, not seconds: the same on a busy machine as on an
# idle one, and repeatable, so a change to lua/ can be measured before and
# after on this 2-core machine. Kernel time (the socket's read and write)
# is not in it: PING's figure is the user-space part of a round trip.
#
# Each figure is the difference of two runs (1000 and 6000 calls, keys
# over 1000 values) divided by 5000, so that start-up and loading cancel.
# One connection and hz 1: with several, or with Redis's timers at their
# usual 10 a second, what a call costs moved by some per cent with the
# machine's load (how many calls one wake-up found, how many timer runs a
# slower run took). About 40 s a row under valgrind.
#
# CPU=1: Redis's CPU time a call instead, in us (user and kernel: the
# socket's reads and writes included, as make bench counts it), from a
# redis-server run natively under redis-benchmark with CLIENTS connections
# (50, as make bench) and CALLS calls (200000), the median of 3 runs. Here
# what a call costs depends on how many calls one wake-up finds, as in a
# deployment: a measure of the kernel's part, not a repeatable count.
#
# Usage: tests/bench/redis_cost.sh [ROW...]   (default: every row)
# RLGATE_LUA=file: another build's library (make lua/rlgate.lua there).
# REDIS_SERVER=path: another redis-server, e.g. one built from source with
# symbols, to read the split by function with callgrind_annotate on the
# cg.out files that KEEP=1 leaves in the run's directory.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/../lib.sh"

SERVER=${REDIS_SERVER:-redis-server}
LIB=${RLGATE_LUA:-$TOP/lua/rlgate.lua}
FASTIFY="local c=redis.call('INCR',KEYS[1]) if c==1 then redis.call('PEXPIRE',KEYS[1],ARGV[1]) return {c,tonumber(ARGV[1])} end return {c, redis.call('PTTL',KEYS[1])}"
FASTIFY_SHA=$(printf '%s' "$FASTIFY" | sha1sum | cut -c1-40)
CPU=${CPU:-0}
[ "$CPU" = 1 ] || command -v valgrind >/dev/null ||
    { echo "redis_cost: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
[ -n "${RLGATE_LUA:-}" ] || make -s -C "$TOP" lua/rlgate.lua || exit 1
# Without freeport every server and client below would go to the default
# port (6379): whatever Redis listens there, not one of this script's.
make -s -C "$TOP" tests/tools/freeport || exit 1
FN=$(sed -n '1s/^#!lua name=//p' "$LIB")	# the library's name: its functions' prefix

# The probes: what a bare call, a reply and each redis.call cost.
cat > "$T/probe.lua" <<'EOF'
#!lua name=rlgate_probe
redis.register_function('p_nop', function() return 1 end)
redis.register_function('p_time', function() redis.call('TIME') return 1 end)
redis.register_function('p_get', function(k) redis.call('GET', k[1]) return 1 end)
redis.register_function('p_hmget', function(k) redis.call('HMGET', k[1], 'start', 'count') return 1 end)
redis.register_function('p_hset', function(k) redis.call('HSET', k[1], 'count', '12') return 1 end)
redis.register_function('p_hmget3', function(k) redis.call('HMGET', k[1], 'start', 'count', 'w') return 1 end)
redis.register_function('p_pexpiretime', function(k) redis.call('PEXPIRETIME', k[1]) return 1 end)
redis.register_function('p_set_px', function(k) redis.call('SET', k[1], '1795730692424132', 'PX', '100000') return 1 end)
redis.register_function('p_reply13', function() return {1, 999, 1000, 1000, 0, 1795730692424132, 0, 1000, 0, 0, 0, '', ''} end)
-- The floor of a decision under rlgate's contract, with no checks and no
-- algorithm: per request of one rule (1 argument, its signature), one read and one write
-- of its state and a row of 13 fields; one TIME per call. What any library
-- keeping the contract pays at least, whatever its Lua.
redis.register_function('p_floor', function(k, a)
	local t = redis.call('TIME')
	local out, o = {}, 0
	for i = 1, #k do
		local h = redis.call('HMGET', k[i], 'start', 'count')
		redis.call('HSET', k[i], 'count', '12')
		out[o + 1] = 1
		out[o + 2] = {1, 999, 1000, 1000, 0, t[1], 0, 1000, 0, 0, 0, '', ''}
		o = o + 2
	end
	return out
end)
-- The same with a row of one string instead of 13 fields (a compact reply,
-- before any cost of building it).
redis.register_function('p_floor_c', function(k, a)
	local t = redis.call('TIME')
	local out, o = {}, 0
	for i = 1, #k do
		local h = redis.call('HMGET', k[i], 'start', 'count')
		redis.call('HSET', k[i], 'count', '12')
		out[o + 1] = 1
		out[o + 2] = '1 999 1000 1000 0 1795730692424132 0 1000 0 0 0'
		o = o + 2
	end
	return out
end)
EOF

# serve DIR [WRAPPER...]: a redis-server in DIR (under WRAPPER: valgrind)
# on a free port, with the library, the probes and fastify's script
# loaded; sets PORT and PID.
serve() {
	local d=$1 i
	shift
	PORT=$("$TOP/tests/tools/freeport")
	"$@" "$SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --hz 1 \
	    --dir "$d" > "$d/log" 2>&1 &
	PID=$!
	PIDS+=("$PID")	# lib.sh's cleanup stops it if this script is cut short
	for i in $(seq 150); do redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.2; done
	redis-cli -p "$PORT" -x FUNCTION LOAD REPLACE < "$LIB" > /dev/null
	redis-cli -p "$PORT" -x FUNCTION LOAD REPLACE < "$T/probe.lua" > /dev/null
	redis-cli -p "$PORT" SCRIPT LOAD "$FASTIFY" > /dev/null
}
unserve() { redis-cli -p "$PORT" shutdown nosave > /dev/null 2>&1; wait "$PID"; }

# instr N ARGS...: total instructions of a redis-server that served N calls.
instr() {
	local n=$1 d
	shift
	d=$(mktemp -d "$T/run.XXXXXX")
	serve "$d" valgrind --tool=callgrind --callgrind-out-file="$d/cg.out"
	redis-benchmark -p "$PORT" -c 1 -n "$n" -r 1000 --csv "$@" > "$d/bench" 2>&1
	unserve
	awk '/^summary:/ { print $2 }' "$d/cg.out"
}

# cpu_us ARGS...: Redis's CPU time per call (us) over CALLS calls of ARGS
# from CLIENTS connections (CPU=1).
cpu_us() {
	local d t0
	d=$(mktemp -d "$T/run.XXXXXX")
	serve "$d"
	t0=$(cpu_ns "$PID")
	redis-benchmark -p "$PORT" -c "${CLIENTS:-50}" -n "${CALLS:-200000}" -r 1000 --csv "$@" \
	    > "$d/bench" 2>&1
	per_req "$(( $(cpu_ns "$PID") - t0 ))" "${CALLS:-200000}" 2
	unserve
}

# row NAME ARGS...: prints NAME and the instructions per call (CPU=1: the
# median of 3 runs' us per call).
row() {
	local name=$1 a b
	shift
	if [ "$CPU" = 1 ]; then
		printf '%-34s %8s us\n' "$name" "$(for i in 1 2 3; do cpu_us "$@"; echo; done | sort -n | sed -n 2p)"
		return
	fi
	a=$(instr 1000 "$@"); b=$(instr 6000 "$@")
	printf '%-34s %8d\n' "$name" $(( (b - a) / 5000 ))
}

# One rule's signature each (LIB_decide's argument), with a limit no run
# reaches.
FW='fixed_window - 1 1000000000 1000  '
TB='token_bucket - 1 1000000000 1000  '
GC='gcra - 1 1000000000 1000  '
K='rl:{a:__rand_int__}'
# requests N SIG...: keys and args of N requests in one call, each of the
# rules SIG... on keys of their own (flag n on each request's first rule
# but the call's first). rules N: one request of N fixed_window rules.
requests() {
	local n=$1 i j sig
	shift
	keys=(); args=()
	for i in $(seq "$n"); do
		j=0
		for sig in "$@"; do
			j=$((j + 1))
			keys+=("rl:{r$j.$i:__rand_int__}")
			[ "$i" -gt 1 ] && [ "$j" = 1 ] && sig=${sig/ - / n }
			args+=("$sig")
		done
	done
}
rules() { local s=() i; for i in $(seq "$1"); do s+=("$FW"); done; requests 1 "${s[@]}"; }

ROWS=${*:-ping fastify nop0 nop1 nop31 time get hmget hmget3 hset pexpiretime set_px reply13 floor1 floor3c floor9c floor10 floor10c fw1 fw1m fwhot tb1 gcra1 sw1 swhot sl1 three fw10 batch3 batch10 three3}
for r in $ROWS; do
	case $r in
	ping)	 row "PING (a round trip)" PING ;;
	fastify) row "fastify's script (EVALSHA)" EVALSHA "$FASTIFY_SHA" 1 'rlf:__rand_int__' 1000 ;;
	nop0)	 row "FCALL of nothing, no key" FCALL p_nop 0 ;;
	nop1)	 row "FCALL of nothing, 1 key" FCALL p_nop 1 "$K" ;;
	nop31)	 row "FCALL of nothing, 1 key 30 args" FCALL p_nop 1 "$K" $(seq 30) ;;
	time)	 row "+ TIME" FCALL p_time 1 "$K" ;;
	get)	 row "+ GET" FCALL p_get 1 "$K" ;;
	hmget)	 row "+ HMGET 2 fields" FCALL p_hmget 1 "$K" ;;
	hset)	 row "+ HSET 1 field" FCALL p_hset 1 "$K" ;;
	hmget3)	 row "+ HMGET 3 fields" FCALL p_hmget3 1 "$K" ;;
	pexpiretime) row "+ PEXPIRETIME" FCALL p_pexpiretime 1 "$K" ;;
	set_px)	 row "+ SET PX" FCALL p_set_px 1 "$K" ;;
	reply13) row "reply of 13 fields" FCALL p_reply13 1 "$K" ;;
	fw1)	 row "rlgate_decide fixed_window" FCALL "${FN}_decide" 1 "$K" '' '' "$FW" ;;
	tb1)	 row "rlgate_decide token_bucket" FCALL "${FN}_decide" 1 "$K" '' '' "$TB" ;;
	gcra1)	 row "rlgate_decide gcra" FCALL "${FN}_decide" 1 "$K" '' '' "$GC" ;;
	# A one-minute window: a key's calls after its first find its window
	# open (with fw1's second, most open a new one under valgrind's pace).
	fw1m)	 row "rlgate_decide fixed_window, 1 min" FCALL "${FN}_decide" 1 "$K" '' '' \
		    'fixed_window - 1 1000000000 60000  ' ;;
	# One key: every call after the first admits in the window (the
	# block) the key holds: a hot key's cost. sliding_window's block is an
	# hour, so that a run's count of blocks does not depend on its pace
	# (with 6 s blocks two runs of one row differed by 5%).
	fwhot)	 row "rlgate_decide fixed_window, 1 hot key" FCALL "${FN}_decide" 1 'rl:{a:hot}' '' '' \
		    'fixed_window - 1 1000000000 60000  ' ;;
	swhot)	 row "rlgate_decide sliding_window, 1 hot key" FCALL "${FN}_decide" 1 'rl:{a:hot}' '' '' \
		    'sliding_window - 1 1000000000 3600000  3600000' ;;
	sw1)	 row "rlgate_decide sliding_window" FCALL "${FN}_decide" 1 "$K" '' '' \
		    'sliding_window - 1 1000000000 3600000  3600000' ;;
	sl1)	 row "rlgate_decide sliding_log" FCALL "${FN}_decide" 1 "$K" '' '' \
		    'sliding_log - 1 100000 60000  ' ;;
	three)	 row "rlgate_decide 3 rules (fw, tb, gcra)" FCALL "${FN}_decide" 3 \
		    'rl:{a:__rand_int__}' 'rl:{b:__rand_int__}' 'rl:{c:__rand_int__}' '' '' \
		    "$FW" "$TB" "$GC" ;;
	fw10)	 rules 10; row "rlgate_decide 10 fixed_window rules" FCALL "${FN}_decide" 10 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	batch10) requests 10 "$FW"; row "a batch of 10 one-rule requests" FCALL "${FN}_decide" 10 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	batch3)	 requests 3 "$FW"; row "a batch of 3 one-rule requests" FCALL "${FN}_decide" 3 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	three3)	 requests 3 "$FW" "$TB" "$GC"; row "a batch of 3 three-rule requests" FCALL "${FN}_decide" 9 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	floor1)	 row "the contract's floor, 1 rule" FCALL p_floor 1 "$K" '' '' "$FW" ;;
	floor10) rules 10; row "the contract's floor, batch of 10" FCALL p_floor 10 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	floor10c) rules 10; row "the floor, batch of 10, 1-string rows" FCALL p_floor_c 10 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	floor3c) rules 3; row "the floor, batch of 3, 1-string rows" FCALL p_floor_c 3 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	floor9c) rules 9; row "the floor, 9 rules, 1-string rows" FCALL p_floor_c 9 \
		    "${keys[@]}" '' '' "${args[@]}" ;;
	*)	 echo "redis_cost: no row $r" >&2; exit 2 ;;
	esac
done
