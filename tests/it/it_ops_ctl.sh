#!/bin/bash
# Operations, 4 of 5 (tests/it/ops_lib.sh starts the gateway): a gateway
# and rlgate-ctl on Redis's unix socket, then rlgate-ctl (peek against each
# algorithm's own replies, list, reset, its errors and exit codes).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/ops_lib.sh"

ops_config
ops_start

# [redis] address = unix:/path: a gateway and rlgate-ctl on Redis's unix
# socket (the same Redis; TCP untouched).
cat > "$T/sock.ini" <<EOF
[redis]
address = unix:$REDIS_SOCKET
[audit]
database =
[rule:sock]
path = /sock/*
limit = 2
window = 1m
EOF
RLGATE_PORT=$(free_port)
start_rlgate "$T/sock.ini" rlgate-sock || exit 1
c0=$(redis_calls fcall)
sock=""
for i in 1 2 3; do sock+=" $(fcgi_get "$RLGATE_PORT" /sock/a | head -1)"; done
is "Redis on a unix socket: limit 2 gives 200, 200, 429" " Status: 200 OK Status: 200 OK Status: 429 Too Many Requests" "$sock"
is "Redis on a unix socket: the three decisions ran there" $((c0 + 3)) "$(redis_calls fcall)"
is "Redis on a unix socket: rlgate-ctl peek reads the key (remaining 0)" 0 \
	"$("$CTL" -c "$T/sock.ini" peek sock 127.0.0.1 | awk '$1 == "remaining" { print $2 }')"
stop_rlgate

# --- rlgate-ctl -------------------------------------------------------------

export RLGATE_CONF=$T/rlgate.ini
pk() { "$CTL" peek "$1" "$2" | awk -v f="$3" '$1 == f { print $2 }'; }
# script ALG KEY: one request of cost 1 through the algorithm's own
# function of the library (FCALL <library>_ALG, Redis TIME, the library
# this build carries); prints its reply on one line.
LIB=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
script() {
	local prec=''
	[ "$1" = sliding_window ] && prec=6000	# the rule's default: window/10
	rcli FCALL "${LIB}_$1" 1 "rl:{peek_$1:$2}" '' 1 3 60000 '' "$prec" | paste -sd' '
}
# peek's numbers against the scripts' own replies, for every algorithm
# (through redis-cli: a leaky_bucket rule served by rlgate would hold each
# admitted request for its delay, 20 s here).
for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
	r=peek_$a
	script "$a" k1 > /dev/null
	read -r _ rem _ <<<"$(script "$a" k1)"
	before=$(rcli DUMP "rl:{$r:k1}" | od -An -tx1 | tr -d ' \n') c0=$(redis_calls fcall)
	is "peek $a: remaining as the script last said" "$rem" "$(pk "$r" k1 remaining)"
	is "peek $a: consumes nothing (state and FCALL calls unchanged)" "$before $c0" \
		"$(rcli DUMP "rl:{$r:k1}" | od -An -tx1 | tr -d ' \n') $(redis_calls fcall)"
	# Over the limit: the denial's retry_after, less the time since.
	for i in 1 2 3 4 5; do
		read -r allowed _ _ _ retry deny_us _ <<<"$(script "$a" k1)"
		[ "$allowed" = 0 ] && break
	done
	"$CTL" peek "$r" k1 > "$T/peek.out"
	now_us=$(awk '$1 == "now_us" { print $2 }' "$T/peek.out")
	got=$(awk '$1 == "retry_after_ms" { print $2 }' "$T/peek.out")
	want=$(( retry - (now_us - deny_us) / 1000 ))
	check "peek $a: retry_after_ms $got = the denial's $retry less $(( (now_us - deny_us) / 1000 )) ms since (±1)" \
		[ "$allowed" = 0 -a -n "$got" -a $((got - want)) -ge -1 -a $((got - want)) -le 1 ]
	is "peek $a: remaining 0 when denied" 0 "$(awk '$1 == "remaining" { print $2 }' "$T/peek.out")"
done
"$CTL" peek peek_gcra nobody > "$T/peek.none"
is "peek: a key with no state has the whole burst" 3 "$(awk '$1 == "remaining" { print $2 }' "$T/peek.none")"
check "peek: and says so" grep -q '^state  *none' "$T/peek.none"

# Keys as rlgate writes them (through lighttpd): list, peek and reset.
status "$BASE/peek/fixed_window?k=k2" > /dev/null
status "$BASE/peek/fixed_window?k=a%20b" > /dev/null
is "list: a rule's keys, sorted, as rlgate wrote them" "a%20b k1 k2" "$("$CTL" list peek_fixed_window | paste -sd' ')"
is "list: with a glob pattern" "k1 k2" "$("$CTL" list peek_fixed_window 'k*' | paste -sd' ')"
out=$("$CTL" list peek_fixed_window 'zz*')
is "list: a pattern nothing matches: nothing, exit 0" " 0" "$out $?"
is "peek: an escaped key as list shows it" "2" "$(pk peek_fixed_window a%20b remaining)"
is "reset: deletes the key's state" "deleted rl:{peek_fixed_window:k1}" "$("$CTL" reset peek_fixed_window k1)"
is "reset: the key is gone from Redis" 0 "$(rcli EXISTS 'rl:{peek_fixed_window:k1}')"
is "reset: the next request is admitted, a fresh window" "200 2" "$(status "$BASE/peek/fixed_window?k=k1") $(pk peek_fixed_window k1 remaining)"
out=$("$CTL" reset peek_fixed_window none)
is "reset: a key with no state, exit 0" "rl:{peek_fixed_window:none}: no state, nothing deleted 0" "$out $?"

"$CTL" peek nosuch k1 > /dev/null 2> "$T/ctl.err"
is "unknown rule: exit 1" 1 $?
check "unknown rule: named, with the rules there are" grep -q "has no rule \"nosuch\" (its rules: flood, plain, " "$T/ctl.err"
"$CTL" frobnicate > /dev/null 2>&1
is "unknown command: exit 1" 1 $?
"$CTL" peek flood > /dev/null 2>&1
is "missing KEY: exit 1" 1 $?
"$CTL" -c "$T/nonexistent.ini" list flood > /dev/null 2> "$T/ctl.err"
is "unreadable configuration: exit 1" 1 $?
check "unreadable configuration: named" grep -q "nonexistent.ini: cannot open" "$T/ctl.err"
dead=$(free_port)
sed "s/^address = .*/address = 127.0.0.1:$dead/" "$T/rlgate.ini" > "$T/dead.ini"
"$CTL" -c "$T/dead.ini" peek flood 127.0.0.1 > /dev/null 2> "$T/ctl.err"
is "unreachable Redis: exit 2" 2 $?
refused="rlgate-ctl: redis 127.0.0.1:$dead: Connection refused"
is "unreachable Redis: says where (once) and why" "$refused" "$(cat "$T/ctl.err")"
for cmd in "list flood" versions load; do
	# shellcheck disable=SC2086
	is "unreachable Redis, $cmd: the same, exit 2" "$refused 2" "$("$CTL" -c "$T/dead.ini" $cmd 2>&1) $?"
done
"$CTL" -c "$T/dead.ini" load now > /dev/null 2> "$T/ctl.err"
is "load takes no argument: exit 1" "1 rlgate-ctl: load takes no argument" "$? $(head -1 "$T/ctl.err")"
check "rlgate-ctl -h prints the usage and exit codes" bash -c "'$CTL' -h | grep -q '2 Redis unreachable'"
unset RLGATE_CONF

finish
