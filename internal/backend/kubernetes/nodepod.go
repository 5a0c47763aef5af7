package kubernetes

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/chaos-harness/chaos/internal/backend"
)

// NodePod is a pod of this machine as the node agent acts on it: the
// handle the fault package's code is given there, with the node-level
// primitives the harness uses for a pod of its own machine (freeze.go,
// network.go, resource.go). It never takes the pod down: that is the API
// server's business, which the harness does itself.
type NodePod struct {
	Pod *corev1.Pod
	// Container is the container a resource fault limits ("" the first).
	Container string
	// Label is what the timeline calls it ("" pod <ns>/<name>).
	Label string
}

var (
	_ backend.Handle    = (*NodePod)(nil)
	_ backend.Networked = (*NodePod)(nil)
	_ backend.Resourced = (*NodePod)(nil)
	_ backend.Processed = (*NodePod)(nil)
)

func (n *NodePod) Name() string {
	if n.Label != "" {
		return n.Label
	}
	return "pod " + n.Pod.Namespace + "/" + n.Pod.Name
}
func (n *NodePod) ID() string { return string(n.Pod.UID) }

func (n *NodePod) Down(context.Context, backend.Down) error {
	return fmt.Errorf("%s: %w: the node agent does not take pods down", n.Name(), backend.ErrUnsupported)
}
func (n *NodePod) Up(context.Context) error    { return backend.ErrUnsupported }
func (n *NodePod) Ready(context.Context) error { return nil }

// Freeze freezes the pod's containers but the harness's collector.
func (n *NodePod) Freeze(ctx context.Context) error {
	groups, _, err := containerGroups(n.Pod, collectorContainer)
	if err != nil {
		return err
	}
	return freezeGroups(ctx, groups)
}

// Thaw thaws all of them, and the pod's group.
func (n *NodePod) Thaw(ctx context.Context) error { return thaw(ctx, n.Pod) }

// FrozenGroups are the cgroup directories Freeze freezes, for the agent's
// journal.
func (n *NodePod) FrozenGroups() ([]string, error) {
	groups, pod, err := containerGroups(n.Pod, "")
	if err != nil {
		return nil, err
	}
	out := []string{pod.Path}
	for _, g := range groups {
		out = append(out, g.Path)
	}
	return out, nil
}

func (n *NodePod) Network(context.Context) (backend.Net, error) { return netOf(n.Pod) }

func (n *NodePod) Resources(context.Context, backend.ResourceNeed) (backend.Resources, error) {
	return resourcesOf(n.Pod, n.Container)
}

// Processes are every process of the pod's running containers (but the
// collector's), by their container ids in /proc/<pid>/cgroup.
func (n *NodePod) Processes(context.Context) (string, []int, error) {
	var ids []string
	for _, st := range n.Pod.Status.ContainerStatuses {
		if st.State.Running == nil || st.Name == collectorContainer {
			continue
		}
		if _, id, _ := strings.Cut(st.ContainerID, "://"); len(id) >= 12 {
			ids = append(ids, id)
		}
	}
	pids := pidsOf(ids)
	if len(pids) == 0 {
		return "", nil, fmt.Errorf("%s: no process of its containers is on this machine", n.Name())
	}
	return n.Name(), pids, nil
}

// podProcesses are the processes of pod name of scope sc, when it runs on
// this machine (a clock fault without a node agent).
func (b *Backend) podProcesses(ctx context.Context, sc scope, name string) (string, []int, error) {
	if b.err != nil {
		return "", nil, b.err
	}
	p, err := b.startedPodIn(ctx, sc, name)
	if err != nil {
		return "", nil, err
	}
	what, pids, err := (&NodePod{Pod: p}).Processes(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("pod %s runs on node %s: %w (install the node agent, chaos agent install, to reach it there)", name, p.Spec.NodeName, err)
	}
	return what, pids, nil
}

// Processes are the instance's pod's processes.
func (in *instance) Processes(ctx context.Context) (string, []int, error) {
	return in.b.podProcesses(ctx, in.b.runScope(), in.pod)
}

// Processes are the pod's processes.
func (h *podHandle) Processes(ctx context.Context) (string, []int, error) {
	pod, _ := h.current()
	return h.b.podProcesses(ctx, h.sc, pod)
}
