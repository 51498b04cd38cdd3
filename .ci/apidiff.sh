#!/usr/bin/env bash
# The exported API against the last release (netcode.Version in version.go):
# golang.org/x/exp's apidiff lists the incompatible changes since the release,
# and each must be named in CHANGELOG.md, in its Unreleased section (or in the
# release's own entry when the release commit is found without its tag: the
# entry may name changes merged after the commit that set the version).
#
# The release commit is the tag v$VERSION when the clone has it; otherwise the
# commit that last set `const Version = "$VERSION"` (CI clones main afresh,
# and a tag may not reach it). APIDIFF_BASE=<commit> overrides it.
set -euo pipefail
cd "$(dirname "$0")/.."
module=github.com/gonetcode/netcode
apidiff_version=v0.0.0-20261113113407-e3970619a1a4

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' version.go)
[ -n "$version" ] || { echo "apidiff: no const Version in version.go"; exit 1; }
sections=("Unreleased")
if [ -n "${APIDIFF_BASE:-}" ]; then
	base=$APIDIFF_BASE
	sections+=("$version")
elif base=$(git rev-parse -q --verify "refs/tags/v$version^{commit}"); then
	:
else
	base=$(git log -1 --format=%H -S"const Version = \"$version\"" -- version.go)
	[ -n "$base" ] || { echo "apidiff: no commit sets Version $version (a shallow clone? git fetch --unshallow)"; exit 1; }
	sections+=("$version")
fi
echo "   the last release: $version at $(git rev-parse --short "$base")"
if git diff --quiet "$base" -- '*.go' go.mod; then
	echo "   no Go source changed since"
	exit 0
fi

go install "golang.org/x/exp/cmd/apidiff@$apidiff_version"
apidiff="$(go env GOPATH)/bin/apidiff"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git archive "$base" | tar -x -C "$tmp/old"
# apidiff's stderr lists every internal package it skips; show it only on failure.
(cd "$tmp/old" && "$apidiff" -m -w "$tmp/old.x" "$module" 2>"$tmp/err") || { cat "$tmp/err"; exit 1; }
"$apidiff" -m -w "$tmp/new.x" "$module" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
"$apidiff" -m -incompatible "$tmp/old.x" "$tmp/new.x" >"$tmp/diff" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
changes=$(grep '^- ' "$tmp/diff" || true)
[ -n "$changes" ] || { echo "   no incompatible change"; exit 0; }

# The text of the CHANGELOG sections that may name a change.
text=""
for s in "${sections[@]}"; do
	text+=$(awk -v h="## [$s]" 'index($0, h) == 1 {on = 1; next} /^## \[/ {on = 0} on' CHANGELOG.md)
done
missing=0
while IFS= read -r line; do
	name=${line#- }
	name=${name%%: *}
	case $name in
	"package "*) name=${name#package $module/} ;;
	./*) name=${name#./}; name=${name##*/}; name=${name#*.} ;; # ./dir/pkg.Name -> Name
	esac
	name=${name//\(\*/}
	name=${name//)/}
	if ! grep -qF -- "$name" <<<"$text"; then
		echo "   not in CHANGELOG.md's ${sections[*]}: $line"
		missing=1
	fi
done <<<"$changes"
if [ "$missing" = 1 ]; then
	echo "apidiff: name each incompatible change above in CHANGELOG.md's Unreleased section, by the name apidiff gives (Type.Field, Type.Method), with what to write instead"
	exit 1
fi
echo "   every incompatible change is in CHANGELOG.md:"
sed 's/^/   /' <<<"$changes"
