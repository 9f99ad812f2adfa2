#!/bin/bash
# Prints the functions over LIMIT lines (default 150) and the files over
# FLIMIT lines (default 900) among the sources outside tests (fcgi/,
# reports/, cgi-bin/; not the generated fcgi/scripts.c). A function is
# counted from its name (at the start of a line, the house style) to its
# closing brace at the start of a line. Reports only; exits 0.
# Usage: tests/tools/sizes.sh [LIMIT [FLIMIT]]
cd "$(dirname "$0")/../.." || exit 2
limit=${1:-150} flimit=${2:-900}
files=$(ls fcgi/*.c reports/*.c cgi-bin/*.c 2>/dev/null | grep -v '^fcgi/scripts.c$')
wc -l $files | awk -v m="$flimit" '$2 != "total" && $1 > m { print "file", $2, $1 }'
awk -v m="$limit" '
FNR == 1 { name = "" }
/^[a-zA-Z_][a-zA-Z0-9_]*\(/ { name = $0; sub(/\(.*/, "", name); start = FNR }
/^}/ && name != "" { n = FNR - start + 1
	if (n > m) print "function", FILENAME ":" start, name, n; name = "" }
' $files
