#!/usr/bin/env bash
# make image (D1): builds the static binary, assembles the build context
# (the binary, rootfs/var/lib/warden owned by the image's user, rootfs/tmp)
# and builds Containerfile with podman. PODMAN may carry global options
# (e.g. PODMAN="podman --runtime runc --cgroup-manager cgroupfs").
set -euo pipefail
tag=${1:-warden:latest}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/wardenhq/warden/cmd/internal/buildinfo.version=$version -X github.com/wardenhq/warden/cmd/internal/buildinfo.commit=$revision" -o "$ctx/warden" ./cmd/warden
# Modes are set, not inherited from the caller's umask (a umask of 077
# would leave the binary unreadable to the image's user).
chmod 0755 "$ctx/warden"
mkdir -p "$ctx/rootfs/var/lib/warden" "$ctx/rootfs/tmp"
chmod 0700 "$ctx/rootfs/var/lib/warden"
chmod 1777 "$ctx/rootfs/tmp"
cp Containerfile "$ctx/Containerfile"
${PODMAN:-podman} build --quiet --tag "$tag" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" -f "$ctx/Containerfile" "$ctx"
