#!/bin/bash
# lighttpd deployments, with the shipped configurations (only their var.
# lines set to this test's ports and paths), lighttpd serving as www-data:
#  A. conf/lighttpd-bin.conf: lighttpd starts two rlgate processes itself
#     (bin-path, max-procs) in front of a static site.
#  B. conf/lighttpd-spawn.conf: spawn-fcgi -F 4 runs four rlgate processes
#     on one unix socket in front of a static site and a CGI program, which
#     receives the decision as RATELIMIT_* variables.
# Each: the seeds' ab run gives exactly 100 + 10 across the processes, a
# denied request gets rlgate's 429 at the client, an allowed one the
# content, and every decision is one audit row.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var			# logs, sockets, audit databases: www-data's
mkdir -p "$T/bin" "$T/cgi-bin"
# What `make install` puts in /usr/local: copies www-data can run.
cp "$RLGATE" "$T/bin/rlgate"
cp "$TOP/tests/www/cgi-bin/app.cgi" "$T/cgi-bin/app.cgi"
DOCROOT=$TOP/tests/www
[ -r "$DOCROOT/user/list" ] && su -s /bin/sh www-data -c "test -r '$DOCROOT/user/list'" ||
	{ mkdir -p "$T/www/user"; cp "$DOCROOT/user/list" "$T/www/user/list"; DOCROOT=$T/www; }

# procs_of DB: how many rlgate processes made the decisions in DB (the
# request id starts with a per-process prefix).
procs_of() { sqlite3 -batch -noheader "$1" "SELECT count(DISTINCT substr(request_id, 1, instr(request_id, '-'))) FROM decisions WHERE key LIKE '%/user/list'"; }

# --- A. bin-path: lighttpd runs rlgate --------------------------------------
DB_A=$T/var/audit-bin.db
deploy_ini "$T/rlgate-bin.ini" "$DB_A" || { not_ok "rlgate -t rejects the test ini"; finish; exit; }
HTTP_PORT=$(free_port)
ship_conf lighttpd-bin.conf "$T/lighttpd-bin.conf" \
	http_port="$HTTP_PORT" docroot="$DOCROOT" log_dir="$T/var" socket_dir="$T/var" \
	rlgate="$T/bin/rlgate" rlgate_conf="$T/rlgate-bin.ini" || exit 1
run_lighttpd "$T/lighttpd-bin.conf" lighttpd-bin || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
LIGHTTPD_BIN=$HTTPD_PID

# ps pads PIDs with blanks, which -p does not take after a comma.
mapfile -t kids < <(ps -o pid= --ppid "$LIGHTTPD_BIN" | tr -d ' ')
is "bin-path: lighttpd started max-procs = 2 rlgate processes" 2 "${#kids[@]}"
is "bin-path: they run as www-data" "www-data www-data" "$(ps -o user= -p "$(echo ${kids[@]} | tr ' ' ,)" | xargs)"
check "bin-path: on the sockets lighttpd made (rlgate.sock-0, -1)" test -S "$T/var/rlgate.sock-0" -a -S "$T/var/rlgate.sock-1"

seed_demo "bin-path" "$BASE" org1 "$DB_A"
check_denied "bin-path" '"type":"https://iana.org/assignments/http-problem-types#quota-exceeded".*"violated-policies":\["user_list"\]'
curl -s -o "$T/a.body" "$BASE/user/list?org=orgA"
check "bin-path: an allowed request gets the static file unchanged" cmp -s "$T/a.body" "$DOCROOT/user/list"
is "bin-path: both processes decided (one database, two writers)" 2 "$(procs_of "$DB_A")"
wait_for 5 key_rows_reach 1 orgA/user/list "$DB_A"
is "bin-path: the allowed request is one row" "1+0" "$(key_rows orgA/user/list "$DB_A")"

kill -TERM "$LIGHTTPD_BIN"; wait "$LIGHTTPD_BIN"
gone() { ! kill -0 "${kids[0]}" 2>/dev/null && ! kill -0 "${kids[1]}" 2>/dev/null; }
check "bin-path: stopping lighttpd stops its rlgate processes" wait_for 10 gone
# ab's 110, the denied curl and the allowed one: nothing lost, nothing twice.
is "bin-path: $((112 + SEED_EXTRA)) requests, as many audit rows" $((112 + SEED_EXTRA)) "$(rows_in "$DB_A")"

# --- B. spawn-fcgi -F 4 on a unix socket, static site and a CGI program -----
DB_B=$T/var/audit-spawn.db
deploy_ini "$T/rlgate-spawn.ini" "$DB_B" || exit 1
spawn_rlgate "unix:$T/var/rlgate.sock" "$T/rlgate-spawn.ini" 4 rlgate-spawn ||
	{ not_ok "spawn-fcgi -F 4 started 4 rlgate processes"; finish; exit; }
ok "spawn-fcgi -F 4 started 4 rlgate processes"
is "spawn: the socket is for www-data only" "660 www-data" "$(stat -c '%a %U' "$T/var/rlgate.sock")"
HTTP_PORT=$(free_port)
ship_conf lighttpd-spawn.conf "$T/lighttpd-spawn.conf" \
	http_port="$HTTP_PORT" docroot="$DOCROOT" cgi_dir="$T/cgi-bin" log_dir="$T/var" \
	rlgate_socket="$T/var/rlgate.sock" || exit 1
run_lighttpd "$T/lighttpd-spawn.conf" lighttpd-spawn || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

seed_demo "spawn -F 4" "$BASE" org1 "$DB_B"
check_denied "spawn -F 4" '"type":"https://iana.org/assignments/http-problem-types#quota-exceeded".*"violated-policies":\["user_list"\]'
# An event loop that wakes takes every connection waiting (EPOLLEXCLUSIVE
# wakes one idle loop), so a light load may stay in fewer processes. Each
# must still take requests when it is the one free: each in turn decides
# alone while the other three are stopped (a stopped process is not in
# epoll_wait, so the kernel's exclusive wake-up passes it by).
solo=""
for i in 0 1 2 3; do
	for j in 0 1 2 3; do [ "$j" = "$i" ] || kill -STOP "${SPAWNED_PIDS[$j]}"; done
	solo+=" $(curl -s -m 10 -o /dev/null -w '%{http_code}' "$BASE/user/list?org=solo$i")"
	for j in 0 1 2 3; do kill -CONT "${SPAWNED_PIDS[$j]}"; done
done
is "spawn -F 4: each process alone answers (the other three stopped)" " 200 200 200 200" "$solo"
# solo SQL: over the rows of those four requests.
solo() { sqlite3 -batch -noheader "$DB_B" "SELECT $1 FROM decisions WHERE key LIKE 'solo_/user/list'" 2>/dev/null; }
solo_written() { [ "$(solo 'count(*)')" = 4 ]; }
check "spawn -F 4: their four rows are written" wait_for 5 solo_written
is "spawn -F 4: and those four decisions came from four processes" 4 \
	"$(solo "count(DISTINCT substr(request_id, 1, instr(request_id, '-')))")"
alive=0; for p in "${SPAWNED_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
is "spawn -F 4: the four processes are all running" 4 "$alive"

# The protected CGI program: 3 per client per minute.
for i in 1 2 3 4; do
	curl -s -D "$T/cgi$i.h" -o "$T/cgi$i.b" --data-binary "body $i" "$BASE/cgi-bin/app.cgi/extra/path?q=$i"
done
is "CGI: 1st allowed" 200 "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/cgi1.h")"
check "CGI: the program got RATELIMIT_POLICY" grep -qx 'RATELIMIT_POLICY=app' "$T/cgi1.b"
check "CGI: and RATELIMIT_REMAINING = 2 after the 1st" grep -qx 'RATELIMIT_REMAINING=2' "$T/cgi1.b"
check "CGI: 3rd sees RATELIMIT_REMAINING = 0" grep -qx 'RATELIMIT_REMAINING=0' "$T/cgi3.b"
check "CGI: PATH_INFO reaches the program" grep -qx "PATH_INFO=/extra/path" "$T/cgi1.b"
check "CGI: the query reaches the program" grep -qx "QUERY_STRING=q=1" "$T/cgi1.b"
is "CGI: 2nd's body intact" "body 2" "$(sed '1,/^--- body$/d' "$T/cgi2.b")"
is "CGI: 4th denied with 429" 429 "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/cgi4.h")"
# The 1-minute window opened at the 1st request, moments ago.
check "CGI: the 429 has Retry-After (30..60 s)" between 30 60 "$(resp_header "$T/cgi4.h" Retry-After)"
check "CGI: the 429 has RateLimit" grep -qE '^RateLimit: "app";r=0;t=[0-9]+'$'\r''?$' "$T/cgi4.h"
# t counts whole seconds up to the reset of the window the 1st opened.
check "CGI: and its t is that reset (30..60 s)" between 30 60 \
	"$(sed -n 's/^RateLimit: "app";r=0;t=\([0-9]*\).*/\1/p' "$T/cgi4.h")"
check "CGI: the program did not run for the 4th (rlgate's body)" grep -q '"violated-policies":\["app"\]' "$T/cgi4.b"
wait_for 5 key_rows_reach 4 127.0.0.1 "$DB_B"
is "CGI: one audit row per request, 3 allowed + 1 denied" "3+1" "$(key_rows 127.0.0.1 "$DB_B")"

finish
