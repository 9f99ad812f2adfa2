#!/bin/bash
# Operations end to end, against a real redis-server, rlgate and lighttpd
# (conf/lighttpd.conf plus conf/lighttpd-status.conf, as shipped): the
# status endpoint scraped and parsed (/metrics in the Prometheus text
# format, /health as JSON), the deny cache under a flood from one key (Redis
# calls counted with INFO commandstats), dry run per rule and for the whole
# gateway (as a responder, through cgi-fcgi), Redis reached on its unix
# socket, rlgate-ctl, and the layout of make install.
. "$(dirname "$0")/../lib.sh"

CTL=$TOP/fcgi/rlgate-ctl
REDIS_SOCKET=$T/redis.sock	# section 3: Redis on its unix socket
start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
for d in flood plain dry raise peek open; do mkdir -p "$DOCROOT/$d"; echo "$d" > "$DOCROOT/$d/a"; done

cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 4
status_path = /rlgate-status
trusted_proxies = 127.0.0.1/32

$(ini_redis_audit)

; A flood from one client: denials remembered for their retry_after.
[rule:flood]
path = /flood/*
limit = 5
window = 1m
deny_cache = on

; The same limit without the cache: every request asks Redis.
[rule:plain]
path = /plain/*
limit = 5
window = 1m

[rule:dry]
path = /dry/*
limit = 2
window = 1m
dry_run = yes

[rule:raise]
path = /raise/*
limit = 2
window = 1m
deny_cache = on

[rule:open]
path = /open/*
limit = 1000000
window = 1s
EOF
# rlgate-ctl peek: one rule per algorithm, keyed by ?k=.
for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	printf '\n[rule:peek_%s]\npath = /peek/%s\nkey = {query.k}\nalgorithm = %s\nlimit = 3\nwindow = 1m\n' \
		"$a" "$a" "$a" >> "$T/rlgate.ini"
	echo "$a" > "$DOCROOT/peek/$a"
done

check "rlgate -t accepts the test configuration" "$RLGATE" -t -c "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd "include \"$TOP/conf/lighttpd-status.conf\"" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
STATUS=$BASE/rlgate-status

# --- helpers -----------------------------------------------------------

scrape() { curl -s -D "$T/metrics.h" -o "$T/metrics.txt" "$STATUS/metrics"; }
# metric SERIES: its value in the last scrape (SERIES as printed: name{labels}).
metric() { awk -v s="$1" '$1 == s { print $2; f = 1 } END { if (!f) print "absent" }' "$T/metrics.txt"; }
# health: GET /health into $T/health.json, prints the status code.
health() { curl -s -o "$T/health.json" -w '%{http_code}' "$STATUS/health"; }
hj() { jq -r "$1" "$T/health.json"; }
rule_rows() { [ "$(sql "SELECT count(*) FROM decisions WHERE rule='$1'")" -ge "$2" ]; }
queue_empty() { scrape; [ "$(metric rlgate_audit_rows_queued)" = 0 ]; }
# fcgi_get PORT URI [NAME=VALUE...]: a FastCGI RESPONDER request (what nginx
# auth_request sends) straight to rlgate; prints the reply (headers, body).
fcgi_get() {
	local port=$1 uri=$2
	shift 2
	env -i REQUEST_METHOD=GET REQUEST_URI="$uri" REMOTE_ADDR=127.0.0.1 \
		SERVER_PROTOCOL=HTTP/1.1 "$@" cgi-fcgi -bind -connect "127.0.0.1:$port" | tr -d '\r'
}

# valid_exposition FILE: the Prometheus text format 0.0.4: every sample is
# "name{label="value",...} number", belongs to a family declared by a TYPE
# line before it, no series twice, histogram buckets cumulative up to +Inf
# equal to _count, and the text ends with a newline.
valid_exposition() {
	[ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ] || { echo "# no final newline"; return 1; }
	awk '
	function fail(why) { print "# line " NR ": " why ": " $0; bad = 1 }
	/^# HELP / { next }
	/^# TYPE / {
		if ($4 !~ /^(counter|gauge|histogram|summary|untyped)$/) fail("bad type")
		if ($3 in type) fail("family typed twice")
		type[$3] = $4; next
	}
	/^#/ { next }
	{
		if ($0 !~ /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|NaN|[-+]Inf)$/) {
			fail("not a sample"); next
		}
		series = $1; name = series; sub(/\{.*/, "", name)
		fam = name
		if (!(fam in type)) { f2 = fam; sub(/_(bucket|sum|count)$/, "", f2); if (type[f2] == "histogram") fam = f2 }
		if (!(fam in type)) fail("sample before its TYPE line")
		if (series in seen) fail("series twice")
		seen[series] = 1
		if (name ~ /_bucket$/ && type[fam] == "histogram") {
			if ($2 < last[fam]) fail("bucket below the one before")
			last[fam] = $2
			if (series ~ /le="\+Inf"/) inf[fam] = $2
		}
		if (name ~ /_count$/ && type[fam] == "histogram") count[fam] = $2
	}
	END {
		for (f in type) if (type[f] == "histogram" && inf[f] != count[f]) { print "# " f ": +Inf bucket " inf[f] " != count " count[f]; bad = 1 }
		exit bad
	}' "$1"
}

# --- 1. The status endpoint ----------------------------------------------

is "health: 200 while Redis answers" 200 "$(health)"
is "health: JSON says ok" "ok" "$(hj .status)"
is "health: redis reachable" "true" "$(hj .redis.reachable)"
is "health: the redis address" "127.0.0.1:$REDIS_PORT" "$(hj .redis.address)"
is "health: one node, the server, a master, reachable" "1 127.0.0.1:$REDIS_PORT master true" \
	"$(hj '[(.redis.nodes | length), .redis.nodes[0].address, .redis.nodes[0].role, .redis.nodes[0].reachable] | map(tostring) | join(" ")')"
is "health: config generation 1 at start" 1 "$(hj .config.generation)"
is "health: config path and rules" "$T/rlgate.ini 11" "$(hj '.config.path + " " + (.config.rules|tostring)')"
now_ms=$(now_ms)
check "health: loaded_ms is when rlgate started (within a minute)" \
	[ "$(hj .config.loaded_ms)" -le "$now_ms" -a "$(hj .config.loaded_ms)" -gt $((now_ms - 60000)) ]
is "health: audit enabled, depth and lag reported" "true 0" "$(hj '(.audit.enabled|tostring) + " " + (.audit.retries|tostring)')"
# No request has been decided yet (status pages are not recorded): nothing
# queued, nothing written, no lag.
is "health: audit queued 0, lag 0 ms, written 0 before any decision" "0 0 0" "$(hj '[.audit.queued, .audit.lag_ms, .audit.written] | map(tostring) | join(" ")')"
check "health: audit lag is a number of ms" [ "$(hj '.audit.lag_ms|type')" = number ]
is "health: workers total" 4 "$(hj .workers.total)"

# Counted decisions, exactly: 8 requests against 5 per minute.
for i in $(seq 8); do status "$BASE/plain/a" > /dev/null; done
for i in $(seq 3); do status "$BASE/open/a" > /dev/null; done
wait_for 5 rule_rows plain 8
wait_for 5 queue_empty
scrape
is "metrics: Content-Type is the text format 0.0.4" "text/plain; version=0.0.4; charset=utf-8" "$(resp_header "$T/metrics.h" Content-Type)"
check "metrics: the text parses as Prometheus exposition format" valid_exposition "$T/metrics.txt"
is "metrics: plain allowed 5" 5 "$(metric 'rlgate_decisions_total{rule="plain",outcome="allowed"}')"
is "metrics: plain denied 3" 3 "$(metric 'rlgate_decisions_total{rule="plain",outcome="denied"}')"
is "metrics: open allowed 3" 3 "$(metric 'rlgate_decisions_total{rule="open",outcome="allowed"}')"
for o in allowed denied redis_error dry_run bad_request local_cache other_rule; do
	is "metrics: every outcome has a series ($o)" 0 "$(metric "rlgate_decisions_total{rule=\"flood\",outcome=\"$o\"}")"
done
is "metrics: the audit rows written are the rows in the database" "$(sql 'SELECT count(*) FROM decisions')" "$(metric rlgate_audit_rows_written_total)"
is "metrics: no audit row queued, none retried" "0 0" "$(metric rlgate_audit_rows_queued) $(metric rlgate_audit_retries_total)"
is "metrics: one Redis round trip per decided request (histogram count = FCALL calls)" "$(redis_calls fcall)" "$(metric rlgate_redis_latency_seconds_count)"
is "metrics: 4 workers" 4 "$(metric rlgate_workers)"
check "metrics: at least the scrape's worker is busy" [ "$(metric rlgate_workers_busy)" -ge 1 ]
is "metrics: no Redis error yet" 0 "$(metric rlgate_redis_errors_total)"
is "metrics: the server, up, no error, no redirect" "1 0 0" \
	"$(metric "rlgate_redis_node_up{node=\"127.0.0.1:$REDIS_PORT\"}") $(metric "rlgate_redis_node_errors_total{node=\"127.0.0.1:$REDIS_PORT\"}") $(metric "rlgate_redis_node_redirects_total{node=\"127.0.0.1:$REDIS_PORT\"}")"
# The path is compared once decoded, as rules see it: an encoded status
# path is the status page too, not a request to decide.
check "an encoded status path (/%72lgate-status/metrics) gets the metrics page" \
	bash -c "curl -s '$BASE/%72lgate-status/metrics' | grep -q '^rlgate_workers '"
is "status requests are neither decided nor recorded" 0 "$(sql "SELECT count(*) FROM decisions WHERE path LIKE '/rlgate-status%'")"
is "a path under status_path that is not a page: 404" 404 "$(status "$STATUS/nope")"
is "status_allow: a client outside it gets 403" 403 "$(status -H 'X-Forwarded-For: 203.0.113.9' "$STATUS/metrics")"
is "status_allow: and no page" "" "$(curl -s -H 'X-Forwarded-For: 203.0.113.9' "$STATUS/metrics" | grep rlgate_)"

# Redis down: /health says so with 503, /metrics counts the errors.
stop_redis
is "health: 503 when Redis is down" 503 "$(health)"
is "health: redis not reachable, a reason given" "false unavailable" "$(hj '(.redis.reachable|tostring) + " " + .status')"
check "health: the reason names the failure" jq -e '.redis.error | type == "string" and length > 0' "$T/health.json"
check "health: the node is listed down, with its reason" jq -e '.redis.nodes[0].reachable == false and (.redis.nodes[0].error | length > 0)' "$T/health.json"
# fcgi/status.c: one problem while the audit is not behind.
is "health: problems lists exactly Redis" '["redis does not answer"]' "$(jq -c .problems "$T/health.json")"
status "$BASE/open/a" > /dev/null
scrape
check "metrics: Redis errors counted ($(metric rlgate_redis_errors_total))" [ "$(metric rlgate_redis_errors_total)" -ge 1 ]
is "metrics: the server down" 0 "$(metric "rlgate_redis_node_up{node=\"127.0.0.1:$REDIS_PORT\"}")"
check "metrics: and its errors counted" [ "$(metric "rlgate_redis_node_errors_total{node=\"127.0.0.1:$REDIS_PORT\"}")" -ge 1 ]
is "metrics: the request answered with on_error counts as redis_error" 1 "$(metric 'rlgate_decisions_total{rule="open",outcome="redis_error"}')"
start_redis "$REDIS_PORT" || exit 1
healthy() { [ "$(health)" = 200 ]; }
check "health: 200 again once Redis is back" wait_for 3 healthy

# --- 2. The deny cache: a flood from one key -------------------------------

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

# --- 3. Dry run ---------------------------------------------------------------

is "dry_run rule: never denies (authorizer)" "200 200 200 200" "$(status "$BASE/dry/a") $(status "$BASE/dry/a") $(status "$BASE/dry/a") $(status "$BASE/dry/a")"
wait_for 5 rule_rows dry 4
is "dry_run rule: 2 admitted, 2 recorded as dry_run with status 200" "1|limit|2 0|dry_run|2" \
	"$(sql "SELECT allowed, reason, count(*) FROM decisions WHERE rule='dry' AND status=200 GROUP BY 1, 2 ORDER BY 1 DESC" | paste -sd' ')"
fcgi_get "$RLGATE_PORT" /dry/a > "$T/dry.out"
is "dry_run rule as a responder: 200" "Status: 200 OK" "$(head -1 "$T/dry.out")"
is "dry_run rule as a responder: RateLimit-Policy" '"dry";q=2;w=60' "$(sed -n 's/^RateLimit-Policy: //p' "$T/dry.out")"
check "dry_run rule as a responder: RateLimit r=0 (it would be denied), t 1..60" grep -qE '^RateLimit: "dry";r=0;t=([1-9]|[1-5][0-9]|60)$' "$T/dry.out"
check "dry_run rule as a responder: the body says dry_run" grep -q '"rule":"dry",[^}]*"allowed":false,"reason":"dry_run"' "$T/dry.out"

# [gateway] dry_run = yes: a second gateway on the same Redis, every rule in
# dry run; plain and flood are over their limits there already.
sed -e '0,/^\[gateway\]$/ s//[gateway]\ndry_run = yes/' -e "s|^database = .*|database = $T/dry.db|" "$T/rlgate.ini" > "$T/dry.ini"
MAIN_PID=$RLGATE_PID
RLGATE_PORT=$(free_port)
DRY_PORT=$RLGATE_PORT
start_rlgate "$T/dry.ini" rlgate-dry || exit 1
c0=$(redis_calls fcall)
fcgi_get "$DRY_PORT" /plain/a > "$T/gdry.out"
is "global dry run: a request over the limit gets 200" "Status: 200 OK" "$(head -1 "$T/gdry.out")"
check "global dry run: with RateLimit r=0, t 1..60" grep -qE '^RateLimit: "plain";r=0;t=([1-9]|[1-5][0-9]|60)$' "$T/gdry.out"
check "global dry run: reason dry_run" grep -q '"reason":"dry_run"' "$T/gdry.out"
fcgi_get "$DRY_PORT" /flood/a > "$T/gdry2.out"
is "global dry run: the deny cache is not used" "Status: 200 OK $((c0 + 2))" "$(head -1 "$T/gdry2.out") $(redis_calls fcall)"
dry_rows() { [ "$(sqlite3 -batch -noheader "$T/dry.db" "SELECT count(*) FROM decisions WHERE reason='dry_run'" 2>/dev/null)" -ge 2 ]; }
check "global dry run: audit rows say dry_run, status 200" wait_for 5 dry_rows
is "global dry run: no row denies" 0 "$(sqlite3 -batch -noheader "$T/dry.db" "SELECT count(*) FROM decisions WHERE status<>200")"
stop_rlgate

# [redis] address = unix:/path: a gateway and rlgate-ctl on Redis's unix
# socket (the same Redis; TCP untouched).
cat > "$T/sock.ini" <<EOF
[redis]
address = unix:$REDIS_SOCKET
[audit]
database =
[rule:sock]
path = /sock/*
limit = 2
window = 1m
EOF
RLGATE_PORT=$(free_port)
start_rlgate "$T/sock.ini" rlgate-sock || exit 1
c0=$(redis_calls fcall)
sock=""
for i in 1 2 3; do sock+=" $(fcgi_get "$RLGATE_PORT" /sock/a | head -1)"; done
is "Redis on a unix socket: limit 2 gives 200, 200, 429" " Status: 200 OK Status: 200 OK Status: 429 Too Many Requests" "$sock"
is "Redis on a unix socket: the three decisions ran there" $((c0 + 3)) "$(redis_calls fcall)"
is "Redis on a unix socket: rlgate-ctl peek reads the key (remaining 0)" 0 \
	"$("$CTL" -c "$T/sock.ini" peek sock 127.0.0.1 | awk '$1 == "remaining" { print $2 }')"
stop_rlgate

# --- 4. rlgate-ctl -------------------------------------------------------------

export RLGATE_CONF=$T/rlgate.ini
pk() { "$CTL" peek "$1" "$2" | awk -v f="$3" '$1 == f { print $2 }'; }
# script ALG KEY: one request of cost 1 through the algorithm's own
# function of the library (FCALL <library>_ALG, Redis TIME, the library
# this build carries); prints its reply on one line.
LIB=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
script() {
	local prec=''
	[ "$1" = sliding_window ] && prec=6000	# the rule's default: window/10
	rcli FCALL "${LIB}_$1" 1 "rl:{peek_$1:$2}" '' 1 3 60000 '' "$prec" | paste -sd' '
}
# peek's numbers against the scripts' own replies, for every algorithm
# (through redis-cli: a leaky_bucket rule served by rlgate would hold each
# admitted request for its delay, 20 s here).
for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	r=peek_$a
	script "$a" k1 > /dev/null
	read -r _ rem _ <<<"$(script "$a" k1)"
	before=$(rcli DUMP "rl:{$r:k1}" | od -An -tx1 | tr -d ' \n') c0=$(redis_calls fcall)
	is "peek $a: remaining as the script last said" "$rem" "$(pk "$r" k1 remaining)"
	is "peek $a: consumes nothing (state and FCALL calls unchanged)" "$before $c0" \
		"$(rcli DUMP "rl:{$r:k1}" | od -An -tx1 | tr -d ' \n') $(redis_calls fcall)"
	# Over the limit: the denial's retry_after, less the time since.
	for i in 1 2 3 4 5; do
		read -r allowed _ _ _ retry deny_us _ <<<"$(script "$a" k1)"
		[ "$allowed" = 0 ] && break
	done
	"$CTL" peek "$r" k1 > "$T/peek.out"
	now_us=$(awk '$1 == "now_us" { print $2 }' "$T/peek.out")
	got=$(awk '$1 == "retry_after_ms" { print $2 }' "$T/peek.out")
	want=$(( retry - (now_us - deny_us) / 1000 ))
	check "peek $a: retry_after_ms $got = the denial's $retry less $(( (now_us - deny_us) / 1000 )) ms since (±1)" \
		[ "$allowed" = 0 -a -n "$got" -a $((got - want)) -ge -1 -a $((got - want)) -le 1 ]
	is "peek $a: remaining 0 when denied" 0 "$(awk '$1 == "remaining" { print $2 }' "$T/peek.out")"
done
"$CTL" peek peek_gcra nobody > "$T/peek.none"
is "peek: a key with no state has the whole burst" 3 "$(awk '$1 == "remaining" { print $2 }' "$T/peek.none")"
check "peek: and says so" grep -q '^state  *none' "$T/peek.none"

# Keys as rlgate writes them (through lighttpd): list, peek and reset.
status "$BASE/peek/fixed_window?k=k2" > /dev/null
status "$BASE/peek/fixed_window?k=a%20b" > /dev/null
is "list: a rule's keys, sorted, as rlgate wrote them" "a%20b k1 k2" "$("$CTL" list peek_fixed_window | paste -sd' ')"
is "list: with a glob pattern" "k1 k2" "$("$CTL" list peek_fixed_window 'k*' | paste -sd' ')"
out=$("$CTL" list peek_fixed_window 'zz*')
is "list: a pattern nothing matches: nothing, exit 0" " 0" "$out $?"
is "peek: an escaped key as list shows it" "2" "$(pk peek_fixed_window a%20b remaining)"
is "reset: deletes the key's state" "deleted rl:{peek_fixed_window:k1}" "$("$CTL" reset peek_fixed_window k1)"
is "reset: the key is gone from Redis" 0 "$(rcli EXISTS 'rl:{peek_fixed_window:k1}')"
is "reset: the next request is admitted, a fresh window" "200 2" "$(status "$BASE/peek/fixed_window?k=k1") $(pk peek_fixed_window k1 remaining)"
out=$("$CTL" reset peek_fixed_window none)
is "reset: a key with no state, exit 0" "rl:{peek_fixed_window:none}: no state, nothing deleted 0" "$out $?"

"$CTL" peek nosuch k1 > /dev/null 2> "$T/ctl.err"
is "unknown rule: exit 1" 1 $?
check "unknown rule: named, with the rules there are" grep -q "has no rule \"nosuch\" (its rules: flood, plain, " "$T/ctl.err"
"$CTL" frobnicate > /dev/null 2>&1
is "unknown command: exit 1" 1 $?
"$CTL" peek flood > /dev/null 2>&1
is "missing KEY: exit 1" 1 $?
"$CTL" -c "$T/nonexistent.ini" list flood > /dev/null 2> "$T/ctl.err"
is "unreadable configuration: exit 1" 1 $?
check "unreadable configuration: named" grep -q "nonexistent.ini: cannot open" "$T/ctl.err"
dead=$(free_port)
sed "s/^address = .*/address = 127.0.0.1:$dead/" "$T/rlgate.ini" > "$T/dead.ini"
"$CTL" -c "$T/dead.ini" peek flood 127.0.0.1 > /dev/null 2> "$T/ctl.err"
is "unreachable Redis: exit 2" 2 $?
check "unreachable Redis: says where and why" grep -q "redis 127.0.0.1:$dead: .*refused" "$T/ctl.err"
check "rlgate-ctl -h prints the usage and exit codes" bash -c "'$CTL' -h | grep -q '2 Redis unreachable'"
unset RLGATE_CONF

# --- 5. make install ------------------------------------------------------------

I=$T/inst
make -s -C "$TOP" install DESTDIR="$I" PREFIX=/usr/local > "$T/install.log" 2>&1
is "make install DESTDIR: succeeds" 0 $?
for f in sbin/rlgate sbin/rlgate-ctl bin/rlgate-report lib/rlgate/rlgate.cgi; do
	check "installed: /usr/local/$f, executable" test -x "$I/usr/local/$f"
done
is "installed: the sample configuration, mode 640" 640 "$(stat -c %a "$I/etc/rlgate/rlgate.ini.sample" 2>/dev/null)"
for m in man8/rlgate.8 man8/rlgate-ctl.8 man5/rlgate.ini.5 man1/rlgate-report.1; do
	check "installed: man page $m" test -s "$I/usr/local/share/man/$m"
	check "man -l $m renders without warnings" bash -c \
		"out=\$(MANWIDTH=80 man --warnings -l '$I/usr/local/share/man/$m' 2>&1 >/dev/null); [ -z \"\$out\" ] || { echo \"\$out\" | head -5; false; }"
done
check "man -l rlgate-ctl.8 documents the exit status" bash -c "MANWIDTH=80 man -l '$I/usr/local/share/man/man8/rlgate-ctl.8' 2>/dev/null | grep -q 'EXIT STATUS'"
is "the installed rlgate-ctl runs" "rlgate-ctl 0.1.0" "$("$I/usr/local/sbin/rlgate-ctl" -V)"

finish
