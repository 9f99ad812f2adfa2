#!/bin/bash
# Operations, 5 of 5: the layout of make install (no server needed).
. "$(dirname "$0")/../lib.sh"

# --- make install ------------------------------------------------------------

I=$T/inst
make -s -C "$TOP" install DESTDIR="$I" PREFIX=/usr/local > "$T/install.log" 2>&1
is "make install DESTDIR: succeeds" 0 $?
for f in sbin/rlgate sbin/rlgate-ctl bin/rlgate-report lib/rlgate/rlgate.cgi; do
	check "installed: /usr/local/$f, executable" test -x "$I/usr/local/$f"
done
is "installed: the sample configuration, mode 640" 640 "$(stat -c %a "$I/etc/rlgate/rlgate.ini.sample" 2>/dev/null)"
for m in man8/rlgate.8 man8/rlgate-ctl.8 man5/rlgate.ini.5 man1/rlgate-report.1; do
	check "installed: man page $m" test -s "$I/usr/local/share/man/$m"
	check "man -l $m renders without warnings" bash -c \
		"out=\$(MANWIDTH=80 man --warnings -l '$I/usr/local/share/man/$m' 2>&1 >/dev/null); [ -z \"\$out\" ] || { echo \"\$out\" | head -5; false; }"
done
check "man -l rlgate-ctl.8 documents the exit status" bash -c "MANWIDTH=80 man -l '$I/usr/local/share/man/man8/rlgate-ctl.8' 2>/dev/null | grep -q 'EXIT STATUS'"
is "the installed rlgate-ctl runs" "rlgate-ctl 0.1.0" "$("$I/usr/local/sbin/rlgate-ctl" -V)"

finish
