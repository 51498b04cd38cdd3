#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 10s).
# go test -fuzz takes one target in one package at a time, so list them first.
# A run that fails without writing a crasher (the fuzzing engine itself can
# stop with "context deadline exceeded" at the time limit) is retried once;
# a crasher always fails the job. Minimisation is capped so that targets
# whose every execution is a real network round trip still make progress.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
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
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x "$pkg"; then
			after=$(crashers "$dir/testdata/fuzz/$target")
			if [ "$after" -ne "$before" ]; then
				echo "$target found a failing input in $dir/testdata/fuzz/$target" >&2
				exit 1
			fi
			echo "-- $target failed without a crasher; retrying once"
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 50x "$pkg"
		fi
		count=$((count + 1))
	done
done
echo "ran $count fuzz targets for $fuzztime each"
if [ "$count" -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
