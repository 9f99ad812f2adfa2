#!/bin/bash
# Two versions of rlgate on one Redis, as during a rolling upgrade: this
# build (A) and a second build (B, "the newer") whose Lua library differs by
# one comment, each behind its own lighttpd, both under load at the same
# time on one limit. Each version loads its own library (rlgate_<12 hex>)
# exactly once and never replaces the other's (INFO commandstats: FUNCTION
# LOAD calls); no request is decided by on_error (audit reason
# redis_error); together they admit exactly the limit, and
# rlgate-report --verify over both audits finds no violation; B reads the
# state A wrote (a key A counted first, B goes on from there).
# rlgate-ctl versions lists both and marks its own; unload refuses this
# build's; prune removes the other, which its gateway loads again at its
# next request.
. "$(dirname "$0")/../lib.sh"
CTL=$TOP/fcgi/rlgate-ctl
REPORT=$TOP/reports/rlgate-report
LOAD_S=${LOAD_S:-5}	# the issue's 10 s: LOAD_S=10
LIMIT=400

# B: the tree's build files copied with their times (only the library and
# what embeds it are rebuilt), one Lua comment added.
mkdir -p "$T/b"
mkdir -p "$T/b/debian"
cp -rp "$TOP/fcgi" "$TOP/lua" "$TOP/Makefile" "$T/b/" || exit 1
mkdir -p "$T/b/build" && cp -rp "$TOP/build/fcgi" "$T/b/build/" || exit 1	# the objects
cp -p "$TOP/debian/changelog" "$T/b/debian/" || exit 1	# the version's source
echo '-- the newer build of tests/it/it_versions.sh' >> "$T/b/lua/decide.lua"
make -s -C "$T/b" fcgi/rlgate fcgi/rlgate-ctl > "$T/b-make.log" 2>&1 ||
	{ cat "$T/b-make.log"; not_ok "the second build"; finish; exit 1; }
name_of() { sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$1/fcgi/scripts.c"; }
LA=$(name_of "$TOP"); LB=$(name_of "$T/b")
check "two builds, two library names ($LA, $LB)" test -n "$LA" -a -n "$LB" -a "$LA" != "$LB"

start_redis || exit 1
DOCROOT=$T/www; mkdir -p "$DOCROOT/v"; echo item > "$DOCROOT/v/item"
gw_ini() {	# gw_ini FILE AUDIT_DB
	AUDIT_DB=$2
	cat > "$1" <<-EOF
	[gateway]
	workers = 2

	$(ini_redis_audit)

	[rule:shared]
	path = /v/*
	key = {query.k}
	algorithm = fixed_window
	limit = $LIMIT
	window = 1h
	EOF
}
gw_ini "$T/a.ini" "$T/a.db"
gw_ini "$T/b.ini" "$T/b.db"
loads() { redis-cli -p "$REDIS_PORT" INFO commandstats | tr -d '\r' |
	sed -n 's/^cmdstat_function|load:calls=\([0-9]*\),.*/\1/p'; }

# A starts (and loads its library), then B: one load each.
start_rlgate "$T/a.ini" a || exit 1; PA=$RLGATE_PORT PIDA=$RLGATE_PID; RLGATE_PORT=
RLGATE=$T/b/fcgi/rlgate start_rlgate "$T/b.ini" b || exit 1; PB=$RLGATE_PORT PIDB=$RLGATE_PID
RLGATE_PORT=$PA start_shipped_lighttpd || exit 1; HA=$HTTP_PORT; HTTP_PORT=
RLGATE_PORT=$PB start_shipped_lighttpd || exit 1; HB=$HTTP_PORT
is "both libraries loaded, side by side" "$(printf '%s\n' "$LA" "$LB" | sort | paste -sd' ')" \
	"$(rcli FUNCTION LIST LIBRARYNAME 'rlgate_*' | grep -x 'rlgate_[0-9a-f]*' | sort | paste -sd' ')"

# The state B reads: A counts 3 of the limit on a key first, then B goes
# on from there; every one of B's is denied after LIMIT - 3.
for _ in 1 2 3; do status "http://127.0.0.1:$HA/v/item?k=carry" > /dev/null; done
ab_run -n $((LIMIT + 5)) -c 4 "http://127.0.0.1:$HB/v/item?k=carry"
is "B goes on from A's count: $((LIMIT - 3)) admitted of $((LIMIT + 5))" "$((LIMIT + 5)) 8" \
	"$AB_COMPLETE $AB_NON2XX"

# Both under load at once, one key, for LOAD_S seconds.
ab -q -t "$LOAD_S" -n 1000000 -c 4 "http://127.0.0.1:$HA/v/item?k=both" > "$T/ab-a" 2>&1 &
AB1=$!
ab -q -t "$LOAD_S" -n 1000000 -c 4 "http://127.0.0.1:$HB/v/item?k=both" > "$T/ab-b" 2>&1 &
AB2=$!
wait $AB1 $AB2
na=$(sed -n 's/^Complete requests: *//p' "$T/ab-a"); nb=$(sed -n 's/^Complete requests: *//p' "$T/ab-b")
echo "# under load for $LOAD_S s: A answered $na, B $nb requests"
check "both answered more than the limit together ($na + $nb > $LIMIT)" test $((na + nb)) -gt $LIMIT
check "each answered some (A $na, B $nb)" test "$na" -gt 0 -a "$nb" -gt 0
is "exactly one FUNCTION LOAD per version" 2 "$(loads)"

# Stopped, each gateway has written every row.
RLGATE_PID=$PIDA stop_rlgate
RLGATE_PID=$PIDB stop_rlgate
both() { sqlite3 -batch -noheader "$T/a.db" "SELECT count(*) FROM decisions WHERE $1"; }
rows_b() { sqlite3 -batch -noheader "$T/b.db" "SELECT count(*) FROM decisions WHERE $1"; }
is "no request decided by on_error (reason redis_error), A and B" "0 0" \
	"$(both "reason = 'redis_error'") $(rows_b "reason = 'redis_error'")"
adm_a=$(both "key = 'both' AND allowed = 1"); adm_b=$(rows_b "key = 'both' AND allowed = 1")
is "A and B together admitted exactly the limit ($adm_a + $adm_b)" $LIMIT $((adm_a + adm_b))
check "both versions admitted some of it (A $adm_a, B $adm_b)" test "$adm_a" -gt 0 -a "$adm_b" -gt 0
"$REPORT" --verify "$T/a.db" "$T/b.db" > "$T/verify.out" 2>&1
is "rlgate-report --verify over both audits: exit 0" 0 $?
check "the carried key: B admitted $((LIMIT - 3)) after A's 3" \
	test "$(both "key = 'carry' AND allowed = 1") $(rows_b "key = 'carry' AND allowed = 1")" = "3 $((LIMIT - 3))"
check "neither log names a failed FUNCTION LOAD" test -z "$(grep -h 'FUNCTION LOAD' "$T/a.log" "$T/b.log")"

# rlgate-ctl: versions, unload, prune.
"$CTL" -c "$T/a.ini" versions > "$T/versions-a"
is "versions (A's ctl): both, A's marked" "$(printf '%s\t1/1 masters\tthis build\n%s\t1/1 masters' "$LA" "$LB" | sort)" \
	"$(sort "$T/versions-a")"
is "versions (B's ctl): B's marked" "$LB	1/1 masters	this build" \
	"$("$T/b/fcgi/rlgate-ctl" -c "$T/b.ini" versions | grep 'this build')"
"$CTL" -c "$T/a.ini" unload "$LA" > /dev/null 2> "$T/unload-own.err"
is "unload of this build's library: refused (exit 1)" 1 $?
check "and says why" grep -q "is this build's library" "$T/unload-own.err"
"$CTL" -c "$T/a.ini" unload nothing 2> /dev/null
is "unload of a name that is no rlgate library's: exit 1" 1 $?
is "prune (B's ctl) removes A's, keeps B's" "127.0.0.1:$REDIS_PORT: unloaded $LA" \
	"$("$T/b/fcgi/rlgate-ctl" -c "$T/b.ini" prune)"
is "only B's library is left" "$LB" "$(rcli FUNCTION LIST LIBRARYNAME 'rlgate_*' | grep -x 'rlgate_[0-9a-f]*')"
# A, started again, loads its own again (once), and so does it at its
# next request when its library went while it ran.
RLGATE_PORT=$PA start_rlgate "$T/a.ini" a2 || exit 1
is "A, restarted after prune: its library loaded once more" 3 "$(loads)"
rcli FUNCTION DELETE "$LA" > /dev/null
is "A's library deleted under A: the next request is decided by Redis (over the limit: 429)" 429 \
	"$(status "http://127.0.0.1:$HA/v/item?k=both")"
is "and it loaded its library again, once" 4 "$(loads)"
is "both libraries are there again" 2 "$(rcli FUNCTION LIST LIBRARYNAME 'rlgate_*' | grep -cx 'rlgate_[0-9a-f]*')"

finish
