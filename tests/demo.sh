#!/bin/bash
# `make run`: the seeds' demonstration, live. A private redis-server,
# rlgate and lighttpd on 127.0.0.1:8080 in front of a small demo site;
# serves until Ctrl-C, then prints the report of what it served.
. "$(dirname "$0")/lib.sh"

HTTP_PORT=${HTTP_PORT:-8080}
if port_open "$HTTP_PORT"; then
	echo "rlgate demo: 127.0.0.1:$HTTP_PORT is in use; run with HTTP_PORT=8081 make run" >&2
	exit 1
fi
start_redis || exit 1
AUDIT_DB=$T/audit.db
DOCROOT=$TOP/tests/www
# The shipped sample configuration, pointed at this demo's Redis and database.
sed -e "s|^address *=.*|address = 127.0.0.1:$REDIS_PORT|" \
    -e "s|^database *= */var/lib/rlgate/audit.db.*|database = $AUDIT_DB|" \
    "$TOP/conf/rlgate.ini" > "$T/rlgate.ini"
"$RLGATE" -t -c "$T/rlgate.ini" >/dev/null || exit 1
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd || exit 1

report() {
	echo
	echo "=== what rlgate decided (audit database $AUDIT_DB) ==="
	if [ -x "$TOP/reports/rlgate-report" ]; then
		"$TOP/reports/rlgate-report" -w 1s "$AUDIT_DB"
	else
		sql "SELECT rule, sum(allowed) AS allowed, sum(1-allowed) AS denied FROM decisions GROUP BY rule"
	fi
}
stop_all() {
	trap - INT TERM
	kill -TERM "$HTTPD_PID" 2>/dev/null
	stop_rlgate		# flushes the audit queue
	report
	exit 0
}
trap stop_all INT TERM

cat <<MSG

rlgate demo is running: lighttpd http://127.0.0.1:$HTTP_PORT -> rlgate 127.0.0.1:$RLGATE_PORT -> redis 127.0.0.1:$REDIS_PORT
configuration: $T/rlgate.ini (from conf/rlgate.ini)   logs: $T/*.log

Try:
  curl -i 'http://127.0.0.1:$HTTP_PORT/user/list?org=org1'        # 200 and the content
  ab -n 110 -c 10 'http://127.0.0.1:$HTTP_PORT/user/list?org=org1' # 100 pass, 10 get 429
  curl -i 'http://127.0.0.1:$HTTP_PORT/user/list?org=org1'        # 429 with Retry-After, RateLimit
  sqlite3 $AUDIT_DB 'SELECT ts_ms, key, allowed FROM decisions ORDER BY id DESC LIMIT 5'

Ctrl-C stops everything and prints the report.
MSG
while kill -0 "$RLGATE_PID" 2>/dev/null; do sleep 1; done
echo "rlgate stopped by itself; see $T/rlgate.log" >&2
exit 1
