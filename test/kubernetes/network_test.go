package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kbackend "github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"
)

// timelineEvent polls dir's timeline for an event with these fields, until
// limit or the run's end.
func timelineEvent(t *testing.T, dir, name string, want map[string]string, limit time.Duration, done <-chan result) map[string]any {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if e := netfaulttest.FindEvent(dir, name, want); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s %v within %s", name, want, limit)
		}
		select {
		case r := <-done:
			t.Fatalf("chaos exited %d before %s %v\n%s", r.code, name, want, lastLines(r.stderr, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runningPod waits for the experiment's pod of an instance to run and
// returns its IP and the host pid of its main container (found by the
// container id in /proc/<pid>/cgroup).
func runningPod(t *testing.T, cs kubernetes.Interface, exp, instance string) (string, int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: "chaos.experiment=" + exp + ",chaos.instance=" + instance})
		if err == nil && len(pods.Items) == 1 {
			p := pods.Items[0]
			var st *corev1.ContainerStatus
			for i := range p.Status.ContainerStatuses {
				if p.Status.ContainerStatuses[i].Name == "main" {
					st = &p.Status.ContainerStatuses[i]
				}
			}
			if st != nil && st.State.Running != nil && p.Status.PodIP != "" {
				_, id, _ := strings.Cut(st.ContainerID, "://")
				if pid := pidOfContainer(id); pid > 0 {
					return p.Status.PodIP, pid
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no running pod of %s", instance)
	return "", 0
}

// pidOfContainer is the host pid of container id's init, as the harness
// finds it (kbackend.HostPidOf), or 0.
func pidOfContainer(id string) int {
	if id == "" {
		return 0
	}
	return kbackend.HostPidOf([]string{id})
}

// containerRuns says whether a process of container id runs cmdline
// (its arguments, each ended by a NUL).
func containerRuns(id, cmdline string) bool {
	if id == "" {
		return false
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if c, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); string(c) != cmdline {
			continue
		}
		if b, _ := os.ReadFile("/proc/" + e.Name() + "/cgroup"); bytes.Contains(b, []byte(id)) {
			return true
		}
	}
	return false
}

// k8sRun is a chaos run on kubernetes, for netfaulttest.
type k8sRun struct {
	t    *testing.T
	cs   kubernetes.Interface
	dir  string
	done chan result
}

func (k *k8sRun) Await(name string, want map[string]string) map[string]any {
	return timelineEvent(k.t, k.dir, name, want, 2*time.Minute, k.done)
}

func (k *k8sRun) Addr(instance string) string {
	ip, _ := runningPod(k.t, k.cs, "net-faults-k8s", instance)
	return ip
}

func (k *k8sRun) Pid(instance string) int {
	_, pid := runningPod(k.t, k.cs, "net-faults-k8s", instance)
	return pid
}

// TestNetworkFaultsOnKubernetes: the six network faults on pods, each
// measured from outside (netfaulttest.Prove): from the node (this
// machine), or from inside a pod's network namespace.
// Serial: it bounds round-trip times, download rates and connection
// times, which other tests' load would distort.
func TestNetworkFaultsOnKubernetes(t *testing.T) {
	cs := cluster(t)
	if os.Geteuid() != 0 {
		t.Skip("the network faults need root")
	}
	runs := t.TempDir()
	x := write(t, "net.yaml", netfaulttest.Experiment("net-faults-k8s", "kubernetes", "httpd", "8080"))
	done := make(chan result, 1)
	go func() { done <- chaos(t, runs, "run", "--plain", "--adapter", "kubernetes", x) }()
	var dir string
	for deadline := time.Now().Add(30 * time.Second); dir == ""; {
		if m, _ := filepath.Glob(filepath.Join(runs, "net-faults-k8s", "*", "timeline.jsonl")); len(m) == 1 {
			dir = filepath.Dir(m[0])
		} else if time.Now().After(deadline) {
			t.Fatal("no run directory")
		}
		time.Sleep(50 * time.Millisecond)
	}
	netfaulttest.Prove(t, &k8sRun{t: t, cs: cs, dir: dir, done: done})
	r := <-done
	if r.code != 0 {
		t.Fatalf("chaos run exited %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	var c struct {
		Left  int   `json:"left"`
		Rules []any `json:"rules"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "system", "network.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Left != 0 || len(c.Rules) != 7 {
		t.Errorf("system/network.json: left %d, %d rules (%v)", c.Left, len(c.Rules), err)
	}
}
