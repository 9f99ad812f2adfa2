# Sourced by the integration tests (tests/it_*.sh). Starts real servers on
# 127.0.0.1 and free ports inside one mktemp -d directory, stops exactly the
# processes it started (by PID) on exit, and counts checks.
#
#   . "$(dirname "$0")/lib.sh"
#   start_redis                     -> $REDIS_PORT
#   start_rlgate CONF [NAME]        -> $RLGATE_PORT, $RLGATE_PID, log $T/NAME.log
#   start_lighttpd CONF             -> $HTTP_PORT (CONF may use @HTTP_PORT@ etc.)
#   check "what" COMMAND...         -> ok / not ok
#   is "what" EXPECTED ACTUAL
#   finish                          -> "N passed, M failed", exit status

set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RLGATE=$TOP/fcgi/rlgate
FREEPORT=$TOP/tests/tools/freeport
T=$(mktemp -d /tmp/rlgate-it.XXXXXX)
PIDS=()
PASSED=0
FAILED=0

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	if [ "$FAILED" = 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$T"; else echo "# kept $T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok()     { PASSED=$((PASSED + 1)); echo "ok - $*"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
check()  { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
is() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: expected '$2', got '$3'"; fi
}
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" = 0 ]; }

free_port() { "$FREEPORT"; }

# wait_for SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
	local n=$(( $1 * 20 )); shift
	while [ $n -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; n=$((n - 1)); done
	return 1
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_redis() {
	REDIS_PORT=${1:-$(free_port)}
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$T" --logfile "$T/redis-$REDIS_PORT.log" &
	REDIS_PID=$!
	PIDS+=("$REDIS_PID")
	wait_for 10 redis-cli -p "$REDIS_PORT" ping || { echo "# redis did not start"; return 1; }
}
stop_redis() {
	kill "$REDIS_PID" 2>/dev/null
	wait "$REDIS_PID" 2>/dev/null
}
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

# subst FILE: replaces @NAME@ with $NAME for every variable set.
subst() {
	local f=$1 v
	local out; out=$(cat "$f")
	for v in T TOP REDIS_PORT RLGATE_PORT HTTP_PORT DOCROOT AUDIT_DB RLGATE_SOCK; do
		[ -n "${!v:-}" ] && out=${out//@$v@/${!v}}
	done
	printf '%s\n' "$out"
}

# start_rlgate CONF [NAME]: rlgate listening on 127.0.0.1:$RLGATE_PORT.
start_rlgate() {
	local name=${2:-rlgate}
	RLGATE_PORT=${RLGATE_PORT:-$(free_port)}
	"$RLGATE" -c "$1" -s "127.0.0.1:$RLGATE_PORT" 2>>"$T/$name.log" &
	RLGATE_PID=$!
	PIDS+=("$RLGATE_PID")
	wait_for 10 port_open "$RLGATE_PORT" || { echo "# rlgate did not start:"; cat "$T/$name.log"; return 1; }
}
stop_rlgate() {
	kill -TERM "$RLGATE_PID" 2>/dev/null
	wait "$RLGATE_PID" 2>/dev/null
}

# start_lighttpd TEMPLATE: lighttpd in the foreground on $HTTP_PORT.
start_lighttpd() {
	HTTP_PORT=${HTTP_PORT:-$(free_port)}
	subst "$1" > "$T/lighttpd.conf"
	lighttpd -tt -f "$T/lighttpd.conf" || return 1
	lighttpd -D -f "$T/lighttpd.conf" 2>>"$T/lighttpd.log" &
	HTTPD_PID=$!
	PIDS+=("$HTTPD_PID")
	wait_for 10 port_open "$HTTP_PORT" || { echo "# lighttpd did not start"; cat "$T/lighttpd.log"; return 1; }
}

# status URL [CURL-ARGS...]: prints the HTTP status code.
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

# sql QUERY: runs QUERY on $AUDIT_DB.
sql() { sqlite3 -batch -noheader "$AUDIT_DB" "$1"; }

# lighttpd_from_shipped [EXTRA-LINES]: conf/lighttpd.conf with only its var.
# lines changed to this test's port, docroot and rlgate address, so that
# what is tested is what is shipped. Starts it.
start_shipped_lighttpd() {
	HTTP_PORT=${HTTP_PORT:-$(free_port)}
	DOCROOT=${DOCROOT:-$TOP/tests/www}
	sed -e "s|^var.http_port .*|var.http_port   = $HTTP_PORT|" \
	    -e "s|^var.docroot .*|var.docroot     = \"$DOCROOT\"|" \
	    -e "s|^var.rlgate_port .*|var.rlgate_port = $RLGATE_PORT|" \
	    "$TOP/conf/lighttpd.conf" > "$T/lighttpd.conf"
	printf '%s\n' "${1:-}" >> "$T/lighttpd.conf"
	lighttpd -tt -f "$T/lighttpd.conf" || return 1
	lighttpd -D -f "$T/lighttpd.conf" 2>>"$T/lighttpd.log" &
	HTTPD_PID=$!
	PIDS+=("$HTTPD_PID")
	wait_for 10 port_open "$HTTP_PORT" || { echo "# lighttpd did not start"; cat "$T/lighttpd.log"; return 1; }
}

# ab_run ARGS...: runs ab, sets AB_COMPLETE, AB_NON2XX, AB_FAILED.
ab_run() {
	ab -q "$@" > "$T/ab.out" 2>&1
	AB_COMPLETE=$(sed -n 's/^Complete requests: *//p' "$T/ab.out")
	AB_NON2XX=$(sed -n 's/^Non-2xx responses: *//p' "$T/ab.out")
	AB_FAILED=$(sed -n 's/^Failed requests: *//p' "$T/ab.out")
	AB_NON2XX=${AB_NON2XX:-0}
}
