#!/bin/bash
# Live limits end to end, against a real redis-server, rlgate and lighttpd
# (conf/lighttpd.conf as shipped): a rule with overrides = redis reads a
# key's override (<key_prefix>{<rule>:<key>}:override) inside its script
# call. Under load from ab, rlgate-ctl raises one tenant's limit, makes it
# unlimited, clears it; the audit database shows each switch at the right
# request (in Redis's order) with the parameters used, and the admissions
# follow. Also: the README's worked example, headers and bodies with an
# override, an invalid override written by hand, and the deny cache
# refused next to overrides.
. "$(dirname "$0")/../lib.sh"

CTL=$TOP/fcgi/rlgate-ctl
start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
mkdir -p "$DOCROOT/user" "$DOCROOT/api"
cp "$TOP/tests/www/user/list" "$DOCROOT/user/list"
echo api > "$DOCROOT/api/x"

cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 4

$(ini_redis_audit)

; The seeds' PHP demonstration, each org's limit live in Redis.
[rule:user_list]
path = /user/list
key = {query.org}{path}
algorithm = fixed_window
limit = 100
window = 1s
overrides = redis

; One tenant under load: a window of an hour holds every request of the
; test, so each admission's remaining says where it came in Redis's order.
[rule:api]
path = /api/*
key = {query.t}
algorithm = fixed_window
limit = 20
window = 1h
overrides = redis

; The same, without overrides: the script is called with one key.
[rule:fixed]
path = /api/*
key = {query.t}
limit = 1000000
window = 1h
EOF
export RLGATE_CONF=$T/rlgate.ini
check "rlgate -t accepts overrides = redis" "$RLGATE" -t -c "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

redis_ms() { local s us; read -r s us <<<"$(rcli TIME | paste -sd' ')"; echo $(( s * 1000 + us / 1000 )); }
key_count() { sql "SELECT count(*) FROM decisions WHERE rule='api' AND key='$1'"; }
rows_after() {	# KEY MS N: at least N rows for KEY decided after MS
	[ "$(sql "SELECT count(*) FROM decisions WHERE rule='api' AND key='$1' AND ts_ms > $2")" -ge "$3" ]
}
# q KEY WHERE COLUMNS: rows of api/KEY matching WHERE, as "a|b|c" lines.
q() { sql "SELECT $3 FROM decisions WHERE rule='api' AND key='$1' AND $2"; }

# --- 1. A limit changed under load ---------------------------------------

# ab in the background (4 clients, more requests than the test needs; it is
# stopped at the end), the phases driven by the rows in the audit.
ab -q -n 1000000 -c 4 "$BASE/api/x?t=acme" > "$T/ab-load.out" 2>&1 &
AB_PID=$!
PIDS+=("$AB_PID")
check "load: 120 decisions under the rule's own limit" wait_for 60 rows_after acme 0 120

t0=$(redis_ms)
"$CTL" override api acme limit=50 > "$T/ctl1.out"
is "rlgate-ctl override: exit 0" 0 $?
is "rlgate-ctl override: says what applies from the next request" \
	"rl:{api:acme}:override: 50 per 3600000 ms from the next request (the rule: 20 per 3600000 ms)" \
	"$(cat "$T/ctl1.out")"
t1=$(redis_ms)
check "load: 120 decisions after the raise" wait_for 60 rows_after acme "$t1" 120
"$CTL" peek api acme > "$T/peek.out"
is "peek: the limit in use is the override's" "50 per 3600000 ms" "$(sed -n 's/^limit  *//p' "$T/peek.out")"
is "peek: says the override applies" "applied (the rule: 20 per 3600000 ms)" "$(sed -n 's/^override  *//p' "$T/peek.out")"
check "peek: the window counted 50" grep -q '^state .*count=50$' "$T/peek.out"

t2=$(redis_ms)
"$CTL" override api acme unlimited > "$T/ctl2.out"
is "rlgate-ctl override unlimited: says so" \
	"rl:{api:acme}:override: unlimited from the next request (admitted, nothing counted; the rule: 20 per 3600000 ms)" \
	"$(cat "$T/ctl2.out")"
t3=$(redis_ms)
check "load: 120 decisions while unlimited" wait_for 60 rows_after acme "$t3" 120
is "unlimited: nothing was counted (the window still holds 50)" 50 "$(rcli HGET 'rl:{api:acme}' count)"

t4=$(redis_ms)
"$CTL" override api acme clear > "$T/ctl3.out"
is "rlgate-ctl override clear: says so" \
	"rl:{api:acme}:override: cleared; the rule's 20 per 3600000 ms applies from the next request" \
	"$(cat "$T/ctl3.out")"
t5=$(redis_ms)
check "load: 120 decisions after clearing" wait_for 60 rows_after acme "$t5" 120
kill "$AB_PID" 2>/dev/null
wait "$AB_PID" 2>/dev/null
sleep 0.3	# the last requests in flight reach the audit

echo "# switches at Redis ms $t0..$t1 (limit=50), $t2..$t3 (unlimited), $t4..$t5 (clear); $(key_count acme) decisions"
# Before the raise: the rule's 20, exactly 20 admitted, the first 20 in Redis's order.
is "before the raise: every row carries limit_value 20, window 1 h" "20|3600000|20" \
	"$(q acme "ts_ms < $t0" "DISTINCT limit_value, window_ms, burst")"
is "before the raise: exactly 20 admitted, remaining 19 down to 0" "20|19|0|20" \
	"$(q acme "ts_ms < $t0 AND allowed=1" "count(*), max(remaining), min(remaining), count(DISTINCT remaining)")"
is "before the raise: the denials came after the 20th admission, 429" "1|429" \
	"$(q acme "ts_ms < $t0 AND allowed=0" "min(ts_ms) >= (SELECT max(ts_ms) FROM decisions WHERE rule='api' AND key='acme' AND ts_ms < $t0 AND allowed=1), group_concat(DISTINCT status)")"
# The switch: one point in Redis's order, every 20 before every 50.
is "the switch: no row with limit 20 after any row with limit 50" 1 \
	"$(q acme "limit_value=20 AND reason='limit' AND ts_ms <= $t2" "max(ts_ms) <= (SELECT min(ts_ms) FROM decisions WHERE rule='api' AND key='acme' AND limit_value=50)")"
is "after the raise: every row carries limit_value 50 until unlimited" "50|3600000|50" \
	"$(q acme "ts_ms > $t1 AND ts_ms < $t2" "DISTINCT limit_value, window_ms, burst")"
# The first request Redis decided after the raise found 20 counted: it was
# admitted with remaining 50 - 21 = 29, and 30 were admitted in all.
is "after the raise: exactly 30 more admitted, remaining 29 down to 0" "30|29|0|30" \
	"$(q acme "limit_value=50 AND allowed=1" "count(*), max(remaining), min(remaining), count(DISTINCT remaining)")"
last_admitted=$(q acme "limit_value=50 AND allowed=1" "max(ts_ms)")
first_denied=$(q acme "limit_value=50 AND allowed=0" "min(ts_ms)")
check "after the raise: the 30 admissions came before its denials ($last_admitted <= $first_denied)" \
	[ -n "$first_denied" -a "$last_admitted" -le "${first_denied:-0}" ]
is "after the raise: admitted with 200, denied with 429" "200 429" \
	"$(q acme "limit_value=50 AND allowed=1" "group_concat(DISTINCT status)") $(q acme "limit_value=50 AND allowed=0" "group_concat(DISTINCT status)")"
is "between the switches: only limit 20 or 50" 0 \
	"$(q acme "ts_ms >= $t0 AND ts_ms <= $t1 AND limit_value NOT IN (20, 50)" "count(*)")"
n=$(q acme "ts_ms > $t3 AND ts_ms < $t4" "count(*)")
is "unlimited: all $n rows admitted, reason unlimited, no limit recorded, 200" "$n|unlimited|||200" \
	"$(q acme "ts_ms > $t3 AND ts_ms < $t4" "count(*), group_concat(DISTINCT reason), group_concat(DISTINCT limit_value), group_concat(DISTINCT remaining), group_concat(DISTINCT status)")"
check "unlimited: $n decisions in that phase" [ "$n" -ge 120 ]
is "unlimited: no row before it was set or after it was cleared" 0 \
	"$(q acme "reason='unlimited' AND (ts_ms < $t2 OR ts_ms > $t5)" "count(*)")"
is "cleared: the rule's 20 again, every request denied (50 counted)" "20|0|0|429" \
	"$(q acme "ts_ms > $t5" "DISTINCT limit_value, allowed, remaining, status")"
# All or nothing: the rule without overrides (limit 1000000) counted a
# request exactly when api admitted it, and recorded api's denials as
# other_rule.
is "the rule without overrides admitted what api admitted, other_rule the rest" "$(key_count acme)|1000000" \
	"$(sql "SELECT count(*), group_concat(DISTINCT f.limit_value) FROM decisions f JOIN decisions a USING (request_id)
	    WHERE f.rule='fixed' AND a.rule='api' AND f.key='acme' AND f.allowed=a.allowed
	    AND f.reason = CASE a.allowed WHEN 1 THEN 'limit' ELSE 'other_rule' END")"
is "redis: the rule without overrides counted only those" \
	"$(q acme "allowed=1" "count(*)")" "$(rcli HGET 'rl:{fixed:acme}' count)"
# The report verifies each parameter set of a key on its own (rows carry them).
"$TOP/reports/rlgate-report" --verify -r api "$AUDIT_DB" > "$T/verify.out" 2>&1
is "rlgate-report --verify: each limit held, across the switches" 0 $?
sed 's/^/# /' "$T/verify.out"
check "rlgate-report --verify: 20 admitted under 20 per hour" \
	grep -q 'limit 20 per 1h): 1 key, 20 admitted, 0 violations' "$T/verify.out"
check "rlgate-report --verify: 30 admitted under 50 per hour" \
	grep -q 'limit 50 per 1h): 1 key, 30 admitted, 0 violations' "$T/verify.out"

# --- 2. Headers and bodies carry the override's parameters ----------------

"$CTL" override api solo limit=2 window=10s > /dev/null
is "solo: 2 per 10 s, then denied" "200 200 429" \
	"$(status "$BASE/api/x?t=solo") $(status "$BASE/api/x?t=solo") $(curl -s -D "$T/solo.h" -o "$T/solo.b" -w '%{http_code}' "$BASE/api/x?t=solo")"
is "denied: RateLimit-Policy shows the override" '"api";q=2;w=10, "fixed";q=1000000;w=3600' "$(resp_header "$T/solo.h" RateLimit-Policy)"
check "denied: the problem body names the override's limit" grep -q '"detail":"api allows 2 per 10000 ms; retry in [0-9]* ms"' "$T/solo.b"
"$CTL" override api solo unlimited > /dev/null
env -i REQUEST_METHOD=GET REQUEST_URI='/api/x?t=solo' REMOTE_ADDR=127.0.0.1 \
	cgi-fcgi -bind -connect "127.0.0.1:$RLGATE_PORT" | tr -d '\r' > "$T/solo.out"
is "unlimited as a responder: 200" "Status: 200 OK" "$(head -1 "$T/solo.out")"
is "unlimited: no policy shown for it, the other rule's only" '"fixed";q=1000000;w=3600' \
	"$(sed -n 's/^RateLimit-Policy: //p' "$T/solo.out")"
check "unlimited: the body says so, with no limit" \
	grep -q '"rule":"api","key":"solo","algorithm":"fixed_window","allowed":true,"reason":"unlimited","cost":1,"limit":null,"window_ms":null}' "$T/solo.out"

# --- 3. An override written by hand that the script cannot use -------------

rcli HSET 'rl:{api:hand}:override' limit lots > /dev/null
is "invalid override: the rule's limit applies" "200 200" "$(status "$BASE/api/x?t=hand") $(status "$BASE/api/x?t=hand")"
hand_rows() { [ "$(q hand "1" "count(*)")" -ge 2 ]; }
wait_for 5 hand_rows
is "invalid override: recorded with the rule's parameters" "limit|20|18" \
	"$(q hand "1" "reason, limit_value, min(remaining)")"
check "invalid override: logged once, with the script's sentence" \
	grep -q 'warn: rule api key hand: override ignored: limit must be an integer, got "lots"; the rule.s own limit applies' "$T/rlgate.log"
is "invalid override: one log line for the two requests" 1 "$(grep -c 'override ignored' "$T/rlgate.log")"
is "rlgate-ctl shows it ignored" \
	'rl:{api:hand}:override: ignored, limit must be an integer, got "lots"; the rule'"'"'s 20 per 3600000 ms applies' \
	"$("$CTL" override api hand)"

# --- 4. The README's worked example -------------------------------------------

# The seeds configured each company's limit in Redis:
#   hmset org1/user/list expire 1 limitReq 100
# rlgate: the rule gives every org 100 per second; org1 gets its own 200.
try_org() {	# ORG N: ab -n N -c 10 against /user/list?org=ORG within one window
	local org=$1 n=$2 try span
	for try in 1 2 3; do
		ORG=$org-$try
		[ "${3:-}" = set ] && "$CTL" override user_list "$ORG/user/list" limit=200 window=1s > "$T/readme-ctl.out"
		ab_run -n "$n" -c 10 "$BASE/user/list?org=$ORG"
		wait_for 10 org_rows "$ORG" "$n"
		span=$(sql "SELECT max(ts_ms) - min(ts_ms) FROM decisions WHERE key='$ORG/user/list'")
		[ "$span" -lt 1000 ] && return 0
		echo "# the run took $span ms, longer than the 1 s window (a loaded machine)"
	done
}
org_rows() { [ "$(sql "SELECT count(*) FROM decisions WHERE key='$1/user/list'")" -ge "$2" ]; }
try_org org2 110
is "org2, the rule's 100 per second: 100 pass, 10 denied" "110 10" "$AB_COMPLETE $AB_NON2XX"
try_org org1 210 set
is "rlgate-ctl override user_list org1/user/list limit=200 window=1s" \
	"rl:{user_list:$ORG/user/list}:override: 200 per 1000 ms from the next request (the rule: 100 per 1000 ms)" \
	"$(cat "$T/readme-ctl.out")"
is "org1 with its override: 200 pass, 10 denied" "210 10" "$AB_COMPLETE $AB_NON2XX"
is "org1's audit rows: 200 admitted and 10 denied, all with limit_value 200" "1|200|200 0|200|10" \
	"$(sql "SELECT allowed, limit_value, count(*) FROM decisions WHERE key='$ORG/user/list' GROUP BY 1, 2 ORDER BY 1 DESC" | paste -sd' ')"

# --- 5. The deny cache and overrides -------------------------------------------

# A process that remembers a denial does not ask Redis until its retry_after:
# it would keep denying a key whose limit was raised there. Refused.
printf '[redis]\naddress = 127.0.0.1:%s\n[rule:r]\nlimit = 5\nwindow = 1m\noverrides = redis\ndeny_cache = on\n' \
	"$REDIS_PORT" > "$T/both.ini"
"$RLGATE" -t -c "$T/both.ini" > "$T/both.out" 2>&1
is "overrides = redis with deny_cache = on: rlgate -t exits 1" 1 $?
check "and says why, with file and line" grep -q "both.ini:7: \[rule:r\] deny_cache: deny_cache = on and overrides = redis do not go together: a denial remembered by a process would outlive a limit raised in Redis" "$T/both.out"
# Without the cache, a raise applies to the very next request (it asks Redis).
"$CTL" override api next limit=1 > /dev/null
is "next: limit 1, then denied" "200 429 429" "$(status "$BASE/api/x?t=next") $(status "$BASE/api/x?t=next") $(status "$BASE/api/x?t=next")"
c0=$(redis_calls fcall)
"$CTL" override api next limit=3 > /dev/null
is "next: raised to 3, the next request is admitted" 200 "$(status "$BASE/api/x?t=next")"
is "next: Redis decided it (one call for both rules, api and fixed)" "$((c0 + 1))" "$(redis_calls fcall)"

# --- 6. rlgate-ctl override: errors ----------------------------------------------

"$CTL" override fixed acme limit=5 > /dev/null 2> "$T/ctl.err"
is "override on a rule without overrides = redis: exit 1" 1 $?
check "and says how to turn them on" grep -q 'rule fixed has overrides = none: .*set overrides = redis in \[rule:fixed\]' "$T/ctl.err"
"$CTL" override nosuch acme limit=5 > /dev/null 2> "$T/ctl.err"
is "unknown rule: exit 1" 1 $?
check "unknown rule: named, with the rules there are" grep -q 'has no rule "nosuch" (its rules: user_list, api, fixed)' "$T/ctl.err"
# Each bad value, and what the refusal must say (fcgi/ctl.c, fcgi/conf.c).
while IFS='|' read -r bad why; do
	"$CTL" override api acme $bad < /dev/null > /dev/null 2> "$T/ctl.err"
	rc=$?
	check "override api acme $bad: refused, exit 1 ($(head -1 "$T/ctl.err"))" [ "$rc" = 1 -a -s "$T/ctl.err" ]
	check "override api acme $bad: the error says: $why" grep -qF -- "$why" "$T/ctl.err"
done <<'EOF'
limit=0|limit=0: "0" is too small (use a whole number, 1 to 1000000000)
limit=many|limit=many: "many" is not a whole number
window=10x|window=10x: "10x" is not a duration (use 500ms, 1s, 1m, 1h, 1d)
burst=5|rule api uses fixed_window, which has no burst
precision=100ms|rule api uses fixed_window, which has no precision
colour=red|"colour" is not an override (use limit, window, burst or precision)
limit=5 limit=6|limit is given twice
unlimited limit=5|unlimited stands alone
limit=1000000001|limit=1000000001: "1000000001" is too large
window=2000d|rule api: window_ms must be at most 100000000000, got 172800000000
EOF
is "refused values wrote nothing" 0 "$(rcli EXISTS 'rl:{api:acme}:override')"
dead=$(free_port)
sed "s/^address = .*/address = 127.0.0.1:$dead/" "$T/rlgate.ini" > "$T/dead.ini"
"$CTL" -c "$T/dead.ini" override api acme limit=5 > /dev/null 2> "$T/ctl.err"
is "unreachable Redis: exit 2" 2 $?
unset RLGATE_CONF

finish
