#!/bin/sh
# The protected CGI program of the deployment tests (tests/it/it_deploy_*.sh):
# prints what the web server and rlgate gave it, then its request body
# unchanged.
# CGI: the body is CONTENT_LENGTH bytes of stdin. Read all of it before
# writing: a server that is still writing the body (Apache mod_cgi) does
# not read the output yet, and both would wait on full pipes.
body=$(mktemp) || exit 1
trap 'rm -f "$body"' EXIT
[ -n "${CONTENT_LENGTH:-}" ] && head -c "$CONTENT_LENGTH" > "$body"
printf 'Content-Type: text/plain\r\n\r\n'
for v in RATELIMIT_POLICY RATELIMIT_LIMIT RATELIMIT_REMAINING RATELIMIT_RESET \
    RL_CLIENT REQUEST_METHOD REQUEST_URI PATH_INFO QUERY_STRING CONTENT_LENGTH; do
	eval "printf '%s=%s\n' $v \"\${$v-}\""
done
echo '--- body'
cat "$body"
