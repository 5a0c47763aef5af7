#!/usr/bin/env bash
# Measures, for each database of the durability examples in its durable
# configuration, the rate of one client that keeps one connection
# (chaos-dbclient add, as the examples use) against the same adds made by
# forking the database's command-line client once per operation, as the
# hand-written workloads before histories did. Prints a Markdown table. Needs
# redis-server, etcd and PostgreSQL (Debian's packages) and root.
#
#   scripts/ops-rate.sh [SECONDS] [FORKED_OPS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3}" forked="${2:-200}"
work=$(mktemp -d /tmp/chaos-opsrate.XXXXXX)
chmod 755 "$work"
go build -o "$work/chaos-dbclient" ./examples/clients/dbclient
c="$work/chaos-dbclient"
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }
now() { date +%s.%N; }
row() { echo "| $1 | $2 | $3 | $(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", a / b }')× |"; }
one() { "$c" add -db "$1" -addr "$2" -for "${secs}s" | sed -n 's/.*: \([0-9]*\) ops\/s.*/\1/p'; }

echo "| database (durable configuration) | one connection, ops/s | one process per operation, ops/s | ratio |"
echo "| --- | --- | --- | --- |"

# Redis: append-only file, fsync always, on a unix socket.
sock="$work/redis.sock"
redis-server --daemonize yes --port 0 --unixsocket "$sock" --pidfile "$work/redis.pid" --dir "$work" \
  --logfile "$work/redis.log" --save "" --appendonly yes --appendfsync always
for i in $(seq 1 50); do redis-cli -s "$sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
a=$(one redis "$sock")
t0=$(now); for i in $(seq 1 "$forked"); do redis-cli -s "$sock" sadd forked "$i" >/dev/null; done; t1=$(now)
row "Redis 7 (appendfsync always)" "$a" "$(rate "$forked" "$t0" "$t1")"
kill "$(cat "$work/redis.pid")"

# etcd: a single member on ports the kernel chose.
read -r cport pport < <("$c" freeport -n 2)
url="http://127.0.0.1:$cport"
etcd --name m --data-dir "$work/etcd" --listen-client-urls "$url" --advertise-client-urls "$url" \
  --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
  --initial-cluster "m=http://127.0.0.1:$pport" >"$work/etcd.log" 2>&1 &
epid=$!
for i in $(seq 1 100); do "$c" ping -db etcd -addr "$url" 2>/dev/null && break; sleep 0.1; done
a=$(one etcd "$url")
t0=$(now); for i in $(seq 1 "$forked"); do ETCDCTL_API=3 etcdctl --endpoints "$url" put "/forked/$i" 1 >/dev/null; done; t1=$(now)
row "etcd 3.4 (one member)" "$a" "$(rate "$forked" "$t0" "$t1")"
kill "$epid"; wait "$epid" 2>/dev/null || true

# PostgreSQL: synchronous commit, unix socket, trust.
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
mkdir "$work/pg" && chown postgres "$work/pg"
runuser -u postgres -- "$bin/initdb" -D "$work/pg/data" -A trust -U postgres --no-sync >/dev/null
runuser -u postgres -- /bin/sh -c "'$bin/postgres' -D '$work/pg/data' -c listen_addresses= -c unix_socket_directories='$work/pg' >'$work/pg/log' 2>&1 & echo \$! > '$work/pg/pid'"
sock="$work/pg/.s.PGSQL.5432"
for i in $(seq 1 100); do "$c" ping -db postgres -addr "$sock" 2>/dev/null && break; sleep 0.1; done
a=$(one postgres "$sock")
t0=$(now); for i in $(seq 1 "$forked"); do psql -h "$work/pg" -U postgres -qAtX -c "INSERT INTO chaos_set VALUES (-$i)" >/dev/null; done; t1=$(now)
row "PostgreSQL 15 (synchronous_commit=on)" "$a" "$(rate "$forked" "$t0" "$t1")"
kill -INT "$(cat "$work/pg/pid")"
sleep 1
rm -rf "$work"
