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

# A campaign of 20 runs that do nothing, against the shell loop it replaces.
printf '%s\n' 'apiVersion: chaos/v1alpha1' 'id: noop' 'title: Nothing at all, to measure the harness' \
  'hypothesis: The instance exits.' 'timeout: 1m' 'workloads: [{name: w, instances: 1, run: ":"}]' 'flow: w' >"$runs/noop.yaml"
hyperfine --warmup 1 --runs "${CAMPAIGN_RUNS:-5}" --export-markdown "${OUT:-/dev/stdout}" \
  -n 'chaos run --count 20 (noop)' "$bin run --count 20 --adapter local --runs-dir $runs $runs/noop.yaml" \
  -n 'shell loop of 20 chaos run (noop)' "for i in \$(seq 20); do $bin run --plain --adapter local --runs-dir $runs $runs/noop.yaml; done"

go test -run '^$' -bench 'SignalLatency|ReceiveHTTP|Report' -benchtime "${BENCHTIME:-1x}" \
  ./internal/observe/ ./internal/otlp/ ./internal/report/
go test -run '^$' -bench 'CampaignOverhead' -benchtime "${CAMPAIGN_BENCHTIME:-100x}" ./internal/campaign/

# Faults on many local instances (kill, freeze, restart-in-place of all:
# first-to-last spread, share reached, harness CPU per instance) and many
# short instances against a shell that starts the same (ratio, RSS, lost
# events). BENCH_N=10,100 keeps it short (CI); the goals are for 1,000.
CHAOS_BENCH_N="${BENCH_N:-10,100,1000}" go test -run '^$' -bench 'FaultAll|ManyInstances' \
  -benchtime "${SCALE_BENCHTIME:-1x}" -timeout 60m ./internal/engine/
