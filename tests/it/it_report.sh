#!/bin/bash
# rlgate-report against audit databases built here: by hand with the sqlite3
# CLI (the seeds' demonstration, hand-made violations, broken files) and by
# tests/tools/gen_audit (consistent histories of every algorithm). Checks
# the exact text, CSV and JSON, --verify passing and failing with the right
# window, merging, --top, every error path, and the HTML page rendered in
# headless Chromium.
. "$(dirname "$0")/../lib.sh"

REPORT=$TOP/reports/rlgate-report
GEN=$TOP/tests/tools/gen_audit
BASE=1763805600000	# 2025-11-22 10:00:00.000 UTC
for f in "$REPORT" "$GEN"; do
	[ -x "$f" ] || { not_ok "$f is built (run make)"; finish; exit 1; }
done

# The first layout (a decisions table, which a test can write), from the one
# place that defines it; rlgate-report reads it as it reads the second.
SCHEMA=$(sed -n '/#define RLG_AUDIT_SCHEMA_V1/,/^$/p' "$TOP/fcgi/audit.h" |
	sed -n 's/^[^"]*"\(.*\)".*$/\1/p' | sed 's/\\n$//')
newdb() { rm -f "$1"; sqlite3 "$1" "$SCHEMA"; }

# row DB TS RULE KEY ALGORITHM ALLOWED LIMIT WINDOW_MS [BURST COST DELAY]
row() {
	sqlite3 "$1" "INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm,
	allowed, reason, cost, limit_value, window_ms, burst, remaining, retry_after_ms,
	delay_ms, method, path, client_ip, status, latency_us) VALUES ($2, 'x', '$3', '$4',
	'$5', $6, 'limit', ${11:-1}, $7, $8, ${9:-$7}, 0, 0, ${12:-0}, 'GET', '/', '127.0.0.1',
	CASE $6 WHEN 1 THEN 200 ELSE 429 END, 10)"
}

# The seeds' first demonstration as the gateway records it: ab -n 110 -c 10
# against 100 per second: 110 decisions in the same second, 100 admitted.
DEMO=$T/demo.db
newdb "$DEMO"
sqlite3 "$DEMO" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 110)
INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost,
  limit_value, window_ms, burst, remaining, retry_after_ms, delay_ms, method, path,
  client_ip, status, latency_us)
SELECT $BASE + i - 1, 'req' || i, 'user_list', 'org1/user/list', 'fixed_window', i <= 100,
  'limit', 1, 100, 1000, 100, max(0, 100 - i), CASE WHEN i <= 100 THEN 0 ELSE 1000 - i + 1 END,
  0, 'GET', '/user/list', '127.0.0.1', CASE WHEN i <= 100 THEN 200 ELSE 429 END, 40 FROM n"

echo "# the seeds' demonstration"
out=$("$REPORT" "$DEMO"); rc=$?
is "text report exits 0" 0 "$rc"
is "text report: one window" 1 "$(printf '%s\n' "$out" | grep -c '^2025-')"
check "text report: the window has 100 allowed, 10 denied, 110 in all, 100.0/s, a bar" \
	grep -Eq '^2025-11-22 10:00:00\.000 +100 +10 +110 +100\.0 +#+x+$' <<< "$out"
check "text report names the rule and its parameters" \
	grep -q '^rule user_list (fixed_window, limit 100 per 1s)$' <<< "$out"

is "CSV report, exactly" \
"window_start,window_start_ms,width_ms,rule,key,allowed,denied,total,allowed_per_s
2025-11-22 10:00:00.000,$BASE,1000,user_list,,100,10,110,100.000" \
	"$("$REPORT" -f csv "$DEMO")"

is "JSON report, exactly" \
'{
  "width_ms": 1000,
  "since": null,
  "until": null,
  "decisions": 110,
  "series": [
    {"rule": "user_list", "key": null, "algorithm": "fixed_window", "limit": 100, "window_ms": 1000, "burst": 100, "allowed": 100, "denied": 10, "windows": [
      {"start": "2025-11-22 10:00:00.000", "start_ms": 1763805600000, "allowed": 100, "denied": 10, "total": 110, "allowed_per_s": 100.000}
    ]}
  ]
}' "$("$REPORT" -f json "$DEMO")"

is "-w 100ms -r user_list -f csv: per key, two windows" \
"window_start,window_start_ms,width_ms,rule,key,allowed,denied,total,allowed_per_s
2025-11-22 10:00:00.000,$BASE,100,user_list,org1/user/list,100,0,100,1000.000
2025-11-22 10:00:00.100,$((BASE + 100)),100,user_list,org1/user/list,0,10,10,0.000" \
	"$("$REPORT" -w 100ms -r user_list -f csv "$DEMO")"

is "--since/--until (date-time, epoch ms) narrow the windows" \
"2025-11-22 10:00:00.090,$((BASE + 90)),10,user_list,,10,0,10,1000.000
2025-11-22 10:00:00.100,$((BASE + 100)),10,user_list,,0,5,5,0.000" \
	"$("$REPORT" -w 10ms --since '2025-11-22 10:00:00.090' --until $((BASE + 105)) -f csv "$DEMO" | tail -n +2)"

out=$("$REPORT" -o "$T/demo.txt" "$DEMO"); rc=$?
check "-o writes the file and nothing to stdout" test "$rc" = 0 -a -z "$out" -a -s "$T/demo.txt"
ln -s "$T/demo.txt" "$T/link.txt"
"$REPORT" -f csv -o "$T/link.txt" "$DEMO"
check "-o through a symbolic link writes its target, the link stays" \
	test -L "$T/link.txt" -a "$(head -c 12 "$T/demo.txt")" = window_start

echo "# --verify, fixed_window by hand"
out=$("$REPORT" --verify "$DEMO"); rc=$?
is "--verify passes the demonstration" 0 "$rc"
check "--verify says every limit held" grep -q '^ok: every limit held$' <<< "$out"

cp "$DEMO" "$T/extra.db"
for i in 1 2 3 4 5; do row "$T/extra.db" $((BASE + 500)) user_list org1/user/list fixed_window 1 100 1000; done
out=$("$REPORT" --verify "$T/extra.db"); rc=$?
is "--verify fails with 5 extra admitted rows" 1 "$rc"
check "--verify names the window and the counts" grep -Fq \
	'VIOLATION rule user_list key org1/user/list (fixed_window): window [2025-11-22 10:00:00.000, 2025-11-22 10:00:01.000) (1s from its first decision) admitted 105, limit 100' <<< "$out"
is "--verify lists one violation" 1 "$(grep -c '^VIOLATION' <<< "$out")"

# The window boundary: 100 at 10:00:00.000-.099, 100 more at 10:00:01.000 (the
# window closes inside that ms) and after: twice the limit in one second is
# what fixed_window allows (the seeds' boundary problem), not a violation.
newdb "$T/boundary.db"
sqlite3 "$T/boundary.db" "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199)
INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst)
SELECT CASE WHEN i < 100 THEN $BASE + i ELSE $BASE + 1000 + (i - 100) / 10 END, 'b' || i, 'b', 'k',
  'fixed_window', 1, 'limit', 1, 100, 1000, 100 FROM n"
"$REPORT" --verify "$T/boundary.db" > /dev/null; rc=$?
is "--verify: 2 x limit across a window boundary is fixed_window's promise" 0 "$rc"
row "$T/boundary.db" $((BASE + 999)) b k fixed_window 1 100 1000
"$REPORT" --verify "$T/boundary.db" > /dev/null; rc=$?
is "--verify: one more inside the first window is a violation" 1 "$rc"

echo "# --verify, generated histories of every algorithm"
for alg in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	db=$T/gen-$alg.db
	"$GEN" -o "$db" -a "$alg" -n 30000 -k 5 -l 20 -w 1000 -b 10 -c 3 -s 42 > /dev/null
	out=$("$REPORT" --verify "$db"); rc=$?
	is "$alg: --verify passes a consistent history" 0 "$rc"
	check "$alg: all 5 keys replayed" grep -q "^ok   rule $alg (.*): 5 keys, " <<< "$out"
	denied=$(sqlite3 "$db" "SELECT count(*) FROM decisions WHERE allowed = 0")
	check "$alg: the history reached the limit ($denied denied)" test "$denied" -gt 100

	# 2 x max(limit, burst) + 3 extra admissions in one ms break every promise.
	at=$(sqlite3 "$db" "SELECT ts_ms FROM decisions WHERE key = 'k00002' AND allowed = 1 ORDER BY ts_ms LIMIT 1 OFFSET 2000")
	for i in $(seq 43); do echo "INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst, delay_ms) VALUES ($at, 'extra', '$alg', 'k00002', '$alg', 1, 'limit', 1, 20, 1000, 10, 0);"; done | sqlite3 "$db"
	out=$("$REPORT" --verify -f csv "$db"); rc=$?
	is "$alg: --verify fails after 43 extra admissions" 1 "$rc"
	hits=$(awk -F, -v at="$at" 'NR > 1 && $2 == "k00002" && $10 <= at && at <= $11' <<< "$out" | wc -l)
	check "$alg: a violation of key k00002 spans the inserted time ($at)" test "$hits" -ge 1
	others=$(awk -F, 'NR > 1 && $2 != "k00002"' <<< "$out" | wc -l)
	is "$alg: no other key is blamed" 0 "$others"
done

echo "# several databases"
"$GEN" -o "$T/host1.db" -O "$T/host2.db" -a mix -n 60000 -k 12 -l 10 -w 500 -c 2 -s 7 > /dev/null
"$REPORT" --verify "$T/host1.db" "$T/host2.db" > "$T/merged.txt"; rc=$?
is "merged: two hosts sharing one Redis verify as one" 0 "$rc"
n1=$(sqlite3 "$T/host1.db" "SELECT count(*) FROM decisions WHERE allowed = 1")
n2=$(sqlite3 "$T/host2.db" "SELECT count(*) FROM decisions WHERE allowed = 1")
check "merged: every admitted row of both replayed ($((n1 + n2)))" \
	grep -q "^rlgate-report: verify: 2 databases, $((n1 + n2)) admitted decisions of 12 keys replayed$" "$T/merged.txt"
sum=$("$REPORT" -f csv "$T/host1.db" "$T/host2.db" | awk -F, 'NR > 1 { a += $6; d += $7 } END { print a, d }')
is "merged: the throughput report adds both databases" \
	"$(sqlite3 -separator ' ' "$T/host1.db" "ATTACH '$T/host2.db' AS b; SELECT (SELECT sum(allowed) FROM decisions) + (SELECT sum(allowed) FROM b.decisions), (SELECT sum(1 - allowed) FROM decisions) + (SELECT sum(1 - allowed) FROM b.decisions)")" "$sum"

# 60 + 60 admitted in one window on two hosts: each fine alone, 120 together.
newdb "$T/a.db"; newdb "$T/b.db"
sqlite3 "$T/a.db" "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 59)
INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst)
SELECT $BASE + 2 * i, 'a' || i, 'api', 'org1', 'fixed_window', 1, 'limit', 1, 100, 1000, 100 FROM n"
sqlite3 "$T/b.db" "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 59)
INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst)
SELECT $BASE + 2 * i + 1, 'b' || i, 'api', 'org1', 'fixed_window', 1, 'limit', 1, 100, 1000, 100 FROM n"
"$REPORT" --verify "$T/a.db" > /dev/null; ra=$?
"$REPORT" --verify "$T/b.db" > /dev/null; rb=$?
out=$("$REPORT" --verify "$T/a.db" "$T/b.db"); rc=$?
is "merged: each host alone holds the limit" "0 0" "$ra $rb"
is "merged: together they broke it" 1 "$rc"
check "merged: the violation counts both hosts' rows" grep -Fq 'admitted 120, limit 100' <<< "$out"

# Admitted without a count (reason redis_error) at 10:00:00.999, 10:00:01.000,
# .500 and 10:00:02.000: --since is inclusive, --until exclusive, for them as
# for the windows. So --since 10:00:01 --until 10:00:02 counts 2, the one at
# exactly --since among them; --since 10:00:01.001 counts 1.
newdb "$T/unchecked.db"
for ts in 999 1000 1500 2000; do
	sqlite3 "$T/unchecked.db" "INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm,
	allowed, reason, cost, limit_value, window_ms, burst) VALUES ($BASE + $ts, 'u$ts', 'api',
	'org1', 'fixed_window', 1, 'redis_error', 1, 100, 1000, 100)"
done
unchecked() { "$REPORT" --verify "$@" "$T/unchecked.db" | sed -n 's/^ok   rule api (.*): .*, \([0-9]*\) admitted without a count.*/\1/p'; }
is "--verify --since T --until U: the unchecked rows at T and after, before U" 2 \
	"$(unchecked --since $((BASE + 1000)) --until $((BASE + 2000)))"
is "--verify --since T+1ms: the row at T no longer counted" 1 \
	"$(unchecked --since $((BASE + 1001)) --until $((BASE + 2000)))"
is "--verify --since T (date-time): the row at exactly T counted" 3 \
	"$(unchecked --since '2025-11-22 10:00:01.000')"
is "--verify without a range: all 4" 4 "$(unchecked)"

echo "# one database per day: a directory or a pattern"
mkdir -p "$T/days"
# 3 + 3 admitted against 5 a second, across midnight, in two daily files:
# each file keeps the limit, together they break it.
MID=$((BASE - 36000000))	# 2025-11-22 00:00:00.000
for d in 20 21 22; do newdb "$T/days/audit-2025-11-$d.db"; done
for i in 0 1 2; do
	row "$T/days/audit-2025-11-21.db" $((MID - 100 + i)) api k sliding_log 1 5 1000
	row "$T/days/audit-2025-11-22.db" $((MID + 100 + i)) api k sliding_log 1 5 1000
done
row "$T/days/audit-2025-11-20.db" $((MID - 86400000 - 1000)) api k sliding_log 1 5 1000
echo "not a database" > "$T/days/notes.txt"
explicit=$("$REPORT" -f csv -w 1d "$T/days/audit-2025-11-20.db" "$T/days/audit-2025-11-21.db" \
	"$T/days/audit-2025-11-22.db")
is "a directory reads its *.db files, as if each were named" "$explicit" \
	"$("$REPORT" -f csv -w 1d "$T/days")"
is "a directory: three days, 1 + 3 + 3 allowed" "1 3 3" "$(awk -F, 'NR > 1 { printf "%s%s", sep, $6; sep = " " }' <<< "$explicit")"
is "a quoted pattern reads the files it matches (two days)" \
	"$("$REPORT" -f csv -w 1d "$T/days/audit-2025-11-21.db" "$T/days/audit-2025-11-22.db")" \
	"$("$REPORT" -f csv -w 1d "$T/days/audit-2025-11-2[12].db")"
out=$("$REPORT" --verify "$T/days/audit-2025-11-21.db"); rc=$?
is "--verify: one day alone keeps the limit" 0 "$rc"
out=$("$REPORT" --verify "$T/days"); rc=$?
is "--verify on the directory: midnight's 6 in 1 s break it" 1 "$rc"
check "--verify on the directory: the violation counts both days' rows" \
	grep -Fq 'VIOLATION rule api key k (sliding_log): interval (2025-11-22 00:00:00.102 - 1s, 2025-11-22 00:00:00.102] admitted 6, limit 5' <<< "$out"
out=$("$REPORT" "$T/days/audit-2025-11-2*.db" "$T/days"); rc=$?
check "a file named twice (pattern and directory) is read once: 7 decisions" \
	grep -q '^rlgate-report: 7 decisions from 3 databases' <<< "$out"

echo "# --verify in bounded memory: records spilled to temporary files"
# Many rows (estimated from max(id)) are checked a part of the keys at a
# time; an unmatched row with a high id makes these small databases look
# big. The verdicts must not change.
for db in "$T/gen-gcra.db" "$T/host1.db"; do
	cp "$db" "$T/spill.db"
	sqlite3 "$T/spill.db" "INSERT INTO decisions (id, ts_ms, request_id, allowed, reason) VALUES (40000000, 0, 'x', 1, 'unmatched')"
	"$REPORT" --verify -f csv "$db" "$T/host2.db" > "$T/inmem.csv"; rc1=$?
	"$REPORT" --verify -f csv "$T/spill.db" "$T/host2.db" > "$T/spill.csv"; rc2=$?
	is "$(basename "$db") + host2: the same violations, spilled or not (exit $rc1)" \
		"$rc1 $(cat "$T/inmem.csv")" "$rc2 $(cat "$T/spill.csv")"
	"$REPORT" --verify "$db" "$T/host2.db" | tail -n +2 > "$T/inmem.txt"
	"$REPORT" --verify "$T/spill.db" "$T/host2.db" | tail -n +2 > "$T/spill.txt"
	is "$(basename "$db") + host2: the same summary per rule, spilled or not" \
		"$(cat "$T/inmem.txt")" "$(cat "$T/spill.txt")"
done
if command -v strace > /dev/null; then
	n=$(strace -f -e trace=openat "$REPORT" --verify "$T/spill.db" 2>&1 > /dev/null | grep -c O_TMPFILE)
	check "the large one went through temporary files ($n)" test "$n" -ge 2
	n=$(strace -f -e trace=openat "$REPORT" --verify "$T/host1.db" 2>&1 > /dev/null | grep -c O_TMPFILE)
	is "a small one stays in memory" 0 "$n"
else
	not_ok "strace is installed (to see the temporary files)"
fi

echo "# --top"
newdb "$T/top.db"
sqlite3 "$T/top.db" "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99)
INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst)
SELECT $BASE + i, 't' || i, 'api', 'b', 'sliding_log', i >= 30, 'limit', 1, 70, 1000, 70 FROM n
UNION ALL SELECT $BASE + i, 'u' || i, 'api', 'a', 'sliding_log', i >= 10, 'limit', 1, 10, 1000, 10 FROM n WHERE i < 20
UNION ALL SELECT $BASE + i, 'v' || i, 'login', 'c', 'sliding_log', 1, 'limit', 1, 10, 1000, 10 FROM n WHERE i < 5
UNION ALL SELECT $BASE + i, 'w' || i, NULL, NULL, NULL, 1, 'unmatched', NULL, NULL, NULL, NULL FROM n WHERE i < 7"
is "--top 5 -f csv: keys by denials, with ratios; keys without denials left out" \
"rule,key,denied,total,deny_ratio
api,b,30,100,0.3000
api,a,10,20,0.5000" "$("$REPORT" --top 5 -f csv "$T/top.db")"
out=$("$REPORT" --top 1 "$T/top.db")
check "--top 1 (text): only the most denied key" grep -Eq '^api +b +30 +100 +30\.00%$' <<< "$out"
check "--top 1 (text): says how many keys had denials" grep -q '2 of 3 keys had denials' <<< "$out"
out=$("$REPORT" "$T/top.db")
check "default report: one series per rule, unmatched requests apart" \
	test "$(grep -c '^rule \|^no rule' <<< "$out")" = 3

echo "# the report agrees with SQL on a generated history"
big=$T/gen-token_bucket.db
want=$(sqlite3 -separator , "$big" "SELECT ts_ms / 1000 * 1000, sum(allowed), sum(1 - allowed) FROM decisions GROUP BY 1 ORDER BY 1")
got=$("$REPORT" -f csv "$big" | awk -F, 'NR > 1 { print $2 "," $6 "," $7 }')
is "per-second allowed and denied equal GROUP BY ts_ms / 1000 ($(wc -l <<< "$want") windows)" "$want" "$got"

echo "# bytes that are not text: every format stays valid"
# Keys a client could send, stored as they came (an older gateway did):
# e9 and ff (not UTF-8), a NUL inside, an ESC sequence, a quote and a comma;
# 6 admitted against 5 a second, so that --verify names every key.
newdb "$T/bytes.db"
sqlite3 "$T/bytes.db" "INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed,
  reason, cost, limit_value, window_ms, burst)
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9)
SELECT $BASE + i, 'b' || i, 'api', CAST(X'61e9ff62' AS TEXT), 'sliding_log', i < 6, 'limit', 1, 5, 1000, 5 FROM n
UNION ALL SELECT $BASE + i, 'c' || i, 'api', CAST(X'610063' AS TEXT), 'sliding_log', i < 6, 'limit', 1, 5, 1000, 5 FROM n
UNION ALL SELECT $BASE + i, 'd' || i, 'api', CAST(X'1b5b33316d22782c79' AS TEXT), 'sliding_log', i < 6, 'limit', 1, 5, 1000, 5 FROM n"
jsonok() { python3 -c 'import json, sys; json.loads(sys.stdin.buffer.read())'; }
for args in "-r api" "--top 5" "--verify -r api"; do
	# shellcheck disable=SC2086
	"$REPORT" $args -f json "$T/bytes.db" > "$T/bytes.json"
	check "JSON ($args) loads in Python" jsonok < "$T/bytes.json"
	# shellcheck disable=SC2086
	"$REPORT" $args -f csv "$T/bytes.db" > "$T/bytes.csv"
	check "CSV ($args) is UTF-8 and parses, every row as wide as the header" python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1], encoding="utf-8", newline="")))
assert rows and all(len(r) == len(rows[0]) for r in rows), rows' "$T/bytes.csv"
	# shellcheck disable=SC2086
	"$REPORT" $args "$T/bytes.db" > "$T/bytes.txt"
	check "text ($args) is UTF-8 without a control character" python3 -c '
import sys
t = open(sys.argv[1], "rb").read().decode("utf-8")
assert not any(ord(c) < 32 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in t), repr(t)' "$T/bytes.txt"
done
keys=$("$REPORT" -r api -f json "$T/bytes.db" | python3 -c '
import json, sys
print(" ".join(ascii(s["key"]) for s in json.loads(sys.stdin.buffer.read())["series"]))')
is "JSON: invalid bytes as U+FFFD each, the NUL as U+0000, the ESC as U+001B" \
	"'\\x1b[31m\"x,y' 'a\\x00c' 'a\\ufffd\\ufffdb'" "$keys"
is "CSV: the three keys, quoted where needed" \
	"$(printf '\033[31m"x,y\na\357\277\275c\na\357\277\275\357\277\275b')" \
	"$("$REPORT" -r api -f csv "$T/bytes.db" | python3 -c '
import csv, sys
for r in list(csv.reader(sys.stdin))[1:]:
    print(r[4])' | uniq)"
"$REPORT" -r api -f html -o "$T/bytes.html" "$T/bytes.db"
check "HTML is UTF-8, keys entity-escaped, no control character" python3 -c '
import sys
t = open(sys.argv[1], "rb").read().decode("utf-8")
assert "key a\ufffd\ufffdb" in t and "\ufffd[31m&quot;x,y" in t and "a\ufffdc" in t, t
assert not any(ord(c) < 32 and c not in "\t\n\r" for c in t)' "$T/bytes.html"

echo "# errors: one sentence on stderr, exit 2"
printf 'not a database at all, just text\n%.0s' $(seq 200) > "$T/text.db"
: > "$T/empty.db"
sqlite3 "$T/other.db" "CREATE TABLE t (x)"
sqlite3 "$T/cols.db" "CREATE TABLE decisions (id INTEGER PRIMARY KEY, ts_ms INTEGER, rule TEXT)"
mkdir -p "$T/ro"
err() {	# what expected-phrase args...
	local what=$1 phrase=$2 rc lines; shift 2
	"$REPORT" "$@" > "$T/out" 2> "$T/err"; rc=$?
	lines=$(wc -l < "$T/err")
	if [ "$rc" = 2 ] && [ "$lines" = 1 ] && grep -q "^rlgate-report: .*$phrase" "$T/err" &&
	   [ ! -s "$T/out" ]; then
		ok "$what: exit 2, \"$(cat "$T/err")\""
	else
		not_ok "$what: exit $rc, $lines lines: $(head -3 "$T/err")"
	fi
}
err "missing database" "$T/nope.db: no such file" "$T/nope.db"
err "a text file" "text.db: not an SQLite database" "$T/text.db"
err "an empty file" "empty.db: not an rlgate audit database (no decisions table)" "$T/empty.db"
err "another SQLite database" "other.db: not an rlgate audit database (no decisions table)" "$T/other.db"
err "a decisions table without the columns" "cols.db: not an rlgate audit database (table decisions has no column request_id)" "$T/cols.db"
err "a directory without databases" "ro: a directory without audit databases (no \\*.db file in it)" "$T/ro"
err "a pattern that matches nothing" "nope-\\*.db: no file matches" "$T/nope-*.db"
err "a bad one among good ones" "nope.db: no such file" "$DEMO" "$T/nope.db"
err "unknown rule" 'unknown rule "nosuch" (the database knows: user_list)' -r nosuch "$DEMO"
err "unknown key of a rule" 'rule "user_list" has no key "org9"' -r user_list -k org9 "$DEMO"
err "unknown key" 'unknown key "org9"' -k org9 "$DEMO"
err "bad window" '-w "10x" is not a duration' -w 10x "$DEMO"
err "window without unit" '-w "10" has no unit' -w 10 "$DEMO"
err "zero window" '-w "0ms" is too short' -w 0ms "$DEMO"
err "bad --since" '--since "yesterday" is not a time' --since yesterday "$DEMO"
err "impossible date" '--until "2025-02-30" is not a time' --until 2025-02-30 "$DEMO"
err "--since after --until" '--since must be before --until' --since 2025-11-23 --until 2025-11-22 "$DEMO"
err "bad format" '-f "xml" is not a format' -f xml "$DEMO"
err "unknown long option" 'unknown option --frobnicate' --frobnicate "$DEMO"
err "unknown short option" 'unknown option -z' -z "$DEMO"
err "missing value" '-w needs a value' "$DEMO" -w
err "no database" 'no audit database given' -w 1s
err "--top 0" '--top "0" is too small' --top 0 "$DEMO"
err "--top x" '--top "x" is not a whole number' --top x "$DEMO"
err "--verify with --top" 'give one of them' --verify --top 3 "$DEMO"
err "--unmatched without html" '--unmatched only applies to the -f html report' --unmatched "$DEMO"
err "unwritable -o" "cannot write" -o "$T/no/such/dir/r.txt" "$DEMO"

echo "# HTML in headless Chromium"
if ! command -v chromium > /dev/null; then
	not_ok "chromium is installed (tests/deps.sh installs it)"
else
	browse() {	# FILE ARGS...
		local f=$1; shift
		timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic \
			--no-first-run --disable-background-networking --disable-component-update \
			--disable-sync --user-data-dir="$(mktemp -d "$T/chromium.XXXXXX")" \
			--window-size=1100,700 "$@" "file://$f" 2> /dev/null
	}
	"$REPORT" -f html -o "$T/demo.html" "$DEMO"
	check "the page loads nothing from the network" \
		sh -c "! grep -Eq '(src|href)=\"(https?:)?//' '$T/demo.html'"
	browse "$T/demo.html" --dump-dom > "$T/demo.dom"
	is "demo page: one bar in the rendered DOM" 1 "$(grep -o '<g class="bar"' "$T/demo.dom" | wc -l)"
	check "demo page: the bar holds 100 allowed and 10 denied" \
		grep -q 'data-allowed="100" data-denied="10"' "$T/demo.dom"
	check "demo page: the limit line and its label" grep -q 'limit 100 per 1s' "$T/demo.dom"
	check "demo page: a title naming the rule" grep -q '<h1>rlgate report: rule user_list</h1>' "$T/demo.dom"
	check "demo page: a legend" grep -q '<g class="legend"' "$T/demo.dom"

	db=$T/gen-sliding_log.db
	windows=$(sqlite3 "$db" "SELECT count(DISTINCT ts_ms / 5000) FROM decisions WHERE key = 'k00001'")
	"$REPORT" -f html -w 5s -r sliding_log -k k00001 -o "$T/key.html" "$db"
	browse "$T/key.html" --dump-dom > "$T/key.dom"
	is "one key, 5s windows: a bar per window in the DOM ($windows)" "$windows" \
		"$(grep -o '<g class="bar"' "$T/key.dom" | wc -l)"
	check "one key: the title names rule and key" \
		grep -q '<h1>rlgate report: rule sliding_log, key k00001</h1>' "$T/key.dom"
	check "one key: time axis labels in UTC" grep -Eq '>10:[0-5][0-9](:[0-5][0-9])?<' "$T/key.dom"
	browse "$T/key.html" --screenshot="$T/key.png" > /dev/null
	check "a screenshot is taken (PNG)" sh -c "head -c 8 '$T/key.png' | grep -q PNG"

	# Denials dominate a thousand to one: 10 admitted against 10,000 denied a
	# second (limit 10/s), 12 admitted in the fourth second (a violation),
	# and requests no rule applied to.
	newdb "$T/flood.db"
	sqlite3 "$T/flood.db" "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 5),
	n(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM n WHERE j < 10009)
	INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason, cost, limit_value, window_ms, burst)
	SELECT $BASE + i * 1000 + j / 11, 'f', 'api', 'k', 'fixed_window', j < CASE i WHEN 3 THEN 12 ELSE 10 END,
	  'limit', 1, 10, 1000, 10 FROM s, n;
	INSERT INTO decisions (ts_ms, request_id, rule, key, algorithm, allowed, reason)
	SELECT ts_ms, 'u', NULL, NULL, NULL, 1, 'unmatched' FROM decisions WHERE allowed = 1"
	geometry() {	# DOM: per chart, its id, then each bar's admitted height / its panel's height
		python3 -c '
import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
for sec in re.findall(r"<section class=\"chart\" id=\"(series-\d+)\">(.*?)</section>", t, re.S):
    ids, body = sec
    panels = re.findall(r"<g class=\"panel-(admitted|denied)\">", body)
    heights = [float(h) for h in re.findall(r"<g class=\"bar\"[^>]*>(?:(?!</g>).)*?<rect class=\"allowed\" [^>]*height=\"([\d.]+)\"", body, re.S)]
    print(ids, "+".join(panels), " ".join("%.2f" % (h / 200) for h in heights))' "$1"
	}
	"$REPORT" -f html -o "$T/flood.html" "$T/flood.db"
	browse "$T/flood.html" --dump-dom > "$T/flood.dom"
	is "1000:1: one chart (the rule), two panels, each admitted bar on its own scale (10 under a limit of 10: two thirds of the panel)" \
		"series-1 admitted+denied 0.67 0.67 0.67 0.80 0.67 0.67" "$(geometry "$T/flood.dom")"
	check "1000:1: the limit line is in the admitted panel's scale (10 per 1s)" \
		grep -q 'limit 10 per 1s' "$T/flood.dom"
	check "1000:1: the unmatched series is left out, and the page says so" \
		grep -q '62 decisions no rule applied to (not limited) are not charted; --unmatched shows them' "$T/flood.dom"
	is "1000:1: no violation marked without --verify" 0 "$(grep -c 'class="violation"' "$T/flood.dom")"
	"$REPORT" -f html --unmatched -o "$T/flood-u.html" "$T/flood.db"
	browse "$T/flood-u.html" --dump-dom > "$T/flood-u.dom"
	is "--unmatched: the no-rule series charted too, after the rule" \
		"series-1 series-0" "$(geometry "$T/flood-u.dom" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')"
	"$REPORT" -f html --verify -o "$T/flood-v.html" "$T/flood.db"; rc=$?
	is "--verify -f html exits 1 on a violation" 1 "$rc"
	browse "$T/flood-v.html" --dump-dom > "$T/flood-v.dom"
	is "--verify -f html: one marked stretch, the fourth second" \
		'<g class="violation" data-from="2025-11-22 10:00:03.000" data-to="2025-11-22 10:00:04.000" data-violations="1">' \
		"$(grep -o '<g class="violation"[^>]*>' "$T/flood-v.dom")"
	check "--verify -f html: the violation listed under the chart" \
		grep -q '<tr class="violation"><td>api</td><td>k</td><td>2025-11-22 10:00:03.000</td>' "$T/flood-v.dom"
	"$REPORT" -f html --verify -o "$T/demo-v.html" "$DEMO"; rc=$?
	is "--verify -f html on the demo: exit 0" 0 "$rc"
	check "--verify -f html on the demo: says the limit held, nothing marked" \
		sh -c "grep -q 'every limit held' '$T/demo-v.html' && ! grep -q 'class=\"violation\"' '$T/demo-v.html'"
	browse "$T/flood-v.html" --screenshot="$T/flood.png" > /dev/null
	check "1000:1 page: a screenshot is taken (PNG)" sh -c "head -c 8 '$T/flood.png' | grep -q PNG"
fi

finish
