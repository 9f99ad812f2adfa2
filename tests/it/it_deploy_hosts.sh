#!/bin/bash
# Two rlgate instances as two "hosts", each with its own audit database,
# behind one lighttpd (conf/lighttpd-hosts.conf as shipped, only its var.
# lines set), sharing one Redis: the seeds' ab run gives exactly 100 + 10
# across them, each instance decided part of it, and the two databases
# merge into one record (rlgate-report) in which the limit held.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var
DOCROOT=$T/www
mkdir -p "$DOCROOT/user"
cp "$TOP/tests/www/user/list" "$DOCROOT/user/list"
REPORT=$TOP/reports/rlgate-report

DB1=$T/audit-host1.db DB2=$T/audit-host2.db
deploy_ini "$T/host1.ini" "$DB1" || exit 1
deploy_ini "$T/host2.ini" "$DB2" || exit 1
RLGATE_PORT=$(free_port); start_rlgate "$T/host1.ini" host1 || exit 1; PORT1=$RLGATE_PORT PID1=$RLGATE_PID
RLGATE_PORT=$(free_port); start_rlgate "$T/host2.ini" host2 || exit 1; PORT2=$RLGATE_PORT PID2=$RLGATE_PID

HTTP_PORT=$(free_port)
ship_conf lighttpd-hosts.conf "$T/lighttpd.conf" \
	http_port="$HTTP_PORT" docroot="$DOCROOT" log_dir="$T/var" \
	rlgate_host1=127.0.0.1 rlgate_port1="$PORT1" \
	rlgate_host2=127.0.0.1 rlgate_port2="$PORT2" || exit 1
run_lighttpd "$T/lighttpd.conf" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

seed_demo "two hosts" "$BASE" org1 "$DB1" "$DB2"
check_denied "two hosts" '"type":"https://iana.org/assignments/http-problem-types#quota-exceeded".*"violated-policies":\["user_list"\]'
curl -s -o "$T/ok.body" "$BASE/user/list?org=org2"
check "two hosts: an allowed request gets the file unchanged" cmp -s "$T/ok.body" "$DOCROOT/user/list"

# Both hosts decided; neither alone saw the limit reached.
wait_for 5 key_rows_reach 111 "$SEED_KEY" "$DB1" "$DB2"
r1=$(key_rows "$SEED_KEY" "$DB1") r2=$(key_rows "$SEED_KEY" "$DB2")
check "two hosts: host1 decided part of it ($r1)" [ "$(( ${r1%+*} + ${r1#*+} ))" -gt 0 ]
check "two hosts: host2 decided the rest ($r2)" [ "$(( ${r2%+*} + ${r2#*+} ))" -gt 0 ]
is "two hosts: 100 admitted between them, 11 denied (with the curl)" "100+11" "$(key_rows "$SEED_KEY" "$DB1" "$DB2")"
check "two hosts: neither database alone holds the 100 ($r1, $r2)" \
	[ "${r1%+*}" -lt 100 -a "${r2%+*}" -lt 100 ]

# Stop the hosts: their rows are all written.
stop_host() { kill -TERM "$1"; wait "$1"; }
stop_host "$PID1"; is "host1 exits 0 on SIGTERM" 0 $?
stop_host "$PID2"; is "host2 exits 0 on SIGTERM" 0 $?

if [ -x "$REPORT" ]; then
	"$REPORT" --verify "$DB1" "$DB2" > "$T/verify.out" 2>&1
	is "rlgate-report --verify of both databases: exit 0" 0 $?
	check "rlgate-report --verify: every limit held" grep -q 'every limit held' "$T/verify.out"
	# Per-window throughput of the merged record, as CSV; columns by name.
	"$REPORT" -f csv -w 1h -k "$SEED_KEY" "$DB1" "$DB2" > "$T/report.csv" 2>"$T/report.err"
	is "rlgate-report merges both databases: 100 allowed, 11 denied for the seeds' key" "100+11" \
		"$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
			{ a += $col["allowed"]; d += $col["denied"] } END { print a "+" d }' "$T/report.csv")"
	"$REPORT" -f csv -w 1h -k "$SEED_KEY" "$DB1" > "$T/report1.csv" 2>/dev/null
	check "rlgate-report of host1 alone shows only its part" \
		[ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
			{ a += $col["allowed"] } END { print a + 0 }' "$T/report1.csv")" = "${r1%+*}" ]
else
	echo "# reports/rlgate-report not built: checking the merge with sqlite3"
	is "merged with sqlite3: 100 allowed, 11 denied for the seeds' key" "100|11" "$(sqlite3 -batch -noheader ":memory:" \
		"ATTACH '$DB1' AS a; ATTACH '$DB2' AS b;
		 SELECT sum(allowed), sum(1 - allowed) FROM (SELECT allowed FROM a.decisions WHERE key = '$SEED_KEY'
		 UNION ALL SELECT allowed FROM b.decisions WHERE key = '$SEED_KEY')")"
fi

finish
