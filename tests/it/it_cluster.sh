#!/bin/bash
# The Redis layer against a real Redis Cluster (3 masters, 3 replicas,
# cluster-node-timeout 1000), driven through tests/tools/redis_call (the
# gateway's own redis.c): routing by slot to every master, one round trip
# for all of them, the library loaded per node, MOVED after a slot moved,
# ASK during a migration, a killed master costing only its slots until its
# replica takes over, and the errors for a server without cluster support
# and for seeds that do not answer.
. "$(dirname "$0")/../lib.sh"
RC=$TOP/tests/tools/redis_call
[ -x "$RC" ] || { echo "# make tests/tools/redis_call first"; exit 1; }

start_cluster || exit 1
DEAD=$(free_port)	# nothing listens there: the first seed fails
conf() {	# conf FILE ADDRESSES [EXTRA]
	printf '[redis]\nmode = cluster\naddress = %s\n%s\n[audit]\ndatabase =\n[rule:r]\npath = /\nlimit = 1\nwindow = 1s\n' \
		"$2" "${3:-}" > "$1"
}
conf "$T/c.ini" "127.0.0.1:$DEAD 127.0.0.1:$CLUSTER_SEED"
M=("${CLUSTER_PORTS[@]:0:3}")
slot() { redis-cli -p "$CLUSTER_SEED" CLUSTER KEYSLOT "$1"; }
field() { awk -F'\t' -v r="$1" -v c="$2" -v f="$3" '$1 == r && $2 == c { print $f }' "$4"; }

# 1. The probe reads the map past the dead seed and loads the library on
# every master.
# L: this build's library (fcgi/scripts.c), its functions' prefix.
L=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
for p in "${M[@]}"; do redis-cli -p "$p" FUNCTION FLUSH > /dev/null; done
is "probe past a dead seed" "probe OK" "$("$RC" -c "$T/c.ini" -P 2>"$T/probe.err")"
n=0; for p in "${M[@]}"; do
	redis-cli -p "$p" FUNCTION LIST LIBRARYNAME "$L" | grep -qx "$L" && n=$((n + 1))
done
is "the library is on every master" 3 "$n"
check "a dead seed is no outage (nothing logged)" test ! -s "$T/probe.err"

# 2. Keys spread over every master, each call at the master of its slot,
# in one run.
args=()
for i in $(seq 1 30); do args+=("rl:{k$i}" SET "rl:{k$i}" "v$i" ";"); done
"$RC" -c "$T/c.ini" "${args[@]}" > "$T/spread.out" 2>"$T/spread.err"
is "30 SETs in one run: all OK" 30 "$(grep -c $'\tOK\t' "$T/spread.out")"
wrong=0
for i in $(seq 1 30); do
	want=$(cluster_master_of "$(slot "rl:{k$i}")")
	got=$(field 1 "$i" 4 "$T/spread.out")
	[ "$got" = "127.0.0.1:$want" ] || { wrong=$((wrong + 1)); echo "# rl:{k$i}: $got, master $want"; }
done
is "each call went to the master of its slot" 0 "$wrong"
is "the keys are spread over the 3 masters" 3 "$(cut -f4 "$T/spread.out" | sort -u | wc -l)"
total=0; for p in "${M[@]}"; do
	k=$(redis-cli -p "$p" DBSIZE); total=$((total + k))
	check "master $p holds keys ($k)" test "$k" -gt 0
done
is "the masters hold the 30 keys" 30 "$total"
"$RC" -c "$T/c.ini" -E > "$T/each.out"
is "redis_each_master visits the 3 masters, DBSIZE summing to 30" 30 \
	"$(awk -F'\t' '{ s += $2 } END { print s }' "$T/each.out")"

# 3. One round trip for all nodes: a master sleeping 300 ms does not delay
# the calls to the others. Each node's TIME is taken when its call
# arrives; written to every node before any is read, the other masters'
# TIME comes before the sleeping master's wakes (one clock: one host).
kA="rl:{k1}"; pA=$(field 1 1 4 "$T/spread.out"); pA=${pA#127.0.0.1:}
for i in $(seq 2 30); do
	[ "$(field 1 "$i" 4 "$T/spread.out")" != "127.0.0.1:$pA" ] && { kB="rl:{k$i}"; break; }
done
conf "$T/slow.ini" "127.0.0.1:$CLUSTER_SEED" "timeout = 2s"
"$RC" -c "$T/slow.ini" "$kA" EVAL "$BUSY_LUA" 0 300000 ";" "$kA" TIME ";" "$kB" TIME > "$T/rt.out"
is "sleep, then TIME on its master, TIME on another: all OK" 3 "$(grep -c $'\tOK\t' "$T/rt.out")"
us() { local t; t=$(field 1 "$1" 5 "$T/rt.out" | tr -d '[],'); set -- $t; echo $(( $1 * 1000000 + $2 )); }
tA=$(us 2); tB=$(us 3)
check "the other master ran its call before the sleeper woke ($((tA - tB)) us)" test $((tA - tB)) -gt 250000

# 4. The library, missing on a node (FUNCTION FLUSH: a new or flushed
# master), is loaded there and the call answers.
for p in "${M[@]}"; do redis-cli -p "$p" FUNCTION FLUSH > /dev/null; done
args=(); for i in $(seq 1 9); do args+=("rl:{k$i}" FCALL_RO "${L}_version" 0 ";"); done
"$RC" -c "$T/c.ini" "${args[@]}" > "$T/lib.out"
is "${L}_version answers on every master after FUNCTION FLUSH" 9 \
	"$(awk -F'\t' '$3 == "OK" && $5 !~ /error/' "$T/lib.out" | wc -l)"
# Another version's library (another build, during a rolling upgrade) is
# left alone: this build's is loaded beside it, never in its place.
redis-cli -p "$pA" FUNCTION LOAD "#!lua name=rlgate_000000000000
redis.register_function{function_name = 'rlgate_000000000000_version', flags = {'no-writes'}, callback = function() return 'old' end}" > /dev/null
redis-cli -p "$pA" FUNCTION DELETE "$L" > /dev/null
"$RC" -c "$T/c.ini" "$kA" FCALL_RO "${L}_version" 0 > "$T/ver.out"
check "this build's library reloaded beside another version's, and the call answers" \
	grep -q $'\tOK\t.*\t[0-9a-f]\\{40\\}$' "$T/ver.out"
is "the other version's library is still there" old \
	"$(redis-cli -p "$pA" FCALL_RO rlgate_000000000000_version 0)"
# A library under this build's name that is not this build's (a name
# collision, a hand-made one): not replaced, the call fails.
redis-cli -p "$pA" FUNCTION LOAD REPLACE "#!lua name=$L
redis.register_function{function_name = '${L}_version', flags = {'no-writes'}, callback = function() return redis.error_reply('rlgate: library version old, expected new') end}" > /dev/null
"$RC" -c "$T/c.ini" "$kA" FCALL_RO "${L}_version" 0 > "$T/ver2.out"
check "a library of this name but not this version: the call's error, not replaced" \
	grep -q 'rlgate: library version old' "$T/ver2.out"
is "it is still there" 1 "$(redis-cli -p "$pA" FUNCTION LIST WITHCODE | grep -c 'expected new')"
redis-cli -p "$pA" FUNCTION DELETE "$L" > /dev/null
redis-cli -p "$pA" FUNCTION DELETE rlgate_000000000000 > /dev/null

# The slot of a key, its master's port and node id, and a master to move it to.
move_setup() {	# move_setup KEY
	MS=$(slot "$1"); MFROM=$(cluster_master_of "$MS")
	for p in "${M[@]}"; do [ "$p" != "$MFROM" ] && { MTO=$p; break; }; done
	MFROM_ID=$(cluster_id "$MFROM"); MTO_ID=$(cluster_id "$MTO")
}
setslot_all() {	# setslot_all SLOT NODE-ID: every node learns the owner
	local p
	for p in "${CLUSTER_PORTS[@]}"; do
		[ -n "${CLUSTER_PID[$p]:-}" ] && redis-cli -p "$p" CLUSTER SETSLOT "$1" NODE "$2" > /dev/null
	done
}

# 5. MOVED: a slot moves while redis_call holds the old map; the call
# follows MOVED to the new master, that slot's entry is fixed (a second
# call there is not redirected again) and a full refresh follows.
kM="rl:{moved}"
move_setup "$kM"
mkfifo "$T/ctl"
"$RC" -c "$T/c.ini" -w -S "$kM" SET "$kM" x < "$T/ctl" > "$T/moved.out" 2>"$T/moved.err" &
RCPID=$!
exec 3> "$T/ctl"
wait_for 10 grep -q . "$T/moved.out"
redis-cli -p "$MTO" CLUSTER SETSLOT "$MS" IMPORTING "$MFROM_ID" > /dev/null
redis-cli -p "$MFROM" CLUSTER SETSLOT "$MS" MIGRATING "$MTO_ID" > /dev/null
redis-cli -p "$MFROM" MIGRATE 127.0.0.1 "$MTO" "" 0 5000 KEYS "$kM" > /dev/null
setslot_all "$MS" "$MTO_ID"
echo >&3; echo >&3; echo q >&3; exec 3>&-
wait "$RCPID"
is "before the move: the old master" "127.0.0.1:$MFROM" "$(field 1 1 4 "$T/moved.out")"
is "after the move: OK at the new master (MOVED followed)" "OK 127.0.0.1:$MTO" \
	"$(field 2 1 3 "$T/moved.out") $(field 2 1 4 "$T/moved.out")"
is "and again, without a redirect" "OK 127.0.0.1:$MTO" \
	"$(field 3 1 3 "$T/moved.out") $(field 3 1 4 "$T/moved.out")"
is "one redirect counted, at the old master" 1 \
	"$(awk -F'\t' -v a="127.0.0.1:$MFROM" '$1 == "health" && $2 == a { print $7 }' "$T/moved.out")"
check "the map was refreshed after MOVED" test \
	"$(awk -F'\t' '$1 == "health" { s += $8 } END { print s }' "$T/moved.out")" -ge 2

# 6. ASK: during a migration a key already moved is asked for at the
# importing master (ASKING first), a key not yet moved is served by the
# old one, and the map does not change (ASK again on the next run).
kA1="rl:{ask}1"; kA2="rl:{ask}2"
move_setup "$kA1"
redis-cli -p "$MFROM" SET "$kA1" one > /dev/null
redis-cli -p "$MFROM" SET "$kA2" two > /dev/null
rm -f "$T/ctl"; mkfifo "$T/ctl"
"$RC" -c "$T/c.ini" -w -S "$kA1" GET "$kA1" ";" "$kA2" GET "$kA2" < "$T/ctl" > "$T/ask.out" 2>"$T/ask.err" &
RCPID=$!
exec 3> "$T/ctl"
wait_for 10 grep -q . "$T/ask.out"
redis-cli -p "$MTO" CLUSTER SETSLOT "$MS" IMPORTING "$MFROM_ID" > /dev/null
redis-cli -p "$MFROM" CLUSTER SETSLOT "$MS" MIGRATING "$MTO_ID" > /dev/null
redis-cli -p "$MFROM" MIGRATE 127.0.0.1 "$MTO" "" 0 5000 KEYS "$kA1" > /dev/null
echo >&3; echo >&3; echo q >&3; exec 3>&-
wait "$RCPID"
is "migrated key: its value from the importing master (ASK)" "OK 127.0.0.1:$MTO one" \
	"$(field 2 1 3 "$T/ask.out") $(field 2 1 4 "$T/ask.out") $(field 2 1 5 "$T/ask.out")"
is "key not migrated yet: from the old master" "OK 127.0.0.1:$MFROM two" \
	"$(field 2 2 3 "$T/ask.out") $(field 2 2 4 "$T/ask.out") $(field 2 2 5 "$T/ask.out")"
is "the next run asks again (the map unchanged)" "OK 127.0.0.1:$MTO one" \
	"$(field 3 1 3 "$T/ask.out") $(field 3 1 4 "$T/ask.out") $(field 3 1 5 "$T/ask.out")"
is "two ASK redirects counted at the old master" 2 \
	"$(awk -F'\t' -v a="127.0.0.1:$MFROM" '$1 == "health" && $2 == a { print $7 }' "$T/ask.out")"
redis-cli -p "$MFROM" MIGRATE 127.0.0.1 "$MTO" "" 0 5000 KEYS "$kA2" > /dev/null
setslot_all "$MS" "$MTO_ID"

# 7. kill -9 a master: calls for its slots fail (FAILED or UNSENT), calls
# for the other masters go on without an error in every run; after its
# replica takes over, its slots answer again, at the replica.
ki=(); kp=()
for i in $(seq 1 30); do
	p=$(cluster_master_of "$(slot "rl:{k$i}")")
	case " ${kp[*]} " in *" $p "*) ;; *) ki+=("rl:{k$i}"); kp+=("$p");; esac
done
is "one key per master" 3 "${#ki[@]}"
VICTIM=${kp[0]}
trap '' PIPE	# the tool ends by itself; a write to its fifo then fails
rm -f "$T/ctl"; mkfifo "$T/ctl"
"$RC" -c "$T/c.ini" -w -U -r 400 -i 50 "${ki[0]}" INCR "${ki[0]}:n" ";" \
	"${ki[1]}" INCR "${ki[1]}:n" ";" "${ki[2]}" INCR "${ki[2]}:n" \
	< "$T/ctl" > "$T/kill.out" 2>"$T/kill.log" &
RCPID=$!
exec 3> "$T/ctl"
wait_for 10 grep -q . "$T/kill.out"
kill_node "$VICTIM"
# A line per run, 50 ms apart, until all three answer again.
for _ in $(seq 300); do echo >&3 2>/dev/null || break; sleep 0.05; done
exec 3>&-
wait "$RCPID"
runs=$(cut -f1 "$T/kill.out" | sort -n | tail -1)
is "run 1, before the kill: all OK" "OK OK OK" "$(for c in 1 2 3; do field 1 $c 3 "$T/kill.out"; done | paste -sd ' ')"
is "the killed master's calls failed in some runs (FAILED/UNSENT)" yes \
	"$(awk -F'\t' '$2 == 1 && ($3 == "FAILED" || $3 == "UNSENT") { f = 1 } END { print f ? "yes" : "no" }' "$T/kill.out")"
is "the other masters' calls: OK in every run" 0 \
	"$(awk -F'\t' '$2 != 1 && $3 != "OK"' "$T/kill.out" | wc -l)"
new=$(field "$runs" 1 4 "$T/kill.out")
check "after the failover its slots answer again at the promoted replica ($new, run $runs)" \
	test "$(field "$runs" 1 3 "$T/kill.out")" = OK -a "$new" != "127.0.0.1:$VICTIM"
is "the outage was logged once, naming the master" 1 \
	"$(grep -c "redis 127.0.0.1:$VICTIM: .*answering with on_error" "$T/kill.log")"
echo "# failover took $runs runs of about 50 ms"

# 8. mode = cluster against a server without cluster support: a clear
# error naming its address.
start_redis
conf "$T/nc.ini" "127.0.0.1:$REDIS_PORT"
out=$("$RC" -c "$T/nc.ini" -P)
is "no cluster support: named" "probe: no cluster node gave the slot map (tried 127.0.0.1:$REDIS_PORT (cluster support is disabled there: mode = cluster needs cluster-enabled yes))" "$out"
"$RC" -c "$T/nc.ini" k GET k > "$T/nc.out" 2>"$T/nc.log"
is "a call then is UNSENT" UNSENT "$(field 1 1 3 "$T/nc.out")"
check "and the log says why" grep -q "cluster support is disabled" "$T/nc.log"

# 9. No seed reachable: each address named with why.
D2=$(free_port)
conf "$T/none.ini" "127.0.0.1:$DEAD 127.0.0.1:$D2"
is "no seed reachable: each address and why" \
	"probe: no cluster node gave the slot map (tried 127.0.0.1:$DEAD (Connection refused), 127.0.0.1:$D2 (Connection refused))" \
	"$("$RC" -c "$T/none.ini" -P)"

finish
