#!/bin/bash
# Fault injection, audit side, with real processes: redis-server, rlgate
# and lighttpd on loopback, ab for load, and the audit database made
# unwritable three ways while requests keep coming:
#
#   locked     another process (the sqlite3 CLI) holds BEGIN EXCLUSIVE 4 s
#   read-only  the database and its WAL get the immutable attribute
#              (chattr +i), which stops root too; chmod would not, and
#              `mount -o remount,ro` is refused (EBUSY) while rlgate holds
#              the file open for writing, so a read-only remount cannot be
#              staged under a running gateway
#   full       the database on a small tmpfs that is then filled up (where
#              mounting is not permitted: a file-size limit of 1 byte put
#              on the running rlgate with prlimit, so that every write
#              fails, with EFBIG instead of ENOSPC)
#
# Each time: every request is answered at once (ab: 0 failed, all 200, no
# request waits for the database), nothing is written while the database
# refuses, the failure is logged once and the recovery once, and when the
# database is writable again every decision is there, exactly once.
. "$(dirname "$0")/../lib.sh"

WORKERS=4
N=2000		# requests per episode
MAX_WAIT_MS=1000	# no request may wait for the database

start_redis || exit 1
DOCROOT=$T/www
mkdir -p "$DOCROOT/load"
echo "load content" > "$DOCROOT/load/item"

# conf AUDIT_DB: a configuration writing to AUDIT_DB.
conf() {
	cat <<EOF
[gateway]
workers = $WORKERS

[redis]
address = 127.0.0.1:$REDIS_PORT

[audit]
database = $1
flush_interval = 20ms

[rule:load]
path = /load/*
limit = 100000000
window = 1s
EOF
}

AUDIT_DB=$T/audit.db
conf "$AUDIT_DB" > "$T/rlgate.ini"
start_rlgate "$T/rlgate.ini" || exit 1
start_shipped_lighttpd || exit 1
BASE=http://127.0.0.1:$HTTP_PORT
LOG=$T/rlgate.log

rows() { sql "SELECT count(*) FROM decisions"; }
rows_are() { [ "$(rows)" = "$1" ]; }
failures() { grep -c 'audit: .*cannot write' "$LOG"; }
recoveries() { grep -c 'audit: .*recovered' "$LOG"; }
longest() { sed -n 's/^ *100% *\([0-9]*\).*/\1/p' "$T/ab.out"; }
# load: N requests, 4 at a time; every one must be answered 200 at once.
load() {
	ab_run -n "$N" -c 4 "$BASE/load/item"
	is "$1: $N requests answered, none failed, all 200" "$N 0 0" \
		"$AB_COMPLETE $AB_FAILED $AB_NON2XX"
	check "$1: no request waited for the database (longest $(longest) ms <= $MAX_WAIT_MS)" \
		[ "$(longest)" -le "$MAX_WAIT_MS" ]
}
# settle: the writer has caught up with everything answered so far.
settle() { wait_for 10 rows_are "$1"; }

load "baseline"
total=$N
check "baseline: every decision written ($total)" settle "$total"

# ---- locked by another writer -------------------------------------------
# .timeout: if rlgate's writer holds the lock for a moment, wait for it
# rather than give up at once and hold nothing.
( echo "BEGIN EXCLUSIVE;"; sleep 4; echo "COMMIT;" ) | sqlite3 -cmd ".timeout 3000" "$AUDIT_DB" &
HOLDER=$!
locked() { ! sqlite3 -cmd ".timeout 0" "$AUDIT_DB" "BEGIN IMMEDIATE; ROLLBACK;" 2>/dev/null; }
check "locked: the sqlite3 CLI holds the write lock" wait_for 5 locked
load "locked"
during=$(rows)
still=$(kill -0 "$HOLDER" 2>/dev/null && echo yes)
is "locked: nothing written while the lock is held (lock still held: ${still:-no})" "$total" "$during"
wait "$HOLDER"
total=$((total + N))
check "locked: once released, every decision written ($total)" settle "$total"
is "locked: the failure logged once" 1 "$(failures)"
check "locked: and it says why" grep -q 'cannot write: database is locked' "$LOG"
is "locked: the recovery logged once" 1 "$(recoveries)"

# ---- read-only ------------------------------------------------------------
if chattr +i "$AUDIT_DB" "$AUDIT_DB-wal" 2>/dev/null; then
	load "read-only"
	sleep 0.5	# several retries
	is "read-only: nothing written while the file is immutable" "$total" "$(rows)"
	chattr -i "$AUDIT_DB" "$AUDIT_DB-wal"
	total=$((total + N))
	check "read-only: once writable, every decision written ($total)" settle "$total"
	is "read-only: the failure logged once" 2 "$(failures)"
	is "read-only: the recovery logged once" 2 "$(recoveries)"
else
	chattr -i "$AUDIT_DB" 2>/dev/null
	echo "# skip read-only: the file system of $T has no immutable attribute"
fi
is "no decision was written twice" 0 "$(sql "SELECT count(*) - count(DISTINCT request_id) FROM decisions")"

stop_rlgate
is "rlgate exits 0 on SIGTERM" 0 $?
is "and every decision is in the database" "$total" "$(rows)"

# ---- full file system -------------------------------------------------------
FS=$T/fs
mkdir -p "$FS"
# FAULTS_NO_MOUNT=1 tries the stand-in where mounting works too.
if [ -z "${FAULTS_NO_MOUNT:-}" ] && mount -t tmpfs -o size=8m,mode=0755 tmpfs "$FS" 2>/dev/null; then
	mounted=1
	# Stop rlgate before the tmpfs goes; keep its files if a check failed.
	trap 'kill "$RLGATE_PID" 2>/dev/null; wait "$RLGATE_PID" 2>/dev/null
		[ "$FAILED" = 0 ] || cp -a "$FS"/audit.db* "$T/" 2>/dev/null
		umount -l "$FS"; cleanup' EXIT
else
	mounted=0
	echo "# mounting a tmpfs is not permitted here: a file-size limit (prlimit) stands in for a full disk"
fi
AUDIT_DB=$FS/audit.db
conf "$AUDIT_DB" > "$T/rlgate-full.ini"
start_rlgate "$T/rlgate-full.ini" rlgate-full || exit 1
LOG=$T/rlgate-full.log
load "full, before"
total=$N
check "full, before: every decision written ($total)" settle "$total"

if [ "$mounted" = 1 ]; then
	dd if=/dev/zero of="$FS/filler" bs=64k 2>/dev/null
	check "full: the file system is full" [ "$(df --output=avail "$FS" | tail -1 | tr -d ' ')" -lt 64 ]
else
	# The soft limit only: the hard one could not be raised again.
	prlimit --pid "$RLGATE_PID" --fsize=1:
fi
load "full"
sleep 0.5
is "full: nothing written while the disk is full" "$total" "$(rows)"
if [ "$mounted" = 1 ]; then rm -f "$FS/filler"; else prlimit --pid "$RLGATE_PID" --fsize=unlimited:; fi
total=$((total + N))
check "full: once there is room, every decision written ($total)" settle "$total"
if [ "$mounted" = 1 ]; then
	is "full: the failure logged once" 1 "$(failures)"
	check "full: and it says why" grep -q 'cannot write: database or disk is full' "$LOG"
else
	# rlgate's stderr is a file here, under the same limit.
	echo "# full: the log file is under the file-size limit too: the failure line cannot be written"
fi
is "full: the recovery logged once" 1 "$(recoveries)"
is "full: no decision was written twice" 0 "$(sql "SELECT count(*) - count(DISTINCT request_id) FROM decisions")"
check "rlgate survived it all" kill -0 "$RLGATE_PID"
stop_rlgate
is "rlgate exits 0 on SIGTERM" 0 $?
is "and every decision is in the database" "$total" "$(rows)"
finish
