sock="/tmp/chaos-redis-$CHAOS_RUN_ID.sock"
redis-cli -s "$sock" ping | grep -q PONG || { echo "the gateway does not answer on $sock"; exit 1; }
for key in $(redis-cli -s "$sock" --scan --pattern 'counter:*' | sort); do
  echo "${key#counter:} $(redis-cli -s "$sock" SCARD "$key")"
done > counts
cat counts
