#!/bin/bash
# One decision per request (issue 21): a request is counted only when every
# rule it matches admits it, as nginx limit_req does with several zones; a
# rule that would have admitted a request another rule denied records it as
# other_rule. Real redis-server, rlgate and lighttpd (conf/lighttpd.conf as
# shipped), driven with curl and ab, checked in Redis and in the audit
# database, and replayed by rlgate-report --verify. Each case has its own
# Host, so that its rules (host = ...) see only its requests.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
for d in api user mix/a mix/b dry dc race; do
	mkdir -p "$DOCROOT/$d"
	echo "$d" > "$DOCROOT/$d/item"
done
echo list > "$DOCROOT/user/list"

cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 2

$(ini_redis_audit)

; 1. The issue's case: narrow inside wide, both per client address.
[rule:narrow]
host = nw.test
path = /api/*
limit = 3
window = 1m

[rule:wide]
host = nw.test
path = /*
limit = 5
window = 1m

; 2. Three algorithms on one request: sliding_log denies, the others
; would admit (leaky_bucket holds each admitted request 100 ms at most).
[rule:mix_log]
host = mix.test
path = /mix/a/*
algorithm = sliding_log
limit = 4
window = 1m

[rule:mix_tb]
host = mix.test
path = /mix/*
algorithm = token_bucket
limit = 6
window = 1h
burst = 6

[rule:mix_leaky]
host = mix.test
path = /mix/*
algorithm = leaky_bucket
limit = 10
window = 1s
burst = 100

; 3. Dry run: d_small would deny from the third request on and blocks
; nothing; d_big admits all; d_enforce denies from the sixth.
[rule:d_enforce]
host = dry.test
path = /dry/*
limit = 5
window = 1m

[rule:d_small]
host = dry.test
path = /dry/*
limit = 2
window = 1m
dry_run = yes

[rule:d_big]
host = dry.test
path = /dry/*
limit = 100
window = 1m
dry_run = yes

; 4. The deny cache: dc_a's remembered denial decides without Redis.
[rule:dc_a]
host = dc.test
path = /dc/*
limit = 2
window = 1m
deny_cache = on

[rule:dc_b]
host = dc.test
path = /dc/*
limit = 100
window = 1m

; 5. Many clients at once on one key, three rules: fixed_window binds.
[rule:r_fw]
host = race.test
path = /race/*
limit = 50
window = 1m

[rule:r_gcra]
host = race.test
path = /race/*
algorithm = gcra
limit = 70
window = 1h
burst = 70

[rule:r_log]
host = race.test
path = /race/*
algorithm = sliding_log
limit = 60
window = 1m
EOF

check "rlgate -t accepts the configuration" "$RLGATE" -t -c "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

# codes HOST PATH N: the status codes of N requests in a row, on one line.
codes() {
	local i out=""
	for i in $(seq "$3"); do out="$out $(status -H "Host: $1" "$BASE$2")"; done
	echo $out
}
# fcgi_status PATH: a FastCGI responder request straight to rlgate; prints
# the status code it answers.
fcgi_status() {
	env -i REQUEST_METHOD=GET REQUEST_URI="$1" REMOTE_ADDR=127.0.0.1 \
	    SERVER_PROTOCOL=HTTP/1.1 cgi-fcgi -bind -connect "127.0.0.1:$RLGATE_PORT" |
	    sed -n '1s/^Status: \([0-9]*\).*/\1/p'
}
# reasons RULE: "reason:allowed:count" per group, sorted, on one line.
reasons() {
	sql "SELECT reason || ':' || allowed || ':' || count(*) FROM decisions
	    WHERE rule='$1' GROUP BY reason, allowed ORDER BY reason, allowed" | paste -sd' '
}

# 1. narrow 3/min inside wide 5/min: ten requests to /api/item admit 3;
#    the 7 narrow denied cost wide nothing, so /user/list gets 2 more.
is "narrow/wide: 3 of 10 /api/item admitted" \
	"200 200 200 429 429 429 429 429 429 429" "$(codes nw.test /api/item 10)"
# The 11th: narrow denies it; wide, with 2 left, is in the headers only.
curl -s -D "$T/h429" -o "$T/b429" -H "Host: nw.test" "$BASE/api/item"
is "a 429 names only the rule that denied" '["narrow"]' \
	"$(sed -n 's/.*"violated-policies":\(\[[^]]*\]\).*/\1/p' "$T/b429")"
check "and shows wide's 2 left" grep -q '^RateLimit: "narrow";r=0;t=[0-9]*, "wide";r=2;t=' "$T/h429"
is "narrow/wide: wide kept 2 for /user/list" "200 200 429" "$(codes nw.test /user/list 3)"
is "redis: narrow counted 3" 3 "$(rcli HGET 'rl:{narrow:127.0.0.1}' count)"
is "redis: wide counted 5 (3 + 2), not 12" 5 "$(rcli HGET 'rl:{wide:127.0.0.1}' count)"
wait_for 10 rows_at_least 25 "rule IN ('narrow', 'wide')"
is "audit: narrow 3 allowed, 8 denied by its limit" "limit:0:8 limit:1:3" "$(reasons narrow)"
is "audit: wide 5 allowed, 1 denied by its limit, 8 other_rule" \
	"limit:0:1 limit:1:5 other_rule:0:8" "$(reasons wide)"
is "audit: the other_rule rows are narrow's denials (same requests, 429)" 8 \
	"$(sql "SELECT count(*) FROM decisions w JOIN decisions n USING (request_id)
	    WHERE w.rule='wide' AND w.reason='other_rule' AND n.rule='narrow'
	    AND n.reason='limit' AND n.allowed=0 AND w.status=429 AND n.status=429")"
is "audit: other_rule rows show wide's state kept: 2 remaining" "8|2|2" \
	"$(sql "SELECT count(*), min(remaining), max(remaining) FROM decisions WHERE rule='wide' AND reason='other_rule'")"

# 2. Three algorithms mixed: sliding_log's denials count in neither
#    token_bucket nor leaky_bucket.
is "mixed: sliding_log admits 4 of 8" "200 200 200 200 429 429 429 429" "$(codes mix.test /mix/a/item 8)"
is "mixed: token_bucket kept 2 of its 6 tokens" "200 200 429" "$(codes mix.test /mix/b/item 3)"
is "redis: sliding_log logged 4 admissions" 4 "$(rcli ZCARD 'rl:{mix_log:127.0.0.1}')"
wait_for 10 rows_at_least 30 "rule LIKE 'mix_%'"
is "audit: sliding_log 4 allowed, 4 denied" "limit:0:4 limit:1:4" "$(reasons mix_log)"
is "audit: token_bucket 6 allowed, 1 denied, 4 other_rule" \
	"limit:0:1 limit:1:6 other_rule:0:4" "$(reasons mix_tb)"
is "audit: leaky_bucket 6 allowed, 5 other_rule" "limit:1:6 other_rule:0:5" "$(reasons mix_leaky)"
is "audit: leaky_bucket's admitted rows carry their delay (0 to 100 ms)" 6 \
	"$(sql "SELECT count(*) FROM decisions WHERE rule='mix_leaky' AND allowed=1 AND delay_ms BETWEEN 0 AND 100")"

# 3. Dry run: never blocks; what it would deny is not counted; what it
#    would admit is counted only with the request.
is "dry run: only d_enforce denies (5 of 8 admitted)" \
	"200 200 200 200 200 429 429 429" "$(codes dry.test /dry/item 8)"
is "redis: d_enforce counted 5" 5 "$(rcli HGET 'rl:{d_enforce:127.0.0.1}' count)"
is "redis: d_small counted its 2, not what it would deny" 2 "$(rcli HGET 'rl:{d_small:127.0.0.1}' count)"
is "redis: d_big counted the 5 admitted requests" 5 "$(rcli HGET 'rl:{d_big:127.0.0.1}' count)"
wait_for 10 rows_at_least 24 "rule LIKE 'd\_%' ESCAPE '\\'"
is "audit: d_small 2 counted, 6 dry_run" "dry_run:0:6 limit:1:2" "$(reasons d_small)"
is "audit: d_big 5 counted, 3 other_rule" "limit:1:5 other_rule:0:3" "$(reasons d_big)"
is "audit: d_enforce 5 allowed, 3 denied" "limit:0:3 limit:1:5" "$(reasons d_enforce)"
is "audit: 3 of those dry_run rows were answered 429 (d_enforce denied)" 3 \
	"$(sql "SELECT count(*) FROM decisions WHERE rule='d_small' AND reason='dry_run' AND status=429")"

# 4. Deny cache: the third request is denied by Redis and remembered; the
#    next three are decided without Redis, their dc_b rows other_rule.
f0=$(redis_calls fcall)
is "deny cache: 2 of 6 admitted" "200 200 429 429 429 429" "$(codes dc.test /dc/item 6)"
is "deny cache: Redis decided only the first 3 (FCALL calls)" 3 "$(( $(redis_calls fcall) - f0 ))"
is "redis: dc_b counted the 2 admitted" 2 "$(rcli HGET 'rl:{dc_b:127.0.0.1}' count)"
wait_for 10 rows_at_least 12 "rule LIKE 'dc\_%' ESCAPE '\\'"
is "audit: dc_a 2 allowed, 1 limit, 3 local_cache" "limit:0:1 limit:1:2 local_cache:0:3" "$(reasons dc_a)"
is "audit: dc_b 2 allowed, 4 other_rule" "limit:1:2 other_rule:0:4" "$(reasons dc_b)"
is "audit: dc_b's unasked rows have no numbers, the asked one has" "3 1" \
	"$(sql "SELECT sum(remaining IS NULL), sum(remaining = 98) FROM decisions WHERE rule='dc_b' AND reason='other_rule'" | tr '|' ' ')"

# 5. 20 clients at once, 300 requests, one key, three rules: exactly the
#    tightest limit passes, and only it is counted anywhere.
ab_run -n 300 -c 20 -H "Host: race.test" "$BASE/race/item"
is "race: 300 complete" 300 "$AB_COMPLETE"
is "race: exactly 250 denied (50 admitted)" 250 "$AB_NON2XX"
is "redis: fixed_window counted 50" 50 "$(rcli HGET 'rl:{r_fw:127.0.0.1}' count)"
is "redis: sliding_log logged 50, not 60" 50 "$(rcli ZCARD 'rl:{r_log:127.0.0.1}')"
wait_for 10 rows_at_least 900 "rule LIKE 'r\_%' ESCAPE '\\'"
is "audit: r_fw 50 allowed, 250 denied" "limit:0:250 limit:1:50" "$(reasons r_fw)"
is "audit: r_gcra 50 allowed, 250 other_rule" "limit:1:50 other_rule:0:250" "$(reasons r_gcra)"
is "audit: r_log 50 allowed, 250 other_rule" "limit:1:50 other_rule:0:250" "$(reasons r_log)"

stop_rlgate		# flushes every queued row
"$TOP/reports/rlgate-report" --verify "$AUDIT_DB" > "$T/verify.out" 2>&1
is "rlgate-report --verify: every limit held" 0 $?
is "and it says so" "ok: every limit held" "$(tail -1 "$T/verify.out")"
# The audit is what makes that true: other_rule rows recorded as admitted
# (what per-rule counting did) break wide's 5 per minute.
audit_v1 "$AUDIT_DB" "$T/forged.db"
sqlite3 "$T/forged.db" "UPDATE decisions SET allowed=1, reason='limit' WHERE rule='wide' AND reason='other_rule'"
"$TOP/reports/rlgate-report" --verify "$T/forged.db" > "$T/forged.out" 2>&1
is "--verify fails when other_rule rows count as admitted" 1 $?
check "naming wide" grep -q '^FAIL rule wide (' "$T/forged.out"

# 7. One call per batch (issue 27): one loop, Redis stopped while request
#    A's call waits; B to E arrive meanwhile and make the next batch. B, C
#    and D share key x of b_narrow (2 per minute) and all have b_wide on
#    their own key; E is on key y. A takes x's first, so of B, C and D one
#    is admitted and two are denied by b_narrow, whose b_wide then counts
#    nothing; E is admitted, whatever the order in the batch.
cat > "$T/batch.ini" <<EOF2
[gateway]
workers = 1
[redis]
address = 127.0.0.1:$REDIS_PORT
timeout = 10s
[audit]
database = $T/batch.db
flush_interval = 20ms
[rule:b_narrow]
path = /b/*
key = {query.k}
limit = 2
window = 1m
[rule:b_wide]
path = /b/*
key = {query.id}
algorithm = gcra
limit = 10
window = 1m
EOF2
unset RLGATE_PORT
start_rlgate "$T/batch.ini" rlgate-batch || exit 1
batch_status() { fcgi_status "/b/item?k=$1&id=$2" > "$T/batch-$2.code"; }
f0=$(redis_calls fcall)
kill -STOP "$REDIS_PID"
batch_status x a &
bps=($!)
sleep 0.5	# A sent first: only the order of arrival depends on it, no result
for id in b c d; do batch_status x $id & bps+=($!); done
batch_status y e &
bps+=($!)
sleep 0.5
kill -CONT "$REDIS_PID"
wait "${bps[@]}"
is "batch: A admitted; of B, C, D on key x one admitted; E admitted" "200 1 2 200" \
	"$(cat "$T/batch-a.code") $(cat "$T/batch-"[bcd].code | grep -c 200) $(cat "$T/batch-"[bcd].code | grep -c 429) $(cat "$T/batch-e.code")"
f1=$(redis_calls fcall)
check "batch: 5 requests in at most 2 calls ($((f1 - f0)))" [ $((f1 - f0)) -ge 1 -a $((f1 - f0)) -le 2 ]
is "redis: key x counted twice (its limit), y once" "2 1" \
	"$(rcli HGET 'rl:{b_narrow:x}' count) $(rcli HGET 'rl:{b_narrow:y}' count)"
is "redis: b_wide counted only the admitted: a, e and one of b, c, d" 3 \
	"$(rcli EXISTS 'rl:{b_wide:a}' 'rl:{b_wide:b}' 'rl:{b_wide:c}' 'rl:{b_wide:d}' 'rl:{b_wide:e}')"
# The library deleted between two batches: the next one loads it again and
# counts exactly.
rcli FUNCTION FLUSH > /dev/null
is "batch after FUNCTION FLUSH: x full, y admitted" "429 200" \
	"$(fcgi_status '/b/item?k=x&id=f') $(fcgi_status '/b/item?k=y&id=g')"
is "redis: y counted twice now" 2 "$(rcli HGET 'rl:{b_narrow:y}' count)"
# Denied requests, then one on fresh keys, in one batch (one call): the
# fresh one is decided on its own: answered 200, counted in Redis, and
# recorded as an admission, whatever the denials before it in the call.
# As above, H holds the loop while F and G (x, full) and then I arrive.
f0=$(redis_calls fcall)
kill -STOP "$REDIS_PID"
batch_status h1 h &
bps=($!)
sleep 0.5
for id in f2 g2; do batch_status x $id & bps+=($!); done
sleep 0.5	# I after F and G: only the order in the batch depends on it
batch_status fresh i &
bps+=($!)
sleep 0.5
kill -CONT "$REDIS_PID"
wait "${bps[@]}"
f1=$(redis_calls fcall)
is "batch of denials then a fresh key: H 200, F and G 429, I 200" "200 429 429 200" \
	"$(cat "$T/batch-h.code" "$T/batch-f2.code" "$T/batch-g2.code" "$T/batch-i.code" | paste -sd' ')"
is "... in 2 calls: H's, then F, G and I in one" 2 $((f1 - f0))
is "... I counted in both its rules' keys" "1 1" \
	"$(rcli HGET 'rl:{b_narrow:fresh}' count) $(rcli EXISTS 'rl:{b_wide:i}')"
is "... F and G counted nowhere (x still 2)" "2 0" \
	"$(rcli HGET 'rl:{b_narrow:x}' count) $(rcli EXISTS 'rl:{b_wide:f2}' 'rl:{b_wide:g2}')"
stop_rlgate
is "... audit: I admitted by both rules (reason limit), F and G not counted by b_wide" \
	"b_narrow:1:limit b_wide:0:other_rule b_wide:0:other_rule b_wide:1:limit" \
	"$(AUDIT_DB=$T/batch.db sql "SELECT rule || ':' || allowed || ':' || reason FROM decisions
	    WHERE key IN ('fresh', 'i', 'f2', 'g2') ORDER BY 1" | paste -sd' ')"
is "audit: b_narrow 6 admitted, 5 denied; b_wide 6 admitted, 5 other_rule" \
	"limit:0:5 limit:1:6|limit:1:6 other_rule:0:5" \
	"$(AUDIT_DB=$T/batch.db reasons b_narrow)|$(AUDIT_DB=$T/batch.db reasons b_wide)"
"$TOP/reports/rlgate-report" --verify "$T/batch.db" > "$T/batch-verify.out" 2>&1
is "batch: rlgate-report --verify: every limit held" 0 $?

# A call that failed is not an undo's business: on one server a request's
# rules are one call, with nothing counted to take back. (One loop, so the
# failed call takes the place of the counted one before it: an undo built
# from that reply, already freed, was once sent.)
cat > "$T/one.ini" <<EOF2
[gateway]
workers = 1
[redis]
address = 127.0.0.1:$REDIS_PORT
on_error = deny
[audit]
database =
[rule:one_a]
path = /*
limit = 100
window = 1m
[rule:one_b]
path = /*
limit = 100
window = 1m
EOF2
unset RLGATE_PORT
start_rlgate "$T/one.ini" rlgate-one || exit 1
first=$(fcgi_status /dc/item)
stop_redis
is "one server: counted, then Redis stopped: on_error deny" "200 503" \
	"$first $(fcgi_status /dc/item)"
is "and no undo was tried" 0 "$(grep -c undo "$T/rlgate-one.log")"
stop_rlgate

# 6. Redis Cluster: narrow and wide on different masters. Each master
#    counts its own rule; a request narrow denies had been counted by wide
#    on the other master, and is taken back (rlgate_undo): wide keeps 2.
declare -f start_cluster > /dev/null ||
	{ not_ok "cluster: tests/lib.sh has no start_cluster (branch redis)"; finish; exit; }
start_cluster || exit 1
kslot() { redis-cli -p "$CLUSTER_SEED" CLUSTER KEYSLOT "$1"; }
for i in 0 1 2 3 4 5 6 7 8 9; do
	N=cnarrow$i W=cwide$i
	MN=$(cluster_master_of "$(kslot "rl:{$N:127.0.0.1}")")
	MW=$(cluster_master_of "$(kslot "rl:{$W:127.0.0.1}")")
	[ -n "$MN" ] && [ -n "$MW" ] && [ "$MN" != "$MW" ] && break
done
check "cluster: $N and $W live on different masters ($MN, $MW)" \
	test -n "$MN" -a -n "$MW" -a "$MN" != "$MW"
# The race's three rules (as in 5), each on another master.
RF=crfw; RG=; RL=
MF=$(cluster_master_of "$(kslot "rl:{$RF:127.0.0.1}")")
for i in $(seq 0 30); do
	m=$(cluster_master_of "$(kslot "rl:{crgc$i:127.0.0.1}")")
	[ -z "$RG" ] && [ "$m" != "$MF" ] && { RG=crgc$i; MG=$m; }
	m=$(cluster_master_of "$(kslot "rl:{crlog$i:127.0.0.1}")")
	[ -z "$RL" ] && [ "$m" != "$MF" ] && [ -n "$RG" ] && [ "$m" != "$MG" ] && RL=crlog$i
done
check "cluster race: $RF, $RG and $RL on three masters" test -n "$RG" -a -n "$RL"
AUDIT_DB=$T/cluster.db
cat > "$T/cluster.ini" <<EOF2
[gateway]
workers = 2
status_path = /rlgate-status

$(ini_redis_audit "mode = cluster" "address = 127.0.0.1:$CLUSTER_SEED")

[rule:$N]
host = nw.test
path = /api/*
limit = 3
window = 1m

[rule:$W]
host = nw.test
path = /*
limit = 5
window = 1m

[rule:cl]
path = /cl/*
key = {query.u}
limit = 5
window = 1h

[rule:$RF]
host = crace.test
path = /race/*
limit = 50
window = 1m

[rule:$RG]
host = crace.test
path = /race/*
algorithm = gcra
limit = 70
window = 1h
burst = 70

[rule:$RL]
host = crace.test
path = /race/*
algorithm = sliding_log
limit = 60
window = 1m
EOF2
check "rlgate -t accepts the cluster configuration" "$RLGATE" -t -c "$T/cluster.ini"
unset RLGATE_PORT HTTP_PORT
start_rlgate "$T/cluster.ini" rlgate-cluster || exit 1
start_shipped_lighttpd "include \"$TOP/conf/lighttpd-status.conf\"" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
curl -s -o "$T/health.json" "$BASE/rlgate-status/health"
is "cluster /health: the 3 masters, each reachable" \
	"$(printf '127.0.0.1:%s master true\n' "${CLUSTER_PORTS[@]:0:3}" | sort | paste -sd,)" \
	"$(jq -r '.redis.nodes[] | "\(.address) \(.role) \(.reachable)"' "$T/health.json" | sort | paste -sd,)"
is "cluster /metrics: the 3 masters up" \
	"$(printf 'rlgate_redis_node_up{node="127.0.0.1:%s"} 1\n' "${CLUSTER_PORTS[@]:0:3}" | sort | paste -sd,)" \
	"$(curl -s "$BASE/rlgate-status/metrics" | grep '^rlgate_redis_node_up{' | sort | paste -sd,)"
f0=$(redis_calls fcall "$MW")
is "cluster: 3 of 10 /api/item admitted" \
	"200 200 200 429 429 429 429 429 429 429" "$(codes nw.test /api/item 10)"
is "cluster: $W kept 2 for /user/list" "200 200 429" "$(codes nw.test /user/list 3)"
is "cluster: $N's master counted 3" 3 "$(redis-cli -p "$MN" HGET "rl:{$N:127.0.0.1}" count)"
is "cluster: $W's master counted 5, the 7 narrow denied taken back" 5 \
	"$(redis-cli -p "$MW" HGET "rl:{$W:127.0.0.1}" count)"
# 13 rlgate_decide calls for wide, and an rlgate_undo for each of the 7.
is "cluster: $W's master ran 13 decisions and 7 undos" 20 "$(( $(redis_calls fcall "$MW") - f0 ))"
wait_for 10 rows_at_least 23 "rule IN ('$N', '$W')"
is "cluster audit: $N 3 allowed, 7 denied" "limit:0:7 limit:1:3" "$(reasons "$N")"
is "cluster audit: $W 5 allowed, 1 denied, 7 other_rule" \
	"limit:0:1 limit:1:5 other_rule:0:7" "$(reasons "$W")"
is "cluster audit: other_rule rows show what $W holds after the undo: 2 left" "7|2|2" \
	"$(sql "SELECT count(*), min(remaining), max(remaining) FROM decisions WHERE rule='$W' AND reason='other_rule'")"
# rlgate-ctl on a cluster: keys spread over the masters, each found.
mkdir -p "$DOCROOT/cl" && echo cl > "$DOCROOT/cl/item"
for u in $(seq 1 12); do status -H "Host: cl.test" "$BASE/cl/item?u=u$u" > /dev/null; done
CTL="$TOP/fcgi/rlgate-ctl -c $T/cluster.ini"
is "rlgate-ctl list on a cluster: the 12 keys, from every master" \
	"$(printf 'u%s\n' $(seq 1 12) | sort | paste -sd' ')" "$($CTL list cl | paste -sd' ')"
held=0
for p in "${CLUSTER_PORTS[@]:0:3}"; do
	[ "$(redis-cli -p "$p" --scan --pattern 'rl:{cl:*}' | wc -l)" -gt 0 ] && held=$((held + 1))
done
is "and the 12 keys are on the 3 masters" 3 "$held"
is "rlgate-ctl peek on a cluster: $W's key at its master, 0 left" 0 \
	"$($CTL peek "$W" 127.0.0.1 | awk '$1 == "remaining" { print $2 }')"
is "rlgate-ctl peek: cl u7, 4 left" 4 "$($CTL peek cl u7 | awk '$1 == "remaining" { print $2 }')"
is "rlgate-ctl reset on a cluster" "deleted rl:{cl:u7}" "$($CTL reset cl u7)"
is "and the key is gone from its master" 0 \
	"$(redis-cli -p "$(cluster_master_of "$(kslot 'rl:{cl:u7}')")" EXISTS 'rl:{cl:u7}')"
is "peek after the reset: 5 left" 5 "$($CTL peek cl u7 | awk '$1 == "remaining" { print $2 }')"
# 5 on the cluster: 20 clients at once, 300 requests, three rules on three
# masters, a batch's calls one per slot: exactly the tightest limit
# passes, and the requests it denied are taken back wherever they counted.
mkdir -p "$DOCROOT/race" && echo race > "$DOCROOT/race/item"
ab_run -n 300 -c 20 -H "Host: crace.test" "$BASE/race/item"
is "cluster race: 300 complete, exactly 250 denied (50 admitted)" "300 250" "$AB_COMPLETE $AB_NON2XX"
cli() { redis-cli -c -p "$CLUSTER_SEED" "$@"; }
is "cluster race: fixed_window counted 50, sliding_log logged 50, not 60" "50 50" \
	"$(cli HGET "rl:{$RF:127.0.0.1}" count) $(cli ZCARD "rl:{$RL:127.0.0.1}")"
is "cluster race: gcra holds 50 of its 70 (remaining 20)" 20 \
	"$($CTL peek "$RG" 127.0.0.1 | awk '$1 == "remaining" { print $2 }')"
wait_for 10 rows_at_least 900 "rule LIKE 'cr%'"
# Each master decides its own rule, so until a denied request's undo
# reaches the others they hold its count: there a rule may deny on its
# own where one server's single call says other_rule (the looser $RG and
# $RL), and $RF's admission of a request be taken back because another
# master denied it (other_rule for $RF). Less admitted, never more: the
# admitted rows are exactly 50 all the same.
is "cluster race audit: $RF 50 allowed, 250 denied by its limit or another rule's" "50 250 0" \
	"$(sql "SELECT sum(allowed), sum(1 - allowed), sum(reason NOT IN ('limit', 'other_rule'))
	    FROM decisions WHERE rule='$RF'" | tr '|' ' ')"
is "cluster race audit: $RF's admissions by its limit" "limit:1:50" \
	"$(reasons "$RF" | tr ' ' '\n' | grep ':1:')"
is "cluster race audit: $RG and $RL 300 rows each, 50 admitted" "300 50|300 50" \
	"$(sql "SELECT count(*), sum(allowed) FROM decisions WHERE rule='$RG'" | tr '|' ' ')|$(sql "SELECT count(*), sum(allowed) FROM decisions WHERE rule='$RL'" | tr '|' ' ')"
stop_rlgate
"$TOP/reports/rlgate-report" --verify "$AUDIT_DB" > "$T/verify-cluster.out" 2>&1
is "cluster: rlgate-report --verify: every limit held" 0 $?

# 8. One call per hash slot and batch (issue 27), on the cluster. As in 7,
#    A's call waits (its narrow key's master runs a 900 ms script) while B
#    to E arrive and make the next batch: B, C and D share narrow key x
#    (2 per minute), E is on y, and each has wide on a key of its own, on
#    slots over the masters. The batch is one call per slot it touches,
#    all of B, C and D's x in one; the two of them that x denies had wide
#    counted on another slot, taken back (an undo each). The others count
#    once, whatever the order in the batch.
cat > "$T/cbatch.ini" <<EOF2
[gateway]
workers = 1
[redis]
mode = cluster
address = 127.0.0.1:$CLUSTER_SEED
timeout = 10s
[audit]
database = $T/cbatch.db
flush_interval = 20ms
[rule:cb_narrow]
path = /cb/*
key = {query.k}
limit = 2
window = 1m
[rule:cb_wide]
path = /cb/*
key = {query.id}
limit = 10
window = 1m
EOF2
ks() { kslot "rl:{$1}"; }
MX=$(cluster_master_of "$(ks cb_narrow:x)")
others=$(for id in a b c d; do ks "cb_wide:$id"; done | grep -cvx "$(ks cb_narrow:x)")
check "cluster batch: no wide key of A to D shares x's slot ($others of 4 do not)" test "$others" -eq 4
S=$( (ks cb_narrow:x; ks cb_narrow:y; for id in b c d e; do ks "cb_wide:$id"; done) | sort -u | wc -l)
cfcalls() { local p n=0; for p in "${CLUSTER_PORTS[@]:0:3}"; do n=$((n + $(redis_calls fcall "$p"))); done; echo $n; }
unset RLGATE_PORT
start_rlgate "$T/cbatch.ini" rlgate-cbatch || exit 1
cb_status() { fcgi_status "/cb/item?k=$1&id=$2" > "$T/cb-$2.code"; }
f0=$(cfcalls)
# Held for 900 ms, below cluster-node-timeout: no failover starts.
redis-cli -p "$MX" EVAL "$BUSY_LUA" 0 900000 > /dev/null &
bps=($!)
mx_held() { ! timeout 0.05 redis-cli -p "$MX" PING > /dev/null 2>&1; }
wait_for 2 mx_held
cb_status x a &
bps+=($!)
sleep 0.15	# A sent first: only the order of arrival depends on it
for id in b c d; do cb_status x $id & bps+=($!); done
cb_status y e &
bps+=($!)
wait "${bps[@]}"
is "cluster batch: A admitted; of B, C, D on x one admitted; E admitted" "200 1 2 200" \
	"$(cat "$T/cb-a.code") $(cat "$T/cb-"[bcd].code | grep -c 200) $(cat "$T/cb-"[bcd].code | grep -c 429) $(cat "$T/cb-e.code")"
is "cluster batch: A's 2 calls, then one per slot of the batch's keys ($S) and 2 undos" \
	$((2 + S + 2)) $(( $(cfcalls) - f0 ))
is "cluster batch: x counted twice (its limit), y once" "2 1" \
	"$(redis-cli -c -p "$CLUSTER_SEED" HGET 'rl:{cb_narrow:x}' count) $(redis-cli -c -p "$CLUSTER_SEED" HGET 'rl:{cb_narrow:y}' count)"
n=0; for id in a b c d e; do
	n=$((n + $(redis-cli -c -p "$CLUSTER_SEED" EXISTS "rl:{cb_wide:$id}")))
done
is "cluster batch: wide holds only the admitted (a, e and one of b, c, d), the 2 denied undone" 3 "$n"
# The library deleted on every master between two batches: the next call
# loads it again and counts exactly.
for p in "${CLUSTER_PORTS[@]:0:3}"; do redis-cli -p "$p" FUNCTION FLUSH > /dev/null; done
is "cluster batch after FUNCTION FLUSH: x full, y admitted" "429 200" \
	"$(fcgi_status '/cb/item?k=x&id=f') $(fcgi_status '/cb/item?k=y&id=g')"
is "cluster: y counted twice now" 2 "$(redis-cli -c -p "$CLUSTER_SEED" HGET 'rl:{cb_narrow:y}' count)"
stop_rlgate
is "cluster batch audit: narrow 4 admitted, 3 denied; wide 4 admitted, 3 other_rule" \
	"limit:0:3 limit:1:4|limit:1:4 other_rule:0:3" \
	"$(AUDIT_DB=$T/cbatch.db reasons cb_narrow)|$(AUDIT_DB=$T/cbatch.db reasons cb_wide)"
"$TOP/reports/rlgate-report" --verify "$T/cbatch.db" > "$T/cbatch-verify.out" 2>&1
is "cluster batch: rlgate-report --verify: every limit held" 0 $?

finish
