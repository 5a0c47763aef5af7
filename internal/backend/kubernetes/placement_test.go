package kubernetes

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// TestPlacementOptions: node-selector and tolerations reach the pod spec,
// as the kwok nodes of the test cluster need them.
func TestPlacementOptions(t *testing.T) {
	o, err := parseOptions(map[string]string{"node-selector": "type=kwok, zone=a",
		"tolerations": "kwok.x-k8s.io/node:NoSchedule,dedicated=chaos", "exec": "false"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.noExec {
		t.Error("exec: false did not turn exec off")
	}
	a := &adapter.Adapter{ID: "k", Backend: Name}
	b := &Backend{opts: o, run: backendtest.NewRun(t, a)}
	p := b.podSpec("p", "cm", "img", backend.InstanceSpec{Name: "w-0", Workload: "w"})
	if want := map[string]string{"type": "kwok", "zone": "a"}; !reflect.DeepEqual(p.Spec.NodeSelector, want) {
		t.Errorf("nodeSelector %v, want %v", p.Spec.NodeSelector, want)
	}
	want := []corev1.Toleration{
		{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "chaos"},
	}
	if !reflect.DeepEqual(p.Spec.Tolerations, want) {
		t.Errorf("tolerations %+v, want %+v", p.Spec.Tolerations, want)
	}
	for _, bad := range []map[string]string{{"node-selector": "type"}, {"tolerations": "k:Sometimes"}, {"tolerations": "=v"}, {"exec": "maybe"}} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	// Without exec only a kill acts on an instance.
	a.Options = map[string]string{"exec": "false", "restart-policy": "OnFailure"}
	if why := support(a, backend.OnInstances, backend.Pod, experiment.FaultKill); why != "" {
		t.Errorf("kill without exec: %s", why)
	}
	if why := support(a, backend.OnInstances, backend.Pod, experiment.FaultRestartInPlace); why == "" {
		t.Error("restart-in-place without exec was supported")
	}
}

// TestRunningWithoutContainerID: kwok reports a running container with no
// container id; the instance must still be Running (it stayed Created, and
// a wait for running never ended).
func TestRunningWithoutContainerID(t *testing.T) {
	var states []backend.State
	in := &instance{spec: backend.InstanceSpec{Name: "w-0", OnState: func(s backend.State, _ string) { states = append(states, s) }},
		uid: "u", done: make(chan struct{}), changed: make(chan struct{}), settled: map[string]bool{}, terminated: map[string]bool{}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	in.observe(p)
	in.observe(p.DeepCopy()) // a resync: no second start
	// Created comes first even when the watch is first (Create had not
	// reported it yet).
	if !reflect.DeepEqual(states, []backend.State{backend.Created, backend.Running}) {
		t.Fatalf("states %v, want [Created Running]", states)
	}
}
