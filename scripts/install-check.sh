#!/usr/bin/env bash
# Shows that `go install` builds warden for someone who does not clone:
# an empty GOBIN and an empty module cache, everything fetched through the
# module proxy by the module's import path. Run from the repository root.
set -euo pipefail
mod=$(go list -m)
case "$mod" in
  *.*/*) ;;
  *) echo "module path $mod is not an import path: go install $mod/cmd/warden@VERSION could never work" >&2; exit 1 ;;
esac
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOBIN="$work/bin" GOMODCACHE="$work/modcache" GOFLAGS=-modcacherw
go install ./cmd/warden
"$GOBIN/warden" help 2>&1 | head -n 3
echo "go install of $mod/cmd/warden into an empty GOBIN with a clean module cache: ok ($(du -sh "$GOBIN/warden" | cut -f1))"
