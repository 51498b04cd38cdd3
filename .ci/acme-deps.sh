#!/usr/bin/env bash
# Installs what the ACME test (cmd/netcode's TestWireCommandACME) needs:
# Debian's pebble, Let's Encrypt's test ACME server, with its DNS helper
# pebble-challtestsrv; the test starts both itself on loopback.
# Idempotent: does nothing when pebble is already there. .ci/run calls it
# before the tests; run it by hand to test locally.
set -euo pipefail

if command -v pebble >/dev/null 2>&1 && command -v pebble-challtestsrv >/dev/null 2>&1; then
	echo "acme-deps: $(command -v pebble)"
	exit 0
fi

bash "$(dirname "$0")/apt-install.sh" acme-deps pebble
echo "acme-deps: $(command -v pebble)"
