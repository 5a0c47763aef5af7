package kubernetes

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// An API server under load answers a create with a timeout and may have
// made the pod all the same (854 of 6,000 creations on the test cluster
// failed so, and their instances ended CreateFailed). The creation is
// tried again; the pod the first try made is taken when it is this run's
// and this instance's, and never when it is somebody else's.
func TestCreatePodAfterServerTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		made     bool   // the timed-out try made the pod
		instance string // the instance label of what is there
		wantErr  bool
	}{
		{name: "the timed-out try made it", made: true, instance: "w-0"},
		{name: "the timed-out try made nothing", made: false},
		{name: "another instance's pod holds the name", made: true, instance: "w-1", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &adapter.Adapter{ID: "k", Backend: Name}
			b := &Backend{run: backendtest.NewRun(t, a), ns: "ns", creates: make(chan struct{}, 1)}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns",
				Labels: map[string]string{LabelRun: b.run.ID, LabelInstance: "w-0"}}}
			cs := fake.NewClientset()
			tries := 0
			cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				if tries > 1 {
					return false, nil, nil // the tracker: AlreadyExists when it is there
				}
				if tc.made {
					made := pod.DeepCopy()
					made.Labels[LabelInstance] = tc.instance
					if err := cs.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), made, "ns"); err != nil {
						t.Fatal(err)
					}
				}
				return true, nil, apierrors.NewServerTimeout(corev1.Resource("pods"), "create", 1)
			})
			b.cs = fakeClient{CS: cs}
			got, err := b.createPod(context.Background(), pod)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("took a pod of another instance: %+v", got.Labels)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != "p" || tries != 2 {
				t.Errorf("got %q after %d tries, want p after 2", got.Name, tries)
			}
		})
	}
}

// The watch may deliver a pod Running before the call that created it has
// returned (kwok runs pods at once; a busy API server answers late). The
// engine must still see Created, then Running, and end on Running: in the
// other order a wait for running never ended (6,000 pods on kwok).
func TestStatesInOrderWhenTheWatchIsFirst(t *testing.T) {
	var got []string
	in := &instance{spec: backend.InstanceSpec{Name: "w-0", OnState: func(s backend.State, r string) {
		got = append(got, string(s)+"/"+r)
	}}, done: make(chan struct{}), changed: make(chan struct{}), settled: map[string]bool{}, terminated: map[string]bool{}}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	created := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}

	in.observe(running) // the watch
	// Create's own report, as Create makes it once the call returns.
	in.mu.Lock()
	in.uid = "u"
	in.reportCreated()
	in.mu.Unlock()
	in.flush()
	in.observe(created)

	want := []string{"Created/", "Running/Started"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
}
