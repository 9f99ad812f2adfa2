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
	"$REPORT" -w 1m "$@" > "$out.text" 2>&1
	"$REPORT" -w 1m -f csv -k acme/user/list -r org "$@" > "$out.key.csv" 2>&1
	"$REPORT" -w 1s -f json "$@" > "$out.json" 2>&1
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
v1_part "$V1" "$T/half1.db" "id <= 9"
v1_part "$V1" "$T/half2-v1.db" "id > 9"
"$COPY" "$T/half2-v1.db" "$T/half2.db" > /dev/null
rm -f "$T/half2-v1.db"
reports "$T/both" "$T/half1.db" "$T/half2.db"
same_reports "half the rows in each layout" "$T/both"
check "and the header says two databases" grep -q "^rlgate-report: 18 decisions from 2 databases" "$T/both.text"

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
is "migrated: the first layout's table is gone" "rlg_outcomes rlg_rows rlg_rules rlg_texts" \
	"$(sql "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name" | tr '\n' ' ' | sed 's/ $//')"
sqlite3 -header "$AUDIT_DB" "SELECT * FROM decisions WHERE id <= 18 ORDER BY id" > "$T/mig.rows"
check "migrated: the 18 old rows kept their ids and every value" cmp -s "$FIX/audit-v1.rows" "$T/mig.rows"
is "migrated: the new rows follow, ids 19 to 23, 3 allowed and 2 denied" "19 23 5 3" \
	"$(sql "SELECT min(id), max(id), count(*), sum(allowed) FROM decisions WHERE id > 18" | tr '|' ' ')"
is "migrated: logged once, with the count" 1 \
	"$(grep -c "mig.db: the first layout's 18 rows moved to the second, ids and values kept" "$T/rlgate.log")"

finish
