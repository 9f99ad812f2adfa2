# Sourced by the integration tests (tests/it/it_*.sh). Starts real servers on
# 127.0.0.1 and free ports inside one mktemp -d directory, stops exactly the
# processes it started (by PID) on exit, and counts checks.
#
#   . "$(dirname "$0")/../lib.sh"
#   start_redis                     -> $REDIS_PORT (and a unix socket at
#                                      $REDIS_SOCKET, when that is set)
#   start_rlgate CONF [NAME]        -> $RLGATE_PORT, $RLGATE_PID, log $T/NAME.log
#                                      ($RLGATE_WRAPPER, e.g. "valgrind ...",
#                                      goes before the command)
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
# BUSY_LUA: a script that holds Redis for ARGV[1] microseconds
# (rcli EVAL "$BUSY_LUA" 0 USEC); redis_held: it holds it now, a PING gets
# no answer within 300 ms (before busy-reply-threshold Redis answers nobody).
BUSY_LUA="local t0 = redis.call('TIME') local s = t0[1] * 1000000 + t0[2]
repeat local t = redis.call('TIME') until t[1] * 1000000 + t[2] - s >= tonumber(ARGV[1])
return 1"
redis_held() { ! timeout 0.3 redis-cli -p "$REDIS_PORT" PING > /dev/null 2>&1; }
# now_ms: the wall clock in milliseconds.
now_ms() { date +%s%3N; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_redis() {
	REDIS_PORT=${1:-$(free_port)}
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$T" --logfile "$T/redis-$REDIS_PORT.log" \
		${REDIS_SOCKET:+--unixsocket "$REDIS_SOCKET" --unixsocketperm 700} &
	REDIS_PID=$!
	PIDS+=("$REDIS_PID")
	wait_for 10 redis-cli -p "$REDIS_PORT" ping || { echo "# redis did not start"; return 1; }
}
stop_redis() {
	kill "$REDIS_PID" 2>/dev/null
	wait "$REDIS_PID" 2>/dev/null
}
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
# redis_calls CMD [PORT]: the CMD (e.g. evalsha) calls the Redis on PORT
# (default ours) ran, from INFO commandstats: failed and rejected ones (a
# NOSCRIPT) not counted. Empty when that Redis does not answer.
redis_calls() {
	redis-cli -p "${2:-$REDIS_PORT}" INFO commandstats 2>/dev/null | tr -d '\r' |
	    awk -F'[:,=]' -v c="cmdstat_$1" '$1 == c {
		for (i = 2; i < NF; i += 2) v[$i] = $(i + 1) }
		END { if (NR > 0) print v["calls"] - v["failed_calls"] - v["rejected_calls"] }'
}

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
	${RLGATE_WRAPPER:-} "$RLGATE" -c "$1" -s "127.0.0.1:$RLGATE_PORT" 2>>"$T/$name.log" &
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
# audit_v1 SRC DST: DST, a file of the first audit layout (one decisions
# table, which a test may change to forge a record) holding every row SRC's
# decisions give. rlgate-report reads it as it reads rlgate's own files.
audit_v1() {
	local schema
	schema=$(sed -n '/#define RLG_AUDIT_SCHEMA_V1/,/^$/p' "$TOP/fcgi/audit.h" |
		sed -n 's/^[^"]*"\(.*\)".*$/\1/p' | sed 's/\\n$//')
	rm -f "$2" "$2-wal" "$2-shm"
	sqlite3 "$2" "$schema; ATTACH '$1' AS src;
		INSERT INTO decisions SELECT * FROM src.decisions ORDER BY id"
}
# rows WHERE: decisions in $AUDIT_DB matching the SQL condition WHERE.
rows() { sql "SELECT count(*) FROM decisions WHERE $1"; }
# rows_at_least N WHERE: at least N of them.
rows_at_least() { [ "$(rows "$2")" -ge "$1" ]; }

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

# --- Deployment helpers (tests/it/it_deploy_*.sh) -----------------------------
# The web servers run as Debian runs them: started as root, serving as
# www-data. So do the rlgate processes they start (bin-path, CGI) and the
# ones spawn-fcgi starts with -u www-data.

# www_dir NAME: $T/NAME owned by www-data, for what is written after root
# is dropped (logs, sockets, audit databases). Lets every user enter $T
# (mktemp -d makes it 0700), not list it.
www_dir() {
	chmod 711 "$T"
	mkdir -p "$T/$1" && chown www-data:www-data "$T/$1"
}

# ship_conf FILE OUT NAME=VALUE...: conf/FILE with only its variable lines
# set, so that what is tested is what is shipped. Variable lines are
#   lighttpd  var.NAME = VALUE          (quoted if the shipped value was)
#   Apache    Define NAME VALUE
#   nginx     DIRECTIVE VALUE;  # var.NAME
# A NAME without such a line is an error: the shipped file changed.
ship_conf() {
	local file=$1 out=$2 nv
	shift 2
	cp "$TOP/conf/$file" "$out.tmp" || return 1
	for nv in "$@"; do
		SHIP_NAME=${nv%%=*} SHIP_VALUE=${nv#*=} awk '
		BEGIN { n = ENVIRON["SHIP_NAME"]; v = ENVIRON["SHIP_VALUE"]; m = "# var." n }
		$0 ~ "^var\\." n "[ \t]*=" {
			rhs = $0; sub(/^[^=]*=[ \t]*/, "", rhs)
			q = substr(rhs, 1, 1) == "\"" ? "\"" : ""
			print "var." n " = " q v q; found = 1; next
		}
		$1 == "Define" && $2 == n { print "Define " n " " v; found = 1; next }
		(c = index($0, m)) > 0 && substr($0, c + length(m)) ~ /^[ \t]*$/ &&
		    match($0, /^[ \t]*[^ \t]+[ \t]+/) {
			print substr($0, 1, RLENGTH) v substr($0, index($0, ";"))
			found = 1; next
		}
		{ print }
		END { exit !found }' "$out.tmp" > "$out.new" ||
			{ echo "# ship_conf: conf/$file has no variable line ${nv%%=*}"; return 1; }
		mv "$out.new" "$out.tmp"
	done
	mv "$out.tmp" "$out"
}

# run_lighttpd CONF [NAME]: lighttpd -D with a templated CONF, on $HTTP_PORT.
run_lighttpd() {
	local name=${2:-lighttpd}
	lighttpd -tt -f "$1" || return 1
	lighttpd -D -f "$1" 2>>"$T/$name.stderr" &
	HTTPD_PID=$!
	PIDS+=("$HTTPD_PID")
	wait_for 10 port_open "$HTTP_PORT" ||
		{ echo "# lighttpd did not start"; cat "$T/$name.stderr"; return 1; }
}

# start_apache CONF...: apache2 -DFOREGROUND on 127.0.0.1:$HTTP_PORT with a
# private main configuration $T/apache/apache2.conf standing in for
# Debian's: pid file, logs and runtime files in $T/apache, DOCROOT served,
# CGI_DIR (if set) as /cgi-bin/ (Debian's serve-cgi-bin), the modules
# rlgate's examples use loaded from /usr/lib/apache2/modules, then each
# CONF (already templated) included. APACHE_MPM=event (default, with
# mod_cgid, Debian's default) or prefork (with mod_cgi).
start_apache() {
	local d=$T/apache mpm=${APACHE_MPM:-event} m f cgi=cgid
	HTTP_PORT=${HTTP_PORT:-$(free_port)}
	[ "$mpm" = prefork ] && cgi=cgi
	mkdir -p "$d"
	{
		echo "ServerRoot $d"
		echo "ServerName 127.0.0.1"
		echo "PidFile $d/apache2.pid"
		echo "DefaultRuntimeDir $d"
		echo "ErrorLog $d/error.log"
		echo "LogLevel ${APACHE_LOGLEVEL:-warn}"
		echo "User www-data"
		echo "Group www-data"
		echo "Listen 127.0.0.1:$HTTP_PORT"
		echo "LoadModule mpm_${mpm}_module /usr/lib/apache2/modules/mod_mpm_$mpm.so"
		for m in authn_core authz_core authz_user authnz_fcgi mime dir alias env headers $cgi; do
			echo "LoadModule ${m}_module /usr/lib/apache2/modules/mod_$m.so"
		done
		[ "$cgi" = cgid ] && echo "ScriptSock $d/cgid.sock"
		echo "TypesConfig /etc/mime.types"
		echo 'LogFormat "%h %l %u %t \"%r\" %>s %b" common'
		echo "CustomLog $d/access.log common"
		echo "<Directory />"
		echo "    AllowOverride None"
		echo "    Require all denied"
		echo "</Directory>"
		echo "DocumentRoot $DOCROOT"
		echo "DirectoryIndex index.html"
		echo "<Directory $DOCROOT>"
		echo "    Require all granted"
		echo "</Directory>"
		if [ -n "${CGI_DIR:-}" ]; then
			echo "ScriptAlias /cgi-bin/ $CGI_DIR/"
			echo "<Directory $CGI_DIR>"
			echo "    Require all granted"
			echo "</Directory>"
		fi
		for f in "$@"; do echo "Include $f"; done
	} > "$d/apache2.conf"
	apache2 -t -f "$d/apache2.conf" 2>"$d/configtest.log" ||
		{ cat "$d/configtest.log"; return 1; }
	# Its own session: on shutdown the prefork MPM sends SIGTERM to its
	# whole process group, which -DFOREGROUND leaves shared with this test.
	setsid apache2 -DFOREGROUND -f "$d/apache2.conf" 2>>"$d/stderr.log" &
	HTTPD_PID=$!
	PIDS+=("$HTTPD_PID")
	wait_for 10 port_open "$HTTP_PORT" ||
		{ echo "# apache2 did not start"; cat "$d/stderr.log" "$d/error.log"; return 1; }
	wait_for 5 test -s "$d/apache2.pid"
	[ "$(cat "$d/apache2.pid")" = "$HTTPD_PID" ] ||
		{ echo "# apache2's pid is $(cat "$d/apache2.pid"), not $HTTPD_PID"; return 1; }
}

# start_nginx SITE: nginx (master as root, workers as www-data) in the
# foreground on what SITE (already templated) listens on, with a private
# main configuration $T/nginx/nginx.conf standing in for Debian's: pid,
# logs and temporary files in $T/nginx. Waits for $HTTP_PORT.
start_nginx() {
	local d=$T/nginx
	mkdir -p "$d/tmp"
	cat > "$d/nginx.conf" <<-EOF
	user www-data;
	worker_processes 2;
	error_log $d/error.log warn;
	events { worker_connections 512; }
	http {
	    include /etc/nginx/mime.types;
	    default_type application/octet-stream;
	    access_log $d/access.log;
	    client_body_temp_path $d/tmp/body;
	    fastcgi_temp_path $d/tmp/fastcgi;
	    proxy_temp_path $d/tmp/proxy;
	    uwsgi_temp_path $d/tmp/uwsgi;
	    scgi_temp_path $d/tmp/scgi;
	    include $1;
	}
	EOF
	nginx -t -q -p "$d" -e "$d/error.log" -c "$d/nginx.conf" -g "daemon off; pid $d/nginx.pid;" ||
		return 1
	nginx -p "$d" -e "$d/error.log" -c "$d/nginx.conf" -g "daemon off; pid $d/nginx.pid;" \
		2>>"$d/stderr.log" &
	HTTPD_PID=$!
	PIDS+=("$HTTPD_PID")
	wait_for 10 port_open "$HTTP_PORT" ||
		{ echo "# nginx did not start"; cat "$d/stderr.log" "$d/error.log"; return 1; }
}

# spawn_rlgate ADDR CONF N NAME: spawn-fcgi starts N rlgate processes as
# www-data on ADDR (unix:/path, socket for www-data only, or
# 127.0.0.1:port), logging to $T/NAME.log (spawn-fcgi sends the children's
# stderr to /dev/null: the sh -c keeps it). Sets SPAWNED_PIDS.
spawn_rlgate() {
	local addr=$1 conf=$2 n=$3 name=$4 p
	local where=(-a "${addr%:*}" -p "${addr##*:}")
	case $addr in unix:*) where=(-s "${addr#unix:}" -M 0660 -U www-data -G www-data);; esac
	touch "$T/$name.log" && chown www-data "$T/$name.log"
	spawn-fcgi "${where[@]}" -u www-data -F "$n" -P "$T/$name.pid" -- \
		/bin/sh -c "exec $RLGATE -c $conf 2>>$T/$name.log" >>"$T/$name.spawn" 2>&1 ||
		{ echo "# spawn-fcgi failed:"; cat "$T/$name.spawn" "$T/$name.log"; return 1; }
	mapfile -t SPAWNED_PIDS < "$T/$name.pid"
	for p in "${SPAWNED_PIDS[@]}"; do PIDS+=("$p"); done
	[ "${#SPAWNED_PIDS[@]}" = "$n" ]
}

# resp_header FILE NAME: the value of header NAME in a curl -D dump.
resp_header() { tr -d '\r' < "$1" | sed -n "s/^$2: //Ip" | head -1; }

# rows_in DB: decisions stored in the audit database DB (0 before it exists).
rows_in() { sqlite3 -batch -noheader "$1" 'SELECT count(*) FROM decisions' 2>/dev/null || echo 0; }
# rows_reach N DB...: the databases hold at least N decisions between them.
rows_reach() {
	local n=$1 sum=0 db
	shift
	for db in "$@"; do sum=$((sum + $(rows_in "$db"))); done
	[ "$sum" -ge "$n" ]
}

# ini_redis_audit [LINE...]: the [redis] and [audit] sections of the gateway
# tests' rlgate.ini, for a heredoc ($(ini_redis_audit)): Redis where the
# LINEs say (mode, address, master_name; default: the single server at
# $REDIS_PORT), with timeouts a loaded test machine does not reach, so that
# exact counts never turn into on_error decisions (a stopped or killed Redis
# refuses at once, whatever the timeout); rows to $AUDIT_DB every 20 ms.
# [audit] comes last: keys written right after it are [audit]'s.
ini_redis_audit() {
	echo "[redis]"
	if [ $# -eq 0 ]; then echo "address = 127.0.0.1:$REDIS_PORT"; else printf '%s\n' "$@"; fi
	cat <<-EOF
	connect_timeout = 1s
	timeout = 2s

	[audit]
	database = $AUDIT_DB
	flush_interval = 20ms
	EOF
}

# deploy_ini OUT DB [DENY_STATUS]: the rlgate.ini of the deployment tests,
# with its audit database DB: the seeds' demonstration (user_list, 100 per
# second per org and endpoint) and the protected application (app, 3 per
# client per minute under /cgi-bin/ and /app/).
deploy_ini() {
	cat > "$1" <<-EOF
	[gateway]
	workers = 8
	deny_status = ${3:-429}

	[redis]
	address = 127.0.0.1:$REDIS_PORT

	[audit]
	database = $2
	flush_interval = 20ms

	[rule:user_list]
	path = /user/list
	key = {query.org}{path}
	algorithm = fixed_window
	limit = 100
	window = 1s

	[rule:app]
	path = ~^/(cgi-bin|app)/
	limit = 3
	window = 1m
	EOF
	"$RLGATE" -t -c "$1" >/dev/null
}

# key_rows KEY DB...: decisions for KEY in the databases, as ALLOWED+DENIED.
key_rows() {
	local key=$1 db a d allowed=0 denied=0
	shift
	for db in "$@"; do
		IFS='|' read -r a d <<<"$(sqlite3 -batch -noheader "$db" \
			"SELECT count(*) - total(1-allowed), total(1-allowed) FROM decisions WHERE key='$key'" 2>/dev/null)"
		a=${a%.*} d=${d%.*}
		allowed=$((allowed + ${a:-0})) denied=$((denied + ${d:-0}))
	done
	echo "$allowed+$denied"
}
key_rows_reach() {	# N KEY DB...
	local n=$1 r
	shift
	r=$(key_rows "$@")
	[ $(( ${r%+*} + ${r#*+} )) -ge "$n" ]
}

# key_span_ms KEY DB...: ms between the first and the last decision for KEY.
key_span_ms() {
	local key=$1 db lo hi min= max=
	shift
	for db in "$@"; do
		IFS='|' read -r lo hi <<<"$(sqlite3 -batch -noheader "$db" \
			"SELECT min(ts_ms), max(ts_ms) FROM decisions WHERE key='$key'" 2>/dev/null)"
		[ -n "$lo" ] || continue
		{ [ -z "$min" ] || [ "$lo" -lt "$min" ]; } && min=$lo
		{ [ -z "$max" ] || [ "$hi" -gt "$max" ]; } && max=$hi
	done
	echo $(( ${max:-0} - ${min:-0} ))
}

# seed_demo WHAT BASE-URL ORG DB...: the seeds' ab -n 110 -c 10 against
# /user/list?org=ORG, limited to 100 per second: exactly 100 pass and 10
# are denied at the client. At once, still inside the window, one more
# request is kept in $T/denied.h and $T/denied.b for check_denied. The audit
# databases DB... hold one row per decision: 100 allowed, 11 denied.
# The promise holds for requests inside one 1 s window: on a machine so
# loaded that the run outlasts the window (Redis TIME of the first and last
# decision 1 s or more apart), it is run again under a new org, up to 3
# times. Sets SEED_KEY, the key of the run that was checked, and SEED_EXTRA,
# the rows the runs before it left.
seed_demo() {
	local what=$1 base=$2 org=$3 try span url
	shift 3
	for try in 1 2 3; do
		[ "$try" = 1 ] || org="$org-$try"
		url="$base/user/list?org=$org" SEED_KEY="$org/user/list"
		ab_run -n 110 -c 10 "$url"
		curl -s -D "$T/denied.h" -o "$T/denied.b" "$url"
		wait_for 5 key_rows_reach 111 "$SEED_KEY" "$@"
		span=$(key_span_ms "$SEED_KEY" "$@")
		SEED_EXTRA=$(( (try - 1) * 111 ))	# rows of runs that did not count
		[ "$span" -lt 1000 ] && break
		echo "# $what: the run took $span ms, longer than the 1 s window (a loaded machine)"
	done
	is "$what: ab's 110 requests complete" 110 "$AB_COMPLETE"
	is "$what: exactly 10 denied at the client" 10 "$AB_NON2XX"
	is "$what: one audit row per decision, 100 allowed + 10 + 1 denied" "100+11" "$(key_rows "$SEED_KEY" "$@")"
}

# check_denied WHAT BODY-PATTERN: the request seed_demo kept, over the
# user_list limit, got at the client 429 with Retry-After, the IETF
# RateLimit headers and a problem+json body matching the pattern.
check_denied() {
	local what=$1 pat=$2
	is "$what: 429 at the client" "HTTP/1.1 429 Too Many Requests" "$(head -1 "$T/denied.h" | tr -d '\r')"
	check "$what: Retry-After is 1 (s, rounded up)" [ "$(resp_header "$T/denied.h" Retry-After)" = 1 ]
	is "$what: RateLimit-Policy" '"user_list";q=100;w=1' "$(resp_header "$T/denied.h" RateLimit-Policy)"
	is "$what: RateLimit" '"user_list";r=0;t=1' "$(resp_header "$T/denied.h" RateLimit)"
	is "$what: Content-Type" "application/problem+json" "$(resp_header "$T/denied.h" Content-Type)"
	check "$what: the quota-exceeded problem body" grep -q "$pat" "$T/denied.b"
}

# at_least MIN VALUE: VALUE is a whole number >= MIN (false when empty).
at_least() { [ -n "$2" ] && [ "$2" -ge "$1" ] 2>/dev/null; }
# between MIN MAX VALUE: VALUE is a whole number from MIN to MAX.
between() { at_least "$1" "$3" && [ "$3" -le "$2" ]; }

# --- CPU time (tests/bench/bench.sh, redis_cost.sh) ---------------------------
# cpu_ns PID...: the CPU time of all threads of these processes so far (ns).
cpu_ns() {
	local s=0 a f p
	for p in "$@"; do
		for f in /proc/"$p"/task/*/schedstat; do
			read -r a _ < "$f" 2>/dev/null && s=$((s + a))
		done
	done
	echo "$s"
}
# per_req NS N [DECIMALS]: NS nanoseconds over N, in us to DECIMALS places
# (1: a fast machine spends a few us of Redis a request, which whole us
# would truncate by up to a seventh).
per_req() { awk -v t="$1" -v n="$2" -v d="${3:-1}" 'BEGIN { printf "%.*f", d, t / n / 1000 }'; }

# --- Redis Cluster and Sentinel (tests/it/it_cluster.sh, it_sentinel.sh) -------

# cluster_port: a free port whose +10000 (the cluster bus) is free too,
# both below the kernel's ephemeral ports (32768 and up here), where a
# client's connection may hold a port that no one listens on.
cluster_port() {
	local p lo
	lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	for _ in $(seq 200); do
		p=$(( 10000 + RANDOM % (lo - 20000) ))
		port_open "$p" || port_open $((p + 10000)) || { echo "$p"; return 0; }
	done
	return 1
}

# start_cluster_node PORT [ARGS...]: one cluster-enabled redis-server.
start_cluster_node() {
	local p=$1; shift
	redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$T" --logfile "$T/redis-$p.log" --cluster-enabled yes \
		--cluster-config-file "$T/nodes-$p.conf" --cluster-node-timeout 1000 \
		--cluster-require-full-coverage no "$@" &
	CLUSTER_PID[$p]=$!
	PIDS+=("$!")
	wait_for 10 redis-cli -p "$p" ping || { echo "# cluster node $p did not start"; return 1; }
}

# cluster_ready: every node sees cluster_state:ok and every replica's link
# to its master is up (else no replica can take over a killed master).
cluster_ready() {
	local p
	for p in "${CLUSTER_PORTS[@]}"; do
		[ -n "${CLUSTER_PID[$p]:-}" ] || continue
		redis-cli -p "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
		if redis-cli -p "$p" ROLE | head -1 | grep -q slave; then
			redis-cli -p "$p" INFO replication | grep -q '^master_link_status:up' || return 1
		fi
	done
}

# start_cluster: 3 masters and 3 replicas (redis-cli --cluster create
# --cluster-replicas 1) with cluster-node-timeout 1000 and
# cluster-require-full-coverage no. Sets CLUSTER_PORTS (the first three are
# the masters) and CLUSTER_PID[port]; CLUSTER_SEED is the first port.
declare -A CLUSTER_PID=()
start_cluster() {
	local p addrs=()
	CLUSTER_PORTS=()
	for _ in 1 2 3 4 5 6; do
		p=$(cluster_port) || return 1
		start_cluster_node "$p" 2>/dev/null ||
			{ p=$(cluster_port) && start_cluster_node "$p"; } || return 1
		CLUSTER_PORTS+=("$p")
		addrs+=("127.0.0.1:$p")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		> "$T/cluster-create.log" 2>&1 || { echo "# cluster create failed:"; cat "$T/cluster-create.log"; return 1; }
	CLUSTER_SEED=${CLUSTER_PORTS[0]}
	wait_for 30 cluster_ready || { echo "# cluster not ready"; return 1; }
}

# cluster_master_of SLOT: the port of the master that serves SLOT now, as
# the seed (or the first node answering) sees it.
cluster_master_of() {
	local p
	for p in "${CLUSTER_PORTS[@]}"; do
		[ -n "${CLUSTER_PID[$p]:-}" ] || continue
		redis-cli -p "$p" CLUSTER SLOTS 2>/dev/null | awk -v s="$1" '
			BEGIN { n = 0 }
			{ line[n++] = $0 }
			END { for (i = 0; i + 3 < n; i++)
				if (line[i] ~ /^[0-9]+$/ && line[i+1] ~ /^[0-9]+$/ &&
				    line[i] + 0 <= s + 0 && s + 0 <= line[i+1] + 0 &&
				    line[i+2] ~ /^127\./) { print line[i+3]; exit } }' && return 0
	done
}

# cluster_id PORT: the node id of the node on PORT.
cluster_id() { redis-cli -p "$1" CLUSTER MYID; }

# kill_node PORT: kill -9 the redis-server on PORT (it stays in PIDS: a
# second kill at cleanup finds nothing).
kill_node() {
	kill -9 "${CLUSTER_PID[$1]}" 2>/dev/null
	wait "${CLUSTER_PID[$1]}" 2>/dev/null
	unset "CLUSTER_PID[$1]"
}

# start_sentinel_set: a master, one replica and three Sentinels (quorum 2,
# down-after-milliseconds 1000, failover-timeout 3000) watching it as
# "mymaster". Sets SENTINEL_MASTER_PORT, SENTINEL_REPLICA_PORT,
# SENTINEL_PORTS (three) and CLUSTER_PID[port] for each server; waits until
# the replica's link is up and every Sentinel knows the replica and the two
# other Sentinels.
start_sentinel_set() {
	local p i
	SENTINEL_MASTER_PORT=$(free_port)
	redis-server --port "$SENTINEL_MASTER_PORT" --bind 127.0.0.1 --save '' \
		--appendonly no --dir "$T" --logfile "$T/redis-$SENTINEL_MASTER_PORT.log" &
	CLUSTER_PID[$SENTINEL_MASTER_PORT]=$!; PIDS+=("$!")
	SENTINEL_REPLICA_PORT=$(free_port)
	redis-server --port "$SENTINEL_REPLICA_PORT" --bind 127.0.0.1 --save '' \
		--appendonly no --dir "$T" --logfile "$T/redis-$SENTINEL_REPLICA_PORT.log" \
		--replicaof 127.0.0.1 "$SENTINEL_MASTER_PORT" &
	CLUSTER_PID[$SENTINEL_REPLICA_PORT]=$!; PIDS+=("$!")
	wait_for 10 redis-cli -p "$SENTINEL_MASTER_PORT" ping || return 1
	wait_for 10 sh -c "redis-cli -p $SENTINEL_REPLICA_PORT INFO replication | grep -q '^master_link_status:up'" ||
		{ echo "# the replica did not connect"; return 1; }
	SENTINEL_PORTS=()
	for i in 1 2 3; do
		p=$(free_port)
		cat > "$T/sentinel-$p.conf" <<-EOT
		port $p
		bind 127.0.0.1
		dir $T
		logfile $T/sentinel-$p.log
		sentinel monitor mymaster 127.0.0.1 $SENTINEL_MASTER_PORT 2
		sentinel down-after-milliseconds mymaster 1000
		sentinel failover-timeout mymaster 3000
		${SENTINEL_CONF_EXTRA:-}
		EOT
		redis-server "$T/sentinel-$p.conf" --sentinel &
		CLUSTER_PID[$p]=$!; PIDS+=("$!")
		SENTINEL_PORTS+=("$p")
	done
	for p in "${SENTINEL_PORTS[@]}"; do
		wait_for 20 sh -c "redis-cli -p $p ${SENTINEL_CLI_AUTH:-} SENTINEL master mymaster 2>/dev/null |
			awk 'prev == \"num-slaves\" && \$0 >= 1 { s = 1 } prev == \"num-other-sentinels\" && \$0 >= 2 { o = 1 }
			     { prev = \$0 } END { exit !(s && o) }'" ||
			{ echo "# sentinel $p does not see the set"; return 1; }
	done
}

# --- TLS (tests/it/it_tls.sh) -------------------------------------------------

# tls_certs DIR: with the openssl CLI, in DIR: ca.crt (a CA) and, signed by
# it, server.crt/.key (subjectAltName IP 127.0.0.1 and DNS localhost,
# valid for a day), expired.crt/.key (the same names, valid in 2020 only)
# and client.crt/.key (a client certificate); other-ca.crt and
# other.crt/.key, a server certificate with the same names from that other
# CA.
tls_certs() {
	local d=$1 n
	mkdir -p "$d/db" && : > "$d/db/index.txt" && echo 01 > "$d/db/serial"
	printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\n' > "$d/san.cnf"
	printf '[ca]\ndefault_ca = d\n[d]\ndatabase = %s/db/index.txt\nnew_certs_dir = %s/db\nserial = %s/db/serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n' \
		"$d" "$d" "$d" > "$d/ca.cnf"
	for n in ca other-ca; do
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/$n.key" -out "$d/$n.crt" \
			-days 2 -subj "/CN=rlgate test $n" 2>/dev/null || return 1
	done
	for n in server expired client other; do
		openssl req -newkey rsa:2048 -nodes -keyout "$d/$n.key" -out "$d/$n.csr" \
			-subj "/CN=$n" 2>/dev/null || return 1
	done
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 1 -extfile "$d/san.cnf" -out "$d/server.crt" 2>/dev/null &&
	openssl x509 -req -in "$d/client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 1 -out "$d/client.crt" 2>/dev/null &&
	openssl x509 -req -in "$d/other.csr" -CA "$d/other-ca.crt" -CAkey "$d/other-ca.key" \
		-CAcreateserial -days 1 -extfile "$d/san.cnf" -out "$d/other.crt" 2>/dev/null &&
	openssl ca -batch -config "$d/ca.cnf" -cert "$d/ca.crt" -keyfile "$d/ca.key" \
		-startdate 20200101000000Z -enddate 20200102000000Z -extfile "$d/san.cnf" \
		-notext -in "$d/expired.csr" -out "$d/expired.crt" >/dev/null 2>&1
}

# tls_server_args NAME: redis-server's TLS arguments with certificate NAME
# (server, expired, other) from $TLS_DIR and its CA for clients; no
# client certificate asked for unless TLS_AUTH_CLIENTS=yes.
tls_server_args() {
	echo "--tls-cert-file $TLS_DIR/$1.crt --tls-key-file $TLS_DIR/$1.key" \
		"--tls-ca-cert-file $TLS_DIR/ca.crt --tls-auth-clients ${TLS_AUTH_CLIENTS:-no}"
}
# tcli PORT ARGS...: redis-cli over TLS (with the client certificate).
tcli() {
	local p=$1; shift
	redis-cli --tls --cacert "$TLS_DIR/ca.crt" --cert "$TLS_DIR/client.crt" \
		--key "$TLS_DIR/client.key" -p "$p" "$@"
}
# start_tls_redis [CERT]: a redis-server on TLS only (--port 0), with
# certificate CERT (default server); sets TLS_PORT and TLS_PID.
start_tls_redis() {
	TLS_PORT=$(free_port)
	redis-server --port 0 --tls-port "$TLS_PORT" $(tls_server_args "${1:-server}") \
		--bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
		--logfile "$T/redis-$TLS_PORT.log" &
	TLS_PID=$!
	PIDS+=("$TLS_PID")
	wait_for 10 port_open "$TLS_PORT" || { echo "# TLS redis did not start"; return 1; }
}

# start_tls_cluster: start_cluster's 3 masters and 3 replicas on TLS only
# (--port 0 --tls-port, tls-cluster yes: the bus and CLUSTER SLOTS use the
# TLS ports; tls-replication yes), made with redis-cli --tls --cluster
# create. Sets CLUSTER_PORTS (the TLS ports; the first three the masters)
# and CLUSTER_PID[port].
tls_cluster_ready() {
	local p
	for p in "${CLUSTER_PORTS[@]}"; do
		tcli "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
		if tcli "$p" ROLE | head -1 | grep -q slave; then
			tcli "$p" INFO replication | grep -q '^master_link_status:up' || return 1
		fi
	done
}
start_tls_cluster() {
	local p addrs=()
	CLUSTER_PORTS=()
	for _ in 1 2 3 4 5 6; do
		p=$(cluster_port) || return 1
		redis-server --port 0 --tls-port "$p" $(tls_server_args server) --tls-cluster yes \
			--tls-replication yes --bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
			--logfile "$T/redis-$p.log" --cluster-enabled yes \
			--cluster-config-file "$T/nodes-$p.conf" --cluster-node-timeout 1000 \
			--cluster-require-full-coverage no &
		CLUSTER_PID[$p]=$!
		PIDS+=("$!")
		CLUSTER_PORTS+=("$p")
		addrs+=("127.0.0.1:$p")
	done
	for p in "${CLUSTER_PORTS[@]}"; do
		wait_for 10 tcli "$p" ping || { echo "# TLS cluster node $p did not start"; return 1; }
	done
	tcli "${CLUSTER_PORTS[0]}" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		> "$T/cluster-create.log" 2>&1 || { echo "# cluster create failed:"; cat "$T/cluster-create.log"; return 1; }
	wait_for 30 tls_cluster_ready || { echo "# TLS cluster not ready"; return 1; }
}

# start_tls_sentinel_set: start_sentinel_set's master, replica and three
# Sentinels, every one on TLS only (tls-replication yes: the replica and
# the Sentinels reach the master over TLS). Sets SENTINEL_MASTER_PORT,
# SENTINEL_REPLICA_PORT, SENTINEL_PORTS and CLUSTER_PID[port].
start_tls_sentinel_set() {
	local p i
	SENTINEL_MASTER_PORT=$(free_port)
	SENTINEL_REPLICA_PORT=$(free_port)
	for p in "$SENTINEL_MASTER_PORT" "$SENTINEL_REPLICA_PORT"; do
		redis-server --port 0 --tls-port "$p" $(tls_server_args server) --tls-replication yes \
			--bind 127.0.0.1 --save '' --appendonly no --dir "$T" --logfile "$T/redis-$p.log" \
			$([ "$p" = "$SENTINEL_REPLICA_PORT" ] && echo "--replicaof 127.0.0.1 $SENTINEL_MASTER_PORT") &
		CLUSTER_PID[$p]=$!; PIDS+=("$!")
	done
	wait_for 10 tcli "$SENTINEL_MASTER_PORT" ping || return 1
	wait_for 10 sh -c "$(declare -f tcli); TLS_DIR=$TLS_DIR; tcli $SENTINEL_REPLICA_PORT INFO replication | grep -q '^master_link_status:up'" ||
		{ echo "# the TLS replica did not connect"; return 1; }
	SENTINEL_PORTS=()
	for i in 1 2 3; do
		p=$(free_port)
		cat > "$T/sentinel-$p.conf" <<-EOT
		port 0
		tls-port $p
		tls-cert-file $TLS_DIR/server.crt
		tls-key-file $TLS_DIR/server.key
		tls-ca-cert-file $TLS_DIR/ca.crt
		tls-auth-clients no
		tls-replication yes
		bind 127.0.0.1
		dir $T
		logfile $T/sentinel-$p.log
		sentinel monitor mymaster 127.0.0.1 $SENTINEL_MASTER_PORT 2
		sentinel down-after-milliseconds mymaster 1000
		sentinel failover-timeout mymaster 3000
		EOT
		redis-server "$T/sentinel-$p.conf" --sentinel &
		CLUSTER_PID[$p]=$!; PIDS+=("$!")
		SENTINEL_PORTS+=("$p")
	done
	for p in "${SENTINEL_PORTS[@]}"; do
		wait_for 20 sh -c "$(declare -f tcli); TLS_DIR=$TLS_DIR; tcli $p SENTINEL master mymaster 2>/dev/null |
			awk 'prev == \"num-slaves\" && \$0 >= 1 { s = 1 } prev == \"num-other-sentinels\" && \$0 >= 2 { o = 1 }
			     { prev = \$0 } END { exit !(s && o) }'" ||
			{ echo "# TLS sentinel $p does not see the set"; return 1; }
	done
}
