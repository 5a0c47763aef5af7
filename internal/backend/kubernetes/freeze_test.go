package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/cgroup"
)

// fakePodCgroup makes, in the cgroup v2 hierarchy, what kubelet makes for a
// pod (a group named pod<uid>, one per container below it: n of them) and
// starts in each container's group a process that appends a line to a file
// every 20 ms. It returns the container ids and the files.
func fakePodCgroup(t *testing.T, uid string, n int) (cids, files []string) {
	t.Helper()
	mnt, _, err := cgroup.FindMount()
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("not root")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a pod's freeze cannot be proven here (%v), and CI is set", err)
		}
		t.Skipf("a pod's freeze cannot be proven here: %v", err)
	}
	pod := filepath.Join(mnt, "chaos-test-pod"+uid)
	for i := 0; i < n; i++ {
		cid := fmt.Sprintf("%060x%04d", time.Now().UnixNano(), i)
		ctr := filepath.Join(pod, cid)
		if err := os.MkdirAll(ctr, 0o755); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "ticks")
		cmd := exec.Command("/bin/sh", "-c", `while :; do echo x >> "$1"; sleep 0.02; done`, "ticker", file)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = os.WriteFile(filepath.Join(ctr, "cgroup.freeze"), []byte("0"), 0)
			_ = os.WriteFile(filepath.Join(pod, "cgroup.freeze"), []byte("0"), 0)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			for i := 0; i < 100 && os.Remove(ctr) != nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
			_ = os.Remove(pod) // the last container's cleanup removes it
		})
		if err := os.WriteFile(filepath.Join(ctr, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		cids, files = append(cids, cid), append(files, file)
	}
	return cids, files
}

// growing says whether the file grows within 300 ms.
func growing(t *testing.T, file string) bool {
	t.Helper()
	a, _ := os.ReadFile(file)
	time.Sleep(300 * time.Millisecond)
	b, _ := os.ReadFile(file)
	return len(b) > len(a)
}

// A freeze stops every process of the pod's containers, seen from outside
// (the file it writes stops growing), but the harness's collector (the
// output is read and processes signalled through it, by exec), and a thaw
// starts them again; an external
// pod is annotated with the run that froze it first, and chaos cleanup after
// the harness is gone thaws it and removes the annotations.
func TestFreezeAPod(t *testing.T) {
	for _, external := range []bool{false, true} {
		t.Run(fmt.Sprintf("external=%v", external), func(t *testing.T) {
			uid := fmt.Sprintf("%d-aaaa-bbbb", time.Now().UnixNano())
			cids, files := fakePodCgroup(t, uid, 2)
			file, collected := files[0], files[1]
			spec := &adapter.Target{Type: adapter.TypePod, Lifecycle: "run", Labels: map[string]string{"app": "gw"}}
			if external {
				spec.Lifecycle = "external"
			}
			a := &adapter.Adapter{ID: "k", Backend: Name, Targets: adapter.Targets{Named: map[string]*adapter.Target{"gw": spec}}}
			run := backendtest.NewRun(t, a)
			labels := map[string]string{"app": "gw", LabelRun: run.ID}
			ann := map[string]string{}
			if external {
				labels, ann = map[string]string{"app": "gw"}, map[string]string{ConsentKey: "true"}
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw-0", UID: types.UID(uid), Labels: labels, Annotations: ann},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", ContainerID: "containerd://" + cids[0],
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
					{Name: collectorContainer, ContainerID: "containerd://" + cids[1],
						State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
			cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, p)
			b := &Backend{run: run, ns: "ns", cs: fakeClient{CS: cs}, owner: map[string]string{}}
			o := backend.CurrentOwner()
			if external {
				// A harness that is gone, as chaos cleanup finds it.
				b.owner = map[string]string{AnnotationPid: "999999999", AnnotationPidStart: "1", AnnotationPidNS: o.PidNS, AnnotationHost: o.Host}
			}
			b.opts.namespace = "ns"
			tgt, err := b.OpenTarget(context.Background(), "gw", spec)
			if err != nil {
				t.Fatal(err)
			}
			hs, err := tgt.Handles(context.Background())
			if err != nil || len(hs) != 1 {
				t.Fatalf("%d handles: %v", len(hs), err)
			}
			if !growing(t, file) {
				t.Fatal("the pod's process does not run before the freeze")
			}
			if err := hs[0].Freeze(context.Background()); err != nil {
				t.Fatal(err)
			}
			if growing(t, file) {
				t.Fatal("the pod's process still runs after the freeze")
			}
			if !growing(t, collected) {
				t.Fatal("the harness's collector was frozen with the pod: exec into it would wait for the thaw")
			}
			got, _ := cs.CoreV1().Pods("ns").Get(context.Background(), "gw-0", metav1.GetOptions{})
			if external != (got.Annotations[AnnotationFrozenBy] == run.ID) {
				t.Fatalf("annotations after the freeze: %v", got.Annotations)
			}
			if !external {
				if err := hs[0].Thaw(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				var found []string
				if err := cleanupWith(context.Background(), fakeClient{CS: cs}, backend.Cleanup{Found: func(s string) { found = append(found, s) }}); err != nil {
					t.Fatal(err)
				}
				if strings.Join(found, ";") != "thawed pod ns/gw-0" {
					t.Fatalf("cleanup: %q", found)
				}
				got, _ := cs.CoreV1().Pods("ns").Get(context.Background(), "gw-0", metav1.GetOptions{})
				if got.Annotations[AnnotationFrozenBy] != "" || got.Annotations[AnnotationPid] != "" {
					t.Fatalf("annotations after cleanup: %v", got.Annotations)
				}
			}
			if !growing(t, file) {
				t.Fatal("the pod's process does not run again after the thaw")
			}
		})
	}
}
