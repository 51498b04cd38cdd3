#!/usr/bin/env bash
# Installs what the fleet tests (package fleet, cmd/netcode's fleet command)
# need: Debian's redis-server and redis-cli (its dependency redis-tools),
# which the tests start themselves on free loopback ports
# (internal/testing/redistest; redis-cli makes the 3-master Cluster).
# Idempotent: does nothing when both are already there. .ci/run calls it before the tests; run it
# by hand to test locally.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
	echo "redis-deps: $(command -v redis-server): $(redis-server --version)"
	exit 0
fi

bash "$(dirname "$0")/apt-install.sh" redis-deps redis-server redis-tools
# The tests start their own servers; the package's service is not needed.
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
echo "redis-deps: $(command -v redis-server): $(redis-server --version)"
