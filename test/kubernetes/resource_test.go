package kubernetes_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// throttled is nr_throttled of the cpu.stat of pid's cpu group, or -1.
func throttled(pid int) int64 {
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return -1
	}
	place, err := cgroup.PlaceOfPid(h, pid)
	if err != nil {
		return -1
	}
	dir, _ := place.Dir(cgroup.CPU)
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "nr_throttled" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// TestResourceFaultsOnPods: the resource faults on instance pods (on the
// harness's node), proven from outside the harness: a CPU limit throttles
// the spinning container (nr_throttled of its cpu group, read from the
// host, rises while it is held, and never before), a task limit makes the
// pod's own fork fail with EAGAIN (its log says so) and forks work again
// after the revert, and a hard memory limit gets the allocating container
// OOM-killed (resource.oom-kill in the timeline).
func TestResourceFaultsOnPods(t *testing.T) {
	cs := cluster(t)
	runs := t.TempDir()
	x := write(t, "res.yaml", `apiVersion: chaos/v1alpha1
id: k8s-resource-proof
timeout: 3m
workloads:
  - name: spin
    run: |
      end=$(( $(date +%s) + 14 )); while [ "$(date +%s)" -lt "$end" ]; do :; done
  - name: forks
    # A shell whose fork fails dies: the forks are a subshell's, and the
    # script waits with a builtin (read -t on a FIFO) while the limit may
    # still hold.
    run: |
      mkfifo /tmp/tick.$$
      sleep 5
      ( for i in $(seq 30); do sleep 1 & done; wait ) 2> during.err
      read -t 6 x <> /tmp/tick.$$
      ( sleep 0 ) && echo forked > after
    checks:
      - {name: fork-failed-while-held, kind: shell, run: 'grep -q "Resource temporarily unavailable\|can.t fork" during.err'}
      - {name: fork-works-after, kind: shell, run: 'test "$(cat after)" = forked'}
  - name: hog
    run: |
      sleep 3
      end=$(( $(date +%s) + 12 ))
      while [ "$(date +%s)" -lt "$end" ]; do head -c 268435456 /dev/zero | tail > /dev/null; sleep 0.2; done
      true
operations:
  - {name: cpu, uses: cpu-limit, target: {workload: spin}, resource: {cpu: 20%}, duration: 6s}
  - {name: tasks, uses: task-limit, target: {workload: forks}, resource: {tasks: 8}, duration: 4s}
  - {name: oom, uses: memory-limit, target: {workload: hog}, resource: {memory: 32MiB}, duration: 6s}
flow:
  parallel:
    - spin
    - forks
    - hog
    - serial:
        - {wait: {workload: spin, condition: running}}
        - {wait: {workload: forks, condition: running}}
        - {wait: {workload: hog, condition: running}}
        - {delay: 3s}
        - parallel: [cpu, tasks, oom]
`)
	done := make(chan result, 1)
	go func() {
		done <- chaos(t, runs, "run", "--plain", "--adapter", filepath.Join(examples, "adapters", "kubernetes-restartable.yaml"), x)
	}()
	first, most := int64(-1), int64(-1)
	ctx := context.Background()
	for {
		select {
		case r := <-done:
			if r.code != 0 {
				t.Fatalf("exit %d, want PASS\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
			}
			if first != 0 || most <= 0 {
				t.Fatalf("nr_throttled of the spinning container: %d when first read, %d at most; want 0, then more", first, most)
			}
			tl, _ := os.ReadFile(filepath.Join(r.dir, "timeline.jsonl"))
			if !strings.Contains(string(tl), `"event": "resource.oom-kill"`) {
				t.Fatalf("no resource.oom-kill in the timeline")
			}
			t.Logf("nr_throttled rose to %d", most)
			return
		case <-time.After(200 * time.Millisecond):
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "chaos.experiment=k8s-resource-proof"})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if p.Labels["chaos.workload"] != "spin" {
				continue
			}
			for _, st := range p.Status.ContainerStatuses {
				if st.Name != "main" || st.State.Running == nil {
					continue
				}
				_, id, _ := strings.Cut(st.ContainerID, "://")
				if pid := pidOfContainer(id); pid != 0 {
					n := throttled(pid)
					if first < 0 {
						first = n
					}
					most = max(most, n)
				}
			}
		}
	}
}
