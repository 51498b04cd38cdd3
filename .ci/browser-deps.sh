#!/usr/bin/env bash
# Installs what the browser end-to-end test (examples/browser/app) needs:
# Debian's chromium. Idempotent: does nothing when a browser is already there.
# .ci/run calls it before the tests; run it by hand to test locally.
set -euo pipefail

for b in chromium chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "browser-deps: $(command -v "$b"): $("$b" --version 2>/dev/null || echo 'version unknown')"
		exit 0
	fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "browser-deps: not root and no sudo; install chromium yourself" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "browser-deps: installing chromium"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
echo "browser-deps: $(command -v chromium): $(chromium --version 2>/dev/null || echo 'version unknown')"
