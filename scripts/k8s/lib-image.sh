# Sourced by agent-image.sh and chaos-image.sh (not run): what both do to
# write an image FROM scratch as a docker-archive tarball without Docker and
# import it into the test cluster's containerd(s) with ctr. Each function
# dies with the sourcing script's name on what is missing.

die() { echo "${0##*/}: $*" >&2; exit 1; }

# image_need_cluster: sets ADDRS to the containerd sockets to import into,
# $CHAOS_K8S_CONTAINERD_ADDRESSES (space-separated), else
# $CHAOS_K8S_CONTAINERD_ADDRESS, and checks that ctr and busybox-static
# are here.
image_need_cluster() {
  [ -x /bin/busybox ] || die "/bin/busybox is missing: apt-get install busybox-static"
  ADDRS=${CHAOS_K8S_CONTAINERD_ADDRESSES:-${CHAOS_K8S_CONTAINERD_ADDRESS:-}}
  [ -n "$ADDRS" ] || die "CHAOS_K8S_CONTAINERD_ADDRESS is not set: eval \"\$(scripts/k8s/cluster.sh env)\""
  command -v ctr >/dev/null || die "ctr is missing: apt-get install containerd"
}

# image_binary DIR [BINARY]: prints the static chaos binary the image
# holds: BINARY, else one built (CGO_ENABLED=0) from the repository into
# DIR.
image_binary() {
  local dir=$1 bin=${2:-} repo
  if [ -z "$bin" ]; then
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    (cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$dir/chaos" ./cmd/chaos) >&2 || die "building ./cmd/chaos failed"
    bin=$dir/chaos
  fi
  [ -x "$bin" ] || die "$bin is not an executable"
  if command -v file >/dev/null && ! file -L "$bin" | grep -q 'statically linked'; then
    die "$bin is not statically linked (build it with CGO_ENABLED=0)"
  fi
  printf '%s\n' "$bin"
}

# image_busybox ROOTFS: Debian's busybox-static as ROOTFS/bin/busybox with
# a link for each of its applets that ROOTFS/bin does not have yet.
image_busybox() {
  local r=$1 a
  mkdir -p "$r/bin"
  cp /bin/busybox "$r/bin/busybox"
  chmod 0755 "$r/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || ln -s /bin/busybox "$r/bin/$a"; done
}

# image_archive ROOTFS OUT CONFIG REF: writes OUT, a docker-archive of one
# layer, ROOTFS (owned by root, every time 0, so the same files make the
# same image), with CONFIG the JSON members of the image's config (e.g.
# "Env":[...],"Entrypoint":[...]). REF ending in ":" gets the first 16 hex
# of the layer's digest as its tag. Prints the image's name.
image_archive() {
  local r=$1 out=$2 config=$3 ref=$4 w diff cfg
  w=$(mktemp -d)
  mkdir "$w/img"
  tar -C "$r" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
  diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  case "$ref" in *:) ref=$ref${diff:0:16} ;; esac
  mkdir "$w/img/$diff"
  mv "$w/layer.tar" "$w/img/$diff/layer.tar"
  printf '{"architecture":"amd64","os":"linux","config":{%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$config" "$diff" >"$w/config.json"
  cfg=$(sha256sum "$w/config.json" | cut -d' ' -f1)
  mv "$w/config.json" "$w/img/$cfg.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$ref" "$diff" >"$w/img/manifest.json"
  tar -C "$w/img" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out" .
  rm -rf "$w"
  printf '%s\n' "$ref"
}

# image_missing REF: whether a containerd of $ADDRS lacks REF.
image_missing() {
  local a
  for a in $ADDRS; do
    ctr -a "$a" -n k8s.io images ls -q | grep -qx "docker.io/$1" || return 0
  done
  return 1
}

# image_import TAR REF LATEST: imports TAR (the image REF) into each
# containerd of $ADDRS that lacks REF, and tags REF as LATEST in each.
image_import() {
  local tar=$1 ref=$2 latest=$3 a
  for a in $ADDRS; do
    if ! ctr -a "$a" -n k8s.io images ls -q | grep -qx "docker.io/$ref"; then
      ctr -a "$a" -n k8s.io images import "$tar" >/dev/null
    fi
    ctr -a "$a" -n k8s.io images tag --force "docker.io/$ref" "docker.io/$latest" >/dev/null
  done
}
