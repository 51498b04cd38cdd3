#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 6s).
# go test -fuzz takes one target in one package at a time, so list them first.
# A run that fails without writing a crasher (the fuzzing engine itself can
# stop with "context deadline exceeded" at the time limit) is retried, up to
# four attempts;
# a crasher always fails the job. Minimisation is capped so that targets
# whose every execution is a real network round trip still make progress.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-6s}"
count=0
# crashers counts the failing inputs saved for a target (none: 0).
crashers() {
	if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi
}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "-- $pkg $target ($fuzztime)"
		before=$(crashers "$dir/testdata/fuzz/$target")
		for attempt in 1 2 3 4; do
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x "$pkg"; then
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
done
echo "ran $count fuzz targets for $fuzztime each"
if [ "$count" -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
