#!/usr/bin/env bash
# Runs each durability example N times (default 20) with its durable adapter
# and with its planted weakness, and prints a Markdown table: how often each
# gave the verdict it should (PASS, FAIL), the other verdicts seen, and the
# writers' mean rate. It needs redis-server, etcd and PostgreSQL (Debian's
# packages, as scripts/test.sh installs them) and root (PostgreSQL runs as
# its postgres user). The table in docs/checkers.md comes from this script.
#
#   scripts/durability-table.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20}"
work=$(mktemp -d /tmp/chaos-durability.XXXXXX)
go build -o "$work/bin/chaos" ./cmd/chaos
go build -o "$work/bin/chaos-dbclient" ./examples/clients/dbclient
export PATH="$work/bin:$PATH" CHAOS_RUNS_DIR="$work/runs"

cases=(
  "redis-acked-adds-survive-kill local-redis-durable PASS"
  "redis-acked-adds-survive-kill local-redis-volatile FAIL"
  "etcd-acked-puts-survive-kill local-etcd-direct PASS"
  "etcd-acked-puts-survive-kill local-etcd-write-behind FAIL"
  "postgres-acked-inserts-survive-kill local-postgres-durable PASS"
  "postgres-acked-inserts-survive-kill local-postgres-async-commit FAIL"
)
echo "| experiment | adapter | want | right | other verdicts | writer ops/s (mean of each client) | lost (mean, FAIL runs) | seconds per run |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for c in "${cases[@]}"; do
  read -r x a want <<<"$c"
  right=0 other="" rates="" lost="" secs=""
  for i in $(seq 1 "$n"); do
    t0=$(date +%s.%N)
    out=$(chaos run --adapter "examples/adapters/$a.yaml" "examples/$x.yaml" 2>/dev/null) || true
    t1=$(date +%s.%N)
    secs="$secs $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    v=$(printf '%s\n' "$out" | tail -2 | head -1)
    run=$(printf '%s\n' "$out" | tail -1)
    if [ "$v" = "$want" ]; then right=$((right + 1)); else other="$other $v"; fi
    for f in "$run"/workloads/writer/instances/*/logs/process.log; do
      r=$(sed -n 's/.*: \([0-9]*\) ops\/s.*/\1/p' "$f" | tail -1)
      [ -n "$r" ] && rates="$rates $r"
    done
    l=$(printf '%s\n' "$out" | sed -n 's/^ *lost: \([0-9]*\) acknowledged.*/\1/p' | head -1)
    [ -n "$l" ] && lost="$lost $l"
  done
  mean() { echo "$@" | tr ' ' '\n' | awk 'NF { s += $1; k++ } END { if (k) printf "%.0f", s / k; else printf "-" }'; }
  mean1() { echo "$@" | tr ' ' '\n' | awk 'NF { s += $1; k++ } END { if (k) printf "%.1f", s / k; else printf "-" }'; }
  others=$(echo "$other" | tr ' ' '\n' | awk 'NF { c[$1]++ } END { for (v in c) printf "%s %d ", v, c[v] }')
  echo "| $x | $a | $want | $right of $n | ${others:--} | $(mean $rates) | $(mean $lost) | $(mean1 $secs) |"
done
echo
echo "runs: $CHAOS_RUNS_DIR"
