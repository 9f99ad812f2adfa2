#!/bin/bash
# Apache 2.4 (Debian's apache2, event MPM, serving as www-data) with
# mod_authnz_fcgi asking rlgate over TCP, conf/apache.conf as shipped (only
# its Define set): a denied request reaches the client as rlgate's 429 with
# Retry-After and the RateLimit headers; an allowed one gets the static file
# or the CGI program, which sees RATELIMIT_* and RL_CLIENT; every request is
# decided once (subrequests are not counted again), one audit row each.
# rlgate runs as the systemd units run it, on a socket passed to it.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var
DOCROOT=$T/www CGI_DIR=$T/cgi-bin
mkdir -p "$DOCROOT/user" "$CGI_DIR"
cp "$TOP/tests/www/user/list" "$TOP/tests/www/index.html" "$DOCROOT/"
mv "$DOCROOT/list" "$DOCROOT/user/list"
cp "$TOP/tests/www/cgi-bin/app.cgi" "$CGI_DIR/"

AUDIT_DB=$T/audit.db
deploy_ini "$T/rlgate.ini" "$AUDIT_DB" || exit 1
# rlgate as rlgate-tcp.socket and rlgate.service run it, the socket held by
# systemd-socket-activate (its port a free one, the paths this test's).
RLGATE_PORT=$(free_port)
LISTEN=$(sed -n "s/^ListenStream=127.0.0.1:9000$/127.0.0.1:$RLGATE_PORT/p" "$TOP/conf/rlgate-tcp.socket")
EXEC=$(sed -n -e "s|@SBINDIR@|$TOP/fcgi|" -e "s|/etc/rlgate/rlgate.ini|$T/rlgate.ini|" -e 's/^ExecStart=//p' "$TOP/conf/rlgate.service")
is "rlgate-tcp.socket listens on 127.0.0.1 (port set here)" "127.0.0.1:$RLGATE_PORT" "$LISTEN"
systemd-socket-activate -l "$LISTEN" -- $EXEC 2>>"$T/rlgate.log" &
PIDS+=($!)
wait_for 10 port_open "$RLGATE_PORT" || { echo "# no socket"; cat "$T/rlgate.log"; exit 1; }
ship_conf apache.conf "$T/rlgate-apache.conf" RLGATE_FCGI="127.0.0.1:$RLGATE_PORT" || exit 1
start_apache "$T/rlgate-apache.conf" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

seed_demo "apache" "$BASE" org1 "$AUDIT_DB"
check "apache: rlgate serves the socket systemd passed" grep -q 'listening on 1 socket from systemd' "$T/rlgate.log"
check_denied "apache" '^{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",.*"violated-policies":\["user_list"\],"retry_after_ms":[1-9][0-9]*}$'
curl -s -o "$T/ok.body" "$BASE/user/list?org=org2"
check "apache: an allowed request gets the file unchanged" cmp -s "$T/ok.body" "$DOCROOT/user/list"
is "apache: / (DirectoryIndex, a subrequest) is answered" 200 "$(status "$BASE/")"
root_rows() { sql "SELECT count(*) FROM decisions WHERE path = '/'"; }
root_decided() { [ "$(root_rows)" -ge 1 ]; }
wait_for 5 root_decided
sleep 0.1	# a second decision of / would be written by now
is "apache: / is decided once" 1 "$(root_rows)"

# A CGI program with PATH_INFO: Apache looks up PATH_TRANSLATED with a
# subrequest, which runs authentication again; the shipped configuration
# asks rlgate for the client's request only. 3 per client per minute.
for i in 1 2 3 4; do
	curl -s -D "$T/cgi$i.h" -o "$T/cgi$i.b" --data-binary "body $i" "$BASE/cgi-bin/app.cgi/extra?q=$i"
done
is "apache CGI: 1st allowed" 200 "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/cgi1.h")"
check "apache CGI: the program got RATELIMIT_POLICY" grep -qx 'RATELIMIT_POLICY=app' "$T/cgi1.b"
check "apache CGI: RATELIMIT_REMAINING = 2 after the 1st (counted once)" grep -qx 'RATELIMIT_REMAINING=2' "$T/cgi1.b"
check "apache CGI: and RL_CLIENT, the client rlgate counted" grep -qx 'RL_CLIENT=127.0.0.1' "$T/cgi1.b"
check "apache CGI: 3rd is allowed with RATELIMIT_REMAINING = 0" grep -qx 'RATELIMIT_REMAINING=0' "$T/cgi3.b"
is "apache CGI: the body reaches the program" "body 2" "$(sed '1,/^--- body$/d' "$T/cgi2.b")"
is "apache CGI: 4th denied with 429" 429 "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/cgi4.h")"
# The 1-minute window opened at the 1st request, moments ago.
check "apache CGI: with Retry-After (30..60 s)" between 30 60 "$(resp_header "$T/cgi4.h" Retry-After)"
is "apache CGI: with RateLimit-Policy" '"app";q=3;w=60' "$(resp_header "$T/cgi4.h" RateLimit-Policy)"
check "apache CGI: rlgate's body, not the program's" grep -q '"violated-policies":\["app"\]' "$T/cgi4.b"
wait_for 5 key_rows_reach 4 127.0.0.1 "$AUDIT_DB"
sleep 0.1	# a second check per request would be written by now
is "apache CGI: 4 requests, 4 audit rows: 3 allowed + 1 denied" "3+1" "$(key_rows 127.0.0.1 "$AUDIT_DB")"

# The access log: the user is the address rlgate counted; 429s are logged.
kill -TERM "$HTTPD_PID"; wait "$HTTPD_PID"
is "apache access log: 11 requests answered 429 for the seeds' org" 11 \
	"$(grep -c "\"GET /user/list?org=${SEED_KEY%/user/list} HTTP/1.[01]\" 429 " "$T/apache/access.log")"
check "apache access log: allowed requests carry the client as user" \
	grep -q '^127.0.0.1 - 127.0.0.1 .*"GET /user/list?org=org2 HTTP/1.1" 200 ' "$T/apache/access.log"
is "every request decided once: $(rows_in "$AUDIT_DB") rows" $((117 + SEED_EXTRA)) "$(rows_in "$AUDIT_DB")"

finish
