# Sourced by the tests/it/it_ops_*.sh scripts, after ../lib.sh: the
# gateway they share, against a real redis-server, rlgate and lighttpd
# (conf/lighttpd.conf plus conf/lighttpd-status.conf, as shipped), and the
# helpers that read its status endpoint.
#   ops_config: Redis (with a unix socket) and $T/rlgate.ini, every rule
#               the scripts use (flood, plain, dry, raise, open, peek_ALG)
#   ops_start:  rlgate and lighttpd on it -> $BASE, $STATUS

CTL=$TOP/fcgi/rlgate-ctl

ops_config() {
	REDIS_SOCKET=$T/redis.sock	# it_ops_ctl: Redis on its unix socket
	start_redis || exit 1
	AUDIT_DB=$T/audit.db
	DOCROOT=$T/www
	for d in flood plain dry raise peek open; do mkdir -p "$DOCROOT/$d"; echo "$d" > "$DOCROOT/$d/a"; done

	cat > "$T/rlgate.ini" <<EOF
[gateway]
workers = 4
status_path = /rlgate-status
trusted_proxies = 127.0.0.1/32

$(ini_redis_audit)

; A flood from one client: denials remembered for their retry_after.
[rule:flood]
path = /flood/*
limit = 5
window = 1m
deny_cache = on

; The same limit without the cache: every request asks Redis.
[rule:plain]
path = /plain/*
limit = 5
window = 1m

[rule:dry]
path = /dry/*
limit = 2
window = 1m
dry_run = yes

[rule:raise]
path = /raise/*
limit = 2
window = 1m
deny_cache = on

[rule:open]
path = /open/*
limit = 1000000
window = 1s
EOF
	# rlgate-ctl peek: one rule per algorithm, keyed by ?k=.
	for a in fixed_window sliding_window sliding_log token_bucket gcra leaky_bucket; do
		printf '\n[rule:peek_%s]\npath = /peek/%s\nkey = {query.k}\nalgorithm = %s\nlimit = 3\nwindow = 1m\n' \
			"$a" "$a" "$a" >> "$T/rlgate.ini"
		echo "$a" > "$DOCROOT/peek/$a"
	done
}

ops_start() {
	start_rlgate "$T/rlgate.ini" || exit 1
	start_shipped_lighttpd "include \"$TOP/conf/lighttpd-status.conf\"" || exit 1
	BASE=http://127.0.0.1:$HTTP_PORT
	STATUS=$BASE/rlgate-status
}

# --- helpers -----------------------------------------------------------

scrape() { curl -s -D "$T/metrics.h" -o "$T/metrics.txt" "$STATUS/metrics"; }
# metric SERIES: its value in the last scrape (SERIES as printed: name{labels}).
metric() { awk -v s="$1" '$1 == s { print $2; f = 1 } END { if (!f) print "absent" }' "$T/metrics.txt"; }
# health: GET /health into $T/health.json, prints the status code.
health() { curl -s -o "$T/health.json" -w '%{http_code}' "$STATUS/health"; }
hj() { jq -r "$1" "$T/health.json"; }
rule_rows() { [ "$(sql "SELECT count(*) FROM decisions WHERE rule='$1'")" -ge "$2" ]; }
queue_empty() { scrape; [ "$(metric rlgate_audit_rows_queued)" = 0 ]; }
# fcgi_get PORT URI [NAME=VALUE...]: a FastCGI RESPONDER request (what nginx
# auth_request sends) straight to rlgate; prints the reply (headers, body).
fcgi_get() {
	local port=$1 uri=$2
	shift 2
	env -i REQUEST_METHOD=GET REQUEST_URI="$uri" REMOTE_ADDR=127.0.0.1 \
		SERVER_PROTOCOL=HTTP/1.1 "$@" cgi-fcgi -bind -connect "127.0.0.1:$port" | tr -d '\r'
}

# valid_exposition FILE: the Prometheus text format 0.0.4: every sample is
# "name{label="value",...} number", belongs to a family declared by a TYPE
# line before it, no series twice, histogram buckets cumulative up to +Inf
# equal to _count, and the text ends with a newline.
valid_exposition() {
	[ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ] || { echo "# no final newline"; return 1; }
	awk '
	function fail(why) { print "# line " NR ": " why ": " $0; bad = 1 }
	/^# HELP / { next }
	/^# TYPE / {
		if ($4 !~ /^(counter|gauge|histogram|summary|untyped)$/) fail("bad type")
		if ($3 in type) fail("family typed twice")
		type[$3] = $4; next
	}
	/^#/ { next }
	{
		if ($0 !~ /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|NaN|[-+]Inf)$/) {
			fail("not a sample"); next
		}
		series = $1; name = series; sub(/\{.*/, "", name)
		fam = name
		if (!(fam in type)) { f2 = fam; sub(/_(bucket|sum|count)$/, "", f2); if (type[f2] == "histogram") fam = f2 }
		if (!(fam in type)) fail("sample before its TYPE line")
		if (series in seen) fail("series twice")
		seen[series] = 1
		if (name ~ /_bucket$/ && type[fam] == "histogram") {
			if ($2 < last[fam]) fail("bucket below the one before")
			last[fam] = $2
			if (series ~ /le="\+Inf"/) inf[fam] = $2
		}
		if (name ~ /_count$/ && type[fam] == "histogram") count[fam] = $2
	}
	END {
		for (f in type) if (type[f] == "histogram" && inf[f] != count[f]) { print "# " f ": +Inf bucket " inf[f] " != count " count[f]; bad = 1 }
		exit bad
	}' "$1"
}
