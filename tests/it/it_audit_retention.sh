#!/bin/bash
# The audit's retention with the real rlgate: [audit] database =
# audit-%Y-%m-%d.db and keep = 1d. Decisions go to the file of their day
# (UTC), from the FastCGI gateway and from a CGI request alike; the files
# whose day ended more than a day ago go (with -wal and -shm: 2 days old
# and more), the others stay, under FastCGI and under CGI, where the
# processes of one request each look through the directory at most once
# a minute (the mtime of a stamp beside the files, trusted only when it is
# their user's plain file); rlgate -t refuses a name that could come back
# and a keep without a date. (Several processes agreeing on the file and a period that turns:
# tests/unit/test_audit.c, with rows of chosen times.)
. "$(dirname "$0")/../lib.sh"

FCGI_RAW=$TOP/tests/tools/fcgi_raw
start_redis || exit 1
mkdir -p "$T/db"
day() { date -u -d "@$(( $(date +%s) - $1 * 86400 ))" +%Y-%m-%d; }
TODAY=$T/db/audit-$(day 0).db
YESTERDAY=$T/db/audit-$(day 1).db
TWO=$T/db/audit-$(day 2).db
OLD=$T/db/audit-$(day 3).db
for f in "$YESTERDAY" "$TWO" "$OLD" "$T/db/audit-2020-01-01.db"; do
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
check "2 days old (its day ended a day and more ago): deleted" gone "$TWO"
check "2020: deleted" gone "$T/db/audit-2020-01-01.db"
check "yesterday's (its day ended less than a day ago): kept" test -e "$YESTERDAY"
check "a name the pattern does not give: kept" test -e "$T/db/audit-notes.db"
check "the deletions are logged" grep -q "audit-2020-01-01.db: deleted, its period ended more than \[audit\] keep ago" "$T/rlgate.log"
stop_rlgate

# CGI: a process per request. Today's file exists already (the gateway
# wrote it), so only the turn deletes: files of 2 and 3 days ago go.
plant() { for f in "$@"; do : > "$f"; : > "$f-wal"; : > "$f-shm"; done; }
plant "$TWO" "$OLD"
cgi() {
	GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET REQUEST_URI=/open/$1 REMOTE_ADDR=10.1.0.9 \
		RLGATE_CONF=$T/rlgate.ini "$RLGATE" > "$T/cgi.out" 2>> "$T/rlgate.log"
}
cgi cgi
is "CGI: answered" "Status: 200 OK" "$(head -1 "$T/cgi.out" | tr -d '\r')"
is "CGI: its row in today's file too" 1 "$(sqlite3 "$TODAY" "SELECT count(*) FROM decisions WHERE path = '/open/cgi'")"
check "CGI: 3 days old deleted with its -wal and -shm" gone "$OLD"
check "CGI: 2 days old deleted" gone "$TWO"
check "CGI: yesterday's kept" test -e "$YESTERDAY"
STAMP=$T/db/.audit-%Y-%m-%d.db.keep
check "CGI: the turn is stamped beside the files" test -f "$STAMP"
# Within the minute the next request does not look: a file planted now
# survives it. Then the stamp says a minute has passed: the next one does.
plant "$OLD"
cgi cgi2
is "CGI: the next request within the minute answered" "Status: 200 OK" "$(head -1 "$T/cgi.out" | tr -d '\r')"
check "CGI: ... and did not look again (a 3-day-old file planted after the turn is still there)" test -e "$OLD"
touch -d '-61 seconds' "$STAMP"
cgi cgi3
check "CGI: a minute after the turn, the next request deletes it" gone "$OLD"
stamp_age() { echo $(( $(date +%s) - $(stat -c %Y "$STAMP") )); }
check "CGI: ... and stamps the new turn" test "$(stamp_age)" -lt 30
# Another user's stamp (or a link) is not trusted, however fresh: every
# request looks, the files still go, the link's target is untouched.
chown nobody "$STAMP"
plant "$OLD"
cgi cgi4
check "CGI: another user's fresh stamp does not stop the deletion" gone "$OLD"
rm -f "$STAMP"
: > "$T/target"; touch -d '2020-01-01' "$T/target"
ln -s "$T/target" "$STAMP"
plant "$OLD"
cgi cgi5
check "CGI: a stamp that is a link: the deletion still happens" gone "$OLD"
is "CGI: ... and the link's target is not touched" 2020-01-01 "$(date -u -r "$T/target" +%Y-%m-%d)"
check "CGI: today's file kept throughout" test -e "$TODAY"
is "CGI: the 5 CGI rows in today's file" 5 "$(sqlite3 "$TODAY" "SELECT count(*) FROM decisions WHERE path LIKE '/open/cgi%'")"

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
