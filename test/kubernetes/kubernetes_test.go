// Package kubernetes_test runs the real chaos binary against a real
// Kubernetes cluster (the project's test cluster, scripts/k8s/cluster.sh):
// the examples on pods, faults proven with what the API server says of the
// pods (restartCount, a new UID, replicas), fleet safety, the events file,
// and cleanup after the harness itself is killed.
package kubernetes_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/rundir"
)

var (
	chaosBin string
	examples string
	root     string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// waitingParallelism is how many of the package's parallel tests run at
// once unless -test.parallel says otherwise (Go's default is GOMAXPROCS,
// 2 on CI). Those tests spend their time waiting: for pods to start, for
// a lease to expire, for a run's own delays; the ones that measure CPU or
// timing, or sweep the whole cluster, stay serial (docs/test-cluster.md).
// Six: the parallel tests' times add up to about 480 s and the longest
// (TestSeedsGatewayScenario) takes about 60 s; six at a time ended in
// about 90 s with the machine's two cores 60-97% busy, so more would
// mostly compete for the CPU. Each starts one to four pods, plus an
// agent per node when it installs one.
const waitingParallelism = 6

func run(m *testing.M) int {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(waitingParallelism)); err != nil {
			panic(err)
		}
	}
	_, file, _, _ := runtime.Caller(0)
	root = filepath.Join(filepath.Dir(file), "..", "..")
	examples = filepath.Join(root, "examples")
	tmp, err := os.MkdirTemp("", "chaos-k8s-e2e-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	// The journals of this package's runs are its own: its chaos cleanup
	// with no run id (every run whose harness is gone) must not undo what
	// another package's killed run holds while its test still looks.
	os.Setenv(journalfile.StateEnv, filepath.Join(tmp, "state"))
	chaosBin = filepath.Join(tmp, "chaos")
	build := exec.Command("go", "build", "-o", chaosBin, "./cmd/chaos")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building chaos: %v\n%s", err, out)
		return 2
	}
	return m.Run()
}

// unique is prefix with a random suffix: a name (a namespace, an
// experiment's id) no other test of this process, nor of another one on
// the same cluster, uses at the same time.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// cluster returns a client of the test cluster; without one the test
// skips, unless $CI is set, where the test command must have started it.
func cluster(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	var cs *kubernetes.Clientset
	if err == nil {
		cfg.Timeout = 10 * time.Second
		if cs, err = kubernetes.NewForConfig(cfg); err == nil {
			_, err = cs.Discovery().ServerVersion()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("no Kubernetes cluster (%v): scripts/k8s/cluster.sh up && eval \"$(scripts/k8s/cluster.sh env)\"", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return cs
}

type result struct {
	code           int
	stdout, stderr string
	dir            string
}

// env is this process's environment with the cluster's kubectl on PATH.
func env(runs string) []string {
	e := append(os.Environ(), "CHAOS_RUNS_DIR="+runs)
	if bin := os.Getenv("CHAOS_K8S_BIN"); bin != "" {
		e = append(e, "PATH="+bin+":"+os.Getenv("PATH"))
	}
	return e
}

func chaos(t *testing.T, runs string, args ...string) result {
	t.Helper()
	cmd := exec.Command(chaosBin, args...)
	cmd.Env = env(runs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	r.dir = lines[len(lines)-1]
	return r
}

func verdictOf(t testing.TB, dir string) string {
	t.Helper()
	var v rundir.Verdict
	if err := rundir.ReadJSON(filepath.Join(dir, "verdict.json"), &v); err != nil {
		t.Fatalf("%v\n", err)
	}
	return v.Verdict
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestExamplesGiveTheSameVerdicts runs examples unchanged on local and on
// kubernetes: only --adapter differs, and so must nothing else. A freeze
// (freeze-counters) freezes the pod's cgroup (it was n/a before).
func TestExamplesGiveTheSameVerdicts(t *testing.T) {
	t.Parallel()
	cluster(t)
	runs := t.TempDir()
	for _, name := range []string{"hello-world", "smoke", "known-issue-xfail", "flaky-race", "freeze-counters"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(examples, name+".yaml")
			local := chaos(t, runs, "run", "--plain", "--seed", "7", "--adapter", "local", file)
			k8s := chaos(t, runs, "run", "--plain", "--seed", "7", "--adapter", "kubernetes", file)
			if k8s.code != local.code {
				t.Fatalf("exit %d on kubernetes, %d on local\n%s\n%s", k8s.code, local.code, k8s.stdout, lastLines(k8s.stderr, 20))
			}
			if lv, kv := verdictOf(t, local.dir), verdictOf(t, k8s.dir); lv != kv {
				t.Fatalf("verdict %s on kubernetes, %s on local\n%s", kv, lv, k8s.stdout)
			}
			if !strings.Contains(k8s.stdout, "ok    adapter/no-leaked-pods") || !strings.Contains(k8s.stdout, "ok    preflight/kubernetes-api-reachable") {
				t.Fatalf("the kubernetes checks are missing:\n%s", k8s.stdout)
			}
			var m rundir.Manifest
			if err := rundir.ReadJSON(filepath.Join(k8s.dir, "manifest.json"), &m); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(m.Backend["kubernetes_server"], "v1.") {
				t.Fatalf("manifest.json lacks the server version: %+v", m.Backend)
			}
			ev, err := os.ReadFile(filepath.Join(k8s.dir, "system", "watch", "k8s-events.jsonl"))
			if err != nil || !strings.Contains(string(ev), `"reason":"Started"`) {
				t.Fatalf("k8s-events.jsonl has no Started event: %v\n%s", err, ev)
			}
		})
	}
}

// write writes a file in the test's directory.
func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRestartInPlaceIsAContainerRestart: a restart-in-place of an instance
// is kubelet restarting the pod's main container, seen from the API: the
// same pod UID, restartCount up by one; the instance's output continues.
func TestRestartInPlaceIsAContainerRestart(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	runs := t.TempDir()
	id := unique("k8s-restart-proof")
	x := write(t, "x.yaml", `apiVersion: chaos/v1alpha1
id: `+id+`
workloads:
  - name: w
    run: |
      n=$(cat n 2>/dev/null || echo 0); echo $((n + 1)) > n
      [ "$(cat n)" -ge 2 ] && exit 0
      sleep 60
    checks:
      - {name: restarted-once, kind: shell, run: 'test "$(cat n)" = 2 && test "$(wc -l < .chaos/attempts)" -eq 2'}
operations:
  - {name: bounce, uses: restart-in-place, target: {workload: w}}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, {delay: 1s}, bounce]}]
`)
	done := make(chan result, 1)
	go func() {
		done <- chaos(t, runs, "run", "--plain", "--adapter", filepath.Join(examples, "adapters", "kubernetes-restartable.yaml"), x)
	}()
	var uid string
	var restarts int32
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: "chaos.experiment=" + id})
		if err == nil {
			for _, p := range pods.Items {
				if uid == "" {
					uid = string(p.UID)
				}
				if string(p.UID) != uid {
					t.Fatalf("a second pod %s: the restart replaced the pod", p.Name)
				}
				for _, st := range p.Status.ContainerStatuses {
					if st.Name == "main" {
						restarts = max(restarts, st.RestartCount)
					}
				}
			}
		}
		select {
		case r := <-done:
			if r.code != 0 || restarts != 1 {
				t.Fatalf("exit %d, restartCount seen %d (want 1)\n%s\n%s", r.code, restarts, r.stdout, lastLines(r.stderr, 20))
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("the run did not end")
}

// gatewayRun runs an experiment on the kubernetes-gateway adapter in the
// background, returning its result channel.
func gatewayRun(t *testing.T, runs, src string, extra ...string) chan result {
	x := write(t, "x.yaml", src)
	done := make(chan result, 1)
	args := append([]string{"run", "--plain", "--adapter", filepath.Join(examples, "adapters", "kubernetes-gateway.yaml")}, extra...)
	go func() { done <- chaos(t, runs, append(args, x)...) }()
	return done
}

// TestPodTargetFaults: a kill of a pod target deletes the pod and its
// Deployment replaces it (a new UID); an outage scales the Deployment to
// zero for its duration and back. Seen from the API, not the harness.
func TestPodTargetFaults(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	runs := t.TempDir()
	done := gatewayRun(t, runs, `apiVersion: chaos/v1alpha1
id: k8s-gateway-proof
workloads:
  - {name: w, run: "sleep 12"}
operations:
  - {name: kill-gw, uses: kill, target: gateway}
  - {name: gw-down, uses: outage, target: gateway, duration: 3s}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, kill-gw, {delay: 2s}, gw-down]}]
`)
	uids := map[string]bool{}
	sawZero := false
	ctx := context.Background()
	runID := ""
	for {
		select {
		case r := <-done:
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
			}
			if len(uids) < 3 || !sawZero {
				t.Fatalf("saw %d gateway pods (want the first, its kill's replacement and the outage's), replicas 0: %v", len(uids), sawZero)
			}
			events, _ := os.ReadFile(filepath.Join(r.dir, "timeline.jsonl"))
			if !strings.Contains(string(events), `"event": "controller.scaled"`) || !strings.Contains(string(events), `"event": "target.restarted"`) {
				t.Fatalf("the timeline lacks controller.scaled or target.restarted")
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		// Only this run's gateway: other tests' runs of the same adapter
		// have theirs.
		if runID == "" {
			if m, _ := filepath.Glob(filepath.Join(runs, "k8s-gateway-proof", "*", "timeline.jsonl")); len(m) == 1 {
				runID = filepath.Base(filepath.Dir(m[0]))
			}
			continue
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=gateway,chaos.run=" + runID})
		if err == nil {
			for _, p := range pods.Items {
				uids[string(p.UID)] = true
			}
		}
		ds, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "chaos.run=" + runID})
		if err == nil {
			for _, d := range ds.Items {
				if d.Name == "gateway" && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
					sawZero = true
				}
			}
		}
	}
}

// TestNeverTouchesWhatItDidNotCreate puts a pod that looks like the
// gateway (its labels, without this run's chaos.run) in the namespace the
// run uses; a kill of every gateway pod leaves it alone.
func TestNeverTouchesWhatItDidNotCreate(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	ctx := context.Background()
	ns := unique("chaos-lookalike")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	grace := int64(1)
	img := os.Getenv("CHAOS_K8S_BUSYBOX_IMAGE")
	if img == "" {
		img = "chaos/busybox:latest"
	}
	look := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lookalike", Labels: map[string]string{"app": "gateway"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: img, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "600"}}}}}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, look, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The adapter with the test's namespace.
	data, err := os.ReadFile(filepath.Join(examples, "adapters", "kubernetes-gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	adapterFile := write(t, "gw.yaml", strings.Replace(string(data), "backend: kubernetes\n", "backend: kubernetes\noptions: {namespace: "+ns+"}\n", 1))
	x := write(t, "x.yaml", `apiVersion: chaos/v1alpha1
id: k8s-lookalike
workloads:
  - {name: w, run: "sleep 4"}
operations:
  - {name: kill-all, uses: kill, target: gateway, select: all}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, kill-all]}]
`)
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", adapterFile, x)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "lookalike", metav1.GetOptions{})
	if err != nil || p.UID != created.UID || p.DeletionTimestamp != nil {
		t.Fatalf("the look-alike pod was touched: %v %+v", err, p)
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.RestartCount != 0 {
			t.Fatalf("the look-alike's container restarted %d times", st.RestartCount)
		}
	}
	if !strings.Contains(r.stdout, `ok    adapter/gateway-back`) {
		t.Fatalf("gateway-back:\n%s", r.stdout)
	}
}

// TestCleanupAfterTheHarnessIsKilled SIGKILLs chaos mid-run; chaos cleanup
// then removes the run's namespace and pods.
func TestCleanupAfterTheHarnessIsKilled(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	runs := t.TempDir()
	id := unique("k8s-killed-harness")
	x := write(t, "x.yaml", "apiVersion: chaos/v1alpha1\nid: "+id+"\nworkloads:\n  - {name: w, instances: 2, run: \"sleep 120\"}\nflow: w\n")
	cmd := exec.Command(chaosBin, "run", "--plain", "--adapter", "kubernetes", x)
	cmd.Env = env(runs)
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ns string
	deadline := time.Now().Add(60 * time.Second)
	for ns == "" && time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "chaos.experiment=" + id})
		if err == nil && len(pods.Items) == 2 {
			ns = pods.Items[0].Namespace
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ns == "" {
		cmd.Process.Kill()
		t.Fatalf("the pods never appeared\n%s", out.String())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	dirs, _ := filepath.Glob(filepath.Join(runs, id, "*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	r := chaos(t, runs, "cleanup", "--backend", "kubernetes", dirs[0])
	if r.code != 0 || !strings.Contains(r.stdout, "deleted namespace "+ns) {
		t.Fatalf("cleanup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	deadline = time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("namespace %s still there a minute after cleanup", ns)
}
