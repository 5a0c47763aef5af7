i=$(( $(cat tick 2>/dev/null || echo 0) + 1 ))
n=0
while [ "$i" -le "$TICKS" ]; do
  echo "$i $(date +%s.%3N)" >> journal
  n=$((n + 1))
  if [ "$n" -eq "$EVERY" ]; then
    n=0
    etcdctl --endpoints "$ETCD_ENDPOINT" --dial-timeout=1s --command-timeout=1s put "/counters/$CHAOS_INSTANCE" "$i" >/dev/null 2>&1 ||
      { echo "checkpoint $i lost: etcd did not answer within 1s" >&2; exit 1; }
  fi
  echo "$i" > tick.tmp && mv tick.tmp tick
  sleep "$INTERVAL"
  i=$((i + 1))
done
