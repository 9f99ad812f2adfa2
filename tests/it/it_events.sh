#!/bin/bash
# The event loops at the FastCGI level: a
# real redis-server and a real rlgate on loopback, driven record by record
# with tests/tools/fcgi_raw (no web server in between), so that what is
# asserted is exactly what went over the wire. One event loop (workers = 1)
# throughout: what one loop does is what each loop does.
#
# 1. FCGI_KEEP_CONN: three nginx-style RESPONDER requests on one connection
#    against a limit of 2: 200, 200, 429, the connection open after each;
#    lighttpd-style AUTHORIZER requests get Status: 200 and Variable-*.
# 2. No pinning: 40 kept-alive idle connections, and a new one is served.
# 3. Batching: 21 requests that arrive while Redis is busy take at most 3
#    round trips (/metrics), each exactly decided and audited.
# 4. A leaky_bucket delay is a timer: a request to another rule, sent while
#    a delayed reply waits, is answered first; the delayed one then comes.
# 5. Protocol: GET_VALUES, UNKNOWN_TYPE, CANT_MPX_CONN, UNKNOWN_ROLE,
#    ABORT_REQUEST, a peer that does not speak FastCGI, PARAMS at 1 MiB;
#    over 1 MiB or 5000 params: 431 and an audit row; rlgate serves on.
# 6. Apache mod_authnz_fcgi's way: no KEEP_CONN, no STDIN at all.
# 7. SIGTERM while a delayed reply waits: it is sent, rlgate exits 0, the
#    decision is in the audit database.
# 0. rlgate -t: quiet at workers = 1, a warning at more loops than CPUs,
#    and engine = threads (gone) refused with file:line.
. "$(dirname "$0")/../lib.sh"

FCGI_RAW=$TOP/tests/tools/fcgi_raw
if [ ! -x "$FCGI_RAW" ]; then
	not_ok "tests/tools/fcgi_raw is built (make tests/tools/fcgi_raw)"
	finish
	exit 1
fi

start_redis || exit 1
AUDIT_DB=$T/audit.db
STATUS=/rlgate-status
cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 1
status_path = $STATUS

[redis]
address = 127.0.0.1:$REDIS_PORT
; longer than the busy script of section 3: rlgate waits for Redis
timeout = 3s

[audit]
database = $AUDIT_DB
flush_interval = 20ms

[rule:fw]
path = /fw/*
limit = 2
window = 1m

[rule:open]
path = /open/*
limit = 1000000
window = 1m

[rule:batch]
path = /batch/*
limit = 1000
window = 1m

; Section 7: the second of two at once is held about 2 s.
[rule:lbterm]
path = /lbterm/*
algorithm = leaky_bucket
limit = 1
window = 2s
burst = 1

; One request leaves per 2 s; one more may wait: of two at once, the
; second is held for 2 s less the time between them (a long window: a
; loaded machine's stalls cannot use it up).
[rule:lb]
path = /lb/*
algorithm = leaky_bucket
limit = 1
window = 2s
burst = 1
EOF
# ---- 0. rlgate -t ------------------------------------------------------------
is "rlgate -t at workers = 1: configuration OK and nothing else (stdout and stderr)" \
	"configuration OK" "$("$RLGATE" -t -c "$T/rlgate.ini" 2>&1)"
CPUS=$(getconf _NPROCESSORS_ONLN)
sed -e "s/^workers = 1$/workers = $((CPUS + 1))/" "$T/rlgate.ini" > "$T/many.ini"
"$RLGATE" -t -c "$T/many.ini" > "$T/many.out" 2>&1
is "rlgate -t at workers = $((CPUS + 1)) on $CPUS CPUs: exit 0, configuration OK" \
	"0 configuration OK" "$? $(tail -n 1 "$T/many.out")"
is "rlgate -t at workers = $((CPUS + 1)): warns on stderr, with file:line, that more loops than CPUs only add context switches" \
	"warning: $T/many.ini:2: [gateway] workers: $((CPUS + 1)) event loops on $CPUS CPUs: more loops than CPUs only add context switches" \
	"$(grep -o '^warning: .*: more loops than CPUs only add context switches' "$T/many.out")"
sed -e 's/^workers = 1$/workers = 1\nengine = threads/' "$T/rlgate.ini" > "$T/threads.ini"
"$RLGATE" -t -c "$T/threads.ini" > "$T/threads.out" 2>&1
is "rlgate -t with engine = threads: refused (exit 1), naming file:line and what to do" \
	"1 $T/threads.ini:3: [gateway] engine: \"threads\": the key is gone: rlgate has one engine" \
	"$? $(grep -o '^.*: the key is gone: rlgate has one engine' "$T/threads.out")"
check "and says to remove the line" grep -q 'remove this line' "$T/threads.out"
start_rlgate "$T/rlgate.ini" || exit 1
PID=$RLGATE_PID
LOG=$T/rlgate.log
ADDR=127.0.0.1:$RLGATE_PORT

raw() { "$FCGI_RAW" "$ADDR" "$@"; }
# joined: the lines of stdin on one line, " / " between them.
joined() { awk '{ printf "%s%s", (NR > 1 ? " / " : ""), $0 } END { print "" }'; }
# summary FILE: fcgi_raw's output joined, each STDOUT cut after its status.
summary() { sed -e 's/^\(STDOUT [0-9]* Status: [0-9]*\).*/\1/' "$1" | joined; }
# statuses FILE: the status of every reply, in order.
statuses() { sed -n 's/^STDOUT [0-9]* Status: \([0-9]*\).*/\1/p' "$1" | paste -sd ' '; }
# repeat N WORD: WORD N times, blank-separated.
repeat() { local i out=""; for i in $(seq "$1"); do out="$out $2"; done; echo ${out# }; }
# json FIELD LINE: the first value of "FIELD" in a reply line.
json() { grep -o "\"$1\":[0-9a-z]*" <<<"$2" | head -1 | cut -d: -f2; }
# metric NAME: its value on /metrics, asked for as nginx would (responder).
metric() {
	raw "request 1 responder close GET $STATUS/metrics" 'wait-reply 1' |
		sed -n "s/.*\\\\n$1 \([0-9.]*\)\\\\n.*/\1/p"
}
# sockets: the sockets rlgate holds (listener, Redis, FastCGI connections);
# idle: just the listener and the loop's Redis connection.
sockets() { ls -l "/proc/$PID/fd" 2>/dev/null | grep -c 'socket:'; }
idle() { [ "$(sockets)" = 2 ]; }
log_lines() { wc -l < "$LOG"; }
REPLY_OK='STDOUT 1 / END_REQUEST 1 app=0 proto=0'	# what ends a reply to id 1

# ---- 1. FCGI_KEEP_CONN -------------------------------------------------------
raw 'request 1 responder keep GET /fw/item 10.1.0.1' 'wait-reply 1' 'pending 100' \
    'request 1 responder keep GET /fw/item 10.1.0.1' 'wait-reply 1' 'pending 100' \
    'request 1 responder keep GET /fw/item 10.1.0.1' 'wait-reply 1' 'pending 300' \
    > "$T/keep.out"
is "keep-conn: 3 responder requests on one connection (limit 2): 200, 200, 429, and after each reply the connection stays open (PENDING, no EOF)" \
	"STDOUT 1 Status: 200 / $REPLY_OK / PENDING / STDOUT 1 Status: 200 / $REPLY_OK / PENDING / STDOUT 1 Status: 429 / $REPLY_OK / PENDING" \
	"$(summary "$T/keep.out")"
is "keep-conn: the replies' JSON counts down: remaining 1, then 0" "1 0" \
	"$(json remaining "$(sed -n 1p "$T/keep.out")") $(json remaining "$(sed -n 5p "$T/keep.out")")"
check "keep-conn: the 429 carries the quota-exceeded problem for rule fw" \
	grep -q '^STDOUT 1 Status: 429 Too Many Requests\\r\\n.*"violated-policies":\["fw"\]' "$T/keep.out"
is "keep-conn: Redis counted exactly the 2 admitted" 2 "$(rcli HGET 'rl:{fw:10.1.0.1}' count)"
check "keep-conn: 3 audit rows for the client" wait_for 5 rows_at_least 3 "client_ip='10.1.0.1'"
is "keep-conn: audit holds 2 allowed + 1 denied (429)" "3|2|1" \
	"$(sql "SELECT count(*), sum(allowed), sum(status=429) FROM decisions WHERE client_ip='10.1.0.1' AND rule='fw'")"

# lighttpd's authorizer: FCGI_KEEP_CONN and an empty STDIN after the params.
raw 'request 1 authorizer keep GET /fw/item 10.1.0.2' 'wait-reply 1' \
    'request 1 authorizer keep GET /fw/item 10.1.0.2' 'wait-reply 1' \
    'request 1 authorizer keep GET /fw/item 10.1.0.2' 'wait-reply 1' 'pending 100' > "$T/auth.out"
is "authorizer (role 2): Status: 200 with exactly Variable-RATELIMIT_REMAINING 1 and Variable-RATELIMIT_POLICY fw" \
	'STDOUT 1 Status: 200 OK\r\nVariable-RATELIMIT_REMAINING: 1\r\nVariable-RATELIMIT_POLICY: fw\r\n\r\n' \
	"$(sed -n 1p "$T/auth.out")"
is "authorizer: the second on the same kept connection: remaining 0" \
	'STDOUT 1 Status: 200 OK\r\nVariable-RATELIMIT_REMAINING: 0\r\nVariable-RATELIMIT_POLICY: fw\r\n\r\n' \
	"$(sed -n 4p "$T/auth.out")"
is "authorizer: the third is denied 429, and the connection stays open" \
	"STDOUT 1 Status: 200 / $REPLY_OK / STDOUT 1 Status: 200 / $REPLY_OK / STDOUT 1 Status: 429 / $REPLY_OK / PENDING" \
	"$(summary "$T/auth.out")"

# ---- 2. No pinning -----------------------------------------------------------
# Connections 0..39 each get one request answered and stay open, idle; then
# a new connection 40; then connection 0 again; then all stay open a while.
check "rlgate idle holds 2 sockets: its listener and its loop's Redis connection" wait_for 5 idle
{
	for i in $(seq 0 39); do
		printf 'conn %d\nrequest 1 responder keep GET /open/item 10.2.0.%d\nwait-reply 1\n' "$i" "$i"
	done
	printf 'conn 40\nrequest 1 responder keep GET /open/item 10.2.1.1\nwait-reply 1\n'
	printf 'conn 0\npending\nrequest 1 responder keep GET /open/item 10.2.0.0\nwait-reply 1\n'
	printf 'sleep 5000\n'
} > "$T/pin.script"
"$FCGI_RAW" "$ADDR" < "$T/pin.script" > "$T/pin.out" &
PIN=$!
PIDS+=("$PIN")
all_answered() { [ "$(grep -c '^END_REQUEST' "$T/pin.out")" = 42 ]; }
wait_for 10 all_answered
is "no pinning: while the client holds its 41 connections, rlgate holds them all (2 + 41 sockets)" 43 "$(sockets)"
kill "$PIN"; wait "$PIN" 2>/dev/null
is "no pinning: 40 kept-alive connections, each answered 200, then a 41st connection's request answered 200 (one loop)" \
	"$(repeat 41 200)" "$(statuses "$T/pin.out" | cut -d' ' -f1-41)"
is "no pinning: the first connection is still open (PENDING, no EOF) and serves another request (200)" \
	"PENDING / STDOUT 1 Status: 200 / $REPLY_OK" "$(tail -n 4 "$T/pin.out" > "$T/pin.tail"; summary "$T/pin.tail")"
is "no pinning: 42 END_REQUEST, all complete" 42 "$(grep -c '^END_REQUEST 1 app=0 proto=0$' "$T/pin.out")"
check "and when the client is gone, rlgate closes all 41 (2 sockets again)" wait_for 5 idle

# ---- 3. Batching ---------------------------------------------------------------
# Redis runs a script for 1.5 s (under busy-reply-threshold: every other
# client just waits). The first request waits in its round trip; 20 more
# arrive on 20 connections meanwhile and must go to Redis together.
count0=$(metric rlgate_redis_latency_seconds_count)
sum0=$(metric rlgate_redis_latency_seconds_sum)
rcli EVAL "$BUSY_LUA" 0 1500000 > "$T/busy.out" 2>&1 &
BUSY=$!
check "batching: Redis is busy running the script" wait_for 2 redis_held
{
	printf 'conn 0\nrequest 1 responder close GET /batch/item\nsleep 200\n'
	for i in $(seq 1 20); do printf 'conn %d\nrequest 1 responder close GET /batch/item\n' "$i"; done
	for i in $(seq 0 20); do printf 'conn %d\nwait-reply 1\n' "$i"; done
} | raw > "$T/batch.out" &
BATCH=$!
PIDS+=("$BATCH")
wait "$BATCH" "$BUSY"
count1=$(metric rlgate_redis_latency_seconds_count)
sum1=$(metric rlgate_redis_latency_seconds_sum)
is "batching: the busy script ran to its end" 1 "$(cat "$T/busy.out")"
is "batching: all 21 requests answered 200" "$(repeat 21 200)" "$(statuses "$T/batch.out")"
round_trips=$((count1 - count0))
check "batching: 21 requests took $round_trips Redis round trips (1 to 3; rlgate_redis_latency_seconds_count $count0 -> $count1)" \
	between 1 3 "$round_trips"
check "batching: a round trip did wait for the busy Redis (latency sum grew $sum0 -> $sum1, by >= 0.5 s)" \
	awk -v a="$sum0" -v b="$sum1" 'BEGIN { exit !(a != "" && b - a >= 0.5) }'
is "batching: every decision exact: remaining 999 down to 979, each once" \
	"$(seq 979 999 | paste -sd ' ')" \
	"$(grep -o '"remaining":[0-9]*' "$T/batch.out" | cut -d: -f2 | sort -n | paste -sd ' ')"
is "batching: Redis counted exactly 21" 21 "$(rcli HGET 'rl:{batch:127.0.0.1}' count)"
check "batching: 21 audit rows written" wait_for 5 rows_at_least 21 "rule='batch'"
is "batching: exactly 21 rows, 21 request ids, all allowed with status 200" "21|21|21" \
	"$(sql "SELECT count(*), count(DISTINCT request_id), sum(allowed AND status=200) FROM decisions WHERE rule='batch'")"

# ---- 4. leaky_bucket delay is a timer ------------------------------------------
lb_t0=$(now_ms)
raw 'request 1 responder keep GET /lb/item 10.4.0.1' 'wait-reply 1' \
    'request 1 responder keep GET /lb/item 10.4.0.1' 'sleep 100' \
    'conn 1' 'request 1 responder keep GET /fw/item 10.4.0.2' 'wait-reply 1' \
    'conn 0' 'pending' 'wait-reply 1' > "$T/lb.out"
lb_ms=$(( $(now_ms) - lb_t0 ))
is "leaky timer: delayed request's reply still pending (PENDING) when the fixed_window request sent after it was answered 200; then it came, 200" \
	"STDOUT 1 Status: 200 / $REPLY_OK / STDOUT 1 Status: 200 / $REPLY_OK / PENDING / STDOUT 1 Status: 200 / $REPLY_OK" \
	"$(summary "$T/lb.out")"
is "leaky timer: the first leaky_bucket request is not delayed (delay_ms 0)" 0 "$(json delay_ms "$(sed -n 1p "$T/lb.out")")"
is "leaky timer: the middle reply is the fixed_window rule's" fw "$(grep -o '"rule":"[a-z]*"' <<<"$(sed -n 4p "$T/lb.out")" | cut -d'"' -f4)"
lb_delay=$(json delay_ms "$(sed -n 8p "$T/lb.out")")
check "leaky timer: the second was held $lb_delay ms (2000 ms less the gap between them, so 1000 to 2000)" \
	between 1000 2000 "$lb_delay"
check "leaky timer: and the reply was held that long (the exchange took $lb_ms ms)" \
	[ "$lb_ms" -ge "${lb_delay:-1000000}" ]
check "leaky timer: its audit row says allowed, 200, delay_ms $lb_delay" wait_for 5 rows_at_least 1 \
	"client_ip='10.4.0.1' AND rule='lb' AND allowed=1 AND status=200 AND delay_ms=$lb_delay"

# ---- 5. Protocol -----------------------------------------------------------------
raw 'get-values FCGI_MPXS_CONNS FCGI_MAX_CONNS' 'read' 'record 42 0' 'read' \
    'request 1 responder keep GET /open/item 10.5.0.1' 'wait-reply 1' > "$T/gv.out"
is "GET_VALUES FCGI_MPXS_CONNS FCGI_MAX_CONNS -> exactly this GET_VALUES_RESULT" \
	"GET_VALUES_RESULT FCGI_MPXS_CONNS=0 FCGI_MAX_CONNS=1024" "$(sed -n 1p "$T/gv.out")"
is "a management record of unknown type 42 -> UNKNOWN_TYPE 42; the connection then serves a request" \
	"UNKNOWN_TYPE 42 / STDOUT 1 Status: 200 / $REPLY_OK" "$(sed 1d "$T/gv.out" > "$T/gv.tail"; summary "$T/gv.tail")"

raw 'begin 1 responder keep' 'param 1 REQUEST_METHOD GET' 'param 1 REQUEST_URI /fw/item' \
    'param 1 REMOTE_ADDR 10.5.0.2' 'begin 2 responder keep' 'read' \
    'params-end 1' 'stdin-end 1' 'wait-reply 1' > "$T/mpx.out"
is "a second BEGIN_REQUEST (id 2) while id 1 is open -> END_REQUEST 2 proto=1 (CANT_MPX_CONN), and id 1 is still answered 200" \
	"END_REQUEST 2 app=0 proto=1 / STDOUT 1 Status: 200 / $REPLY_OK" "$(summary "$T/mpx.out")"

raw 'begin 1 filter' 'param 1 REQUEST_URI /fw/item' 'param 1 REMOTE_ADDR 10.5.0.3' \
    'params-end 1' 'stdin-end 1' 'expect-eof' > "$T/filter.out"
is "role 3 (FILTER) without KEEP_CONN -> END_REQUEST proto=3 (UNKNOWN_ROLE), then the connection is closed" \
	"END_REQUEST 1 app=0 proto=3 / EOF" "$(summary "$T/filter.out")"

raw 'begin 1 responder keep' 'param 1 REQUEST_URI /open/aborted' 'param 1 REMOTE_ADDR 10.5.0.4' \
    'abort 1' 'wait-reply 1' 'pending 100' \
    'request 2 responder keep GET /open/after-abort 10.5.0.4' 'wait-reply 2' > "$T/abort.out"
is "ABORT_REQUEST before the end of PARAMS -> END_REQUEST 1 (complete); the kept connection then serves id 2" \
	"END_REQUEST 1 app=0 proto=0 / PENDING / STDOUT 2 Status: 200 / STDOUT 2 / END_REQUEST 2 app=0 proto=0" \
	"$(summary "$T/abort.out")"
check "the request after the abort has its audit row" wait_for 5 rows_at_least 1 "path='/open/after-abort'"
is "the aborted request has no audit row (written before the next one's)" 0 "$(rows "path='/open/aborted'")"
is "no rule decided the FILTER request either" 0 "$(rows "client_ip='10.5.0.3'")"

lines0=$(log_lines)
raw 'text GET / HTTP/1.1\r\nHost: localhost\r\n\r\n' 'expect-eof' > "$T/http.out"
is "an HTTP request instead of FastCGI -> the connection is closed (EOF, no record)" EOF "$(summary "$T/http.out")"
is "and rlgate logged exactly one line" 1 $(( $(log_lines) - lines0 ))
check "that line says it is not FastCGI" bash -c "tail -n 1 '$LOG' | grep -q 'warn: fastcgi: not FastCGI version 1; connection closed'"

# PARAMS of a request: 1048576 bytes (1 MiB) in all are accepted, one more not.
# A pair with a 1-byte name length and a 4-byte value length: 6 + value;
# REQUEST_URI /open/big: 2 + 11 + 9 = 22.
raw 'begin 1 responder keep' 'big-param 1 X 1048548' 'param 1 REQUEST_URI /open/big' \
    'params-end 1' 'stdin-end 1' 'wait-reply 1' > "$T/mib.out"
is "PARAMS of exactly 1 MiB: answered 200" "STDOUT 1 Status: 200 / $REPLY_OK" "$(summary "$T/mib.out")"
lines0=$(log_lines)
# One byte more: read to its end, answered 431 and recorded as a bad request,
# with what came before the limit (REQUEST_URI /open/bigger: 25 bytes,
# REMOTE_ADDR 10.5.0.7: 21, X: 6 + 1048525); the kept connection serves on.
raw 'begin 1 responder keep' 'param 1 REQUEST_URI /open/bigger' 'param 1 REMOTE_ADDR 10.5.0.7' \
    'big-param 1 X 1048525' 'params-end 1' 'stdin-end 1' 'wait-reply 1' \
    'request 2 responder keep GET /open/after-big 10.5.0.7' 'wait-reply 2' > "$T/big.out"
is "PARAMS of 1 MiB + 1 byte: 431, then the kept connection serves the next (200)" \
	"STDOUT 1 Status: 431 / $REPLY_OK / STDOUT 2 Status: 200 / STDOUT 2 / END_REQUEST 2 app=0 proto=0" \
	"$(summary "$T/big.out")"
check "the 431 says why" grep -qF '"detail":"the request'"'"'s params (headers) are over 1048576 bytes"' "$T/big.out"
# 5000 params (a web server would have refused so many headers; a direct
# client need not).
{
	echo 'begin 1 responder keep'
	echo 'param 1 REQUEST_METHOD GET'
	echo 'param 1 REQUEST_URI /open/many'
	echo 'param 1 REMOTE_ADDR 10.5.0.8'
	for i in $(seq 4997); do echo "param 1 HTTP_X_H$i v"; done
	echo 'params-end 1'; echo 'stdin-end 1'; echo 'wait-reply 1'
	echo 'request 2 responder keep GET /open/after-many 10.5.0.8'; echo 'wait-reply 2'
} | raw > "$T/many.out"
is "5000 params: 431, then the kept connection serves the next (200)" \
	"STDOUT 1 Status: 431 / $REPLY_OK / STDOUT 2 Status: 200 / STDOUT 2 / END_REQUEST 2 app=0 proto=0" \
	"$(summary "$T/many.out")"
check "the 431 says why" grep -qF '"detail":"the request has more than 4096 params (headers)"' "$T/many.out"
check "both have their audit row" wait_for 5 rows_at_least 1 "path='/open/after-many'"
is "audit: 1 MiB + 1 byte: one row, bad_request, 431, no rule, what was read" \
	"|0|bad_request|431|/open/bigger|10.5.0.7" \
	"$(sql "SELECT rule, allowed, reason, status, path, client_ip FROM decisions WHERE path='/open/bigger'")"
is "audit: 5000 params: one row, bad_request, 431, no rule, what was read" \
	"|0|bad_request|431|GET|/open/many|10.5.0.8" \
	"$(sql "SELECT rule, allowed, reason, status, method, path, client_ip FROM decisions WHERE path='/open/many'")"
# A NUL byte inside a value (HTTP never sends one; a C string would cut it
# short): 400 and a row that shows the byte as %00; the connection serves on.
raw 'begin 1 responder keep' 'param 1 REQUEST_METHOD GET' \
    'param-bytes 1 REQUEST_URI /open/li\x00st' 'param 1 REMOTE_ADDR 10.5.0.10' \
    'param-bytes 1 HTTP_X_CLIENT ab\x00cd' 'params-end 1' 'stdin-end 1' 'wait-reply 1' \
    'request 2 responder keep GET /open/after-nul 10.5.0.10' 'wait-reply 2' > "$T/nul.out"
is "a NUL in a value: 400, then the kept connection serves the next (200)" \
	"STDOUT 1 Status: 400 / $REPLY_OK / STDOUT 2 Status: 200 / STDOUT 2 / END_REQUEST 2 app=0 proto=0" \
	"$(summary "$T/nul.out")"
check "the 400 says why" grep -qF '"detail":"a param (header) value holds a NUL byte, which HTTP never sends"' "$T/nul.out"
check "its audit row is written" wait_for 5 rows_at_least 1 "path='/open/after-nul'"
is "audit: the NUL request: one row, bad_request, 400, the whole path with %00" \
	"|0|bad_request|400|GET|/open/li%00st|10.5.0.10" \
	"$(sql "SELECT rule, allowed, reason, status, method, path, client_ip FROM decisions WHERE client_ip='10.5.0.10' AND status=400")"
is "and rlgate logged nothing about them" 0 $(( $(log_lines) - lines0 ))
check "rlgate is still running (pid $PID)" kill -0 "$PID"
is "and still serves: a normal request answered 200" "STDOUT 1 Status: 200 / $REPLY_OK" \
	"$(raw 'request 1 responder close GET /open/item 10.5.0.9' 'wait-reply 1' > "$T/after.out"; summary "$T/after.out")"

# ---- 6. Apache mod_authnz_fcgi: no KEEP_CONN, no STDIN ----------------------
check "before it, rlgate holds 2 sockets" wait_for 5 idle
raw 'begin 1 authorizer' 'param 1 FCGI_APACHE_ROLE AUTHORIZER' 'param 1 REQUEST_METHOD GET' \
    'param 1 REQUEST_URI /fw/item' 'param 1 REMOTE_ADDR 10.6.0.1' 'params-end 1' \
    'wait-reply 1' 'expect-eof' > "$T/apache.out"
is "Apache-style authorizer (no KEEP_CONN, no STDIN): 200 with Variable-RATELIMIT_* and Variable-RL_CLIENT, then rlgate ends its side (EOF)" \
	'STDOUT 1 Status: 200 OK\r\nVariable-RATELIMIT_REMAINING: 1\r\nVariable-RATELIMIT_POLICY: fw\r\nVariable-RL_CLIENT: 10.6.0.1\r\n\r\n / STDOUT 1 / END_REQUEST 1 app=0 proto=0 / EOF' \
	"$(joined < "$T/apache.out")"
check "once the client has closed its end, rlgate closes the connection (2 sockets again)" wait_for 5 idle

# ---- 7. SIGTERM while a delayed reply waits ------------------------------------
"$FCGI_RAW" "$ADDR" 'request 1 responder keep GET /lbterm/item 10.7.0.1' 'wait-reply 1' \
    'request 1 responder keep GET /lbterm/item 10.7.0.1' 'wait-reply 1' 'expect-eof' > "$T/term.out" &
CLIENT=$!
PIDS+=("$CLIENT")
# And a kept-alive connection with nothing under way.
"$FCGI_RAW" -t 9000 "$ADDR" 'request 1 responder keep GET /open/item 10.7.0.2' 'wait-reply 1' \
    'expect-eof' > "$T/idle.out" &
IDLE=$!
PIDS+=("$IDLE")
first_reply() { grep -q '^END_REQUEST' "$T/term.out" && grep -q '^END_REQUEST' "$T/idle.out"; }
wait_for 5 first_reply
# The second is decided and held (about 2 s): its row is written.
wait_for 5 rows_at_least 2 "rule='lbterm'"
term_ms=$(now_ms)
kill -TERM "$PID"
wait "$PID"
is "SIGTERM with a delayed reply pending: rlgate exits 0" 0 $?
exit_ms=$(( $(now_ms) - term_ms ))
wait "$CLIENT" "$IDLE"
check "rlgate exited once the delayed reply was out ($exit_ms ms after SIGTERM; 10 s is its limit)" [ "$exit_ms" -lt 5000 ]
is "the idle kept-alive connection was closed at the stop (EOF)" \
	"STDOUT 1 Status: 200 / $REPLY_OK / EOF" "$(summary "$T/idle.out")"
is "the client got both replies, 200 each, then the connection was closed" \
	"STDOUT 1 Status: 200 / $REPLY_OK / STDOUT 1 Status: 200 / $REPLY_OK / EOF" "$(summary "$T/term.out")"
is "the delayed decision's audit row is in the database" 1 \
	"$(rows "path='/lbterm/item' AND allowed=1 AND status=200 AND delay_ms > 0")"
due=$(sql "SELECT ts_ms + delay_ms FROM decisions WHERE path='/lbterm/item' AND delay_ms > 0")
check "and its reply was due (at ${due:-?} ms) after SIGTERM was sent (at $term_ms ms)" [ "${due:-0}" -gt "$term_ms" ]
check "and rlgate did not send it early: it exited after it was due ($((term_ms + exit_ms)) >= ${due:-?} ms)" \
	[ "$((term_ms + exit_ms))" -ge "${due:-99999999999999}" ]
check "the stop was logged" grep -q 'stopped' "$LOG"

finish
