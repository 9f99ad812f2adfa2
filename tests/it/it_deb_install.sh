#!/bin/bash
# The Debian package installed on this machine, as an operator installs it,
# and removed again. Needs root, and a machine where no package rlgate (nor
# its /etc/rlgate or /var/lib/rlgate) is present: an operator's install is
# never touched; the test says why it skipped.
#
# 1. dpkg -i: the files where the package says, with their modes and owners,
#    the rlgate system user, rlgate.socket enabled (not rlgate-tcp.socket),
#    rlgate -t accepts the packaged configuration.
# 2. The installed /usr/sbin/rlgate, as user rlgate, on a unix socket that
#    systemd-socket-activate holds as rlgate.socket says (0660 root:www-data),
#    behind lighttpd (conf/lighttpd-spawn.conf): a copy of the packaged
#    configuration (private Redis and audit database) plus a limit of 5 per
#    hour: 5 x 200 then 429, one audit row each.
# 3. The same binary on TCP as rlgate-tcp.socket and rlgate.service run it
#    (the installed units' ExecStart, verbatim), behind Apache
#    (conf/apache.conf), with /etc/rlgate/rlgate.ini as the operator edited
#    it (the private Redis): the seeds' demo gives 100 + 10, the audit rows
#    in /var/lib/rlgate.
# 4. The README's recipes, run as written (README.md's blocks, read here):
#    spawn-fcgi (it makes /run/rlgate and the log first), then lighttpd
#    with Debian's lighttpd.conf (copied, its port and files private:
#    systemctl, lighty-enable-mod and apt-get are stand-ins for what they
#    do) and the README's 50-rlgate.conf, status_path set in the same step:
#    a request decided, /rlgate-status/health answered.
# 5. dpkg -i of the same package again keeps the edited conffile (no prompt,
#    no .dpkg-new or .dpkg-dist) and the audit database. The README's
#    non-interactive upgrade to a next version whose packaged rlgate.ini
#    changed too (tests/tools/deb_next.sh) keeps the edited file and puts
#    the new one beside it as .dpkg-dist; the README's rollback to this
#    version (make deb kept its package) keeps it too.
# 6. dpkg --purge removes the package's files, /etc/rlgate and /var/lib/rlgate
#    and nothing else; the rlgate user stays, as Debian keeps system users.
# On exit, even after a failure: the package purged and the rlgate user and
# group removed, if this test installed them.
#
# The .deb is build/deb's (make deb), which tests/it/it_deb.sh builds in the
# same run; it is built here when missing or made from another tree.
. "$(dirname "$0")/../lib.sh"

skip() { ok "skipped: $*"; finish; exit; }
[ "$(id -u)" = 0 ] || skip "not root (dpkg -i needs root)"
for c in dpkg-buildpackage dh systemd-socket-activate setpriv lighttpd apache2 ab; do
	command -v "$c" > /dev/null || { echo "# $c is missing (tests/deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
done
# Two runs at once (two worktrees) would install over each other: one at a
# time. flock on a directory that is always there leaves no lock file
# behind; dpkg's own locks are fcntl locks on files, which this is not.
exec 9< /var/lib/dpkg
flock -n 9 || skip "another tests/it/it_deb_install.sh is running on this machine"
pkg_state() { dpkg-query -W -f='${db:Status-Abbrev}' rlgate 2>/dev/null; }
state=$(pkg_state)
case $state in ''|'un '*) ;; *) skip "a package rlgate is on this machine (dpkg: '$state'): an operator's, left alone";; esac
for d in /etc/rlgate /var/lib/rlgate /run/rlgate /var/log/rlgate.log; do
	[ -e "$d" ] && skip "$d exists (an operator's files, which a purge would remove): left alone"
done

# dpkg ARGS...: dpkg, noninteractive, waiting (up to 2 min) while another
# apt or dpkg holds its lock. Output in $DPKG_OUT.
DPKG_OUT=$T/dpkg.out
dpkg_wait() {
	local rc
	for _ in $(seq 120); do
		DEBIAN_FRONTEND=noninteractive dpkg "$@" < /dev/null > "$DPKG_OUT" 2>&1
		rc=$?
		[ "$rc" != 0 ] && grep -qE 'locked by another process|database is locked' "$DPKG_OUT" ||
			return "$rc"
		sleep 1
	done
	return "$rc"
}
# dpkg_filtered PATH: this machine's dpkg does not install PATH (path-exclude
# in /etc/dpkg, as Debian's slim images have for /usr/share/man and doc;
# the last matching path-exclude or path-include decides). dpkg -L still
# lists such files and dpkg --verify says they are missing.
mapfile -t DPKG_FILTERS < <(cat /etc/dpkg/dpkg.cfg.d/* /etc/dpkg/dpkg.cfg 2>/dev/null |
	sed -n 's/^[ \t]*\(path-exclude\|path-include\)[ \t=][ \t]*\([^ \t]*\).*/\1 \2/p')
dpkg_filtered() {
	local f out=1
	for f in "${DPKG_FILTERS[@]}"; do
		# shellcheck disable=SC2053	# the pattern is a glob, as dpkg's
		[[ $1 == ${f#* } ]] || continue
		case $f in path-exclude*) out=0;; *) out=1;; esac
	done
	return $out
}
[ ${#DPKG_FILTERS[@]} = 0 ] || echo "# dpkg filters paths here: ${DPKG_FILTERS[*]}"
# verify: dpkg --verify rlgate, but for the files dpkg filters out here.
verify() {
	dpkg --verify rlgate 2>&1 | while read -r line; do
		case $line in "missing "*) dpkg_filtered "${line##* }" && continue;; esac
		echo "$line"
	done
}

# exit_0 WHAT RC: RC is 0, else dpkg's output is shown.
exit_0() { is "$1: exit 0" 0 "$2"; [ "$2" = 0 ] || sed 's/^/# /' "$DPKG_OUT"; }

USER_WAS=$(getent passwd rlgate)
GROUP_WAS=$(getent group rlgate)
INSTALLED="" SPAWNED="" RECIPE=""
# A file beside /var/lib/rlgate, whose name starts the same: a purge keeps it.
BESIDE=$(mktemp /var/lib/rlgate.keep.XXXXXX)
undo() {
	cleanup	# lib.sh's: stops the processes started here, removes $T
	if [ -n "$INSTALLED" ] && [ -n "$(pkg_state | sed -n '/^un /!p')" ]; then
		DPKG_OUT=$(mktemp)
		dpkg_wait --purge rlgate || { echo "# cleanup: dpkg --purge rlgate failed:"; cat "$DPKG_OUT"; }
		rm -f "$DPKG_OUT"
	fi
	rm -f "$BESIDE"
	# The spawn-fcgi recipe's process and files, if a failure left them.
	[ -n "$SPAWNED" ] && kill "$SPAWNED" 2>/dev/null
	[ -n "$RECIPE" ] && rm -rf /run/rlgate /var/log/rlgate.log
	if [ -n "$INSTALLED" ]; then
		[ -z "$USER_WAS" ] && getent passwd rlgate > /dev/null && userdel rlgate
		[ -z "$GROUP_WAS" ] && getent group rlgate > /dev/null && groupdel rlgate
	fi
}
trap undo EXIT
# Every path named *rlgate* where a package puts things: after the purge,
# the same as before the install.
rlgate_paths() { find /etc /usr /lib /var/lib /run -name '*rlgate*' 2>/dev/null | sort; }
BEFORE=$(rlgate_paths)

# ---- the package ------------------------------------------------------------
VERSION=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)
DEB=$TOP/build/deb/rlgate_${VERSION}_$(dpkg --print-architecture).deb
# built_here: the .deb was made from this tree as it is now (make deb copies
# git's files to build/deb/src).
built_here() {
	[ -f "$DEB" ] && git -C "$TOP" rev-parse --is-inside-work-tree > /dev/null 2>&1 || return 1
	git -C "$TOP" ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do
		[ -e "$TOP/$f" ] || continue
		cmp -s "$TOP/$f" "$TOP/build/deb/src/$f" || { echo "# build/deb was made from another $f: make deb"; exit 1; }
	done
}
if built_here; then echo "# using $DEB (make deb, this tree)"
else make -s -C "$TOP" deb > "$T/make-deb.log" 2>&1 || { cat "$T/make-deb.log"; not_ok "make deb"; finish; exit 1; }
fi
[ -f "$DEB" ] || { not_ok "make deb made $DEB"; finish; exit 1; }
NEXT_DEB=$(bash "$TOP/tests/tools/deb_next.sh" 2> "$T/deb-next.log") ||
	{ cat "$T/deb-next.log"; not_ok "tests/tools/deb_next.sh"; finish; exit 1; }
NEXT=$(dpkg-deb -f "$NEXT_DEB" Version)

# readme_block PATTERN: the README's ```sh block with a line that matches
# PATTERN (awk), its continued lines joined.
readme_block() {
	awk -v pat="$1" '/^```sh$/ { inb = 1; b = ""; hit = 0; next }
		inb && /^```$/ { inb = 0; if (hit) { printf "%s", b; exit } next }
		inb { b = b $0 "\n"; if ($0 ~ pat) hit = 1 }' "$TOP/README.md" |
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta'
}

# ---- 1. dpkg -i -------------------------------------------------------------
INSTALLED=yes
dpkg_wait -i "$DEB"
exit_0 "dpkg -i" "$?"
is "dpkg: rlgate $VERSION installed" "ii |$VERSION" "$(dpkg-query -W -f='${db:Status-Abbrev}|${Version}' rlgate)"
dpkg -L rlgate > "$T/dpkg-L"
is "dpkg -L: the package's files (directories aside)" "/etc/rlgate/rlgate.ini
/lib/systemd/system/rlgate-tcp.socket
/lib/systemd/system/rlgate.service
/lib/systemd/system/rlgate.socket
/usr/bin/rlgate-report
/usr/lib/rlgate/rlgate.cgi
/usr/sbin/rlgate
/usr/sbin/rlgate-ctl
/usr/share/doc/rlgate/README.md.gz
/usr/share/doc/rlgate/changelog.Debian.gz
/usr/share/doc/rlgate/copyright
$(cd "$TOP" && for f in conf/*.conf; do echo "/usr/share/doc/rlgate/examples/${f#conf/}"; done)
/usr/share/lintian/overrides/rlgate
/usr/share/man/man1/rlgate-report.1.gz
/usr/share/man/man5/rlgate.ini.5.gz
/usr/share/man/man8/rlgate-ctl.8.gz
/usr/share/man/man8/rlgate.8.gz" "$(while read -r f; do [ -d "$f" ] || echo "$f"; done < "$T/dpkg-L" | sort)"
is "dpkg --verify: every file as packaged" "" "$(verify)"
modes() { for f in "$@"; do stat -c '%A %U:%G %n' "$f"; done; }
is "modes and owners" "-rwxr-xr-x root:root /usr/sbin/rlgate
-rwxr-xr-x root:root /usr/sbin/rlgate-ctl
-rwxr-xr-x root:root /usr/bin/rlgate-report
-rwxr-xr-x root:root /usr/lib/rlgate/rlgate.cgi
drwxr-xr-x root:root /etc/rlgate
-rw-r----- root:rlgate /etc/rlgate/rlgate.ini
drwxr-x--- rlgate:rlgate /var/lib/rlgate
-rw-r--r-- root:root /lib/systemd/system/rlgate.service
-rw-r--r-- root:root /lib/systemd/system/rlgate.socket
-rw-r--r-- root:root /lib/systemd/system/rlgate-tcp.socket" \
	"$(modes /usr/sbin/rlgate /usr/sbin/rlgate-ctl /usr/bin/rlgate-report /usr/lib/rlgate/rlgate.cgi \
		/etc/rlgate /etc/rlgate/rlgate.ini /var/lib/rlgate /lib/systemd/system/rlgate.service \
		/lib/systemd/system/rlgate.socket /lib/systemd/system/rlgate-tcp.socket)"
IFS=: read -r _ _ uid gid _ home shell <<< "$(getent passwd rlgate)"
is "the rlgate system user: a system UID, group rlgate" "yes rlgate" \
	"$([ -n "$uid" ] && [ "$uid" -lt 1000 ] && echo yes) $(getent group "$gid" | cut -d: -f1)"
is "its home and shell" "/var/lib/rlgate /usr/sbin/nologin" "$home $shell"
MAN8=/usr/share/man/man8/rlgate.8.gz
if dpkg_filtered "$MAN8"; then echo "# dpkg does not install man pages here: not looked for"
else
	is "the man page rlgate(8), 0644" "-rw-r--r-- root:root" "$(stat -c '%A %U:%G' "$MAN8")"
	! command -v man > /dev/null || check "man -w rlgate finds it" bash -c "man -w rlgate | grep -qx $MAN8"
fi
is "rlgate.socket enabled (sockets.target), rlgate-tcp.socket not" "/lib/systemd/system/rlgate.socket" \
	"$(readlink /etc/systemd/system/sockets.target.wants/rlgate.socket)$(readlink /etc/systemd/system/sockets.target.wants/rlgate-tcp.socket)"
LIB=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
is "the installed programs say the package's version" "rlgate ${VERSION%-*} (Lua library $LIB) rlgate-ctl ${VERSION%-*}" \
	"$(/usr/sbin/rlgate -V) $(/usr/sbin/rlgate-ctl -V)"
unit() { sed -n "s/^$1=//p" "/lib/systemd/system/$2"; }
asrl() { setpriv --reuid=rlgate --regid=rlgate --init-groups "$@"; }
is "rlgate -t -c /etc/rlgate/rlgate.ini accepts the packaged configuration" "configuration OK" \
	"$(/usr/sbin/rlgate -t -c /etc/rlgate/rlgate.ini 2>&1)"
is "rlgate.service's ExecStartPre, as user rlgate, accepts it" "configuration OK" \
	"$(asrl $(unit ExecStartPre rlgate.service) 2>&1)"

# ---- 2. lighttpd, unix socket -------------------------------------------------
start_redis || exit 1
chmod 711 "$T"		# rlgate and www-data enter it, do not list it
www_dir var		# lighttpd's logs
mkdir -p "$T/rl" "$T/run" "$T/www/user"
chown rlgate:rlgate "$T/rl" && chmod 750 "$T/rl"
cp "$TOP/tests/www/index.html" "$T/www/"
cp "$TOP/tests/www/user/list" "$T/www/user/list"
echo five > "$T/www/five"
AUDIT_DB=$T/rl/audit.db
SOCK=$T/run/rlgate.sock
# The packaged configuration with only Redis and the audit database moved,
# and a rule of its own: 5 per client per hour under /five.
sed -e "s|^address = 127.0.0.1:6379 |address = 127.0.0.1:$REDIS_PORT |" \
    -e "s|^database = /var/lib/rlgate/audit.db |database = $AUDIT_DB |" /etc/rlgate/rlgate.ini > "$T/rlgate.ini"
is "the copy differs from the packaged file in two lines" 2 \
	"$(diff /etc/rlgate/rlgate.ini "$T/rlgate.ini" | grep -c '^>')"
printf '\n[rule:five]\npath = /five\nlimit = 5\nwindow = 1h\n' >> "$T/rlgate.ini"
chgrp rlgate "$T/rlgate.ini" && chmod 640 "$T/rlgate.ini"
EXEC=$(unit ExecStart rlgate.service | sed "s|/etc/rlgate/rlgate.ini|$T/rlgate.ini|")
is "rlgate.service runs the installed binary" "/usr/sbin/rlgate -c $T/rlgate.ini" "$EXEC"
# setpriv execs: the PID systemd-socket-activate passes in LISTEN_PID is
# rlgate's. The socket as rlgate.socket makes it (systemd-socket-activate
# applies neither SocketGroup nor SocketMode).
systemd-socket-activate -l "$SOCK" -- setpriv --reuid=rlgate --regid=rlgate --init-groups \
	$EXEC 2>> "$T/rlgate-unix.log" &
UNIX_PID=$!
PIDS+=("$UNIX_PID")
wait_for 10 test -S "$SOCK" || { not_ok "systemd-socket-activate made $SOCK"; cat "$T/rlgate-unix.log"; finish; exit 1; }
chgrp "$(unit SocketGroup rlgate.socket)" "$SOCK" && chmod "$(unit SocketMode rlgate.socket)" "$SOCK"
HTTP_PORT=$(free_port)
ship_conf lighttpd-spawn.conf "$T/lighttpd.conf" http_port="$HTTP_PORT" docroot="$T/www" \
	cgi_dir="$T/www" log_dir="$T/var" rlgate_socket="$SOCK" || exit 1
run_lighttpd "$T/lighttpd.conf" || exit 1
BASE=http://127.0.0.1:$HTTP_PORT

got=""
for i in 1 2 3 4 5 6; do got="$got $(curl -s -D "$T/five$i.h" -o "$T/five$i.b" -w '%{http_code}' "$BASE/five")"; done
is "lighttpd: limit 5, 6 requests: 5 x 200 then 429" " 200 200 200 200 200 429" "$got"
is "lighttpd: the 200s get the file" five "$(cat "$T/five5.b")"
is "lighttpd: the 429 says which policy" '"five";q=5;w=3600' "$(resp_header "$T/five6.h" RateLimit-Policy)"
is "lighttpd: the decisions came from /usr/sbin/rlgate, run as rlgate" "/usr/sbin/rlgate rlgate" \
	"$(readlink "/proc/$UNIX_PID/exe") $(ps -o user= -p "$UNIX_PID")"
check "lighttpd: rlgate serves the socket systemd-socket-activate passed" \
	grep -q 'listening on 1 socket from systemd' "$T/rlgate-unix.log"
wait_for 5 key_rows_reach 6 127.0.0.1 "$AUDIT_DB"
is "lighttpd: one audit row per decision: 5 allowed + 1 denied, rule five" "5+1 five" \
	"$(key_rows 127.0.0.1 "$AUDIT_DB") $(sql "SELECT group_concat(DISTINCT rule) FROM decisions")"
check "lighttpd: the limit's state is in the private Redis" \
	bash -c "redis-cli -p $REDIS_PORT --scan --pattern 'rl:{five:127.0.0.1}*' | grep -q ."

# ---- 3. Apache, TCP, /etc/rlgate/rlgate.ini as the operator edited it ---------
# The operator's change: the private Redis. Everything else as packaged,
# the audit in /var/lib/rlgate.
sed -i "s|^address = 127.0.0.1:6379 |address = 127.0.0.1:$REDIS_PORT |" /etc/rlgate/rlgate.ini
printf '; edited by tests/it/it_deb_install.sh\n' >> /etc/rlgate/rlgate.ini
SUM=$(sha256sum < /etc/rlgate/rlgate.ini)
RLGATE_PORT=$(free_port)
LISTEN=$(unit ListenStream rlgate-tcp.socket | sed "s/^127.0.0.1:9000$/127.0.0.1:$RLGATE_PORT/")
is "rlgate-tcp.socket: 127.0.0.1 (the port set here)" "127.0.0.1:$RLGATE_PORT" "$LISTEN"
systemd-socket-activate -l "$LISTEN" -- setpriv --reuid=rlgate --regid=rlgate --init-groups \
	$(unit ExecStart rlgate.service) 2>> "$T/rlgate-tcp.log" &
TCP_PID=$!
PIDS+=("$TCP_PID")
wait_for 10 port_open "$RLGATE_PORT" || { not_ok "systemd-socket-activate listens on $LISTEN"; finish; exit 1; }
DOCROOT=$T/www HTTP_PORT=$(free_port)
ship_conf apache.conf "$T/rlgate-apache.conf" RLGATE_FCGI="127.0.0.1:$RLGATE_PORT" || exit 1
start_apache "$T/rlgate-apache.conf" || exit 1
seed_demo "apache" "http://127.0.0.1:$HTTP_PORT" org1 /var/lib/rlgate/audit.db
is "apache: decided by /usr/sbin/rlgate as rlgate, -c /etc/rlgate/rlgate.ini" \
	"/usr/sbin/rlgate rlgate /usr/sbin/rlgate -c /etc/rlgate/rlgate.ini" \
	"$(readlink "/proc/$TCP_PID/exe") $(ps -o user=,args= -p "$TCP_PID" | xargs)"
check_denied "apache" '"violated-policies":\["user_list"\]'
kill -TERM "$TCP_PID" "$UNIX_PID"
wait "$TCP_PID" "$UNIX_PID"
ROWS=$(rows_in /var/lib/rlgate/audit.db)
is "apache: the audit in /var/lib/rlgate, rlgate's: $ROWS rows" "rlgate:rlgate $((111 + SEED_EXTRA))" \
	"$(stat -c %U:%G /var/lib/rlgate/audit.db) $ROWS"

# ---- 4. the README's spawn-fcgi and lighttpd recipes ---------------------------
cp -p /etc/rlgate/rlgate.ini "$T/rlgate.ini.edited"	# restored after the recipes
SPAWN=$(readme_block '^spawn-fcgi ')
is "README: the spawn-fcgi block makes /run/rlgate and the log, then starts" \
	"install touch spawn-fcgi" "$(awk '{ print $1 }' <<< "$SPAWN" | paste -sd ' ')"
RECIPE=yes
bash -e -c "$SPAWN" > "$T/spawn.out" 2>&1
is "spawn-fcgi recipe: exit 0" "0" "$?"
SPAWNED=$(cat /run/rlgate/rlgate.pid 2>/dev/null)
check "spawn-fcgi recipe: rlgate started ($(paste -sd ' ' "$T/spawn.out"))" \
	wait_for 10 grep -q 'event loops' /var/log/rlgate.log
is "spawn-fcgi recipe: /usr/sbin/rlgate, as rlgate" "/usr/sbin/rlgate rlgate" \
	"$(readlink "/proc/$SPAWNED/exe") $(ps -o user= -p "$SPAWNED")"
is "spawn-fcgi recipe: the socket 0660 www-data:www-data, the log 0640 rlgate:adm" \
	"660 www-data:www-data 640 rlgate:adm" "$(stat -c '%a %U:%G' /run/rlgate/rlgate.sock /var/log/rlgate.log | paste -sd ' ')"

# lighttpd: Debian's lighttpd.conf, copied with its files, port and
# conf-enabled/ made private and IPv6's [::] socket left out.
LT=$T/lt
mkdir -p "$LT/conf-available" "$LT/conf-enabled" "$LT/uploads"
chown www-data "$LT/uploads"
LT_PORT=$(free_port)
sed -e "s|^server.document-root .*|server.document-root = \"$T/www\"|" \
    -e "s|^server.upload-dirs .*|server.upload-dirs = ( \"$LT/uploads\" )|" \
    -e "s|^server.errorlog .*|server.errorlog = \"$T/var/lt-error.log\"|" \
    -e "s|^server.pid-file .*|server.pid-file = \"$LT/lighttpd.pid\"|" \
    -e "s|^server.port .*|server.port = $LT_PORT\nserver.bind = \"127.0.0.1\"|" \
    -e '/use-ipv6.pl/d' -e "s|/etc/lighttpd/conf-enabled/|$LT/conf-enabled/|" \
    /etc/lighttpd/lighttpd.conf > "$LT/lighttpd.conf"
cp /etc/lighttpd/conf-available/10-fastcgi.conf "$LT/conf-available/"
# The README's 50-rlgate.conf: the block after the line that names it.
awk '/write `\/etc\/lighttpd\/conf-available\/50-rlgate.conf`:$/ { want = 1; next }
	want && /^```$/ { if (inb) exit; inb = 1; next } inb' "$TOP/README.md" > "$LT/conf-available/50-rlgate.conf"
check "README: 50-rlgate.conf has the authorizer" \
	grep -q '"mode" => "authorizer"' "$LT/conf-available/50-rlgate.conf"
LIGHTTPD=$(readme_block '^lighty-enable-mod ')
is "the packaged status_path is empty: the recipe must set it" 1 "$(grep -c '^status_path = *;' /etc/rlgate/rlgate.ini)"
is "README: the lighttpd block sets status_path and reloads before lighttpd starts" \
	"apt-get sed systemctl lighty-enable-mod lighttpd curl curl" "$(awk '{ print $1 }' <<< "$LIGHTTPD" | paste -sd ' ')"
{
	cat <<-STANDIN
	set -e
	apt-get() { command -v lighttpd > /dev/null; }		# installed (tests/deps.sh)
	systemctl() {
		case "\$*" in
		"try-reload-or-restart rlgate")		# SIGHUP, and the reload done
			n=\$(grep -c 'loaded,' /var/log/rlgate.log || true)
			kill -HUP $SPAWNED
			for _ in \$(seq 100); do [ "\$(grep -c 'loaded,' /var/log/rlgate.log)" -gt "\$n" ] && return; sleep 0.1; done
			return 1;;
		"restart lighttpd")			# it forks; its pid file: $LT/lighttpd.pid
			lighttpd -f "$LT/lighttpd.conf"
			for _ in \$(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$LT_PORT) 2>/dev/null && return; sleep 0.1; done
			return 1;;
		*) return 1;;
		esac
	}
	lighty-enable-mod() {				# links conf-available/NN-MOD.conf
		for m; do for f in "$LT"/conf-available/*-\$m.conf; do
			ln -s "../conf-available/\${f##*/}" "$LT/conf-enabled/"
		done; done
	}
	STANDIN
	sed -e "s|/etc/lighttpd/|$LT/|g" -e "s|http://127.0.0.1/|http://127.0.0.1:$LT_PORT/|g" <<< "$LIGHTTPD"
} > "$T/lighttpd-recipe.sh"
bash "$T/lighttpd-recipe.sh" > "$T/lighttpd-recipe.out" 2>&1
is "lighttpd recipe: exit 0" 0 "$?"
[ -f "$LT/lighttpd.pid" ] && PIDS+=("$(cat "$LT/lighttpd.pid")")
is "lighttpd recipe: status_path set in /etc/rlgate/rlgate.ini" 1 "$(grep -c '^status_path = /rlgate-status ;' /etc/rlgate/rlgate.ini)"
check "lighttpd recipe: the request is decided, then served (200)" \
	grep -q '^HTTP/1.1 200 OK' "$T/lighttpd-recipe.out"
check "lighttpd recipe: /rlgate-status/health answers, JSON" \
	grep -q '^{"status":"ok",.*"redis"' "$T/lighttpd-recipe.out"
kill "$(cat "$LT/lighttpd.pid")" "$SPAWNED"
check "spawn-fcgi recipe: rlgate stops on SIGTERM" wait_for 10 bash -c \
	"! kill -0 $SPAWNED 2>/dev/null || grep -q '^[0-9]* ([^)]*) Z' /proc/$SPAWNED/stat"
SPAWNED=""
rm -rf /run/rlgate /var/log/rlgate.log
cat "$T/rlgate.ini.edited" > /etc/rlgate/rlgate.ini
ROWS=$(rows_in /var/lib/rlgate/audit.db)

# ---- 5. the same package again, over the edited conffile ---------------------
dpkg_wait -i "$DEB"
exit_0 "dpkg -i again (no --force-confold; stdin /dev/null: a prompt would fail)" "$?"
is "the edited rlgate.ini is kept (sha256)" "$SUM" "$(sha256sum < /etc/rlgate/rlgate.ini)"
is "no .dpkg-new, .dpkg-dist or .dpkg-old beside it" "rlgate.ini" "$(ls -A /etc/rlgate)"
is "dpkg --verify: only the conffile differs" "??5?????? c /etc/rlgate/rlgate.ini" "$(verify)"
is "still 0640 root:rlgate" "-rw-r----- root:rlgate" "$(stat -c '%A %U:%G' /etc/rlgate/rlgate.ini)"
is "the audit database is kept" "$ROWS" "$(rows_in /var/lib/rlgate/audit.db)"

# The README's upgrade, non-interactive, to a version whose packaged
# rlgate.ini changed too (dpkg would ask); apt waits for another's lock.
UPGRADE=$(readme_block '^DEBIAN_FRONTEND=noninteractive apt-get install')
is "README: one upgrade command, both answers given" "1 1 1" \
	"$(grep -c . <<< "$UPGRADE") $(grep -c -- '-o Dpkg::Options::=--force-confdef ' <<< "$UPGRADE") $(grep -c -- '-o Dpkg::Options::=--force-confold ' <<< "$UPGRADE")"
upgrade() {
	sed -e 's|apt-get install|apt-get -o DPkg::Lock::Timeout=120 install|' \
	    -e "s|\./build/deb/rlgate_<version>_amd64\.deb|$1|" <<< "$UPGRADE"
}
bash -c "$(upgrade "$NEXT_DEB")" < /dev/null > "$DPKG_OUT" 2>&1
exit_0 "the README's upgrade to $NEXT" "$?"
is "dpkg: rlgate $NEXT installed" "ii |$NEXT" "$(dpkg-query -W -f='${db:Status-Abbrev}|${Version}' rlgate)"
is "the edited rlgate.ini is kept (sha256)" "$SUM" "$(sha256sum < /etc/rlgate/rlgate.ini)"
is "the new packaged one is beside it, .dpkg-dist" "rlgate.ini rlgate.ini.dpkg-dist" "$(ls -A /etc/rlgate | paste -sd ' ')"
is ".dpkg-dist is $NEXT's" "$(dpkg-deb --fsys-tarfile "$NEXT_DEB" | tar -xOf - ./etc/rlgate/rlgate.ini | sha256sum)" \
	"$(sha256sum < /etc/rlgate/rlgate.ini.dpkg-dist)"
is "the audit database is kept" "$ROWS" "$(rows_in /var/lib/rlgate/audit.db)"
# The README's rollback: the same command, --allow-downgrades, the package
# before (make deb kept it in build/deb).
bash -c "$(upgrade "$DEB" | sed 's|install -y|install -y --allow-downgrades|')" < /dev/null > "$DPKG_OUT" 2>&1
exit_0 "the README's rollback to $VERSION" "$?"
is "dpkg: rlgate $VERSION installed again" "ii |$VERSION" "$(dpkg-query -W -f='${db:Status-Abbrev}|${Version}' rlgate)"
is "the edited rlgate.ini is still kept (sha256)" "$SUM" "$(sha256sum < /etc/rlgate/rlgate.ini)"

# ---- 6. dpkg --purge ----------------------------------------------------------
dpkg_wait --purge rlgate
exit_0 "dpkg --purge rlgate" "$?"
is "dpkg knows no rlgate" "" "$(pkg_state | sed -n '/^un /!p')"
left=""
while read -r f; do [ -d "$f" ] || [ ! -e "$f" ] || left="$left $f"; done < "$T/dpkg-L"
is "none of the package's files is left" "" "$left"
check "/etc/rlgate is gone" [ ! -e /etc/rlgate ]
check "/var/lib/rlgate is gone, with the audit database" [ ! -e /var/lib/rlgate ]
check "the file beside it stays ($BESIDE)" [ -f "$BESIDE" ]
is "no path named *rlgate* in /etc /usr /lib /var/lib /run but those there before" "$BEFORE" "$(rlgate_paths)"
check "the directories it shared stay (/usr/sbin, /lib/systemd/system, man8)" \
	test -d /usr/sbin -a -d /lib/systemd/system -a -d /usr/share/man/man8
if [ -z "$USER_WAS" ]; then
	is "the rlgate user and group stay (Debian keeps system users; this test's cleanup removes them)" \
		"rlgate rlgate" "$(getent passwd rlgate | cut -d: -f1) $(getent group rlgate | cut -d: -f1)"
fi
finish
