#!/bin/bash
# Failover end to end (issue 20): real Redis Cluster (3 masters, 3
# replicas, cluster-node-timeout 1000) and a real Sentinel set (a master, a
# replica, three Sentinels, quorum 2, down-after-milliseconds 1000), with
# rlgate behind lighttpd (conf/lighttpd.conf as shipped), driven by curl:
#   1. cluster: exact limits for keys on every master; kill -9 of a master
#      (the first of two seeds) under load on every master: its
#      keys get on_error (deny: 503; allow: admitted, redis_error) until
#      its replica takes over, then decisions again; the other masters'
#      keys see no error; a new key's limit is exact after; one audit row
#      per answer;
#   2. cluster: a slot migrated under load (SETSLOT MIGRATING/IMPORTING,
#      MIGRATE, SETSLOT NODE): the ASK path keeps a limit exact;
#   3. cluster: a lone seed killed, seen by a gateway that had decided
#      keys and by one that had not;
#   4. Sentinel: the same failover as 1, on one master.
# How long decisions took to come back is printed ("# ..."), not asserted
# (no timed assertions): the README quotes it.
. "$(dirname "$0")/../lib.sh"

DOCROOT=$T/www
for d in ex ld la mg; do mkdir -p "$DOCROOT/$d"; echo "$d" > "$DOCROOT/$d/item"; done
BASE=

# rules_ini: the rules of both deployments, one per path, each keyed by
# ?u=: ex exact (5 per hour; sliding_log: no window edge to cross), ld and
# la for the load (never denied by their limit; on_error deny and allow),
# mg the migrated key (20 per hour, on_error allow: a lost call would
# admit).
rules_ini() {
	local r
	for r in "ex sliding_log 5 deny" "ld fixed_window 1000000 deny" \
	    "la fixed_window 1000000 allow" "mg sliding_log 20 allow"; do
		set -- $r
		printf '\n[rule:%s]\npath = /%s/*\nkey = {query.u}\nalgorithm = %s\nlimit = %s\nwindow = 1h\non_error = %s\n' \
			"$1" "$1" "$2" "$3" "$4"
	done
}

# ANS: this section's answers, one line per request made through lighttpd:
# "ms status rule key" (ms: the wall clock when the answer came).
now_ms_bash() { local t=${EPOCHREALTIME//[.,]/}; echo $(( t / 1000 )); }
# req RULE KEY: one request; prints its status and logs it in $ANS.
req() {
	local s
	s=$(status --max-time 20 "$BASE/$1/item?u=$2")
	echo "$(now_ms_bash) $s $1 $2" >> "$ANS"
	echo "$s"
}
# codes RULE KEY N: N requests in a row, their statuses on one line.
codes() {
	local i out=""
	for i in $(seq "$3"); do out="$out $(req "$1" "$2")"; done
	echo $out
}
# pcodes RULE KEY N: N requests at once (curl --parallel, 5 at a time);
# their statuses sorted, on one line.
pcodes() {
	local i args=() s out=()
	for i in $(seq "$3"); do args+=(-o /dev/null "$BASE/$1/item?u=$2"); done
	mapfile -t out < <(curl -s --max-time 20 --parallel --parallel-max 5 \
		-w '%{http_code}\n' "${args[@]}" 2>/dev/null)
	for s in "${out[@]}"; do echo "$(now_ms_bash) $s $1 $2" >> "$ANS"; done
	printf '%s\n' "${out[@]}" | sort | paste -sd' '
}
EXPECT_EX="200 200 200 200 200 429 429 429"

# load OUT KEY-LD KEY-LA: requests /ld/ and /la/ for the two keys in turn
# until $T/stop exists (at most 2000 rounds), logging each answer in OUT as
# req does. Started in the background; LOADERS holds the PIDs.
LOADERS=()
load() {
	local out=$1 i s
	for ((i = 0; i < 2000; i++)); do
		[ -e "$T/stop" ] && break
		s=$(status --max-time 20 "$BASE/ld/item?u=$2")
		echo "$(now_ms_bash) $s ld $2" >> "$out"
		s=$(status --max-time 20 "$BASE/la/item?u=$3")
		echo "$(now_ms_bash) $s la $3" >> "$out"
	done
}
start_load() {	# start_load OUT KEY-LD KEY-LA
	load "$@" &
	LOADERS+=("$!"); PIDS+=("$!")
}
stop_load() {
	local p
	touch "$T/stop"
	for p in "${LOADERS[@]}"; do wait "$p"; done
	LOADERS=()
	rm -f "$T/stop"
}
lines() { [ -e "$1" ] && wc -l < "$1" || echo 0; }

# answers_by FILES..., rows_by: "rule:status:count" per group, from the
# answers logged in FILES and from the audit database ($AUDIT_DB), to be
# compared.
answers_by() { cat "$@" | awk '{ n[$3 ":" $2]++ } END { for (k in n) print k ":" n[k] }' | sort | paste -sd' '; }
rows_by() { sql "SELECT rule || ':' || status || ':' || count(*) FROM decisions GROUP BY rule, status" | sort | paste -sd' '; }
answers_total() { cat "$@" | wc -l; }
rows_total() { sql "SELECT count(*) FROM decisions" 2>/dev/null || echo 0; }
rows_caught_up() { [ "$(rows_total)" -ge "$(answers_total "$ANS")" ]; }

# keys_rows KEYS WHERE: the rows for the ld and la keys KEYS (a list like
# 'a','b') matching WHERE.
keys_rows() { sql "SELECT count(*) FROM decisions WHERE rule IN ('ld', 'la') AND key IN ($1) AND $2"; }
# back_after KEYS: the ts of the first decision for KEYS after their last
# on_error row, once there are an on_error row and 10 decisions after the
# last one (empty before).
back_after() {
	sql "SELECT min(ts_ms) FROM decisions WHERE rule IN ('ld', 'la') AND key IN ($1)
	    AND reason = 'limit' AND ts_ms > (SELECT max(ts_ms) FROM decisions
	    WHERE rule IN ('ld', 'la') AND key IN ($1) AND reason = 'redis_error')
	    HAVING count(*) >= 10"
}

# failover_wait PROMOTED KEYS: waits (at most 30 s) for the decisions for
# KEYS to come back after the kill at $KILL_MS; sets PROMOTED_MS (when the
# command PROMOTED first succeeded) and BACK_MS (back_after), both in ms
# since the kill, empty if not seen.
failover_wait() {
	local promoted=$1 keys=$2 t back=
	PROMOTED_MS= BACK_MS=
	for _ in $(seq 600); do
		t=$(now_ms_bash)
		[ -z "$PROMOTED_MS" ] && $promoted && PROMOTED_MS=$(( t - KILL_MS ))
		back=$(back_after "$keys")
		[ -n "$back" ] && { BACK_MS=$(( back - KILL_MS )); return 0; }
		sleep 0.05
	done
	return 1
}
# outage_numbers WHERE: for the rows matching WHERE, in ms since the
# kill: FIRST_ERR (the first on_error), BACK_MS (the first decision after
# it), LAST_ERR (the last on_error), and LATE_ERR (how many on_error rows
# came after BACK_MS: an event loop that had not seen the new master yet).
outage_numbers() {
	local first
	first=$(sql "SELECT min(ts_ms) FROM decisions WHERE $1 AND reason = 'redis_error'")
	FIRST_ERR= BACK_MS= LAST_ERR= LATE_ERR=
	[ -n "$first" ] || return 0	# no on_error: the checks below say so
	FIRST_ERR=$(( first - KILL_MS ))
	BACK_MS=$(sql "SELECT min(ts_ms) - $KILL_MS FROM decisions WHERE $1 AND reason = 'limit' AND ts_ms > $first")
	LAST_ERR=$(( $(sql "SELECT max(ts_ms) FROM decisions WHERE $1 AND reason = 'redis_error'") - KILL_MS ))
	LATE_ERR=$(sql "SELECT count(*) FROM decisions WHERE $1 AND reason = 'redis_error' AND ts_ms > $KILL_MS + ${BACK_MS:-0}")
}
# outages LOG ADDRESS: the outages of ADDRESS logged, and its "answers
# again" lines, as "N M".
outages() {
	echo "$(grep -c "redis $2: .*answering with on_error" "$1") $(grep -c "redis $2 answers again" "$1")"
}

# ---------------------------------------------------------------------------
# 1. Cluster
start_cluster || exit 1
M=("${CLUSTER_PORTS[@]:0:3}")
kslot() { redis-cli -p "$1" CLUSTER KEYSLOT "$2"; }
# master_of RULE KEY: the port of the master of rl:{RULE:KEY} now.
master_of() { cluster_master_of "$(kslot "${M[2]}" "rl:{$1:$2}")"; }	# M[2] never dies
# pick RULE PREFIX: PICK[port] = a key PREFIXn of RULE on each live master.
declare -A PICK
pick() {
	local i p n=0 want
	want=$(for p in "${CLUSTER_PORTS[@]}"; do [ -n "${CLUSTER_PID[$p]:-}" ] &&
		redis-cli -p "$p" ROLE | head -1 | grep -qx master && echo "$p"; done | wc -l)
	PICK=()
	for i in $(seq 1 200); do
		p=$(master_of "$1" "$2$i")
		[ -n "$p" ] && [ -z "${PICK[$p]:-}" ] && { PICK[$p]=$2$i; n=$((n + 1)); }
		[ "$n" = "$want" ] && return 0
	done
	return 1
}
# The replica of master port $1.
replica_of() {
	local p
	for p in "${CLUSTER_PORTS[@]:3}"; do
		redis-cli -p "$p" INFO replication | tr -d '\r' | grep -qx "master_port:$1" && { echo "$p"; return; }
	done
}

VICTIM=${M[0]}
AUDIT_DB=$T/cluster.db
# Two seeds, the first the victim. (A lone seed: section 3.)
cat > "$T/cluster.ini" <<EOF
[gateway]
workers = 2

$(ini_redis_audit "mode = cluster" "address = 127.0.0.1:$VICTIM 127.0.0.1:${M[1]}")
$(rules_ini)
EOF
check "rlgate -t accepts the cluster configuration" "$RLGATE" -t -c "$T/cluster.ini"
start_rlgate "$T/cluster.ini" rlgate-cluster || exit 1
start_shipped_lighttpd || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
ANS=$T/answers-cluster.txt

# 1a. Exact limits, a key on each master: 5 of 8 admitted, counted there.
pick ex k || { not_ok "cluster: an ex key on each master"; finish; exit; }
for p in "${M[@]}"; do
	k=${PICK[$p]}
	is "cluster: key $k (master $p): 5 of 8 admitted" "$EXPECT_EX" "$(codes ex "$k" 8)"
	is "cluster: master $p holds $k's 5 admissions" 5 "$(redis-cli -p "$p" ZCARD "rl:{ex:$k}")"
done

# 1b. kill -9 a master under load on every master.
pick ld l || { not_ok "cluster: an ld key on each master"; finish; exit; }
declare -A LD; for p in "${M[@]}"; do LD[$p]=${PICK[$p]}; done
pick la a || { not_ok "cluster: an la key on each master"; finish; exit; }
declare -A LA; for p in "${M[@]}"; do LA[$p]=${PICK[$p]}; done
REPLICA=$(replica_of "$VICTIM")
check "cluster: the victim $VICTIM has a replica ($REPLICA), its link up" test -n "$REPLICA"
for p in "${M[@]}"; do start_load "$T/load-$p.txt" "${LD[$p]}" "${LA[$p]}"; done
loaded() { local p; for p in "${M[@]}"; do [ "$(lines "$T/load-$p.txt")" -ge 20 ] || return 1; done; }
wait_for 30 loaded || echo "# the load did not start"
KILL_MS=$(now_ms_bash)
kill_node "$VICTIM"
VKEYS="'${LD[$VICTIM]}', '${LA[$VICTIM]}'"
SKEYS="'${LD[${M[1]}]}', '${LA[${M[1]}]}', '${LD[${M[2]}]}', '${LA[${M[2]}]}'"
replica_master() { redis-cli -p "$REPLICA" ROLE 2>/dev/null | head -1 | grep -qx master; }
failover_wait replica_master "$VKEYS"
check "cluster: decisions for the killed master's keys came back (after ${BACK_MS:-never} ms; replica promoted after ${PROMOTED_MS:-?} ms)" \
	test -n "$BACK_MS"
sleep 1	# and the load goes on a while
stop_load
cat "$T"/load-*.txt >> "$ANS"
outage_numbers "rule IN ('ld', 'la') AND key IN ($VKEYS)"
echo "# cluster failover: kill at 0; on_error from ${FIRST_ERR:-none} ms; replica master at ${PROMOTED_MS:-?} ms; decisions back at ${BACK_MS:-never} ms; on_error after that: ${LATE_ERR:-0} (last at ${LAST_ERR:-none} ms)"
wait_for 10 rows_caught_up
is "cluster: every request answered (no curl failure)" 0 "$(awk '$2 == "000"' "$ANS" | wc -l)"
v503=$(awk -v k="${LD[$VICTIM]}" '$3 == "ld" && $4 == k && $2 == 503' "$ANS" | wc -l)
check "cluster: on_error = deny meanwhile: 503 for the killed master's key ($v503)" test "$v503" -gt 0
is "cluster: and each 503 is a redis_error row, denied" "$v503" \
	"$(keys_rows "'${LD[$VICTIM]}'" "reason = 'redis_error' AND allowed = 0 AND status = 503")"
va=$(keys_rows "'${LA[$VICTIM]}'" "reason = 'redis_error' AND allowed = 1 AND status = 200")
check "cluster: on_error = allow meanwhile: admitted with reason redis_error ($va)" test "$va" -gt 0
is "cluster: the allow key's answers were all 200" 0 \
	"$(awk -v k="${LA[$VICTIM]}" '$3 == "la" && $4 == k && $2 != 200' "$ANS" | wc -l)"
is "cluster: the other masters' keys saw no redis_error" 0 "$(keys_rows "$SKEYS" "reason <> 'limit'")"
ns=$(keys_rows "$SKEYS" "reason = 'limit' AND allowed = 1")
check "cluster: and were decided all along ($ns, all 200)" test "$ns" -gt 0 -a \
	"$(awk -v a="${LD[${M[1]}]}" -v b="${LD[${M[2]}]}" '$3 == "ld" && ($4 == a || $4 == b) && $2 != 200' "$ANS" | wc -l)" = 0
is "cluster: the killed master's keys decided again at the end" "200 limit" \
	"$(grep " ld ${LD[$VICTIM]}\$" "$ANS" | tail -1 | cut -d' ' -f2) $(sql "SELECT reason FROM decisions WHERE key IN ($VKEYS) ORDER BY id DESC LIMIT 1")"
NEWM=$(master_of ld "${LD[$VICTIM]}")
is "cluster: its slots are at the promoted replica" "$REPLICA" "$NEWM"
is "cluster: the killed master's outage logged once, never 'answers again'" "1 0" \
	"$(outages "$T/rlgate-cluster.log" "127.0.0.1:$VICTIM")"

# 1c. New keys after the failover, one on each master (the promoted one
# too): exact.
pick ex n || { not_ok "cluster: a new ex key on each master"; finish; exit; }
for p in "${M[1]}" "${M[2]}" "$NEWM"; do
	k=${PICK[$p]}
	is "cluster after the failover: new key $k (master $p): 5 of 8 admitted" "$EXPECT_EX" "$(codes ex "$k" 8)"
	is "cluster after the failover: master $p holds $k's 5" 5 "$(redis-cli -p "$p" ZCARD "rl:{ex:$k}")"
done

# 2. A slot migrated under load: 10 requests before, 5 while the slot
# migrates with the key still at its master, 10 after MIGRATE moved the
# key (ASK: the importing master, after ASKING), 5 after SETSLOT NODE
# (MOVED); 5 at a time, with the load on every master. Exactly 20 of 30
# admitted.
pick mg m || { not_ok "cluster: an mg key"; finish; exit; }
MK=${PICK[${M[1]}]}; MFROM=${M[1]}; MTO=${M[2]}
MS=$(kslot "$MTO" "rl:{mg:$MK}")
for p in "${M[@]}"; do start_load "$T/mload-$p.txt" "${LD[$p]}" "${LA[$p]}"; done
asking0=$(redis_calls asking "$MTO"); asking0=${asking0:-0}
ph1=$(pcodes mg "$MK" 10)
redis-cli -p "$MTO" CLUSTER SETSLOT "$MS" IMPORTING "$(cluster_id "$MFROM")" > /dev/null
redis-cli -p "$MFROM" CLUSTER SETSLOT "$MS" MIGRATING "$(cluster_id "$MTO")" > /dev/null
ph2=$(pcodes mg "$MK" 5)
is "migration: MIGRATE moved the key" OK \
	"$(redis-cli -p "$MFROM" MIGRATE 127.0.0.1 "$MTO" "" 0 5000 KEYS "rl:{mg:$MK}")"
ph3=$(pcodes mg "$MK" 10)
is "migration: the old master holds no key of the slot" 0 "$(redis-cli -p "$MFROM" CLUSTER COUNTKEYSINSLOT "$MS")"
asking=$(( $(redis_calls asking "$MTO") - asking0 ))
for p in "${CLUSTER_PORTS[@]}"; do
	[ -n "${CLUSTER_PID[$p]:-}" ] && redis-cli -p "$p" CLUSTER SETSLOT "$MS" NODE "$(cluster_id "$MTO")" > /dev/null
done
ph4=$(pcodes mg "$MK" 5)
stop_load
cat "$T"/mload-*.txt >> "$ANS"
is "migration: before, 10 of 10 admitted" "$(printf '200 %.0s' $(seq 10) | sed 's/ $//')" "$ph1"
is "migration: migrating, key not moved yet: 5 of 5" "200 200 200 200 200" "$ph2"
is "migration: key moved (ASK): 5 of 10, then the limit" "200 200 200 200 200 429 429 429 429 429" "$ph3"
check "migration: the importing master was asked (ASKING $asking times)" test "$asking" -gt 0
is "migration: after SETSLOT NODE: denied" "429 429 429 429 429" "$ph4"
is "migration: the importing master holds the 20 admissions" 20 "$(redis-cli -p "$MTO" ZCARD "rl:{mg:$MK}")"
wait_for 10 rows_caught_up
is "migration: audit 20 allowed, 10 denied, all decided" "limit:0:10 limit:1:20" \
	"$(sql "SELECT reason || ':' || allowed || ':' || count(*) FROM decisions WHERE rule = 'mg' GROUP BY reason, allowed ORDER BY 1" | paste -sd' ')"
is "migration: the load saw no redis_error" 0 "$(sql "SELECT count(*) FROM decisions WHERE reason = 'redis_error' AND ts_ms > $KILL_MS + ${LAST_ERR:-0}")"

# Audit rows = answers in 1 and 2, per rule and status.
stop_rlgate	# writes every queued row
is "cluster: audit rows = answers ($(answers_total "$ANS"))" "$(answers_by "$ANS")" "$(rows_by)"
is "cluster: one row per request (one rule each)" "$(answers_total "$ANS")" "$(sql "SELECT count(DISTINCT request_id) FROM decisions")"
kill "$HTTPD_PID"; wait "$HTTPD_PID" 2>/dev/null

# 3. A lone seed (address = one master) killed, with no request during
# the failover. Two gateways, one event loop each: A has decided keys on
# every master before the kill, B has had no request yet. After the
# seed's replica took its slots: A's first request there is decided (the
# call to the dead node is not the answer: the map has changed), B
# decides every master's keys (the other masters never failed), and each
# logs the seed's outage once, never "answers again".
SEED=${M[1]} SEEDREP=$(replica_of "${M[1]}")
check "lone seed: $SEED has a replica ($SEEDREP)" test -n "$SEEDREP"
for g in A B; do
	cat > "$T/seed$g.ini" <<EOF
[gateway]
workers = 1
[redis]
mode = cluster
address = 127.0.0.1:$SEED
connect_timeout = 1s
timeout = 2s
[audit]
database =
$(rules_ini)
EOF
	unset RLGATE_PORT HTTP_PORT
	start_rlgate "$T/seed$g.ini" "rlgate-seed$g" || exit 1
	start_shipped_lighttpd || exit 1
	eval "BASE_$g=http://127.0.0.1:$HTTP_PORT"
done
ANS=$T/answers-seed.txt
BASE=$BASE_A
pick ex a || { not_ok "lone seed: an ex key on each master"; finish; exit; }
for p in "${M[1]}" "${M[2]}" "$NEWM"; do
	is "lone seed, A before the kill: key ${PICK[$p]} (master $p): 5 of 8" "$EXPECT_EX" "$(codes ex "${PICK[$p]}" 8)"
done
pick ex f || { not_ok "lone seed: an ex key on the seed"; finish; exit; }
FK=${PICK[$SEED]}
kill_node "$SEED"
seedrep_master() { [ "$(master_of ex "$FK")" = "$SEEDREP" ]; }
wait_for 30 seedrep_master
check "lone seed: its replica $SEEDREP took its slots" seedrep_master
is "lone seed, A after the failover: the first request on those slots decided" 200 "$(req ex "$FK")"
for g in A B; do
	eval "BASE=\$BASE_$g"
	pick ex "z$g" || { not_ok "lone seed: a new ex key on each master"; finish; exit; }
	for p in "${M[2]}" "$NEWM" "$SEEDREP"; do
		is "lone seed, $g after the failover: key ${PICK[$p]} (master $p): 5 of 8" \
			"$EXPECT_EX" "$(codes ex "${PICK[$p]}" 8)"
	done
	is "lone seed, $g: the seed's outage logged once, never 'answers again'" "1 0" \
		"$(outages "$T/rlgate-seed$g.log" "127.0.0.1:$SEED")"
done
for p in "${CLUSTER_PORTS[@]}"; do [ -n "${CLUSTER_PID[$p]:-}" ] && kill_node "$p"; done

# ---------------------------------------------------------------------------
# 4. Sentinel
start_sentinel_set || exit 1
AUDIT_DB=$T/sentinel.db
cat > "$T/sentinel.ini" <<EOF
[gateway]
workers = 2

$(ini_redis_audit "mode = sentinel" "address = $(printf '127.0.0.1:%s ' "${SENTINEL_PORTS[@]}")" \
    "master_name = mymaster")
$(rules_ini)
EOF
check "rlgate -t accepts the Sentinel configuration" "$RLGATE" -t -c "$T/sentinel.ini"
unset RLGATE_PORT HTTP_PORT
start_rlgate "$T/sentinel.ini" rlgate-sentinel || exit 1
start_shipped_lighttpd || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
ANS=$T/answers-sentinel.txt
OLD=$SENTINEL_MASTER_PORT NEW=$SENTINEL_REPLICA_PORT

is "sentinel: 5 of 8 admitted" "$EXPECT_EX" "$(codes ex s1 8)"
is "sentinel: the master holds the 5" 5 "$(redis-cli -p "$OLD" ZCARD 'rl:{ex:s1}')"
start_load "$T/sload.txt" sl sa
sloaded() { [ "$(lines "$T/sload.txt")" -ge 20 ]; }
wait_for 30 sloaded || echo "# the load did not start"
KILL_MS=$(now_ms_bash)
kill_node "$OLD"
named() { redis-cli -p "${SENTINEL_PORTS[0]}" SENTINEL get-master-addr-by-name mymaster 2>/dev/null | grep -qx "$NEW"; }
failover_wait named "'sl', 'sa'"
check "sentinel: decisions came back (after ${BACK_MS:-never} ms; Sentinel named the replica after ${PROMOTED_MS:-?} ms)" \
	test -n "$BACK_MS"
sleep 1
stop_load
cat "$T/sload.txt" >> "$ANS"
outage_numbers "rule IN ('ld', 'la')"
echo "# sentinel failover: kill at 0; on_error from ${FIRST_ERR:-none} ms; Sentinel named the replica at ${PROMOTED_MS:-?} ms; decisions back at ${BACK_MS:-never} ms; on_error after that: ${LATE_ERR:-0} (last at ${LAST_ERR:-none} ms)"
is "sentinel: every request answered (no curl failure)" 0 "$(awk '$2 == "000"' "$ANS" | wc -l)"
v503=$(awk '$3 == "ld" && $2 == 503' "$ANS" | wc -l)
check "sentinel: on_error = deny meanwhile: 503 ($v503)" test "$v503" -gt 0
wait_for 10 rows_caught_up
is "sentinel: and each 503 is a redis_error row, denied" "$v503" \
	"$(keys_rows "'sl'" "reason = 'redis_error' AND allowed = 0 AND status = 503")"
va=$(keys_rows "'sa'" "reason = 'redis_error' AND allowed = 1 AND status = 200")
check "sentinel: on_error = allow meanwhile: admitted with reason redis_error ($va)" test "$va" -gt 0
is "sentinel: decided again at the end" "200 limit" \
	"$(grep ' ld sl$' "$ANS" | tail -1 | cut -d' ' -f2) $(sql "SELECT reason FROM decisions ORDER BY id DESC LIMIT 1")"
is "sentinel: the old master's outage logged once" "1 0" \
	"$(outages "$T/rlgate-sentinel.log" "127.0.0.1:$OLD")"
is "sentinel: after the failover, a new key: 5 of 8 admitted" "$EXPECT_EX" "$(codes ex s2 8)"
is "sentinel: the promoted replica holds the 5" 5 "$(redis-cli -p "$NEW" ZCARD 'rl:{ex:s2}')"
stop_rlgate
is "sentinel: audit rows = answers ($(answers_total "$ANS"))" "$(answers_by "$ANS")" "$(rows_by)"

finish
