#!/bin/bash
# The Redis layer in mode = sentinel against a real Sentinel set (a master,
# a replica, three Sentinels with quorum 2, down-after-milliseconds 1000,
# requirepass on the Sentinels), driven through tests/tools/redis_call:
# the master found and checked, calls following a kill -9 of the master to
# the promoted replica, a graceful SENTINEL FAILOVER, and the two distinct
# errors: no Sentinel reachable, no Sentinel knows the master.
. "$(dirname "$0")/../lib.sh"
RC=$TOP/tests/tools/redis_call
[ -x "$RC" ] || { echo "# make tests/tools/redis_call first"; exit 1; }

SENTINEL_CONF_EXTRA="requirepass sp
sentinel sentinel-pass sp"
SENTINEL_CLI_AUTH="-a sp --no-auth-warning"
start_sentinel_set || exit 1
S=("${SENTINEL_PORTS[@]}")
DEAD=$(free_port)
conf() {	# conf FILE ADDRESSES NAME [EXTRA]
	printf '[redis]\nmode = sentinel\naddress = %s\nmaster_name = %s\n%s\n[audit]\ndatabase =\n[rule:r]\npath = /\nlimit = 1\nwindow = 1s\n' \
		"$2" "$3" "${4:-}" > "$1"
	chmod 600 "$1"
}
ALL="127.0.0.1:$DEAD 127.0.0.1:${S[0]} 127.0.0.1:${S[1]} 127.0.0.1:${S[2]}"
conf "$T/s.ini" "$ALL" mymaster "sentinel_password = sp"
field() { awk -F'\t' -v r="$1" -v c="$2" -v f="$3" '$1 == r && $2 == c { print $f }' "$4"; }

# 1. Found past a dead Sentinel, checked, the library loaded; calls go to
# the master.
L=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
redis-cli -p "$SENTINEL_MASTER_PORT" FUNCTION FLUSH > /dev/null
is "probe" "probe OK" "$("$RC" -c "$T/s.ini" -P)"
is "the library is on the master" "$L" \
	"$(redis-cli -p "$SENTINEL_MASTER_PORT" FUNCTION LIST LIBRARYNAME "$L" | grep -x "$L")"
"$RC" -c "$T/s.ini" k SET k v ";" k GET k > "$T/one.out"
is "SET and GET at the master" "OK 127.0.0.1:$SENTINEL_MASTER_PORT v" \
	"$(field 1 2 3 "$T/one.out") $(field 1 2 4 "$T/one.out") $(field 1 2 5 "$T/one.out")"
"$RC" -c "$T/s.ini" -H > "$T/health.out"
is "health: the master, ok" "127.0.0.1:$SENTINEL_MASTER_PORT master ok" \
	"$(cut -f2-4 "$T/health.out" | tr '\t' ' ')"

# 2. The two errors, told apart, each address named.
conf "$T/unknown.ini" "127.0.0.1:${S[0]} 127.0.0.1:${S[1]}" nosuch "sentinel_password = sp"
is "unknown master name" "probe: no Sentinel knows master 'nosuch' (asked 127.0.0.1:${S[0]}, 127.0.0.1:${S[1]})" \
	"$("$RC" -c "$T/unknown.ini" -P)"
D2=$(free_port)
conf "$T/dead.ini" "127.0.0.1:$DEAD 127.0.0.1:$D2" mymaster
is "no Sentinel reachable" "probe: no Sentinel reachable (tried 127.0.0.1:$DEAD (Connection refused), 127.0.0.1:$D2 (Connection refused))" \
	"$("$RC" -c "$T/dead.ini" -P)"
conf "$T/nopass.ini" "127.0.0.1:${S[0]}" mymaster
check "without sentinel_password: the Sentinel's NOAUTH is named" \
	grep -q "no Sentinel reachable (tried 127.0.0.1:${S[0]} (.*NOAUTH" <("$RC" -c "$T/nopass.ini" -P)
"$RC" -c "$T/dead.ini" k GET k > "$T/dead.out" 2>"$T/dead.log"
is "a call with no Sentinel reachable is UNSENT" UNSENT "$(field 1 1 3 "$T/dead.out")"
check "and the log says why, once" test "$(grep -c 'no Sentinel reachable' "$T/dead.log")" = 1

# 3. kill -9 the master: calls fail until Sentinel promotes the replica,
# then succeed there, on the same struct redis (as an event loop holds it).
trap '' PIPE	# the tool ends by itself; a write to its fifo then fails
mkfifo "$T/ctl"
"$RC" -c "$T/s.ini" -w -U -S k INCR n < "$T/ctl" > "$T/kill.out" 2>"$T/kill.log" &
RCPID=$!
exec 3> "$T/ctl"
wait_for 10 grep -q . "$T/kill.out"
OLD=$SENTINEL_MASTER_PORT
kill_node "$OLD"
for _ in $(seq 400); do echo >&3 2>/dev/null || break; sleep 0.05; done
exec 3>&-
wait "$RCPID"
runs=$(awk -F'\t' '$1 ~ /^[0-9]+$/ { r = $1 } END { print r }' "$T/kill.out")
is "before the kill: OK at the master" "OK 127.0.0.1:$OLD" "$(field 1 1 3 "$T/kill.out") $(field 1 1 4 "$T/kill.out")"
check "calls failed while no master was known" \
	grep -qE $'^[0-9]+\t1\t(FAILED|UNSENT)\t' "$T/kill.out"
is "after the promotion: OK at the replica" "OK 127.0.0.1:$SENTINEL_REPLICA_PORT" \
	"$(field "$runs" 1 3 "$T/kill.out") $(field "$runs" 1 4 "$T/kill.out")"
is "the promoted replica says master" master \
	"$(redis-cli -p "$SENTINEL_REPLICA_PORT" ROLE | head -1)"
is "the outage logged once, naming the old master" 1 \
	"$(grep -c "redis 127.0.0.1:$OLD: .*answering with on_error" "$T/kill.log")"
is "health lists the new master" "127.0.0.1:$SENTINEL_REPLICA_PORT master ok" \
	"$(awk -F'\t' '$1 == "health" { print $2, $3, $4 }' "$T/kill.out")"
echo "# the failover took $runs runs of about 50 ms"

# 4. The old master comes back (Sentinel makes it a replica, or, on a busy
# machine, fails over to it again: the test takes the master Sentinel names
# once all three agree and the other server replicates it). A graceful
# SENTINEL FAILOVER then moves the master while reads run on one struct
# redis. A read never fails on a replica (no READONLY), so only the
# +switch-master watcher can move them: the last reads at the new master
# prove it. Sentinel ends the reconfiguration with CLIENT KILL TYPE normal
# on the old master: a read in flight at that instant has no answer
# (FAILED, it may have run), and the next one reconnects.
redis-server --port "$OLD" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
	--logfile "$T/redis-$OLD-2.log" &
CLUSTER_PID[$OLD]=$!; PIDS+=("$!")
master_now() {	# the master all three Sentinels name, if they agree
	local p m prev=
	for p in "${S[@]}"; do
		m=$(redis-cli -p "$p" $SENTINEL_CLI_AUTH SENTINEL get-master-addr-by-name mymaster | tail -1)
		[ -n "$m" ] && { [ -z "$prev" ] || [ "$prev" = "$m" ]; } || return 1
		prev=$m
	done
	echo "$prev"
}
settled() {	# the named master is one, the other server replicates it
	local m o
	m=$(master_now) || return 1
	o=$OLD; [ "$m" = "$OLD" ] && o=$SENTINEL_REPLICA_PORT
	redis-cli -p "$m" ROLE | head -1 | grep -qx master &&
	    redis-cli -p "$o" INFO replication | grep -q '^master_link_status:up'
}
wait_for 30 settled || echo "# the set did not settle"
FROM=$(master_now); TO=$OLD; [ "$FROM" = "$OLD" ] && TO=$SENTINEL_REPLICA_PORT
"$RC" -c "$T/s.ini" -r 100 -i 50 k GET k > "$T/graceful.out" 2>"$T/graceful.log" &
RCPID=$!
wait_for 10 grep -q . "$T/graceful.out"
redis-cli -p "${S[0]}" $SENTINEL_CLI_AUTH SENTINEL FAILOVER mymaster > /dev/null
wait "$RCPID"
is "graceful failover: every read answered, but for one in flight at the kill" \
	"0 0" "$(awk -F'\t' '$3 == "UNSENT" { u++ } $3 == "FAILED" { f++ }
	    END { print u + 0, (f > 1) + 0 }' "$T/graceful.out")"
is "graceful failover: every run has its line" 100 "$(wc -l < "$T/graceful.out")"
is "the first at the master of then" "127.0.0.1:$FROM" "$(head -1 "$T/graceful.out" | cut -f4)"
is "the last at the new master" "127.0.0.1:$TO" "$(tail -1 "$T/graceful.out" | cut -f4)"
check "the watcher heard +switch-master" \
	grep -q "+switch-master mymaster 127.0.0.1 $FROM 127.0.0.1 $TO" "$T/graceful.log"

finish
