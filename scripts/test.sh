#!/usr/bin/env bash
# Runs every test of the project on a fresh Debian machine: installs what the
# tests need (real servers the examples break on purpose), then vets, tests
# and briefly fuzzes the manifest parsers and the run directory readers. CI
# runs this same script.
set -euo pipefail
cd "$(dirname "$0")/.."

# need_packages PKG...: installs those of the Debian packages not installed.
need_packages() {
  local p missing=() sudo=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "installing: ${missing[*]}"
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian packages the tests run for real.
need_packages redis-server redis-tools etcd-server etcd-client postgresql busybox-static chromium prometheus util-linux mount e2fsprogs perl gcc libc6-dev binutils file python3 sqlite3 procps
# The redis package starts a system server; the tests start their own.
if command -v systemctl >/dev/null && systemctl is-active -q redis-server 2>/dev/null; then
  systemctl stop redis-server || true
fi

# The Kubernetes backend's tests run against a real single-node cluster that
# scripts/k8s/cluster.sh builds (cached in /var/cache/chaos-k8s) and starts
# (docs/test-cluster.md); its KUBECONFIG and CHAOS_K8S_* are exported for go
# test, and it is taken down at exit if this run started it. Outside CI,
# CHAOS_K8S=off skips it (and the tests that need it).
k8s_started=""

# Every go command of this script runs in a session of its own: go test
# runs the compiled test binary as its child, and that binary starts
# processes of its own, some in process groups of their own. A background
# job of this script (no job control) is never a process group leader, so
# setsid makes it a session leader in place: its pid is the session's id.
# The script waits for it with wait, which a signal interrupts; a command
# in the foreground would keep running after a SIGTERM to the script alone
# (the signal never reaches it), and a background job ignores Ctrl-C's
# SIGINT. sessions lists those still to be ended.
sessions=()
session_start() {
  setsid "$@" &
  sessions+=("$!")
  last_session=$!
}
# session runs a command in a session of its own and waits for it.
session() {
  session_start "$@"
  wait "$last_session"
}
# session_stop ends every process of each session still running and waits
# for them (first TERM, KILL after 10 s).
session_stop() {
  local i s
  for s in "${sessions[@]}"; do
    pkill -TERM -s "$s" 2>/dev/null || true
  done
  for s in "${sessions[@]}"; do
    for ((i = 0; i < 100; i++)); do
      pgrep -s "$s" >/dev/null || break
      sleep 0.1
    done
    pkill -KILL -s "$s" 2>/dev/null || true
    wait "$s" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      pgrep -s "$s" >/dev/null || break
      sleep 0.1
    done
  done
  sessions=()
}

# at_exit, whatever ends the script, ends the go commands still running
# and only then takes the cluster down, if this run started it.
at_exit() {
  local rc=$?
  session_stop
  if [ -n "$k8s_started" ]; then
    scripts/k8s/cluster.sh down || rc=1
  fi
  exit "$rc"
}
trap at_exit EXIT

if [ "${CHAOS_K8S:-on}" = off ] && [ "${CI:-}" != true ]; then
  echo "CHAOS_K8S=off: no Kubernetes test cluster"
else
  need_packages containerd runc containernetworking-plugins iptables nftables iproute2 openssl curl python3 busybox-static
  scripts/k8s/cluster.sh build
  if ! scripts/k8s/cluster.sh status >/dev/null 2>&1; then
    k8s_started=1
  fi
  scripts/k8s/cluster.sh up
  k8s_env=$(scripts/k8s/cluster.sh env)
  eval "$k8s_env"
  scripts/k8s/smoke.sh
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi
session go vet ./...
# staticcheck (unused code, deprecated APIs, likely bugs) at a pinned version,
# installed outside the repository; any finding fails the run.
staticcheck_version=0.8.2
staticcheck="$(go env GOPATH)/bin/staticcheck"
if ! "$staticcheck" -version 2>/dev/null | grep -qF "($staticcheck_version)"; then
  GOBIN="$(go env GOPATH)/bin" go install "honnef.co/go/tools/cmd/staticcheck@v$staticcheck_version"
fi
session "$staticcheck" ./...
# test/kubernetes runs after the other packages, in a go test of its own
# with a longer timeout. Beside them it saved wall time on a fast machine,
# but on one twice as slow (as on 2026-12-02) the two together saturated
# the 2 cores for twenty minutes and timing-bound tests of both failed.
k8s_pkg=$(go list ./test/kubernetes/)
rc=0
session go test -count=1 -timeout 15m $(go list ./... | grep -vxF "$k8s_pkg") || rc=$?
session go test -count=1 -timeout 25m "$k8s_pkg" || rc=$?
[ "$rc" = 0 ] || exit "$rc"
# The concurrent heart of the harness again, under the race detector.
session go test -race -count=1 -timeout 10m ./internal/engine/ ./internal/proc/ ./internal/observe/ ./internal/backend/local/ ./internal/shell/

# fuzz PKG TARGET TIME fuzzes one target. Go's fuzzing coordinator can
# fail a target that found nothing with "context deadline exceeded" when
# -fuzztime runs out while the machine is loaded (its check of which
# context expired races with the cancel): that failure, with no failing
# input written to testdata/fuzz, is the toolchain's and is run once more;
# any other failure, or one that wrote an input, fails.
fuzz() {
  local pkg=$1 target=$2 time=$3 corpus="$1/testdata/fuzz/$2" before after out
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  for attempt in 1 2; do
    if session go test -run='^$' -fuzz="^$target\$" -fuzztime="$time" -fuzzminimizetime=3s "$pkg" >"$fuzz_log" 2>&1; then
      cat "$fuzz_log"
      return 0
    fi
    out=$(cat "$fuzz_log")
    echo "$out"
    after=$(ls "$corpus" 2>/dev/null | sort || true)
    if [ "$attempt" = 2 ] || [ "$before" != "$after" ] || ! grep -q '^    context deadline exceeded$' <<<"$out" || grep -q 'Failing input written' <<<"$out"; then
      return 1
    fi
    echo "fuzz: $target failed with Go's coordinator deadline and wrote no input; once more"
  done
}

# A short fuzz of each manifest parser; longer runs are for developers.
fuzz_log=$(mktemp)
fuzztime="${FUZZTIME:-15s}"
fuzz ./internal/experiment FuzzParseExperiment "$fuzztime"
fuzz ./internal/adapter FuzzParseAdapter "$fuzztime"
# And of each reader of a run directory, which is untrusted input (a
# downloaded CI artefact): the timeline, a metrics source, manifest.json,
# verdict.json, and a whole run through every way of seeing it.
readfuzztime="${FUZZTIME:-10s}"
for target in FuzzParseTimeline FuzzParseScrapes FuzzParseScrape FuzzReadManifest FuzzReadVerdict; do
  fuzz ./internal/rundir "$target" "$readfuzztime"
done
fuzz ./internal/runview FuzzLoad "$readfuzztime"

# A regression guard CI can afford: every benchmark of a hot path once, with
# small inputs where it takes a size. The figures stay in the log and in
# artifacts/bench.txt (CI keeps it), so a tenfold slowdown shows; what they
# are on a quiet machine is in docs/performance.md. No figure fails the
# run: a shared machine's timings are too noisy for a threshold.
rm -f "$fuzz_log"
mkdir -p artifacts
CHAOS_BENCH_N="${CHAOS_BENCH_N:-50}" session go test -run='^$' -benchtime=1x -timeout 20m \
  -bench='^Benchmark(KillAll|SignalOne|LeftoverScan|Spawn|FaultAll|ManyInstances|SignalLatency|ReceiveHTTP|Report|ParseManyKeys|EvaluateLarge|ReportLarge|ExportLarge|ShareLarge|CampaignOverhead)$' \
  ./internal/proc/ ./internal/shell/ ./internal/engine/ ./internal/observe/ ./internal/otlp/ ./internal/report/ ./internal/experiment/ ./internal/cli/ ./internal/campaignrun/ \
  >artifacts/bench.txt || { cat artifacts/bench.txt; exit 1; }
cat artifacts/bench.txt
