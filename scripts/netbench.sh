#!/usr/bin/env bash
# Measures the harness's latency fault beside Toxiproxy's on this machine
# (issue 25): bulk throughput through a 1 ms latency, the delay of a
# message a millisecond through 50 ms (p50, p99; also with two processes
# spinning on the CPU), and the CPU the harness or toxiproxy-server spends
# per 1,000 messages through 10 ms; and a bulk download after the harness's
# 1 ms latency was applied and undone, beside one with no harness. Needs
# root (a run network of its own: namespaces, a bridge, a link to the host,
# all gone when it ends).
#
# Toxiproxy is installed from the Go module proxy into a temporary GOBIN,
# never into the repository. Usage: sudo scripts/netbench.sh [SECONDS]
# [ROUNDS] [-queue-in-harness] (defaults 5 and 3; the flag adds a column
# for the delay queue on a goroutine of the harness instead of its helper
# process); prints a Markdown table of ranges over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "scripts/netbench.sh needs root (network namespaces)"; exit 2; }
version=${TOXIPROXY_VERSION:-v2.5.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp/bin" GOFLAGS=-mod=mod go install "github.com/Shopify/toxiproxy/v2/cmd/server@$version"
go build -o "$tmp/netbench" ./internal/netfault/netbench
echo "Toxiproxy $version, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"
"$tmp/netbench" -toxiproxy "$tmp/bin/server" -seconds "${1:-5}" -rounds "${2:-3}" "${@:3}"
