#!/bin/bash
# The audit's layouts, against tests/fixtures/audit-v1.db: a database the
# release before the interned layout wrote from real requests (make_v1.sh),
# with the reports that release's rlgate-report gave beside it. The same
# rows written by today's writer (tests/tools/audit_copy) give the same
# SELECT * FROM decisions, and rlgate-report gives the same reports on the
# old file, on the new one, and on the two halves of the rows, one in each
# layout, read as one timeline.
. "$(dirname "$0")/../lib.sh"

FIX=$TOP/tests/fixtures
V1=$FIX/audit-v1.db
REPORT=$TOP/reports/rlgate-report
COPY=$TOP/tests/tools/audit_copy

# reports OUT DB...: the reports the fixture's were made with, into OUT.*
reports() {
	local out=$1
	shift
	"$REPORT" -w 1m "$@" > "$out.text" 2> "$out.text.err"
	"$REPORT" -w 1m -f csv -k acme/user/list -r org "$@" > "$out.key.csv" 2> "$out.key.err"
	"$REPORT" -w 1s -f json "$@" > "$out.json" 2> "$out.json.err"
	"$REPORT" --verify "$@" > "$out.verify" 2>&1
	"$REPORT" --top 5 "$@" > "$out.top" 2>&1
}
# The count of databases read is the only difference allowed.
ndb() { sed 's/\([0-9]*\) databases\{0,1\}\([ ,]\)/N databases\2/' "$1"; }
same_reports() {	# WHAT OUT
	local k
	for k in text key.csv json verify top; do
		is "$1: the $k report is the earlier release's" "$(ndb "$FIX/audit-v1.$k")" "$(ndb "$2.$k")"
	done
}
# v1_part SRC DST WHERE: a first-layout file of SRC's rows matching WHERE.
v1_part() {
	audit_v1 "$1" "$2"
	sqlite3 "$2" "DELETE FROM decisions WHERE NOT ($3)"
}

# ---- the view gives the first layout's values -----------------------------
"$COPY" "$V1" "$T/new.db" > /dev/null
is "the new file is of the second layout" "1919706977 2" \
	"$(sqlite3 "$T/new.db" "PRAGMA application_id" "PRAGMA user_version" | tr '\n' ' ' | sed 's/ $//')"
is "decisions is a view there" view "$(sqlite3 "$T/new.db" "SELECT type FROM sqlite_master WHERE name = 'decisions'")"
sqlite3 -header "$T/new.db" "SELECT * FROM decisions ORDER BY id" > "$T/new.rows"
check "SELECT * FROM decisions: the same 18 rows, every column, as the earlier release wrote" \
	cmp -s "$FIX/audit-v1.rows" "$T/new.rows"
is "and the same types" \
	"$(sqlite3 "$V1" "SELECT group_concat(t, ',') FROM (SELECT typeof(request_id) || typeof(cost) || typeof(key) || typeof(status) AS t FROM decisions ORDER BY id)")" \
	"$(sqlite3 "$T/new.db" "SELECT group_concat(t, ',') FROM (SELECT typeof(request_id) || typeof(cost) || typeof(key) || typeof(status) AS t FROM decisions ORDER BY id)")"
is "the view is read-only" 1 "$(sqlite3 "$T/new.db" "DELETE FROM decisions" > /dev/null 2>&1; echo $?)"

# ---- reports: old, new, both ----------------------------------------------
reports "$T/old" "$V1"
same_reports "first layout" "$T/old"
reports "$T/new" "$T/new.db"
same_reports "second layout" "$T/new"
# Every rule in whole seconds: the summaries answer, and it is said.
is "the first layout's file: read from rows, nothing said" "" "$(cat "$T/old.text.err" "$T/old.json.err")"
is "second layout, every rule: from the summaries, said on stderr" \
	"rlgate-report: from the per-second summaries of 1 of 1 database (no row read there)" "$(cat "$T/new.text.err")"
is "the same for the JSON of 1 s windows" "$(cat "$T/new.text.err")" "$(cat "$T/new.json.err")"
is "a key's report reads rows, and says nothing" "" "$(cat "$T/new.key.err")"
is "the summaries equal the rows: per second and rule, allowed, denied, unchecked, first and last ms" 0 \
	"$(sqlite3 "$T/new.db" "SELECT count(*) FROM (SELECT sec, rule, allowed, denied, unchecked, first_ms, last_ms FROM rlg_counts
		EXCEPT SELECT d.ts_ms / 1000, d.rule, total(o.allowed), total(1 - o.allowed), total(o.allowed AND o.reason = 'redis_error'),
		min(d.ts_ms % 1000), max(d.ts_ms % 1000) FROM rlg_rows d JOIN rlg_outcomes o ON o.id = d.outcome GROUP BY 1, 2)")"
v1_part "$V1" "$T/half1.db" "id <= 9"
v1_part "$V1" "$T/half2-v1.db" "id > 9"
"$COPY" "$T/half2-v1.db" "$T/half2.db" > /dev/null
rm -f "$T/half2-v1.db"
reports "$T/both" "$T/half1.db" "$T/half2.db"
same_reports "half the rows in each layout" "$T/both"
check "and the header says two databases" grep -q "^rlgate-report: 18 decisions from 2 databases" "$T/both.text"
is "one of them answered from its summaries" \
	"rlgate-report: from the per-second summaries of 1 of 2 databases (no row read there)" "$(cat "$T/both.text.err")"

# ---- rlgate on a file of the first layout: migrated in place ------------------
start_redis || exit 1
AUDIT_DB=$T/mig.db
cp "$V1" "$AUDIT_DB"
cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 2
$(ini_redis_audit)

[rule:org]
path = /user/list
key = {query.org}{path}
limit = 3
window = 1m
EOF
start_rlgate "$T/rlgate.ini" || exit 1
for i in 1 2 3 4 5; do
	"$TOP/tests/tools/fcgi_raw" "127.0.0.1:$RLGATE_PORT" \
		"request 1 responder close GET /user/list?org=new 10.9.9.$i" "wait-reply 1" > /dev/null
done
check "migrated: the 5 new rows are written" wait_for 10 rows_at_least 23 1
stop_rlgate
is "migrated: the file is of the second layout" 2 "$(sql "PRAGMA user_version")"
is "migrated: the first layout's table is gone" "rlg_counts rlg_outcomes rlg_rows rlg_rules rlg_texts" \
	"$(sql "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name" | tr '\n' ' ' | sed 's/ $//')"
sqlite3 -header "$AUDIT_DB" "SELECT * FROM decisions WHERE id <= 18 ORDER BY id" > "$T/mig.rows"
check "migrated: the 18 old rows kept their ids and every value" cmp -s "$FIX/audit-v1.rows" "$T/mig.rows"
is "migrated: the new rows follow, ids 19 to 23, 3 allowed and 2 denied" "19 23 5 3" \
	"$(sql "SELECT min(id), max(id), count(*), sum(allowed) FROM decisions WHERE id > 18" | tr '|' ' ')"
is "migrated: the summaries count the old rows and the new ones" "23 0" \
	"$(sqlite3 "$AUDIT_DB" "SELECT sum(allowed + denied), (SELECT count(*) FROM (SELECT sec, rule, allowed, denied FROM rlg_counts
		EXCEPT SELECT d.ts_ms / 1000, d.rule, total(o.allowed), total(1 - o.allowed) FROM rlg_rows d
		JOIN rlg_outcomes o ON o.id = d.outcome GROUP BY 1, 2)) FROM rlg_counts" | tr '|' ' ')"
is "migrated: logged once, with the count" 1 \
	"$(grep -c "mig.db: the first layout's 18 rows moved to the second, ids and values kept" "$T/rlgate.log")"

# ---- [audit] keep_rows: rows deleted, summaries kept and reported -------------
stop_rlgate
DIR=$T/dated
mkdir -p "$DIR"
OLD=$DIR/a-$(date -u -d '2 days ago' +%Y%m%d%H).db
"$COPY" "$V1" "$OLD" > /dev/null
cat > "$T/keep.ini" <<EOF
[gateway]
workers = 2
$(ini_redis_audit)
keep = 30d
keep_rows = 1h

[rule:org]
path = /user/list
key = {query.org}{path}
limit = 3
window = 1m
EOF
sed -i "s|^database = .*|database = $DIR/a-%Y%m%d%H.db|" "$T/keep.ini"
: > "$T/rlgate.log"
start_rlgate "$T/keep.ini" || exit 1
"$TOP/tests/tools/fcgi_raw" "127.0.0.1:$RLGATE_PORT" \
	"request 1 responder close GET /user/list?org=k 10.9.9.9" "wait-reply 1" > /dev/null
check "keep_rows: the old file's rows are deleted at the first write" \
	wait_for 10 grep -q "$(basename "$OLD"): 18 rows deleted, their period ended more than \[audit\] keep_rows ago" "$T/rlgate.log"
stop_rlgate
is "keep_rows: no row left, the summaries of all 18 kept" "0 18" \
	"$(sqlite3 "$OLD" "SELECT (SELECT count(*) FROM rlg_rows), (SELECT sum(allowed + denied) FROM rlg_counts)" | tr '|' ' ')"
check "keep_rows: the file of the present keeps its row" test "$(rows_in "$(ls "$DIR"/a-*.db | grep -v "$(basename "$OLD")")")" = 1
"$REPORT" -w 1m "$OLD" > "$T/gone.text" 2> "$T/gone.err"
is "keep_rows: the throughput report of the old file, from its summaries, is the earlier release's" \
	"$(cat "$FIX/audit-v1.text")" "$(cat "$T/gone.text")"
is "keep_rows: and says where it came from" \
	"rlgate-report: from the per-second summaries of 1 of 1 database (no row read there)" "$(cat "$T/gone.err")"
"$REPORT" --verify "$OLD" > /dev/null 2> "$T/gone-v.err"
is "keep_rows: --verify says it needs the rows that are gone" \
	"rlgate-report: $OLD: its rows were deleted ([audit] keep_rows), only its per-second summaries are left: --verify needs rows and leaves it out" \
	"$(cat "$T/gone-v.err")"
"$REPORT" -r org -k acme/user/list "$OLD" > /dev/null 2> "$T/gone-k.err"
check "keep_rows: so does a key's report" grep -q "a report per key needs rows and leaves it out" "$T/gone-k.err"
# The configuration checks the keys with file and line.
sed -i 's/^keep_rows = 1h/keep_rows = 40d/' "$T/keep.ini"
is "keep_rows longer than keep: rlgate -t names the file, line and key" \
	"$T/keep.ini:$(grep -n '^keep_rows' "$T/keep.ini" | cut -d: -f1): [audit] keep_rows: must be shorter than keep (3456000000 ms against 2592000000 ms): keep deletes whole files, rows and summaries, keep_rows only the rows before that" \
	"$("$RLGATE" -t -c "$T/keep.ini" 2>&1)"

# ---- the second layout read by ids: what the first layout's table gives ----
# rlgate-report reads a second-layout file's rows by id (reports/rowids.c),
# not through the view: the same rows in each layout give the same reports
# (--verify, --top, and the reports that read rows).
# The rows hold what only some readers look at: unchecked admissions,
# local rows of two processes (and ids without one), rows without a key,
# unmatched rows, and a rule whose parameters changed.
"$TOP/tests/tools/gen_audit" -o "$T/ids1.db" -a mix -n 3000 -k 40 -l 5 -w 1000 -c 2 -s 7 > /dev/null
sqlite3 "$T/ids1.db" "
UPDATE decisions SET reason = 'redis_error', allowed = 1 WHERE id % 7 = 0;
UPDATE decisions SET reason = 'local', request_id = (CASE id % 2 WHEN 0 THEN 'aaaa' ELSE 'bbbb' END) || '-' || id WHERE id % 11 = 0;
UPDATE decisions SET reason = 'local', request_id = 'nodash' || id WHERE id % 29 = 0;
UPDATE decisions SET key = NULL WHERE id % 13 = 0;
UPDATE decisions SET rule = NULL, algorithm = NULL, limit_value = NULL, window_ms = NULL, burst = NULL WHERE id % 17 = 0;
UPDATE decisions SET limit_value = 6 WHERE id % 23 = 0;"
"$COPY" "$T/ids1.db" "$T/ids2.db" > /dev/null
is "by ids: the rows hold unchecked, local, denied, keyless and unmatched ones" "377 366 986 230 176" \
	"$(sqlite3 "$T/ids2.db" "SELECT sum(reason = 'redis_error'), sum(reason = 'local'), sum(allowed = 0), sum(key IS NULL), sum(rule IS NULL) FROM decisions" | tr '|' ' ')"
# Windows in ms, a key, or a rule per key: read from rows, not summaries.
for how in "--verify" "--verify --strict" "--verify -r gcra" "--top 100" \
    "--top 5 -r token_bucket" "--top 5 -k k00007" "-w 250ms" "-w 250ms -f json" \
    "-w 1s -f csv -r token_bucket" "-w 1ms -f csv -r gcra -k k00004" \
    "-w 1s -f json -k k00007"; do
	# shellcheck disable=SC2086
	"$REPORT" $how "$T/ids1.db" > "$T/ids1.out" 2>&1
	# shellcheck disable=SC2086
	"$REPORT" $how "$T/ids2.db" > "$T/ids2.out" 2>&1
	check "by ids, $how: the report the first layout's rows give" cmp -s "$T/ids1.out" "$T/ids2.out"
done

# ---- the rows read by several threads (reports/rowscan.c) ------------------
# 60000 rows hold ids in more chunks than threads, and 20000 deleted ids a
# gap wider than a chunk: -j 1, 2 and 3 give the first layout's reports
# (--verify, --top, the reports that read rows, --what-if).
"$TOP/tests/tools/gen_audit" -o "$T/par1.db" -a mix -n 60000 -k 40 -l 5 -w 1000 -c 2 -s 11 > /dev/null
sqlite3 "$T/par1.db" "
UPDATE decisions SET reason = 'redis_error', allowed = 1 WHERE id % 7 = 0;
UPDATE decisions SET reason = 'local', request_id = 'aaaa-' || id WHERE id % 11 = 0;
UPDATE decisions SET key = NULL WHERE id % 13 = 0;"
"$COPY" "$T/par1.db" "$T/par2.db" > /dev/null
sqlite3 "$T/par1.db" "DELETE FROM decisions WHERE id BETWEEN 20000 AND 39999"
sqlite3 "$T/par2.db" "DELETE FROM rlg_rows WHERE id BETWEEN 20000 AND 39999"
read -r lo hi <<< "$(sqlite3 -separator ' ' "$T/par1.db" "SELECT min(ts_ms), max(ts_ms) FROM decisions")"
is "threads: the same 40000 rows left in each layout" "40000 40000" \
	"$(sqlite3 "$T/par1.db" "SELECT count(*) FROM decisions") $(sqlite3 "$T/par2.db" "SELECT count(*) FROM decisions")"
for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	printf '[rule:%s]\nkey = {query.k}\nalgorithm = %s\nlimit = 3\nwindow = 1s\n\n' "$a" "$a"
done > "$T/par.ini"
for how in "--verify" "--verify --strict" "--top 100" "--top 5 -r token_bucket" \
    "--verify -r gcra --since $((lo + (hi - lo) / 8)) --until $((hi - (hi - lo) / 8))" \
    "-w 100ms -f csv -r sliding_log" "-w 1s -k k00007" "--what-if $T/par.ini -f csv"; do
	# shellcheck disable=SC2086
	"$REPORT" -j 1 $how "$T/par1.db" > "$T/par1.out" 2>&1
	for j in 1 2 3; do
		# shellcheck disable=SC2086
		"$REPORT" -j $j $how "$T/par2.db" > "$T/par2.out" 2>&1
		check "threads, -j $j $how: the first layout's report" cmp -s "$T/par1.out" "$T/par2.out"
	done
done
check "threads: the what-if report is not empty" grep -q '^[0-9-]* [0-9:.]*,[0-9]*,1000,gcra,' "$T/par1.out"
head -c $(( $(stat -c %s "$T/par2.db") * 3 / 4 )) "$T/par2.db" > "$T/par-cut.db"
for how in "--verify" "--top 3" "-w 100ms -r gcra" "--what-if $T/par.ini"; do
	# shellcheck disable=SC2086
	"$REPORT" -j 3 $how "$T/par-cut.db" > /dev/null 2> "$T/bad.err"
	rc=$?
	is "threads: a truncated file, -j 3 $how: exit 2, SQLite's word for it, naming the file" \
		"2 rlgate-report: $T/par-cut.db: cannot read: database disk image is malformed" \
		"$rc $(cat "$T/bad.err")"
done
is "-j 0: refused, with the range" \
	'rlgate-report: -j "0" is too small (use a count of threads from 1 to 256)' \
	"$("$REPORT" -j 0 --top 3 "$T/par2.db" 2>&1)"

# ---- bad input: the report --------------------------------------------------
"$TOP/tests/tools/gen_audit" -o "$T/big1.db" -a mix -n 3000 > /dev/null
"$COPY" "$T/big1.db" "$T/big.db" > /dev/null
sqlite3 "$T/big.db" "PRAGMA wal_checkpoint(TRUNCATE)" > /dev/null
sqlite3 "$T/foreign.db" "CREATE TABLE t (x); INSERT INTO t VALUES (1)"
head -c $(( $(stat -c %s "$T/big.db") / 2 )) "$T/big.db" > "$T/truncated.db"
head -c 8192 /dev/urandom > "$T/random.db"
for t in rlg_rows rlg_texts rlg_counts; do
	cp "$T/big.db" "$T/no_$t.db"
	sqlite3 "$T/no_$t.db" "DROP TABLE $t"
done
for f in foreign truncated random no_rlg_rows no_rlg_texts no_rlg_counts; do
	for how in "-w 1s" "-w 1500ms" "--verify" "--top 3"; do
		# shellcheck disable=SC2086
		"$REPORT" $how "$T/$f.db" > /dev/null 2> "$T/bad.err"
		rc=$?
		is "bad input: $f.db, $how: exit 2 and one line naming the file" "2 1 yes" \
			"$rc $(wc -l < "$T/bad.err") $(grep -q "^rlgate-report: $T/$f.db: " "$T/bad.err" && echo yes)"
	done
done
is "bad input: a truncated file is called malformed" \
	"rlgate-report: $T/truncated.db: cannot read: database disk image is malformed" \
	"$("$REPORT" --top 3 "$T/truncated.db" 2>&1)"
is "bad input: a missing table of the layout is named" \
	"rlgate-report: $T/no_rlg_counts.db: a damaged rlgate audit database (column rlg_counts.allowed of its layout is missing)" \
	"$("$REPORT" --verify "$T/no_rlg_counts.db" 2>&1)"

# ---- bad input: rlgate writes nothing into a file it did not write ----------
AUDIT_DB=$T/live.db
sed "s|^database = .*|database = $AUDIT_DB|; /^keep/d" "$T/keep.ini" > "$T/live.ini"
: > "$T/rlgate.log"
start_rlgate "$T/live.ini" || exit 1
get() { "$TOP/tests/tools/fcgi_raw" "127.0.0.1:$RLGATE_PORT" \
	"request 1 responder close GET /user/list?org=$1 10.9.9.9" "wait-reply 1" | grep -o 'Status: [0-9]*\|"status":[0-9]*' | head -1; }
get a > /dev/null
check "live: the first row is written" wait_for 10 rows_at_least 1 1
for f in foreign truncated random; do
	# Replaced whole, as an operator would: its -wal and -shm too.
	rm -f "$AUDIT_DB-wal" "$AUDIT_DB-shm"
	cp "$T/$f.db" "$T/live.new" && mv "$T/live.new" "$AUDIT_DB"
	sum=$(sha256sum < "$AUDIT_DB")
	is "live, $f.db put in its place: requests are still answered" 'Status: 200' "$(get "$f")"
	check "live, $f.db: the failure is logged, naming the file" \
		wait_for 10 grep -q "audit: $AUDIT_DB: cannot write: $AUDIT_DB: " "$T/rlgate.log"
	is "live, $f.db: nothing written into it" "$sum" "$(sha256sum < "$AUDIT_DB")"
	# The file gone, the queued row goes to a new one: the episode ends.
	rm -f "$AUDIT_DB" "$AUDIT_DB-wal" "$AUDIT_DB-shm"
	check "live, $f.db removed: the queued row is written to a new file" wait_for 10 rows_at_least 1 1
	check "live, $f.db removed: and it is said" wait_for 10 grep -q "recovered" "$T/rlgate.log"
	: > "$T/rlgate.log"
done

finish
