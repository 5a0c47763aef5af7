#!/usr/bin/env bash
# Measures the harness: whole runs with hyperfine (Debian's package) and the
# Go benchmarks of the hot paths. Timings on shared machines are noisy:
# compare medians within one run of this script.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is not installed: apt-get install -y hyperfine"; exit 2; }
bin=$(mktemp -d)/chaos
go build -o "$bin" ./cmd/chaos
runs=$(mktemp -d)
trap 'rm -rf "$runs" "$(dirname "$bin")"' EXIT

# A whole run of the smallest experiment, and its offline evaluation.
"$bin" run --plain --adapter local --runs-dir "$runs" examples/hello-world.yaml >/dev/null 2>&1
run=$(ls -d "$runs"/hello-world/* | head -1)
hyperfine --warmup 3 --runs "${RUNS:-20}" --export-markdown "${OUT:-/dev/stdout}" \
  -n 'run hello-world (local)' "$bin run --plain --adapter local --runs-dir $runs examples/hello-world.yaml" \
  -n 'evaluate hello-world' "$bin evaluate $run" \
  -n 'validate every example' "$bin validate --dir examples"

go test -run '^$' -bench 'SignalLatency|ReceiveHTTP|Report' -benchtime "${BENCHTIME:-1x}" \
  ./internal/observe/ ./internal/otlp/ ./internal/report/
