#!/usr/bin/env bash
# Checks by hand (kubectl) that the test cluster from cluster.sh really runs
# pods: a busybox pod with imagePullPolicy Never runs to Succeeded, logs,
# exec (with stdin), a kill of the container process from the host restarts
# it, pod-to-pod traffic, a Deployment rolls out, a pod on each other node
# (reached across nodes), a delete with grace 0.
# Exits non-zero on the first failure. Works in a namespace of its own and
# deletes it. Uses KUBECONFIG and CHAOS_K8S_* from `cluster.sh env` when set,
# else asks cluster.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${CHAOS_K8S_BUSYBOX_IMAGE:-}" ] || [ -z "${KUBECONFIG:-}" ]; then
  env_out=$("$HERE/cluster.sh" env) || { echo "smoke: no cluster (run scripts/k8s/cluster.sh up)" >&2; exit 1; }
  eval "$env_out"
fi
IMG=$CHAOS_K8S_BUSYBOX_IMAGE
NS=chaos-smoke-$$
k() { "$CHAOS_K8S_BIN/kubectl" -n "$NS" "$@"; }
el() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}'; }
checks=0
ok() { checks=$((checks + 1)); echo "smoke: ok: $*"; }
fail() { echo "smoke: FAILED: $*" >&2; k get pods -o wide >&2 2>/dev/null || true; exit 1; }
cleanup() { "$CHAOS_K8S_BIN/kubectl" delete namespace "$NS" --wait=true --timeout=60s >/dev/null 2>&1 || true; }
trap cleanup EXIT
T=$EPOCHREALTIME

"$CHAOS_K8S_BIN/kubectl" create namespace "$NS" >/dev/null
# pods can only be created once the namespace has its default serviceaccount
for ((i = 0; i < 100; i++)); do k get serviceaccount default >/dev/null 2>&1 && break; sleep 0.1; done

pod() { # name restartPolicy script: a busybox pod running `sh -c script`
  local name=$1 policy=$2 script=$3
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, labels: {app: $name}}
spec:
  restartPolicy: $policy
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: $IMG
    imagePullPolicy: Never
    command: [sh, -c]
    args:
    - |
      $script
EOF
}

# 1. run to Succeeded, and its logs
t=$EPOCHREALTIME
pod once Never 'echo hello from $(hostname); test -d /chaos/output' | k apply -f - >/dev/null
k wait --for=jsonpath='{.status.phase}'=Succeeded pod/once --timeout=60s >/dev/null || fail "pod once did not reach Succeeded"
ok "pod (imagePullPolicy: Never, $IMG) ran to Succeeded in $(el "$t") s"
[ "$(k logs once)" = "hello from once" ] || fail "logs of pod once: '$(k logs once)'"
ok "logs: $(k logs once)"

# 2. a long-running pod: Ready, exec, exec with stdin
t=$EPOCHREALTIME
pod long Always 'trap "echo got TERM; exit 0" TERM; i=0; while :; do echo tick $i; i=$((i+1)); sleep 1; done' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/long --timeout=60s >/dev/null || fail "pod long not Ready"
ok "pod long create -> Ready in $(el "$t") s"
[ "$(k exec long -- sh -c 'echo exec in $(hostname)')" = "exec in long" ] || fail "exec"
[ "$(echo piped | k exec -i long -- cat)" = piped ] || fail "exec with stdin"
ok "exec and exec with stdin"

# 3. kill the container's process from the host: kubelet restarts it
cid=$(k get pod long -o jsonpath='{.status.containerStatuses[0].containerID}'); cid=${cid#containerd://}
pid=$(ctr -a "$CHAOS_K8S_CONTAINERD_ADDRESS" -n k8s.io tasks ls | awk -v c="$cid" '$1 == c {print $2}')
[ -n "$pid" ] && [ -d "/proc/$pid" ] || fail "no host pid for container $cid"
t=$EPOCHREALTIME
kill -KILL "$pid"
for ((i = 0; i < 300; i++)); do
  [ "$(k get pod long -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 1 ] && break
  sleep 0.1
done
[ "$(k get pod long -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 1 ] || fail "no restart after kill -9 of host pid $pid"
last=$(k get pod long -o jsonpath='{.status.containerStatuses[0].lastState.terminated.exitCode}')
[ "$last" = 137 ] || fail "lastState exit code $last, want 137"
ok "kill -KILL of host pid $pid: restartCount 0 -> 1 in $(el "$t") s, lastState exit 137"
k wait --for=condition=Ready pod/long --timeout=60s >/dev/null || fail "pod long not Ready after restart"
k logs long --previous --tail=1 | grep -q '^tick' || fail "logs --previous"
ok "logs --previous: $(k logs long --previous --tail=1)"

# 4. a Deployment rolls out; pod-to-pod traffic over the CNI bridge
t=$EPOCHREALTIME
k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: main
        image: $IMG
        imagePullPolicy: Never
        command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
EOF
k rollout status deployment/web --timeout=90s >/dev/null || fail "deployment web did not roll out"
ok "deployment with 2 replicas rolled out in $(el "$t") s"
ip=$(k get pods -l app=web -o jsonpath='{.items[0].status.podIP}')
k exec long -- ping -c 1 -W 2 "$ip" >/dev/null || fail "ping from pod long to pod $ip"
ok "pod-to-pod ping long -> $ip"

# 4b. every other node runs a pod that asks for it (its taint tolerated), in
#     its own containerd, and pods reach each other across nodes
set -- ${CHAOS_K8S_NODE_NAMES:-}
addrs=(${CHAOS_K8S_CONTAINERD_ADDRESSES:-})
for ((n = 2; n <= $#; n++)); do
  node=${!n} t=$EPOCHREALTIME
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: on-$n}
spec:
  nodeSelector: {kubernetes.io/hostname: $node}
  tolerations: [{key: $CHAOS_K8S_EXTRA_NODE_TAINT, operator: Exists, effect: NoSchedule}]
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMG
    imagePullPolicy: Never
    command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
EOF
  k wait --for=condition=Ready "pod/on-$n" --timeout=60s >/dev/null || fail "pod on-$n (node $node) not Ready"
  [ "$(k get pod "on-$n" -o jsonpath='{.spec.nodeName}')" = "$node" ] || fail "pod on-$n is not on $node"
  c=$(k get pod "on-$n" -o jsonpath='{.status.containerStatuses[0].containerID}'); c=${c#containerd://}
  ctr -a "${addrs[$((n - 1))]}" -n k8s.io tasks ls -q | grep -q "^$c" || fail "pod on-$n's container is not in $node's containerd"
  ip=$(k get pod "on-$n" -o jsonpath='{.status.podIP}')
  k exec long -- ping -c 1 -W 2 "$ip" >/dev/null || fail "ping from pod long ($CHAOS_K8S_NODE) to pod on-$n ($node, $ip)"
  ok "node $node: pod on-$n Ready in $(el "$t") s in its own containerd; ping $CHAOS_K8S_NODE -> $ip"
  k delete pod "on-$n" --wait=false >/dev/null
done

# 5. delete with grace 0: gone from the API and its containers from the node
t=$EPOCHREALTIME
k delete pod long --grace-period=0 --force >/dev/null 2>&1 || fail "delete --grace-period=0"
k get pod long >/dev/null 2>&1 && fail "pod long still in the API after delete --grace-period=0"
api=$(el "$t")
for ((i = 0; i < 200; i++)); do
  ctr -a "$CHAOS_K8S_CONTAINERD_ADDRESS" -n k8s.io tasks ls -q | grep -q "^${cid}" || break
  sleep 0.1
done
ctr -a "$CHAOS_K8S_CONTAINERD_ADDRESS" -n k8s.io tasks ls -q | grep -q "^${cid}" && fail "container of pod long still runs 20 s after delete --grace-period=0"
ok "delete --grace-period=0: gone from the API in $api s, container gone in $(el "$t") s"
t=$EPOCHREALTIME
k delete deployment web --wait=true >/dev/null
k wait --for=delete pod -l app=web --timeout=60s >/dev/null 2>&1 || fail "deployment's pods not deleted"
ok "deployment deleted, its pods gone in $(el "$t") s (TERM handled)"

echo "smoke: all $checks checks ok in $(el "$T") s"
