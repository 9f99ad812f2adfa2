#!/bin/bash
# Prints the file-level dependency cycles among the gateway's and the
# report's sources (fcgi/*.o, reports/*.o), read from the objects with nm:
# file A depends on file B when A uses a symbol B defines. Files call
# downward only (../shared/STYLE.md), so any cycle is a defect: it exits 1
# and names each cycle's files; 0 and "no cycles" otherwise. Builds nothing:
# run it after make. Not for tests/: the tests call what they test.
# Usage: tests/tools/callgraph.sh [-e] [OBJ...]   (-e also prints the edges)
cd "$(dirname "$0")/../.." || exit 2
edges=0
[ "$1" = -e ] && { edges=1; shift; }
if [ $# -eq 0 ]; then
	set -- fcgi/*.o reports/*.o
fi
objs=()
for o in "$@"; do
	case $o in *.fz.o) continue;; esac
	[ -f "$o" ] && objs+=("$o")
done
[ ${#objs[@]} -gt 0 ] || { echo "callgraph: no objects (run make first)" >&2; exit 2; }
# Two programs define main and a few names live in both trees (reports link
# conf's objects): a symbol is taken from a file of the user's own folder
# first, then from any.
for o in "${objs[@]}"; do
	nm --defined-only -g "$o" | awk -v f="$o" 'NF == 3 { print "D", f, $3 }'
	nm -u "$o" | awk -v f="$o" '{ print "U", f, $NF }'
done | awk -v show="$edges" '
function dir(p) { sub(/\/[^\/]*$/, "", p); return p }
$1 == "D" { if (!($3 in def) || dir($2) == "fcgi") def[$3] = $2
	    defin[dir($2) SUBSEP $3] = $2; next }
{ use[++n] = $2 SUBSEP $3 }
END {
	for (i = 1; i <= n; i++) {
		split(use[i], u, SUBSEP)
		k = dir(u[1]) SUBSEP u[2]
		d = (k in defin) ? defin[k] : ((u[2] in def) ? def[u[2]] : "")
		if (d == "" || d == u[1] || u[2] == "main") continue
		if (!((u[1], d) in e)) { e[u[1], d] = u[2]; adj[u[1]] = adj[u[1]] " " d
			nodes[u[1]]; nodes[d] }
	}
	if (show) for (k in e) { split(k, p, SUBSEP); print "edge", p[1], "->", p[2], "(" e[k] ")" }
	# Tarjan strongly connected components; a component of two or more
	# files is a cycle.
	for (v in nodes) if (!(v in idx)) scc(v)
	for (c = 1; c <= ncomp; c++) print "cycle:", comp[c]
	if (ncomp) exit 1
	print "no cycles"
}
function scc(v,    w, i, m, ws, cnt) {
	idx[v] = low[v] = ++counter; stack[++sp] = v; on[v] = 1
	m = split(adj[v], ws, " ")
	for (i = 1; i <= m; i++) {
		w = ws[i]
		if (!(w in idx)) { scc(w); if (low[w] < low[v]) low[v] = low[w] }
		else if (on[w] && idx[w] < low[v]) low[v] = idx[w]
	}
	if (low[v] == idx[v]) {
		cnt = 0; s = ""
		do { w = stack[sp--]; on[w] = 0; s = s " " w; cnt++ } while (w != v)
		if (cnt > 1) comp[++ncomp] = substr(s, 2)
	}
}'
