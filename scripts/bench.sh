#!/usr/bin/env bash
# Measures the harness: whole runs with hyperfine (Debian's package) and the
# Go benchmarks of the hot paths. Timings on shared machines are noisy:
# compare medians within one run of this script.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is not installed: apt-get install -y hyperfine"; exit 2; }
bin=$(mktemp -d)/chaos
# Built as scripts/release.sh builds it: static, so no dynamic loader at
# every start.
CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/chaos
runs=$(mktemp -d)
trap 'rm -rf "$runs" "$(dirname "$bin")"' EXIT

# A whole run of the smallest experiment against the same job in plain
# shell (issue 16: within 3x), and its offline evaluation. The experiment
# is copied out of the repository, as a user's would be, so no git runs.
cp examples/hello-world.yaml "$runs/hello-world.yaml"
cat >"$runs/hello.sh" <<'EOF'
d=$(mktemp -d)
mkdir "$d/out"
sh -c 'echo "hello, world" > "$1/greeting"' sh "$d/out"
echo $? >"$d/exit_code"
grep -qx "hello, world" "$d/out/greeting"
rm -rf "$d"
EOF
"$bin" run --plain --adapter local --runs-dir "$runs" "$runs/hello-world.yaml" >/dev/null 2>&1
run=$(ls -d "$runs"/hello-world/* | head -1)
# -N: no shell between hyperfine and either command, whose start would
# add the same millisecond to both.
hyperfine -N --warmup 3 --runs "${RUNS:-20}" --export-markdown "${OUT:-/dev/stdout}" \
  -n 'run hello-world (local)' "$bin run --plain --adapter local --runs-dir $runs $runs/hello-world.yaml" \
  -n 'the same job in plain shell' "sh $runs/hello.sh" \
  -n 'evaluate hello-world' "$bin evaluate $run" \
  -n 'validate every example' "$bin validate --dir examples"

# A campaign of 20 runs that do nothing, against the shell loop it replaces.
printf '%s\n' 'apiVersion: chaos/v1alpha1' 'id: noop' 'title: Nothing at all, to measure the harness' \
  'hypothesis: The instance exits.' 'timeout: 1m' 'workloads: [{name: w, instances: 1, run: ":"}]' 'flow: w' >"$runs/noop.yaml"
hyperfine --warmup 1 --runs "${CAMPAIGN_RUNS:-5}" --export-markdown "${OUT:-/dev/stdout}" \
  -n 'chaos run --count 20 (noop)' "$bin run --count 20 --adapter local --runs-dir $runs $runs/noop.yaml" \
  -n 'shell loop of 20 chaos run (noop)' "for i in \$(seq 20); do $bin run --plain --adapter local --runs-dir $runs $runs/noop.yaml; done"

# The offline tools on a large run (issue 16: 99,116 events, 9,000
# operation applications, 1,114 scrapes of 31 families), against jq reading
# the same two files (the timeline and the scrapes).
command -v jq >/dev/null || { echo "jq is not installed: apt-get install -y jq"; exit 2; }
BIGRUN_DIR="$runs/big" go test -count=1 -run '^TestWrite$' ./internal/rundir/bigrun/ >/dev/null
big=$(ls -d "$runs"/big/restart-storm/*)
hyperfine --warmup 1 --runs "${BIG_RUNS:-5}" --export-markdown "${OUT:-/dev/stdout}" \
  -n 'jq reads timeline and scrapes' "jq -c . $big/timeline.jsonl >/dev/null; jq -c . $big/system/metrics/gateway.jsonl >/dev/null" \
  -n 'cat of the same files' "cat $big/timeline.jsonl $big/system/metrics/gateway.jsonl >/dev/null" \
  -n 'evaluate (large run)' "$bin evaluate -q $big" \
  -n 'report (large run)' "$bin report $big" \
  -n 'export (large run)' "$bin export $big -o $runs/big.om" \
  -n 'share (large run)' "$bin share $big -o $runs/big.md"
echo "report.html of the large run: $(stat -c %s "$big/report.html") bytes"

go test -run '^$' -bench 'SignalLatency|ReceiveHTTP|Report' -benchtime "${BENCHTIME:-1x}" \
  ./internal/observe/ ./internal/otlp/ ./internal/report/
go test -run '^$' -bench 'Large' -benchtime "${BENCHTIME:-1x}" ./internal/cli/
go test -run '^$' -bench 'LeftoverScan' -benchtime "${SCAN_BENCHTIME:-100x}" ./internal/proc/
# What one short script costs the harness, by how it is started, against
# the shell starting the same (the processes of a run are most of its
# fixed cost).
go test -run '^$' -bench 'Spawn' -benchtime "${SPAWN_BENCHTIME:-300x}" ./internal/shell/
sh -c 'n=300; s=$(date +%s%N); i=0; while [ $i -lt $n ]; do /bin/sh -c "exit 0"; i=$((i+1)); done; e=$(date +%s%N); echo "the shell starting /bin/sh -c \"exit 0\": $(( (e-s)/n )) ns/op"'

go test -run '^$' -bench 'CampaignOverhead' -benchtime "${CAMPAIGN_BENCHTIME:-100x}" ./internal/campaignrun/

# At scale (each opt-in, for they take minutes): DOCKER_N containers
# DOCKER_RUNS times against a docker run + docker cp loop, failing on any
# lost event or wrong exit code; K8S_PODS pods on the test cluster's kwok
# nodes (scripts/k8s/cluster.sh up && scripts/k8s/cluster.sh kwok 100, and
# eval "$(scripts/k8s/cluster.sh env)"), K8S_PERCENT of them (10) killed by
# one run.
if [ -n "${DOCKER_N:-}" ]; then
  CHAOS_BIN=$bin N=$DOCKER_N RUNS=${DOCKER_RUNS:-3} scripts/docker-scale.sh
fi
if [ -n "${K8S_PODS:-}" ]; then
  CHAOS_K8S_BENCH_PODS=$K8S_PODS CHAOS_K8S_BENCH_PERCENT=${K8S_PERCENT:-10} go test ./test/kubernetes -run '^$' -bench PodsAtScale -benchtime 1x -timeout 90m -v
fi

# Faults on many local instances (kill, freeze, restart-in-place of all:
# first-to-last spread, share reached, harness CPU per instance) and many
# short instances against a shell that starts the same (ratio, RSS, lost
# events). BENCH_N=10,100 keeps it short (CI); the goals are for 1,000.
CHAOS_BENCH_N="${BENCH_N:-10,100,1000}" go test -run '^$' -bench 'FaultAll|ManyInstances' \
  -benchtime "${SCALE_BENCHTIME:-1x}" -timeout 60m ./internal/engine/
