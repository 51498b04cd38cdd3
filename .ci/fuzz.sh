#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 6s;
# .ci/run gives 3s).
# go test -fuzz takes one target in one package at a time, and builds and
# links the package's instrumented test binary each time; so each package
# with a fuzz target is built once (go test -c -fuzz), and its binary lists
# the targets and fuzzes each in turn, from the package's directory and
# with go test's corpus cache ($GOCACHE/fuzz/<package>), as go test -fuzz
# runs it. Only the packages whose test files declare a func Fuzz... are
# built (every fuzz target is such a declaration; the binary's list, as
# go test -list's, is the authority): go test -list on every package would
# link and run each package's tests.
# A run that fails without writing a crasher (the fuzzing engine itself can
# stop with "context deadline exceeded" at the time limit) is retried, up to
# four attempts;
# a crasher always fails the job. Minimisation is capped so that targets
# whose every execution is a real network round trip still make progress.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-6s}"
cachedir="$(go env GOCACHE)/fuzz"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
count=0
# crashers counts the failing inputs saved for a target (none: 0).
crashers() {
	if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi
}
pkgs=$(go list -f '{{.ImportPath}} {{.Dir}}' ./...)
while read -r pkg dir; do
	grep -qs '^func Fuzz' "$dir"/*_test.go || continue
	test="$bin/pkg.test"
	go test -c -fuzz . -o "$test" "$pkg"
	for target in $(cd "$dir" && "$test" -test.list '^Fuzz' | grep '^Fuzz' || true); do
		echo "-- $pkg $target ($fuzztime)"
		before=$(crashers "$dir/testdata/fuzz/$target")
		for attempt in 1 2 3 4; do
			if (cd "$dir" && "$test" -test.paniconexit0 -test.timeout 10m0s -test.run '^$' \
				-test.fuzz "^${target}\$" -test.fuzztime "$fuzztime" -test.fuzzminimizetime 50x \
				-test.fuzzcachedir "$cachedir/$pkg"); then
				break
			fi
			after=$(crashers "$dir/testdata/fuzz/$target")
			if [ "$after" -ne "$before" ]; then
				echo "$target found a failing input in $dir/testdata/fuzz/$target" >&2
				exit 1
			fi
			if [ "$attempt" -eq 4 ]; then
				echo "$target failed $attempt times without a crasher" >&2
				exit 1
			fi
			echo "-- $target failed without a crasher (attempt $attempt); retrying"
		done
		count=$((count + 1))
	done
	rm -f "$test"
done <<<"$pkgs"
echo "ran $count fuzz targets for $fuzztime each"
if [ "$count" -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
