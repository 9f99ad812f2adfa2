#!/bin/bash
# SIGHUP and SIGTERM under load, with real processes: redis-server, rlgate
# and lighttpd (conf/lighttpd.conf as shipped, with an access log) on
# loopback, driven by ab.
#
# 1. SIGHUP under load: a file with an error, or with no rule at all, is
#    refused and the running rules stay; a good file changes the limits at
#    once; twenty reloads in a row on top. Across all of it ab reports 0
#    failed requests and every answer 200, every request has its audit row,
#    and the rows show the limit changing in the middle of the run.
# 2. SIGTERM under load (a rule admitting 300 per second, so that both
#    200 and 429 are answered): rlgate finishes what it accepted and exits
#    0, and every request lighttpd got an answer from rlgate for has its
#    row, status for status, exactly once.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
for d in load mixed reload; do mkdir -p "$DOCROOT/$d"; echo "$d content" > "$DOCROOT/$d/item"; done

# conf LOAD_LIMIT RELOAD_LIMIT
conf() {
	cat <<EOF
[gateway]
workers = 8

[redis]
address = 127.0.0.1:$REDIS_PORT

[audit]
database = $AUDIT_DB
flush_interval = 20ms

[rule:load]
path = /load/*
limit = $1
window = 1s

[rule:mixed]
path = /mixed/*
limit = 300
window = 1s

[rule:reload]
path = /reload/*
key = {query.k}
limit = $2
window = 1m
EOF
}
conf 100000000 2 > "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd 'server.modules += ( "mod_accesslog" )
accesslog.filename = "'"$T"'/access.log"' || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
LOG=$T/rlgate.log

logged() { [ "$(grep -c "$1" "$LOG")" -ge "$2" ]; }
statuses() { local out="" i; for i in $(seq "$2"); do out="$out $(status "$BASE/reload/item?k=$1")"; done; echo $out; }

# ---- 1. SIGHUP under load ------------------------------------------------
N=30000
ab -q -n $N -c 8 "$BASE/load/item" > "$T/ab.1" 2>&1 &
AB=$!
sleep 1

# A broken file: refused, the old rules stay.
cp "$T/rlgate.ini" "$T/rlgate.good"
printf '[rule:broken]\nlimit = lots\nwindow = 1s\n' >> "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
check "broken file: refused and logged" wait_for 5 logged 'keeping the running configuration' 1
check "broken file: the log names the line" grep -q 'reload: .*rlgate.ini:[0-9]*: \[rule:broken\] limit' "$LOG"
is "broken file: the old limit (2 per minute) still applies" "200 200 429" "$(statuses a 3)"
# A file with no rule at all would limit nothing: refused the same way.
: > "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
check "empty file: refused and logged" wait_for 5 logged 'keeping the running configuration' 2
check "empty file: the log says why" grep -q 'reload: .*rlgate.ini: no \[rule:NAME\] section: rlgate would limit nothing' "$LOG"
is "empty file: the limit (2 per minute) still applies" "200 200 429" "$(statuses e 3)"
alive() { kill -0 "$1" 2>/dev/null; }
check "ab still running during the reloads" alive "$AB"

# A good file: new limits at once, for the load too.
conf 200000000 4 > "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
check "good file: loaded" wait_for 5 logged 'reload: .* loaded' 1
is "good file: the new limit (4 per minute) applies at once" "200 200 200 200 429" "$(statuses b 5)"
# Twenty more, back and forth between two good files, as fast as they go.
for i in $(seq 20); do
	if [ $((i % 2)) = 1 ]; then conf 300000000 4; else conf 200000000 4; fi > "$T/rlgate.ini.new"
	mv "$T/rlgate.ini.new" "$T/rlgate.ini"
	kill -HUP "$RLGATE_PID"
	sleep 0.05
done
check "all 21 good reloads loaded" wait_for 10 logged 'reload: .* loaded' 21
wait "$AB"
AB_COMPLETE=$(sed -n 's/^Complete requests: *//p' "$T/ab.1")
AB_FAILED=$(sed -n 's/^Failed requests: *//p' "$T/ab.1")
AB_NON2XX=$(sed -n 's/^Non-2xx responses: *//p' "$T/ab.1")
is "across every reload: $N complete, 0 failed, all 200" "$N 0 0" "$AB_COMPLETE $AB_FAILED ${AB_NON2XX:-0}"
check "audit: a row for every request" wait_for 10 rows_at_least $N "rule='load'"
is "audit: exactly one row for every request" "$N $N" \
	"$(sql "SELECT count(*), count(DISTINCT request_id) FROM decisions WHERE rule='load'" | tr '|' ' ')"
read -r before after later <<<"$(sql "SELECT sum(limit_value=100000000), sum(limit_value=200000000), sum(limit_value=300000000) FROM decisions WHERE rule='load'" | tr '|' ' ')"
# 300000000 only ever came from the burst: the load ran through it.
check "audit: the limit changed mid-run ($before rows at 100000000, $after at 200000000, $later at 300000000)" \
	[ "$before" -gt 0 -a "$after" -gt 0 -a "$later" -gt 0 -a "$((before + after + later))" = $N ]
check "rlgate kept running" alive "$RLGATE_PID"

# ---- 2. SIGTERM under load -------------------------------------------------
ab -q -r -n 1000000 -c 8 "$BASE/mixed/item" > "$T/ab.2" 2>&1 &
AB=$!
sleep 1.5
kill -TERM "$RLGATE_PID"
wait "$RLGATE_PID"
is "SIGTERM under load: rlgate exits 0" 0 $?
kill "$AB" 2>/dev/null; wait "$AB" 2>/dev/null
kill -TERM "$HTTPD_PID"; wait "$HTTPD_PID"	# flushes the access log
answered() { grep -c "\"GET /mixed/item HTTP/1.0\" $1 " "$T/access.log"; }
ok200=$(answered 200)
ok429=$(answered 429)
check "SIGTERM under load: both admissions and denials were answered ($ok200 + $ok429)" \
	[ "$ok200" -gt 0 -a "$ok429" -gt 0 ]
is "audit: every admitted request has its row, exactly" "$ok200" "$(rows "rule='mixed' AND status=200 AND allowed=1")"
is "audit: every denied request has its row, exactly" "$ok429" "$(rows "rule='mixed' AND status=429 AND allowed=0")"
is "audit: no other rows for the rule" "$((ok200 + ok429))" "$(rows "rule='mixed'")"
is "audit: no decision written twice" 0 "$(sql "SELECT count(*) - count(DISTINCT request_id) FROM decisions")"
check "the stop was logged" grep -q 'stopped' "$LOG"
# fcgi/audit_writer.c logs a loss as "audit: PATH: giving up at shutdown: ERR; N
# rows not written", and any failed write first as "cannot write: ...".
check "and no row was reported lost" bash -c "! grep -q -e 'giving up at shutdown' -e 'rows not written' '$LOG'"
check "and no audit write failed" bash -c "! grep -q 'audit: .*: cannot write: ' '$LOG'"
finish
