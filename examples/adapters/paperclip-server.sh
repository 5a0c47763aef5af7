#!/bin/sh
# A stand-in for Paperclip's control plane, for
# examples/paperclip-restart-plan.yaml: paperclip-server.sh DIR LOG.
#
# It keeps the tasks' records in DIR/state, takes each new record from a
# file dropped in DIR/inbox (a record is acknowledged once it is in the
# state), and logs each phase with a timestamp to LOG: starting,
# recovering (replaying its records, PAPERCLIP_RECOVERY_SECONDS, default
# 2: long enough for a kill aimed at it on a loaded machine), ready. DIR/phase says the phase for the health check, as Paperclip's
# /api/ready does.
#
# The planted race: recovery moves the records aside while it replays
# them, and a start that finds no records starts empty. So a kill while
# the server reports recovering loses every record; a kill at any other
# moment loses none. Only a kill aimed at "recovering" finds it.
dir=$1
log=$2
mkdir -p "$dir/inbox"
say() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) pid=$$ $*" >> "$log"; }
# The phase before the pid: the health check never reads an old "ready"
# beside the new pid.
echo starting > "$dir/phase"
echo $$ > "$dir/server.pid"
trap 'say "stopping (SIGTERM)"; exit 0' TERM
say starting
if [ -s "$dir/state" ]; then
  # Recovery has begun (the records are aside) when it says so.
  mv "$dir/state" "$dir/state.replaying"
  echo recovering > "$dir/phase"
  say "recovering $(wc -l < "$dir/state.replaying") records"
  sleep "${PAPERCLIP_RECOVERY_SECONDS:-2}"
  mv "$dir/state.replaying" "$dir/state"
fi
touch "$dir/state"
echo ready > "$dir/phase"
say ready
while :; do
  for f in "$dir"/inbox/*; do
    [ -e "$f" ] || continue
    cat "$f" >> "$dir/state" && rm -f "$f"
  done
  sleep 0.02
done
