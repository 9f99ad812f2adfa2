#!/bin/bash
# Benchmark (not a test): the system calls rlgate makes per request, a
# measure of work that a loaded machine does not blur as it blurs time.
# One rule (fixed_window), audit on, behind the shipped lighttpd conf;
# ab -n N -c C while strace -c -f counts every thread of rlgate BIN.
#
#   bash tests/bench/syscalls.sh BIN [N] [C]
#
# Compare two builds by running it on each (tests/bench/README.md).
BIN=$(realpath "$1"); N=${2:-3000}; C=${3:-1}
cd "$(dirname "$0")/../.." || exit 2
. tests/lib.sh
RLGATE=$BIN
start_redis
AUDIT_DB=$T/audit.db
cat > $T/r.ini <<EOT
[gateway]
workers = 2
[redis]
address = 127.0.0.1:$REDIS_PORT
[audit]
database = $AUDIT_DB
[rule:user_list]
path = /user/list
key = {query.org}
algorithm = fixed_window
limit = 100000000
window = 1s
EOT
start_rlgate $T/r.ini
start_shipped_lighttpd
ab -q -n 200 -c $C "http://127.0.0.1:$HTTP_PORT/user/list?org=a" >/dev/null 2>&1
strace -c -f -q -p $RLGATE_PID -o $T/st 2>/dev/null &
SP=$!
sleep 1
S0=$(awk '{print $14+$15}' /proc/$RLGATE_PID/stat)
ab -q -n $N -c $C "http://127.0.0.1:$HTTP_PORT/user/list?org=a" > $T/ab 2>&1
S1=$(awk '{print $14+$15}' /proc/$RLGATE_PID/stat)
sleep 0.5
kill -INT $SP; wait $SP 2>/dev/null
# strace -c's table: a call's count is column 4, its name the last.
echo "== $BIN N=$N C=$C cpu_ticks=$((S1-S0)) $(grep 'Requests per second' $T/ab)"
awk -v n=$N '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {printf "%-16s %.2f\n", $NF, $4/n}' $T/st | sort -k2 -nr | head -12
finish >/dev/null
