#!/bin/bash
# make bench: rlgate side by side with the floor and with what a user would
# pick instead, in the recommended deployment, in one run. A benchmark, not
# a test: it exits 0 unless a server fails to start or audit rows are lost.
#
# Every kind serves the same 47-byte JSON file at /bench/item:
#   floor            lighttpd (conf/lighttpd-spawn.conf as shipped, its var.
#                    lines set) + tests/tools/allow_fcgi, a trivial always-
#                    allow FastCGI authorizer, on a unix socket
#   rlgate-1         the same lighttpd + rlgate under spawn-fcgi on a unix
#                    socket (default workers, audit on), 1 rule (fixed_window)
#   rlgate-3         the same, 3 rules (fixed_window, token_bucket, gcra)
#   rlgate-1-wait    rlgate-1 with [redis] replicas = 1, on a Redis of its
#                    own with one replica (WAIT after each batch's calls)
#   rlgate-1-tls     rlgate-1 with [redis] tls = yes, on a redis-server of
#                    its own serving TLS only (certificates made here)
#   nginx-limit_req  nginx serving the file behind limit_req (local, no Redis)
#   nginx-static     nginx serving the file: the ceiling
#   fastify          fastify + @fastify/rate-limit on Redis (tests/bench/)
#   express          express + rate-limiter-flexible on Redis (tests/bench/)
#   cluster-1        rlgate-1 on a 3-master Redis Cluster ([redis] mode =
#   cluster-3        cluster), when this build has it
# and, only when BENCH_ONLY names them (lab kinds): floor-2 (the floor
# again: what noise alone makes of a difference), rlgate-1-noaudit and
# rlgate-3-noaudit. Every limit is one no run reaches: every request is
# decided (in Redis where the kind uses it) and admitted.
#
# All kinds are up at once. Each round runs every kind once at
# BENCH_CONNS connections (saturated) and once at one connection (latency
# with nothing queued), wrk -t1 for BENCH_SECONDS; each round starts the
# order at another kind. Ratios and latency added are taken against the
# floor's run of the same round, then their median: a machine whose load
# drifts shifts both alike. After the runs every rlgate gets SIGTERM (it
# flushes its audit queue) and each admitted response must have its audit
# rows, one per rule.
#
# Prints the table and the targets (issue 21), writes RESULTS/latest.csv
# (the table), RESULTS/latest-runs.csv (every run) and RESULTS/latest.json;
# prints the change against the previous latest.csv.
#
# Knobs (environment): BENCH_ROUNDS (5), BENCH_SECONDS (5: per wrk run),
# BENCH_CONNS (50), BENCH_ONE (1: the one-connection runs; 0 skips them),
# BENCH_ONLY (the kinds, e.g. "floor rlgate-1 fastify"), BENCH_WORKERS (16:
# allow_fcgi's threads), BENCH_PROCS (1: spawn-fcgi -F, rlgate processes),
# BENCH_LOOPS (rlgate's [gateway] workers; default: its own, one per CPU),
# BENCH_NGINX_WORKERS (auto, as Debian ships), BENCH_RESULTS (directory,
# default tests/bench/results), RLGATE_BIN (another rlgate build).
# make runs it with sh: it is a bash script.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/../lib.sh"

BENCH=$TOP/tests/bench
ROUNDS=${BENCH_ROUNDS:-5}
SECS=${BENCH_SECONDS:-5}
CONNS=${BENCH_CONNS:-50}
ONE=${BENCH_ONE:-1}
WORKERS=${BENCH_WORKERS:-16}
PROCS=${BENCH_PROCS:-1}
LOOPS=${BENCH_LOOPS:-}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-auto}
KINDS=${BENCH_ONLY:-floor rlgate-1 rlgate-1-wait rlgate-1-tls rlgate-3 nginx-limit_req nginx-static fastify express cluster-1 cluster-3}
RESULTS=${BENCH_RESULTS:-$BENCH/results}
RLGATE_SRC=${RLGATE_BIN:-$RLGATE}
ALLOW=$TOP/tests/tools/allow_fcgi
URL_PATH=/bench/item

for f in "$RLGATE_SRC" "$ALLOW" "$FREEPORT"; do
	[ -x "$f" ] || { echo "bench: $f is missing: run make bench" >&2; exit 1; }
done
for c in wrk lighttpd spawn-fcgi nginx redis-server redis-cli sqlite3; do
	command -v "$c" >/dev/null || { echo "bench: $c is missing (make deps)" >&2; exit 1; }
done

label() {
	case $1 in
	floor)            echo "lighttpd + allow_fcgi (the floor)";;
	floor-2)          echo "the floor again (A/A noise)";;
	rlgate-1)         echo "lighttpd + rlgate, 1 rule";;
	rlgate-3)         echo "lighttpd + rlgate, 3 rules";;
	rlgate-1-noaudit) echo "rlgate, 1 rule, audit off";;
	rlgate-1-wait)    echo "rlgate, 1 rule, replicas = 1";;
	rlgate-1-tls)     echo "rlgate, 1 rule, TLS to Redis";;
	rlgate-3-noaudit) echo "rlgate, 3 rules, audit off";;
	nginx-limit_req)  echo "nginx limit_req";;
	nginx-static)     echo "nginx static (the ceiling)";;
	fastify)          echo "fastify + @fastify/rate-limit";;
	express)          echo "express + rate-limiter-flexible";;
	cluster-1)        echo "rlgate on Redis Cluster, 1 rule";;
	cluster-3)        echo "rlgate on Redis Cluster, 3 rules";;
	*) return 1;;
	esac
}
for k in $KINDS; do label "$k" >/dev/null || { echo "bench: unknown kind $k" >&2; exit 1; }; done
rules_of() { case $1 in *-3|*-3-*) echo 3;; *-1|*-1-*) echo 1;; *) echo 0;; esac; }
audited() { case $1 in rlgate-[13]|rlgate-1-wait|rlgate-1-tls|cluster-[13]) return 0;; esac; return 1; }
drop_kinds() {	# drop_kinds WHY KIND...: they are not run
	local why=$1 k out=
	shift
	for k in $KINDS; do
		case " $* " in
		*" $k "*) echo "# $k: skipped: $why"; SKIPPED+=("$k|$why");;
		*) out="$out $k";;
		esac
	done
	KINDS=${out# }
}
SKIPPED=()	# KIND|WHY of the kinds not run
has_kind() { case " $KINDS " in *" $1 "*) return 0;; esac; return 1; }

# The web servers serve as www-data, as Debian runs them; sockets, logs
# and audit databases are in $T/var, www-data's.
www_dir var
mkdir -p "$T/www/bench" "$T/cgi-bin" "$T/bin"
DOCROOT=$T/www
cp "$TOP/tests/www/user/list" "$DOCROOT/bench/item"	# 47 bytes of JSON
chmod -R a+rX "$DOCROOT"
cp "$RLGATE_SRC" "$T/bin/rlgate"	# what www-data runs, as `make install` would put it
RLGATE=$T/bin/rlgate
start_redis >/dev/null || exit 1
# rlgate-1-wait: a master and its replica of its own (the others' writes
# are not replicated); both count as its Redis CPU.
if has_kind rlgate-1-wait; then
	WAIT_PORT=$(free_port) WAIT_REPLICA=$(free_port)
	for p in "$WAIT_PORT" "$WAIT_REPLICA"; do
		redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
			--logfile "$T/redis-$p.log" $([ "$p" = "$WAIT_REPLICA" ] && echo --replicaof 127.0.0.1 "$WAIT_PORT") &
		WAIT_PIDS="${WAIT_PIDS:-} $!"; PIDS+=("$!")
	done
	wait_for 10 sh -c "redis-cli -p $WAIT_REPLICA INFO replication | grep -q '^master_link_status:up'" ||
		drop_kinds "its Redis replica did not connect" rlgate-1-wait
fi
# rlgate-1-tls: a redis-server of its own on TLS only; the CA readable by
# www-data, who runs rlgate.
if has_kind rlgate-1-tls; then
	TLS_DIR=$T/tls
	if tls_certs "$TLS_DIR" && chmod a+rx "$TLS_DIR" && chmod a+r "$TLS_DIR/ca.crt" &&
	    start_tls_redis >/dev/null; then
		TLS_REDIS_PID=$TLS_PID
	else
		drop_kinds "its TLS redis-server did not start" rlgate-1-tls
	fi
fi

# --- the Node peers: npm ci into tests/bench/node_modules ----------------
# With the machine's node and npm (from apt when missing and we are root).
# Skipped when a fresh install is up to date with package-lock.json.
node_peers() {
	local stamp=$BENCH/node_modules/.bench-lock-sha sha
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		[ "$(id -u)" = 0 ] || { NODE_WHY="node or npm missing (apt-get install nodejs npm)"; return 1; }
		echo "# installing nodejs npm (apt-get)"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null ||
			{ NODE_WHY="apt-get install nodejs npm failed"; return 1; }
	fi
	sha=$(sha1sum "$BENCH/package-lock.json" | cut -d' ' -f1)
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha" ] && return 0
	echo "# npm ci in tests/bench (node $(node --version), npm $(npm --version))"
	(cd "$BENCH" && npm ci --no-audit --no-fund --loglevel=error) > "$T/npm.log" 2>&1 ||
		{ NODE_WHY="npm ci failed: $(tail -3 "$T/npm.log" | tr '\n' ' ')"; return 1; }
	echo "$sha" > "$stamp"
}
if has_kind fastify || has_kind express; then
	node_peers || drop_kinds "$NODE_WHY" fastify express
fi

# --- the Redis Cluster: 6 nodes, 3 masters with a replica each ----------
# cluster_ports: 6 free ports below 55535 whose bus port (+10000) is free.
cluster_ports() {
	local p n=0 tries=0
	CPORTS=()
	while [ ${#CPORTS[@]} -lt 6 ] && [ $tries -lt 500 ]; do
		tries=$((tries + 1))
		p=$(free_port)
		[ "$p" -lt 55535 ] && ! port_open $((p + 10000)) || continue
		case " ${CPORTS[*]} " in *" $p "*) continue;; esac
		CPORTS+=("$p")
	done
	[ ${#CPORTS[@]} = 6 ]
}
cluster_up() {	# every node says cluster_state:ok, and sees 3 replicas
	local p
	for p in "${CPORTS[@]}"; do
		redis-cli -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
		[ "$(redis-cli -p "$p" CLUSTER NODES 2>/dev/null | awk '$3 ~ /slave/' | wc -l)" = 3 ] || return 1
	done
}
start_cluster() {
	local p d
	cluster_ports || { CLUSTER_WHY="no 6 free ports below 55535"; return 1; }
	CLUSTER_PIDS=()
	for p in "${CPORTS[@]}"; do
		d=$T/cluster/$p
		mkdir -p "$d"
		redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
		    --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 5000 \
		    --save '' --appendonly no --dir "$d" --logfile "$d/redis.log" &
		CLUSTER_PIDS+=("$!"); PIDS+=("$!")
	done
	for p in "${CPORTS[@]}"; do
		wait_for 10 redis-cli -p "$p" PING || { CLUSTER_WHY="redis-server on $p did not start"; return 1; }
	done
	redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CPORTS[@]}") \
	    --cluster-replicas 1 --cluster-yes > "$T/cluster-create.log" 2>&1 ||
		{ CLUSTER_WHY="redis-cli --cluster create failed (see $T/cluster-create.log)"; return 1; }
	wait_for 20 cluster_up || { CLUSTER_WHY="the cluster did not reach cluster_state:ok"; return 1; }
	CLUSTER_SEEDS=$(printf '127.0.0.1:%s ' "${CPORTS[@]:0:3}")
	CLUSTER_SEEDS=${CLUSTER_SEEDS% }
}

# rlgate_ini KIND: the gateway's configuration. Defaults everywhere but
# the Redis address, the audit database and the rules.
rlgate_ini() {
	local kind=$1
	[ -z "$LOOPS" ] || printf '[gateway]\nworkers = %s\n\n' "$LOOPS"
	echo "[redis]"
	case $kind in
	cluster-*) printf 'mode = cluster\naddress = %s\n' "$CLUSTER_SEEDS";;
	*-wait) printf 'address = 127.0.0.1:%s\nreplicas = 1\n' "$WAIT_PORT";;
	*-tls) printf 'address = 127.0.0.1:%s\ntls = yes\ntls_ca_file = %s\n' "$TLS_PORT" "$TLS_DIR/ca.crt";;
	*) echo "address = 127.0.0.1:$REDIS_PORT";;
	esac
	printf '\n[audit]\ndatabase = %s\n' "$(audited "$kind" && echo "$T/var/audit-$kind.db")"
	cat <<-EOF

	[rule:bench_ip]
	path = /bench/*
	key = {ip}
	algorithm = fixed_window
	limit = 1000000000
	window = 1s
	EOF
	[ "$(rules_of "$kind")" = 3 ] || return 0
	cat <<-EOF

	[rule:bench_path]
	path = /bench/*
	key = {path}
	algorithm = token_bucket
	limit = 1000000000
	window = 1s

	[rule:bench_method]
	path = /bench/*
	key = {method}
	algorithm = gcra
	limit = 1000000000
	window = 1s
	EOF
}

if has_kind cluster-1 || has_kind cluster-3; then
	# A build without cluster mode refuses the key; one with it is given
	# the cluster to probe (rlgate -t reaches it and loads the library).
	CLUSTER_SEEDS=127.0.0.1:1
	rlgate_ini cluster-1 > "$T/cluster-probe.ini"
	if "$RLGATE" -t -c "$T/cluster-probe.ini" 2>&1 | grep -q 'mode: unknown key'; then
		drop_kinds "this build has no cluster mode" cluster-1 cluster-3
	elif ! start_cluster; then
		drop_kinds "$CLUSTER_WHY" cluster-1 cluster-3
	else
		rlgate_ini cluster-1 > "$T/cluster-probe.ini"
		out=$("$RLGATE" -t -c "$T/cluster-probe.ini" 2>&1) ||
			drop_kinds "rlgate -t on the cluster: $(echo "$out" | head -2 | tr '\n' ' ')" cluster-1 cluster-3
	fi
fi

# --- starting the kinds --------------------------------------------------
declare -A PORT SERVER_PIDS BACKEND_PIDS ANSWERED

# start_lighttpd KIND SOCKET: conf/lighttpd-spawn.conf with its var. lines set.
start_lighttpd() {
	local kind=$1 sock=$2 p
	p=$(free_port)
	mkdir -p "$T/var/lighttpd-$kind" && chown www-data: "$T/var/lighttpd-$kind"
	ship_conf lighttpd-spawn.conf "$T/lighttpd-$kind.conf" http_port="$p" \
	    docroot="$DOCROOT" cgi_dir="$T/cgi-bin" log_dir="$T/var/lighttpd-$kind" \
	    rlgate_socket="$sock" || return 1
	lighttpd -tt -f "$T/lighttpd-$kind.conf" || return 1
	lighttpd -D -f "$T/lighttpd-$kind.conf" 2>>"$T/lighttpd-$kind.log" &
	SERVER_PIDS[$kind]=$!; PIDS+=("$!")
	PORT[$kind]=$p
}

# start_nginx KIND: nginx with a private main configuration (as Debian's:
# workers as www-data, worker_processes auto; no access log, as lighttpd
# here), serving DOCROOT; nginx-limit_req behind one limit_req zone keyed
# on the client address.
start_nginx() {
	local kind=$1 d=$T/nginx-$1 p lz='' lr=''
	p=$(free_port)
	mkdir -p "$d/tmp"
	if [ "$kind" = nginx-limit_req ]; then
		lz='limit_req_zone $binary_remote_addr zone=bench:10m rate=1000000r/s;'
		lr='limit_req zone=bench burst=1000000 nodelay;'
	fi
	cat > "$d/nginx.conf" <<-EOF
	user www-data;
	worker_processes $NGINX_WORKERS;
	error_log $d/error.log warn;
	events { worker_connections 1024; }
	http {
	    include /etc/nginx/mime.types;
	    default_type application/json;
	    sendfile on;
	    access_log off;
	    client_body_temp_path $d/tmp/body;
	    fastcgi_temp_path $d/tmp/fastcgi;
	    proxy_temp_path $d/tmp/proxy;
	    uwsgi_temp_path $d/tmp/uwsgi;
	    scgi_temp_path $d/tmp/scgi;
	    $lz
	    server {
	        listen 127.0.0.1:$p;
	        root $DOCROOT;
	        location / {
	            $lr
	            try_files \$uri =404;
	        }
	    }
	}
	EOF
	nginx -t -q -p "$d" -e "$d/error.log" -c "$d/nginx.conf" -g "daemon off; pid $d/nginx.pid;" || return 1
	nginx -p "$d" -e "$d/error.log" -c "$d/nginx.conf" -g "daemon off; pid $d/nginx.pid;" \
	    2>>"$d/stderr.log" &
	SERVER_PIDS[$kind]=$!; PIDS+=("$!")
	PORT[$kind]=$p
}

# start_node KIND: tests/bench/KIND.js, one process.
start_node() {
	local kind=$1 p
	p=$(free_port)
	BENCH_PORT=$p REDIS_PORT=$REDIS_PORT BENCH_FILE=$DOCROOT/bench/item \
	    node "$BENCH/$kind.js" >>"$T/$kind.log" 2>&1 &
	SERVER_PIDS[$kind]=$!; PIDS+=("$!")
	PORT[$kind]=$p
}

start_kind() {
	local kind=$1 sock=$T/var/fcgi-$1.sock
	case $kind in
	floor|floor-2)
		"$ALLOW" -s "$sock" -w "$WORKERS" 2>>"$T/allow-$kind.log" &
		BACKEND_PIDS[$kind]=$!; PIDS+=("$!")
		wait_for 10 test -S "$sock" || { echo "bench: allow_fcgi for $kind did not start"; return 1; }
		chmod 0666 "$sock"	# lighttpd, as www-data, connects
		start_lighttpd "$kind" "$sock" || return 1;;
	rlgate-*|cluster-*)
		rlgate_ini "$kind" > "$T/rlgate-$kind.ini"
		"$RLGATE" -t -c "$T/rlgate-$kind.ini" > "$T/rlgate-$kind.t" 2>&1 ||
			{ echo "bench: rlgate -t refuses $kind's configuration:"; cat "$T/rlgate-$kind.t"; return 1; }
		spawn_rlgate "unix:$sock" "$T/rlgate-$kind.ini" "$PROCS" "rlgate-$kind" || return 1
		BACKEND_PIDS[$kind]="${SPAWNED_PIDS[*]}"
		start_lighttpd "$kind" "$sock" || return 1;;
	nginx-*) start_nginx "$kind" || return 1;;
	fastify|express) start_node "$kind";;
	esac
	wait_for 15 port_open "${PORT[$kind]}" || { echo "bench: $kind did not start"; return 1; }
	ANSWERED[$kind]=0
}

# --- one wrk run ---------------------------------------------------------
# wrk's Lua hooks: the exact count of responses and of non-2xx ones.
cat > "$T/count.lua" <<'EOF'
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) non2xx = 0 end
function response(status, headers, body)
	if status < 200 or status > 299 then non2xx = non2xx + 1 end
end
function done(summary, latency, requests)
	local bad = 0
	for _, t in ipairs(threads) do bad = bad + (t:get("non2xx") or 0) end
	local e = summary.errors
	io.write(string.format("BENCH responses=%d non2xx=%d errors=%d "
	    .. "p50_us=%d p99_us=%d duration_us=%d\n", summary.requests, bad,
	    e.connect + e.read + e.write + e.timeout, latency:percentile(50),
	    latency:percentile(99), summary.duration))
end
EOF

# procs_of KIND: its server (and the server's children: nginx's workers)
# and its backend processes.
procs_of() {
	local p=${SERVER_PIDS[$1]}
	echo "$p $(ps -o pid= --ppid "$p" | tr -d ' ' | paste -sd' ') ${BACKEND_PIDS[$1]:-}"
}
redis_procs() { case $1 in cluster-*) echo "${CLUSTER_PIDS[*]}";; *-wait) echo $WAIT_PIDS;; *-tls) echo "$TLS_REDIS_PID";; *) echo "$REDIS_PID";; esac; }

# run_wrk KIND CONNS SECONDS: sets W_* from wrk's summary, CPU_US,
# REDIS_US and OWN_US (CPU per response of the kind's processes, of Redis,
# and of its backend alone: rlgate's own, without the web server's).
run_wrk() {
	local kind=$1 c=$2 d=$3 out p v c0 r0 b0 procs rprocs n
	procs=$(procs_of "$kind"); rprocs=$(redis_procs "$kind")
	c0=$(cpu_ns $procs); r0=$(cpu_ns $rprocs); b0=$(cpu_ns ${BACKEND_PIDS[$kind]:-})
	out=$(wrk -t1 -c"$c" -d"${d}s" --timeout 5s -s "$T/count.lua" \
	    "http://127.0.0.1:${PORT[$kind]}$URL_PATH" 2>&1 | grep '^BENCH ')
	[ -n "$out" ] || { echo "bench: wrk gave no summary for $kind" >&2; return 1; }
	for p in ${out#BENCH }; do
		v=${p#*=}
		case $p in
		responses=*) W_N=$v;; non2xx=*) W_NON2XX=$v;; errors=*) W_ERR=$v;;
		p50_us=*) W_P50=$v;; p99_us=*) W_P99=$v;; duration_us=*) W_DUR=$v;;
		esac
	done
	W_RPS=$(awk -v n="$W_N" -v d="$W_DUR" 'BEGIN { printf "%.0f", n * 1e6 / d }')
	n=$((W_N > 0 ? W_N : 1))
	CPU_US=$(per_req "$(( $(cpu_ns $procs) - c0 ))" "$n")
	REDIS_US=$(per_req "$(( $(cpu_ns $rprocs) - r0 ))" "$n")
	OWN_US=$(per_req "$(( $(cpu_ns ${BACKEND_PIDS[$kind]:-}) - b0 ))" "$n")
	ANSWERED[$kind]=$(( ${ANSWERED[$kind]} + W_N - W_NON2XX ))
}

RUNS=$T/runs	# kind round mode conns rps p50_us p99_us responses non2xx errors cpu_us redis_us
: > "$RUNS"
OWN=$T/own	# kind mode own_us (the backend's CPU per response)
: > "$OWN"
ms() { awk -v u="$1" 'BEGIN { if (u == "" || u == "null") print "null"; else printf "%.2f", u / 1000 }'; }

# measure KIND ROUND MODE CONNS: one run, recorded.
measure() {
	local kind=$1 round=$2 mode=$3 c=$4
	run_wrk "$kind" "$c" "$SECS" || return 1
	echo "$kind $round $mode $c $W_RPS $W_P50 $W_P99 $W_N $W_NON2XX $W_ERR $CPU_US $REDIS_US" >> "$RUNS"
	echo "$kind $mode $OWN_US" >> "$OWN"
	printf '  %-17s c=%-3s %7s req/s  p50 %6s ms  p99 %6s ms%s\n' "$kind" "$c" "$W_RPS" \
	    "$(ms "$W_P50")" "$(ms "$W_P99")" \
	    "$([ $((W_NON2XX + W_ERR)) -gt 0 ] && echo "  ($W_NON2XX non-2xx, $W_ERR errors)")"
}

# stop_all: every web server, then every backend (SIGTERM: rlgate flushes
# its audit queue); every admitted response must then have its rows.
AUDIT=$T/audit	# kind answered requests rows rules bytes
: > "$AUDIT"
LOST=0
gone() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
stop_all() {
	local kind p rows req rules bytes
	for kind in $KINDS; do kill -TERM "${SERVER_PIDS[$kind]}" 2>/dev/null; done
	for kind in $KINDS; do wait "${SERVER_PIDS[$kind]}" 2>/dev/null; done
	for kind in $KINDS; do
		[ -n "${BACKEND_PIDS[$kind]:-}" ] || continue
		for p in ${BACKEND_PIDS[$kind]}; do kill -TERM "$p" 2>/dev/null; done
		wait_for 30 gone ${BACKEND_PIDS[$kind]} || echo "  $kind: still running 30 s after SIGTERM"
		audited "$kind" || continue
		rules=$(rules_of "$kind")
		AUDIT_DB=$T/var/audit-$kind.db
		read -r rows req <<<"$(sql "SELECT count(*), count(DISTINCT request_id) FROM decisions" | tr '|' ' ')"
		# The bytes the audit takes, all in: the file after a
		# checkpoint has emptied its WAL into it.
		sql "PRAGMA wal_checkpoint(TRUNCATE)" > /dev/null
		bytes=$(( $(stat -c %s "$AUDIT_DB") + $(stat -c %s "$AUDIT_DB-wal" 2>/dev/null || echo 0) ))
		echo "$kind ${ANSWERED[$kind]} ${req:-0} ${rows:-0} $rules $bytes" >> "$AUDIT"
		if [ "${req:-0}" -lt "${ANSWERED[$kind]}" ] || [ "${rows:-0}" -ne $(( ${req:-0} * rules )) ]; then
			LOST=$((LOST + ${ANSWERED[$kind]} - ${req:-0}))
			echo "  $kind: ROWS LOST: ${ANSWERED[$kind]} responses, ${req:-0} requests in ${rows:-0} rows"
		fi
	done
}

# --- the runs ------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
set -- $KINDS
NK=$#
echo "# rlgate bench: wrk -t1 -c$CONNS$([ "$ONE" = 1 ] && echo " and -c1"), ${SECS} s per run, $ROUNDS rounds; $NK kinds: $KINDS; load average $load_before"
for kind in $KINDS; do
	start_kind "$kind" || exit 1
	run_wrk "$kind" 10 2 || exit 1	# warm-up (Node's JIT, Redis keys, caches)
done
for round in $(seq "$ROUNDS"); do
	# Round r starts (r-1)/ROUNDS of the way down the list.
	shift_by=$(( (round - 1) * NK / ROUNDS ))
	order=$(echo $KINDS | tr ' ' '\n' | awk -v s="$shift_by" -v n="$NK" '{ k[NR - 1] = $0 } END { for (i = 0; i < n; i++) print k[(i + s) % n] }' | paste -sd' ')
	echo "# round $round: $order"
	for kind in $order; do measure "$kind" "$round" sat "$CONNS" || exit 1; done
	if [ "$ONE" = 1 ]; then
		for kind in $order; do measure "$kind" "$round" one 1 || exit 1; done
	fi
done
stop_all
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- medians, ratios, latency added -------------------------------------
# SUMMARY: kind mode rps p50 p99 cpu redis runs x_floor p50_added p99_added
# x_fastify x_single: medians over the rounds; a ratio or a difference is
# taken round by round against the other kind's run of the same round and
# mode, then the median of those.
SUMMARY=$T/summary
awk -v single_of="cluster-1=rlgate-1 cluster-3=rlgate-3 rlgate-1-wait=rlgate-1 rlgate-1-tls=rlgate-1" '
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	if (n == 0) return "null"
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
BEGIN { n = split(single_of, s, " "); for (i = 1; i <= n; i++) { split(s[i], kv, "="); single[kv[1]] = kv[2] } }
{ k = $1 " " $3; if (!(k in rps)) order[++m] = k
  rps[k] = rps[k] " " $5; p50[k] = p50[k] " " $6; p99[k] = p99[k] " " $7
  cpu[k] = cpu[k] " " $11; rcpu[k] = rcpu[k] " " $12
  runs[k] = runs[k] (runs[k] == "" ? "" : ";") $5
  R[$1, $3, $2] = $5; P50[$1, $3, $2] = $6; P99[$1, $3, $2] = $7; rounds[$2] = 1 }
# vs(BASE, KIND, MODE, WHAT): median over the rounds of KIND/BASE (rps) or KIND-BASE (p50, p99)
function vs(base, kind, mode, what,   r, s) {
	s = ""
	for (r in rounds) if (((kind, mode, r) in R) && ((base, mode, r) in R) && R[base, mode, r] > 0) {
		if (what == "rps") s = s " " R[kind, mode, r] / R[base, mode, r]
		else if (what == "p50") s = s " " P50[kind, mode, r] - P50[base, mode, r]
		else s = s " " P99[kind, mode, r] - P99[base, mode, r]
	}
	return median(s)
}
END { for (i = 1; i <= m; i++) { split(order[i], f, " ")
	printf "%s %s %.0f %.0f %.0f %.1f %.1f %s %s %s %s %s %s\n", f[1], f[2], median(rps[order[i]]),
	    median(p50[order[i]]), median(p99[order[i]]), median(cpu[order[i]]), median(rcpu[order[i]]),
	    runs[order[i]], vs("floor", f[1], f[2], "rps"), vs("floor", f[1], f[2], "p50"),
	    vs("floor", f[1], f[2], "p99"), vs("fastify", f[1], f[2], "rps"),
	    (f[1] in single) ? vs(single[f[1]], f[1], f[2], "rps") : "null" } }
' "$RUNS" > "$SUMMARY"

# get KIND MODE FIELD: 3 rps 4 p50 5 p99 6 cpu 7 redis-cpu 8 runs 9 x floor
# 10 p50 added 11 p99 added 12 x fastify 13 x single-server
get() { awk -v k="$1" -v m="$2" -v f="$3" '$1 == k && $2 == m { print $f }' "$SUMMARY"; }
ratio() { local v; v=$(get "$1" "$2" "$3"); [ -z "$v" ] || [ "$v" = null ] && echo null || awk -v v="$v" 'BEGIN { printf "%.2f", v }'; }
added() { local v; v=$(get "$1" "$2" "$3"); [ -z "$v" ] || [ "$v" = null ] && echo null || awk -v u="$v" 'BEGIN { printf "%+.2f", u / 1000 }'; }
dash() { [ "$1" = null ] && echo - || echo "$1"; }

echo
echo "# medians of $ROUNDS round(s); x floor and added: medians of the round-by-round values against the floor's run"
printf '%-17s %-33s %8s %7s %7s %7s | %-s\n' kind "" "req/s" "x floor" "p50 ms" "p99 ms" \
    "one connection: p50 ms, p99 ms, added over the floor p50, p99"
CSV_ROWS=
for kind in $KINDS; do
	r=$(get "$kind" sat 3); [ -n "$r" ] || continue
	one=; o50=null; o99=null; a50=null; a99=null
	if [ -n "$(get "$kind" one 3)" ]; then
		o50=$(ms "$(get "$kind" one 4)"); o99=$(ms "$(get "$kind" one 5)")
		a50=$(added "$kind" one 10); a99=$(added "$kind" one 11)
		one="$(printf '%6s %6s   %6s %6s' "$o50" "$o99" "$(dash "$a50")" "$(dash "$a99")")"
	fi
	printf '%-17s %-33s %8s %7s %7s %7s | %s\n' "$kind" "$(label "$kind")" "$r" \
	    "$(dash "$(ratio "$kind" sat 9)")" "$(ms "$(get "$kind" sat 4)")" "$(ms "$(get "$kind" sat 5)")" "$one"
	CSV_ROWS="$CSV_ROWS$kind,\"$(label "$kind")\",$r,$(ratio "$kind" sat 9),$(ms "$(get "$kind" sat 4)"),$(ms "$(get "$kind" sat 5)"),$(get "$kind" one 3),$o50,$o99,$a50,$a99,$(get "$kind" sat 6),$(get "$kind" sat 7),$(get "$kind" sat 8)
"
done
for k in "${SKIPPED[@]}"; do
	printf '%-17s %-33s skipped: %s\n' "${k%%|*}" "$(label "${k%%|*}")" "${k#*|}"
done

# --- Redis CPU per request (issue 27) ------------------------------------
# What the Redis core behind a hot key spends per decision: every gateway
# of every host shares it, so this, not the gateway's req/s, says how far
# one limit scales. Medians over the saturated runs; the ratio is against
# fastify's from the same run (one rule, one Redis script per request).
# redis_x KIND: KIND's Redis CPU per request / fastify's, or null.
redis_x() { awk -v k="$(get "$1" sat 7)" -v f="$(get fastify sat 7)" 'BEGIN {
	if (k == "" || f == "" || f + 0 <= 0 || k + 0 <= 0) print "null"; else printf "%.2f", k / f }'; }
echo
echo "# Redis CPU per request (us), saturated runs, x fastify's, and the"
echo "# ceiling it sets where one Redis core holds the limit: 1 s / that CPU"
echo "# (a cluster's or a replicated kind's CPU is all its nodes': a bound)"
for kind in $KINDS; do
	awk -v k="$kind" -v v="$(get "$kind" sat 7)" -v x="$(dash "$(redis_x "$kind")")" 'BEGIN {
	    if (v + 0 > 0) printf "  %-17s %6s us  %6s x fastify  %7.0f req/s a Redis core\n", k, v, x, 1e6 / v }'
done

# --- targets (issue 21 item 4) -------------------------------------------
TARGETS=
target() {	# NAME VALUE OP LIMIT
	local ok
	ok=$(awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN {
	    if (v == "null" || v == "") print "n/a (not run)"
	    else if (op == ">=") print (v + 0 >= l ? "met" : "NOT met")
	    else if (op == "<=") print (v + 0 <= l ? "met" : "NOT met")
	    else print (v + 0 == l ? "met" : "NOT met") }')
	printf '  %-50s %8s %-2s %-5s %s\n' "$1" "$2" "$3" "$4" "$ok"
	TARGETS="$TARGETS${TARGETS:+,}
    {\"target\": \"$1\", \"value\": $2, \"op\": \"$3\", \"limit\": $4, \"met\": $([ "$ok" = met ] && echo true || echo false)}"
}
echo
echo "# targets (issue 21), medians of the round-by-round ratios"
target "rlgate 1 rule req/s x the floor" "$(ratio rlgate-1 sat 9)" ">=" 0.95
target "rlgate 3 rules req/s x the floor" "$(ratio rlgate-3 sat 9)" ">=" 0.85
target "rlgate 1 rule req/s x fastify" "$(ratio rlgate-1 sat 12)" ">=" 1.10
echo "# targets (issue 27): Redis CPU per request x fastify's (1 rule)"
target "rlgate 1 rule Redis CPU x fastify" "$(redis_x rlgate-1)" "<=" 0.5
target "rlgate 3 rules Redis CPU x fastify" "$(redis_x rlgate-3)" "<=" 0.8
if [ -s "$AUDIT" ]; then
	target "audit rows lost (answers without their rows)" "$LOST" "=" 0
	echo "# issue 37: rlgate's own CPU per request (us, its processes only, medians of the saturated runs):" \
	    "$(for k in rlgate-1 rlgate-3; do awk -v k="$k" '$1 == k && $2 == "sat" { s = s " " $3 }
		END { n = split(s, a, " "); if (!n) exit; for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		printf "%s %s ", k, (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }' "$OWN"; done)"
	echo "# targets (issue 37): the audit's bytes per decision, file and WAL after a checkpoint"
	for k in rlgate-1 rlgate-3; do
		grep -q "^$k " "$AUDIT" && target "$k audit bytes per decision" \
			"$(awk -v k="$k" '$1 == k && $4 > 0 { printf "%.1f", $6 / $4 }' "$AUDIT")" "<=" 48
	done
else
	target "audit rows lost (answers without their rows)" null "=" 0
fi
if has_kind cluster-1 || has_kind cluster-3; then
	echo "# aim (issue 20): rlgate on the cluster >= 0.9 x on one Redis server"
	target "cluster 1 rule req/s x rlgate 1 rule" "$(ratio cluster-1 sat 13)" ">=" 0.90
	target "cluster 3 rules req/s x rlgate 3 rules" "$(ratio cluster-3 sat 13)" ">=" 0.90
fi
has_kind rlgate-1-wait && echo "# replicas = 1 (issue 32), no target: req/s x rlgate-1 $(dash "$(ratio rlgate-1-wait sat 13)"), its Redis CPU per request (master + replica) $(get rlgate-1-wait sat 7) us against rlgate-1's $(get rlgate-1 sat 7) us"
has_kind rlgate-1-tls && echo "# tls = yes (issue 28), no target: req/s x rlgate-1 $(dash "$(ratio rlgate-1-tls sat 13)"), its Redis CPU per request $(get rlgate-1-tls sat 7) us against rlgate-1's $(get rlgate-1 sat 7) us"
awk '{ printf "  audit, %s: %d responses admitted, %d requests recorded in %d rows (%d rules; %d more were decided when wrk stopped), %d bytes, %.1f a decision\n", $1, $2, $3, $4, $5, $3 - $2, $6, ($4 > 0 ? $6 / $4 : 0) }' "$AUDIT"

# --- CSV and JSON --------------------------------------------------------
mkdir -p "$RESULTS"
PREV=$T/prev.csv
cp "$RESULTS/latest.csv" "$PREV" 2>/dev/null || : > "$PREV"
{
	echo "kind,label,rps,x_floor,p50_ms,p99_ms,one_rps,one_p50_ms,one_p99_ms,one_p50_added_ms,one_p99_added_ms,cpu_us_per_req,redis_cpu_us_per_req,rps_runs"
	printf '%s' "$CSV_ROWS"
} > "$RESULTS/latest.csv"
{
	echo "kind,round,mode,conns,rps,p50_us,p99_us,responses,non2xx,errors,cpu_us_per_req,redis_cpu_us_per_req"
	tr ' ' ',' < "$RUNS"
} > "$RESULTS/latest-runs.csv"
{
	commit=$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=false; [ -n "$(git -C "$TOP" status --porcelain -- fcgi lua 2>/dev/null)" ] && dirty=true
	printf '{\n  "bench": "rlgate make bench",\n  "date": "%s",\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf '  "rlgate": {"version": "%s", "commit": "%s", "fcgi_or_lua_modified": %s},\n' \
	    "$("$RLGATE" -V 2>/dev/null | awk '{print $2}')" "$commit" "$dirty"
	printf '  "machine": {"cpus": %s, "cpu": "%s", "kernel": "%s", "load_before": "%s", "load_after": "%s",\n' \
	    "$(nproc)" "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)" "$(uname -r)" "$load_before" "$load_after"
	printf '    "versions": {"lighttpd": "%s", "nginx": "%s", "redis": "%s", "node": "%s"}},\n' \
	    "$(lighttpd -v 2>&1 | sed -n 's|^lighttpd/\([^ ]*\).*|\1|p')" "$(nginx -v 2>&1 | sed 's|.*nginx/||')" \
	    "$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')" "$(node --version 2>/dev/null || echo none)"
	printf '  "params": {"seconds": %s, "conns": %s, "one_connection": %s, "rounds": %s, "wrk_threads": 1, "allow_fcgi_threads": %s, "rlgate_processes": %s, "nginx_workers": "%s", "file_bytes": %s, "elapsed_s": %s},\n' \
	    "$SECS" "$CONNS" "$([ "$ONE" = 1 ] && echo true || echo false)" "$ROUNDS" "$WORKERS" "$PROCS" "$NGINX_WORKERS" \
	    "$(wc -c < "$DOCROOT/bench/item")" "$(( $(date +%s) - t_start ))"
	echo '  "results": ['
	awk -v labels="$(for k in $KINDS; do printf '%s=%s;' "$k" "$(label "$k")"; done)" '
	BEGIN { n = split(labels, l, ";"); for (i = 1; i <= n; i++) { j = index(l[i], "="); lab[substr(l[i], 1, j - 1)] = substr(l[i], j + 1) } }
	function num(v, scale) { return v == "null" ? "null" : sprintf("%.3f", v / scale) }
	{ r = $8; gsub(/;/, ",", r)
	  printf "%s    {\"kind\": \"%s\", \"label\": \"%s\", \"mode\": \"%s\", \"rps\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"cpu_us_per_req\": %.1f, \"redis_cpu_us_per_req\": %.1f, \"rps_runs\": [%s], \"x_floor\": %s, \"p50_added_ms\": %s, \"p99_added_ms\": %s, \"x_fastify\": %s, \"x_single_server\": %s}",
	    (NR > 1 ? ",\n" : ""), $1, lab[$1], $2, $3, $4 / 1000, $5 / 1000, $6, $7, r,
	    num($9, 1), num($10, 1000), num($11, 1000), num($12, 1), num($13, 1) }
	END { print "" }' "$SUMMARY"
	printf '  ],\n  "audit": ['
	awk '{ printf "%s\n    {\"kind\": \"%s\", \"responses\": %d, \"requests_recorded\": %d, \"rows\": %d, \"rules\": %d, \"lost\": %d, \"bytes\": %d, \"bytes_per_decision\": %.1f}", (NR > 1 ? "," : ""), $1, $2, $3, $4, $5, ($2 > $3 ? $2 - $3 : 0), $6, ($4 > 0 ? $6 / $4 : 0) }' "$AUDIT"
	printf '\n  ],\n  "skipped": ['
	for i in "${!SKIPPED[@]}"; do
		k=${SKIPPED[$i]}
		printf '%s\n    {"kind": "%s", "why": "%s"}' "$([ "$i" -gt 0 ] && echo ,)" "${k%%|*}" \
		    "$(printf '%s' "${k#*|}" | sed 's/[\\"]/\\&/g' | tr -d '\000-\037')"
	done
	printf '\n  ],\n  "targets": [%s\n  ]\n}\n' "$TARGETS"
} > "$RESULTS/latest.json.tmp" && mv "$RESULTS/latest.json.tmp" "$RESULTS/latest.json"
echo
echo "# written $RESULTS/latest.csv (the table), latest-runs.csv (every run), latest.json"

# The change against the previous latest.csv, kind by kind.
if [ -s "$PREV" ]; then
	echo "# req/s against the previous latest.csv:"
	tail -n +2 "$PREV" | sed 's/"[^"]*"//' | awk -F, '{ print $1, $3 }' | while read -r kind old; do
		new=$(get "$kind" sat 3)
		[ -n "$new" ] && [ "${old:-0}" -gt 0 ] 2>/dev/null && printf '  %-17s %7s -> %7s (%s)\n' "$kind" "$old" "$new" \
		    "$(awk -v a="$old" -v b="$new" 'BEGIN { printf "%+.0f%%", (b - a) * 100 / a }')"
	done
fi
[ "$LOST" = 0 ]
