#!/bin/bash
# The Debian package: `make deb` builds it (in a copy of the tree) and keeps
# the packages already there, lintian finds no error and no warning
# (overrides only with a reason, none unused, in a next version too), and
# dpkg-deb shows what it installs: the files and their modes (the README
# and conf/'s web-server examples in /usr/share/doc/rlgate), the licence
# (DEP-5, LICENSE's text), code built with -fcf-protection, the one
# conffile, Depends from the shared libraries, Recommends redis-server, one
# version everywhere, a configuration that `rlgate -t` accepts, units that
# systemd-analyze verifies. Nothing is installed on this machine. The
# package stays in build/deb, where `make deb` puts it, for
# tests/it/it_deb_install.sh to install without building it again.
. "$(dirname "$0")/../lib.sh"

for c in dpkg-buildpackage dh lintian systemd-analyze; do
	command -v "$c" > /dev/null || { echo "# $c is missing (tests/deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
done
OUT=$TOP/build/deb
# A next version (tests/tools/deb_next.sh, a changelog of two entries), for
# lintian below and the upgrade of tests/it/it_deb_install.sh. A package
# already in build/deb (here the next one) is the one a rollback needs:
# make deb keeps it.
NEXT_DEB=$(bash "$TOP/tests/tools/deb_next.sh")
check "the next version builds ($(basename "$NEXT_DEB"))" [ -f "$NEXT_DEB" ]
mkdir -p "$OUT"
KEPT=$OUT/$(basename "$NEXT_DEB")
cp "$NEXT_DEB" "$KEPT"
check "make deb builds the package" make -s -C "$TOP" deb
check "make deb keeps the package already in build/deb" cmp -s "$NEXT_DEB" "$KEPT"
rm -f "$KEPT"
VERSION=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)
DEB=$OUT/rlgate_${VERSION}_$(dpkg --print-architecture).deb
[ -f "$DEB" ] || { echo "# no $DEB:"; ls "$OUT"; tail -30 "$OUT/build.log"; finish; exit 1; }

# ---- lintian ----------------------------------------------------------------
lintian --fail-on error,warning "$DEB" > "$T/lintian.out" 2>&1
is "lintian: exit 0 (no error, no warning)" 0 "$?"
is "lintian: no E: or W: line" "" "$(grep -E '^[EW]: ' "$T/lintian.out")"
# An override lintian did not use is an I: line (unused-override), for the
# first version and for the next one, whose changelog has two entries.
for d in "$DEB" "$NEXT_DEB"; do
	lintian -I --fail-on error,warning "$d" > "$T/lintian-I.out" 2>&1
	is "lintian -I $(basename "$d"): exit 0, no unused or mismatched override" "0 " \
		"$? $(grep -E '(unused|mismatched)-override' "$T/lintian-I.out")"
done
# Every override says why: a comment right above it.
is "every lintian override has a reason above it" "" \
	"$(awk '/^#/ { why = 1; next } /^[^#]/ { if (!why) print; why = 0 }' "$TOP/debian/rlgate.lintian-overrides")"

# ---- what it installs ---------------------------------------------------------
files() { dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ { print $1, $6 }' | sort -k2; }
is "the package's files and modes" "-rw-r----- ./etc/rlgate/rlgate.ini
-rw-r--r-- ./lib/systemd/system/rlgate-tcp.socket
-rw-r--r-- ./lib/systemd/system/rlgate.service
-rw-r--r-- ./lib/systemd/system/rlgate.socket
-rwxr-xr-x ./usr/bin/rlgate-report
-rwxr-xr-x ./usr/lib/rlgate/rlgate.cgi
-rwxr-xr-x ./usr/sbin/rlgate
-rwxr-xr-x ./usr/sbin/rlgate-ctl
-rw-r--r-- ./usr/share/doc/rlgate/README.md.gz
-rw-r--r-- ./usr/share/doc/rlgate/changelog.Debian.gz
-rw-r--r-- ./usr/share/doc/rlgate/copyright
$(cd "$TOP" && for f in conf/*.conf; do echo "-rw-r--r-- ./usr/share/doc/rlgate/examples/${f#conf/}"; done)
-rw-r--r-- ./usr/share/lintian/overrides/rlgate
-rw-r--r-- ./usr/share/man/man1/rlgate-report.1.gz
-rw-r--r-- ./usr/share/man/man5/rlgate.ini.5.gz
-rw-r--r-- ./usr/share/man/man8/rlgate-ctl.8.gz
-rw-r--r-- ./usr/share/man/man8/rlgate.8.gz" "$(files)"
mkdir "$T/ctl" "$T/root"
dpkg-deb -e "$DEB" "$T/ctl"
dpkg-deb -x "$DEB" "$T/root"
for f in "$TOP"/conf/*.conf; do
	check "examples/${f##*/} is conf/${f##*/}" cmp -s "$f" "$T/root/usr/share/doc/rlgate/examples/${f##*/}"
done
check "README.md.gz is README.md" cmp -s "$TOP/README.md" <(zcat "$T/root/usr/share/doc/rlgate/README.md.gz")
# The licence: machine-readable (DEP-5), BSD-3-Clause for every file, its
# text that of LICENSE, and the linked libraries' licences named.
CR=$T/root/usr/share/doc/rlgate/copyright
is "copyright: DEP-5" "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" "$(head -1 "$CR")"
is "copyright: every file BSD-3-Clause, 2026 the rlgate authors" \
	"Files: * Copyright: 2026 the rlgate authors License: BSD-3-Clause" \
	"$(sed -n '/^Files: \*$/,/^$/p' "$CR" | paste -sd ' ' | sed 's/ $//')"
is "copyright: the licence's text is LICENSE's" "$(tail -n +3 "$TOP/LICENSE")" \
	"$(awk 'p { print; next } prev == "" && $0 == "License: BSD-3-Clause" { p = 1 } { prev = $0 }' "$CR" |
		sed 's/^ //; s/^\.$//')"
is "LICENSE: BSD-3-Clause's clauses, 2026 the rlgate authors" "Copyright 2026 the rlgate authors 3" \
	"$(head -1 "$TOP/LICENSE") $(grep -c '^[123]\. ' "$TOP/LICENSE")"
for l in "hiredis (libhiredis0.14): BSD-3-Clause" "inih (libinih1): BSD-3-Clause" \
    "SQLite (libsqlite3-0): public domain" "OpenSSL 3 (libssl3): Apache-2.0" "libfcgi"; do
	check "copyright names $l" grep -qF "$l" "$CR"
done
# Control-flow protection: the code is built with -fcf-protection (an
# endbr64 at each function that may be called indirectly). hardening-check
# says yes only when the C library's start files carry the property too
# (Debian 12's Scrt1.o does not: the linker then drops it).
for b in usr/sbin/rlgate usr/sbin/rlgate-ctl usr/bin/rlgate-report usr/lib/rlgate/rlgate.cgi; do
	n=$(objdump -d "$T/root/$b" | grep -c endbr64)
	check "$b: built with -fcf-protection ($n endbr64, at least 100)" [ "$n" -ge 100 ]
	if readelf -n "$(cc -print-file-name=Scrt1.o)" | grep -q 'x86 feature: IBT, SHSTK'; then
		check "$b: hardening-check: control flow integrity" \
			bash -c "hardening-check '$T/root/$b' | grep -q 'Control flow integrity: yes'"
	fi
done
is "one conffile: /etc/rlgate/rlgate.ini" "/etc/rlgate/rlgate.ini" "$(cat "$T/ctl/conffiles")"
DEPENDS=$(dpkg-deb -f "$DEB" Depends)
check "Depends names adduser (the postinst's)" grep -q adduser <<< "$DEPENDS"
for lib in libhiredis libinih1 libsqlite3-0 libc6; do
	check "Depends names $lib (from the shared libraries)" grep -q "$lib" <<< "$DEPENDS"
done
is "Recommends redis-server" "redis-server" "$(dpkg-deb -f "$DEB" Recommends)"
LIB=$(sed -n 's/^const char rlg_library_name\[\] = "\(rlgate_[0-9a-f]*\)";$/\1/p' "$TOP/fcgi/scripts.c")
is "the programs say the changelog's version" "rlgate ${VERSION%-*} (Lua library $LIB) rlgate-ctl ${VERSION%-*}" \
	"$("$T/root/usr/sbin/rlgate" -V) $("$T/root/usr/sbin/rlgate-ctl" -V)"
is "rlgate -t accepts the packaged configuration" "configuration OK" \
	"$("$T/root/usr/sbin/rlgate" -t -c "$T/root/etc/rlgate/rlgate.ini" 2>&1)"
check "the packaged configuration listens nowhere itself (the sockets are systemd's)" \
	grep -q '^listen = *;' "$T/root/etc/rlgate/rlgate.ini"
check "postinst makes the rlgate system user" grep -q 'adduser --system --group' "$T/ctl/postinst"
check "postinst makes /var/lib/rlgate rlgate's, 0750" grep -q 'install -d -o rlgate -g rlgate -m 0750 /var/lib/rlgate' "$T/ctl/postinst"
check "postinst enables and starts rlgate.socket" grep -q "deb-systemd-invoke start 'rlgate.socket'" "$T/ctl/postinst"
# Upgrades keep the sockets open: prerm stops rlgate.socket on remove only,
# postinst restarts no socket (only rlgate.service, if it runs).
check "postinst restarts no socket" bash -c "! grep -v '^ *#' '$T/ctl/postinst' | grep -qE '(restart|stop).*socket'"
is "prerm stops rlgate.socket only on remove" 1 \
	"$(grep -B1 "deb-systemd-invoke stop 'rlgate.socket'" "$T/ctl/prerm" | grep -c '"$1" = remove')"
check "postinst: try-restart rlgate.service after an upgrade" grep -q 'try-restart rlgate.service' "$T/ctl/postinst"
check "postrm purge removes /var/lib/rlgate" grep -q 'rm -rf /var/lib/rlgate' "$T/ctl/postrm"
for s in postinst prerm postrm; do check "$s: sh -n" sh -n "$T/ctl/$s"; done

# ---- the units ----------------------------------------------------------------
U=$T/root/lib/systemd/system
is "rlgate.service runs rlgate on systemd's sockets (no -s)" \
	"ExecStart=/usr/sbin/rlgate -c /etc/rlgate/rlgate.ini" "$(grep '^ExecStart=' "$U/rlgate.service")"
is "reload is SIGHUP" 'ExecReload=/bin/kill -HUP $MAINPID' "$(grep '^ExecReload=' "$U/rlgate.service")"
is "the hardening stays" "NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths=/var/lib/rlgate" \
	"$(grep -E '^(NoNewPrivileges|ProtectSystem|ReadWritePaths)=' "$U/rlgate.service" | tr '\n' ' ' | sed 's/ $//')"
is "rlgate.socket: 0660, group www-data" "ListenStream=/run/rlgate/rlgate.sock SocketGroup=www-data SocketMode=0660" \
	"$(grep -E '^(ListenStream|SocketGroup|SocketMode)=' "$U/rlgate.socket" | tr '\n' ' ' | sed 's/ $//')"
is "rlgate-tcp.socket: 127.0.0.1:9000 for rlgate.service" "ListenStream=127.0.0.1:9000 Service=rlgate.service" \
	"$(grep -E '^(ListenStream|Service)=' "$U/rlgate-tcp.socket" | tr '\n' ' ' | sed 's/ $//')"
# systemd is not PID 1 here: verify the units, with the extracted binary
# where /usr/sbin/rlgate will be.
mkdir "$T/units"
for u in rlgate.service rlgate.socket rlgate-tcp.socket; do
	sed "s|/usr/sbin/rlgate|$T/root/usr/sbin/rlgate|g" "$U/$u" > "$T/units/$u"
done
systemd-analyze verify --man=no "$T/units/rlgate.socket" "$T/units/rlgate-tcp.socket" \
	"$T/units/rlgate.service" > "$T/verify.out" 2>&1
is "systemd-analyze verify: exit 0, nothing to say" "0 " "$? $(cat "$T/verify.out")"
finish
