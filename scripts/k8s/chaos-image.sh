#!/usr/bin/env bash
# The chaos runner image for `chaos run --runner kubernetes`: FROM scratch,
# the static chaos binary as /bin/chaos and Debian's busybox-static as
# /bin/busybox with its applets in /bin (the shell and tools the process
# backend's wrapper, hooks and checks use), /tmp (1777), /in and /runs;
# PATH=/bin. Written as a docker-archive tarball without Docker (as
# cluster.sh's mkimage writes the cluster's images; lib-image.sh) and
# imported into the test cluster's containerd with ctr.
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

. "$(dirname "${BASH_SOURCE[0]}")/lib-image.sh"
image_need_cluster
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
bin=$(image_binary "$w" "${1:-}")

ref=chaos-test/chaos:$(cat "$bin" /bin/busybox | sha256sum | cut -c1-16)
if image_missing "$ref"; then
  image_busybox "$w/rootfs"
  cp "$bin" "$w/rootfs/bin/chaos"
  chmod 0755 "$w/rootfs/bin/chaos"
  mkdir -p "$w/rootfs/tmp" "$w/rootfs/in" "$w/rootfs/runs"
  chmod 1777 "$w/rootfs/tmp"
  image_archive "$w/rootfs" "$w/image.tar" '"Env":["PATH=/bin"],"Entrypoint":["/bin/chaos"]' "$ref" >/dev/null
fi
image_import "$w/image.tar" "$ref" chaos/chaos:latest
echo "$ref"
