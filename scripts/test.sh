#!/usr/bin/env bash
# Runs every test of the project on a fresh Debian machine: installs what the
# tests need (real servers the examples break on purpose), then vets, tests
# and briefly fuzzes the manifest parsers. CI runs this same script.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests run for real.
packages=(redis-server redis-tools etcd-server etcd-client postgresql busybox-static chromium prometheus)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The redis package starts a system server; the tests start their own.
if command -v systemctl >/dev/null && systemctl is-active -q redis-server 2>/dev/null; then
  systemctl stop redis-server || true
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -count=1 -timeout 15m ./...
# The concurrent heart of the harness again, under the race detector.
go test -race -count=1 -timeout 10m ./internal/engine/ ./internal/proc/ ./internal/observe/ ./internal/backend/local/ ./internal/shell/

# A short fuzz of each manifest parser; longer runs are for developers.
fuzztime="${FUZZTIME:-15s}"
go test -run='^$' -fuzz='^FuzzParseExperiment$' -fuzztime="$fuzztime" -fuzzminimizetime=3s ./internal/experiment/
go test -run='^$' -fuzz='^FuzzParseAdapter$' -fuzztime="$fuzztime" -fuzzminimizetime=3s ./internal/adapter/
