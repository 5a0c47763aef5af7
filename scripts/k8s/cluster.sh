#!/usr/bin/env bash
# The project's own Kubernetes test cluster: a real kube-apiserver,
# kube-controller-manager, kube-scheduler (v1.37, built from the Go module in
# this folder) and etcd, and CHAOS_K8S_NODES real nodes (default 2), each a
# kubelet with a private containerd (Debian's runc and CNI plugins) of its own,
# all on this one machine. No registry: the images are written here and
# imported into every node.
#
#   cluster.sh build         build (or find cached) binaries
#   cluster.sh up            start the cluster (reuses a healthy one)
#   cluster.sh env           print `export ...` lines for eval
#   cluster.sh status        is it running and healthy (exit 0 if so)
#   cluster.sh down          stop it and undo every change it made to the host
#   cluster.sh verify-clean  compare the host with its state before `up`
#   cluster.sh build-kwok    build (or find cached) kwok
#   cluster.sh kwok [N]      start kwok against the cluster with N fake nodes
#   cluster.sh import TAR    import an image archive into every node's containerd
#
# docs/test-cluster.md has the details. Run as root.
set -euo pipefail
shopt -s nullglob

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K8S_VERSION=v1.37.2
CACHE_ROOT=${CHAOS_K8S_CACHE:-/var/cache/chaos-k8s}
NAME=${CHAOS_K8S_NAME:-default}
S=${CHAOS_K8S_STATE:-/var/tmp/chaos-k8s/$NAME}
NODE=chaos-k8s
[ "$NAME" = default ] || NODE=chaos-k8s-$NAME
POD_CIDR=${CHAOS_K8S_POD_CIDR:-10.244.0.0/24}
BRIDGE=cni-chaos0
# Nodes 2..N are $NODE-<i>, with their state in $S/node<i>, a bridge
# cni-chaos<i-1>, the next /24 after POD_CIDR's, and a kubelet whose pods live
# under the cgroup kubepods-node<i>/kubepods. They carry the taint
# EXTRA_TAINT, so only a pod that tolerates it runs there.
NODES=${CHAOS_K8S_NODES:-2}
[[ $NODES =~ ^[1-9]$ ]] || { echo "cluster.sh: CHAOS_K8S_NODES must be 1 to 9, not $NODES" >&2; exit 1; }
EXTRA_TAINT=chaos-k8s.io/extra-node
# One cluster per host: kubelet's kubepods cgroups, /var/lib/kubelet/device-plugins
# and the sysctls it sets are host-wide.
HOST_LOCK=${CHAOS_K8S_LOCK:-/var/tmp/chaos-k8s.lock}
DAEMONS=(containerd etcd kube-apiserver kubelet kube-scheduler kube-controller-manager)
for ((i = 2; i <= NODES; i++)); do DAEMONS+=("containerd-$i" "kubelet-$i"); done
# sysctls kubelet (protectKernelDefaults=false) and the CNI bridge plugin set
SAVED_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# host paths kubelet, libcni and the control plane create whatever their flags say
HOST_DIRS=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/kubernetes /etc/kubernetes /etc/cni /opt/cni)

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }
[ "$(id -u)" = 0 ] || die "run as root (it starts containerd and kubelet)"

# ---------------------------------------------------------------- build ----
ldflags() {
  local minor=${K8S_VERSION#v1.} x="" p
  minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "-s -w$x"
}
BUILD_FLAGS="CGO_ENABLED=0 -trimpath -ldflags=$(ldflags)"
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
build_key() {
  { cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/cmd/etcd/main.go"; echo "$BUILD_FLAGS"; go env GOVERSION GOOS GOARCH; } |
    sha256sum | cut -c1-16
}
BIN=""
find_bin() { BIN=$CACHE_ROOT/$(build_key)/bin; }
have_bins() { local b; for b in "${K8S_CMDS[@]}" etcd; do [ -x "$BIN/$b" ] || return 1; done; }

cmd_build() {
  command -v go >/dev/null || die "go is not installed"
  local key dir tmp t0=$EPOCHREALTIME
  key=$(build_key); dir=$CACHE_ROOT/$key; BIN=$dir/bin
  if have_bins; then log "build: cached, $BIN (key $key)"; return 0; fi
  mkdir -p "$CACHE_ROOT"
  exec 8>"$CACHE_ROOT/.build-$key.lock"
  flock 8
  if have_bins; then log "build: cached, $BIN (key $key; built by another build meanwhile)"; exec 8>&-; return 0; fi
  rm -rf "$dir"
  tmp=$(mktemp -d "$CACHE_ROOT/.tmp-$key.XXXXXX")
  mkdir -p "$tmp/bin"
  log "build: key $key, building $K8S_VERSION and etcd into $dir (cold: ~15 CPU-minutes, ~3 GB RAM)"
  local pkgs=() c
  for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  if ! (cd "$HERE" && export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" &&
    /usr/bin/time -v -o "$tmp/time-k8s.txt" nice -n 10 go build -trimpath -ldflags "$(ldflags)" -o "$tmp/bin/" "${pkgs[@]}" &&
    /usr/bin/time -v -o "$tmp/time-etcd.txt" nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/etcd" ./cmd/etcd); then
    rm -rf "$tmp"; die "build failed"
  fi
  "$tmp/bin/kube-apiserver" --version | grep -qx "Kubernetes $K8S_VERSION" || { rm -rf "$tmp"; die "kube-apiserver is not version-stamped $K8S_VERSION"; }
  echo "$BUILD_FLAGS" > "$tmp/build-flags"
  mv "$tmp" "$dir"
  exec 8>&-
  log "build: done in $(elapsed "$t0") s; $(du -sh "$BIN" | cut -f1) in $BIN"
}

# ---------------------------------------------------------------- util -----
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }
T0=$EPOCHREALTIME
step() { log "up: +$(elapsed "$T0")s $*"; }

# pid files hold "PID STARTTIME"; a pid is ours only if both still match
selfproof() { printf '%s' "$1" | sed 's,/,[/],g'; } # a grep -E pattern for $1 that does not match its own argv
proc_start() { awk '{sub(/^.*\) /,""); print $20}' "/proc/$1/stat" 2>/dev/null; }
# exited processes wait as zombies until PID 1 reaps them, which can take a second here
alive() { local st; st=$(awk '{sub(/^.*\) /,""); print $1}' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]; }
pid_of() { # name -> prints pid if the process recorded in its pid file is alive
  local f=$S/run/$1.pid pid st
  [ -f "$f" ] || return 1
  read -r pid st < "$f" || return 1
  [ -n "$pid" ] && [ "$(proc_start "$pid")" = "$st" ] && alive "$pid" && echo "$pid"
}
start() { # name log cmd...
  local name=$1; shift
  # setsid: own session, so a Ctrl-C or the caller's exit does not reach it;
  # 8>&- 9>&-: the daemons must not inherit the build and host locks
  setsid "$@" > "$S/logs/$name.log" 2>&1 < /dev/null 8>&- 9>&- &
  local pid=$!
  echo "$pid $(proc_start "$pid")" > "$S/run/$name.pid"
}
stop() { # name: TERM, wait up to 15 s, then KILL
  local pid i t=$EPOCHREALTIME
  pid=$(pid_of "$1") || { rm -f "$S/run/$1.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do alive "$pid" || break; sleep 0.05; done
  if alive "$pid"; then log "down: $1 ($pid) ignored TERM, killing"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  rm -f "$S/run/$1.pid"
  log "down: $1 stopped in $(elapsed "$t") s"
}
wait_for() { # seconds what cmd...: fails at once if a daemon started so far has died
  local secs=$1 what=$2 f; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then log "up: timed out after ${secs}s waiting for $what; logs in $S/logs"; return 1; fi
    for f in "$S"/run/*.pid; do
      f=${f##*/}; f=${f%.pid}
      pid_of "$f" >/dev/null || { log "up: $f died while waiting for $what; its log: $S/logs/$f.log"; return 1; }
    done
    sleep 0.1
  done
}
free_ports() { # n -> n distinct ports free on all addresses, chosen by the kernel
  python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}
node_ip() {
  [ -n "${CHAOS_K8S_NODE_IP:-}" ] && { echo "$CHAOS_K8S_NODE_IP"; return; }
  local ip
  ip=$(ip -4 route show default | awk '{for(i=1;i<NF;i++) if($i=="dev") print $(i+1); exit}')
  [ -n "$ip" ] && ip=$(ip -4 -o addr show dev "$ip" scope global | awk '{sub(/\/.*/,"",$4); print $4; exit}')
  [ -n "$ip" ] || ip=$(ip -4 -o addr show scope global | awk '$2 !~ /^(docker|br-|veth|cni)/ {sub(/\/.*/,"",$4); print $4; exit}')
  [ -n "$ip" ] || die "no global IPv4 address for the node (kubelet refuses loopback); set CHAOS_K8S_NODE_IP"
  echo "$ip"
}
kctl() { "$BIN/kubectl" --kubeconfig "$S/kubeconfig" "$@"; }
ctrc() { ctr -a "$S/containerd/containerd.sock" -n k8s.io "$@"; }
cgroup_mounts() { awk '$9 == "cgroup" || $9 == "cgroup2" {print $5}' /proc/self/mountinfo; }

# --------------------------------------------------------------- images ----
# The busybox image is the one `chaos build-image` builds for Docker
# (internal/backend/docker/image.go): FROM scratch, /bin/busybox from busybox-static, its
# applets as symlinks in /bin, /tmp (1777) and /chaos/output, PATH=/bin,
# CMD /bin/sh, and the same name chaos-test/busybox:<hash of Dockerfile and
# binary>, so the docker backend's BusyboxRef() names it too.
TESTIMAGE_GO=$REPO/internal/backend/docker/image.go
EXPECTED_DOCKERFILE='FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin && /bin/busybox mkdir -p /tmp /chaos/output && /bin/busybox chmod 1777 /tmp"]
ENV PATH=/bin
CMD ["/bin/sh"]
'
BUSYBOX_IMAGE="" PAUSE_IMAGE=""
image_refs() {
  [ -x /bin/busybox ] || die "/bin/busybox is missing: apt-get install busybox-static"
  local df
  df=$(sed -n '/^const Dockerfile = `/,/^`$/p' "$TESTIMAGE_GO" | sed '1s/^const Dockerfile = `//; $d'; echo x)
  df=${df%x}
  [ "$df" = "$EXPECTED_DOCKERFILE" ] ||
    die "internal/backend/docker/image.go's Dockerfile changed; make mkimage in $0 build the same image, then update EXPECTED_DOCKERFILE"
  BUSYBOX_IMAGE=chaos-test/busybox:$({ printf '%s\0' "$df"; cat /bin/busybox; } | sha256sum | cut -c1-16)
  PAUSE_IMAGE=chaos-test/pause:$({ printf 'pause\0%s\0' "$PAUSE_SCRIPT"; cat /bin/busybox; } | sha256sum | cut -c1-16)
}
# PID 1 of every pod sandbox: sleeps, reaps, exits on TERM/INT.
PAUSE_SCRIPT='trap "exit 0" TERM INT; while :; do /bin/busybox sleep 86400 & wait $!; done'
mkimage() { # ref out.tar kind(busybox|pause): a docker-archive written without Docker
  local ref=$1 out=$2 kind=$3 w a cfg diff
  w=$(mktemp -d)
  mkdir -p "$w/rootfs/bin" "$w/img"
  cp /bin/busybox "$w/rootfs/bin/busybox"; chmod 0755 "$w/rootfs/bin/busybox"
  if [ "$kind" = busybox ]; then
    for a in $(/bin/busybox --list); do [ -e "$w/rootfs/bin/$a" ] || ln -s /bin/busybox "$w/rootfs/bin/$a"; done
    mkdir -p "$w/rootfs/tmp" "$w/rootfs/chaos/output"; chmod 1777 "$w/rootfs/tmp"
    cfg='"Env":["PATH=/bin"],"Cmd":["/bin/sh"]'
  else
    cfg='"Env":["PATH=/bin"],"Entrypoint":["/bin/busybox","sh","-c",'"$(printf '%s' "$PAUSE_SCRIPT" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')"']'
  fi
  tar -C "$w/rootfs" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
  diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  mkdir "$w/img/$diff"; mv "$w/layer.tar" "$w/img/$diff/layer.tar"
  printf '{"architecture":"amd64","os":"linux","config":{%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cfg" "$diff" > "$w/config.json"
  a=$(sha256sum "$w/config.json" | cut -d' ' -f1); mv "$w/config.json" "$w/img/$a.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$a" "$ref" "$diff" > "$w/img/manifest.json"
  tar -C "$w/img" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$w"
}

# --------------------------------------------------------------- config ----
write_pki() {
  local p=$S/pki
  [ -f "$p/done" ] && return 0
  mkdir -p "$p"
  (
    cd "$p"
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
    key ca.key
    openssl req -x509 -new -key ca.key -out ca.crt -days 3650 -subj /CN=chaos-k8s-ca 2>/dev/null
    cert() { # name subject extensions
      key "$1.key"
      openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out "$1.crt" \
        -extfile <(printf '%s\n' "$3") 2>/dev/null
      rm "$1.csr"
    }
    cert apiserver /CN=kube-apiserver "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature,keyEncipherment"
    cert kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature,keyEncipherment"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # static tokens (test-only): admin and the kubelet are system:masters
    printf '%s,admin,admin,system:masters\n%s,system:node:%s,kubelet,system:masters\n' \
      "$(openssl rand -hex 16)" "$(openssl rand -hex 16)" "$NODE" > tokens.csv
    chmod 600 ./*.key tokens.csv
    touch "done"
  )
}
kubeconfig() { # user token port
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: chaos-k8s
  cluster:
    server: https://127.0.0.1:$3
    certificate-authority-data: $(base64 -w0 "$S/pki/ca.crt")
users:
- name: $1
  user:
    token: $2
contexts:
- name: chaos-k8s
  context: {cluster: chaos-k8s, user: $1, namespace: default}
current-context: chaos-k8s
EOF
}
# node i's name, state dir, config dir, bridge and pod CIDR (node 1 keeps
# the paths of the single-node cluster this was)
node_name() { if (($1 == 1)); then echo "$NODE"; else echo "$NODE-$1"; fi; }
node_base() { if (($1 == 1)); then echo "$S"; else echo "$S/node$1"; fi; }
node_conf() { if (($1 == 1)); then echo "$S/conf"; else echo "$S/conf/node$1"; fi; }
node_bridge() { echo "cni-chaos$(($1 - 1))"; }
node_cidr() { local a b c _; IFS=./ read -r a b c _ <<< "$POD_CIDR"; echo "$a.$b.$((c + $1 - 1)).0/24"; }
# every node's pods, for the route each pod gets to the others through its bridge
pods_net() { local a b _; IFS=./ read -r a b _ <<< "$POD_CIDR"; echo "$a.$b.0.0/16"; }
node_sock() { echo "$(node_base "$1")/containerd/containerd.sock"; }
kubelet_user() { if (($1 == 1)); then echo kubelet; else echo "kubelet-$1"; fi; }
# every node's name, and its containerd's address
node_names() { local i; for ((i = 1; i <= NODES; i++)); do node_name "$i"; done; }
node_socks() { local i; for ((i = 1; i <= NODES; i++)); do node_sock "$i"; done; }

write_config() { # uses the port and NODE_IP variables
  local i
  kubeconfig admin "$(awk -F, '$3=="admin"{print $1}' "$S/pki/tokens.csv")" "$P_API" > "$S/kubeconfig"
  chmod 600 "$S/kubeconfig"
  for ((i = 1; i <= NODES; i++)); do write_node_config "$i"; done
}
write_node_config() { # i
  local i=$1 c b name bridge cidr kport khport u cgroot=""
  c=$(node_conf "$i") b=$(node_base "$i") name=$(node_name "$i") bridge=$(node_bridge "$i") cidr=$(node_cidr "$i") u=$(kubelet_user "$i")
  kport=$P_KUBELET khport=$P_KUBELET_HEALTHZ
  if ((i > 1)); then
    eval "kport=\$P_KUBELET_$i khport=\$P_KUBELET_HEALTHZ_$i"
    # two kubelets on one machine cannot share the kubepods cgroup; only the
    # pods that ask for another node (a toleration) run there
    cgroot="cgroupRoot: /kubepods-node$i
registerWithTaints:
- {key: $EXTRA_TAINT, value: \"true\", effect: NoSchedule}"
  fi
  mkdir -p "$c/cni"
  # each node its own identity: the NodeRestriction admission plugin lets
  # system:node:<name> change only its own node
  grep -q ",$u," "$S/pki/tokens.csv" ||
    printf '%s,system:node:%s,%s,system:masters\n' "$(openssl rand -hex 16)" "$name" "$u" >> "$S/pki/tokens.csv"
  kubeconfig "$u" "$(awk -F, -v u="$u" '$3==u{print $1}' "$S/pki/tokens.csv")" "$P_API" > "$c/kubelet.kubeconfig"
  chmod 600 "$c/kubelet.kubeconfig"
  cat > "$c/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# kubelet v1.37 refuses cgroup v1 unless told; Debian's containerd 1.6 has no
# RuntimeConfig RPC, so the cgroup driver must be given; the host has no swap
# accounting to speak of.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$b/containerd/containerd.sock
imageServiceEndpoint: unix://$b/containerd/containerd.sock
$cgroot
# kubelet refuses a loopback node IP; ports are the free ones up chose
address: $NODE_IP
port: $kport
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $khport
# only the apiserver (client cert from our CA) may call kubelet's API
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $S/pki/ca.crt}
authorization:
  mode: AlwaysAllow
podLogsDir: $b/pod-logs
# imported images can never be pulled again: never garbage-collect them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# never evict test pods because the shared disk or memory runs low
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
resolvConf: /etc/resolv.conf
serializeImagePulls: false
nodeStatusUpdateFrequency: 10s
EOF
  cat > "$c/containerd.toml" <<EOF
# A private containerd for the test cluster; Docker's containerd (CRI
# disabled) is left alone.
version = 2
root = "$b/containerd/root"
state = "$b/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$b/containerd/containerd.sock"
[ttrpc]
  address = ""
[debug]
  address = ""
  level = "info"
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # root here lacks CAP_SYS_RESOURCE: runc fails every sandbox whose
  # oom_score_adj is below containerd's own (-998 for the pause container)
  restrict_oom_score_adj = true
  max_container_log_line_size = 16384
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    discard_unpacked_layers = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$b/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$c/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
EOF
  # Docker sets the FORWARD policy to DROP: the firewall plugin adds the
  # CNI-FORWARD accept rules pod-to-pod traffic needs. No masquerade (there is
  # no outside to reach) and no portmap, so fewer host iptables changes.
  cat > "$c/cni/10-chaos-k8s.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "chaos-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$cidr"}]],
        "routes": [{"dst": "$(pods_net)"}],
        "dataDir": "$b/cni/ipam"
      }
    },
    {"type": "firewall", "backend": "iptables"}
  ]
}
EOF
}

# ------------------------------------------------------------ host state ---
# A snapshot of everything on the host the cluster may change; verify-clean
# diffs the one taken before `up` with one taken after `down`.
snapshot() { # dir
  local - d=$1 m i
  set +e
  mkdir -p "$d"
  awk '{print $5, $9}' /proc/self/mountinfo | sort > "$d/mounts"
  for m in $(cgroup_mounts); do find "$m" -type d 2>/dev/null; done | sort > "$d/cgroups"
  # iptables here is iptables-nft: the nft ruleset holds its tables, chains and
  # rules (counters dropped); the legacy tables are listed too
  { nft list ruleset | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/'
    iptables-legacy-save; ip6tables-legacy-save; } 2>/dev/null | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//' > "$d/iptables"
  ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort > "$d/interfaces"
  # every sysctl but counters, and per-interface ones only for lasting interfaces
  sysctl -a 2>/dev/null | grep -vE '^(fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.(ns_last_pid|random\.|pty\.nr)|net\.netfilter\.nf_conntrack_count)' |
    awk -v keep="$(ip -o link show | awk -F': ' '$2 !~ /^(veth|br-|cni|docker)/ {sub(/@.*/, "", $2); printf "%s|", $2}')all|default" '
      match($1, /^net\.ipv[46]\.(conf|neigh)\./) { split($1, k, "."); if (k[4] !~ "^(" keep ")$") next }
      { print }' | sort > "$d/sysctls"
  { ls -1 /run/netns 2>/dev/null || true; } > "$d/netns"
  for i in "${HOST_DIRS[@]}"; do [ -e "$i" ] && find "$i" -maxdepth 3 2>/dev/null; done | sort > "$d/dirs"
  # containerd-shim sockets live in /run/containerd/s whatever containerd's state dir is
  { ls -1 /run/containerd/s 2>/dev/null || true; } | sort > "$d/shim-sockets"
  # (a kernel without loadable modules has no /proc/modules)
  { awk '{print $1}' /proc/modules 2>/dev/null || true; } | sort > "$d/modules"
  return 0
}
# a difference is "ours" when it names something only this cluster makes
ours_re() {
  local st=${S//./\\.}
  echo "($st|/var/lib/kubelet|/var/log/containers|/var/log/pods|/var/lib/cni|/run/kubernetes|kubepods|CNI-|KUBE-|$BRIDGE|chaos-k8s|^table ip6? (filter|mangle|nat) |^(vm\.overcommit_memory|vm\.panic_on_oom|kernel\.panic|kernel\.panic_on_oops|kernel\.keys\.root_max|net\.ipv4\.ip_forward)|^cni-)"
}
cmd_verify_clean() { # [--strict]: fail on any difference, not only ours
  local strict=0 verbose=${CHAOS_K8S_VERIFY_VERBOSE:-0} f before=$S/host-before after=$S/host-after bad=0 foreign=0 re procs n
  local -A others=()
  [ "${1:-}" = --strict ] && strict=1 verbose=1
  [ -d "$before" ] || die "verify-clean: no snapshot from before up in $before"
  if pid_of kube-apiserver >/dev/null || pid_of containerd >/dev/null; then die "verify-clean: the cluster is running; run down first"; fi
  rm -rf "$after"; snapshot "$after"
  re=$(ours_re)
  for f in mounts cgroups iptables interfaces sysctls netns dirs shim-sockets modules; do
    while IFS= read -r line; do
      if [ "$f" = modules ]; then echo "verify-clean: note: kernel module ${line:2} (modules the cluster needs stay loaded)" >&2; continue; fi
      if grep -qE "$re" <<< "${line:2}" || { [ "$f" = shim-sockets ] && grep -qx "${line:2}" "$S/shim-sockets.ours" 2>/dev/null; }; then echo "verify-clean: LEFT BY THE CLUSTER ($f): $line" >&2; bad=1
      else
        foreign=1; others[$f]=$((${others[$f]:-0} + 1))
        if ((verbose)); then echo "verify-clean: changed meanwhile, not by the cluster? ($f): $line" >&2; fi
      fi
    done < <(diff "$before/$f" "$after/$f" | grep '^[<>]' || true)
  done
  procs=$(grep -lsE -e "$(selfproof "$S/")" -e "$(selfproof "$CACHE_ROOT/")" /proc/[0-9]*/cmdline 2>/dev/null | sed 's,/proc/\([0-9]*\)/cmdline,\1,' || true)
  for p in $procs; do
    [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ] && continue
    echo "verify-clean: LEFT BY THE CLUSTER (process): $p $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-200)" >&2; bad=1
  done
  if ((bad)); then log "verify-clean: FAILED: the host differs from before up (lines above)"; return 1; fi
  if ((foreign)); then
    n=""; for f in "${!others[@]}"; do n+=" $f:${others[$f]}"; done
    if ((strict)); then log "verify-clean: FAILED (--strict): the host changed meanwhile (lines above; none names the cluster)"; return 1; fi
    log "verify-clean: nothing of the cluster is left; other lines changed meanwhile, none naming the cluster (Docker containers?):$n; CHAOS_K8S_VERIFY_VERBOSE=1 or --strict lists them"
  else
    log "verify-clean: no difference from before up (mounts, cgroups, iptables, interfaces, sysctls, netns, host dirs, processes)"
  fi
}

# ------------------------------------------------------------------- up ----
healthy() {
  local d
  for d in "${DAEMONS[@]}"; do pid_of "$d" >/dev/null || return 1; done
  [ -f "$S/ports.env" ] || return 1
  # shellcheck disable=SC1091
  . "$S/ports.env"
  curl -sf --max-time 5 --cacert "$S/pki/ca.crt" -H "Authorization: Bearer $(awk -F, '$3=="admin"{print $1}' "$S/pki/tokens.csv")" \
    "https://127.0.0.1:$P_API/readyz" >/dev/null || return 1
  local n
  for n in $(node_names); do
    [ "$(kctl get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] || return 1
  done
}
node_ready_untainted() {
  local out
  out=$(kctl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}|{.spec.taints}') || return 1
  [ "$out" = "True|" ]
}
extra_node_ready() { # name: Ready, and the only taint is EXTRA_TAINT
  local out
  out=$(kctl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}|{.spec.taints[*].key}') || return 1
  [ "$out" = "True|$EXTRA_TAINT" ]
}
# make_cgroup_root name: the group a second kubelet puts its pods under, in
# every hierarchy (kubelet wants it to exist); v1's cpuset needs cpus and
# mems before anything can join below it
make_cgroup_root() {
  local m
  for m in $(cgroup_mounts); do
    mkdir -p "$m/$1"
    if [ -f "$m/$1/cpuset.cpus" ]; then
      [ -n "$(cat "$m/$1/cpuset.cpus")" ] || cat "$m/cpuset.cpus" > "$m/$1/cpuset.cpus"
      [ -n "$(cat "$m/$1/cpuset.mems")" ] || cat "$m/cpuset.mems" > "$m/$1/cpuset.mems"
    fi
  done
}
# the nodes up made on this state dir (whatever CHAOS_K8S_NODES says now)
made_nodes() { local d; echo 1; for d in "$S"/node[0-9]; do [ -d "$d" ] && echo "${d##*/node}"; done; }
any_running() { local d; for d in "${DAEMONS[@]}"; do pid_of "$d" >/dev/null && return 0; done; return 1; }

cmd_up() {
  mkdir -p "$(dirname "$HOST_LOCK")"
  exec 9>"$HOST_LOCK"
  flock 9
  find_bin
  if healthy; then log "up: a healthy cluster already runs from $S; reusing it"; return 0; fi
  if any_running; then log "up: a cluster from $S runs but is not healthy; taking it down first"; do_down; fi
  local c
  for c in containerd ctr runc iptables nft ip python3 openssl curl setsid flock; do command -v "$c" >/dev/null || die "$c is missing (scripts/test.sh installs the Debian packages)"; done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/firewall ] && [ -x /usr/lib/cni/host-local ] ||
    die "CNI plugins missing: apt-get install containernetworking-plugins"
  for c in $(cgroup_mounts); do for i in "$c"/kubepods "$c"/kubepods-node*; do [ -e "$i" ] && die "$i exists: another kubelet runs on this host, or one left it; not starting"; done; done
  for ((i = 1; i <= NODES; i++)); do
    c=$(node_bridge "$i")
    ip -o link show "$c" >/dev/null 2>&1 && die "interface $c exists: another test cluster runs, or one left it"
  done
  cmd_build
  image_refs
  T0=$EPOCHREALTIME
  UP_STARTED=1
  mkdir -p "$S"
  # the host as it is before anything starts, for down and verify-clean
  if [ -f "$S/run/dirty" ]; then
    log "up: the last down from $S did not finish cleanly; keeping its snapshot of the host"
  else
    rm -rf "$S/host-before"; snapshot "$S/host-before"
    sysctl -e "${SAVED_SYSCTLS[@]}" 2>/dev/null | sed 's/ = /=/' > "$S/host-before/sysctls.saved"
  fi
  : > "$S/shim-sockets.ours"
  rm -rf "$S/logs" "$S/run" "$S/etcd" "$S/kubelet" "$S/containerd" "$S/pod-logs" "$S/cni" "$S"/node[0-9]*
  mkdir -p "$S/logs" "$S/run" "$S/certs"
  for ((i = 1; i <= NODES; i++)); do c=$(node_base "$i"); mkdir -p "$c/pod-logs" "$c/cni/ipam" "$c/containerd"; done
  touch "$S/run/dirty"
  write_pki
  NODE_IP=$(node_ip)
  local ports
  read -r -a ports < <(free_ports $((5 + 2 * NODES)))
  P_ETCD=${ports[0]} P_PEER=${ports[1]} P_API=${ports[2]} P_SCHED=${ports[3]} P_KCM=${ports[4]}
  P_KUBELET=${ports[5]} P_KUBELET_HEALTHZ=${ports[6]}
  printf 'P_ETCD=%s\nP_PEER=%s\nP_API=%s\nP_KUBELET=%s\nP_KUBELET_HEALTHZ=%s\nP_SCHED=%s\nP_KCM=%s\nNODE_IP=%s\n' \
    "$P_ETCD" "$P_PEER" "$P_API" "$P_KUBELET" "$P_KUBELET_HEALTHZ" "$P_SCHED" "$P_KCM" "$NODE_IP" > "$S/ports.env"
  for ((i = 2; i <= NODES; i++)); do
    eval "P_KUBELET_$i=${ports[$((3 + 2 * i))]} P_KUBELET_HEALTHZ_$i=${ports[$((4 + 2 * i))]}"
    printf 'P_KUBELET_%s=%s\nP_KUBELET_HEALTHZ_%s=%s\n' "$i" "${ports[$((3 + 2 * i))]}" "$i" "${ports[$((4 + 2 * i))]}" >> "$S/ports.env"
  done
  write_config
  # the archives are deterministic, and named by what went into them: cached
  mkdir -p "$CACHE_ROOT/images"
  [ -f "$CACHE_ROOT/images/${BUSYBOX_IMAGE##*:}-busybox.tar" ] || mkimage "$BUSYBOX_IMAGE" "$CACHE_ROOT/images/${BUSYBOX_IMAGE##*:}-busybox.tar" busybox
  [ -f "$CACHE_ROOT/images/${PAUSE_IMAGE##*:}-pause.tar" ] || mkimage "$PAUSE_IMAGE" "$CACHE_ROOT/images/${PAUSE_IMAGE##*:}-pause.tar" pause
  step "configs, keys and images written (node $NODE at $NODE_IP, apiserver port $P_API)"

  start containerd containerd --config "$S/conf/containerd.toml"
  for ((i = 2; i <= NODES; i++)); do start "containerd-$i" containerd --config "$(node_conf "$i")/containerd.toml"; done
  start etcd "$BIN/etcd" --name chaos-k8s --data-dir "$S/etcd" \
    --listen-client-urls "http://127.0.0.1:$P_ETCD" --advertise-client-urls "http://127.0.0.1:$P_ETCD" \
    --listen-peer-urls "http://127.0.0.1:$P_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$P_PEER" \
    --initial-cluster "chaos-k8s=http://127.0.0.1:$P_PEER" --listen-metrics-urls '' --log-level warn \
    --quota-backend-bytes 4294967296
  wait_for 30 "etcd" curl -sf "http://127.0.0.1:$P_ETCD/health" || return 1
  step "etcd healthy (port $P_ETCD)"
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$P_ETCD" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$P_API" \
    --tls-cert-file="$S/pki/apiserver.crt" --tls-private-key-file="$S/pki/apiserver.key" \
    --client-ca-file="$S/pki/ca.crt" --cert-dir="$S/certs" \
    --kubelet-client-certificate="$S/pki/kubelet-client.crt" --kubelet-client-key="$S/pki/kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --endpoint-reconciler-type=none --token-auth-file="$S/pki/tokens.csv" --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$S/pki/sa.pub" \
    --service-account-signing-key-file="$S/pki/sa.key" --service-cluster-ip-range=10.96.0.0/24 \
    --allow-privileged=true --enable-priority-and-fairness=false --profiling=false
  for c in $(node_socks); do
    wait_for 30 "containerd $c" ctr -a "$c" version || return 1
    ctr -a "$c" -n k8s.io images import "$CACHE_ROOT/images/${PAUSE_IMAGE##*:}-pause.tar" >/dev/null
    ctr -a "$c" -n k8s.io images import "$CACHE_ROOT/images/${BUSYBOX_IMAGE##*:}-busybox.tar" >/dev/null
    # The built-in kubernetes adapter's default image, as chaos build-image
    # tags it for Docker.
    ctr -a "$c" -n k8s.io images tag --force "docker.io/$BUSYBOX_IMAGE" docker.io/chaos/busybox:latest >/dev/null
  done
  step "containerd up on $NODES node(s); images imported: $BUSYBOX_IMAGE (also chaos/busybox:latest) $PAUSE_IMAGE"
  wait_for 90 "kube-apiserver" curl -sf --cacert "$S/pki/ca.crt" "https://127.0.0.1:$P_API/readyz" \
    -H "Authorization: Bearer $(awk -F, '$3=="admin"{print $1}' "$S/pki/tokens.csv")" || return 1
  step "kube-apiserver ready (port $P_API)"
  start kubelet "$BIN/kubelet" --config="$S/conf/kubelet.yaml" --kubeconfig="$S/conf/kubelet.kubeconfig" \
    --root-dir="$S/kubelet" --cert-dir="$S/kubelet/pki" --hostname-override="$NODE" --node-ip="$NODE_IP" --v=1
  for ((i = 2; i <= NODES; i++)); do
    make_cgroup_root "kubepods-node$i"
    c=$(node_base "$i")
    start "kubelet-$i" "$BIN/kubelet" --config="$(node_conf "$i")/kubelet.yaml" --kubeconfig="$(node_conf "$i")/kubelet.kubeconfig" \
      --root-dir="$c/kubelet" --cert-dir="$c/kubelet/pki" --hostname-override="$(node_name "$i")" --node-ip="$NODE_IP" --v=1
  done
  local common=(--kubeconfig="$S/kubeconfig" --authentication-kubeconfig="$S/kubeconfig"
    --authorization-kubeconfig="$S/kubeconfig" --bind-address=127.0.0.1 --leader-elect=false
    --kube-api-qps=200 --kube-api-burst=400) # defaults (scheduler 50, controllers 20/s) throttle scale tests
  start kube-scheduler "$BIN/kube-scheduler" "${common[@]}" --secure-port="$P_SCHED" --cert-dir="$S/certs/scheduler"
  start kube-controller-manager "$BIN/kube-controller-manager" "${common[@]}" --secure-port="$P_KCM" \
    --cert-dir="$S/certs/kcm" --use-service-account-credentials=false \
    --service-account-private-key-file="$S/pki/sa.key" --root-ca-file="$S/pki/ca.crt" --controllers='*'
  wait_for 90 "node $NODE Ready" node_ready_untainted || return 1
  step "node $NODE Ready and untainted"
  for ((i = 2; i <= NODES; i++)); do
    wait_for 90 "node $(node_name "$i") Ready" extra_node_ready "$(node_name "$i")" || return 1
    step "node $(node_name "$i") Ready (tainted $EXTRA_TAINT)"
  done
  wait_for 60 "the default serviceaccount" kctl get serviceaccount default || return 1
  step "default serviceaccount exists"
  for c in "${DAEMONS[@]}"; do pid_of "$c" >/dev/null || { log "up: $c died; its log: $S/logs/$c.log"; return 1; }; done
  log "up: cluster ready in $(elapsed "$T0") s; eval \"\$($0 env)\""
}

on_up_failed() {
  local f
  log "up FAILED; logs in $S/logs"
  for f in "$S"/logs/*.log; do echo "--- last lines of $f" >&2; tail -n 15 "$f" >&2; done
  if ((UP_STARTED)) && [ "${CHAOS_K8S_KEEP_FAILED:-}" != 1 ]; then
    log "up: taking the partial cluster down (CHAOS_K8S_KEEP_FAILED=1 keeps it)"
    do_down
    cmd_verify_clean || true
  fi
}

# ------------------------------------------------------------------ down ---
# thaw_pods thaws every frozen cgroup of the node's pods, in whichever
# hierarchy holds them (cgroup v2's cgroup.freeze, v1's freezer.state).
thaw_pods() {
  local f
  while IFS= read -r f; do
    [ "$(cat "$f" 2>/dev/null)" = 1 ] && echo 0 >"$f" 2>/dev/null && log "down: thawed ${f%/cgroup.freeze}"
  done < <(find /sys/fs/cgroup -path '*kubepods*' -name cgroup.freeze 2>/dev/null)
  while IFS= read -r f; do
    [ "$(cat "$f" 2>/dev/null)" = FROZEN ] && echo THAWED >"$f" 2>/dev/null && log "down: thawed ${f%/freezer.state}"
  done < <(find /sys/fs/cgroup -path '*kubepods*' -name freezer.state 2>/dev/null)
  return 0
}

cmd_down() {
  mkdir -p "$(dirname "$HOST_LOCK")"
  exec 9>"$HOST_LOCK"
  flock 9
  do_down
  if [ -d "$S/host-before" ]; then cmd_verify_clean; fi
}
do_down() {
  # best effort: one failed step must not stop the others
  local - t0=$EPOCHREALTIME m c t
  set +e
  find_bin
  if [ ! -f "$S/run/dirty" ] && ! any_running; then log "down: nothing runs from $S"; return 0; fi
  # 0. a pod a killed test or harness left frozen is thawed first: its
  #    tasks can neither stop nor be killed frozen, and ctr waits on them
  thaw_pods
  # 1. pods first, through the API, so kubelet and CNI tear down sandboxes,
  #    netns, veths, mounts and shims the proper way
  if pid_of kube-apiserver >/dev/null && pid_of kubelet >/dev/null && [ -x "$BIN/kubectl" ]; then
    kctl delete deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs --all -A --wait=false >/dev/null 2>&1 || true
    # only the real node's pods have containers (kwok's fake ones go with etcd's data)
    for c in $(node_names); do
      kctl delete pods -A --field-selector "spec.nodeName=$c" --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 ||
        log "down: some pods of $c did not go within 60 s; their containers are killed below"
    done
    log "down: +$(elapsed "$t0")s pods deleted"
    # wait for kubelet to stop every sandbox (netns, veth and CNI rules go with them)
    for ((t = 0; t < 100; t++)); do
      m=""
      for c in $(node_socks); do m+=$(ctr -a "$c" -n k8s.io tasks ls -q 2>/dev/null); done
      [ -z "$m" ] && break
      sleep 0.1
    done
  fi
  # 2. the control plane and kubelet
  for c in kwok kube-controller-manager kube-scheduler kubelet; do stop "$c"; done
  for ((t = 2; t <= 9; t++)); do stop "kubelet-$t"; done
  for c in kube-apiserver etcd; do stop "$c"; done
  # 3. whatever containers remain, then each node's containerd and its shims
  local shims i sock base
  for i in $(made_nodes); do
    sock=$(node_sock "$i") base=$(node_base "$i") c=containerd
    ((i == 1)) || c=containerd-$i
    if pid_of "$c" >/dev/null; then
      local tasks
      tasks=$(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null)
      if [ -n "$tasks" ]; then
        for t in $tasks; do ctr -a "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true; done
        sleep 0.5
        for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true; done
      fi
      for t in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io containers delete "$t" >/dev/null 2>&1 || true; done
    fi
    stop "$c"
    shims=$(grep -lsE -e "$(selfproof "$sock")" /proc/[0-9]*/cmdline 2>/dev/null | sed 's,/proc/\([0-9]*\)/cmdline,\1,' || true)
    for t in $shims; do [ "$t" != "$$" ] && kill -KILL "$t" 2>/dev/null || true; done
  done
  # processes still in kubepods cgroups (left when containerd could not kill them)
  for m in $(cgroup_mounts); do
    for c in "$m"/kubepods "$m"/kubepods-node*; do
      [ -d "$c" ] || continue
      grep -q "^$c\$" "$S/host-before/cgroups" 2>/dev/null && continue
      find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r t; do kill -KILL "$t" 2>/dev/null || true; done
    done
  done
  log "down: +$(elapsed "$t0")s processes stopped"
  # a shim's socket is /run/containerd/s/sha256(<containerd address>/<namespace>/<sandbox id>),
  # whatever containerd's state dir; a killed shim leaves it behind
  for i in $(made_nodes); do
    sock=$(node_sock "$i") base=$(node_base "$i")
    for c in "$base"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*; do
      t=$(printf '%s' "$sock/k8s.io/${c##*/}" | sha256sum | cut -c1-64)
      echo "$t" >> "$S/shim-sockets.ours"
      rm -f "/run/containerd/s/$t"
    done
  done
  # 4. mounts: overlay rootfs, shm, netns, kubelet volumes, all under $S or kubelet's host dir
  for ((t = 0; t < 3; t++)); do
    m=$(awk -v s="$S/" '{print $5}' /proc/self/mountinfo | grep -E "^($S/|/var/lib/kubelet/)" | sort -r || true)
    [ -z "$m" ] && break
    while IFS= read -r c; do umount "$c" 2>/dev/null || umount -l "$c" 2>/dev/null || true; done <<< "$m"
  done
  # 5. the CNI bridge (veths went with the netns)
  for i in $(made_nodes); do ip link del "$(node_bridge "$i")" 2>/dev/null || true; done
  # 6. cgroups kubelet and runc made, in every v1 hierarchy and in v2
  for m in $(cgroup_mounts); do
    for c in "$m"/kubepods*; do
      grep -qx "$c" "$S/host-before/cgroups" 2>/dev/null && continue
      find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
      if [ -d "$c" ]; then log "down: cannot remove cgroup $c"; fi
    done
  done
  # 7. iptables chains the firewall plugin and kubelet made (kept if they were there before)
  local fam tbl chain
  for fam in iptables ip6tables; do
    command -v "$fam" >/dev/null || continue
    for tbl in filter nat mangle; do
      "$fam"-save -t "$tbl" 2>/dev/null | sed -n 's/^:\(CNI-[^ ]*\|KUBE-[^ ]*\) .*/\1/p' | while read -r chain; do
        grep -qE "^:$chain( |$)" "$S/host-before/iptables" 2>/dev/null && continue
        # drop the rules that jump to it, then the chain
        "$fam"-save -t "$tbl" 2>/dev/null | grep -E "^-A .* -j $chain( |$)" | sed 's/^-A/-D/' | while read -r rule; do
          eval "\"$fam\" -t \"$tbl\" $rule" 2>/dev/null || true
        done
        "$fam" -t "$tbl" -F "$chain" 2>/dev/null || true
        "$fam" -t "$tbl" -X "$chain" 2>/dev/null || true
      done
    done
  done
  # kubelet's canary chains make iptables-nft create whole tables (ip mangle,
  # ip6 filter/mangle/nat); drop those that were not there and are now empty
  for fam in ip ip6; do
    for tbl in filter mangle nat raw security; do
      nft list table "$fam" "$tbl" >/dev/null 2>&1 || continue
      grep -q "^table $fam $tbl {" "$S/host-before/iptables" 2>/dev/null && continue
      if [ -z "$(nft list table "$fam" "$tbl" | grep -vE '^[[:space:]]*(table |chain |type |\}|$)')" ]; then
        nft delete table "$fam" "$tbl" || log "down: cannot delete nft table $fam $tbl"
      else
        log "down: nft table $fam $tbl has rules now (not ours?); left in place"
      fi
    done
  done
  # 8. sysctls back to their values from before up
  if [ -f "$S/host-before/sysctls.saved" ]; then
    while IFS='=' read -r k v; do
      [ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -q -w "$k=$v" >/dev/null || log "down: cannot restore $k=$v"
    done < "$S/host-before/sysctls.saved"
  fi
  # 9. host dirs kubelet and libcni create, unless they were there before
  for c in "${HOST_DIRS[@]}"; do
    [ -e "$c" ] || continue
    if grep -qx "$c" "$S/host-before/dirs" 2>/dev/null; then
      [ "$c" = /var/lib/cni ] && rm -f /var/lib/cni/results/chaos-k8s-* 2>/dev/null
      continue
    fi
    # never rm -r through a mount
    if awk '{print $5}' /proc/self/mountinfo | grep -q "^$c/"; then log "down: $c still has mounts; left in place"; continue; fi
    rm -rf "$c"
  done
  # 10. runtime state (etcd data, images, container layers); keys and logs stay
  if ! awk '{print $5}' /proc/self/mountinfo | grep -q "^$S/"; then
    rm -rf "$S/etcd" "$S/kubelet" "$S/containerd" "$S/pod-logs" "$S/cni" "$S"/node[0-9]*
    rm -f "$S/run/dirty" "$S/ports.env"
  else
    log "down: mounts remain under $S; state kept"
  fi
  log "down: done in $(elapsed "$t0") s"
}

# -------------------------------------------------------- status and env ---
cmd_status() {
  find_bin
  local d st=0
  for d in "${DAEMONS[@]}"; do
    if p=$(pid_of "$d"); then echo "$d: running (pid $p)"; else echo "$d: not running"; st=1; fi
  done
  if p=$(pid_of kwok); then echo "kwok: running (pid $p)"; fi
  if ((st)); then
    any_running && { echo "cluster: PARTIAL (run down, then up)"; return 2; }
    echo "cluster: not running ($S)"; return 1
  fi
  if healthy; then
    echo "cluster: healthy, nodes $(node_names | xargs) Ready, apiserver https://127.0.0.1:$P_API ($S)"
    return 0
  fi
  echo "cluster: running but not healthy; logs in $S/logs"; return 2
}
cmd_env() {
  find_bin
  image_refs
  healthy || die "env: no healthy cluster runs from $S (cluster.sh up)"
  cat <<EOF
export KUBECONFIG=$S/kubeconfig
export CHAOS_K8S_NODE=$NODE
export CHAOS_K8S_NODE_IP=$NODE_IP
export CHAOS_K8S_BUSYBOX_IMAGE=$BUSYBOX_IMAGE
export CHAOS_K8S_PAUSE_IMAGE=$PAUSE_IMAGE
export CHAOS_K8S_STATE=$S
export CHAOS_K8S_BIN=$BIN
export CHAOS_K8S_CONTAINERD_ADDRESS=$S/containerd/containerd.sock
export CHAOS_K8S_NODE_NAMES="$(node_names | xargs)"
export CHAOS_K8S_CONTAINERD_ADDRESSES="$(node_socks | xargs)"
export CHAOS_K8S_EXTRA_NODE_TAINT=$EXTRA_TAINT
EOF
}

cmd_import() { # tar: a docker-archive, into every node's runtime
  local c
  [ -f "${1:-}" ] || die "import: give an image archive (docker-archive tar)"
  healthy || die "import: no healthy cluster runs from $S (cluster.sh up)"
  for c in $(node_socks); do ctr -a "$c" -n k8s.io images import "$1" >/dev/null || die "import: ctr images import into $c failed"; done
}

# shellcheck source=kwok.sh
. "$HERE/kwok.sh"

# ------------------------------------------------------------------ main ---
case "${1:-}" in
  build) cmd_build ;;
  up)
    UP_STARTED=0
    # shellcheck disable=SC2154
    trap 'rc=$?; trap - EXIT; ((rc == 0)) || on_up_failed; exit $rc' EXIT
    cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  verify-clean) shift; cmd_verify_clean "$@" ;;
  build-kwok) cmd_build_kwok ;;
  import) shift; cmd_import "$@" ;;
  kwok) shift; cmd_kwok "$@" ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
