#!/bin/bash
# The audit's retention with the real rlgate: [audit] database =
# audit-%Y-%m-%d.db and keep = 1d. Decisions go to the file of their day
# (UTC), from the FastCGI gateway and from a CGI request alike; the files
# whose day ended more than a day ago go (with -wal and -shm), the others
# stay; rlgate -t refuses a name that could come back and a keep without a
# date. (Several processes agreeing on the file and a period that turns:
# tests/unit/test_audit.c, with rows of chosen times.)
. "$(dirname "$0")/../lib.sh"

FCGI_RAW=$TOP/tests/tools/fcgi_raw
start_redis || exit 1
mkdir -p "$T/db"
day() { date -u -d "@$(( $(date +%s) - $1 * 86400 ))" +%Y-%m-%d; }
TODAY=$T/db/audit-$(day 0).db
YESTERDAY=$T/db/audit-$(day 1).db
OLD=$T/db/audit-$(day 3).db
for f in "$YESTERDAY" "$OLD" "$T/db/audit-2020-01-01.db"; do
	: > "$f"; : > "$f-wal"; : > "$f-shm"
done
: > "$T/db/audit-notes.db"
cat > "$T/rlgate.ini" <<EOF
[redis]
address = 127.0.0.1:$REDIS_PORT

[audit]
database = $T/db/audit-%Y-%m-%d.db
keep = 1d
flush_interval = 20ms

[rule:open]
path = /open/*
limit = 1000000
window = 1m
EOF
check "rlgate -t accepts a dated name with keep" "$RLGATE" -t -c "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
for i in 1 2 3 4 5; do
	"$FCGI_RAW" "127.0.0.1:$RLGATE_PORT" "request 1 responder close GET /open/$i 10.1.0.$i" 'wait-reply 1' > /dev/null
done
in_today() { [ "$(sqlite3 "$TODAY" 'SELECT count(*) FROM decisions' 2>/dev/null)" = "$1" ]; }
check "the 5 decisions are in today's file ($(basename "$TODAY"))" wait_for 10 in_today 5
gone() { ! test -e "$1" && ! test -e "$1-wal" && ! test -e "$1-shm"; }
check "3 days old: deleted with its -wal and -shm" gone "$OLD"
check "2020: deleted" gone "$T/db/audit-2020-01-01.db"
check "yesterday's (its day ended less than a day ago): kept" test -e "$YESTERDAY"
check "a name the pattern does not give: kept" test -e "$T/db/audit-notes.db"
check "the deletions are logged" grep -q "audit-2020-01-01.db: deleted, its period ended more than \[audit\] keep ago" "$T/rlgate.log"
stop_rlgate

# A CGI request writes its row to the same file.
GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET REQUEST_URI=/open/cgi REMOTE_ADDR=10.1.0.9 \
	RLGATE_CONF=$T/rlgate.ini "$RLGATE" > "$T/cgi.out" 2>> "$T/rlgate.log"
is "CGI: answered" "Status: 200 OK" "$(head -1 "$T/cgi.out" | tr -d '\r')"
is "CGI: its row in today's file too" 1 "$(sqlite3 "$TODAY" "SELECT count(*) FROM decisions WHERE path = '/open/cgi'")"

# Names that could come back, and keep without a date: refused.
bad() {
	sed -e "s|^database = .*|database = $1|" -e "s|^keep = .*|keep = ${2:-1d}|" "$T/rlgate.ini" > "$T/bad.ini"
	"$RLGATE" -t -c "$T/bad.ini" > "$T/bad.out" 2>&1
	[ $? = 1 ] && grep -q "$3" "$T/bad.out"
}
check "rlgate -t: %H without %d refused" bad "$T/db/audit-%H.db" 1d "each date field needs the ones before it"
check "rlgate -t: %F refused" bad "$T/db/audit-%F.db" 1d "may hold %Y, %m, %d and %H"
check "rlgate -t: keep without a date refused" bad "$T/db/audit.db" 1d "keep: deletes dated files only"
finish
