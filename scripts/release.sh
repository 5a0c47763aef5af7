#!/usr/bin/env bash
# Builds release binaries of chaos with their version stamped in (chaos
# version, chaos --version and every run's manifest.json show it), the man
# pages of every command, and checksums, into dist/ (or $OUT).
#
#   scripts/release.sh                                  # the version is git describe's
#   VERSION=v1.2.3 scripts/release.sh
#   VERSION=v1.2.3 PLATFORMS=linux/amd64 OUT=/tmp/dist scripts/release.sh
#
# Binaries are static (CGO_ENABLED=0) and reproducible (-trimpath; the man
# pages' date is $SOURCE_DATE_EPOCH, else the commit's time).
set -euo pipefail
cd "$(dirname "$0")/.."

pkg=github.com/chaos-harness/chaos
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}"
out="${OUT:-dist}"
platforms="${PLATFORMS:-linux/amd64 linux/arm64}"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
fi
export SOURCE_DATE_EPOCH

ldflags="-s -w -X $pkg/internal/buildinfo.Version=$version"
mkdir -p "$out"
host="$(go env GOOS)/$(go env GOARCH)"
hostbin=""
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  bin="$out/chaos-$version-$os-$arch"
  echo "building $bin"
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$bin" ./cmd/chaos
  [ "$p" = "$host" ] && hostbin="$bin"
done
if [ -z "$hostbin" ]; then
  # The man pages come from a binary that runs here.
  hostbin="$(mktemp -d)/chaos"
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$hostbin" ./cmd/chaos
fi

rm -rf "$out/man"
"$hostbin" docs --man "$out/man" >/dev/null
tar -C "$out" -czf "$out/chaos-$version-man.tar.gz" man
(cd "$out" && sha256sum chaos-"$version"-* > "chaos-$version-SHA256SUMS")
"$hostbin" version
echo "release $version in $out"
