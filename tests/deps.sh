#!/bin/sh
# Installs the Debian 12 packages rlgate builds, tests and benchmarks with,
# when they are missing. Needs root for apt-get; says what to do otherwise.
# clang with libclang-rt-14-dev (libFuzzer and the sanitizers' runtime, only
# a Recommends of clang): the fuzz targets; valgrind: the leak check;
# e2fsprogs: chattr for tests/it/it_faults_audit.sh; libfcgi-bin: cgi-fcgi,
# a FastCGI responder client for tests/it/it_ops_*.sh; jq: reads /health there;
# strace: what a CGI request does, in tests/it/it_deploy_cgi.sh; debhelper,
# devscripts, lintian: make deb and tests/it/it_deb.sh; systemd:
# systemd-socket-activate and systemd-analyze (tests/it/it_socket_activation.sh,
# tests/it/it_deb.sh; systemd need not run); python3: holds rlgate's listening
# socket in tests/it/it_access.sh (and reads JSON in others); libssl-dev: TLS to
# Redis (fcgi/redis_io.c), openssl: the certificates of tests/it/it_tls.sh.
PKGS="build-essential pkg-config libfcgi-dev libfcgi-bin jq libhiredis-dev libinih-dev
libsqlite3-dev sqlite3 libcmocka-dev redis-server redis-tools lighttpd libssl-dev openssl
spawn-fcgi apache2-utils wrk curl procps iproute2 apache2 nginx
chromium clang libclang-rt-14-dev valgrind e2fsprogs strace
debhelper devscripts lintian systemd python3"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "rlgate: missing Debian packages:$missing" >&2
	echo "rlgate: run as root, or: sudo apt-get install$missing" >&2
	exit 1
fi
echo "rlgate: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
	{ echo "rlgate: apt-get install$missing failed" >&2; exit 1; }
# Debian starts the services it installs where it can; the tests run their
# own. Only a service this run installed is stopped: one the machine already
# had is the operator's.
for s in redis-server lighttpd apache2 nginx; do
	case " $missing " in *" $s "*) ;; *) continue;; esac
	command -v systemctl >/dev/null && systemctl disable --now "$s" >/dev/null 2>&1
	command -v service >/dev/null && service "$s" stop >/dev/null 2>&1
done
exit 0
