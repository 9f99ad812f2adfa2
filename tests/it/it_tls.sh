#!/bin/bash
# TLS to Redis (issue 28, part 2): certificates made here with the openssl
# CLI (tests/lib.sh tls_certs), real redis-servers serving TLS only
# (--port 0 --tls-port), rlgate with [redis] tls = yes:
#   0. rlgate -t: the tls_* keys checked with FILE:LINE;
#   1. a single server: exact counts, rlgate-ctl peek, the calls at the
#      TLS port;
#   2. what must fail, each named: a certificate from another CA (the
#      server named in the log, then on_error's answer), a wrong
#      tls_server_name, an expired certificate, client certificates
#      required but not given (and given: fine), a plain port; a reload
#      reads the CA file again;
#   3. a 6-node cluster with tls-cluster yes: exact counts on every
#      master, then a master killed under load: its keys answered by
#      on_error until the replica takes over, every limit exact in the
#      audit and rlgate-report --verify finds nothing;
#   4. Sentinel over TLS (Sentinels and the master): exact counts, and a
#      failover followed (+switch-master heard over TLS).
. "$(dirname "$0")/../lib.sh"
RC=$TOP/tests/tools/redis_call
FR=$TOP/tests/tools/fcgi_raw
REPORT=$TOP/reports/rlgate-report
for t in "$RC" "$FR" "$REPORT"; do [ -x "$t" ] || { echo "# build $t first"; exit 1; }; done
TLS_DIR=$T/tls
tls_certs "$TLS_DIR" || { echo "# openssl could not make the certificates"; exit 1; }

probe() { "$RC" -c "$1" -P 2>&1; }
quiet() { "$@" > /dev/null; }
req() {		# req PATH: the status rlgate answers as an authorizer
	"$FR" "127.0.0.1:$RLGATE_PORT" "request 1 authorizer close GET $1" "wait-reply 1" |
		sed -n 's/^STDOUT 1 Status: \([0-9]*\).*/\1/p'
}
# ini FILE [REDIS-LINES...]: 3 per minute per path under /r/ (rule r,
# on_error allow) and /d/ (rule d, on_error deny).
ini() {
	local f=$1; shift
	AUDIT_DB=$T/$(basename "$f" .ini).db
	{
		ini_redis_audit "$@"
		printf '\n[rule:d]\npath = /d/*\nkey = {path}\nlimit = 3\nwindow = 1m\non_error = deny\n'
		printf '\n[rule:r]\npath = /r/*\nkey = {path}\nlimit = 3\nwindow = 1m\noverrides = redis\n'
	} > "$f"
}
CA="tls_ca_file = $TLS_DIR/ca.crt"
# exact MODE N: 4 requests on each of N paths: 3 admitted, 1 denied each,
# and the audit agrees, no redis_error.
exact() {
	local mode=$1 n=$2 i codes=
	for i in $(seq "$n"); do codes="$codes $(req "/r/$mode/k$i") $(req "/r/$mode/k$i") $(req "/r/$mode/k$i") $(req "/r/$mode/k$i")"; done
	is "$mode: over TLS, $((3 * n)) of $((4 * n)) admitted" "$((3 * n)) $n" \
		"$(echo $codes | tr ' ' '\n' | grep -c 200) $(echo $codes | tr ' ' '\n' | grep -c 429)"
}
audit_exact() {
	local mode=$1 n=$2
	wait_for 5 rows_at_least "$((4 * n))" "key LIKE '/r/$mode/%'"
	is "$mode: audit: $((3 * n)) admitted, $n denied by the limit, none by on_error" "$((3 * n)) $n 0" \
		"$(rows "key LIKE '/r/$mode/%' AND allowed = 1") $(rows "key LIKE '/r/$mode/%' AND allowed = 0 AND reason = 'limit'") $(rows "reason = 'redis_error'")"
}

# 0. The configuration.
start_tls_redis || exit 1
P=$TLS_PORT
ini "$T/t.ini" "address = 127.0.0.1:$P" "tls_ca_file = $TLS_DIR/ca.crt"
is "-t: tls_ca_file without tls = yes" "$T/t.ini:3: [redis] tls_ca_file: is set but tls is not on; set tls = yes, or remove it" \
	"$("$RLGATE" -t -c "$T/t.ini" 2>&1)"
ini "$T/t.ini" "address = 127.0.0.1:$P" "tls = yes" "tls_ca_file = $T/none.crt" "tls_key_file = $TLS_DIR/client.key"
is "-t: an unreadable file, a key without its certificate" \
"$T/t.ini:4: [redis] tls_ca_file: $T/none.crt cannot be read: No such file or directory (a PEM file rlgate's user may read)
$T/t.ini:5: [redis] tls_key_file: is set without tls_cert_file; a client certificate needs both (or neither)" \
	"$("$RLGATE" -t -c "$T/t.ini" 2>&1)"
ini "$T/t.ini" "address = 127.0.0.1:$P" "tls = maybe"
is "-t: tls is a boolean" "$T/t.ini:3: [redis] tls: \"maybe\" is not a boolean (use yes or no)" \
	"$("$RLGATE" -t -c "$T/t.ini" 2>&1)"
ini "$T/t.ini" "address = unix:$T/r.sock" "tls = yes"
check "-t: tls over a unix socket is refused" grep -q "^$T/t.ini:3: \[redis\] tls: is yes, but address unix:$T/r.sock is a unix socket" \
	<("$RLGATE" -t -c "$T/t.ini" 2>&1)
ini "$T/t.ini" "address = 127.0.0.1:$P" "tls = yes" "tls_ca_file = $T/t.ini"
is "-t: a CA file with no certificate in it" "$T/t.ini: [redis] tls_ca_file $T/t.ini: no CA certificate read from it (no certificate or crl found)" \
	"$("$RLGATE" -t -c "$T/t.ini" 2>&1)"
ini "$T/t.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA" "tls_cert_file = $TLS_DIR/client.crt" "tls_key_file = $TLS_DIR/server.key"
check "-t: a key that is not the certificate's" grep -q "tls_key_file $TLS_DIR/server.key: not the key of tls_cert_file $TLS_DIR/client.crt" \
	<("$RLGATE" -t -c "$T/t.ini" 2>&1)
ini "$T/t.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA"
is "-t: tls = yes with its CA: OK" "configuration OK" "$("$RLGATE" -t -c "$T/t.ini" 2>&1)"

# 1. A single server.
ini "$T/single.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA"
is "single: the probe loads the library over TLS" "probe OK" "$(probe "$T/single.ini")"
start_rlgate "$T/single.ini" single || exit 1
exact single 2
stop_rlgate; RLGATE_PORT=
audit_exact single 2
check "single: nothing logged at error level" test -z "$(grep -E 'error|warn' "$T/single.log")"
is "single: the server ran 8 FCALLs (and nothing else connected)" 8 "$(tcli "$P" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),.*/\1/p')"
L=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
check "rlgate-ctl versions over TLS lists $L" grep -q "$L" <("$TOP/fcgi/rlgate-ctl" -c "$T/single.ini" versions 2>&1)
check "rlgate-ctl peek over TLS: /r/single/k1 has 0 remaining" \
	grep -qi "remaining.*0" <("$TOP/fcgi/rlgate-ctl" -c "$T/single.ini" peek r /r/single/k1 2>&1)
check "rlgate-ctl reset over TLS: then 3 remaining" sh -c \
	"'$TOP/fcgi/rlgate-ctl' -c '$T/single.ini' reset r /r/single/k1 >/dev/null &&
	 '$TOP/fcgi/rlgate-ctl' -c '$T/single.ini' peek r /r/single/k1 | grep -qi 'remaining.*3'"
check "rlgate-ctl override over TLS (MULTI/EXEC): set" quiet \
	"$TOP/fcgi/rlgate-ctl" -c "$T/single.ini" override r /r/single/k2 unlimited
check "rlgate-ctl override over TLS: shown" grep -q unlimited <("$TOP/fcgi/rlgate-ctl" -c "$T/single.ini" override r /r/single/k2 2>&1)
check "and in Redis: one hash with the override" test "$(tcli "$P" --scan --pattern '*/r/single/k2*' | wc -l)" -ge 1

# 2. What must fail, and say why.
start_tls_redis other || exit 1
ini "$T/other.ini" "address = 127.0.0.1:$TLS_PORT" "tls = yes" "$CA"
start_rlgate "$T/other.ini" other || exit 1
is "another CA: on_error's answers (allow, deny)" "200 503" "$(req /r/a) $(req /d/a)"
stop_rlgate; RLGATE_PORT=
check "another CA: the log names the server and why" grep -q \
	"redis 127.0.0.1:$TLS_PORT: TLS handshake: certificate verify failed (unable to get local issuer certificate); answering with on_error" "$T/other.log"
wait_for 5 rows_at_least 2 "reason = 'redis_error'"
is "another CA: audit: both by on_error (d denied, r admitted)" "1 1 2" \
	"$(rows "rule = 'd' AND allowed = 0") $(rows "rule = 'r' AND allowed = 1") $(rows "reason = 'redis_error'")"
is "another CA: the probe says so" "probe: TLS handshake: certificate verify failed (unable to get local issuer certificate)" \
	"$(probe "$T/other.ini")"
# A reload reads the CA file again: wrong, then right.
cp "$TLS_DIR/other-ca.crt" "$T/ca-now.crt"
ini "$T/reload.ini" "address = 127.0.0.1:$P" "tls = yes" "tls_ca_file = $T/ca-now.crt"
start_rlgate "$T/reload.ini" reload || exit 1
is "reload: with another CA's file, on_error" 503 "$(req /d/reload)"
cp "$TLS_DIR/ca.crt" "$T/ca-now.crt"
kill -HUP "$RLGATE_PID"
decided() { [ "$(req /d/reload)" = 200 ]; }
check "reload: with the right CA's file, decided again" wait_for 10 decided
stop_rlgate; RLGATE_PORT=
is "reload: audit: by Redis after the reload" limit \
	"$(sql "SELECT reason FROM decisions WHERE rule = 'd' ORDER BY id DESC LIMIT 1")"
ini "$T/name.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA" "tls_server_name = redis.example"
is "a wrong tls_server_name" "probe: TLS handshake: certificate verify failed (hostname mismatch: not redis.example)" \
	"$(probe "$T/name.ini")"
ini "$T/name.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA" "tls_server_name = localhost"
is "tls_server_name = localhost (in the certificate)" "probe OK" "$(probe "$T/name.ini")"
# An address is checked against the certificate's IP names (never its
# DNS names or CN): the server's has IP:127.0.0.1; two more of the same CA
# have only DNS:localhost (and CN 127.0.0.1), and only IP:127.0.0.2.
ipcert() {
	openssl req -newkey rsa:2048 -nodes -keyout "$TLS_DIR/$1.key" -out "$TLS_DIR/$1.csr" \
		-subj "/CN=127.0.0.1" 2>/dev/null &&
	printf 'subjectAltName = %s\n' "$2" > "$TLS_DIR/$1.cnf" &&
	openssl x509 -req -in "$TLS_DIR/$1.csr" -CA "$TLS_DIR/ca.crt" -CAkey "$TLS_DIR/ca.key" \
		-CAcreateserial -days 1 -extfile "$TLS_DIR/$1.cnf" -out "$TLS_DIR/$1.crt" 2>/dev/null
}
ipcert dnsonly DNS:localhost && ipcert otherip IP:127.0.0.2 || { echo "# openssl could not make the certificates"; exit 1; }
ini "$T/ip.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA"
is "address 127.0.0.1, its IP name in the certificate: accepted" "probe OK" "$(probe "$T/ip.ini")"
ini "$T/ip.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA" "tls_server_name = 127.0.0.1"
is "tls_server_name = 127.0.0.1, in the certificate: accepted" "probe OK" "$(probe "$T/ip.ini")"
ini "$T/ip.ini" "address = 127.0.0.1:$P" "tls = yes" "$CA" "tls_server_name = 127.0.0.2"
is "tls_server_name = 127.0.0.2, not in it: refused" \
	"probe: TLS handshake: certificate verify failed (IP address mismatch: not 127.0.0.2)" "$(probe "$T/ip.ini")"
for c in dnsonly otherip; do
	start_tls_redis "$c" || exit 1
	ini "$T/ip.ini" "address = 127.0.0.1:$TLS_PORT" "tls = yes" "$CA"
	is "address 127.0.0.1, a certificate of the CA with only $(cat "$TLS_DIR/$c.cnf" | cut -d' ' -f3): refused" \
		"probe: TLS handshake: certificate verify failed (IP address mismatch: not 127.0.0.1)" "$(probe "$T/ip.ini")"
done
ini "$T/ip.ini" "address = 127.0.0.1:$TLS_PORT" "tls = yes" "$CA" "tls_server_name = 127.0.0.2"
is "... tls_server_name = 127.0.0.2, its IP name: accepted" "probe OK" "$(probe "$T/ip.ini")"
start_tls_redis expired || exit 1
ini "$T/exp.ini" "address = 127.0.0.1:$TLS_PORT" "tls = yes" "$CA"
is "an expired certificate" "probe: TLS handshake: certificate verify failed (certificate has expired)" \
	"$(probe "$T/exp.ini")"
TLS_AUTH_CLIENTS=yes start_tls_redis || exit 1
ini "$T/noclient.ini" "address = 127.0.0.1:$TLS_PORT" "tls = yes" "$CA"
check "client certificates required, none given: said" grep -q "^probe: FCALL_RO: .*(the server asked for a client certificate: tls_cert_file)$" \
	<(probe "$T/noclient.ini")
ini "$T/client.ini" "address = 127.0.0.1:$TLS_PORT" "tls = yes" "$CA" \
	"tls_cert_file = $TLS_DIR/client.crt" "tls_key_file = $TLS_DIR/client.key"
is "client certificates required and given" "probe OK" "$(probe "$T/client.ini")"
start_redis || exit 1
ini "$T/plain.ini" "address = 127.0.0.1:$REDIS_PORT" "tls = yes" "$CA"
is "tls = yes at a plain port: said" "probe: TLS handshake: timed out after 2000 ms (is it a TLS port?)" "$(probe "$T/plain.ini")"
is "tls = yes at a plain port: rlgate-ctl names the address once, exit 2" \
	"rlgate-ctl: redis 127.0.0.1:$REDIS_PORT: TLS handshake: timed out after 2000 ms (is it a TLS port?) 2" \
	"$("$TOP/fcgi/rlgate-ctl" -c "$T/plain.ini" peek r /r/x 2>&1) $?"
# tls = no at a TLS port: the server drops the connection without a word
# (a reset, or a close); wherever rlgate says why, it asks.
ini "$T/notls.ini" "address = 127.0.0.1:$P"
hint="before the server said anything (is it a TLS port? then set tls = yes)"
out=$(probe "$T/notls.ini")
check "tls = no at a TLS port: the probe asks ($out)" eval '[[ $out == "probe: FCALL_RO: "*" $hint" ]]'
out=$("$TOP/fcgi/rlgate-ctl" -c "$T/notls.ini" peek r /r/x 2>&1)
check "tls = no at a TLS port: rlgate-ctl peek asks ($out)" \
	eval '[[ $out == "rlgate-ctl: redis 127.0.0.1:$P: FCALL_RO: "*" $hint" ]]'
out=$("$TOP/fcgi/rlgate-ctl" -c "$T/notls.ini" versions 2>&1)
check "tls = no at a TLS port: rlgate-ctl versions asks ($out)" \
	eval '[[ $out == "rlgate-ctl: redis 127.0.0.1:$P: FUNCTION LIST: "*" $hint" ]]'
start_rlgate "$T/notls.ini" notls || exit 1
is "tls = no at a TLS port: on_error's answers (allow, deny)" "200 503" "$(req /r/notls) $(req /d/notls)"
stop_rlgate; RLGATE_PORT=
check "tls = no at a TLS port: the gateway's log asks, at request time" \
	grep -qF "$hint; answering with on_error until it is back" "$T/notls.log"

# 3. A cluster with tls-cluster yes: the nodes announce their TLS ports.
start_tls_cluster || { not_ok "cluster starts"; finish; exit; }
M=("${CLUSTER_PORTS[@]:0:3}")
ini "$T/cluster.ini" "mode = cluster" "address = 127.0.0.1:${CLUSTER_PORTS[0]} 127.0.0.1:${CLUSTER_PORTS[1]}" "tls = yes" "$CA"
printf '\n[rule:c]\npath = /c/*\nkey = {path}\nlimit = 30\nwindow = 1h\non_error = deny\n' >> "$T/cluster.ini"
is "cluster: the probe loads the library on every master over TLS" "probe OK" "$(probe "$T/cluster.ini")"
start_rlgate "$T/cluster.ini" cluster || exit 1
exact cluster 9
audit_exact cluster 9
held=0
for p in "${M[@]}"; do
	n=$(tcli "$p" --scan --pattern 'rl:{r:/r/cluster/*' | grep -c .)
	[ "$n" -gt 0 ] && held=$((held + 1))
done
is "cluster: every master holds some of the 9 keys" 3 "$held"

# The master of /c/k1 killed under load (6 keys, rule c: 30 per hour,
# on_error deny): until its replica takes over, its keys get 503s
# (redis_error); the other masters' keys never do; every key ends with
# exactly 30 admitted, and rlgate-report --verify agrees.
KEYS="k1 k2 k3 k4 k5 k6"
loader() {
	local k
	while [ ! -e "$T/stop" ]; do
		for k in $KEYS; do echo "$k $(req "/c/$k")"; done
	done > "$T/load.txt"
}
loader & LOADER=$!
lines_of() { [ "$(grep -c "^$1 ${3:-}" "$T/load.txt" 2>/dev/null)" -ge "$2" ]; }
wait_for 30 lines_of k6 5 || echo "# the load did not start"
VICTIM=
for p in "${M[@]}"; do [ "$(tcli "$p" EXISTS 'rl:{c:/c/k1}')" = 1 ] && VICTIM=$p; done
REPLICA=
for p in "${CLUSTER_PORTS[@]:3}"; do
	tcli "$p" ROLE | sed -n 3p | grep -qx "$VICTIM" && REPLICA=$p
done
check "cluster: /c/k1's master ($VICTIM) has a replica ($REPLICA)" test -n "$VICTIM" -a -n "$REPLICA"
VK=() OK=()
for k in $KEYS; do
	if [ "$(tcli "$VICTIM" EXISTS "rl:{c:/c/$k}")" = 1 ]; then VK+=("'/c/$k'"); else OK+=("'/c/$k'"); fi
done
VK=$(IFS=,; echo "${VK[*]}") OK=$(IFS=,; echo "${OK[*]}")
kill_node "$VICTIM"
ID0=$(sql "SELECT max(id) FROM decisions")
back() { [ "$(rows "key = '/c/k1' AND reason = 'limit' AND id > $ID0")" -ge 1 ]; }
wait_for 30 back
check "cluster: /c/k1 decided again after the failover" back
all_done() { local k; for k in $KEYS; do lines_of "$k" 3 429 || return 1; done; }
wait_for 60 all_done
touch "$T/stop"; wait "$LOADER"
stop_rlgate; RLGATE_PORT=
e503=$(grep -c ' 503$' "$T/load.txt")
check "cluster: meanwhile the killed master's keys ($VK) answered by on_error = deny ($e503 503s)" test "$e503" -gt 0
is "cluster: each a redis_error row, denied; none for the other masters' keys" "$e503 0" \
	"$(rows "key IN ($VK) AND reason = 'redis_error' AND allowed = 0") $(rows "key IN (${OK:-''}) AND reason = 'redis_error'")"
is "cluster: every key admitted exactly 30 times" "30 30 30 30 30 30" \
	"$(for k in $KEYS; do rows "rule = 'c' AND key = '/c/$k' AND allowed = 1"; done | paste -sd' ')"
is "cluster: the answers agree (6 x 30 200s)" 180 "$(grep -c ' 200$' "$T/load.txt")"
"$REPORT" --verify -r c "$AUDIT_DB" > "$T/verify.txt" 2>&1
is "cluster: rlgate-report --verify finds no violation" 0 "$?"
is "cluster: the killed master's outage logged once" 1 "$(grep -c "redis 127.0.0.1:$VICTIM: .*answering with on_error" "$T/cluster.log")"

# 4. Sentinel: the Sentinels and the master they name, all over TLS.
start_tls_sentinel_set || { not_ok "sentinel starts"; finish; exit; }
S=("${SENTINEL_PORTS[@]}")
ini "$T/sentinel.ini" "mode = sentinel" "address = 127.0.0.1:${S[0]} 127.0.0.1:${S[1]}" \
	"master_name = mymaster" "tls = yes" "$CA"
is "sentinel: the probe finds the master and loads the library over TLS" "probe OK" "$(probe "$T/sentinel.ini")"
start_rlgate "$T/sentinel.ini" sentinel || exit 1
exact sentinel 2
stop_rlgate; RLGATE_PORT=
audit_exact sentinel 2
is "sentinel: the master ran the 8 FCALLs" 8 "$(tcli "$SENTINEL_MASTER_PORT" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),.*/\1/p')"
check "sentinel: nothing logged at error level" test -z "$(grep -E 'error|warn' "$T/sentinel.log")"
# kill -9 the master: the Sentinels (over TLS) promote the replica and
# announce it (+switch-master, on rlgate's TLS subscription); decisions
# come back at the replica.
start_rlgate "$T/sentinel.ini" sentinel-failover || exit 1
is "sentinel: before the kill, decided" 200 "$(req /d/sf1)"
kill_node "$SENTINEL_MASTER_PORT"
sdecided() { case $(req /d/sf2) in 200|429) return 0;; esac; return 1; }
check "sentinel: decided again after the failover" wait_for 30 sdecided
check "sentinel: rlgate heard +switch-master over TLS" wait_for 10 grep -q \
	"sentinel: +switch-master mymaster 127.0.0.1 $SENTINEL_MASTER_PORT 127.0.0.1 $SENTINEL_REPLICA_PORT" "$T/sentinel-failover.log"
stop_rlgate; RLGATE_PORT=
is "sentinel: the replica is the master now" master "$(tcli "$SENTINEL_REPLICA_PORT" ROLE | head -1)"

finish
