#!/usr/bin/env bash
# Docker at scale: N containers of a short script, RUNS times, each run
# paired with a plain `docker run` loop that does the same job (N containers
# at once, each one's output copied out with `docker cp`, its exit code
# read, the container removed).
#
# Every chaos run's timeline is checked: each instance has exactly one
# start and one die event (in the timeline and in
# system/watch/docker-events.jsonl), the die's exit code and the collected
# exit code equal what its script exited with (0, 1 or 2 by instance
# index), its output was copied out, and the watchdog never had to stand in
# for a lost event. Any miss fails the script loudly (exit 1).
#
#   N=100 RUNS=20 scripts/docker-scale.sh
#
# Prints one line per run (chaos and loop wall seconds, ratio) and the
# medians. Needs a Docker engine, jq, and `chaos build-image`'s image.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
RUNS=${RUNS:-3}
command -v jq >/dev/null || { echo "jq is not installed"; exit 2; }
tmp=$(mktemp -d)
trap 'docker ps -aq --filter label=chaos-bench='"$$"' | xargs -r docker rm -f >/dev/null 2>&1; rm -rf "$tmp"' EXIT
bin=${CHAOS_BIN:-}
if [ -z "$bin" ]; then
  bin=$tmp/chaos
  go build -o "$bin" ./cmd/chaos
fi
"$bin" build-image >/dev/null
image=chaos/busybox:latest

# The script: its output, a short sleep, an exit code by instance index.
# shellcheck disable=SC2016
script='echo "out-$CHAOS_INSTANCE" >"$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/out"; n=${CHAOS_INSTANCE##*-}; sleep 0.2; exit $((n % 3))'
cat >"$tmp/scale.yaml" <<EOF
apiVersion: chaos/v1alpha1
id: docker-scale
title: N containers of a short script
hypothesis: Every container ends with the exit code its script exited with.
timeout: 20m
workloads:
  - name: w
    instances: $N
    run: '$script'
flow: w
EOF

fail=0
loud() { echo "FAIL: $*" >&2; fail=1; }

# check verifies one chaos run directory.
check() {
  local dir=$1 tl=$1/timeline.jsonl ev=$1/system/watch/docker-events.jsonl
  [ "$(jq -r .verdict "$dir/verdict.json")" = PASS ] || loud "run $dir: verdict $(jq -r .verdict "$dir/verdict.json")"
  local bad
  bad=$(jq -rs --argjson n "$N" '
    def want($i): $i % 3;
    [range(0; $n)] as $idx
    | (map(select(.event == "container.event" and .role == "instance"))) as $ce
    | (map(select(.event == "instance.collected"))) as $col
    | (map(select(.event == "container.watchdog")) | map("watchdog stood in for a lost \(.lost) of \(.instance)")) +
      [ $idx[] as $i | "w-\($i)" as $name
        | ($ce | map(select(.instance == $name))) as $mine
        | ($mine | map(select(.action == "start")) | length) as $starts
        | ($mine | map(select(.action == "die"))) as $dies
        | ($col | map(select(.instance == $name))) as $c
        | if $starts != 1 then "\($name): \($starts) start events in the timeline"
          elif ($dies | length) != 1 then "\($name): \($dies | length) die events in the timeline"
          elif $dies[0].exit_code != want($i) then "\($name): die exit_code \($dies[0].exit_code), its script exited \(want($i))"
          elif ($c | length) != 1 or $c[0].exit_code != want($i) then "\($name): collected exit_code \($c | map(.exit_code)), its script exited \(want($i))"
          else empty end ]
    | .[]' "$tl")
  [ -z "$bad" ] || loud "run $dir: $bad"
  bad=$(jq -rs --argjson n "$N" '
    [range(0; $n)] as $idx
    | map(select(.role == "instance")) as $ev
    | $idx[] as $i | "w-\($i)" as $name
    | ($ev | map(select(.instance == $name) | .action)) as $a
    | ["create", "start", "die", "destroy"][] as $want
    | ($a | map(select(. == $want)) | length) as $k
    | select($k != 1) | "\($name): \($k) \($want) events in docker-events.jsonl"' "$ev")
  [ -z "$bad" ] || loud "run $dir: $bad"
  local i missing=0
  for ((i = 0; i < N; i++)); do
    [ "$(cat "$dir/workloads/w/instances/w-$i/output/out" 2>/dev/null)" = "out-w-$i" ] || missing=$((missing + 1))
  done
  [ "$missing" = 0 ] || loud "run $dir: $missing outputs not copied out"
}

# loop is the baseline: the same N containers with the docker CLI, all at
# once, each output copied out and each exit code checked.
loop() {
  local out=$1 i
  mkdir -p "$out"
  for ((i = 0; i < N; i++)); do
    (
      name=chaos-bench-$$-$i
      docker create --name "$name" --label chaos-bench=$$ -e CHAOS_INSTANCE=w-$i \
        -e CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR=/out "$image" \
        sh -c "mkdir -p /out; $script" >/dev/null
      code=0
      docker start -a "$name" >/dev/null 2>&1 || code=$?
      docker cp -q "$name:/out" "$out/w-$i"
      docker rm "$name" >/dev/null
      [ "$code" = $((i % 3)) ] || echo "loop w-$i: exit $code, want $((i % 3))" >>"$tmp/loop-bad"
    ) &
  done
  wait
}

ms() { echo $(($(date +%s%N) / 1000000)); }
echo "N=$N RUNS=$RUNS load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-4s %10s %10s %7s %s\n' run chaos_s loop_s ratio load1
for ((r = 1; r <= RUNS; r++)); do
  runs=$tmp/runs-$r
  t0=$(ms)
  "$bin" run --plain --adapter docker --runs-dir "$runs" "$tmp/scale.yaml" >"$tmp/out-$r" 2>"$tmp/err-$r" || true
  t1=$(ms)
  dir=$(tail -1 "$tmp/out-$r")
  if [ -d "$dir" ]; then check "$dir"; else loud "run $r: no run directory: $(tail -5 "$tmp/err-$r")"; fi
  t2=$(ms)
  loop "$tmp/loop-$r"
  t3=$(ms)
  [ ! -s "$tmp/loop-bad" ] || loud "the docker run loop of round $r: $(cat "$tmp/loop-bad")"
  rm -f "$tmp/loop-bad"
  printf '%-4s %10.2f %10.2f %7.2f %s\n' "$r" "$(echo "($t1-$t0)/1000" | bc -l)" "$(echo "($t3-$t2)/1000" | bc -l)" \
    "$(echo "($t1-$t0)/($t3-$t2)" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$tmp/table"
  rm -rf "$runs" "$tmp/loop-$r"
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "median: chaos $(awk '{print $2}' "$tmp/table" | median) s, loop $(awk '{print $3}' "$tmp/table" | median) s, ratio $(awk '{print $4}' "$tmp/table" | median)"
if [ "$fail" != 0 ]; then
  echo "FAIL: lost events or wrong exit codes (see above)" >&2
  exit 1
fi
echo "ok: every event of $RUNS runs of $N containers, every exit code right"
