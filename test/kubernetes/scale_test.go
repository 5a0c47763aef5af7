package kubernetes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPodsAtScale is the Kubernetes issue's scale benchmark: one chaos
// run makes a workload of $CHAOS_K8S_BENCH_PODS instances (pods on the
// test cluster's kwok nodes: scripts/k8s/cluster.sh kwok 100), waits for
// all of them to be Running and kills $CHAOS_K8S_BENCH_PERCENT of them
// (10 unless set; the 10%, chosen at random among the pods the
// workload's labels find). It fails on any lost event (an instance without
// its Running state, a killed one without its Killed state, one left
// without its end) and reports the figures of that kill; a second kill then
// ends the rest, which the cleanup figure includes. It reports:
// seconds to all Running, the kill's first-to-last spread and its
// operation time, the harness's peak RSS, the events recorded, and the
// cleanup (the last kill to the namespace gone). Without the variable it
// skips; it never asserts a time.
//
//	CHAOS_K8S_BENCH_PODS=6000 go test ./test/kubernetes -run '^$' -bench PodsAtScale -benchtime 1x -timeout 60m
func BenchmarkPodsAtScale(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("CHAOS_K8S_BENCH_PODS"))
	if n <= 0 {
		b.Skip("set CHAOS_K8S_BENCH_PODS=N (and start kwok: scripts/k8s/cluster.sh kwok 100)")
	}
	cs := cluster(b)
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil || len(nodes.Items) == 0 {
		b.Fatalf("no kwok nodes (%v): scripts/k8s/cluster.sh kwok 100", err)
	}
	percent, _ := strconv.ParseFloat(envOr("CHAOS_K8S_BENCH_PERCENT", "10"), 64)
	if percent <= 0 || percent > 100 {
		b.Fatalf("CHAOS_K8S_BENCH_PERCENT=%v: want above 0 and at most 100", percent)
	}
	selected := int(math.Ceil(float64(n) * percent / 100))
	dir := b.TempDir()
	adapter := filepath.Join(dir, "kwok.yaml")
	must(b, os.WriteFile(adapter, []byte(`apiVersion: chaos/v1alpha1
id: kubernetes-kwok
title: Pods on kwok's simulated nodes
backend: kubernetes
instance: {image: chaos/busybox:latest}
options:
  node-selector: type=kwok
  tolerations: kwok.x-k8s.io/node:NoSchedule
  exec: "false"
  qps: "`+envOr("CHAOS_K8S_BENCH_QPS", "500")+`"
  burst: "`+envOr("CHAOS_K8S_BENCH_BURST", "1000")+`"
`), 0o644))
	exp := filepath.Join(dir, "scale.yaml")
	must(b, os.WriteFile(exp, []byte(fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: k8s-scale
title: Kill a share of the pods of a large workload
hypothesis: Every selected pod is killed and every state is recorded.
timeout: 60m
workloads:
  - {name: w, instances: %d, run: "sleep 3600"}
operations:
  - {name: kill-some, uses: kill, target: {workload: w}, select: {percent: %v}}
  - {name: kill-rest, uses: kill, target: {workload: w}, select: all}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running, timeout: 50m}}, kill-some, kill-rest]}]
`, n, percent)), 0o644))

	for i := 0; i < b.N; i++ {
		runs := filepath.Join(dir, fmt.Sprint("runs-", i))
		cmd := exec.Command(chaosBin, "run", "--plain", "--adapter", adapter, exp)
		cmd.Env = env(runs)
		var out strings.Builder
		cmd.Stdout = &out
		errf, _ := os.Create(filepath.Join(dir, "stderr"))
		cmd.Stderr = errf
		b.ResetTimer()
		err := cmd.Run()
		exited := time.Now()
		errf.Close()
		if ee, ok := err.(*exec.ExitError); !ok && err != nil {
			b.Fatal(err)
		} else if ok && ee.ExitCode() != 0 {
			stderr, _ := os.ReadFile(filepath.Join(dir, "stderr"))
			b.Logf("chaos run exit %d\n%s\n%s", ee.ExitCode(), out.String(), lastLines(string(stderr), 30))
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		run := lines[len(lines)-1]
		tl := readTimeline(b, filepath.Join(run, "timeline.jsonl"))

		// Every instance: one Running, then its end: Failed
		// Killed(SIGKILL) for the selected, the deletion at cleanup for
		// the others.
		running, killed, ended, victims := map[string]float64{}, map[string]float64{}, map[string]bool{}, map[string]bool{}
		var ns string
		var flowStart, killStart, killEnd, runEnd float64
		var opErr any
		for _, e := range tl {
			t, _ := e["t"].(float64)
			switch e["event"] {
			case "namespace.created":
				ns, _ = e["namespace"].(string)
			case "node.started":
				if e["node"] == "flow" && flowStart == 0 {
					flowStart = t
				}
			case "operation.started":
				if e["operation"] != "kill-some" {
					continue
				}
				killStart = t
				for _, v := range e["instances"].([]any) {
					victims[v.(string)] = true
				}
			case "operation.finished":
				if e["operation"] != "kill-some" {
					if e["error"] != nil {
						b.Errorf("%s: %v", e["operation"], e["error"])
					}
					continue
				}
				killEnd, opErr = t, e["error"]
			case "run.finished":
				runEnd = t
			case "instance.state":
				in, _ := e["instance"].(string)
				switch {
				case e["state"] == "Running":
					if _, dup := running[in]; dup {
						b.Errorf("%s: Running twice", in)
					}
					running[in] = t
				case e["state"] == "Failed" && e["reason"] == "Killed(SIGKILL)" && victims[in] && killEnd == 0:
					killed[in] = t
					ended[in] = true
				case e["state"] == "Failed" || e["state"] == "Succeeded":
					ended[in] = true
				}
			}
		}
		var lost []string
		for j := 0; j < n; j++ {
			in := fmt.Sprint("w-", j)
			if _, ok := running[in]; !ok {
				lost = append(lost, in+" never Running")
			}
			if !ended[in] {
				lost = append(lost, in+" never ended")
			}
		}
		if len(victims) != selected || len(killed) != selected {
			b.Errorf("%d instances selected and %d of them Killed by the operation, want %d (%v%% of %d)", len(victims), len(killed), selected, percent, n)
		}
		if len(lost) > 0 {
			b.Errorf("LOST EVENTS in %s: %d, first: %v", run, len(lost), lost[:min(len(lost), 10)])
		}
		if opErr != nil {
			b.Errorf("the kill's operation.finished has an error: %v", opErr)
		}
		if v := verdictOf(b, run); v != "PASS" {
			b.Errorf("verdict %s", v)
		}
		// The run's namespace goes at its end; cleanup is over when it is
		// gone.
		for ns != "" {
			_, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Since(exited) > 10*time.Minute {
				b.Errorf("namespace %s still there 10 minutes after the run", ns)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		gone := time.Since(exited).Seconds()
		b.StopTimer()
		lastRunning, firstKill, lastKill := 0.0, 1e18, 0.0
		for _, t := range running {
			lastRunning = max(lastRunning, t)
		}
		for _, t := range killed {
			firstKill, lastKill = min(firstKill, t), max(lastKill, t)
		}
		events := len(tl)
		k8sEvents := countLines(filepath.Join(run, "system", "watch", "k8s-events.jsonl"))
		b.ReportMetric(lastRunning-flowStart, "s-to-all-running")
		b.ReportMetric(lastKill-firstKill, "s-kill-first-to-last")
		b.ReportMetric(killEnd-killStart, "s-kill-op")
		b.ReportMetric(runEnd-lastKill+gone, "s-cleanup")
		b.ReportMetric(float64(rss)/1024, "MB-harness-rss")
		b.ReportMetric(float64(events), "timeline-events")
		b.ReportMetric(float64(k8sEvents), "k8s-events")
		b.ReportMetric(float64(len(running)+len(ended)), "states-seen")
		b.Logf("N=%d: all Running %.1f s after the flow started; kill of %d %.1f s first to last (operation %.1f s); the rest killed and cleaned up %.1f s; RSS %d MB; %d timeline events, %d k8s events, %d of %d Running, %d of %d Killed and %d of %d ended states",
			n, lastRunning-flowStart, selected, lastKill-firstKill, killEnd-killStart, runEnd-lastKill+gone, rss/1024, events, k8sEvents, len(running), n, len(killed), selected, len(ended), n)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func readTimeline(b *testing.B, file string) []map[string]any {
	b.Helper()
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			b.Fatalf("%s: %v", file, err)
		}
		out = append(out, m)
	}
	return out
}

func countLines(file string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}
