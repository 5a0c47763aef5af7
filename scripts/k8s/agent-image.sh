#!/usr/bin/env bash
# The node agent's image (chaos agent serve, docs/kubernetes.md): FROM
# scratch, the static chaos binary as /chaos, the host tools the network
# faults run in a pod's namespace (util-linux's nsenter, nft, iproute2's ip
# and tc, iptables-nft with iptables-save/-restore and its xtables modules)
# taken from this machine with the shared libraries ldd names, and Debian's
# busybox-static for a shell. Written as a docker-archive tarball without
# Docker (as chaos-image.sh) and imported into the test cluster's
# containerd(s) with ctr.
#
#   agent-image.sh [BINARY]   build (or take BINARY, a static chaos), import,
#                             and print the image's name
#
# The image is chaos-test/agent:<16 hex of its files>, also tagged
# chaos/agent:latest (chaos agent install's default). It is imported into
# every containerd of $CHAOS_K8S_CONTAINERD_ADDRESSES (space-separated), else
# $CHAOS_K8S_CONTAINERD_ADDRESS (eval "$(scripts/k8s/cluster.sh env)").
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
die() { echo "agent-image.sh: $*" >&2; exit 1; }
ADDRS=${CHAOS_K8S_CONTAINERD_ADDRESSES:-${CHAOS_K8S_CONTAINERD_ADDRESS:-}}
[ -n "$ADDRS" ] || die "CHAOS_K8S_CONTAINERD_ADDRESS is not set: eval \"\$(scripts/k8s/cluster.sh env)\""
command -v ctr >/dev/null || die "ctr is missing: apt-get install containerd"
[ -x /bin/busybox ] || die "/bin/busybox is missing: apt-get install busybox-static"
TOOLS=(nsenter nft ip tc xtables-nft-multi)
for t in "${TOOLS[@]}"; do
  command -v "$t" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$t" >/dev/null ||
    die "$t is missing on this machine: apt-get install util-linux nftables iproute2 iptables"
done

w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then
  (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$w/chaos" ./cmd/chaos)
  bin=$w/chaos
fi
[ -x "$bin" ] || die "$bin is not an executable"

r=$w/rootfs
mkdir -p "$r/bin" "$r/usr/sbin" "$r/usr/bin" "$r/usr/lib" "$r/usr/lib64" "$r/tmp" "$r/run" "$r/var/lib" "$r/etc"
# Merged /usr, as Debian's: a library ldd finds in /lib is where the tools
# look for it in /usr/lib too (iptables' xtables modules are looked for in
# /usr/lib/<arch>/xtables only).
ln -s usr/lib "$r/lib"
ln -s usr/lib64 "$r/lib64"
chmod 1777 "$r/tmp"
install -m 0755 "$bin" "$r/chaos"
install -m 0755 /bin/busybox "$r/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
# copy FILE: the file, at its own path, and every library ldd says it loads.
copy() {
  local f=$1 lib
  mkdir -p "$r$(dirname "$f")"
  cp -L "$f" "$r$f"
  for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [ -e "$r$lib" ] && continue
    mkdir -p "$r$(dirname "$lib")"
    cp -L "$lib" "$r$lib"
  done
}
for t in nsenter nft ip tc; do
  p=$(PATH=$PATH:/usr/sbin:/sbin command -v "$t")
  p=$(readlink -f "$p")
  copy "$p"
  # Found first, before busybox's applet of the same name.
  case "$p" in /usr/bin/*|/usr/sbin/*) ;; *) ln -sf "$p" "$r/usr/sbin/$t" ;; esac
done
multi=$(readlink -f "$(PATH=$PATH:/usr/sbin:/sbin command -v xtables-nft-multi)")
copy "$multi"
for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "$multi" "$r/usr/sbin/$n"
done
xt=$(dirname "$(ldd "$multi" | grep -o '/[^ ]*libxtables[^ ]*' | head -1)")/xtables
[ -d "$xt" ] || xt=/usr/lib/x86_64-linux-gnu/xtables
if [ -d "$xt" ]; then
  mkdir -p "$r$xt"
  cp -L "$xt"/*.so "$r$xt/"
  for m in "$xt"/*.so; do copy "$m"; done
fi
[ -d /etc/iproute2 ] && cp -r /etc/iproute2 "$r/etc/"
[ -d /usr/lib/tc ] && { mkdir -p "$r/usr/lib"; cp -r /usr/lib/tc "$r/usr/lib/"; }
# iptables reads its protocols and services by name.
for f in /etc/protocols /etc/services; do [ -e "$f" ] && cp "$f" "$r$f"; done

mkdir -p "$w/img"
tar -C "$r" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
ref=chaos-test/agent:${diff:0:16}
mkdir "$w/img/$diff"
mv "$w/layer.tar" "$w/img/$diff/layer.tar"
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/sbin:/usr/bin:/bin"],"Entrypoint":["/chaos"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$diff" >"$w/config.json"
cfg=$(sha256sum "$w/config.json" | cut -d' ' -f1)
mv "$w/config.json" "$w/img/$cfg.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$ref" "$diff" >"$w/img/manifest.json"
tar -C "$w/img" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/image.tar" .
for a in $ADDRS; do
  if ! ctr -a "$a" -n k8s.io images ls -q | grep -qx "docker.io/$ref"; then
    ctr -a "$a" -n k8s.io images import "$w/image.tar" >/dev/null
  fi
  ctr -a "$a" -n k8s.io images tag --force "docker.io/$ref" docker.io/chaos/agent:latest >/dev/null
done
echo "$ref"
