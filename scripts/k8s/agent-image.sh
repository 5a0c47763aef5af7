#!/usr/bin/env bash
# The node agent's image (chaos agent serve, docs/kubernetes.md): FROM
# scratch, the static chaos binary as /chaos, the host tools the network
# faults run in a pod's namespace (util-linux's nsenter, nft, iproute2's ip
# and tc, iptables-nft with iptables-save/-restore and its xtables modules)
# taken from this machine with the shared libraries ldd names, and Debian's
# busybox-static for a shell. Written as a docker-archive tarball without
# Docker (lib-image.sh, as chaos-image.sh) and imported into the test cluster's
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

. "$(dirname "${BASH_SOURCE[0]}")/lib-image.sh"
image_need_cluster
TOOLS=(nsenter nft ip tc xtables-nft-multi)
for t in "${TOOLS[@]}"; do
  command -v "$t" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$t" >/dev/null ||
    die "$t is missing on this machine: apt-get install util-linux nftables iproute2 iptables"
done

w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
bin=$(image_binary "$w" "${1:-}")

r=$w/rootfs
mkdir -p "$r/bin" "$r/usr/sbin" "$r/usr/bin" "$r/usr/lib" "$r/usr/lib64" "$r/tmp" "$r/run" "$r/var/lib" "$r/etc"
# Merged /usr, as Debian's: a library ldd finds in /lib is where the tools
# look for it in /usr/lib too (iptables' xtables modules are looked for in
# /usr/lib/<arch>/xtables only).
ln -s usr/lib "$r/lib"
ln -s usr/lib64 "$r/lib64"
chmod 1777 "$r/tmp"
install -m 0755 "$bin" "$r/chaos"
image_busybox "$r"
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

ref=$(image_archive "$r" "$w/image.tar" '"Env":["PATH=/usr/sbin:/usr/bin:/bin"],"Entrypoint":["/chaos"]' chaos-test/agent:)
image_import "$w/image.tar" "$ref" chaos/agent:latest
echo "$ref"
