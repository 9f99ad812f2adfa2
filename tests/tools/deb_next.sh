#!/bin/bash
# The package of a next version, for the upgrade and rollback tests
# (tests/it/it_deb.sh, it_deb_install.sh): this tree with a changelog entry
# VERSION+next1 on top and one line added to the packaged rlgate.ini, so
# that an upgrade meets an edited conffile that the package changed too.
# make deb builds it in build/deb-next (the tree copied outside git's
# worktree, where make deb takes every file); it is built again only when a
# file of this tree differs from build/deb-next/src's. Prints the .deb's
# path; exit 1 (the build's log on stderr) when it cannot be built.
set -e
TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$TOP/build/deb-next
VERSION=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)
NEXT=$VERSION+next1
DEB=$OUT/rlgate_${NEXT}_$(dpkg --print-architecture).deb
# The line the next package adds to rlgate.ini.
LINE="; the next version's packaged file (tests/tools/deb_next.sh)"

files() { git -C "$TOP" ls-files -z --cached --others --exclude-standard; }
current() {
	[ -f "$DEB" ] || return 1
	files | while IFS= read -r -d '' f; do
		case $f in debian/changelog|conf/rlgate.ini) continue;; esac
		[ -e "$TOP/$f" ] || continue
		cmp -s "$TOP/$f" "$OUT/src/$f" || exit 1
	done
}
if ! current; then
	tree=$(mktemp -d /tmp/rlgate-next.XXXXXX)
	trap 'rm -rf "$tree"' EXIT
	files | (cd "$TOP" && tar --null -T - --ignore-failed-read -cf -) | tar -xf - -C "$tree"
	who=$(sed -n '0,/^ -- /s/^ -- \(.*>\)  .*/\1/p' "$TOP/debian/changelog")
	{
		printf 'rlgate (%s) unstable; urgency=medium\n\n' "$NEXT"
		printf '  * Test build of a next version (tests/tools/deb_next.sh).\n\n'
		printf ' -- %s  %s\n\n' "$who" "$(date -R)"
		cat "$TOP/debian/changelog"
	} > "$tree/debian/changelog"
	echo "$LINE" >> "$tree/conf/rlgate.ini"
	rm -f "$OUT"/rlgate*"_${NEXT}_"*
	make -s -C "$tree" deb DEB_BUILD="$OUT" > "$tree/make.log" 2>&1 || { cat "$tree/make.log" >&2; exit 1; }
fi
echo "$DEB"
