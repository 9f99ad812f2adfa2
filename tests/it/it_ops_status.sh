#!/bin/bash
# Operations, 1 of 5 (tests/it/ops_lib.sh starts the gateway): the status
# endpoint scraped and parsed (/metrics in the Prometheus text format,
# /health as JSON), with Redis up, down and back.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/ops_lib.sh"

ops_config
check "rlgate -t accepts the test configuration" "$RLGATE" -t -c "$T/rlgate.ini"
ops_start

# --- The status endpoint ----------------------------------------------

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

finish
