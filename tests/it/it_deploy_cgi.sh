#!/bin/bash
# cgi-bin/rlgate.cgi run as a CGI program by lighttpd (mod_cgi) and by
# Apache (prefork MPM, mod_cgi), with the shipped conf/lighttpd-cgi.conf
# and conf/apache-cgi.conf (only their variable lines set), as www-data:
#  - alone (/ratelimit/...): it answers like the responder, 200 with a JSON
#    decision or 429 with Retry-After, RateLimit headers, problem+json;
#  - as a wrapper (/app/..., [cgi] upstream): on allow the protected program
#    runs with the request's environment, its body intact on stdin, and the
#    RATELIMIT_* variables; on deny rlgate answers the 429 and the program
#    does not run.
# One audit row per request.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var
DOCROOT=$T/www
mkdir -p "$DOCROOT" "$T/lib" "$T/cgi-bin"
cp "$TOP/tests/www/index.html" "$DOCROOT/"
# What `make install` puts in /usr/local/lib/rlgate, and the protected program.
cp "$TOP/cgi-bin/rlgate.cgi" "$T/lib/rlgate.cgi"
cp "$TOP/tests/www/cgi-bin/app.cgi" "$T/cgi-bin/app.cgi"
# A request body with every byte value, larger than a pipe buffer.
head -c 300000 /dev/urandom > "$T/body.bin"

AUDIT_DB=$T/var/audit.db
# The seeds' window: a minute, not their 1 s. The demo checks the exact
# 100 + 10 of one window, and its 110 CGI processes (each starts, reads
# its configuration, connects to Redis) outlast a second on a loaded
# machine, and under the sanitizers at load 10 outlasted 10 s (12.5 s:
# two windows admitted all 110). How fast they run is measured by hand
# (tests/bench), not asserted here.
SEED_WINDOW=1m
# check.ini: rlgate alone. 2 per org per minute on /ratelimit/login.
cat > "$T/check.ini" <<EOF
[redis]
address = 127.0.0.1:$REDIS_PORT

[audit]
database = $AUDIT_DB
flush_interval = 20ms

[rule:check]
path = /ratelimit/login
key = {query.org}
limit = 2
window = 1m

; The seeds' demonstration: 100 per window per org and endpoint.
[rule:user_list]
path = /ratelimit/user/list
key = {query.org}{path}
limit = 100
window = $SEED_WINDOW
EOF
# app.ini: the wrapper. The deployment rules (app: 3 per client per minute
# under /app/) and the program to protect.
deploy_ini "$T/app.ini" "$AUDIT_DB" || exit 1
printf '\n[cgi]\nupstream = %s\n' "$T/cgi-bin/app.cgi" >> "$T/app.ini"
conf_ok() { "$RLGATE" -t -c "$1" >/dev/null; }
for f in check app; do
	check "rlgate -t accepts $f.ini" conf_ok "$T/$f.ini"
done

code() { sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$1"; }
# body_after_marker FILE: what app.cgi printed after its "--- body" line.
body_after_marker() {
	local off
	off=$(grep -abo -m1 -- '--- body' "$1" | cut -d: -f1)
	tail -c +$((off + 10)) "$1"
}

# cgi_checks SERVER: both modes through the server on $HTTP_PORT.
cgi_checks() {
	local s=$1 base=http://127.0.0.1:$HTTP_PORT i
	rcli FLUSHALL >/dev/null
	if [ -e "$AUDIT_DB" ]; then
		sql "DELETE FROM rlg_rows"
		# Reading as root may have made the WAL files root's: give them back.
		chown www-data:www-data "$AUDIT_DB"*
	fi

	# Alone: a check API answering for itself.
	for i in 1 2 3; do
		curl -s -m 20 -D "$T/c$i.h" -o "$T/c$i.b" "$base/ratelimit/login?org=acme"
	done
	is "$s alone: 1st allowed, 200" 200 "$(code "$T/c1.h")"
	is "$s alone: a JSON decision" application/json "$(resp_header "$T/c1.h" Content-Type)"
	check "$s alone: which says allowed, rule check, key acme" \
		grep -q '^{"allowed":true,"status":200,.*"rule":"check","key":"acme"' "$T/c1.b"
	check "$s alone: RateLimit on the 1st" grep -qE '^RateLimit: "check";r=1;t=(59|60)'$'\r''?$' "$T/c1.h"
	is "$s alone: 2nd allowed" 200 "$(code "$T/c2.h")"
	is "$s alone: 3rd denied, 429" 429 "$(code "$T/c3.h")"
	check "$s alone: Retry-After (s)" at_least 30 "$(resp_header "$T/c3.h" Retry-After)"
	is "$s alone: RateLimit-Policy" '"check";q=2;w=60' "$(resp_header "$T/c3.h" RateLimit-Policy)"
	check "$s alone: RateLimit r=0" grep -qi '^RateLimit: "check";r=0;t=' "$T/c3.h"
	is "$s alone: problem+json" application/problem+json "$(resp_header "$T/c3.h" Content-Type)"
	check "$s alone: the quota-exceeded problem" \
		grep -q '"type":"https://iana.org/assignments/http-problem-types#quota-exceeded".*"violated-policies":\["check"\]' "$T/c3.b"

	# Wrapper: the protected program behind rlgate.cgi.
	for i in 1 2 3 4; do
		curl -s -m 20 -D "$T/w$i.h" -o "$T/w$i.b" -H 'Content-Type: application/octet-stream' \
			--data-binary "@$T/body.bin" "$base/app/orders/$i?ref=x$i"
	done
	is "$s wrapper: 1st allowed, the program answers" 200 "$(code "$T/w1.h")"
	is "$s wrapper: its Content-Type" text/plain "$(resp_header "$T/w1.h" Content-Type)"
	check "$s wrapper: RATELIMIT_POLICY=app" grep -qx 'RATELIMIT_POLICY=app' "$T/w1.b"
	check "$s wrapper: RATELIMIT_LIMIT=3" grep -qx 'RATELIMIT_LIMIT=3' "$T/w1.b"
	check "$s wrapper: RATELIMIT_REMAINING=2" grep -qx 'RATELIMIT_REMAINING=2' "$T/w1.b"
	# The window opens at the 1st request: 60 s to its reset, 59 on a slow machine.
	check "$s wrapper: RATELIMIT_RESET in seconds" grep -qxE 'RATELIMIT_RESET=(59|60)' "$T/w1.b"
	check "$s wrapper: the request's environment (method)" grep -qx 'REQUEST_METHOD=POST' "$T/w1.b"
	check "$s wrapper: the request's environment (PATH_INFO)" grep -qx 'PATH_INFO=/orders/1' "$T/w1.b"
	check "$s wrapper: the request's environment (query)" grep -qx 'QUERY_STRING=ref=x1' "$T/w1.b"
	body_after_marker "$T/w1.b" > "$T/w1.body"
	check "$s wrapper: the 300000-byte POST body arrives intact" cmp -s "$T/w1.body" "$T/body.bin"
	body_after_marker "$T/w3.b" > "$T/w3.body"
	check "$s wrapper: 3rd allowed, RATELIMIT_REMAINING=0" grep -qx 'RATELIMIT_REMAINING=0' "$T/w3.b"
	check "$s wrapper: and its body intact" cmp -s "$T/w3.body" "$T/body.bin"
	is "$s wrapper: 4th denied, 429" 429 "$(code "$T/w4.h")"
	check "$s wrapper: Retry-After (s)" at_least 30 "$(resp_header "$T/w4.h" Retry-After)"
	is "$s wrapper: RateLimit-Policy" '"app";q=3;w=60' "$(resp_header "$T/w4.h" RateLimit-Policy)"
	check "$s wrapper: RateLimit r=0" grep -qi '^RateLimit: "app";r=0;t=' "$T/w4.h"
	check "$s wrapper: rlgate's problem, the program did not run" \
		grep -q '"violated-policies":\["app"\]' "$T/w4.b"
	check "$s wrapper: nothing of the program in the 429" bash -c "! grep -q 'RATELIMIT_' '$T/w4.b'"

	is "$s: one audit row per request (alone 2+1, wrapper 3+1)" "2+1 3+1" \
		"$(key_rows acme "$AUDIT_DB") $(key_rows 127.0.0.1 "$AUDIT_DB")"
	is "$s: the rows name the path the client asked for" "/ratelimit/login|3 /app/orders/4|1" \
		"$(sql "SELECT path, count(*) FROM decisions WHERE path IN ('/ratelimit/login', '/app/orders/4') GROUP BY path ORDER BY path DESC" | xargs)"
}

# --- lighttpd, mod_cgi --------------------------------------------------------
HTTP_PORT=$(free_port)
ship_conf lighttpd-cgi.conf "$T/lighttpd-cgi.conf" \
	http_port="$HTTP_PORT" docroot="$DOCROOT" log_dir="$T/var" \
	rlgate_cgi="$T/lib/rlgate.cgi" check_conf="$T/check.ini" app_conf="$T/app.ini" || exit 1
run_lighttpd "$T/lighttpd-cgi.conf" || exit 1
cgi_checks lighttpd

# The seeds' demonstration through mod_cgi, once: ab -n 110 -c 10 against 100
# per window admits exactly 100 and denies 10 (the 110 CGI requests fit in
# the window that the first one opens).
rcli FLUSHALL >/dev/null
ab_run -n 110 -c 10 "http://127.0.0.1:$HTTP_PORT/ratelimit/user/list?org=seed"
is "lighttpd seeds' demo: 110 complete, 100 admitted, 10 denied" "110 10" "$AB_COMPLETE $AB_NON2XX"
seed_rows() { [ "$(key_rows seed/ratelimit/user/list "$AUDIT_DB")" = "100+10" ]; }
check "lighttpd seeds' demo: 110 rows, 100 allowed + 10 denied" wait_for 10 seed_rows
kill -TERM "$HTTPD_PID"; wait "$HTTPD_PID"

# One CGI request, traced: no thread, no sync, and the reply written
# before the audit database is opened (the server answers at the end of
# the output; the row is written after it).
if command -v strace >/dev/null; then
	sed "s|^database = .*|database = $T/trace.db|" "$T/check.ini" > "$T/trace.ini"
	cgi_once() {
		GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET REQUEST_URI="/ratelimit/user/list?org=trace" \
		REMOTE_ADDR=10.9.0.1 RLGATE_CONF=$T/trace.ini "$@" "$TOP/cgi-bin/rlgate.cgi" > "$T/trace.out"
	}
	cgi_once	# creates the database
	cgi_once strace -f -o "$T/strace.txt"
	is "CGI: the traced request answered 200" "Status: 200 OK" "$(head -1 "$T/trace.out" | tr -d '\r')"
	is "CGI: no thread started (clone)" 0 "$(grep -cE '^[0-9]+ +clone3?\(.*CLONE_THREAD' "$T/strace.txt")"
	is "CGI: no fsync or fdatasync" 0 "$(grep -cE '^[0-9]+ +f(data)?sync\(' "$T/strace.txt")"
	reply_at=$(grep -nm1 'write(1, "Status: 200' "$T/strace.txt" | cut -d: -f1)
	db_at=$(grep -nm1 "open.*trace\.db\"" "$T/strace.txt" | cut -d: -f1)
	check "CGI: the reply (line ${reply_at:-none}) goes out before the database is opened (line ${db_at:-none})" \
		[ "${reply_at:-999999}" -lt "${db_at:-0}" ]
	is "CGI: and the row is written" 2 "$(sqlite3 "$T/trace.db" 'SELECT count(*) FROM decisions')"
else
	echo "# SKIP: strace is not installed: the CGI request is not traced"
fi

# --- Apache, prefork MPM with mod_cgi -----------------------------------------
HTTP_PORT=$(free_port)
ship_conf apache-cgi.conf "$T/apache-cgi.conf" \
	RLGATE_CGI_DIR="$T/lib" RLGATE_CHECK_CONF="$T/check.ini" RLGATE_APP_CONF="$T/app.ini" || exit 1
APACHE_MPM=prefork start_apache "$T/apache-cgi.conf" || exit 1
cgi_checks apache

finish
