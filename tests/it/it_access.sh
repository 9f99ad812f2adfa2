#!/bin/bash
# Who can read and who can call (README "What rlgate trusts"), tried as
# other local users with setpriv, no account created: nobody (uid 65534)
# with no group, and nobody as a member of one group (--groups).
#  1. The audit files (database, -wal, -shm; a dated name too) are 0640
#     whatever the umask (000 and 022): nobody cannot open the database
#     in a directory anyone may enter; a member of its group runs
#     rlgate-report on it.
#  2. The unix socket rlgate binds is [gateway] socket_mode (default 0660)
#     with socket_group: nobody is refused at connect, a member is served.
#  3. The /metrics shared memory object: rlgate makes it 0600; one made
#     first by another user (0666, the right size and magic), or its own
#     with group or other access, is refused (logged once, the object left
#     untouched) and rlgate serves with its own figures; one of its own,
#     0600, is used.
. "$(dirname "$0")/../lib.sh"

GROUP_GID=1			# daemon: a group nobody is not in
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
MEMBER=(setpriv --reuid=65534 --regid=65534 --groups=$GROUP_GID)
chmod 711 "$T"			# others may enter $T, not list it
# What nobody runs must be where nobody can reach it.
mkdir -m 755 "$T/bin"
cp "$TOP/tests/tools/fcgi_raw" "$TOP/reports/rlgate-report" "$T/bin/"
FCGI_RAW=$T/bin/fcgi_raw

start_redis || exit 1

# ini DB [LINE...]: a configuration with its audit in DB and the LINEs in
# [gateway].
ini() {
	local db=$1
	shift
	printf '[gateway]\nstatus_path = /rlgate-status\n'
	printf '%s\n' "$@"
	cat <<-EOF
	[redis]
	address = 127.0.0.1:$REDIS_PORT
	connect_timeout = 1s
	timeout = 2s

	[audit]
	database = $db
	flush_interval = 20ms

	[rule:open]
	path = /open/*
	limit = 1000000
	window = 1m
	EOF
}

# start_unix CONF SOCK UMASK NAME: rlgate -s unix:SOCK under UMASK.
start_unix() {
	(umask "$3"; exec "$RLGATE" -c "$1" -s "unix:$2" 2>>"$T/$4.log") &
	RLGATE_PID=$!
	PIDS+=("$RLGATE_PID")
	wait_for 10 test -S "$2" || { echo "# rlgate did not start:"; cat "$T/$4.log"; return 1; }
}
# ask [RUNAS...] ADDR N: N requests, each on its own connection; prints
# each reply's status.
ask() {
	local addr=${*: -2:1} n=${*: -1} i
	for i in $(seq "$n"); do
		"${@:1:$#-2}" "$FCGI_RAW" "$addr" "request 1 responder close GET /open/$i 10.1.0.$i" \
			'wait-reply 1' 2>&1 | sed -n 's/^STDOUT 1 Status: \([0-9]*\).*/\1/p;s/^fcgi_raw: \(cannot connect.*\)/\1/p'
	done | paste -sd ' '
}
modes() { local f; for f in "$@"; do stat -c %a "$f" 2>/dev/null || echo absent; done | paste -sd ' '; }

# ---- 1. The audit files --------------------------------------------------------
for um in 022 000; do
	dir=$T/audit$um
	mkdir -m 755 "$dir"	# the old README's install -d: anyone may enter
	if [ $um = 022 ]; then db=$dir/audit.db; else db=$dir/audit-%Y-%m-%d.db; fi
	ini "$db" > "$T/a$um.ini"
	start_unix "$T/a$um.ini" "$T/a$um.sock" $um a$um || exit 1
	is "umask $um: 5 requests served" "200 200 200 200 200" "$(ask "unix:$T/a$um.sock" 5)"
	db=$(ls "$dir"/*.db)
	AUDIT_DB=$db
	check "umask $um: the 5 rows are in $(basename "$db")" wait_for 10 rows_at_least 5 1
	# While rlgate has it open, the database has its -wal and -shm.
	is "umask $um: database, -wal, -shm are 0640" "640 640 640" "$(modes "$db" "$db-wal" "$db-shm")"
	stop_rlgate
done
DB=$T/audit022/audit.db
out=$("${NOBODY[@]}" sqlite3 -readonly "$DB" 'SELECT count(*) FROM decisions' 2>&1)
check "nobody, not in the group, cannot open the database ($out)" eval '[[ "$out" == *"unable to open"* ]]'
out=$("${NOBODY[@]}" "$T/bin/rlgate-report" "$DB" 2>&1)
is "nobody's rlgate-report fails" 1 "$([ $? != 0 ] && echo 1 || echo 0)"
# The files are rlgate's group's (here root's: gid 0); a reader joins it.
chgrp 0 "$DB"
out=$(setpriv --reuid=65534 --regid=65534 --groups=0 "$T/bin/rlgate-report" -f csv "$DB" 2>&1)
rc=$?
is "a member of the files' group runs rlgate-report: exit 0" 0 "$rc"
check "and it counts the 5 decisions ($(echo "$out" | head -3 | paste -sd '|'))" eval 'grep -q "open" <<<"$out"'

# ---- 2. The socket ------------------------------------------------------------
ini "" "socket_group = $GROUP_GID" > "$T/s.ini"
check "rlgate -t accepts socket_group = $GROUP_GID" "$RLGATE" -t -c "$T/s.ini"
start_unix "$T/s.ini" "$T/s.sock" 000 s || exit 1
is "umask 000: the socket is 0660 root:$GROUP_GID" "660 0:$GROUP_GID" "$(stat -c '%a %u:%g' "$T/s.sock")"
out=$(ask "${NOBODY[@]}" "unix:$T/s.sock" 1)
check "nobody, outside the group, is refused at connect ($out)" eval '[[ "$out" == *"ermission denied"* ]]'
is "nobody in group $GROUP_GID is served" "200 200" "$(ask "${MEMBER[@]}" "unix:$T/s.sock" 2)"
stop_rlgate
ini "" "socket_mode = 0600" > "$T/s2.ini"
start_unix "$T/s2.ini" "$T/s2.sock" 000 s2 || exit 1
is "socket_mode = 0600, no socket_group: 0600 root:root" "600 0:0" "$(stat -c '%a %u:%g' "$T/s2.sock")"
out=$(ask "${MEMBER[@]}" "unix:$T/s2.sock" 1)
check "then no other user is served ($out)" eval '[[ "$out" == *"ermission denied"* ]]'
stop_rlgate
ini "" "socket_mode = 0669" > "$T/bad1.ini"
ini "" "socket_group = no-such-group-here" > "$T/bad2.ini"
is "rlgate -t: socket_mode 0669 refused with file and line" \
	"$T/bad1.ini:3: [gateway] socket_mode: \"0669\" is not an octal mode (use e.g. 0660, at most 777)" \
	"$("$RLGATE" -t -c "$T/bad1.ini" 2>&1 | head -1)"
is "rlgate -t: an unknown socket_group refused with file and line" \
	"$T/bad2.ini:3: [gateway] socket_group: \"no-such-group-here\" is not a group of this host (use a name from /etc/group or a number)" \
	"$("$RLGATE" -t -c "$T/bad2.ini" 2>&1 | head -1)"

# ---- 3. The shared memory for /metrics ----------------------------------------
# rlgate on a listening socket held here (fd 0), so that its inode, and
# with it the object's name, stays the same from one run to the next.
# launch OBJ_UID OBJ_MODE SIZE NAME: prints the object's name (metrics.c:
# FNV-1a of "dev:ino:" and the configuration's real path); with SIZE, first
# makes the object as OBJ_UID with OBJ_MODE, SIZE bytes and the magic.
ini "" "log_level = debug" > "$T/m.ini"
cat > "$T/launch.py" <<'EOF'
import os, socket, struct, sys
uid, mode, size, sock, conf, log, rlgate, magic = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
if os.path.exists(sock): os.unlink(sock)
s.bind(sock); s.listen(64)
st = os.fstat(s.fileno())
h = 0xcbf29ce484222325
for b in (f"{st.st_dev}:{st.st_ino}:" + os.path.realpath(conf)).encode():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
name = "/dev/shm/rlgate-%016x" % h
print(name, flush=True)
if int(size) > 0:
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, int(size))
    os.pwrite(fd, magic.encode().ljust(32, b"\0") + struct.pack("=Q", int(size)), 0)
    os.fchown(fd, int(uid), int(uid)); os.fchmod(fd, int(mode, 8)); os.close(fd)
os.dup2(s.fileno(), 0)
err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.dup2(err, 2)
os.execv(rlgate, [rlgate, "-c", conf])
EOF
# The table's magic, as fcgi/metrics.c writes it (a new layout, a new one).
MAGIC=$(sed -n 's/^#define TABLE_MAGIC[[:space:]]*"\(.*\)"$/\1/p' "$TOP/fcgi/metrics.c")
# run_m NAME UID MODE SIZE: rlgate under launch.py; sets OBJ and M_PID.
run_m() {
	python3 "$T/launch.py" "$2" "$3" "$4" "$T/m.sock" "$T/m.ini" "$T/$1.log" "$RLGATE" "$MAGIC" > "$T/$1.name" &
	M_PID=$!
	PIDS+=("$M_PID")
	wait_for 10 grep -q 'event loops' "$T/$1.log" || { echo "# rlgate did not start:"; cat "$T/$1.log"; return 1; }
	OBJ=$(cat "$T/$1.name")
}
stop_m() { kill -TERM "$M_PID"; wait "$M_PID" 2>/dev/null; }
shm_of() { ls -l "/proc/$1/fd" 2>/dev/null | grep -o '/dev/shm/rlgate-[0-9a-f]*' | sort -u; }
status_of() { "$@" "unix:$T/m.sock" "request 1 responder close GET /rlgate-status/metrics 127.0.0.1" 'wait-reply 1' |
	sed -n 's/.*\\nrlgate_processes \([0-9]*\)\\n.*/\1/p'; }

# An object made here and left by a failed check goes too.
OBJ=
trap 'cleanup; [ -n "$OBJ" ] && rm -f "$OBJ"' EXIT
run_m m0 0 600 0 || exit 1
check "rlgate made its object, the name the test computes ($OBJ)" [ "$(shm_of "$M_PID")" = "$OBJ" ]
is "its object is 0600 root's" "600 0" "$(stat -c '%a %u' "$OBJ")"
SIZE=$(stat -c %s "$OBJ")
is "served" "200" "$(ask "unix:$T/m.sock" 1)"
stop_m
check "the last one out removed it" [ ! -e "$OBJ" ]

for c in "65534 666 nobody's, 0666" "0 644 rlgate's user's, 0644" "65534 600 nobody's, 0600"; do
	read -r uid mode what <<<"$c"
	set -- "$uid" "$mode" "$what"
	rm -f "$T/m$1$2.log"
	run_m "m$1$2" "$1" "$2" "$SIZE" || exit 1
	sum=$(md5sum < "$OBJ")
	is "an object $3 made first: served" "200 200" "$(ask "unix:$T/m.sock" 2)"
	check "not mapped" [ -z "$(shm_of "$M_PID")" ]
	is "refused, logged once" 1 "$(grep -c "metrics: $OBJ is owned by uid $1 with mode 0$2, not by this process's uid 0 with no group or other access: refused" "$T/m$1$2.log")"
	is "/metrics counts this process only" 1 "$(status_of "$FCGI_RAW")"
	is "the object is left as it was" "$sum" "$(md5sum < "$OBJ")"
	stop_m
	rm -f "$OBJ"
done
# The same object, but rlgate's own and 0600: used (so the name and the
# magic above were right, and only owner and mode made the refusals).
run_m m_own 0 600 "$SIZE" || exit 1
check "an object of rlgate's own, 0600, made first: used" [ "$(shm_of "$M_PID")" = "$OBJ" ]
is "no refusal logged" 0 "$(grep -c refused "$T/m_own.log")"
stop_m

# ---- 4. socket_group: a group rlgate's user is not in -----------------------------
# nobody runs rlgate on a unix socket it binds itself (listen), in a
# directory of its own, with socket_group = daemon: chown(2) would refuse
# it the group. rlgate -t says so, and the start fails before bind(): no
# socket is left. A member of daemon gets the socket.
cp "$RLGATE" "$T/bin/rlgate"
mkdir -m 755 "$T/ng" && chown 65534 "$T/ng"
GROUP_NAME=$(getent group "$GROUP_GID" | cut -d: -f1)
ini "" "listen = unix:$T/ng/s.sock" "socket_group = $GROUP_GID" > "$T/ng.ini"
chmod 644 "$T/ng.ini"
WHY="$T/ng.ini: [gateway] socket_group $GROUP_NAME: user nobody is not a member of it, and cannot give its socket to it (adduser nobody $GROUP_NAME, then restart rlgate)"
out=$("${NOBODY[@]}" "$T/bin/rlgate" -t -c "$T/ng.ini" 2>&1)
is "rlgate -t as nobody: exit 1" 1 "$?"
is "rlgate -t as nobody names the group, the user and the fix" "$WHY" "$out"
timeout 10 "${NOBODY[@]}" "$T/bin/rlgate" -c "$T/ng.ini" 2> "$T/ng.log"
is "rlgate as nobody: the start fails (exit 1)" 1 "$?"
is "one log line, the same sentence" "1 1" \
	"$(wc -l < "$T/ng.log") $(grep -cF "listen unix:$T/ng/s.sock: $WHY" "$T/ng.log")"
is "no socket is left behind" "" "$(ls -A "$T/ng")"
is "rlgate -t as a member of $GROUP_NAME: configuration OK" "configuration OK" \
	"$("${MEMBER[@]}" "$T/bin/rlgate" -t -c "$T/ng.ini" 2>&1)"
("${MEMBER[@]}" "$T/bin/rlgate" -c "$T/ng.ini" 2>> "$T/ng-member.log") &
RLGATE_PID=$!
PIDS+=("$RLGATE_PID")
check "a member starts" wait_for 10 test -S "$T/ng/s.sock"
is "its socket: 0660 nobody:$GROUP_NAME" "660 65534:$GROUP_GID" "$(stat -c '%a %u:%g' "$T/ng/s.sock")"
is "and serves a member" "200" "$(ask "${MEMBER[@]}" "unix:$T/ng/s.sock" 1)"
stop_rlgate
is "a stop removes the socket it bound" "" "$(ls -A "$T/ng")"

# ---- 5. An audit file another user made, or may write ------------------------------
# refused WHAT AUDIT FILE WHY: rlgate with database = AUDIT on a unix
# socket fails to start, logs "audit: FILE WHY: refused" once and leaves no
# socket; the files there are left as they were.
refused() {
	local what=$1 db=$2 file=$3 why=$4 sum
	sum=$(cd "$(dirname "$db")" && ls -l --time-style=+ . && cat ./* 2>/dev/null | md5sum)
	ini "$db" > "$T/r.ini"
	timeout 10 "$RLGATE" -c "$T/r.ini" -s "unix:$T/r.sock" 2> "$T/r.log"
	is "$what: the start fails (exit 1)" 1 "$?"
	is "$what: one log line names the file, its owner and mode" 1 \
		"$(grep -cF "audit: $file $why: refused" "$T/r.log")"
	check "$what: no socket is left behind" [ ! -e "$T/r.sock" ]
	is "$what: the files there are untouched" "$sum" \
		"$(cd "$(dirname "$db")" && ls -l --time-style=+ . && cat ./* 2>/dev/null | md5sum)"
}
W="with no write access for group or others"
# The issue's case: nobody's 0666 audit.db in a directory anyone may write.
mkdir -m 1777 "$T/pub"
"${NOBODY[@]}" sh -c "umask 0; echo 'nobody was here' > '$T/pub/audit.db'"
is "nobody made pub/audit.db 0666" "666 65534" "$(stat -c '%a %u' "$T/pub/audit.db")"
refused "nobody's 0666 file in a 1777 directory" "$T/pub/audit.db" "$T/pub/audit.db: its directory $T/pub" \
	"is owned by uid 0 with mode 1777, not by this process's uid 0 $W"
mkdir -m 777 "$T/pubd"
refused "a dated name in a 0777 directory" "$T/pubd/audit-%Y-%m-%d.db" "$T/pubd/audit-$(date -u +%Y-%m-%d).db: its directory $T/pubd" \
	"is owned by uid 0 with mode 0777, not by this process's uid 0 $W"
mkdir -m 755 "$T/own"
install -m 666 -o 65534 /dev/null "$T/own/audit.db"
refused "nobody's 0666 file" "$T/own/audit.db" "$T/own/audit.db" "is owned by uid 65534 with mode 0666, not by this process's uid 0 $W"
chown 0 "$T/own/audit.db"
refused "rlgate's own 0666 file" "$T/own/audit.db" "$T/own/audit.db" "is owned by uid 0 with mode 0666, not by this process's uid 0 $W"
rm -f "$T/own/audit.db"
install -m 600 -o 65534 /dev/null "$T/own/audit.db-wal"
refused "nobody's -wal" "$T/own/audit.db" "$T/own/audit.db-wal" "is owned by uid 65534 with mode 0600, not by this process's uid 0 $W"
rm -f "$T/own/audit.db-wal"
# Its own files that others may read are narrowed to 0640, each logged.
(umask 022; sqlite3 "$T/own/audit.db" 'PRAGMA journal_mode=WAL' > /dev/null)
install -m 604 /dev/null "$T/own/audit.db-wal"
is "rlgate's own audit.db 0644 and -wal 0604 made first" "644 604" "$(modes "$T/own/audit.db" "$T/own/audit.db-wal")"
ini "$T/own/audit.db" | sed 's/^window = 1m$/window = 1h/' > "$T/own.ini"
start_unix "$T/own.ini" "$T/own.sock" 022 own || exit 1
is "served" "200 200" "$(ask "unix:$T/own.sock" 2)"
AUDIT_DB=$T/own/audit.db
check "the 2 rows are in it" wait_for 10 rows_at_least 2 1
is "database, -wal, -shm are 0640" "640 640 640" "$(modes "$T/own/audit.db" "$T/own/audit.db-wal" "$T/own/audit.db-shm")"
is "each narrowing logged once" "1 1" \
	"$(grep -c "audit: $T/own/audit.db was mode 0644: now 0640 " "$T/own.log") $(grep -c "audit: $T/own/audit.db-wal was mode 0604: now 0640 " "$T/own.log")"

# A reload to a configuration whose audit file the next start would refuse
# keeps the running one (limit 1000000, not 1); the same change with a
# trusted file is taken.
sed -e "s|^database = .*|database = $T/pub/audit.db|" -e 's/^limit = 1000000$/limit = 1/' "$T/own.ini" > "$T/own2.ini"
cp "$T/own2.ini" "$T/own.ini"
kill -HUP "$RLGATE_PID"
check "reload: refused, one log line" wait_for 10 grep -qF \
	"reload: audit: $T/pub/audit.db: its directory $T/pub is owned by uid 0 with mode 1777, not by this process's uid 0 $W: refused; keeping the running configuration" "$T/own.log"
is "the running configuration is kept (limit 1000000)" "200 200 200" "$(ask "unix:$T/own.sock" 3)"
sed -i "s|^database = .*|database = $T/own/audit.db|" "$T/own.ini"
kill -HUP "$RLGATE_PID"
check "reload with a trusted file: loaded" wait_for 10 grep -q "reload: $T/own.ini loaded" "$T/own.log"
is "the new limit, 1, applies" "429 429" "$(ask "unix:$T/own.sock" 2)"
stop_rlgate
# ---- 4. A hostile Redis ---------------------------------------------------------
# Another library under this build's library name ($lib) whose decide
# function answers what no library of rlgate's would: rlgate decides as
# on_error (deny: 503) and logs it, whatever the reply, and keeps serving.
lib=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
cat > "$T/h.ini" <<EOF
[redis]
address = 127.0.0.1:$REDIS_PORT
connect_timeout = 1s
timeout = 2s
on_error = deny

[audit]
database =

[rule:open]
path = /open/*
limit = 1000000
window = 1m
EOF
start_rlgate "$T/h.ini" hostile || exit 1
is "the real library: served" "200" "$(ask "127.0.0.1:$RLGATE_PORT" 1)"
for reply in "{1}" "{1, 'x'}" "{1, {1,2,3}}" "{1, {1,1,1,1,1,1,1,1,1,1,99}}" \
    "{1, {1,'a','b','c','d','e','f','g','h','i','j'}}" "{1, {{1},{2},{3},{4},{5},{6},{7},{8},{9},{10},{11}}}" \
    "{1, '1 2 3'}" "{1, '1 0 1000 0 0 1 0 1000 0 0 0 '}" "{1, '1 0 1000 0 0 1 0 1000 0 0 4  '}" \
    "{1, '2 0 1000 0 0 1 0 1000 0 0 0  '}" "{1, '1 x 1000 0 0 1 0 1000 0 0 0  '}" \
    "{1, '1  0 1000 0 0 1 0 1000 0 0 0  '}" "{1, '1 0 1000 0 0 1 0 1000 0 0 99999999999999999999  '}"; do
	rcli FUNCTION LOAD REPLACE "#!lua name=$lib
redis.register_function('${lib}_decide', function() return $reply end)
redis.register_function('${lib}_version', function() return 'hostile' end)" > /dev/null
	before=$(grep -c "the reply of ${lib}_decide is not 1 rules' verdicts" "$T/hostile.log")
	is "${lib}_decide answers $reply: on_error, 503" "503" "$(ask "127.0.0.1:$RLGATE_PORT" 1)"
	is "and it is logged" $((before + 1)) "$(grep -c "the reply of ${lib}_decide is not 1 rules' verdicts" "$T/hostile.log")"
done
check "rlgate still runs" kill -0 "$RLGATE_PID"
finish
