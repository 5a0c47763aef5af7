package kubernetes

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/cgroup"
)

// The resource faults act on a container of a pod through the same cgroup
// primitives as on a local process or a Docker container: the container's
// own groups, found from the host through its process (HostPidOf, as the
// network faults and freeze find a pod), its file system through
// /proc/<pid>/root, and a stress helper of this machine placed in its
// groups. That needs the pod on this machine; on another node it is an
// error that says so (a node agent would reach it there; this build has
// none). The container's group, not the pod's, is limited: on cgroup v2 a
// process can only join a leaf, and the helper must share the limits it
// competes under. Kubelet writes a container's limits when it creates it
// (and on an in-place resize), not on a loop, so a fault's value holds
// until it is reverted.

// podResources are the groups of container ctr ("" the first running one)
// of pod name in scope sc.
func (b *Backend) podResources(ctx context.Context, sc scope, name, ctr string) (backend.Resources, error) {
	if b.err != nil {
		return backend.Resources{}, b.err
	}
	p, err := b.startedPodIn(ctx, sc, name)
	if err != nil {
		return backend.Resources{}, err
	}
	return resourcesOf(p, ctr)
}

// resourcesOf are the groups on this machine of container ctr ("" the
// first running one) of pod p.
func resourcesOf(p *corev1.Pod, ctr string) (backend.Resources, error) {
	name := p.Name
	id, cname := "", ""
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running == nil || st.ContainerID == "" || (ctr != "" && st.Name != ctr) {
			continue
		}
		if _, cid, _ := strings.Cut(st.ContainerID, "://"); len(cid) >= 12 {
			id, cname = cid, st.Name
			break
		}
	}
	if id == "" {
		return backend.Resources{}, fmt.Errorf("pod %s has no running container %s to limit", name, ctr)
	}
	pid := HostPidOf([]string{id})
	if pid == 0 {
		return backend.Resources{}, fmt.Errorf("pod %s runs on node %s: its container %s is not a process of this machine, and the resource faults need its cgroups (install the node agent, chaos agent install, to reach them there)", name, p.Spec.NodeName, cname)
	}
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return backend.Resources{}, err
	}
	place, err := cgroup.PlaceOfPid(h, pid)
	if err != nil {
		return backend.Resources{}, fmt.Errorf("pod %s: %w", name, err)
	}
	if len(place.Dirs) == 0 {
		return backend.Resources{}, fmt.Errorf("pod %s: %w: none of its container's cgroups is where this machine has the cpu, memory, io or pids controller", name, cgroup.ErrNoController)
	}
	return backend.Resources{What: fmt.Sprintf("pod %s container %s", name, cname), Pid: pid, Root: fmt.Sprintf("/proc/%d/root", pid), Place: place}, nil
}

// Resources are the groups of the instance's workload container.
func (in *instance) Resources(ctx context.Context, need backend.ResourceNeed) (backend.Resources, error) {
	return in.b.podResources(ctx, in.b.runScope(), in.pod, mainContainer)
}

// Resources are the groups of the pod's container (a role's, or a
// target's first).
func (h *podHandle) Resources(ctx context.Context, need backend.ResourceNeed) (backend.Resources, error) {
	pod, _ := h.current()
	return h.b.podResources(ctx, h.sc, pod, h.container)
}
