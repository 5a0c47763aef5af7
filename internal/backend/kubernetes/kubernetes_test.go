package kubernetes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// testImage is the busybox image the test cluster has imported
// ($CHAOS_K8S_BUSYBOX_IMAGE from scripts/k8s/cluster.sh env), else the default.
func testImage() string {
	if img := os.Getenv("CHAOS_K8S_BUSYBOX_IMAGE"); img != "" {
		return img
	}
	return DefaultImage
}

// needCluster skips when no cluster answers, unless $CI is set: then the
// test command must have started one, and its absence fails.
func needCluster(t *testing.T) {
	t.Helper()
	o, _ := parseOptions(nil)
	cs, _, err := newClient(o, os.Environ())
	if err == nil {
		_, err = serverVersion(context.Background(), cs)
	}
	if err != nil {
		msg := fmt.Sprintf("no Kubernetes cluster (%v); start the test cluster: scripts/k8s/cluster.sh up && eval \"$(scripts/k8s/cluster.sh env)\"", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// newTestBackend opens a backend for one test, in a namespace of its own,
// swept and closed when the test ends.
func newTestBackend(t *testing.T, opts map[string]string, tweak func(*Backend)) *Backend {
	t.Helper()
	needCluster(t)
	o := map[string]string{"restart-policy": "OnFailure", "image-pull-policy": "Never"}
	for k, v := range opts {
		o[k] = v
	}
	a := &adapter.Adapter{ID: "k8s-test", Backend: Name, Options: o, Instance: &adapter.Instance{Image: testImage()}}
	run := backendtest.NewRun(t, a)
	run.Experiment = &experiment.Experiment{ID: "k8s-test"}
	bb, err := open(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	b := bb.(*Backend)
	if tweak != nil {
		tweak(b)
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Sweep(ctx); err != nil {
			t.Errorf("sweep: %v", err)
		}
		b.Close()
	})
	return b
}

func TestConformance(t *testing.T) {
	needCluster(t)
	backendtest.Run(t, backendtest.Harness{
		Image: testImage(),
		New:   func(t *testing.T) backend.Backend { return newTestBackend(t, nil, nil) },
		LoseEnds: func(t *testing.T) backend.Backend {
			return newTestBackend(t, nil, func(b *Backend) {
				// Lose every update that shows the main container ended;
				// the informer's resync is what brings it back.
				b.dropUpdate = func(old, p *corev1.Pod) bool {
					st := containerStatus(p, mainContainer)
					return st != nil && st.State.Terminated != nil
				}
			})
		},
		NewHandle: deploymentHandle,
		// A pod freezes through its cgroup on the harness's node (the test
		// cluster's only node).
		Unsupported: []string{experiment.FaultOutage},
		// kubelet restarts a container after 10 s, 20 s, 40 s of backoff.
		Patience: 3 * time.Minute,
	})
}

// deploymentHandle is a pod of a Deployment the run owns that prints a
// line every 50 ms; its logs, over every pod and container it had, count
// the ticks.
func deploymentHandle(t *testing.T) (backend.Handle, func() int) {
	b := newTestBackend(t, nil, nil)
	ctx := context.Background()
	replicas, yes, grace := int32(1), true, int64(2)
	sel := map[string]string{"app": "ticker"}
	podLabels := b.labels(sel)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "ticker", Labels: b.labels(nil)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{ShareProcessNamespace: &yes, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
					Name: "ticker", Image: testImage(), ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do echo .; sleep 0.05; done"},
				}}},
			},
		},
	}
	// The harness never makes a Deployment, so its client cannot: the test
	// makes it with client-go's clientset.
	cs, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(b.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tg, err := b.OpenTarget(ctx, "ticker", &adapter.Target{Type: adapter.TypePod, Lifecycle: "run", Labels: sel, HealthTimeout: adapter.Duration(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var hs []backend.Handle
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if hs, err = tg.Handles(ctx); err == nil && len(hs) == 1 {
			if err = hs[0].Ready(ctx); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ticker pod never became ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var mu sync.Mutex
	seen := map[string]int{} // lines per container id
	return hs[0], func() int {
		mu.Lock()
		defer mu.Unlock()
		pods, err := b.runPods(ctx, sel)
		if err == nil {
			for _, p := range pods {
				for _, st := range p.Status.ContainerStatuses {
					if st.ContainerID == "" || st.State.Running == nil {
						continue
					}
					raw, err := b.cs.Pods(b.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: st.Name}).DoRaw(ctx)
					if err == nil {
						seen[st.ContainerID] = max(seen[st.ContainerID], strings.Count(string(raw), "\n"))
					}
				}
			}
		}
		n := 0
		for _, v := range seen {
			n += v
		}
		return n
	}
}
