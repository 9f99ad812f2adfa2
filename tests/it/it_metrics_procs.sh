#!/bin/bash
# /metrics and /health across processes: spawn-fcgi -F 2 runs two rlgate
# processes on one socket behind lighttpd (conf/lighttpd.conf and
# conf/lighttpd-status.conf, as shipped). After 2000 requests, every
# scrape, whichever process answers it (each in turn with the other one
# stopped), reads the totals of both, exactly; a process that exits leaves
# its counts in them; the last one out removes the shared memory object.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var			# the audit database: the processes run as www-data
AUDIT_DB=$T/var/audit.db
DOCROOT=$T/www
mkdir -p "$DOCROOT/open" && echo open > "$DOCROOT/open/item"
cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 2
status_path = /rlgate-status

$(ini_redis_audit)

[rule:open]
path = /open/*
limit = 1000000
window = 1s
EOF
chmod 644 "$T/rlgate.ini"
RLGATE_PORT=$(free_port)
spawn_rlgate "127.0.0.1:$RLGATE_PORT" "$T/rlgate.ini" 2 rlgate ||
	{ not_ok "spawn-fcgi -F 2 started 2 rlgate processes"; finish; exit; }
P0=${SPAWNED_PIDS[0]} P1=${SPAWNED_PIDS[1]}
start_shipped_lighttpd "include \"$TOP/conf/lighttpd-status.conf\"" || exit 1
STATUS=http://127.0.0.1:$HTTP_PORT/rlgate-status

# shm PID: the shared memory objects PID has open.
shm() { ls -l "/proc/$1/fd" 2>/dev/null | grep -o '/dev/shm/rlgate-[0-9a-f]*' | sort -u; }
SHM=$(shm "$P0")
check "the processes share one object in /dev/shm ($SHM)" [ -n "$SHM" -a "$SHM" = "$(shm "$P1")" ]

ab_run -n 2000 -c 8 "http://127.0.0.1:$HTTP_PORT/open/item"
is "ab: 2000 complete, 0 failed, all 200" "2000 0 0" "$AB_COMPLETE $AB_FAILED $AB_NON2XX"
# The request id starts with a per-process prefix.
procs_in_db() { sqlite3 -batch -noheader "$AUDIT_DB" "SELECT count(DISTINCT substr(request_id, 1, instr(request_id, '-'))) FROM decisions"; }
check "the audit has the 2000 rows" wait_for 10 rows_at_least 2000 1
is "both processes decided some of them" 2 "$(procs_in_db)"

# scrape_as PID: /metrics answered by PID (the other process stopped; a
# stopped process is not in epoll_wait, the kernel wakes the one running).
scrape_as() {
	local other=$P0
	[ "$1" = "$P0" ] && other=$P1
	kill -STOP "$other"
	curl -s -m 10 "$STATUS/metrics" > "$T/metrics.txt"
	kill -CONT "$other"
}
metric() { awk -v s="$1" '$1 == s { print $2; f = 1 } END { if (!f) print "absent" }' "$T/metrics.txt"; }
totals() {
	echo "$(metric rlgate_requests_total) $(metric 'rlgate_decisions_total{rule="open",outcome="allowed"}')" \
		"$(metric rlgate_processes) $(metric rlgate_workers)"
}
written() { scrape_as "$1"; [ "$(metric rlgate_audit_rows_written_total)" = 2000 ]; }
check "audit rows written: 2000 in all, as process $P0 sees it" wait_for 10 written "$P0"
check "and as process $P1 sees it" wait_for 10 written "$P1"
for i in 1 2 3; do
	for p in "$P0" "$P1"; do
		scrape_as "$p"
		is "scrape $i answered by $p: 2000 requests, 2000 allowed, 2 processes, 4 workers" \
			"2000 2000 2 4" "$(totals)"
	done
done
kill -STOP "$P1"
curl -s -m 10 "$STATUS/health" > "$T/health.json"
kill -CONT "$P1"
is "/health: 2 processes, 4 workers" "2 4" \
	"$(python3 -c 'import json, sys; h = json.load(sys.stdin); print(h["processes"], h["workers"]["total"])' < "$T/health.json")"

# One process stops: its counts stay in the totals.
kill -TERM "$P1"
gone() { ! kill -0 "$1" 2>/dev/null; }
check "process $P1 exits on SIGTERM" wait_for 10 gone "$P1"
curl -s -m 10 "$STATUS/metrics" > "$T/metrics.txt"
is "after it, the one left reads 2000 requests, 2000 allowed, 1 process, 2 workers" \
	"2000 2000 1 2" "$(totals)"
is "and the audit rows written of both: 2000" 2000 "$(metric rlgate_audit_rows_written_total)"
check "the object stays while a process uses it" test -e "$SHM"
kill -TERM "$P0"
check "process $P0 exits on SIGTERM" wait_for 10 gone "$P0"
check "the last one out removed $SHM" bash -c "! test -e '$SHM'"
finish
