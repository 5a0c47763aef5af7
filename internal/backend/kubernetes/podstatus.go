package kubernetes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// statusLag bounds how long a node-level fault waits for a pod's status
// to show its containers started. The kubelet reports a started
// container a moment after it starts (its relist runs every second, and
// the status write can wait seconds more on a loaded node), while the
// run already sees the workload running through its own output: read in
// between, the pod has no running container to find on the node.
const statusLag = 10 * time.Second

// statusLagPoll is how often the pod is read again meanwhile.
const statusLagPoll = 200 * time.Millisecond

// AwaitStarted returns p once its status shows every container started
// (running, or ended), reading it again with get; after statusLag, or
// once ctx ends, it returns the last pod read, and the fault finds what
// it finds. A container that is waiting after it ran (a crash loop) is
// not waited for: its status is not behind.
func AwaitStarted(ctx context.Context, p *corev1.Pod, get func(context.Context) (*corev1.Pod, error)) (*corev1.Pod, error) {
	deadline := time.Now().Add(statusLag)
	for !statusCaughtUp(p) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return p, nil
		case <-time.After(statusLagPoll):
		}
		q, err := get(ctx)
		if err != nil {
			return nil, err
		}
		p = q
	}
	return p, nil
}

// statusCaughtUp says whether p's status has word of every container of
// its spec having started.
func statusCaughtUp(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, c := range p.Spec.Containers {
		started := false
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == c.Name {
				started = st.State.Waiting == nil || st.RestartCount > 0 || st.LastTerminationState.Terminated != nil
			}
		}
		if !started {
			return false
		}
	}
	return true
}

// startedPodIn is podIn for a node-level fault: the pod once its status
// shows its containers started (AwaitStarted).
func (b *Backend) startedPodIn(ctx context.Context, sc scope, name string) (*corev1.Pod, error) {
	p, err := b.podIn(ctx, sc, name)
	if err != nil {
		return nil, err
	}
	return AwaitStarted(ctx, p, func(ctx context.Context) (*corev1.Pod, error) { return b.podIn(ctx, sc, name) })
}
