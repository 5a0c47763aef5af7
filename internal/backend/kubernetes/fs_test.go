package kubernetes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi/kubefake"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// TestLayerPodSpec: a workload with a layer gets its pods pinned to the
// layer's node (by the node's name) and the layer's node directory as a
// hostPath volume at the faulted path, in the main container only,
// without mount propagation; another workload's pods get neither.
func TestLayerPodSpec(t *testing.T) {
	o, err := parseOptions(map[string]string{"agent-namespace": "ag"})
	if err != nil {
		t.Fatal(err)
	}
	a := &adapter.Adapter{ID: "k", Backend: Name}
	b := &Backend{opts: o, run: backendtest.NewRun(t, a)}
	b.fs.node = "node-b"
	b.fs.by = map[string][]fsLayer{"db": {{path: "/data", dir: "/var/lib/chaos-agent/ag/run-x/fs-1"}, {path: "/wal", dir: "/var/lib/chaos-agent/ag/run-x/fs-2"}}}
	p := b.podSpec("p", "cm", "img", backend.InstanceSpec{Name: "db-0", Workload: "db"})
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" ||
		terms[0].MatchFields[0].Operator != corev1.NodeSelectorOpIn || len(terms[0].MatchFields[0].Values) != 1 || terms[0].MatchFields[0].Values[0] != "node-b" {
		t.Errorf("node affinity %+v, want metadata.name In [node-b]", terms)
	}
	vols := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory {
				t.Errorf("volume %s: hostPath type %v, want Directory", v.Name, v.HostPath.Type)
			}
			vols[v.Name] = v.HostPath.Path
		}
	}
	got := map[string]string{}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if dir, ok := vols[m.Name]; ok {
			got[m.MountPath] = dir
			if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
				t.Errorf("mount %s: propagation %s: the layer is mounted before the pod starts, and a private node mount refuses propagation", m.MountPath, *m.MountPropagation)
			}
		}
	}
	if len(got) != 2 || got["/data"] != "/var/lib/chaos-agent/ag/run-x/fs-1" || got["/wal"] != "/var/lib/chaos-agent/ag/run-x/fs-2" {
		t.Errorf("layer mounts %v (volumes %v)", got, vols)
	}
	for _, c := range p.Spec.Containers[1:] {
		for _, m := range c.VolumeMounts {
			if _, ok := vols[m.Name]; ok {
				t.Errorf("container %s mounts layer %s", c.Name, m.Name)
			}
		}
	}
	other := b.podSpec("q", "cm", "img", backend.InstanceSpec{Name: "web-0", Workload: "web"})
	if other.Spec.Affinity != nil || len(other.Spec.Volumes) != len(p.Spec.Volumes)-2 {
		t.Errorf("a workload without a layer got affinity %+v, volumes %+v", other.Spec.Affinity, other.Spec.Volumes)
	}
}

// TestLayerAgentChoice: the layer's node is the first, by name, with a
// Running agent that the run's pods may use: its labels match
// options.node-selector and its taints are tolerated.
func TestLayerAgentChoice(t *testing.T) {
	agent := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ag", Name: name, Labels: map[string]string{AgentAppLabel: AgentApp}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	node := func(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	extra := corev1.Taint{Key: "extra", Effect: corev1.TaintEffectNoSchedule}
	cs := kubefake.Client{CS: fake.NewClientset(
		agent("a1", "n1"), agent("a2", "n2"), agent("a3", "n3"),
		node("n1", map[string]string{"zone": "a"}), node("n2", map[string]string{"zone": "b"}, extra), node("n3", map[string]string{"zone": "b"}))}
	for _, tc := range []struct {
		opts map[string]string
		want string // the agent, or the error's text
	}{
		{map[string]string{}, "a1"},
		{map[string]string{"node-selector": "zone=b"}, "a3"},
		{map[string]string{"node-selector": "zone=b", "tolerations": "extra:NoSchedule"}, "a2"},
		{map[string]string{"node-selector": "zone=c"}, `its label zone is "a", not "c"`},
		{map[string]string{"agent-namespace": "none"}, "no node agent runs in namespace none (options.agent-namespace)"},
	} {
		tc.opts["agent-namespace"] = map[bool]string{true: tc.opts["agent-namespace"], false: "ag"}[tc.opts["agent-namespace"] != ""]
		o, err := parseOptions(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		b := &Backend{opts: o, cs: cs}
		p, err := b.layerAgent(context.Background())
		switch {
		case err != nil && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%v: %v, want %q", tc.opts, err, tc.want)
		case err == nil && p.Name != tc.want:
			t.Errorf("%v: agent %s, want %s", tc.opts, p.Name, tc.want)
		case err == nil && b.fs.node != p.Spec.NodeName:
			t.Errorf("%v: the layers' node is %q, the agent's %q", tc.opts, b.fs.node, p.Spec.NodeName)
		}
	}
}

// TestLayerSupport: the file-system faults act on the run's instances when
// an agent namespace is named, and on nothing else.
func TestLayerSupport(t *testing.T) {
	a := &adapter.Adapter{ID: "k", Backend: Name, Options: map[string]string{"agent-namespace": "ag"}}
	r, _ := backend.Lookup(Name)
	if why := r.Supports(a, backend.OnInstances, backend.Pod, experiment.FaultFSError); why != "" {
		t.Errorf("eio on an instance with an agent: %s", why)
	}
	if why := r.Supports(a, backend.OnTarget, backend.Pod, experiment.FaultFSError); !strings.Contains(why, "only the run's instances") {
		t.Errorf("eio on a pod target: %q", why)
	}
	a.Options = nil
	if why := r.Supports(a, backend.OnInstances, backend.Pod, experiment.FaultFsyncFail); !strings.Contains(why, "options.agent-namespace") {
		t.Errorf("fsync-fail without an agent namespace: %q", why)
	}
}
