#!/usr/bin/env bash
# The chaos runner image for `chaos run --runner kubernetes`: FROM scratch,
# the static chaos binary as /bin/chaos and Debian's busybox-static as
# /bin/busybox with its applets in /bin (the shell and tools the process
# backend's wrapper, hooks and checks use), /tmp (1777), /in and /runs;
# PATH=/bin. Written as a docker-archive tarball without Docker (as
# cluster.sh's mkimage writes the cluster's images) and imported into the
# test cluster's containerd with ctr.
#
#   chaos-image.sh [BINARY]   build (or take BINARY, a static chaos), import,
#                             and print the image's name
#
# The image is chaos-test/chaos:<16 hex of the binary and busybox>, also
# tagged chaos/chaos:latest (the runner's default), in every node's
# containerd. Needs $CHAOS_K8S_CONTAINERD_ADDRESSES (or, for one node,
# $CHAOS_K8S_CONTAINERD_ADDRESS; eval "$(scripts/k8s/cluster.sh env)"), ctr,
# root (containerd's socket), and Go when no BINARY is given.
# docs/campaigns.md has the details.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
die() { echo "chaos-image.sh: $*" >&2; exit 1; }
[ -x /bin/busybox ] || die "/bin/busybox is missing: apt-get install busybox-static"
ADDRS=${CHAOS_K8S_CONTAINERD_ADDRESSES:-${CHAOS_K8S_CONTAINERD_ADDRESS:-}}
[ -n "$ADDRS" ] || die "CHAOS_K8S_CONTAINERD_ADDRESS is not set: eval \"\$(scripts/k8s/cluster.sh env)\""
command -v ctr >/dev/null || die "ctr is missing: apt-get install containerd"

w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then
  (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$w/chaos" ./cmd/chaos)
  bin=$w/chaos
fi
[ -x "$bin" ] || die "$bin is not an executable"
if command -v file >/dev/null && ! file -L "$bin" | grep -q 'statically linked'; then
  die "$bin is not statically linked (build it with CGO_ENABLED=0)"
fi

ref=chaos-test/chaos:$(cat "$bin" /bin/busybox | sha256sum | cut -c1-16)
for ADDR in $ADDRS; do
  if ! ctr -a "$ADDR" -n k8s.io images ls -q | grep -qx "docker.io/$ref"; then
    if [ ! -f "$w/image.tar" ]; then
      mkdir -p "$w/rootfs/bin" "$w/img"
      cp /bin/busybox "$w/rootfs/bin/busybox"
      cp "$bin" "$w/rootfs/bin/chaos"
      chmod 0755 "$w/rootfs/bin/busybox" "$w/rootfs/bin/chaos"
      for a in $(/bin/busybox --list); do [ -e "$w/rootfs/bin/$a" ] || ln -s /bin/busybox "$w/rootfs/bin/$a"; done
      mkdir -p "$w/rootfs/tmp" "$w/rootfs/in" "$w/rootfs/runs"
      chmod 1777 "$w/rootfs/tmp"
      tar -C "$w/rootfs" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
      diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
      mkdir "$w/img/$diff"
      mv "$w/layer.tar" "$w/img/$diff/layer.tar"
      printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Entrypoint":["/bin/chaos"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$diff" >"$w/config.json"
      cfg=$(sha256sum "$w/config.json" | cut -d' ' -f1)
      mv "$w/config.json" "$w/img/$cfg.json"
      printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$ref" "$diff" >"$w/img/manifest.json"
      tar -C "$w/img" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/image.tar" .
    fi
    ctr -a "$ADDR" -n k8s.io images import "$w/image.tar" >/dev/null
  fi
  ctr -a "$ADDR" -n k8s.io images tag --force "docker.io/$ref" docker.io/chaos/chaos:latest >/dev/null
done
echo "$ref"
