#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 10s).
# go test -fuzz takes one target in one package at a time, so list them first.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
count=0
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "-- $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
		count=$((count + 1))
	done
done
echo "ran $count fuzz targets for $fuzztime each"
if [ "$count" -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
