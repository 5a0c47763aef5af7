package kubernetes_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend/docker"
)

// mainexitImage builds an image FROM scratch holding busybox and
// internal/cgroup/testdata/mainexit.c compiled statically (its main thread
// exits once a worker thread runs, so the thread-group leader is a zombie
// while the process lives, as Go servers and JVMs can do), and imports it
// into the test cluster's first node's containerd (where the run's pods
// go): there is no registry. Docker builds it; a missing gcc, Docker or
// ctr fails under CI.
func mainexitImage(t *testing.T) string {
	t.Helper()
	need := func(err error, what string) {
		if err == nil {
			return
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v", what, err)
		}
		t.Skipf("%s: %v", what, err)
	}
	gcc, err := exec.LookPath("gcc")
	need(err, "needs gcc")
	_, err = exec.LookPath("docker")
	need(err, "needs docker")
	ctr, err := exec.LookPath("ctr")
	if bin := os.Getenv("CHAOS_K8S_BIN"); err != nil && bin != "" {
		ctr, err = exec.LookPath(filepath.Join(bin, "ctr"))
	}
	need(err, "needs ctr (containerd's client)")
	sock := os.Getenv("CHAOS_K8S_CONTAINERD_ADDRESS")
	if sock == "" {
		need(fmt.Errorf("$CHAOS_K8S_CONTAINERD_ADDRESS is empty"), "needs the test cluster's containerd (eval \"$(scripts/k8s/cluster.sh env)\")")
	}
	dir := t.TempDir()
	if out, err := exec.Command(gcc, "-static", "-O2", "-Wall", "-pthread", "-o", filepath.Join(dir, "mainexit"),
		filepath.Join(root, "internal", "cgroup", "testdata", "mainexit.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static mainexit.c (needs libc6-dev): %v\n%s", err, out)
	}
	bb, err := os.ReadFile(docker.BusyboxPath)
	need(err, "needs busybox-static")
	os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(docker.Dockerfile+"COPY mainexit /bin/mainexit\n"), 0o644)
	ref := fmt.Sprintf("docker.io/chaos-test/mainexit:%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "build", "-q", "-t", ref, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	defer exec.Command("docker", "rmi", "-f", ref).Run()
	tar := filepath.Join(dir, "image.tar")
	if out, err := exec.Command("docker", "save", "-o", tar, ref).CombinedOutput(); err != nil {
		t.Fatalf("docker save: %v\n%s", err, out)
	}
	if out, err := exec.Command(ctr, "-a", sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(ctr, "-a", sock, "-n", "k8s.io", "images", "rm", ref).Run() })
	return ref
}

// TestRestartInPlaceOfAPodWhoseMainThreadExited: the instance's main
// container runs a process whose main thread has exited (its leader a
// zombie) that forks children meanwhile; restart-in-place must end every
// process of the container, three times over, so that kubelet starts it
// again each time (the script counts its starts in the output directory)
// and the run PASSes.
func TestRestartInPlaceOfAPodWhoseMainThreadExited(t *testing.T) {
	t.Parallel()
	cluster(t)
	ref := mainexitImage(t)
	runs := t.TempDir()
	a := write(t, "mx-adapter.yaml", `apiVersion: chaos/v1alpha1
id: kubernetes-mainexit
backend: kubernetes
# IfNotPresent: the kubelet finds the imported image in its containerd.
# With Never the run's preflight would want it in the nodes' status,
# which the kubelet updates only every 30 to 40 s.
options: {restart-policy: OnFailure, image-pull-policy: IfNotPresent}
instance: {image: "`+ref+`"}
`)
	x := write(t, "mx.yaml", `apiVersion: chaos/v1alpha1
id: k8s-mainexit-restarts
workloads:
  - name: w
    run: |
      n=$(cat n 2>/dev/null || echo 0); echo $((n + 1)) > n
      [ "$(cat n)" -ge 4 ] && exit 0
      exec /bin/mainexit "$PWD/pid" forks
    checks:
      - {name: restarted-thrice, kind: shell, run: 'test "$(cat n)" = 4'}
operations:
  - {name: bounce, uses: restart-in-place, target: {workload: w}}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - {delay: 2s}
        - bounce
        - {delay: 2s}
        - bounce
        - {delay: 2s}
        - bounce
`)
	r := chaos(t, runs, "run", "--plain", "--adapter", a, x)
	if r.code != 0 {
		t.Fatalf("exit %d, want PASS\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	if !strings.Contains(r.stdout, "restarted-thrice") {
		t.Fatalf("the check did not run:\n%s", r.stdout)
	}
}
