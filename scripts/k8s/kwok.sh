# Sourced by cluster.sh: kwok (sigs.k8s.io/kwok, built from the module in
# kwok/) simulates nodes and the pods bound to them, for scale benchmarks
# without real containers. It manages only the nodes annotated
# kwok.x-k8s.io/node=fake, never the cluster's real node.
# shellcheck shell=bash

KWOK_DIR=$HERE/kwok
kwok_key() {
  { cat "$KWOK_DIR/go.mod" "$KWOK_DIR/go.sum"; echo "CGO_ENABLED=0 -trimpath -ldflags=-s -w"; go env GOVERSION GOOS GOARCH; } |
    sha256sum | cut -c1-16
}
KWOK_BIN=""
cmd_build_kwok() {
  local key dir tmp mod t0=$EPOCHREALTIME
  key=$(kwok_key); dir=$CACHE_ROOT/kwok-$key; KWOK_BIN=$dir/bin/kwok
  if [ -x "$KWOK_BIN" ] && [ -f "$dir/stages.yaml" ]; then log "build-kwok: cached, $KWOK_BIN"; return 0; fi
  mkdir -p "$CACHE_ROOT"
  exec 8>"$CACHE_ROOT/.build-kwok-$key.lock"
  flock 8
  if [ -x "$KWOK_BIN" ] && [ -f "$dir/stages.yaml" ]; then exec 8>&-; return 0; fi
  rm -rf "$dir"
  tmp=$(mktemp -d "$CACHE_ROOT/.tmp-kwok-$key.XXXXXX")
  log "build-kwok: key $key, building kwok into $dir"
  if ! (cd "$KWOK_DIR" && export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" &&
    /usr/bin/time -v -o "$tmp/time-kwok.txt" nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/kwok" sigs.k8s.io/kwok/cmd/kwok); then
    rm -rf "$tmp"; die "kwok build failed"
  fi
  # kwok itself has no default stages (kwokctl adds them): take the "fast"
  # node and pod stages and the lease heartbeat from the same module version
  mod=$(cd "$KWOK_DIR" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  local f
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$mod/kustomize/stage/$f"
  done > "$tmp/stages.yaml"
  mv "$tmp" "$dir"
  exec 8>&-
  log "build-kwok: done in $(elapsed "$t0") s"
}

kwok_nodes() { # first count: YAML of fake nodes kwok-node-<first>..<first+count-1>
  local i
  for ((i = $1; i < $1 + $2; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: fake, kubeProxyVersion: fake}
EOF
  done
}

cmd_kwok() { # [N]: start kwok (once) and make sure N fake nodes exist and are Ready
  local n=${1:-100} port have t0=$EPOCHREALTIME
  find_bin
  healthy || die "kwok: no healthy cluster runs from $S (cluster.sh up)"
  cmd_build_kwok
  if ! pid_of kwok >/dev/null; then
    read -r port < <(free_ports 1)
    start kwok "$KWOK_BIN" --kubeconfig="$S/kubeconfig" --config="$(dirname "$(dirname "$KWOK_BIN")")/stages.yaml" \
      --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --cidr=10.128.0.1/16 \
      --node-ip=127.0.0.1 --server-address="127.0.0.1:$port" --node-lease-duration-seconds=40
    sleep 1
    pid_of kwok >/dev/null || die "kwok died: $(tail -n 20 "$S/logs/kwok.log")"
    log "kwok: started (pid $(pid_of kwok), log $S/logs/kwok.log)"
  fi
  have=$(kctl get nodes -l type=kwok -o name | wc -l)
  if ((have < n)); then kwok_nodes "$have" $((n - have)) | kctl apply -f - >/dev/null; fi
  local ready=0 i
  for ((i = 0; i < 1200; i++)); do
    ready=$(kctl get nodes -l type=kwok --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
    ((ready >= n)) && break
    sleep 0.5
  done
  ((ready >= n)) || die "kwok: only $ready of $n fake nodes Ready; log $S/logs/kwok.log"
  log "kwok: $ready fake nodes Ready in $(elapsed "$t0") s (label type=kwok, taint kwok.x-k8s.io/node=fake:NoSchedule)"
}
