#!/bin/bash
# make bench: what rlgate costs, measured against the cost floor of a
# FastCGI hop. A benchmark, never a pass/fail test (it exits 0 unless a
# server fails to start or audit rows are lost).
#
# The same lighttpd (conf/lighttpd.conf as shipped, only its var. lines
# changed), the same small static file and wrk for a fixed time at several
# concurrency levels, against:
#   a   lighttpd serving the file alone (the shipped conf without its
#       fastcgi.server block)
#   b   lighttpd + tests/tools/allow_fcgi, a trivial always-allow FastCGI
#       authorizer on libfcgi with BENCH_WORKERS threads, as t1 t3 (the floor)
#   b2  the floor again, its own lighttpd and authorizer: what it "adds" over
#       b is what this machine's noise alone makes of a difference (A/A)
#   r   the same with one Redis PING per request on each thread's own
#       connection (allow_fcgi -r): the floor of any gateway that waits for
#       Redis on every request, as the design's does
#   s   the same round trip running lua/fixed_window.lua instead of PING
#       (allow_fcgi -r -e): the floor with c1's one script, from a thread
#       per request; what t1 adds over s is rlgate's own code and its
#       audit, what c1 gains over s the events engine's batches
#   c1  lighttpd + rlgate (engine = events, its default), audit off, one
#       rule matching every request
#   d1  the same, audit on
#   c3  rlgate, audit off, three rules (three algorithms) on every request
#   d3  the same, audit on
#   t1  d1 with engine = threads (BENCH_WORKERS threads, as the floor)
#   t3  d3 with engine = threads
# All of them are up at once; the runs alternate between them (every
# concurrency level, configuration after configuration, BENCH_ROUNDS
# times, every other round in reverse order), and each ratio to the floor
# is taken against the floor's run next to it, so that a machine whose
# load drifts (other people's tests) shifts all of them alike. A paced run
# (50 connections, each pausing BENCH_THINK_MS between a response and its
# next request) measures latency below saturation, and a run at one
# connection the latency of a request that finds nothing queued before it
# (what a gateway adds to one request, not to a queue). Then the audit writer
# alone (tests/tools/audit_bench): rows per second into SQLite, and the
# latency of a push when the queue is full.
#
# Prints a table and writes reports/bench-latest.json (BENCH_JSON=path to
# write elsewhere); when a previous file is there, the change is printed.
#
# Knobs (environment): BENCH_DURATION seconds per wrk run (2),
# BENCH_CONNS (10 50 100), BENCH_ROUNDS (4), BENCH_WORKERS (16: threads
# of b r s t1 t3), BENCH_LOOPS (rlgate's event loops; empty: its default),
# BENCH_FLUSH (rlgate's [audit] flush_interval, 50ms), BENCH_BATCH
# (rlgate's [audit] batch; empty: its default), BENCH_DBDIR (where the
# audit databases go: e.g. /dev/shm; default the run's temporary directory),
# BENCH_THINK_MS (10: think time of the paced latency run, 0 skips it),
# BENCH_ONE (1: the run at one connection; 0 skips it),
# BENCH_AUDIT_ROWS (400000), BENCH_ONLY (e.g. "b d1": those configurations),
# BENCH_REDIS_UNIX (1: rlgate reaches Redis on its unix socket, not TCP;
# r and s stay on TCP),
# BENCH_FCGI_UNIX (1: every lighttpd reaches its backend, the floor's or
# rlgate, on a unix socket, conf/lighttpd-spawn.conf's way, not TCP),
# RLGATE_BIN (another rlgate binary, to compare builds).
# make runs it with sh: it is a bash script.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/lib.sh"

DUR=${BENCH_DURATION:-2}
CONNS=${BENCH_CONNS:-10 50 100}
ROUNDS=${BENCH_ROUNDS:-4}
WORKERS=${BENCH_WORKERS:-16}
LOOPS=${BENCH_LOOPS:-}
FLUSH=${BENCH_FLUSH:-50ms}
BATCH=${BENCH_BATCH:-}
DBDIR=${BENCH_DBDIR:-$T}
THINK=${BENCH_THINK_MS:-10}
ONE=${BENCH_ONE:-1}
AUDIT_ROWS=${BENCH_AUDIT_ROWS:-400000}
CONFIGS=${BENCH_ONLY:-a b b2 r s c1 d1 c3 d3 t1 t3}
JSON=${BENCH_JSON:-$TOP/reports/bench-latest.json}
RLGATE=${RLGATE_BIN:-$RLGATE}
ALLOW=$TOP/tests/tools/allow_fcgi
AUDIT_BENCH=$TOP/tests/tools/audit_bench
URL_PATH=/bench/item

for f in "$RLGATE" "$ALLOW" "$AUDIT_BENCH" "$FREEPORT"; do
	[ -x "$f" ] || { echo "bench: $f is missing: run make bench" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "bench: wrk is missing (make deps)" >&2; exit 1; }

DOCROOT=$T/www
mkdir -p "$DOCROOT/bench"
cp "$TOP/tests/www/user/list" "$DOCROOT/bench/item"	# 47 bytes of JSON
REDIS_SOCKET=$T/redis.sock	# BENCH_REDIS_UNIX: rlgate's way to Redis
start_redis >/dev/null || exit 1

label() {
	case $1 in
	a)  echo "lighttpd alone";;
	b)  echo "lighttpd + allow_fcgi (floor)";;
	b2) echo "the floor again (A/A)";;
	r)  echo "allow_fcgi + Redis PING";;
	s)  echo "allow_fcgi + fixed_window.lua";;
	c1) echo "rlgate, audit off, 1 rule";;
	d1) echo "rlgate, audit on, 1 rule";;
	c3) echo "rlgate, audit off, 3 rules";;
	d3) echo "rlgate, audit on, 3 rules";;
	t1) echo "rlgate threads, audit on, 1 rule";;
	t3) echo "rlgate threads, audit on, 3 rules";;
	esac
}

# floor CONFIG: is it served by allow_fcgi (b b2 r s)?
floor() { case $1 in b|b2|r|s) return 0;; esac; return 1; }
# conns_of KIND: the connections the p99 added is read at (sat, paced: 50;
# one: 1); conns_words KIND: the same in the targets' words.
conns_of() { [ "$1" = one ] && echo 1 || echo 50; }
conns_words() {
	case $1 in
	sat) echo "50 connections";; paced) echo "50 paced connections";;
	one) echo "one connection";;
	esac
}
# audited CONFIG: does it write an audit database (d1 d3 t1 t3)?
audited() { case $1 in d*|t*) return 0;; esac; return 1; }

# rlgate_ini CONFIG: the gateway's configuration for c1 d1 c3 d3 t1 t3.
# Limits no run can reach: every request is decided by Redis and admitted.
rlgate_ini() {
	local cfg=$1
	cat <<EOF
[gateway]
$(case $cfg in t*) printf 'engine = threads\nworkers = %s' "$WORKERS";;
    *) [ -n "$LOOPS" ] && printf 'workers = %s' "$LOOPS";; esac)

[redis]
address = $([ -n "${BENCH_REDIS_UNIX:-}" ] && echo "unix:$REDIS_SOCKET" || echo "127.0.0.1:$REDIS_PORT")

[audit]
database = $(audited "$cfg" && echo "$DBDIR/audit-$cfg.db")
flush_interval = $FLUSH
$([ -n "$BATCH" ] && echo "batch = $BATCH")

[rule:bench_ip]
path = /bench/*
key = {ip}
algorithm = fixed_window
limit = 1000000
window = 1s
EOF
	[ "${cfg%3}" = "$cfg" ] && return
	cat <<EOF

[rule:bench_path]
path = /bench/*
key = {path}
algorithm = token_bucket
limit = 1000000
window = 1s

[rule:bench_method]
path = /bench/*
key = {method}
algorithm = gcra
limit = 1000000
window = 1s
EOF
}

# wrk's own Lua hooks: the exact count of responses and of non-2xx ones,
# and (with think time) a pause between a response and the next request.
cat > "$T/count.lua" <<'EOF'
local think = tonumber(os.getenv("BENCH_THINK") or "0")
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) non2xx = 0 end
function response(status, headers, body)
	if status < 200 or status > 299 then non2xx = non2xx + 1 end
end
if think > 0 then function delay() return think end end
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

# cpu_ns PID: CPU time of all threads of PID so far, in ns.
cpu_ns() {
	local s=0 a f
	for f in /proc/"$1"/task/*/schedstat; do
		read -r a _ < "$f" 2>/dev/null && s=$((s + a))
	done
	echo "$s"
}

# Every configuration runs at the same time, each with its own lighttpd
# (and backend), so that runs can alternate every few seconds: a machine
# whose load changes then changes every configuration alike.
declare -A HTTPD BACKEND PORT ANSWERED

# start CONFIG: its backend (none for "a"), then its lighttpd: the shipped
# conf/lighttpd.conf with only its var. lines changed ("a" without the
# fastcgi.server block).
start() {
	local cfg=$1 bport=9 baddr sock=
	if [ "$cfg" != a ]; then
		bport=$(free_port)
		[ -n "${BENCH_FCGI_UNIX:-}" ] && sock=$T/fcgi-$cfg.sock
		baddr=${sock:-127.0.0.1:$bport}
		if floor "$cfg"; then
			"$ALLOW" -s "$baddr" -w "$WORKERS" \
			    $(case $cfg in r|s) echo "-r 127.0.0.1:$REDIS_PORT";; esac) \
			    $([ "$cfg" = s ] && echo "-e $TOP/lua/fixed_window.lua") \
			    2>>"$T/allow-$cfg.log" &
		else
			rlgate_ini "$cfg" > "$T/rlgate-$cfg.ini"
			"$RLGATE" -c "$T/rlgate-$cfg.ini" \
			    -s "${sock:+unix:}$baddr" 2>>"$T/rlgate-$cfg.log" &
		fi
		BACKEND[$cfg]=$!
		PIDS+=("$!")
		if [ -n "$sock" ]; then
			wait_for 10 test -S "$sock"
		else
			wait_for 10 port_open "$bport"
		fi || { echo "bench: $cfg did not start"; return 1; }
	fi
	PORT[$cfg]=$(free_port)
	sed -e "s|^var.http_port .*|var.http_port   = ${PORT[$cfg]}|" \
	    -e "s|^var.docroot .*|var.docroot     = \"$DOCROOT\"|" \
	    -e "s|^var.rlgate_port .*|var.rlgate_port = $bport|" \
	    "$TOP/conf/lighttpd.conf" > "$T/lighttpd-$cfg.conf"
	[ -n "$sock" ] && sed -i -e "s|^\( *\)\"host\" *=> var.rlgate_host,|\1\"socket\" => \"$sock\",|" \
	    -e '/^ *"port" *=> var.rlgate_port,/d' "$T/lighttpd-$cfg.conf"
	[ "$cfg" = a ] && sed -i '/^fastcgi.server/,/^)))/d' "$T/lighttpd-$cfg.conf"
	lighttpd -tt -f "$T/lighttpd-$cfg.conf" || return 1
	lighttpd -D -f "$T/lighttpd-$cfg.conf" 2>>"$T/lighttpd-$cfg.log" &
	HTTPD[$cfg]=$!
	PIDS+=("$!")
	wait_for 10 port_open "${PORT[$cfg]}" || { echo "bench: lighttpd for $cfg did not start"; return 1; }
	ANSWERED[$cfg]=0
}

stop_pid() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# run_wrk CONFIG CONNS DURATION THINK_MS: one wrk run; sets W_* from its
# summary, and CPU_* (us per response) for lighttpd, the backend and
# redis-server; counts the admitted responses for the audit check.
run_wrk() {
	local cfg=$1 c=$2 d=$3 think=$4 out p v h0 b0=0 r0 bpid=${BACKEND[$1]:-}
	h0=$(cpu_ns "${HTTPD[$cfg]}"); r0=$(cpu_ns "$REDIS_PID")
	[ -n "$bpid" ] && b0=$(cpu_ns "$bpid")
	out=$(BENCH_THINK=$think wrk -t$((c < 2 ? 1 : 2)) -c"$c" -d"${d}s" --timeout 5s \
	    -s "$T/count.lua" "http://127.0.0.1:${PORT[$cfg]}$URL_PATH" 2>&1 |
	    grep '^BENCH ')
	[ -n "$out" ] || { echo "bench: wrk gave no summary" >&2; return 1; }
	for p in ${out#BENCH }; do
		v=${p#*=}
		case $p in
		responses=*) W_N=$v;; non2xx=*) W_NON2XX=$v;; errors=*) W_ERR=$v;;
		p50_us=*) W_P50=$v;; p99_us=*) W_P99=$v;; duration_us=*) W_DUR=$v;;
		esac
	done
	W_RPS=$(awk -v n="$W_N" -v d="$W_DUR" 'BEGIN { printf "%.0f", n * 1e6 / d }')
	n=$((W_N > 0 ? W_N : 1))
	CPU_HTTPD=$(( ($(cpu_ns "${HTTPD[$cfg]}") - h0) / n / 1000 ))
	CPU_REDIS=$(( ($(cpu_ns "$REDIS_PID") - r0) / n / 1000 ))
	CPU_BACKEND=0
	if [ -n "$bpid" ]; then
		CPU_BACKEND=$(( ($(cpu_ns "$bpid") - b0) / n / 1000 ))
	fi
	ANSWERED[$cfg]=$(( ${ANSWERED[$cfg]} + W_N - W_NON2XX ))
}

RESULTS=$T/results	# cfg round kind conns rps p50 p99 n non2xx errors cpu_h cpu_b cpu_r
ROWS=$T/rows		# cfg responses rows requests rules exit
: > "$RESULTS"; : > "$ROWS"
LOST_TOTAL=0

# measure CONFIG ROUND KIND CONNS: one run, recorded.
measure() {
	local cfg=$1 round=$2 kind=$3 c=$4 think=0
	[ "$kind" = paced ] && think=$THINK
	run_wrk "$cfg" "$c" "$DUR" "$think" || return 1
	echo "$cfg $round $kind $c $W_RPS $W_P50 $W_P99 $W_N $W_NON2XX $W_ERR $CPU_HTTPD $CPU_BACKEND $CPU_REDIS" >> "$RESULTS"
	printf '  %-3s %-30s %-6s c=%-3s %7s req/s  p50 %6.2f ms  p99 %6.2f ms%s\n' \
	    "$cfg" "$(label "$cfg")" "$kind" "$c" "$W_RPS" "$(awk -v u="$W_P50" 'BEGIN{print u/1000}')" \
	    "$(awk -v u="$W_P99" 'BEGIN{print u/1000}')" \
	    "$([ $((W_NON2XX + W_ERR)) -gt 0 ] && echo "  ($W_NON2XX non-2xx, $W_ERR errors)")"
}

# stop_all: every lighttpd, then every backend; SIGTERM makes rlgate flush
# its audit queue, after which every admitted response must have its rows
# (one per rule).
stop_all() {
	local cfg rows req st rules
	for cfg in $CONFIGS; do stop_pid "${HTTPD[$cfg]}"; done
	for cfg in $CONFIGS; do
		[ -n "${BACKEND[$cfg]:-}" ] || continue
		stop_pid "${BACKEND[$cfg]}"; st=$?
		audited "$cfg" || continue
		rules=${cfg#?}
		AUDIT_DB=$DBDIR/audit-$cfg.db
		read -r rows req <<<"$(sql "SELECT count(*), count(DISTINCT request_id) FROM decisions" | tr '|' ' ')"
		echo "$cfg ${ANSWERED[$cfg]} $rows $req $rules $st" >> "$ROWS"
		if [ "$req" -lt "${ANSWERED[$cfg]}" ] || [ "$rows" -ne $((req * rules)) ] || [ "$st" != 0 ]; then
			LOST_TOTAL=$((LOST_TOTAL + ${ANSWERED[$cfg]} - req))
			echo "  $cfg: ROWS LOST: ${ANSWERED[$cfg]} responses, $req requests in $rows rows, exit $st"
		fi
	done
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
echo "# rlgate bench: wrk -t2 (-t1 at one connection) -d${DUR}s per run, connections: $CONNS; $ROUNDS rounds; $WORKERS threads (b b2 r s t1 t3), ${LOOPS:-one per CPU} loops (c d), flush $FLUSH, batch ${BATCH:-default}, databases in $DBDIR; load average $load_before"
for cfg in $CONFIGS; do
	start "$cfg" || exit 1
	run_wrk "$cfg" 10 1 0 || exit 1	# warm-up
done
for round in $(seq "$ROUNDS"); do
	order=$CONFIGS
	[ $((round % 2)) = 0 ] && order=$(echo "$CONFIGS" | tr ' ' '\n' | tac | tr '\n' ' ')
	echo "# round $round"
	for c in $CONNS; do
		for cfg in $order; do measure "$cfg" "$round" sat "$c" || exit 1; done
	done
	if [ "$THINK" -gt 0 ]; then
		for cfg in $order; do
			[ "$cfg" = a ] || measure "$cfg" "$round" paced "$(conns_of paced)" || exit 1
		done
	fi
	if [ "$ONE" = 1 ]; then
		for cfg in $order; do
			[ "$cfg" = a ] || measure "$cfg" "$round" one "$(conns_of one)" || exit 1
		done
	fi
done
stop_all
# Ours, outside the temporary directory: not left behind.
[ "$DBDIR" = "$T" ] || for cfg in $CONFIGS; do rm -f "$DBDIR/audit-$cfg.db"{,-wal,-shm}; done

# --- the audit writer alone ---------------------------------------------
# Three runs (the median counts): 2 threads push AUDIT_ROWS rows into a
# fresh database through fcgi/audit.c; rows/s is first push to all rows
# committed.
echo "# audit writer: tests/tools/audit_bench -n $AUDIT_ROWS -t 2, three runs"
AB_LOST=0
: > "$T/ab-rps"
for i in 1 2 3; do
	"$AUDIT_BENCH" -n "$AUDIT_ROWS" -t 2 > "$T/ab-$i.out" 2>&1
	r=$(sed -n 's/^written:.*= \([0-9]*\) rows\/s.*/\1/p' "$T/ab-$i.out")
	l=$(sed -n 's/^lost: *\([0-9]*\).*/\1/p' "$T/ab-$i.out")
	AB_LOST=$((AB_LOST + ${l:-1}))
	echo "${r:-0} $i" >> "$T/ab-rps"
	sed 's/^/  /' "$T/ab-$i.out" | grep -E 'written|cpu|push|lost'
done
AB_RUNS=$(sort -n "$T/ab-rps" | awk '{ printf "%s%s", (NR > 1 ? "," : ""), $1 }')
AB_MED=$(sort -n "$T/ab-rps" | sed -n 2p | cut -d' ' -f2)
AB_OUT=$T/ab-$AB_MED.out
# Queue pressure: a queue of 1000 rows that 16 threads keep full, so a
# push waits for the writer: the latency a decision then gains.
"$AUDIT_BENCH" -n "$((AUDIT_ROWS / 2))" -t 16 -q 1000 -b 1000 > "$T/ab-full.out" 2>&1
echo "  under pressure (queue 1000, 16 threads):"
sed 's/^/    /' "$T/ab-full.out" | grep -E 'written|push|lost'
AB_RPS=$(sed -n 's/^written:.*= \([0-9]*\) rows\/s.*/\1/p' "$AB_OUT")
# Rows per CPU second of the writer thread alone: its capacity, were a
# core its own (older audit_bench: of all threads).
AB_CPU_RPS=$(sed -n -e 's/^cpu:.*= \([0-9]*\) rows per writer CPU.*/\1/p' \
    -e 's/^cpu:.*(\([0-9]*\) rows per CPU.*/\1/p' "$AB_OUT")
AB_FULL_RPS=$(sed -n 's/^written:.*= \([0-9]*\) rows\/s.*/\1/p' "$T/ab-full.out")
AB_FULL_LOST=$(sed -n 's/^lost: *\([0-9]*\).*/\1/p' "$T/ab-full.out")
read -r AB_P50 AB_P99 AB_P999 AB_MAX <<<"$(sed -n 's/^push: *p50 \([0-9.]*\) us, p99 \([0-9.]*\) us, p99.9 \([0-9.]*\) us, max \([0-9.]*\) us.*/\1 \2 \3 \4/p' "$AB_OUT")"
read -r AF_P50 AF_P99 AF_P999 AF_MAX <<<"$(sed -n 's/^push: *p50 \([0-9.]*\) us, p99 \([0-9.]*\) us, p99.9 \([0-9.]*\) us, max \([0-9.]*\) us.*/\1 \2 \3 \4/p' "$T/ab-full.out")"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table, the targets, the JSON ------------------------------------
SUMMARY=$T/summary	# cfg kind conns rps p50_us p99_us cpu_h cpu_b cpu_r runs ratio p99_added_us, then the same against r and s, then p99 added over b round by round
# Medians over the rounds; the ratio to a floor (b, r and s) and the p99
# added over it are taken run by run (each against the floor's run next
# to it in the same round), then their median: a drifting load cancels
# out.
awk '
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	if (n == 0) return ""
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $1 " " $3 " " $4; if (!(k in rps)) order[++m] = k
  rps[k] = rps[k] " " $5; p50[k] = p50[k] " " $6; p99[k] = p99[k] " " $7
  ch[k] = ch[k] " " $11; cb[k] = cb[k] " " $12; cr[k] = cr[k] " " $13; runs[k] = runs[k] (runs[k] == "" ? "" : ",") $5
  R[$1, $2, $3, $4] = $5; P[$1, $2, $3, $4] = $7; rounds[$2] = 1 }
# against FLOOR: " ratio p99_added" (medians; null without that floor)
function against(floor, f,   r, rat, add, mr, ma) {
	rat = ""; add = ""
	for (r in rounds) if (((f[1], r, f[2], f[3]) in R) && ((floor, r, f[2], f[3]) in R) && R[floor, r, f[2], f[3]] > 0) {
		rat = rat " " R[f[1], r, f[2], f[3]] / R[floor, r, f[2], f[3]]
		add = add " " P[f[1], r, f[2], f[3]] - P[floor, r, f[2], f[3]] }
	mr = median(rat); ma = median(add)
	return sprintf(" %s %s", (mr == "" ? "null" : sprintf("%.2f", mr)), (ma == "" ? "null" : sprintf("%.0f", ma)))
}
# the p99 added over b round by round, in round order: " a,b,c" (us) or " -"
function added_runs(f,   r, s) {
	s = ""
	for (r = 1; r in rounds; r++) if (((f[1], r, f[2], f[3]) in P) && (("b", r, f[2], f[3]) in P))
		s = s (s == "" ? "" : ",") P[f[1], r, f[2], f[3]] - P["b", r, f[2], f[3]]
	return " " (s == "" ? "-" : s)
}
END { for (i = 1; i <= m; i++) { k = order[i]; split(k, f, " ")
	printf "%s %.0f %.0f %.0f %.0f %.0f %.0f %s%s%s%s%s\n", k, median(rps[k]), median(p50[k]), median(p99[k]), median(ch[k]), median(cb[k]), median(cr[k]), runs[k], against("b", f), against("r", f), against("s", f), added_runs(f) } }
' "$RESULTS" > "$SUMMARY"

get() {	# get CFG KIND CONNS FIELD(4=rps 5=p50 6=p99 7=cpu_h 8=cpu_b 9=cpu_r 11=ratio 12=p99 added; 13 14 against r, 15 16 against s; 17 p99 added over b by round)
	awk -v c="$1" -v k="$2" -v n="$3" -v f="$4" '$1 == c && $2 == k && $3 == n { print $f }' "$SUMMARY"
}
ms() { awk -v u="$1" 'BEGIN { if (u == "" || u == "null") print "null"; else printf "%.2f", u / 1000 }'; }

echo
echo "# medians of $ROUNDS rounds; x b, x r, x s: median of the ratios to that floor's run next to it"
printf '%-34s %5s %9s %9s %9s %5s %5s %5s %7s   %s\n' configuration conns req/s "p50 ms" "p99 ms" "x b" "x r" "x s" \
    "cpu us" "(lighttpd/backend/redis per request)"
for cfg in $CONFIGS; do
	for c in $CONNS; do
		r=$(get "$cfg" sat "$c" 4); [ -n "$r" ] || continue
		printf '%-34s %5s %9s %9s %9s %5s %5s %5s %7s   %s\n' "$cfg $(label "$cfg")" "$c" "$r" \
		    "$(ms "$(get "$cfg" sat "$c" 5)")" "$(ms "$(get "$cfg" sat "$c" 6)")" \
		    "$(get "$cfg" sat "$c" 11)" "$(get "$cfg" sat "$c" 13)" "$(get "$cfg" sat "$c" 15)" \
		    "$(( $(get "$cfg" sat "$c" 7) + $(get "$cfg" sat "$c" 8) + $(get "$cfg" sat "$c" 9) ))" \
		    "$(get "$cfg" sat "$c" 7)/$(get "$cfg" sat "$c" 8)/$(get "$cfg" sat "$c" 9)"
	done
done
# latency_rows KIND: the table of a run below saturation.
latency_rows() {
	local kind=$1 c cfg r
	c=$(conns_of "$kind")
	for cfg in $CONFIGS; do
		r=$(get "$cfg" "$kind" "$c" 4); [ -n "$r" ] || continue
		printf '%-34s %5s %9s %9s %9s   p99 added over b %s, r %s, s %s ms\n' "$cfg $(label "$cfg")" "$c" "$r" \
		    "$(ms "$(get "$cfg" "$kind" "$c" 5)")" "$(ms "$(get "$cfg" "$kind" "$c" 6)")" \
		    "$(ms "$(get "$cfg" "$kind" "$c" 12)")" "$(ms "$(get "$cfg" "$kind" "$c" 14)")" \
		    "$(ms "$(get "$cfg" "$kind" "$c" 16)")"
	done
}
if [ "$THINK" -gt 0 ]; then
	echo "# paced: 50 connections, each waiting ${THINK} ms between a response and its next request"
	latency_rows paced
fi
if [ "$ONE" = 1 ]; then
	echo "# one connection: a request with nothing queued before it"
	latency_rows one
fi

# How far the p99 added moves from round to round on this machine: the
# median above is one of these.
echo "# p99 added over b at 50 connections (and at one), round by round (ms)"
for kind in sat paced one; do for cfg in $CONFIGS; do
	case $cfg in a|b) continue;; esac
	r=$(get "$cfg" "$kind" "$(conns_of "$kind")" 17)
	[ -n "$r" ] && [ "$r" != - ] || continue
	printf '%-34s %6s   %s\n' "$cfg $(label "$cfg")" "$kind" \
	    "$(echo "$r" | tr ',' '\n' | while read -r u; do echo "$(ms "$u")"; done | paste -sd' ')"
done; done

# Targets (issue 7), judged on the medians of this run (ratios and p99
# added: medians of the run-by-run values).
target() {	# NAME VALUE OP LIMIT
	local ok
	set -- "$1" "${2:-null}" "$3" "$4"
	ok=$(awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN { if (v == "null" || v == "") print "n/a"; else if (op == ">=") print (v >= l ? "met" : "NOT met"); else print (v <= l ? "met" : "NOT met") }')
	printf '  %-58s %8s %s %-7s %s\n' "$1" "$2" "$3" "$4" "$ok"
	TARGETS="$TARGETS${TARGETS:+,}
    {\"target\": \"$1\", \"value\": $2, \"op\": \"$3\", \"limit\": $4, \"met\": $([ "$ok" = met ] && echo true || echo false)}"
}
TARGETS=
echo
echo "# targets"
for c in $CONNS; do
	target "d1/b req/s, 1 rule, audit on, $c connections" "$(get d1 sat "$c" 11)" ">=" 0.75
	target "d3/b req/s, 3 rules, audit on, $c connections" "$(get d3 sat "$c" 11)" ">=" 0.65
done
for cfg in d1 d3; do
	for kind in sat paced; do
		[ $kind = sat ] || [ "$THINK" -gt 0 ] || continue
		target "p99 added over the floor, $cfg, $(conns_words $kind) (ms)" \
		    "$(ms "$(get "$cfg" $kind "$(conns_of $kind)" 12)")" "<=" 1
	done
done
# What the floor "adds" over itself: how far from 0 this run's noise alone
# puts a p99 added.
for kind in sat paced one; do
	r=$(get b2 "$kind" "$(conns_of "$kind")" 12)
	[ -n "$r" ] && [ "$r" != null ] &&
		printf '  %-58s %8s    (noise: the floor against itself)\n' "p99 added, b2 over b, $(conns_words $kind) (ms)" "$(ms "$r")"
done
# Not a target: the same latency with nothing queued.
for cfg in d1 d3; do
	r=$(get "$cfg" one "$(conns_of one)" 12)
	[ -n "$r" ] && [ "$r" != null ] &&
		printf '  %-58s %8s\n' "p99 added over the floor, $cfg, $(conns_words one) (ms)" "$(ms "$r")"
done
target "audit writer rows/s (audit_bench, median of 3)" "${AB_RPS:-null}" ">=" 200000
target "audit writer rows per CPU second of its thread" "${AB_CPU_RPS:-null}" ">=" 200000
lost_all=$((LOST_TOTAL + ${AB_LOST:-1} + ${AB_FULL_LOST:-1}))
target "rows lost (gateway runs and audit_bench)" "$lost_all" "<=" 0
echo
awk '{ printf "  audit rows, %s: %d responses admitted, %d requests recorded in %d rows (%d rules), %d decided but unanswered when wrk stopped, exit %d\n", $1, $2, $4, $3, $5, $4 - $2, $6 }' "$ROWS"

# --- JSON ---------------------------------------------------------------
prev=
[ -f "$JSON" ] && prev=$(cat "$JSON")
mkdir -p "$(dirname "$JSON")"
{
	commit=$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=false; [ -n "$(git -C "$TOP" status --porcelain -- fcgi lua 2>/dev/null)" ] && dirty=true
	printf '{\n  "bench": "rlgate make bench",\n  "date": "%s",\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf '  "rlgate": {"version": "%s", "commit": "%s", "fcgi_or_lua_modified": %s},\n' \
	    "$("$RLGATE" -V 2>/dev/null | awk '{print $2}')" "$commit" "$dirty"
	printf '  "machine": {"cpus": %s, "cpu": "%s", "kernel": "%s", "load_before": "%s", "load_after": "%s"},\n' \
	    "$(nproc)" "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)" "$(uname -r)" "$load_before" "$load_after"
	printf '  "params": {"duration_s": %s, "conns": [%s], "rounds": %s, "workers": %s, "loops": "%s", "flush_interval": "%s", "batch": "%s", "redis": "%s", "fastcgi": "%s", "think_ms": %s, "wrk_threads": 2, "wrk_threads_at_one_conn": 1, "file_bytes": %s, "seconds": %s},\n' \
	    "$DUR" "$(echo $CONNS | tr ' ' ',')" "$ROUNDS" "$WORKERS" "${LOOPS:-per-cpu}" "$FLUSH" "${BATCH:-default}" "$([ -n "${BENCH_REDIS_UNIX:-}" ] && echo unix || echo tcp)" "$([ -n "${BENCH_FCGI_UNIX:-}" ] && echo unix || echo tcp)" "$THINK" \
	    "$(wc -c < "$DOCROOT/bench/item")" "$(( $(date +%s) - t_start ))"
	echo '  "results": ['
	awk -v labels="$(for c in $CONFIGS; do printf '%s=%s;' "$c" "$(label "$c")"; done)" '
	BEGIN { n = split(labels, l, ";"); for (i = 1; i <= n; i++) { j = index(l[i], "="); lab[substr(l[i], 1, j - 1)] = substr(l[i], j + 1) } }
	function ms(u) { return u == "null" ? "null" : sprintf("%.3f", u / 1000) }
	function runs_ms(s,   a, n, i, o) { if (s == "-") return ""; n = split(s, a, ","); o = ""; for (i = 1; i <= n; i++) o = o (i > 1 ? "," : "") sprintf("%.3f", a[i] / 1000); return o }
	{ printf "%s    {\"config\": \"%s\", \"label\": \"%s\", \"kind\": \"%s\", \"conns\": %d, \"rps\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"cpu_us_per_req\": {\"lighttpd\": %d, \"backend\": %d, \"redis\": %d}, \"rps_runs\": [%s], \"ratio_to_floor\": %s, \"p99_added_ms\": %s, \"ratio_to_r\": %s, \"p99_added_over_r_ms\": %s, \"ratio_to_s\": %s, \"p99_added_over_s_ms\": %s, \"p99_added_runs_ms\": [%s]}", (NR > 1 ? ",\n" : ""), $1, lab[$1], $2, $3, $4, $5 / 1000, $6 / 1000, $7, $8, $9, $10, $11, ms($12), $13, ms($14), $15, ms($16), runs_ms($17) }
	END { print "" }' "$SUMMARY"
	echo '  ],'
	echo '  "ratios": {'
	first=1
	for floor in b:11 r:13 s:15; do for cfg in b2 r s c1 d1 c3 d3 t1 t3; do for c in $CONNS; do
		[ "$cfg" != "${floor%:*}" ] || continue
		r=$(get "$cfg" sat "$c" "${floor#*:}")
		[ -n "$r" ] && [ "$r" != null ] || continue
		[ $first = 1 ] || printf ',\n'; first=0
		printf '    "%s/%s@%s": %s' "$cfg" "${floor%:*}" "$c" "$r"
	done; done; done
	printf '\n  },\n  "audit_rows": ['
	awk '{ printf "%s\n    {\"config\": \"%s\", \"responses\": %d, \"requests_recorded\": %d, \"rows\": %d, \"rules\": %d, \"lost\": %d, \"exit\": %d}", (NR > 1 ? "," : ""), $1, $2, $4, $3, $5, ($2 > $4 ? $2 - $4 : 0), $6 }' "$ROWS"
	printf '\n  ],\n'
	printf '  "audit_bench": {"threads": 2, "rows": %s, "rows_per_s": %s, "rows_per_s_runs": [%s], "writer_rows_per_cpu_s": %s, "push_us": {"p50": %s, "p99": %s, "p999": %s, "max": %s}, "lost": %s,\n' \
	    "$AUDIT_ROWS" "${AB_RPS:-null}" "$AB_RUNS" "${AB_CPU_RPS:-null}" "${AB_P50:-null}" "${AB_P99:-null}" "${AB_P999:-null}" "${AB_MAX:-null}" "${AB_LOST:-null}"
	printf '    "queue_full": {"queue": 1000, "threads": 16, "rows_per_s": %s, "push_us": {"p50": %s, "p99": %s, "p999": %s, "max": %s}, "lost": %s}},\n' \
	    "${AB_FULL_RPS:-null}" "${AF_P50:-null}" "${AF_P99:-null}" "${AF_P999:-null}" "${AF_MAX:-null}" "${AB_FULL_LOST:-null}"
	printf '  "targets": [%s\n  ]\n}\n' "$TARGETS"
} > "$JSON.tmp" && mv "$JSON.tmp" "$JSON"
echo
echo "# written $JSON"

# The change against the previous file, same configuration and connections.
if [ -n "$prev" ]; then
	echo "# against the previous $(basename "$JSON") ($(echo "$prev" | sed -n 's/.*"date": "\([^"]*\)".*/\1/p' | head -1)):"
	echo "$prev" | grep '"config":.*"kind": "sat"' | sed 's/.*"config": "\([^"]*\)".*"conns": \([0-9]*\), "rps": \([0-9]*\).*/\1 \2 \3/' |
	while read -r cfg c old; do
		new=$(get "$cfg" sat "$c" 4)
		[ -n "$new" ] && printf '  %-3s c=%-3s %7s -> %7s req/s (%s)\n' "$cfg" "$c" "$old" "$new" \
		    "$(awk -v a="$old" -v b="$new" 'BEGIN { printf "%+.0f%%", (b - a) * 100 / a }')"
	done
fi
[ "$lost_all" = 0 ]
