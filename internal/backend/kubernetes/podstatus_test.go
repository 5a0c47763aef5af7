package kubernetes

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func podWith(phase corev1.PodPhase, sts ...corev1.ContainerStatus) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: sts}}
	for _, st := range sts {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: st.Name})
	}
	return p
}

var (
	creating = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	running  = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended    = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
)

func TestStatusCaughtUp(t *testing.T) {
	noStatus := podWith(corev1.PodPending)
	noStatus.Spec.Containers = []corev1.Container{{Name: "main"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no status yet", noStatus, false},
		{"creating", podWith(corev1.PodPending, corev1.ContainerStatus{Name: "main", State: creating}), false},
		{"collector running, main not yet", podWith(corev1.PodPending, corev1.ContainerStatus{Name: "main", State: creating}, corev1.ContainerStatus{Name: collectorContainer, State: running}), false},
		{"running", podWith(corev1.PodRunning, corev1.ContainerStatus{Name: "main", State: running}, corev1.ContainerStatus{Name: collectorContainer, State: running}), true},
		{"one ended, one running", podWith(corev1.PodRunning, corev1.ContainerStatus{Name: "main", State: ended}, corev1.ContainerStatus{Name: collectorContainer, State: running}), true},
		{"crash loop: waiting after it ran", podWith(corev1.PodRunning, corev1.ContainerStatus{Name: "main", State: creating, RestartCount: 3}), true},
		{"failed pod", podWith(corev1.PodFailed, corev1.ContainerStatus{Name: "main", State: creating}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusCaughtUp(tc.pod); got != tc.want {
				t.Errorf("statusCaughtUp: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAwaitStartedReadsAgain: a pod whose status has no word yet of its
// container started (the kubelet reports it a moment after, later on a
// loaded node) is read again until it has, so a node-level fault finds
// the container's processes; before, the agent's clock fault failed with
// "no process of its containers is on this machine" though the workload
// ran (TestClockOffsetThroughTheAgent, among parallel tests).
func TestAwaitStartedReadsAgain(t *testing.T) {
	lagging := podWith(corev1.PodPending, corev1.ContainerStatus{Name: "main", State: creating})
	reads := 0
	get := func(context.Context) (*corev1.Pod, error) {
		reads++
		if reads < 3 {
			return lagging, nil
		}
		return podWith(corev1.PodRunning, corev1.ContainerStatus{Name: "main", State: running, ContainerID: "containerd://0123456789abcdef"}), nil
	}
	p, err := AwaitStarted(context.Background(), lagging, get)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.ContainerStatuses[0].State.Running == nil || reads != 3 {
		t.Errorf("after %d reads the pod's status is %+v, want the running one of the third read", reads, p.Status.ContainerStatuses[0].State)
	}

	// Bounded by the caller's context: a container that never starts does
	// not hold the fault longer than the run allows.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	p, err = AwaitStarted(ctx, lagging, func(context.Context) (*corev1.Pod, error) { return lagging, nil })
	if err != nil || p != lagging {
		t.Errorf("AwaitStarted of a pod that never starts: %v, %v", p, err)
	}
	if took := time.Since(start); took > statusLag/2 {
		t.Errorf("it waited %v past its context's end", took)
	}
}
