#!/bin/bash
# Operations, 2 of 5 (tests/it/ops_lib.sh starts the gateway): the deny
# cache under a flood from one key (Redis calls counted with INFO
# commandstats), and SIGHUP clearing it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/ops_lib.sh"

ops_config
ops_start

# --- The deny cache: a flood from one key -------------------------------

c0=$(redis_calls fcall)
ab_run -n 2000 -c 8 "$BASE/flood/a"
c1=$(redis_calls fcall)
is "flood with the cache: 2000 complete, 1995 denied" "2000 1995" "$AB_COMPLETE $AB_NON2XX"
wait_for 10 queue_empty
p0=$(sql "SELECT count(*) FROM decisions WHERE rule='plain' AND reason='limit'")
ab_run -n 2000 -c 8 "$BASE/plain/a"
c2=$(redis_calls fcall)
# (Redis restarted above: plain's window starts afresh.)
is "the same flood without the cache: 2000 complete, 1995 denied" "2000 1995" "$AB_COMPLETE $AB_NON2XX"
cached_calls=$((c1 - c0)) plain_calls=$((c2 - c1))
echo "# flood of 2000 requests from one client, 5 admitted: $cached_calls Redis calls with deny_cache = on, $plain_calls without; $((plain_calls - cached_calls)) saved"
# An event loop's batch is one call (lua/decide.lua): at most one call per
# request.
check "without the cache: at most a call per request ($plain_calls calls)" [ "$plain_calls" -ge 1 -a "$plain_calls" -le 2000 ]
wait_for 10 rule_rows plain $((p0 + 2000))
is "without the cache: Redis decided every request (2000 more rows of reason limit)" 2000 "$(( $(sql "SELECT count(*) FROM decisions WHERE rule='plain' AND reason='limit'") - p0 ))"
# Before the first denial is remembered, every request then in flight may
# already be on its way to Redis: at most one per client (ab -c 8; an
# events loop sends a whole batch in one round trip).
check "with the cache: Redis saw at most 5 admissions + 1 denial per request in flight ($cached_calls calls)" [ "$cached_calls" -le $((5 + 8)) ]
wait_for 10 rule_rows flood 2000
is "audit: the flood's 2000 rows: 5 admitted" "5|1995" "$(sql "SELECT sum(allowed), sum(1-allowed) FROM decisions WHERE rule='flood'")"
seen=$(sql "SELECT count(*) FROM decisions WHERE rule='flood' AND reason='limit'")
check "with the cache: Redis decided at most 5 admissions + 1 denial per request in flight ($seen)" [ "$seen" -ge 6 -a "$seen" -le $((5 + 8)) ]
is "audit: every request Redis did not decide is a local_cache denial" "$((2000 - seen))" "$(sql "SELECT count(*) FROM decisions WHERE rule='flood' AND reason='local_cache' AND allowed=0 AND status=429")"
is "audit: local_cache rows carry the rule's numbers and a retry_after" "$((2000 - seen))" "$(sql "SELECT count(*) FROM decisions WHERE rule='flood' AND reason='local_cache' AND limit_value=5 AND window_ms=60000 AND remaining=0 AND retry_after_ms>0")"
c0=$(redis_calls fcall)
curl -s -D "$T/cached.h" -o "$T/cached.b" "$BASE/flood/a"
is "a cached denial costs no Redis call" "$c0" "$(redis_calls fcall)"
is "cached denial: 429" "HTTP/1.1 429 Too Many Requests" "$(head -1 "$T/cached.h" | tr -d '\r')"
check "cached denial: Retry-After in whole seconds (1..60)" [ "$(resp_header "$T/cached.h" Retry-After)" -ge 1 -a "$(resp_header "$T/cached.h" Retry-After)" -le 60 ]
is "cached denial: RateLimit-Policy" '"flood";q=5;w=60' "$(resp_header "$T/cached.h" RateLimit-Policy)"
check "cached denial: RateLimit r=0, t in whole seconds (1..60)" grep -qE '^RateLimit: "flood";r=0;t=([1-9]|[1-5][0-9]|60)$' <(tr -d '\r' < "$T/cached.h")
check "cached denial: the quota-exceeded problem naming the rule" grep -q '"violated-policies":\["flood"\]' "$T/cached.b"
wait_for 5 queue_empty
is "metrics: local_cache decisions = audit rows" "$(sql "SELECT count(*) FROM decisions WHERE reason='local_cache'")" "$(metric 'rlgate_decisions_total{rule="flood",outcome="local_cache"}')"
check "metrics: the cache holds the key" [ "$(metric rlgate_deny_cache_entries)" -ge 1 ]

# SIGHUP clears the cache: a raised limit applies to the very next request.
is "raise: 2 per minute, then denied" "200 200 429" "$(status "$BASE/raise/a") $(status "$BASE/raise/a") $(status "$BASE/raise/a")"
c0=$(redis_calls fcall)
is "raise: the repeat is denied from the cache" 429 "$(status "$BASE/raise/a")"
is "raise: without asking Redis" "$c0" "$(redis_calls fcall)"
is "log_level info: no debug lines" 0 "$(grep -c ': debug: ' "$T/rlgate.log")"
# The reload raises the limit, and turns on a line per decision.
sed -i -e '/^\[rule:raise\]/,/^window/ s/^limit = 2$/limit = 4/' \
    -e '0,/^\[gateway\]$/ s//[gateway]\nlog_level = debug/' "$T/rlgate.ini"
kill -HUP "$RLGATE_PID"
generation2() { [ "$(health)" = 200 ] && [ "$(hj .config.generation)" = 2 ]; }
check "SIGHUP: health shows config generation 2" wait_for 5 generation2
is "raise: after the reload the next request goes to Redis and is admitted" 200 "$(status "$BASE/raise/a")"
is "raise: Redis was asked" "$((c0 + 1))" "$(redis_calls fcall)"
wait_for 5 rule_rows raise 5
is "raise: audit shows limit 4 admitting the 3rd" "1|limit|4" "$(sql "SELECT allowed, reason, limit_value FROM decisions WHERE rule='raise' ORDER BY id DESC LIMIT 1")"
raise_id=$(sql "SELECT request_id FROM decisions WHERE rule='raise' ORDER BY id DESC LIMIT 1")
is "log_level debug after SIGHUP: that decision's line, as its audit row says" \
	"request $raise_id: GET /raise/a from 127.0.0.1: 200; rule raise key 127.0.0.1: allowed (limit), remaining 1" \
	"$(grep -o ": debug: request $raise_id: .*" "$T/rlgate.log" | cut -d' ' -f3-)"
scrape
is "metrics: rlgate_config_generation 2" 2 "$(metric rlgate_config_generation)"

finish
