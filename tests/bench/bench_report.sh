#!/bin/bash
# Benchmark (not a test): rlgate-report on a generated audit database of
# 10 million decisions (six rules, one per algorithm, 1000 keys, about half
# an hour of traffic at 1.5 x the limit). Prints the time of a per-second
# report, of --verify, of --top and of --what-if, each the best of two runs;
# the last three also on one thread (-j 1; by default the rows are decoded
# on every CPU, reports/rowscan.c).
# Then a per-minute report of one day at 1000 decisions a second (86.4
# million) from its summaries alone, the rows deleted as [audit] keep_rows
# does.
#
#   bash tests/bench/bench_report.sh [ROWS] [KEYS]      (KEEP=1 keeps the database)
#
# The database is of the layout rlgate writes (gen_audit's first-layout rows
# written again through the gateway's writer by tests/tools/audit_copy), or
# with LAYOUT=1 gen_audit's own file, the first layout with its indexes.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROWS=${1:-10000000}
KEYS=${2:-1000}
make --no-print-directory -s reports/rlgate-report tests/tools/gen_audit \
    tests/tools/audit_copy tests/tools/audit_bench || exit 2
REPORT=$PWD/reports/rlgate-report
DIR=$(mktemp -d /tmp/rlgate-bench-report.XXXXXX)
[ -z "${KEEP:-}" ] && trap 'rm -rf "$DIR"' EXIT
DB=$DIR/audit.db
TIMEFORMAT='%R %U %S'

# run NAME ARGS...: the best of two runs; prints real and CPU seconds.
run() {
	local name=$1 best="" t real cpu; shift
	for _ in 1 2; do
		t=$( { time "$REPORT" "$@" > "$DIR/out" 2> "$DIR/err"; } 2>&1 )
		rc=$?
		real=$(echo "$t" | awk '{ print $1 }')
		cpu=$(echo "$t" | awk '{ printf "%.2f", $2 + $3 }')
		if [ -z "$best" ] || awk -v a="$real" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
			best="$real $cpu"
		fi
	done
	printf '%-44s %7.2f s  (cpu %5.2f s)  %6.2f M rows/s  exit %d\n' "$name" \
		"${best%% *}" "${best##* }" "$(awk -v r="$ROWS" -v s="${best%% *}" 'BEGIN { print r / s / 1e6 }')" "$rc"
}

echo "rlgate-report benchmark: $ROWS decisions, $KEYS keys, 6 rules (one per algorithm)"
t=$( { time ./tests/tools/gen_audit -o "$DB" -a mix -n "$ROWS" -k "$KEYS" -l 5 -w 1000 -c 2 -s 1 > "$DIR/gen"; } 2>&1 )
echo "generated in $(echo "$t" | awk '{ print $1 }') s: $(cat "$DIR/gen")"
if [ "${LAYOUT:-2}" != 1 ]; then
	t=$( { time ./tests/tools/audit_copy "$DB" "$DIR/audit2.db" > /dev/null 2>&1; } 2>&1 )
	sqlite3 "$DIR/audit2.db" "PRAGMA wal_checkpoint(TRUNCATE)" > /dev/null
	mv "$DIR/audit2.db" "$DB"
	rm -f "$DIR/audit2.db-wal" "$DIR/audit2.db-shm"
	echo "written in the second layout by the gateway's writer in $(echo "$t" | awk '{ print $1 }') s"
fi
echo "database: $(du -h "$DB" | cut -f1) ($(( $(stat -c %s "$DB") / ROWS )) bytes a decision), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$DB" > /dev/null	# into the page cache: the runs measure the report, not the disk

run "per-second report (text, 6 series)" "$DB"
run "per-second report (csv)" -f csv "$DB"
run "per-second report, one rule, per key (csv)" -r token_bucket -f csv "$DB"
run "1 ms windows, one key (csv)" -w 1ms -r gcra -k k00004 -f csv "$DB"
run "html, 10 s windows" -w 10s -f html "$DB"
run "--verify (all rules, all keys)" --verify "$DB"
grep -E '^(ok|FAIL|rlgate-report: verify)' "$DIR/out" | sed 's/^/    /'
run "--verify, one thread (-j 1)" --verify -j 1 "$DB"
run "--verify -r fixed_window" --verify -r fixed_window "$DB"
run "--top 10" --top 10 "$DB"
run "--top 10, one thread (-j 1)" --top 10 -j 1 "$DB"
# --what-if: the six rules at 3 a second instead of 5, every row replayed.
for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	printf '[rule:%s]\nkey = {query.k}\nalgorithm = %s\nlimit = 3\nwindow = 1s\n\n' "$a" "$a"
done > "$DIR/whatif.ini"
run "--what-if (the six rules at 3 per 1s)" --what-if "$DIR/whatif.ini" "$DB"
run "--what-if, one thread (-j 1)" --what-if "$DIR/whatif.ini" -j 1 "$DB"

# One day at 1000 decisions a second: the file the gateway's writer makes
# (audit_bench: its schema, its rule), its rows deleted and VACUUMed as
# keep_rows does (audit_db_drop_rows), and the per-second summaries of the
# day's 86,400 seconds written by SQL: writing 86.4 million rows through
# the writer first would take minutes and only make the same summaries.
DAY=$DIR/day.db
./tests/tools/audit_bench -n 1000 -t 1 "$DAY" > /dev/null || exit 2
sqlite3 "$DAY" "DELETE FROM rlg_rows; DELETE FROM rlg_counts;
WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 86399)
INSERT INTO rlg_counts (sec, rule, allowed, denied, unchecked, first_ms,
    last_ms, key)
SELECT 1764288000 + i, (SELECT id FROM rlg_rules WHERE name = 'user_list'),
    1000 - i % 7, i % 7, 0, 0, 999, NULL FROM s;
VACUUM; PRAGMA wal_checkpoint(TRUNCATE);" > /dev/null || exit 2
ROWS=86400000
run "one day, 86.4 M decisions, per minute (summaries)" -w 1m "$DAY"
grep -E '^total' "$DIR/out" | sed 's/^/    /'
grep -E 'summaries' "$DIR/err" | sed 's/^/    /'
