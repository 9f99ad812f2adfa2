#!/bin/bash
# Operations, 3 of 5 (tests/it/ops_lib.sh starts the gateway): dry run
# per rule and for the whole gateway (as a responder, through cgi-fcgi).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/ops_lib.sh"

ops_config
ops_start
# The whole gateway in dry run (below) is asked about plain and flood over
# their limits (5 a minute each).
for i in $(seq 6); do status "$BASE/plain/a"; status "$BASE/flood/a"; done > /dev/null

# --- Dry run ---------------------------------------------------------------

is "dry_run rule: never denies (authorizer)" "200 200 200 200" "$(status "$BASE/dry/a") $(status "$BASE/dry/a") $(status "$BASE/dry/a") $(status "$BASE/dry/a")"
wait_for 5 rule_rows dry 4
is "dry_run rule: 2 admitted, 2 recorded as dry_run with status 200" "1|limit|2 0|dry_run|2" \
	"$(sql "SELECT allowed, reason, count(*) FROM decisions WHERE rule='dry' AND status=200 GROUP BY 1, 2 ORDER BY 1 DESC" | paste -sd' ')"
fcgi_get "$RLGATE_PORT" /dry/a > "$T/dry.out"
is "dry_run rule as a responder: 200" "Status: 200 OK" "$(head -1 "$T/dry.out")"
is "dry_run rule as a responder: RateLimit-Policy" '"dry";q=2;w=60' "$(sed -n 's/^RateLimit-Policy: //p' "$T/dry.out")"
check "dry_run rule as a responder: RateLimit r=0 (it would be denied), t 1..60" grep -qE '^RateLimit: "dry";r=0;t=([1-9]|[1-5][0-9]|60)$' "$T/dry.out"
check "dry_run rule as a responder: the body says dry_run" grep -q '"rule":"dry",[^}]*"allowed":false,"reason":"dry_run"' "$T/dry.out"

# [gateway] dry_run = yes: a second gateway on the same Redis, every rule in
# dry run; plain and flood are over their limits there already.
sed -e '0,/^\[gateway\]$/ s//[gateway]\ndry_run = yes/' -e "s|^database = .*|database = $T/dry.db|" "$T/rlgate.ini" > "$T/dry.ini"
MAIN_PID=$RLGATE_PID
RLGATE_PORT=$(free_port)
DRY_PORT=$RLGATE_PORT
start_rlgate "$T/dry.ini" rlgate-dry || exit 1
c0=$(redis_calls fcall)
fcgi_get "$DRY_PORT" /plain/a > "$T/gdry.out"
is "global dry run: a request over the limit gets 200" "Status: 200 OK" "$(head -1 "$T/gdry.out")"
check "global dry run: with RateLimit r=0, t 1..60" grep -qE '^RateLimit: "plain";r=0;t=([1-9]|[1-5][0-9]|60)$' "$T/gdry.out"
check "global dry run: reason dry_run" grep -q '"reason":"dry_run"' "$T/gdry.out"
fcgi_get "$DRY_PORT" /flood/a > "$T/gdry2.out"
is "global dry run: the deny cache is not used" "Status: 200 OK $((c0 + 2))" "$(head -1 "$T/gdry2.out") $(redis_calls fcall)"
dry_rows() { [ "$(sqlite3 -batch -noheader "$T/dry.db" "SELECT count(*) FROM decisions WHERE reason='dry_run'" 2>/dev/null)" -ge 2 ]; }
check "global dry run: audit rows say dry_run, status 200" wait_for 5 dry_rows
is "global dry run: no row denies" 0 "$(sqlite3 -batch -noheader "$T/dry.db" "SELECT count(*) FROM decisions WHERE status<>200")"
stop_rlgate

finish
