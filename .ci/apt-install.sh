#!/usr/bin/env bash
# apt-install.sh TAG PACKAGE...: installs Debian packages for a CI step,
# as root or through sudo, quietly, without recommended packages unless
# APT_RECOMMENDS=1. TAG prefixes its messages. Called by the *-deps.sh
# scripts once they have found their program missing. With APT_UPDATED set
# to a file's path, the package lists are updated only if that file does
# not exist yet, which it then does (.ci/run: once a run, not once a
# script).
set -euo pipefail
tag="$1"
shift
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "$tag: not root and no sudo; install $* yourself" >&2
		exit 1
	fi
fi
recommends="--no-install-recommends"
if [ "${APT_RECOMMENDS:-0}" = 1 ]; then recommends=""; fi
export DEBIAN_FRONTEND=noninteractive
echo "$tag: installing $*"
if [ -z "${APT_UPDATED:-}" ] || [ ! -e "$APT_UPDATED" ]; then
	$SUDO apt-get update -qq
	if [ -n "${APT_UPDATED:-}" ]; then touch "$APT_UPDATED"; fi
fi
$SUDO apt-get install -y -qq $recommends "$@" >/dev/null
