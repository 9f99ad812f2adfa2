#!/bin/bash
# Event loops kept busy, with real processes: rlgate with 2 event loops
# behind lighttpd (conf/lighttpd.conf as shipped), 32 concurrent clients
# (ab), and a slow Redis: two other clients keep it busy with 10 ms Lua
# scripts back to back, so every decision waits for Redis (but less than
# [redis] timeout).
#
# The web server must see back-pressure, not errors: requests wait (in
# rlgate's loops and listen backlog) and all complete with 200; lighttpd
# logs no backend error; every decision is Redis's (no redis_error). Memory stays
# bounded: rlgate's peak resident size (VmHWM) after a second identical
# wave is what it was after the first, so nothing grows per request.
. "$(dirname "$0")/../lib.sh"

WORKERS=2
CLIENTS=32
N=400		# requests per wave

start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
mkdir -p "$DOCROOT/busy"
echo "busy content" > "$DOCROOT/busy/item"

cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = $WORKERS

[redis]
address = 127.0.0.1:$REDIS_PORT
timeout = 500ms

[audit]
database = $AUDIT_DB
flush_interval = 20ms

[rule:busy]
path = /busy/*
key = {ip}
limit = 100000000
window = 1s
EOF
# Under AddressSanitizer (make test SANITIZE=1) freed memory is held in a
# quarantine by design; without one, VmHWM measures rlgate, not ASan.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0 \
	start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd 'server.modules += ( "mod_accesslog" )
accesslog.filename = "'"$T"'/access.log"' || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

vm() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$RLGATE_PID/status"; }

# Redis slow: 10 ms scripts back to back from two other clients, until
# told. Two, so that one client's turn between its scripts (a reply read,
# the next call sent: long on a loaded machine, and rlgate's calls all go
# through meanwhile) is mostly covered by the other's script.
evals() { rcli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_eval:calls=\([0-9]*\).*/\1/p'; }
busy() { [ "$(evals)" -ge $(( ${1:-0} + 2 )) ]; }
slow_redis() {
	local before i; before=$(evals)
	SLOW=()
	for i in 1 2; do
		redis-cli -p "$REDIS_PORT" -r 100000 EVAL "$BUSY_LUA" 0 10000 > /dev/null 2>&1 &
		SLOW+=("$!")
		PIDS+=("$!")
	done
	# The load starts only once Redis is busy.
	wait_for 10 busy "${before:-0}" || echo "# the busy scripts did not start"
}

# wave NAME: N requests from CLIENTS clients against a slow Redis.
wave() {
	slow_redis
	ab_run -r -s 60 -n $N -c $CLIENTS "$BASE/busy/item"
	kill "${SLOW[@]}"; wait "${SLOW[@]}" 2>/dev/null
	is "$1: $N requests from $CLIENTS clients on $WORKERS event loops all complete, none failed, all 200" \
		"$N 0 0" "$AB_COMPLETE $AB_FAILED $AB_NON2XX"
}

wave "wave 1"
hwm1=$(vm VmHWM)
check "audit: every decision of wave 1 recorded" wait_for 10 rows_at_least $N "rule='busy'"
avg=$(sql "SELECT avg(latency_us) / 1000 FROM decisions WHERE rule='busy'" | cut -d. -f1)
check "Redis was slow: a decision took $avg ms on average (>= 5)" [ "${avg:-0}" -ge 5 ]

wave "wave 2"
hwm2=$(vm VmHWM)
rss=$(vm VmRSS)
check "audit: every decision of both waves recorded" wait_for 10 rows_at_least $((2 * N)) "rule='busy'"
is "audit: every decision is Redis's, none fell back to on_error" 0 "$(rows "reason='redis_error'")"
served() { [ "$(grep -c '"GET /busy/item HTTP/1.0" 200 ' "$T/access.log")" -ge $((2 * N)) ]; }
check "lighttpd answered every request 200 (its access log)" wait_for 10 served
check "lighttpd logged no backend error" bash -c "! grep -Eqi 'fastcgi|backend|connect' '$T/lighttpd.log'"
check "memory bounded: VmHWM ${hwm1} kB after wave 1, ${hwm2} kB after wave 2 (growth <= 1024 kB), VmRSS ${rss} kB" \
	[ $((hwm2 - hwm1)) -le 1024 ]
check "memory bounded: VmHWM under 64 MB" [ "$hwm2" -le 65536 ]
check "rlgate survived" kill -0 "$RLGATE_PID"
finish
