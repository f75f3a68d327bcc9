#!/usr/bin/env bash
# make dist (D3): static warden binaries for linux/amd64 and linux/arm64,
# trimmed of local paths and stamped with the version (git describe) and
# the commit, their SHA256SUMS and an SPDX bill of materials. Nothing in
# them depends on the machine, the time or untracked files: two builds of
# one commit are byte-identical (TestD3DistIsReproducible).
set -euo pipefail
out=${1:?usage: dist.sh OUTDIR [VERSION]}
version=${2:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
created=$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit+modified"
mkdir -p "$out"
for arch in amd64 arm64; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
		-ldflags "-s -w -buildid= -X github.com/wardenhq/warden/cmd/internal/buildinfo.version=$version -X github.com/wardenhq/warden/cmd/internal/buildinfo.commit=$commit" \
		-o "$out/warden-linux-$arch" ./cmd/warden
done
go run ./cmd/internal/sbom -created "$created" -name "warden-$version" "$out/warden-linux-amd64" "$out/warden-linux-arm64" > "$out/warden.spdx.json"
(cd "$out" && sha256sum warden-linux-amd64 warden-linux-arm64 warden.spdx.json > SHA256SUMS)
# What was written: the files SHA256SUMS lists, and SHA256SUMS itself.
echo "dist: $(($(wc -l < "$out/SHA256SUMS") + 1)) files in $out for warden $version ($(cd "$out" && echo warden-linux-amd64 warden-linux-arm64 warden.spdx.json SHA256SUMS))"
