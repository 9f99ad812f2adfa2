#!/bin/bash
# on_error = local (issue 28 part 4), deterministic: one redis-server,
# stopped (SIGKILL, by PID) and started again on its port. While it is
# down each algorithm decides in rlgate's memory on local_share = 1/2 of
# its limit, exactly (windows of an hour: nothing refills during the
# test); the audit says reason = local, /metrics counts them, and the first
# request Redis answers again is Redis's (reason = limit).
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
for d in fw sw sl tb gc lb probe; do mkdir -p "$DOCROOT/$d"; echo "$d" > "$DOCROOT/$d/item"; done

cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 2
status_path = /rlgate-status

[redis]
address = 127.0.0.1:$REDIS_PORT
connect_timeout = 200ms
timeout = 300ms
on_error = local
local_share = 1/2

[audit]
database = $AUDIT_DB
flush_interval = 20ms

[rule:fw]
path = /fw/*
key = {query.k}
limit = 10
window = 1h

[rule:sw]
path = /sw/*
key = {query.k}
algorithm = sliding_window
precision = 10m
limit = 10
window = 1h

[rule:sl]
path = /sl/*
key = {query.k}
algorithm = sliding_log
limit = 10
window = 1h

[rule:tb]
path = /tb/*
key = {query.k}
algorithm = token_bucket
limit = 10
window = 1h

[rule:gc]
path = /gc/*
key = {query.k}
algorithm = gcra
limit = 10
window = 1h

; burst 1 x 1/2 = 0: an idle queue admits one, the next is denied
[rule:lb]
path = /lb/*
key = {query.k}
algorithm = leaky_bucket
limit = 10
window = 1h
burst = 1

[rule:probe]
path = /probe/*
limit = 1000000
window = 1s
on_error = deny
EOF

check "rlgate -t accepts on_error = local and local_share = 1/2" "$RLGATE" -t -c "$T/rlgate.ini"
printf '[redis]\nlocal_share = 3/2\n' > "$T/bad.ini"
"$RLGATE" -t -c "$T/bad.ini" > "$T/bad.out" 2>&1
check "local_share = 3/2 is refused with FILE:LINE" \
	grep -q "bad.ini:2.*local_share.*not a share" "$T/bad.out"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd "include \"$TOP/conf/lighttpd-status.conf\"" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

# codes ALG N: N requests on key a, their status codes in one line.
codes() {
	local i out=
	for i in $(seq "$2"); do out="$out$(status "$BASE/$1/item?k=a") "; done
	echo "${out% }"
}

is "with Redis up, fw decides in Redis" "200 200" "$(codes fw 2)"
kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null

is "fixed_window on 10 x 1/2: 5 more, then 429 (2 counted before are Redis's)" \
	"200 200 200 200 200 429 429 429" "$(codes fw 8)"
is "sliding_window on 5" "200 200 200 200 200 429 429" "$(codes sw 7)"
is "sliding_log on 5" "200 200 200 200 200 429 429" "$(codes sl 7)"
is "token_bucket on burst 5" "200 200 200 200 200 429 429" "$(codes tb 7)"
is "gcra on burst 5" "200 200 200 200 200 429 429" "$(codes gc 7)"
is "leaky_bucket on burst 0: the idle queue admits one" "200 429 429" "$(codes lb 3)"

start_redis "$REDIS_PORT" || exit 1
probe_ok() { [ "$(status "$BASE/probe/item")" = 200 ]; }
check "Redis decides again after the restart" wait_for 10 probe_ok
is "fw back in Redis (an empty Redis: admitted)" 200 "$(status "$BASE/fw/item?k=a")"
wait_for 5 rows_at_least 11 "rule = 'fw'"

is "audit: local rows per rule and allowed" \
	"fw|0|3 fw|1|5 gc|0|2 gc|1|5 lb|0|2 lb|1|1 sl|0|2 sl|1|5 sw|0|2 sw|1|5 tb|0|2 tb|1|5" \
	"$(sql "SELECT rule, allowed, count(*) FROM decisions WHERE reason = 'local'
		GROUP BY rule, allowed ORDER BY rule, allowed" | tr '\n' ' ' | sed 's/ $//')"
is "audit: local rows carry the share as their limit" "5" \
	"$(sql "SELECT DISTINCT limit_value FROM decisions WHERE reason = 'local' AND rule = 'fw'")"
is "audit: fw in Redis before and after (reason limit, allowed)" "3" \
	"$(rows "rule = 'fw' AND reason = 'limit' AND allowed = 1")"
is "audit: the last fw row is Redis's" "limit" \
	"$(sql "SELECT reason FROM decisions WHERE rule = 'fw' ORDER BY id DESC LIMIT 1")"

REPORT=$TOP/reports/rlgate-report
"$REPORT" --verify "$AUDIT_DB" > "$T/verify.out" 2>&1
is "rlgate-report --verify: the local rows hold their share (exit 0)" 0 "$?"
check "--verify replayed the local rows per process" \
	grep -q "fw (local)" "$T/verify.out"
# A hand-made audit: fw's 5 local admissions twice over, in one process.
audit_v1 "$AUDIT_DB" "$T/bad.db"
sqlite3 "$T/bad.db" "INSERT INTO decisions (ts_ms, request_id, rule, key,
	algorithm, allowed, reason, cost, limit_value, window_ms, burst)
	SELECT ts_ms + 1, request_id || 'x', rule, key, algorithm, allowed,
	reason, cost, limit_value, window_ms, burst FROM decisions
	WHERE reason = 'local' AND rule = 'fw' AND allowed = 1"
"$REPORT" --verify "$T/bad.db" > "$T/verify-bad.out" 2>&1
rc=$?
is "--verify exits 1 when local rows exceed the share" 1 "$rc"
check "--verify names the local violation" grep -q "fw (local)" "$T/verify-bad.out"

curl -s "$BASE/rlgate-status/metrics" > "$T/metrics.txt"
is "/metrics: local allows" 26 \
	"$(awk '$1 == "rlgate_local_decisions_total{result=\"allow\"}" { print $2 }' "$T/metrics.txt")"
is "/metrics: local denials" 13 \
	"$(awk '$1 == "rlgate_local_decisions_total{result=\"deny\"}" { print $2 }' "$T/metrics.txt")"

# ---------------------------------------------------------------------------
# 2. The master kill under load (issue 28's measurement): 3 masters and 3
# replicas, fixed_window 8 per 2 s on one key per master, local_share =
# 1/2 (4), curl loops on the three keys; kill -9 of one master. Its key is
# decided locally until its replica takes over, within 4 per window; the
# other keys never; Redis decides again after.
start_cluster || exit 1
M=("${CLUSTER_PORTS[@]:0:3}")
VICTIM=${M[0]}
declare -A KEY
for i in $(seq 1 300); do
	p=$(cluster_master_of "$(redis-cli -p "${M[2]}" CLUSTER KEYSLOT "rl:{lf:k$i}")")
	[ -n "$p" ] && [ -z "${KEY[$p]:-}" ] && KEY[$p]=k$i
	[ "${#KEY[@]}" = 3 ] && break
done
is "cluster: a key on each master" 3 "${#KEY[@]}"
mkdir -p "$DOCROOT/lf" && echo lf > "$DOCROOT/lf/item"
AUDIT_DB=$T/cluster.db
cat > "$T/cluster.ini" <<EOF
[gateway]
workers = 2
status_path = /rlgate-status

[redis]
mode = cluster
address = 127.0.0.1:$VICTIM 127.0.0.1:${M[1]}
connect_timeout = 200ms
timeout = 300ms
on_error = local
local_share = 1/2

[audit]
database = $AUDIT_DB
flush_interval = 20ms

[rule:lf]
path = /lf/*
key = {query.k}
limit = 8
window = 2s
EOF
RLGATE_PORT= HTTP_PORT=
start_rlgate "$T/cluster.ini" rlgate-cluster || exit 1
start_shipped_lighttpd "include \"$TOP/conf/lighttpd-status.conf\"" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
load() {	# load KEY: until $T/stop
	while [ ! -e "$T/stop" ]; do status --max-time 10 "$BASE/lf/item?k=$1" > /dev/null; done
}
LOADERS=()
for p in "${M[@]}"; do load "${KEY[$p]}" & LOADERS+=("$!"); PIDS+=("$!"); done
sleep 2
kill -9 "${CLUSTER_PID[$VICTIM]}"; wait "${CLUSTER_PID[$VICTIM]}" 2>/dev/null
VK=${KEY[$VICTIM]}
back() { [ "$(rows "key = '$VK' AND reason = 'limit' AND id > (SELECT max(id) FROM decisions WHERE reason = 'local')")" -ge 5 ]; }
check "cluster: Redis decides the killed master's key again after the failover" wait_for 30 back
sleep 1
touch "$T/stop"; for p in "${LOADERS[@]}"; do wait "$p"; done
sleep 0.5

LA=$(rows "reason = 'local' AND allowed = 1"); LD=$(rows "reason = 'local' AND allowed = 0")
echo "# cluster: local decisions for $VK: $LA admitted, $LD denied"
check "cluster: the killed master's key was decided locally" test "$LA" -gt 0
is "cluster: the other masters' keys never locally" 0 "$(rows "reason = 'local' AND key <> '$VK'")"
is "cluster: no redis_error row (on_error = local)" 0 "$(rows "reason = 'redis_error'")"
# Replays the local rows of VK as fixed windows of 2 s: "admitted denied"
# per window; each at most 4 admitted, and exactly 4 where one was denied.
sql "SELECT ts_ms, allowed FROM decisions WHERE reason = 'local' ORDER BY ts_ms, id" |
	awk -F'|' '{ if ($2 == 1 && (s == "" || $1 >= s + 2000)) { if (s != "") print a, d; s = $1; a = 0; d = 0 }
		if ($2 == 1) a++; else d++ } END { if (s != "") print a, d }' > "$T/windows.txt"
sed 's/^/# local window: admitted denied: /' "$T/windows.txt"
is "cluster: every local window admitted at most 4" 0 "$(awk '$1 > 4' "$T/windows.txt" | wc -l)"
is "cluster: a local window with a denial admitted exactly 4" 0 "$(awk '$2 > 0 && $1 != 4' "$T/windows.txt" | wc -l)"
check "cluster: some local window was full (the load made it exact)" grep -q '^4 [1-9]' "$T/windows.txt"
curl -s "$BASE/rlgate-status/metrics" > "$T/metrics.txt"
is "cluster: /metrics counted the local admissions" "$LA" \
	"$(awk '$1 == "rlgate_local_decisions_total{result=\"allow\"}" { print $2 }' "$T/metrics.txt")"
is "cluster: /metrics counted the local denials" "$LD" \
	"$(awk '$1 == "rlgate_local_decisions_total{result=\"deny\"}" { print $2 }' "$T/metrics.txt")"
"$REPORT" --verify "$AUDIT_DB" > "$T/verify-cluster.out" 2>&1
is "cluster: rlgate-report --verify exits 0 (Redis's and the local rows)" 0 "$?"

finish
