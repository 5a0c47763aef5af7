#!/bin/sh
# A stand-in for the OpenShell gateway's reconcile loop, for
# examples/sandbox-stop-start.yaml: sandbox-gateway.sh DIR LOG.
#
# Sandboxes record their phase in DIR/sandboxes/<name>.phase (starting,
# then ready). One second after each sweep ends, the next begins; each
# logs its end as "reconcile.sandboxes done", as the gateway's span does.
#
# The planted race (NVIDIA/OpenShell#4981): a sweep that finds a sandbox
# still starting moves it to Error, and Error is terminal: DIR/sandboxes/
# <name>.error stays, though the sandbox itself comes up fine.
dir=$1
log=$2
mkdir -p "$dir/sandboxes"
say() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ) $*" >> "$log"; }
echo $$ > "$dir/gateway.pid"
trap 'say "gateway stopping"; exit 0' TERM
say "gateway started"
while :; do
  sleep 1
  for f in "$dir"/sandboxes/*.phase; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .phase)
    if [ "$(cat "$f")" = starting ] && [ ! -e "$dir/sandboxes/$name.error" ]; then
      : > "$dir/sandboxes/$name.error"
      say "INFO Sandbox phase changed sandbox_name=$name old_phase=Starting new_phase=Error"
      say "WARN Sandbox failed to become ready sandbox_name=$name reason=ContainerExited"
    fi
  done
  say "INFO reconcile.sandboxes done"
done
