sock="/tmp/chaos-redis-$CHAOS_RUN_ID.sock"
# incr adds this tick to this counter's set in the gateway, retrying
# until the gateway answers (SADD is idempotent, so a retry after a
# lost reply is harmless); a tick that had to wait leaves a line in
# waits.
incr() {
  since=""
  while :; do
    n=$(redis-cli -s "$sock" SADD "counter:$CHAOS_INSTANCE" "$i" 2>/dev/null)
    case $n in
      ''|*[!0-9]*) [ -n "$since" ] || since=$(date +%s.%3N); sleep 0.05 ;;
      *) break ;;
    esac
  done
  if [ -n "$since" ]; then
    echo "$i $since $(date +%s.%3N) gateway unavailable" >> waits
  fi
}
next=1
if [ -s tick ]; then next=$(( $(cat tick) + 1 )); fi
i=$next
while [ "$i" -le "$TICKS" ]; do
  echo "$i $(date +%s.%3N)" >> journal
  incr
  echo "$i" > tick.tmp && mv tick.tmp tick
  if [ "$i" -lt "$TICKS" ]; then sleep "$INTERVAL"; fi
  i=$((i + 1))
done
