#!/bin/bash
# A short libFuzzer run of every tests/fuzz/fuzz_NAME.c target (built by `make
# test` with clang, -fsanitize=fuzzer,address,undefined), FUZZ_TEST_SECONDS
# (default 4) each: first every input of its seed corpus tests/fuzz/corpus/NAME/
# must pass, then new inputs are generated for the rest of the time. A
# crash, a sanitizer report, a leak or a broken invariant fails the check
# and leaves the reproducing input in the kept directory. The long run is
# `make fuzz` (FUZZ_SECONDS, default 60).
. "$(dirname "$0")/../lib.sh"

secs=${FUZZ_TEST_SECONDS:-4}
targets=$(cd "$TOP/tests/fuzz" && ls fuzz_*.c 2>/dev/null | sed 's/\.c$//')
check "there are fuzz targets" test -n "$targets"
for f in $targets; do
	name=${f#fuzz_}
	bin=$TOP/build/tests/fuzz/$f
	if [ ! -x "$bin" ]; then
		not_ok "$f is built (make build/tests/fuzz/$f needs clang)"
		continue
	fi
	check "$f has a seed corpus in tests/fuzz/corpus/$name" \
		test -n "$(ls -A "$TOP/tests/fuzz/corpus/$name" 2>/dev/null)"
	# Seeds alone, once each: they must all pass.
	"$bin" -runs=0 "$TOP/tests/fuzz/corpus/$name" > "$T/$f.seeds.log" 2>&1
	is "$f: every seed input passes" 0 $?
	mkdir -p "$T/$name"
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix="$T/$name/" -print_final_stats=1 \
		"$T/$name" "$TOP/tests/fuzz/corpus/$name" > "$T/$f.log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$T/$f.log")
	if [ "$rc" != 0 ]; then
		grep -E '^fuzz_|^==[0-9]+==ERROR|SUMMARY|runtime error' "$T/$f.log" | head -5
		ls "$T/$name"/crash-* "$T/$name"/leak-* "$T/$name"/timeout-* 2>/dev/null
	fi
	is "$f: ${secs}s of fuzzing (${runs:-0} inputs) found nothing" 0 "$rc"
	# A target that stops at once (or never runs its inputs) finds nothing
	# too: the run must have executed inputs beyond its seeds.
	seeds=$(ls "$TOP/tests/fuzz/corpus/$name" | wc -l)
	check "$f: at least 100 inputs executed beyond the $seeds seeds (${runs:-none})" \
		at_least $((seeds + 100)) "$runs"
done
finish
