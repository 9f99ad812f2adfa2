#!/bin/bash
# systemd socket activation without systemd as PID 1: systemd-socket-activate
# holds a unix socket and a TCP socket on 127.0.0.1, as rlgate.socket and
# rlgate-tcp.socket do, and passes them (LISTEN_FDS/LISTEN_PID) to a small
# supervisor that starts rlgate on them, again each time it is told, as
# systemd starts rlgate.service again on its sockets.
#
# 1. rlgate serves on both passed sockets, one gateway: a limit of 5 counted
#    across them gives 5 x 200 then 429; passed sockets meant for another
#    PID are not taken.
# 2. SIGHUP (systemctl reload) reloads: the new limit applies at once.
# 3. SIGTERM (systemctl stop) writes every queued audit row: none is written
#    before it (flush_interval 1h, a batch larger than the run), all after.
# 4. A restart keeps the sockets: with rlgate stopped, clients connect (the
#    kernel queues them, nothing is refused) and send requests; the next
#    rlgate answers every one of them, each with its audit row; it was
#    started with -s as well, which the passed sockets override.
. "$(dirname "$0")/../lib.sh"

FCGI_RAW=$TOP/tests/tools/fcgi_raw
command -v systemd-socket-activate > /dev/null ||
	{ echo "# systemd-socket-activate is missing (package systemd)"; echo "0 passed, 1 failed"; exit 1; }
start_redis || exit 1
AUDIT_DB=$T/audit.db
SOCK=$T/rlgate.sock
TCP_PORT=$(free_port)
LOG=$T/rlgate.log

conf() {	# LIMIT
	cat <<EOF
[gateway]
workers = 2

[redis]
address = 127.0.0.1:$REDIS_PORT

[audit]
database = $AUDIT_DB
flush_interval = 1h
batch = 100000

[rule:all]
path = /*
limit = $1
window = 1h
EOF
}
conf 5 > "$T/rlgate.ini"

# The supervisor: started by systemd-socket-activate on the first
# connection, with the sockets on fds 3 and 4; starts rlgate at once, then
# again each time a line (more arguments for it) comes on the fifo. A
# subshell's $BASHPID is the PID that rlgate has after exec.
mkfifo "$T/ctl"
cat > "$T/sup.sh" <<'EOF'
#!/bin/bash
T=$1 RLGATE=$2	# systemd-socket-activate passes no environment but LISTEN_*
n=$LISTEN_FDS; unset LISTEN_PID LISTEN_FDS LISTEN_FDNAMES
start() {	# [ARGS...]: rlgate's, after -c
	( export LISTEN_FDS=$n LISTEN_PID=$BASHPID; exec "$RLGATE" -c "$T/rlgate.ini" "$@" 2>> "$T/rlgate.log" ) &
	echo $! > "$T/rlgate.pid.tmp" && mv "$T/rlgate.pid.tmp" "$T/rlgate.pid"
}
start
while read -r args < "$T/ctl"; do start $args; done
EOF
systemd-socket-activate -l "$SOCK" -l "127.0.0.1:$TCP_PORT" -- bash "$T/sup.sh" "$T" "$RLGATE" 2> "$T/activate.log" &
SUP_PID=$!
PIDS+=("$SUP_PID")
wait_for 10 test -S "$SOCK" || { echo "# no socket"; cat "$T/activate.log"; exit 1; }

# req ADDR CLIENT: the Status line of one request (200 when none).
req() {
	local out
	out=$("$FCGI_RAW" -t 20000 "$1" "request 1 responder close GET /x $2" "wait-reply 1")
	case $out in
	*"Status: "*) sed -n 's/.*Status: \([0-9]*\).*/\1/p' <<< "$out" | head -1;;
	*END_REQUEST*) echo 200;;
	*) echo "none";;
	esac
}
# rlgate_pid: the rlgate the supervisor started last (after it has).
rlgate_pid() { cat "$T/rlgate.pid" 2>/dev/null; }
running() { [ -n "$(rlgate_pid)" ] && grep -q "listening on 2 sockets from systemd" "$LOG"; }

# ---- 1. both sockets, one gateway -----------------------------------------
# The first connection is what starts it all (systemd-socket-activate execs
# the supervisor then): it waits in the queue and is answered.
is "the first request, on the unix socket, activates and is allowed" 200 "$(req "unix:$SOCK" 10.0.0.1)"
check "rlgate says it listens on the 2 sockets from systemd" wait_for 10 running
PID1=$(rlgate_pid)
PIDS+=("$PID1")
got=""
for a in "127.0.0.1:$TCP_PORT" "unix:$SOCK" "127.0.0.1:$TCP_PORT" "unix:$SOCK" "127.0.0.1:$TCP_PORT"; do
	got="$got $(req "$a" 10.0.0.1)"
done
is "a limit of 5 counts across both sockets" " 200 200 200 200 429" "$got"
# Sockets passed to another process (LISTEN_PID is not ours) are not ours.
LISTEN_PID=1 LISTEN_FDS=1 "$RLGATE" -c "$T/rlgate.ini" 3< /dev/null 2> "$T/other.log"
is "LISTEN_PID of another process: no socket taken, exit 1" "1 1" \
	"$? $(grep -c 'no listening socket on fd 0' "$T/other.log")"

# ---- 2. SIGHUP reloads ----------------------------------------------------
conf 8 > "$T/rlgate.ini"
kill -HUP "$PID1"
check "SIGHUP: the log says the file was loaded" wait_for 10 grep -q 'reload: .*rlgate.ini loaded' "$LOG"
got=""
for a in "127.0.0.1:$TCP_PORT" "unix:$SOCK" "127.0.0.1:$TCP_PORT" "unix:$SOCK"; do
	got="$got $(req "$a" 10.0.0.1)"
done
is "after the reload, a limit of 8: 3 more allowed, then 429" " 200 200 200 429" "$got"

# ---- 3. SIGTERM writes the audit ------------------------------------------
is "no audit row written before the stop (flush_interval 1h)" 0 "$(sql 'SELECT count(*) FROM decisions' 2>/dev/null || echo 0)"
kill -TERM "$PID1"
while kill -0 "$PID1" 2>/dev/null; do sleep 0.05; done
is "after SIGTERM: the 10 rows, 8 allowed" "10 8" \
	"$(sql 'SELECT count(*) FROM decisions') $(sql 'SELECT count(*) FROM decisions WHERE allowed = 1')"

# ---- 4. a restart keeps the sockets ----------------------------------------
# No rlgate runs: each client connects (the socket is held), sends its
# request and waits for the answer.
: > "$T/answers"
CLIENTS=()
for i in 1 2 3; do
	( echo "unix $(req "unix:$SOCK" "10.0.1.$i")" >> "$T/answers" ) &
	CLIENTS+=($!)
	( echo "tcp $(req "127.0.0.1:$TCP_PORT" "10.0.2.$i")" >> "$T/answers" ) &
	CLIENTS+=($!)
done
# The accept queues hold them (Recv-Q of a listening socket).
queued() {
	[ "$(ss -Hlx src "$SOCK" | awk '{ print $3 }')" = 3 ] &&
	[ "$(ss -Hlt src "127.0.0.1:$TCP_PORT" | awk '{ print $2 }')" = 3 ]
}
check "6 connections queued while no rlgate runs (3 unix, 3 TCP)" wait_for 10 queued
is "none answered yet" 0 "$(wc -l < "$T/answers")"
rm -f "$T/rlgate.pid"
# With -s too, as a unit's ExecStart might: the passed sockets win.
echo "-s unix:$T/other.sock" > "$T/ctl"
wait_for 10 test -s "$T/rlgate.pid"
PIDS+=("$(rlgate_pid)")
for p in "${CLIENTS[@]}"; do wait "$p"; done
is "the next rlgate answers all 6: 200 each" "tcp 200 x3, unix 200 x3" \
	"$(sort "$T/answers" | uniq -c | awk '{ printf "%s%s %s x%s", (NR > 1 ? ", " : ""), $2, $3, $1 }')"
is "-s beside the passed sockets: ignored, and said" "1 no file" \
	"$(grep -c "listening on the 2 sockets systemd passed; -s unix:$T/other.sock ignored" "$LOG") $([ -e "$T/other.sock" ] && echo file || echo no file)"
kill -TERM "$(rlgate_pid)"
while kill -0 "$(rlgate_pid)" 2>/dev/null; do sleep 0.05; done
is "their 6 rows, written at the stop" 6 "$(rows "client_ip LIKE '10.0.1.%' OR client_ip LIKE '10.0.2.%'")"
finish
