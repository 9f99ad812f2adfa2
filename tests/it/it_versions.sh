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
# rlgate-ctl versions lists both and marks its own, and rlgate -V names
# each build's; unload refuses this build's; prune removes the other, which
# its gateway loads again at its next request; with none loaded, versions
# says so. A library under this build's name that rlgate did not write (a
# hand-made one; a copy of this build's edited by hand) is never replaced,
# neither by the gateway (it tries to load its own, answers with on_error
# and says why once) nor by rlgate-ctl load (exit 2, says why; it compares
# the code).
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
v_of() { "$1" -V | sed -n 's/^rlgate [^ ]* (Lua library \(rlgate_[0-9a-f]*\))$/\1/p'; }
is "rlgate -V names the library its build carries (A, B), as versions lists it" "$LA $LB" \
	"$(v_of "$RLGATE") $(v_of "$T/b/fcgi/rlgate")"
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
stop_rlgate

rcli FUNCTION FLUSH > /dev/null
is "versions with no library loaded says so" "no rlgate library on the 1 master (this build's, $LA: rlgate-ctl load)" \
	"$("$CTL" -c "$T/a.ini" versions)"

# A library under this build's name that rlgate did not write. The
# gateway's user may load functions: it tries, never with REPLACE.
rcli FUNCTION LOAD "#!lua name=$LA
redis.register_function('${LA}_hello', function() return 'hand-made' end)" > /dev/null
hand() { rcli FUNCTION LIST LIBRARYNAME "$LA" WITHCODE | grep -c "$1"; }
notours="library $LA there is not this build's (it has no function ${LA}_version); rlgate does not replace it: delete it (FUNCTION DELETE $LA), then run rlgate-ctl load"
l0=$(loads)
RLGATE_PORT=$PA start_rlgate "$T/a.ini" a3 || exit 1
codes="$(status "http://127.0.0.1:$HA/v/item?k=hand") $(status "http://127.0.0.1:$HA/v/item?k=hand")"
sleep 1		# past the back-off (at most 500 ms): it tries again
codes="$codes $(status "http://127.0.0.1:$HA/v/item?k=hand") $(status "http://127.0.0.1:$HA/v/item?k=hand")"
is "a hand-made $LA: each request answered by on_error (allow)" "200 200 200 200" "$codes"
check "the gateway tried to load its own, at start-up and again ($(($(loads) - l0)) FUNCTION LOADs)" \
	test $(($(loads) - l0)) -ge 2
stop_rlgate
is "and said why once" 1 "$(grep -cF "$notours" "$T/a3.log")"
is "audit: the 4 by on_error" 4 "$(both "key = 'hand' AND reason = 'redis_error'")"
is "the hand-made library is still there, its code as it was" 1 "$(hand "return 'hand-made'")"
"$CTL" -c "$T/a.ini" load > /dev/null 2> "$T/load-hand.err"
is "rlgate-ctl load: exit 2" 2 $?
is "and it says why" "rlgate-ctl: redis 127.0.0.1:$REDIS_PORT: $notours" "$(cat "$T/load-hand.err")"
is "the hand-made library is still there after rlgate-ctl load" 1 "$(hand "return 'hand-made'")"
# This build's library edited by hand (its version function answers this
# build's version): the gateway cannot tell; rlgate-ctl load compares the
# code, and leaves it.
rcli FUNCTION DELETE "$LA" > /dev/null
LUA_LIB="$TOP/lua/prelude.lua $(ls "$TOP"/lua/*.lua | grep -v -e '/prelude.lua$' -e '/decide.lua$' -e '/rlgate.lua$' | sort | tr '\n' ' ')$TOP/lua/decide.lua"
# shellcheck disable=SC2086
sh "$TOP/fcgi/embed.sh" -l $LUA_LIB | sed 's/^-- FCALL_RO LIB_version 0: the library version\.$/-- edited by hand/' > "$T/edited.lua"
is "the edited copy loaded under $LA" "$LA" "$(rcli -x FUNCTION LOAD < "$T/edited.lua")"
"$CTL" -c "$T/a.ini" load > /dev/null 2> "$T/load-edited.err"
is "rlgate-ctl load of an edited copy: exit 2, other code" \
	"2 rlgate-ctl: redis 127.0.0.1:$REDIS_PORT: library $LA there is not this build's (this build's version, other code); rlgate does not replace it: delete it (FUNCTION DELETE $LA), then run rlgate-ctl load" \
	"$? $(cat "$T/load-edited.err")"
is "the edited copy is still there" 1 "$(hand "edited by hand")"

finish
