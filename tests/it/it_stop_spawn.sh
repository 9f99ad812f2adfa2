#!/bin/bash
# SIGTERM under spawn-fcgi. spawn-fcgi exits once it has started the
# processes, so each is an orphan that only PID 1 (or a subreaper) collects
# after it has exited: until then it is a zombie, and `kill -0` still
# finds it. That is what made rlgate look as if it lingered 0.4 to 1.7 s
# after "stopped" (this machine's PID 1 collects orphans about a second
# late); rlgate had exited. Here, under load through lighttpd, each of two
# processes has exited (gone, or a zombie waiting for its reaper) within
# half a second of logging "stopped", which it does once its last audit
# row is written; no row is lost.
. "$(dirname "$0")/../lib.sh"

start_redis || exit 1
www_dir var
AUDIT_DB=$T/var/audit.db
DOCROOT=$T/www
mkdir -p "$DOCROOT/load" && echo load > "$DOCROOT/load/item"
cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 2

$(ini_redis_audit)

[rule:load]
path = /load/*
limit = 300
window = 1s
EOF
chmod 644 "$T/rlgate.ini"
RLGATE_PORT=$(free_port)
spawn_rlgate "127.0.0.1:$RLGATE_PORT" "$T/rlgate.ini" 2 rlgate ||
	{ not_ok "spawn-fcgi -F 2 started 2 rlgate processes"; finish; exit; }
start_shipped_lighttpd || exit 1
LOG=$T/rlgate.log

# state PID: R, S, Z ... from /proc; empty once the process is gone.
state() { awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null; }
exited() { local s; s=$(state "$1"); [ -z "$s" ] || [ "$s" = Z ]; }
check "the processes are orphans (spawn-fcgi has exited)" \
	[ "$(ps -o ppid= -p "${SPAWNED_PIDS[0]}" | tr -d ' ')" != "$$" ]

ab -q -r -n 1000000 -c 8 "http://127.0.0.1:$HTTP_PORT/load/item" > "$T/ab.out" 2>&1 &
AB=$!
check "requests are decided under load" wait_for 10 rows_at_least 500 1
for p in "${SPAWNED_PIDS[@]}"; do
	kill -TERM "$p"
	t0=$(now_ms) stopped_ms="" exited_ms=""
	# Every 5 ms: when the log says "stopped", when the process has exited.
	while [ $(( $(now_ms) - t0 )) -lt 15000 ]; do
		[ -z "$stopped_ms" ] && grep -q "rlgate\[$p\]: info: stopped" "$LOG" && stopped_ms=$(now_ms)
		[ -z "$exited_ms" ] && exited "$p" && exited_ms=$(now_ms)
		[ -n "$stopped_ms" ] && [ -n "$exited_ms" ] && break
		sleep 0.005
	done
	check "process $p logged \"stopped\" after SIGTERM" [ -n "$stopped_ms" ]
	gap=$(( ${exited_ms:-$((t0 + 1000000))} - ${stopped_ms:-$t0} ))
	check "process $p exited within 500 ms of \"stopped\" ($gap ms; state now '$(state "$p")')" \
		[ "$gap" -le 500 ]
done
kill "$AB" 2>/dev/null; wait "$AB" 2>/dev/null
check "no audit row was lost" bash -c "! grep -q -e 'giving up at shutdown' -e 'rows not written' '$LOG'"
finish
