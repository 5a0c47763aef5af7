package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// File-system faults on the run's pods (issue 27). The layer must be
// served on the pods' node, so the node agent serves it (agent/fs.go): the
// harness picks one node with an agent for all the run's layers, has the
// agent make the layer's directory there, runs the layer's helper in the
// agent's pod by exec (chaos agent fs-serve), whose stdin and stdout carry
// the helper's protocol as a local helper's pipes do, and pins the
// workload's pods to that node with a hostPath volume of the directory at
// the faulted path. The layer is mounted before any pod starts, so each
// pod's bind of the directory holds it: no mount propagation is asked
// (HostToContainer would need the node's directory to be a shared mount,
// which containerd checks and a private / is not). Should the harness
// die, the exec ends, the helper with it, and the agent unmounts the layer
// and removes its directory when the run's lease ends.

// fsLayer is a layer a workload's pods get.
type fsLayer struct {
	path, dir string
}

// fsState is the run's layers on pods.
type fsState struct {
	// mu guards node and by.
	mu sync.Mutex
	// node is the node every pod with a layer runs on, and agent its
	// agent.
	node  string
	agent *corev1.Pod
	// by are the layers of each workload's pods.
	by map[string][]fsLayer
}

// layers are the layers of workload's pods and the node they run on.
func (b *Backend) layers(workload string) (string, []fsLayer) {
	b.fs.mu.Lock()
	defer b.fs.mu.Unlock()
	return b.fs.node, slices.Clone(b.fs.by[workload])
}

// layerAgent is the agent that serves the run's layers, chosen once:
// the first, by node name, of the agents whose node the run's pods may
// use (options.node-selector matches its labels, options.tolerations
// tolerate its taints). A harness that may not list nodes takes the first.
func (b *Backend) layerAgent(ctx context.Context) (*corev1.Pod, error) {
	b.fs.mu.Lock()
	defer b.fs.mu.Unlock()
	if b.fs.agent != nil {
		return b.fs.agent, nil
	}
	ns := b.opts.agentNamespace
	agents, err := agentsOn(ctx, b.cs, ns, "")
	if err != nil {
		return nil, fmt.Errorf("looking for the node agents in namespace %s (options.agent-namespace): %w", ns, err)
	}
	if len(agents) == 0 {
		return nil, fmt.Errorf("no node agent runs in namespace %s (options.agent-namespace): a file-system layer on pods is served on their node by its agent (chaos agent install)", ns)
	}
	slices.SortFunc(agents, func(x, y corev1.Pod) int { return strings.Compare(x.Spec.NodeName, y.Spec.NodeName) })
	nodes, err := b.cs.Nodes().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		b.fs.agent, b.fs.node = &agents[0], agents[0].Spec.NodeName
		return b.fs.agent, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the nodes, for one with an agent that the run's pods may use: %w", err)
	}
	var why []string
	for i := range agents {
		a := &agents[i]
		idx := slices.IndexFunc(nodes.Items, func(n corev1.Node) bool { return n.Name == a.Spec.NodeName })
		if idx < 0 {
			continue
		}
		if no := placeable(&nodes.Items[idx], b.opts.nodeSelector, b.opts.tolerations); no != "" {
			why = append(why, a.Spec.NodeName+": "+no)
			continue
		}
		b.fs.agent, b.fs.node = a, a.Spec.NodeName
		return a, nil
	}
	return nil, fmt.Errorf("no node with an agent of namespace %s may run the run's pods (%s): options.node-selector and options.tolerations place them", ns, strings.Join(why, "; "))
}

// placeable says why a pod with nodeSelector and tolerations cannot run on
// node n, or "" when it can.
func placeable(n *corev1.Node, nodeSelector map[string]string, tolerations []corev1.Toleration) string {
	for k, v := range nodeSelector {
		if n.Labels[k] != v {
			return fmt.Sprintf("its label %s is %q, not %q (options.node-selector)", k, n.Labels[k], v)
		}
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return fmt.Sprintf("its taint %s:%s is not tolerated (options.tolerations)", t.Key, t.Effect)
		}
	}
	return ""
}

// ServeFS serves a layer over path for workloads' pods, on the node of
// the agent layerAgent picks, where their pods are then pinned.
func (b *Backend) ServeFS(ctx context.Context, workloads []string, path string, opts fsfault.Options) (fsfault.Served, error) {
	if b.err != nil {
		return nil, b.err
	}
	agent, err := b.layerAgent(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.holdLease(ctx); err != nil {
		return nil, err
	}
	rep, err := CallAgent(ctx, b.cfg, b.cs, agent, AgentRequest{Op: AgentFSLayer, Run: b.run.ID, FsName: opts.FsName})
	b.recordAgent(rep)
	if err != nil {
		return nil, err
	}
	l := &nodeLayer{b: b, agent: agent, id: rep.ID, path: path}
	// The helper's stream is held as long as the layer: one of the
	// backend's streams.
	release, err := b.openStream(ctx)
	if err != nil {
		l.revert()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	l.end = func() { cancel(); release() }
	l.Remote, err = fsfault.MountStream(rep.Dir, opts, func(args []string) (*fsfault.Stream, error) {
		return b.layerStream(sctx, agent, args, cancel), nil
	})
	if err != nil {
		l.end()
		l.revert()
		return nil, fmt.Errorf("agent %s: %w", agentName(agent), err)
	}
	b.fs.mu.Lock()
	if b.fs.by == nil {
		b.fs.by = map[string][]fsLayer{}
	}
	for _, w := range workloads {
		b.fs.by[w] = append(b.fs.by[w], fsLayer{path: path, dir: rep.Dir})
	}
	b.fs.mu.Unlock()
	b.run.Record("agent.applied", rundir.F("uses", "fs-layer"), rundir.F("path", path), rundir.F("node_dir", rep.Dir),
		rundir.F("workloads", workloads), rundir.F("agent", agentName(agent)), rundir.F("id", rep.ID))
	return l, nil
}

// layerStream runs the layer's helper in agent's pod by exec: its
// stdin and stdout are the stream's. Kill cancels the exec.
func (b *Backend) layerStream(ctx context.Context, agent *corev1.Pod, args []string, kill func()) *fsfault.Stream {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	var mu sync.Mutex // guards execErr
	var execErr error
	go func() {
		err := kubeapi.ExecIO(ctx, b.cfg, b.cs, agent.Namespace, agent.Name, AgentContainer, append([]string{AgentBinary, "agent", AgentFSServe}, args...), inR, outW)
		mu.Lock()
		execErr = err
		mu.Unlock()
		outW.Close()
		// Writes to a helper that is gone fail, not block.
		inR.CloseWithError(errors.New("the exec has ended"))
		close(done)
	}()
	return &fsfault.Stream{In: inW, Out: outR, Kill: kill,
		Wait: func() error {
			<-done
			mu.Lock()
			defer mu.Unlock()
			return execErr
		},
		Stderr: func() string {
			mu.Lock()
			defer mu.Unlock()
			if execErr == nil {
				return "agent " + agentName(agent)
			}
			return "agent " + agentName(agent) + ": " + execErr.Error()
		}}
}

// nodeLayer is a layer an agent serves on its node.
type nodeLayer struct {
	*fsfault.Remote
	b     *Backend
	agent *corev1.Pod
	id    string
	path  string
	end   func()
}

// Unmount has the helper unmount the layer, then the agent remove its
// directory (and detach the mount, should the helper have failed to).
func (l *nodeLayer) Unmount() error {
	err := l.Remote.Unmount()
	l.end()
	return errors.Join(err, l.revert())
}

// revert asks the agent to revert the layer's directory.
func (l *nodeLayer) revert() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	release, err := l.b.openStream(ctx)
	if err != nil {
		return err
	}
	defer release()
	rep, err := CallAgent(ctx, l.b.cfg, l.b.cs, l.agent, AgentRequest{Op: AgentRevert, Run: l.b.run.ID, ID: l.id})
	l.b.recordAgent(rep)
	if err != nil {
		return err
	}
	l.b.run.Record("agent.reverted", rundir.F("uses", "fs-layer"), rundir.F("path", l.path), rundir.F("agent", agentName(l.agent)), rundir.F("id", l.id))
	return nil
}

// pinLayers gives pod, an instance of workload, the workload's layers and
// pins it to their node.
func (b *Backend) pinLayers(pod *corev1.Pod, workload string) {
	node, ls := b.layers(workload)
	if len(ls) == 0 {
		return
	}
	spec := &pod.Spec
	// By the node's name, not its hostname label, which may differ.
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}},
	}}}
	dir := corev1.HostPathDirectory
	for i, l := range ls {
		name := fmt.Sprintf("fs-layer-%d", i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: l.dir, Type: &dir}}})
		c := &spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: l.path})
	}
}

// fsSupport says why a file-system fault cannot act on what on names: the
// layer reaches a pod through a volume the harness gives the run's own
// pods, and only the node agent serves it.
func fsSupport(a *adapter.Adapter, on backend.On) string {
	if on != backend.OnInstances {
		return fmt.Sprintf("a file-system layer reaches a pod through a volume made when the harness creates it: only the run's instances have it, not a %s", on)
	}
	if a.Options["agent-namespace"] == "" {
		return "a file-system layer on pods is served on their node by the node agent: set options.agent-namespace to the namespace of chaos agent install"
	}
	return ""
}
