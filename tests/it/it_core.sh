#!/bin/bash
# The core gateway end to end: a real redis-server, the real rlgate and a
# real lighttpd (authorizer mode, conf/lighttpd.conf as shipped) on
# loopback, driven with ab and curl, checked in the audit database.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
mkdir -p "$DOCROOT/user" "$DOCROOT/tb" "$DOCROOT/race" "$DOCROOT/open" "$DOCROOT/closed" "$DOCROOT/load" "$DOCROOT/reload"
cp "$TOP/tests/www/user/list" "$DOCROOT/user/list"
for d in tb race open closed load reload; do echo "$d content" > "$DOCROOT/$d/item"; done

cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 8

$(ini_redis_audit)

; The seeds' PHP demonstration: 100 per second per org and endpoint.
[rule:user_list]
path = /user/list
key = {query.org}{path}
algorithm = fixed_window
limit = 100
window = 1s

; The seeds' Go demonstration: a bucket of 100 refilled at 100 per second.
[rule:tb]
path = /tb/*
key = {query.org}
algorithm = token_bucket
limit = 100
window = 1s
burst = 100

; The Korean report: 100 calls per minute per seller, 16 consumers.
[rule:race]
path = /race/*
key = {query.seller}
algorithm = fixed_window
limit = 100
window = 1m

[rule:open]
path = /open/*
limit = 1000000
window = 1s
on_error = allow

[rule:closed]
path = /closed/*
limit = 1000000
window = 1s
on_error = deny

[rule:reload]
path = /reload/*
limit = 1
window = 1m

[rule:load]
path = /load/*
limit = 1000000
window = 1s

[rule:move]
path = /move/*
limit = 1000000
window = 1h
EOF

check "rlgate -t accepts the test configuration" "$RLGATE" -t -c "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd 'server.modules += ( "mod_accesslog" )
accesslog.filename = "'"$T"'/access.log"' || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

# rule_rows RULE N: the writer has stored at least N rows for RULE.
rule_rows() { [ "$(sql "SELECT count(*) FROM decisions WHERE rule='$1'")" -ge "$2" ]; }

# 1. ab -n 110 -c 10 against 100/s: exactly 100 + 10.
ab_run -n 110 -c 10 "$BASE/user/list?org=org1"
is "seed demo: 110 requests complete" 110 "$AB_COMPLETE"
is "seed demo: 10 answered 429" 10 "$AB_NON2XX"
# Within the same 1 s window, the next request is denied: keep its reply.
curl -s -D "$T/h429" -o "$T/b429" "$BASE/user/list?org=org1"
is "org2 is counted on its own" 200 "$(status "$BASE/user/list?org=org2")"
is "redis holds org1's window with 100 admitted" 100 "$(rcli HGET 'rl:{user_list:org1/user/list}' count)"
is "redis holds org2's window with 1 admitted" 1 "$(rcli HGET 'rl:{user_list:org2/user/list}' count)"
# lighttpd writes its access log in batches: wait for all 110 lines.
logged() { [ "$(grep -c 'GET /user/list?org=org1 ' "$T/access.log" 2>/dev/null)" -ge 110 ]; }
wait_for 10 logged
is "seed demo: exactly 10 were 429 (lighttpd's log)" 10 "$(grep -c '"GET /user/list?org=org1 HTTP/1.0" 429 ' "$T/access.log")"
is "seed demo: exactly 100 were 200 with the 47-byte file" 100 "$(grep -c '"GET /user/list?org=org1 HTTP/1.0" 200 47 ' "$T/access.log")"
wait_for 5 rule_rows user_list 112
is "audit: 111 rows for org1 (ab's 110 and curl's 1)" 111 "$(sql "SELECT count(*) FROM decisions WHERE rule='user_list' AND key='org1/user/list'")"
is "audit: 100 allowed, 11 denied" "100|11" "$(sql "SELECT sum(allowed), sum(1-allowed) FROM decisions WHERE key='org1/user/list'")"
is "audit: denied rows say 429 and limit" "11" "$(sql "SELECT count(*) FROM decisions WHERE key='org1/user/list' AND allowed=0 AND status=429 AND reason='limit'")"
is "audit: every row has the rule's parameters" 111 "$(sql "SELECT count(*) FROM decisions WHERE key='org1/user/list' AND algorithm='fixed_window' AND limit_value=100 AND window_ms=1000 AND cost=1 AND path='/user/list' AND method='GET' AND client_ip='127.0.0.1' AND request_id<>''")"
now_ms=$(now_ms)
is "audit: millisecond timestamps from the last minute" 111 "$(sql "SELECT count(*) FROM decisions WHERE key='org1/user/list' AND ts_ms BETWEEN $((now_ms - 60000)) AND $((now_ms + 1000))")"
check "audit: no denial is timed before an admission (Redis TIME order)" [ "$(sql "SELECT (SELECT min(ts_ms) FROM decisions WHERE key='org1/user/list' AND allowed=0) >= (SELECT max(ts_ms) FROM decisions WHERE key='org1/user/list' AND allowed=1)")" = 1 ]

# 4. What a client sees: a 429 with everything, and content unchanged.
is "429 status line" "HTTP/1.1 429 Too Many Requests" "$(head -1 "$T/h429" | tr -d '\r')"
retry=$(resp_header "$T/h429" Retry-After)
check "429 Retry-After is 1 second (window 1s, rounded up)" [ "$retry" = 1 ]
is "429 RateLimit-Policy" '"user_list";q=100;w=1' "$(resp_header "$T/h429" RateLimit-Policy)"
is "429 RateLimit" '"user_list";r=0;t=1' "$(resp_header "$T/h429" RateLimit)"
is "429 Cache-Control" "no-store" "$(resp_header "$T/h429" Cache-Control)"
is "429 Content-Type" "application/problem+json" "$(resp_header "$T/h429" Content-Type)"
check "429 body is the quota-exceeded problem" grep -q '^{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"[^"]*","violated-policies":\["user_list"\],"retry_after_ms":[1-9][0-9]*}$' "$T/b429"
curl -s -o "$T/b200" "$BASE/user/list?org=org3"
check "an allowed request gets the protected file unchanged" cmp -s "$T/b200" "$DOCROOT/user/list"
is "a request lacking the key's field is not limited (on_missing = skip)" 200 "$(status "$BASE/tb/item")"

# 2. Token bucket: at least the bucket, at most what refill allows.
ab_run -n 110 -c 10 "$BASE/tb/item?org=go"
admitted=$((AB_COMPLETE - AB_NON2XX))
check "token bucket: at least 100 of 110 admitted ($admitted)" [ "$admitted" -ge 100 ]
wait_for 5 rule_rows tb 110
read -r first last rows_ok <<<"$(sql "SELECT min(ts_ms), max(ts_ms), sum(allowed) FROM decisions WHERE rule='tb'" | tr '|' ' ')"
# Any interval of d ms admits at most burst + d * rate (+1 for ms rounding).
bound=$(( 100 + (last - first + 1) * 100 / 1000 + 1 ))
check "token bucket: admitted $rows_ok <= $bound, the promise over $((last - first)) ms" [ "$rows_ok" -le "$bound" ]
is "token bucket: audit agrees with ab" "$admitted" "$rows_ok"

# 3. The race: 16 clients, 500 requests, 100 per minute: exactly 100.
ab_run -n 500 -c 16 "$BASE/race/item?seller=s1"
is "race: 500 requests complete" 500 "$AB_COMPLETE"
is "race: exactly 400 denied" 400 "$AB_NON2XX"
wait_for 5 rule_rows race 500
is "race: audit holds exactly 100 admitted" "100|500" "$(sql "SELECT sum(allowed), count(*) FROM decisions WHERE rule='race'")"

# 5. Configuration errors: each named with file and line; -t exits 1.
cat > "$T/bad.ini" <<'EOF'
[gateway]
workers = many
colour = blue

[rule:a]
limit = 10
window = 10x

[nonsense]
EOF
printf 'key = 1\n' >> "$T/bad.ini"
"$RLGATE" -t -c "$T/bad.ini" > "$T/bad.out" 2>&1
is "rlgate -t exits 1 on a bad file" 1 $?
check "bad number named with its line" grep -q "bad.ini:2: \[gateway\] workers" "$T/bad.out"
check "unknown key named with its line" grep -q "bad.ini:3: \[gateway\] colour" "$T/bad.out"
check "bad duration named with its line" grep -q "bad.ini:7: \[rule:a\] window" "$T/bad.out"
check "unknown section named with its line" grep -q "bad.ini:9: \[nonsense\]" "$T/bad.out"
check "configuration OK is not printed" bash -c "! grep -q 'configuration OK' '$T/bad.out'"
"$RLGATE" -t -c "$TOP/conf/rlgate.ini" > "$T/sample.out" 2>&1
is "the sample conf/rlgate.ini passes -t" "configuration OK" "$(cat "$T/sample.out")"
# A file with no rule would limit nothing: -t refuses it, and so does a start.
printf '[redis]\naddress = 127.0.0.1:%s\n[audit]\ndatabase =\n' "$REDIS_PORT" > "$T/norule.ini"
"$RLGATE" -t -c "$T/norule.ini" > "$T/norule.out" 2>&1
is "rlgate -t exits 1 on a file with no rule" 1 $?
check "and says why" grep -qxF "$T/norule.ini: no [rule:NAME] section: rlgate would limit nothing; add a rule (dry_run = yes records without limiting)" "$T/norule.out"
timeout 5 "$RLGATE" -c "$T/norule.ini" -s "127.0.0.1:$(free_port)" > "$T/norule.start" 2>&1
is "a start with no rule is refused (exit 1)" 1 $?
check "and says why" grep -qF "norule.ini: no [rule:NAME] section" "$T/norule.start"

# 6. Redis stopped, then back.
stop_redis
t0=$(date +%s%N)
is "redis down, on_error=allow: admitted" 200 "$(status --max-time 3 "$BASE/open/item")"
is "redis down, on_error=deny: 503" 503 "$(status --max-time 3 "$BASE/closed/item")"
curl -s -D "$T/h503" -o /dev/null --max-time 3 "$BASE/closed/item"
is "503 carries Retry-After: 1" 1 "$(resp_header "$T/h503" Retry-After)"
for i in $(seq 20); do status --max-time 3 "$BASE/open/item" >/dev/null; done
t1=$(date +%s%N)
# 23 requests: a hang would take seconds each; this bounds behaviour, not speed.
check "23 requests with redis down answered without waiting on it ($(( (t1 - t0) / 1000000 )) ms)" [ $(( (t1 - t0) / 1000000 )) -lt 5000 ]
start_redis "$REDIS_PORT" || exit 1
back() { [ "$(status "$BASE/closed/item")" = 200 ]; }
check "redis back: decisions resume without restarting rlgate" wait_for 3 back
is "and Redis decides again (it had no library)" 1 "$(rcli EXISTS 'rl:{closed:127.0.0.1}')"
# /open/ was asked only while Redis was stopped: 1 + 20 requests.
wait_for 5 rule_rows open 21
is "audit: the 21 redis_error rows were recorded as admitted" 21 "$(sql "SELECT count(*) FROM decisions WHERE rule='open' AND reason='redis_error' AND allowed=1 AND status=200")"
is "audit: and no other row for /open/ (none twice)" "21 21" "$(sql "SELECT count(*), count(DISTINCT request_id) FROM decisions WHERE rule='open'" | tr '|' ' ')"
check "audit: redis_error rows for deny say 503" [ "$(sql "SELECT count(*) FROM decisions WHERE rule='closed' AND reason='redis_error' AND allowed=0 AND status=503")" -ge 2 ]
is "the outage was logged once, not per request" 1 "$(grep -c 'answering with on_error' "$T/rlgate.log")"
check "and its end was logged" grep -q 'answers again' "$T/rlgate.log"

# SIGHUP: a broken file is refused and the old rules stay; a good one applies.
is "reload rule: first request admitted" 200 "$(status "$BASE/reload/item")"
is "reload rule: limit 1 per minute" 429 "$(status "$BASE/reload/item")"
cp "$T/rlgate.ini" "$T/rlgate.good"
printf '[rule:broken]\nlimit = lots\n' >> "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
refused() { grep -q 'keeping the running configuration' "$T/rlgate.log"; }
check "SIGHUP with a broken file: refused and logged" wait_for 5 refused
check "the log names the broken line" grep -q "reload: .*rlgate.ini:[0-9]*: \[rule:broken\] limit" "$T/rlgate.log"
is "the old rules still apply" 429 "$(status "$BASE/reload/item")"
sed 's/^limit = 1$/limit = 3/' "$T/rlgate.good" > "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
reloaded() { grep -q 'reload: .* loaded' "$T/rlgate.log"; }
check "SIGHUP with a good file: loaded" wait_for 5 reloaded
is "the new limit applies at once (3 per minute: 2 more)" "200 200 429" "$(status "$BASE/reload/item") $(status "$BASE/reload/item") $(status "$BASE/reload/item")"
is "rlgate kept running through both reloads" 0 "$(kill -0 "$RLGATE_PID"; echo $?)"

# A reload that moves Redis: every worker's connection follows it.
OLD_REDIS_PORT=$REDIS_PORT
start_redis || exit 1
sed "s/^address = 127.0.0.1:$OLD_REDIS_PORT$/address = 127.0.0.1:$REDIS_PORT/" "$T/rlgate.good" > "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
moved() { [ "$(grep -c 'reload: .* loaded' "$T/rlgate.log")" -ge 2 ]; }
check "SIGHUP with a new Redis address: loaded" wait_for 5 moved
old_evals_still() { [ -n "$1" ] && [ "$(redis_calls fcall "$OLD_REDIS_PORT")" = "$1" ]; }
e0=$(redis_calls fcall "$OLD_REDIS_PORT")
# An hour's window: the count is every decision, however slow the machine.
for i in $(seq 24); do status "$BASE/move/item" >/dev/null; done
# Workers that had a connection to the old Redis would have counted there.
is "all 24 decisions after the move come from the new Redis" 24 "$(rcli HGET 'rl:{move:127.0.0.1}' count)"
# EXISTS answers 0 only from a live server (a dead one prints nothing).
is "and the old Redis saw none of them" 0 "$(redis-cli -p "$OLD_REDIS_PORT" EXISTS 'rl:{move:127.0.0.1}')"
check "and ran no function for them (FCALL calls still ${e0:-none})" old_evals_still "$e0"

# A RESPONDER request with a body (a check API called with POST): rlgate
# does not read bodies, but must drain them and still answer in full.
head -c 200000 /dev/urandom > "$T/post.bin"
for i in 1 2 3; do
	env -i REQUEST_METHOD=POST REQUEST_URI=/load/item REMOTE_ADDR=127.0.0.1 \
	    CONTENT_LENGTH=200000 CONTENT_TYPE=application/octet-stream \
	    SERVER_PROTOCOL=HTTP/1.1 cgi-fcgi -bind -connect "127.0.0.1:$RLGATE_PORT" \
	    < "$T/post.bin" > "$T/post$i.out" 2>&1
done
check "POST with a 200 KB body: three complete JSON answers" bash -c \
	"for i in 1 2 3; do head -1 '$T/post'\$i.out | grep -q '^Status: 200' && tail -1 '$T/post'\$i.out | grep -q ']}\$' || exit 1; done"

# 7. SIGTERM under load: every answered request has its row.
before=$(sql "SELECT count(*) FROM decisions WHERE rule='load'")
ab -q -n 20000 -c 20 "$BASE/load/item" > "$T/ab-load.out" 2>&1 &
AB_PID=$!
sleep 1
kill -TERM "$RLGATE_PID"
wait "$RLGATE_PID"
is "rlgate exits 0 after SIGTERM" 0 $?
wait "$AB_PID"
kill -TERM "$HTTPD_PID"; wait "$HTTPD_PID"	# flushes the access log
answered=$(grep -c '"GET /load/item HTTP/1.0" 200' "$T/access.log")
rows=$(sql "SELECT count(*) FROM decisions WHERE rule='load'")
check "SIGTERM under load: $answered answered, all have rows ($((rows - before)) new rows)" test "$answered" -gt 0 -a "$((rows - before))" -ge "$answered"
check "and the stop was logged" grep -q 'stopped' "$T/rlgate.log"

finish
