#!/bin/bash
# nginx (Debian's, workers as www-data) with auth_request to rlgate on a
# unix socket, conf/nginx.conf as shipped (only its "# var." lines set):
# rlgate answers a denial with 403 (deny_status), nginx turns it into the
# 429 the client gets, with Retry-After and the RateLimit headers; an
# allowed request gets the file; path and query come from REQUEST_URI; one
# audit row per decision.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var
DOCROOT=$T/www
mkdir -p "$DOCROOT/user" "$DOCROOT/secret"
cp "$TOP/tests/www/user/list" "$DOCROOT/user/list"
cp "$TOP/tests/www/index.html" "$DOCROOT/index.html"
echo "not for www-data" > "$DOCROOT/secret/file"
chmod 600 "$DOCROOT/secret/file"

AUDIT_DB=$T/var/audit.db
SOCK=$T/var/rlgate.sock
deploy_ini "$T/rlgate.ini" "$AUDIT_DB" 403 || exit 1
# rlgate as conf/rlgate.service and rlgate.socket run it (their paths set
# to this test's; User rlgate played by www-data): the units must be valid,
# ExecStartPre must accept the configuration, and ExecStart must serve on
# the socket that systemd-socket-activate holds, made as rlgate.socket says
# (SocketMode, SocketGroup: systemd-socket-activate applies neither).
mkdir -p "$T/bin" "$T/units"
cp "$RLGATE" "$T/bin/rlgate"
for u in rlgate.service rlgate.socket rlgate-tcp.socket; do
	sed -e "s|@SBINDIR@|$T/bin|g" -e "s|/etc/rlgate/rlgate.ini|$T/rlgate.ini|g" \
	    -e "s|/run/rlgate/|$T/var/|g" -e "s|^User=rlgate|User=www-data|" -e "s|^Group=rlgate|Group=www-data|" \
	    "$TOP/conf/$u" > "$T/units/$u"
done
check "conf/rlgate.service, rlgate.socket, rlgate-tcp.socket: systemd-analyze verify" \
	bash -c "cd '$T/units' && systemd-analyze verify --man=no rlgate.socket rlgate-tcp.socket rlgate.service >'$T/verify.log' 2>&1 && ! grep -q . '$T/verify.log'"
unit_cmd() { sed -n "s/^$1=//p" "$T/units/${2:-rlgate.service}"; }
check "conf/rlgate.service: ExecStartPre accepts the configuration" \
	bash -c "runuser -u www-data -- $(unit_cmd ExecStartPre) >/dev/null"
is "rlgate.socket's socket is the one nginx is given" "$SOCK" "$(unit_cmd ListenStream rlgate.socket)"
# setpriv execs (runuser forks): rlgate keeps the PID LISTEN_PID names.
systemd-socket-activate -l "$SOCK" -- setpriv --reuid=www-data --regid=www-data --init-groups \
	$(unit_cmd ExecStart) 2>>"$T/rlgate.log" &
RLGATE_PID=$!
PIDS+=("$RLGATE_PID")
wait_for 10 test -S "$SOCK" || { echo "# no socket"; cat "$T/rlgate.log"; exit 1; }
chgrp "$(unit_cmd SocketGroup rlgate.socket)" "$SOCK" && chmod "$(unit_cmd SocketMode rlgate.socket)" "$SOCK"
is "the socket: 0660 root:www-data, as rlgate.socket says" "660 root:www-data" "$(stat -c '%a %U:%G' "$SOCK")"
check "a user outside group www-data cannot connect" \
	bash -c "! runuser -u nobody -- '$TOP/tests/tools/fcgi_raw' 'unix:$SOCK' 'request 1 responder close GET /' 'wait-reply 1' >/dev/null 2>&1"

HTTP_PORT=$(free_port)
ship_conf nginx.conf "$T/rlgate-site.conf" \
	rlgate_socket="unix:$SOCK" http_listen="127.0.0.1:$HTTP_PORT" docroot="$DOCROOT" || exit 1
start_nginx "$T/rlgate-site.conf" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

seed_demo "nginx" "$BASE" org1 "$AUDIT_DB"
check_denied "nginx" '^{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,'
check "nginx: the 429 has Cache-Control: no-store" [ "$(resp_header "$T/denied.h" Cache-Control)" = no-store ]
is "nginx: rlgate answered the 11 denials with 403 (what the audit records)" "11|403|403" \
	"$(sql "SELECT count(*), min(status), max(status) FROM decisions WHERE key = '$SEED_KEY' AND allowed = 0")"

curl -s -D "$T/ok.h" -o "$T/ok.body" "$BASE/user/list?org=org2"
check "nginx: an allowed request gets the file unchanged" cmp -s "$T/ok.body" "$DOCROOT/user/list"
is "nginx: and tells where it stands (RateLimit)" '"user_list";r=99;t=1' "$(resp_header "$T/ok.h" RateLimit)"
# The query came from REQUEST_URI: org2 was counted under its own key.
wait_for 5 key_rows_reach 1 org2/user/list "$AUDIT_DB"
is "nginx: the query came through (key org2/user/list)" "1+0" "$(key_rows org2/user/list "$AUDIT_DB")"
is "nginx: the path came through, not the auth location's" "/user/list" \
	"$(sql "SELECT path FROM decisions WHERE key = 'org2/user/list'")"

curl -s -o /dev/null -X POST --data-binary 'x=1' "$BASE/user/list?org=org3"
wait_for 5 key_rows_reach 1 org3/user/list "$AUDIT_DB"
is "nginx: the client's method reaches rlgate (POST)" POST "$(sql "SELECT method FROM decisions WHERE key = 'org3/user/list'")"

is "nginx: a 403 that is not rlgate's stays 403" 403 "$(status "$BASE/secret/file")"
is "nginx: a missing file is 404, after the check" 404 "$(status "$BASE/nothing/here")"
sleep 0.1
is "nginx: every request decided once: $(rows_in "$AUDIT_DB") rows" $((115 + SEED_EXTRA)) "$(rows_in "$AUDIT_DB")"

finish
