#!/bin/bash
# rlgate with a least-privilege Redis user: exactly the ACL README.md
# documents ("A Redis user for rlgate"), read from the README, in each mode:
# a single server, a cluster (3 masters, 3 replicas) and Sentinel (the
# master's user, and the Sentinels' default user restricted as documented).
# That user may not FUNCTION LOAD: with the library missing, the probe says
# to run rlgate-ctl load, the gateway answers with on_error and logs that
# once however often it tries again, and rlgate-ctl load (an operator's
# user) loads it on every master; the README's self-loading addition lets
# the user load it. In each mode, the gateway decides exact counts with
# that user and nothing is refused (ACL LOG empty); then each command taken
# away, one at a time, gives an error that names it: at start-up (the
# probe, through tests/tools/redis_call -P: the gateway's own Redis layer)
# or, for FCALL and PING, at request time in the log and in /health. Every
# pointer to the README section (start-up messages, rlgate.ini(5),
# rlgate-ctl(8), the sample rlgate.ini) names a section the README has.
. "$(dirname "$0")/../lib.sh"
SENTINEL_CLI_AUTH=
RC=$TOP/tests/tools/redis_call
FR=$TOP/tests/tools/fcgi_raw
CTL=$TOP/fcgi/rlgate-ctl
for t in "$RC" "$FR" "$CTL"; do [ -x "$t" ] || { echo "# build $t first"; exit 1; }; done
LIB=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")

# The README's ACL: the line for every mode, the cluster's and Sentinel's
# additions, and the self-loading one.
readme=$(tr '\n' ' ' < "$TOP/README.md")
acl_all=$(sed -n 's/^ACL SETUSER rlgate on >SECRET //p' "$TOP/README.md")
acl_cluster=$(sed -n 's/.*In cluster mode `ACL SETUSER rlgate \([^`]*\)`.*/\1/p' <<<"$readme")
acl_sentinel=$(sed -n 's/.*in Sentinel mode `ACL SETUSER rlgate \([^`]*\)`.*/\1/p' <<<"$readme")
acl_self=$(sed -n 's/.*Self-loading, for a Redis used only by rlgate: `ACL SETUSER rlgate \([^`]*\)`.*/\1/p' <<<"$readme")
check "README has the ACL line ($(echo $acl_all | wc -w) words)" [ "$(echo $acl_all | wc -w)" -ge 20 ]
check "README's least-privilege line gives no FUNCTION LOAD (nor @scripting, @all)" \
	eval '[[ " $acl_all " != *function* && " $acl_all " != *" +@"* ]]'
is "README's cluster additions" "+cluster|slots +asking" "$acl_cluster"
is "README's Sentinel additions" "+role" "$acl_sentinel"
is "README's self-loading addition" "+function|load" "$acl_self"
# Every pointer to the section names one the README has.
points() {	# points WHAT: stdin's 'README.md, "SECTION"' are README headings
	local names
	names=$(tr '\n' ' ' | grep -o 'README\.md[,:] *"[^"]*"' | sed 's/.*"\(.*\)"/\1/' | sort -u)
	check "$1 points to README sections that exist (${names//$'\n'/, })" \
		eval '[ -n "$names" ] && while read -r n; do grep -qx "### $n" "$TOP/README.md" || exit 1; done <<<"$names"'
}
for f in conf/rlgate.ini.5 fcgi/rlgate-ctl.8 conf/rlgate.ini; do points "$f" < "$TOP/$f"; done
# The commands, without the +: each one is taken away in turn.
cmds=$(printf '%s\n' $acl_all | sed -n 's/^+//p')

setuser() {	# setuser PORT ACL-WORDS...: the user rlgate, reset, then these
	local p=$1; shift
	redis-cli -p "$p" ACL SETUSER rlgate reset on '>pw' "$@" > /dev/null
}
# shellcheck disable=SC2086
acl_on() { local p; for p in "$@"; do setuser "$p" $ACL; done; }
auth() { case " ${SENTINEL_PORTS[*]:-} " in *" $1 "*) echo "$SENTINEL_CLI_AUTH" ;; esac; }
acl_log_empty() {
	local p
	for p in "$@"; do
		# shellcheck disable=SC2046
		[ "$(redis-cli -p "$p" $(auth "$p") ACL LOG | grep -c .)" = 0 ] ||
			{ redis-cli -p "$p" $(auth "$p") ACL LOG | paste -sd' ' | sed "s/^/# $p: /"; return 1; }
	done
}
# shellcheck disable=SC2046
acl_log_reset() { local p; for p in "$@"; do redis-cli -p "$p" $(auth "$p") ACL LOG RESET > /dev/null; done; }
flush_lib() { local p; for p in "$@"; do redis-cli -p "$p" FUNCTION FLUSH > /dev/null; done; }
ops_ini() { sed '/^username = /d; /^password = /d' "$1" > "$2"; chmod 600 "$2"; }	# an operator's user: default
refused_loads() {	# FUNCTION LOADs Redis refused (ACL) on port $1
	redis-cli -p "$1" INFO commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_function|load:.*rejected_calls=\([0-9]*\).*/\1/p' | grep . || echo 0
}
probe() { "$RC" -c "$1" -P 2>&1; }
req() {		# req PATH: the status rlgate answers as an authorizer
	"$FR" "127.0.0.1:$RLGATE_PORT" "request 1 authorizer close GET $1" "wait-reply 1" |
		sed -n 's/^STDOUT 1 Status: \([0-9]*\).*/\1/p'
}
health() {	# the status of /health, and the first NOPERM sentence it holds
	local out
	out=$("$FR" "127.0.0.1:$RLGATE_PORT" "request 1 responder close GET /st/health" "wait-reply 1")
	echo $(sed -n 's/^STDOUT 1 Status: \([0-9]*\).*/\1/p' <<<"$out") \
		$(grep -o "NOPERM[^\"]*" <<<"$out" | head -1)
}
ini() {		# ini FILE [REDIS-LINES...]: the gateway, 3 per minute per path
	local f=$1; shift
	AUDIT_DB=$T/$(basename "$f" .ini).db
	{
		printf '[gateway]\nstatus_path = /st\n\n'
		ini_redis_audit "$@" "username = rlgate" "password = pw"
		printf '\n[rule:r]\npath = /*\nkey = {path}\nlimit = 3\nwindow = 1m\n'
	} > "$f"
	chmod 600 "$f"
}
# run MODE INI NKEYS PORTS...: the gateway with the user; 4 requests on
# each of NKEYS paths: exactly 3 admitted per path, every row reason
# limit or allowed, none redis_error, and no command refused anywhere.
run() {
	local mode=$1 f=$2 n=$3 i codes=; shift 3
	acl_log_reset "$@"
	start_rlgate "$f" "$mode" || { not_ok "$mode: rlgate starts"; return; }
	for i in $(seq "$n"); do codes="$codes $(req "/$mode/k$i") $(req "/$mode/k$i") $(req "/$mode/k$i") $(req "/$mode/k$i")"; done
	is "$mode: with exactly the documented ACL, $((3 * n)) of $((4 * n)) admitted" \
		"$((3 * n)) $n" "$(echo $codes | tr ' ' '\n' | grep -c 200) $(echo $codes | tr ' ' '\n' | grep -c 429)"
	is "$mode: /health answers 200 (PING)" 200 "$(health)"
	stop_rlgate
	is "$mode: audit: $((3 * n)) admitted, $n denied by the limit, none by on_error" "$((3 * n)) $n 0" \
		"$(rows "allowed = 1") $(rows "allowed = 0 AND reason = 'limit'") $(rows "reason = 'redis_error'")"
	check "$mode: no command refused (ACL LOG empty on every node)" acl_log_empty "$@"
	check "$mode: nothing logged at error level" test -z "$(grep -E 'error|warn' "$T/$mode.log")"
	RLGATE_PORT=
}
# take_away MODE INI CMD PORTS...: CMD taken from the user on every node
# in PORTS: the probe's error names it. Given back after.
take_away() {
	local mode=$1 f=$2 cmd=$3 out want; shift 3
	local lc uc p
	lc=$(echo "$cmd" | tr 'A-Z' 'a-z'); uc=$(echo "$cmd" | tr 'a-z' 'A-Z')
	for p in "$@"; do redis-cli -p "$p" ACL SETUSER rlgate "-$lc" > /dev/null; done
	out=$(probe "$f")
	case $lc in
	fcall_ro|cluster\|slots|role|select) want="no permissions to run the '$lc' command" ;;
	*) want="may not run $uc on keys rl:\*" ;;
	esac
	if grep -q "$want" <<<"$out"; then TOOK_OK=$((TOOK_OK + 1)); else
		not_ok "$mode: without $lc the probe names it: expected '$want', got '$out'"; fi
	for p in "$@"; do redis-cli -p "$p" ACL SETUSER rlgate "+$lc" > /dev/null; done
}

# 1. A single server.
start_redis || exit 1
ACL=$acl_all
acl_on "$REDIS_PORT"
# The library missing: that user may not load it. The probe says what to
# run; the gateway answers with on_error and says it once (the start-up
# warning), however often it tries again; rlgate-ctl load, with an
# operator's user, loads it, and the gateway decides from then on.
ini "$T/nolib.ini" "address = 127.0.0.1:$REDIS_PORT"
ops_ini "$T/nolib.ini" "$T/ops.ini"
flush_lib "$REDIS_PORT"
nolib="this build's library $LIB is not loaded there, and this user may not load it (NOPERM): run rlgate-ctl load with an operator's user (README.md, \"A Redis user for rlgate\")"
is "single: library missing, the user may not load it: the probe says what to run" "probe: $nolib" "$(probe "$T/nolib.ini")"
points "that start-up message" <<<"$nolib"
r0=$(refused_loads "$REDIS_PORT")
start_rlgate "$T/nolib.ini" single-nolib || exit 1
codes="$(req /nolib) $(req /nolib) $(req /nolib) $(req /nolib)"
sleep 1		# past the back-off (at most 500 ms): /health, then it tries again
hs=$("$FR" "127.0.0.1:$RLGATE_PORT" "request 1 responder close GET /st/health" "wait-reply 1")
is "single: /health answers 503 and says what to run (PING works: not enough)" "503 1" \
	"$(sed -n 's/^STDOUT 1 Status: \([0-9]*\).*/\1/p' <<<"$hs") $(grep -c 'run rlgate-ctl load' <<<"$hs")"
sleep 1
codes="$codes $(req /nolib) $(req /nolib)"
is "single: without the library, each request follows on_error (allow)" "200 200 200 200 200 200" "$codes"
r1=$(refused_loads "$REDIS_PORT")
check "single: the gateway tried to load it at start-up and again at request time ($((r1 - r0)) FUNCTION LOADs refused)" \
	test $((r1 - r0)) -ge 2
is "single: and said what to run once" 1 "$(grep -c 'run rlgate-ctl load' "$T/single-nolib.log")"
is "single: nothing else logged but info lines (no error per request)" "" \
	"$(grep -v -e 'warn: redis .*run rlgate-ctl load' -e ' info: ' "$T/single-nolib.log")"
"$CTL" -c "$T/nolib.ini" load > /dev/null 2> "$T/ctl-nolib.err"
is "rlgate-ctl load as that user: exit 2" 2 $?
is "and it says why" "rlgate-ctl: redis 127.0.0.1:$REDIS_PORT: $nolib" "$(cat "$T/ctl-nolib.err")"
is "rlgate-ctl load as an operator's user: loaded" "127.0.0.1:$REDIS_PORT: loaded $LIB" "$("$CTL" -c "$T/ops.ini" load)"
is "rlgate-ctl load again: there already, exit 0" "127.0.0.1:$REDIS_PORT: $LIB is there already 0" \
	"$("$CTL" -c "$T/ops.ini" load) $?"
sleep 1		# past the back-off of the last try
is "single: then the gateway decides (3 a minute)" "200 200 200 429" "$(req /later) $(req /later) $(req /later) $(req /later)"
stop_rlgate; RLGATE_PORT=
check "single: and logged that Redis answers again" grep -q "redis 127.0.0.1:$REDIS_PORT answers again" "$T/single-nolib.log"
is "single: audit: the 6 without the library by on_error, the 4 after by Redis" "6 3 1" \
	"$(rows "key = '/nolib' AND reason = 'redis_error'") $(rows "key = '/later' AND allowed = 1 AND reason = 'limit'") $(rows "key = '/later' AND allowed = 0 AND reason = 'limit'")"
# rlgate-ctl with an operator's user of exactly the README's commands (on
# rl:*): every command on a rule of each algorithm, an override set,
# shown, refused, made unlimited and cleared, and not one command refused.
acl_ctl=$(sed -n 's/.*(rlgate-ctl needs `\([^`]*\)`).*/\1/p' <<<"$readme")
check "README gives rlgate-ctl's commands ($(echo $acl_ctl | wc -w) words)" [ "$(echo $acl_ctl | wc -w)" -ge 10 ]
# shellcheck disable=SC2086
redis-cli -p "$REDIS_PORT" ACL SETUSER ops reset on '>opw' '~rl:*' $acl_ctl > /dev/null
{
	printf '[redis]\naddress = 127.0.0.1:%s\nusername = ops\npassword = opw\n' "$REDIS_PORT"
	for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
		printf '[rule:%s]\npath = /%s\nalgorithm = %s\nlimit = 5\nwindow = 1s\noverrides = redis\n' "$a" "$a" "$a"
	done
} > "$T/ctl-ops.ini"
chmod 600 "$T/ctl-ops.ini"
acl_log_reset "$REDIS_PORT"
ctl_ok=
ctl() { "$CTL" -c "$T/ctl-ops.ini" "$@" > /dev/null 2>> "$T/ctl-ops.err" || ctl_ok="$ctl_ok [$*: $?]"; }
for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	ctl peek "$a" k; ctl override "$a" k limit=7; ctl override "$a" k; ctl peek "$a" k
	ctl override "$a" k unlimited; ctl override "$a" k clear; ctl reset "$a" k; ctl list "$a"
done
"$CTL" -c "$T/ctl-ops.ini" override fixed_window k window=2000d > /dev/null 2>> "$T/ctl-ops.err"
is "rlgate-ctl as that user: an override the library would ignore is refused (exit 1)" 1 $?
ctl versions; ctl load
is "rlgate-ctl as that user: peek, override, reset, list, versions, load all exit 0" "" "$ctl_ok"
check "rlgate-ctl as that user: no command refused (ACL LOG empty)" acl_log_empty "$REDIS_PORT"
# Self-loading: the README's addition, and the user loads it itself.
flush_lib "$REDIS_PORT"
# shellcheck disable=SC2086
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate $acl_self > /dev/null
is "single: with the self-loading addition, the probe loads it as that user" "probe OK $LIB" \
	"$(probe "$T/nolib.ini") $(redis-cli -p "$REDIS_PORT" FUNCTION LIST | grep -x 'rlgate_[0-9a-f]*')"
acl_on "$REDIS_PORT"
ini "$T/single.ini" "address = 127.0.0.1:$REDIS_PORT"
is "single: the probe, as that user, with the library there" "probe OK" "$(probe "$T/single.ini")"
run single "$T/single.ini" 2 "$REDIS_PORT"
TOOK_OK=0 n=0
for cmd in $cmds; do
	case $cmd in fcall|ping) continue ;; esac	# at request time, below
	n=$((n + 1)); take_away single "$T/single.ini" "$cmd" "$REDIS_PORT"
done
is "single: each of the $n commands taken away is named at start-up" "$n" "$TOOK_OK"
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate -time > /dev/null
points "the start-up message of a command missing" < <(probe "$T/single.ini")
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate +time > /dev/null
is "single: given back, the probe is fine again" "probe OK" "$(probe "$T/single.ini")"
# FCALL and PING: at request time.
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate -fcall > /dev/null
start_rlgate "$T/single.ini" single-nofcall || exit 1
is "single: without fcall, the request follows on_error (allow)" 200 "$(req /nofcall)"
stop_rlgate; RLGATE_PORT=
check "single: the log names fcall" grep -q "NOPERM this user has no permissions to run the 'fcall' command" "$T/single-nofcall.log"
is "single: its audit row says redis_error" 1 "$(rows "key = '/nofcall' AND reason = 'redis_error'")"
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate +fcall -ping > /dev/null
start_rlgate "$T/single.ini" single-noping || exit 1
is "single: without ping, requests are still decided" "200 200 200 429" \
	"$(req /noping) $(req /noping) $(req /noping) $(req /noping)"
is "single: and /health names ping" "503 NOPERM this user has no permissions to run the 'ping' command" "$(health)"
stop_rlgate; RLGATE_PORT=
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate +ping > /dev/null
# database 1: +select.
ini "$T/db1.ini" "address = 127.0.0.1:$REDIS_PORT" "database = 1"
acl_on "$REDIS_PORT"
check "database = 1 without +select: the probe names select" \
	grep -q "no permissions to run the 'select' command" <(probe "$T/db1.ini")
redis-cli -p "$REDIS_PORT" ACL SETUSER rlgate +select > /dev/null
is "database = 1 with +select: probe OK" "probe OK" "$(probe "$T/db1.ini")"

# 2. A cluster: the ACL and the cluster's additions on every node.
start_cluster || exit 1
# shellcheck disable=SC2206
ACL="$acl_all $acl_cluster"
acl_on "${CLUSTER_PORTS[@]}"
M=("${CLUSTER_PORTS[@]:0:3}")
ini "$T/cluster.ini" "mode = cluster" "address = 127.0.0.1:$CLUSTER_SEED"
flush_lib "${M[@]}"
is "cluster: library missing: the probe says what to run, for each of the 3 masters" 3 \
	"$(probe "$T/cluster.ini" | grep -o 'run rlgate-ctl load' | wc -l)"
ops_ini "$T/cluster.ini" "$T/cluster-ops.ini"
is "cluster: rlgate-ctl load (an operator's user) loads it on the 3 masters" \
	"$(for p in "${M[@]}"; do echo "127.0.0.1:$p: loaded $LIB"; done | sort)" \
	"$("$CTL" -c "$T/cluster-ops.ini" load | sort)"
is "cluster: then the probe, as that user, is fine" "probe OK" "$(probe "$T/cluster.ini")"
run cluster "$T/cluster.ini" 9 "${CLUSTER_PORTS[@]}"
TOOK_OK=0
for cmd in cluster\|slots fcall_ro time hincrby zadd; do
	take_away cluster "$T/cluster.ini" "$cmd" "${CLUSTER_PORTS[@]}"
done
is "cluster: cluster|slots, fcall_ro and 3 of the library's taken away: each named" 5 "$TOOK_OK"

# 3. Sentinel: the master's and replica's user as documented, and the
# Sentinels' default user restricted to what rlgate asks (the Sentinels
# talk to each other as another user).
sent_acl=$(tr '\n' ' ' < "$TOP/README.md" | sed -n 's/.*as their `default` user, which needs `\([^`]*\)`.*/\1/p')
is "README's Sentinel default user" "+sentinel|get-master-addr-by-name +subscribe &+switch-master" "$sent_acl"
SENTINEL_CONF_EXTRA="user admin on >ap ~* &* +@all
user default on >sp resetchannels -@all $sent_acl
sentinel sentinel-user admin
sentinel sentinel-pass ap"
SENTINEL_CLI_AUTH="--user admin --pass ap --no-auth-warning"
start_sentinel_set || exit 1
ACL="$acl_all $acl_sentinel"
acl_on "$SENTINEL_MASTER_PORT" "$SENTINEL_REPLICA_PORT"
S=("${SENTINEL_PORTS[@]}")
ini "$T/sentinel.ini" "mode = sentinel" "address = 127.0.0.1:${S[0]} 127.0.0.1:${S[1]}" \
	"master_name = mymaster" "sentinel_password = sp"
flush_lib "$SENTINEL_MASTER_PORT"
ops_ini "$T/sentinel.ini" "$T/sentinel-ops.ini"
is "sentinel: rlgate-ctl load (an operator's user) loads it on the master" \
	"127.0.0.1:$SENTINEL_MASTER_PORT: loaded $LIB" "$("$CTL" -c "$T/sentinel-ops.ini" load)"
is "sentinel: then the probe, as that user, is fine" "probe OK" "$(probe "$T/sentinel.ini")"
run sentinel "$T/sentinel.ini" 2 "$SENTINEL_MASTER_PORT" "${S[@]}"
TOOK_OK=0
for cmd in role fcall_ro time; do take_away sentinel "$T/sentinel.ini" "$cmd" "$SENTINEL_MASTER_PORT"; done
is "sentinel: role, fcall_ro and time taken away: each named" 3 "$TOOK_OK"
for p in "${S[@]}"; do redis-cli -p "$p" $SENTINEL_CLI_AUTH ACL SETUSER default '-sentinel|get-master-addr-by-name' > /dev/null; done
check "sentinel: the Sentinels' user without get-master-addr-by-name: named" \
	grep -q "no permissions to run the 'sentinel|get-master-addr-by-name' command" <(probe "$T/sentinel.ini")

finish
