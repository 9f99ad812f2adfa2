#!/bin/bash
# Every algorithm end to end: real redis-server, rlgate and lighttpd
# (conf/lighttpd.conf as shipped), driven with ab and curl. Exact counts
# where the algorithm gives them, the held requests of leaky_bucket, and
# rlgate-report --verify on the audit database the gateway wrote.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$T/www
ALGOS="fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket"
for a in $ALGOS; do mkdir -p "$DOCROOT/x/$a" "$DOCROOT/s/$a"; echo "$a" > "$DOCROOT/x/$a/item"; echo "$a" > "$DOCROOT/s/$a/item"; done

{
	printf '[gateway]\nworkers = 16\n\n[redis]\naddress = 127.0.0.1:%s\ntimeout = 1s\n\n' "$REDIS_PORT"
	printf '[audit]\ndatabase = %s\nflush_interval = 20ms\n\n' "$AUDIT_DB"
	for a in $ALGOS; do
		# x: 10 per minute, so a burst of 30 gets exactly 10 through.
		printf '[rule:x_%s]\npath = /x/%s/*\nalgorithm = %s\nlimit = 10\nwindow = 1m\n' "$a" "$a" "$a"
		case $a in token_bucket|gcra) printf 'burst = 10\n';; esac
		[ "$a" = leaky_bucket ] && printf 'burst = 1\n'
		# s: short windows under sustained load, costs from a header.
		printf '\n[rule:s_%s]\npath = /s/%s/*\nkey = {query.k}\nalgorithm = %s\nlimit = 20\nwindow = 100ms\ncost = {header.X-Cost}\n' "$a" "$a" "$a"
		case $a in
		sliding_window) printf 'precision = 20ms\n';;
		token_bucket|gcra) printf 'burst = 10\n';;
		leaky_bucket) printf 'burst = 5\n';;
		esac
		printf '\n'
	done
} > "$T/rlgate.ini"
check "rlgate -t accepts a rule per algorithm" "$RLGATE" -t -c "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

# 1. A burst of 30 against 10 per minute: exactly 10 pass, for every
#    algorithm that admits a burst (leaky_bucket admits 1 and queues 1).
for a in fixed_window sliding_window sliding_log token_bucket gcra; do
	ab_run -n 30 -c 5 "$BASE/x/$a/item"
	is "$a: a burst of 30 against 10/min: 20 denied" 20 "$AB_NON2XX"
done
# 5 x 30 rows, written within flush_interval; waited for, not slept on.
wait_for 10 rows_at_least 150 "rule IN ('x_fixed_window', 'x_sliding_window', 'x_sliding_log', 'x_token_bucket', 'x_gcra')"
for a in fixed_window sliding_window sliding_log token_bucket gcra; do
	is "$a: audit rows 10 allowed, 20 denied" "10|20" \
		"$(sql "SELECT sum(allowed), sum(1-allowed) FROM decisions WHERE rule='x_$a'")"
done

# 2. leaky_bucket holds what it admits: one leaves now, the next waits its
#    turn (window/limit = 6 s), the rest are denied while the queue is full.
curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$BASE/x/leaky_bucket/item" > "$T/lb1"
curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$BASE/x/leaky_bucket/item" > "$T/lb2" &
LB2=$!
# The third must come after the second was decided: its row says so.
wait_for 10 rows_at_least 2 "rule='x_leaky_bucket'"
is "leaky_bucket: a third request while one waits is denied" 429 "$(status "$BASE/x/leaky_bucket/item")"
wait $LB2
read -r code1 t1 < "$T/lb1"
read -r code2 t2 < "$T/lb2"
is "leaky_bucket: the first passes at once" 200 "$code1"
is "leaky_bucket: the second passes too" 200 "$code2"
check "leaky_bucket: the second was held about 6 s (${t2} s)" awk -v t="$t2" 'BEGIN { exit !(t >= 5.4 && t < 9) }'
is "leaky_bucket: its audit row says how long it was held" 1 \
	"$(sql "SELECT count(*) FROM decisions WHERE rule='x_leaky_bucket' AND allowed=1 AND delay_ms BETWEEN 5000 AND 6000")"

# 3. Sustained load on 100 ms windows, two keys with costs 1 and 2: every
#    response has its row, and the report replays them against each
#    algorithm's promise.
for a in $ALGOS; do
	ab -q -t 1 -n 100000 -c 6 -H "X-Cost: 1" "$BASE/s/$a/item?k=one" > "$T/ab1" 2>&1 &
	p1=$!
	ab -q -t 1 -n 100000 -c 6 -H "X-Cost: 2" "$BASE/s/$a/item?k=two" > "$T/ab2" 2>&1 &
	p2=$!
	wait $p1 $p2
	n=$(( $(sed -n 's/^Complete requests: *//p' "$T/ab1") + $(sed -n 's/^Complete requests: *//p' "$T/ab2") ))
	denied=$(( $(sed -n 's/^Non-2xx responses: *//p' "$T/ab1" | grep . || echo 0) + $(sed -n 's/^Non-2xx responses: *//p' "$T/ab2" | grep . || echo 0) ))
	eval "N_$a=$n D_$a=$denied"
done
stop_rlgate		# flushes every queued row
for a in $ALGOS; do
	eval "n=\$N_$a d=\$D_$a"
	# ab -t stops with up to 12 requests in flight: decided and recorded,
	# but not counted by ab.
	rows=$(sql "SELECT count(*) FROM decisions WHERE rule='s_$a'")
	check "$a under load: a row for each of ab's $n responses ($rows rows)" \
		test "$rows" -ge "$n" -a "$rows" -le $((n + 12))
	check "$a under load: both admitted and denied requests ($d denied of $n)" test "$d" -gt 0 -a "$d" -lt "$n"
	# --verify replays the recorded costs: they must be X-Cost's.
	is "$a under load: each key's cost is its X-Cost header" "one|1 two|2" \
		"$(sql "SELECT key, group_concat(DISTINCT cost) FROM decisions WHERE rule='s_$a' GROUP BY key ORDER BY key" | paste -sd' ')"
done
"$TOP/reports/rlgate-report" --verify "$AUDIT_DB" > "$T/verify.out" 2>&1
is "rlgate-report --verify: every algorithm kept its promise" 0 $?
check "and it says so" grep -qi 'held' "$T/verify.out"
# reports/output.c: one "ok   rule NAME (...)" or "FAIL rule NAME (...)" line
# per rule replayed, then "ok: every limit held" when nothing failed. Every
# one of the 12 rules (x_ and s_ per algorithm) admitted something.
is "and it says so, in its last line" "ok: every limit held" "$(tail -1 "$T/verify.out")"
is "all 12 rules replayed and ok, none failed" "12 0" \
	"$(grep -c '^ok   rule [xs]_[a-z_]* (' "$T/verify.out") $(grep -c '^FAIL rule ' "$T/verify.out")"

# The same check must fail when the record shows more than the promise.
audit_v1 "$AUDIT_DB" "$T/forged.db"
sqlite3 "$T/forged.db" "INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst, status)
	SELECT ts_ms, request_id || '-forged', rule, key, algorithm, 1, 'limit', cost, limit_value, window_ms, burst, 200
	FROM decisions WHERE rule='x_sliding_log' AND allowed=1"
"$TOP/reports/rlgate-report" --verify "$T/forged.db" > "$T/forged.out" 2>&1
is "--verify fails on forged admissions" 1 $?
check "naming the rule" grep -q 'x_sliding_log' "$T/forged.out"
check "naming the rule, in its FAIL line" grep -q '^FAIL rule x_sliding_log (' "$T/forged.out"
is "only that rule fails, the 11 others stay ok" "1 11" \
	"$(grep -c '^FAIL rule ' "$T/forged.out") $(grep -c '^ok   rule ' "$T/forged.out")"
# The doubled admissions all fall in the burst of 30, well inside 1 min:
# one run over the limit, for the one key.
is "one VIOLATION line, for x_sliding_log's key" "1 1" "$(grep -c '^VIOLATION ' "$T/forged.out") $(grep -c '^VIOLATION rule x_sliding_log key 127.0.0.1 (sliding_log): ' "$T/forged.out")"
is "and the summary says a promise did not hold" "1 violation: a promise did not hold" "$(tail -1 "$T/forged.out")"

finish
