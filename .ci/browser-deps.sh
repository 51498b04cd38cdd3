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

APT_RECOMMENDS=1 bash "$(dirname "$0")/apt-install.sh" browser-deps chromium
echo "browser-deps: $(command -v chromium): $(chromium --version 2>/dev/null || echo 'version unknown')"
