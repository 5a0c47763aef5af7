package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/proc"
)

// The network faults act on a pod's network namespace (its sandbox's, which
// every container of the pod shares), found from the host: the host pid of
// one of the pod's running containers, by the container id in its cgroup
// path (/proc/<pid>/cgroup names it with containerd, CRI-O and the cgroupfs
// or systemd drivers alike), then /proc/<pid>/ns/net. That needs the pod
// to run on this machine; on another node Network fails, saying so. The
// pod's IPs are its addresses, and the namespace must hold them.

// podNet is the network of pod name.
func (b *Backend) podNet(ctx context.Context, sc scope, name string) (backend.Net, error) {
	if b.err != nil {
		return backend.Net{}, b.err
	}
	p, err := b.startedPodIn(ctx, sc, name)
	if err != nil {
		return backend.Net{}, err
	}
	return netOf(p)
}

// netOf is the network of pod p, found on this machine.
func netOf(p *corev1.Pod) (backend.Net, error) {
	name := p.Name
	if p.Spec.HostNetwork {
		return backend.Net{}, fmt.Errorf("pod %s: %w: it uses the node's network (hostNetwork), which the harness never changes", name, backend.ErrUnsupported)
	}
	addrs := addrsOf(p)
	var ids []string
	for _, st := range append(append([]corev1.ContainerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...) {
		if st.State.Running == nil || st.ContainerID == "" {
			continue
		}
		_, id, _ := strings.Cut(st.ContainerID, "://")
		if len(id) >= 12 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return backend.Net{}, fmt.Errorf("pod %s has no running container, so no network namespace to find", name)
	}
	pid := HostPidOf(ids)
	if pid == 0 {
		return backend.Net{}, fmt.Errorf("pod %s runs on node %s: none of its containers is a process of this machine, and the harness changes only namespaces it can reach from the host: install the node agent (chaos agent install) to reach it there", name, p.Spec.NodeName)
	}
	return backend.Net{NS: fmt.Sprintf("/proc/%d/ns/net", pid), Addrs: addrs, What: "pod " + name, Pid: pid}, nil
}

// addrsOf are a pod's IPs, as its status gives them.
func addrsOf(p *corev1.Pod) []netip.Addr {
	var addrs []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// podAddrs are the IPs of pod name in scope sc, from the API: what a
// partition cuts off where only the pod's node reaches its namespace.
func (b *Backend) podAddrs(ctx context.Context, sc scope, name string) ([]netip.Addr, error) {
	if b.err != nil {
		return nil, b.err
	}
	p, err := b.podIn(ctx, sc, name)
	if err != nil {
		return nil, err
	}
	return addrsOf(p), nil
}

// Addrs are the instance's pod's IPs.
func (in *instance) Addrs(ctx context.Context) ([]netip.Addr, error) {
	return in.b.podAddrs(ctx, in.b.runScope(), in.pod)
}

// Addrs are the pod's IPs.
func (h *podHandle) Addrs(ctx context.Context) ([]netip.Addr, error) {
	pod, _ := h.current()
	return h.b.podAddrs(ctx, h.sc, pod)
}

// HostPidOf returns a process of this machine in a container with one of
// the ids, or 0: a container's first process (its init), not one of the
// short-lived ones it runs, which may be gone before its namespace or
// cgroup is opened. Of the processes whose parent is outside the
// containers (inits, and execs, which start later), the one started first;
// never the lowest pid: pids wrap, and a short-lived child may have a
// lower pid than its init, or start in the same clock tick.
func HostPidOf(ids []string) int {
	pids := pidsOf(ids)
	in := make(map[int]bool, len(pids))
	for _, pid := range pids {
		in[pid] = true
	}
	best, bestStart := 0, uint64(0)
	for _, pid := range pids {
		if in[proc.Parent(pid)] {
			continue // forked inside a container
		}
		if st, err := proc.StartTime(pid); err == nil && (best == 0 || st < bestStart) {
			best, bestStart = pid, st
		}
	}
	return best
}

// pidsOf are the processes of this machine in a container with one of the
// ids, by the ids in /proc/<pid>/cgroup.
func pidsOf(ids []string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil || len(ids) == 0 {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/cgroup")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		found := false
		for sc.Scan() && !found {
			for _, id := range ids {
				if strings.Contains(sc.Text(), id) {
					found = true
					break
				}
			}
		}
		f.Close()
		if found {
			out = append(out, pid)
		}
	}
	return out
}

// Network is the instance's pod's network.
func (in *instance) Network(ctx context.Context) (backend.Net, error) {
	return in.b.podNet(ctx, in.b.runScope(), in.pod)
}

// Network is the pod's network.
func (h *podHandle) Network(ctx context.Context) (backend.Net, error) {
	pod, _ := h.current()
	return h.b.podNet(ctx, h.sc, pod)
}
