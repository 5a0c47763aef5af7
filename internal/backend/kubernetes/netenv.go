package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Members' addresses. On the local backend (options.network: isolated)
// every instance knows each member's address from the start, as
// $CHAOS_NET_ADDR_<NAME>, because the run gives the addresses out itself.
// A pod's address is the cluster's to give, once the pod is on a node, so a
// pod learns its peers' addresses a little later, before its script runs:
//
//   - $CHAOS_NET_ADDR, the pod's own address, comes from the downward API
//     (status.podIP), always;
//   - when the experiment or the adapter mentions $CHAOS_NET_ADDR_, the main
//     container waits, before the script starts, until the harness has
//     written netEnvFile (in the pod's mark volume, kept across restarts in
//     place) and sources it. The harness writes it, through the collector
//     container, once the pod and every other instance of its workload have
//     an address: it holds the address of every instance of the run that
//     has one then (so the instances of a workload always know each other,
//     and a later workload knows the earlier ones).
//
// A pod replaced by a restart is a new pod with a new address: it gets the
// file again, but its peers keep the address they were given.

const netEnvFile = markDir + "/net.env"

// netPrelude is what the main container runs first when it must wait: at
// most 300 s (the harness was killed, say), then the script runs without.
const netPrelude = `if [ -n "$CHAOS_NET_WAIT" ]; then
  i=0; while [ ! -e ` + netEnvFile + ` ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
  if [ -e ` + netEnvFile + ` ]; then . ` + netEnvFile + `; else echo "chaos: no peer addresses after 300s" >&2; fi
fi
`

// netEnv hands out the members' addresses.
type netEnv struct {
	on bool
	// siblings are the instances of each instance's workload, itself
	// included.
	siblings map[string][]string

	mu      sync.Mutex
	addrs   map[string]string  // instance -> its pod's address now
	written map[types.UID]bool // pods given the file, or being given it
}

// newNetEnv decides whether the run's pods wait for their peers: only when
// something of the run reads $CHAOS_NET_ADDR_<NAME>, since waiting delays
// every pod's start by an exec.
func (b *Backend) newNetEnv() *netEnv {
	n := &netEnv{siblings: map[string][]string{}, addrs: map[string]string{}, written: map[types.UID]bool{}}
	x, a := b.run.Experiment, b.run.Adapter
	n.on = !b.opts.noExec && x != nil && (bytes.Contains(x.Raw, []byte("CHAOS_NET_ADDR_")) || (a != nil && bytes.Contains(a.Raw, []byte("CHAOS_NET_ADDR_"))))
	if x != nil {
		for _, w := range x.Workloads {
			var names []string
			for i := 0; i < w.InstanceCount(); i++ {
				names = append(names, fmt.Sprintf("%s-%d", w.Name, i))
			}
			for _, name := range names {
				n.siblings[name] = names
			}
		}
	}
	return n
}

// addrEnv is the variable that holds a member's address, as on the local
// backend.
func addrEnv(name string) string {
	return "CHAOS_NET_ADDR_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// netObserve notes an instance pod's address and, when its workload is
// complete, gives the file to every pod of the workload that lacks it.
func (b *Backend) netObserve(instanceName string, p *corev1.Pod) {
	n := b.net
	if n == nil || !n.on || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return
	}
	n.mu.Lock()
	n.addrs[instanceName] = p.Status.PodIP
	sibs := n.siblings[instanceName]
	for _, s := range sibs {
		if n.addrs[s] == "" {
			n.mu.Unlock()
			return
		}
	}
	n.mu.Unlock()
	for _, s := range sibs {
		pod := p
		if s != instanceName {
			if b.podLister == nil {
				continue
			}
			other, err := b.podLister.Pods(b.ns).Get(dnsName("ch", b.run.ID, s))
			if err != nil {
				continue
			}
			pod = other
		}
		b.giveNetEnv(pod)
	}
}

// giveNetEnv writes the file into one pod, once, in the background; a
// failure is tried again at the pod's next update (or the informer's
// resync, every few seconds).
func (b *Backend) giveNetEnv(p *corev1.Pod) {
	n := b.net
	st := containerStatus(p, collectorContainer)
	if st == nil || st.State.Running == nil || p.Status.PodIP == "" {
		return
	}
	n.mu.Lock()
	if n.written[p.UID] {
		n.mu.Unlock()
		return
	}
	n.written[p.UID] = true
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(n.addrs)) {
		lines = append(lines, "export "+addrEnv(name)+"="+n.addrs[name])
	}
	n.mu.Unlock()
	content := strings.Join(lines, "\n") + "\n"
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := []string{"/bin/sh", "-c", `printf '%s' "$1" > ` + netEnvFile + `.tmp && mv ` + netEnvFile + `.tmp ` + netEnvFile, "sh", content}
		if err := b.exec(ctx, p.Name, collectorContainer, cmd, nil); err != nil {
			b.run.Logf("giving pod %s its peers' addresses: %v (trying again)", p.Name, err)
			n.mu.Lock()
			delete(n.written, p.UID)
			n.mu.Unlock()
			return
		}
		b.run.Record("pod.addresses", rundir.F("pod", p.Name), rundir.F("members", len(lines)))
	}()
}
