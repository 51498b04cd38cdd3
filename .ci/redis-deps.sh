#!/usr/bin/env bash
# Installs what the fleet tests (package fleet, cmd/netcode's fleet command)
# need: Debian's redis-server, which the tests start themselves on a free
# loopback port (internal/testing/redistest). Idempotent: does nothing when
# redis-server is already there. .ci/run calls it before the tests; run it
# by hand to test locally.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
	echo "redis-deps: $(command -v redis-server): $(redis-server --version)"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "redis-deps: not root and no sudo; install redis-server yourself" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "redis-deps: installing redis-server"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
# The tests start their own servers; the package's service is not needed.
$SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
echo "redis-deps: $(command -v redis-server): $(redis-server --version)"
