package docker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// termexitImage builds an image FROM scratch holding testdata/termexit.c
// compiled statically: its main thread calls pthread_exit once a worker
// thread runs, so the container's init is a zombie leader while the process
// lives on; on SIGTERM it exits 42. Without gcc the test is skipped, except
// under CI.
func termexitImage(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs gcc: %v", err)
		}
		t.Skipf("needs gcc: %v", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command(gcc, "-static", "-O2", "-Wall", "-pthread", "-o", filepath.Join(dir, "termexit"), filepath.Join("testdata", "termexit.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static termexit.c (needs libc6-dev): %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY termexit /termexit\nENTRYPOINT [\"/termexit\"]\n"), 0o644)
	ref := fmt.Sprintf("chaos-test/termexit:%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "build", "-q", "-t", ref, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

// TestRestartInPlaceOfAContainerWhoseMainThreadExited restarts in place,
// three times, a container target whose init's main thread has exited
// while a worker thread runs (the leader is a zombie), restarts it
// gracefully, then kills it. The engine cannot signal such a container:
// each docker kill took over 10 s, failed with "PID … is zombie and can not
// be killed", and could leave the process running while the engine called
// the container exited, so the run was ERROR; a docker stop delivered no
// SIGTERM. The harness now signals and kills what the container's cgroup
// holds on the host. The run must PASS, each operation quickly, the
// graceful restart must reach the process with SIGTERM, and no process of
// the container may be left on the host (the engine's containerd shim is
// the engine's, not looked at).
func TestRestartInPlaceOfAContainerWhoseMainThreadExited(t *testing.T) {
	needDocker(t)
	ref := termexitImage(t)
	dir := t.TempDir()
	adapterFile := containerAdapter(t, dir, "docker-mainexit", "server", "mx", ref)
	expFile := writeFile(t, filepath.Join(dir, "x.yaml"), `apiVersion: chaos/v1alpha1
id: docker-mainexit-restarts
timeout: 2m
workloads:
  - {name: w, run: "true"}
operations:
  - {name: bounce, uses: restart-in-place, target: server}
  - {name: gentle, uses: restart, target: server, grace: 6s}
  - {name: end, uses: kill, target: server}
flow:
  serial:
    - w
    - repeat: {times: 3, do: bounce}
    - gentle
    - end
checks:
  - {name: restarted-three-times, kind: event, event: target.restarted, where: {operation: bounce}, min: 3, max: 3}
`)
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", adapterFile, expFile)
	if r.code != 0 || !strings.Contains(r.stdout, "\nPASS\n") {
		t.Errorf("exit %d, want 0 (PASS)\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 25))
	}
	events, err := rundir.ReadTimeline(filepath.Join(r.dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var started float64
	ops := 0
	for _, e := range events {
		if e.Name == "container.event" && strings.HasPrefix(e.String("container"), "chaos-mx-") && e.String("id") != "" {
			ids[e.String("id")] = true
		}
		switch e.Name {
		case "operation.started":
			started = e.T
		case "operation.finished":
			// The engine spends at least 12 s on each kill it cannot do
			// (2 s, then 10 s of its own wait); the host kill takes under
			// a second, and a restart is that plus docker start (1-3 s
			// here, more on a loaded machine).
			ops++
			t.Logf("%s took %.3fs", e.String("operation"), e.T-started)
			if e.T-started > 10 {
				t.Errorf("operation %s took %.1fs: the kill waited for the engine", e.String("operation"), e.T-started)
			}
		}
	}
	if ops != 5 {
		t.Errorf("%d operations finished, want 5", ops)
	}
	// The graceful restart's SIGTERM reached the process (its handler
	// exits 42), where the engine could deliver none and killed it; every
	// other end is a SIGKILL (128+9).
	var codes []int
	for _, e := range events {
		if e.Name == "container.event" && e.String("action") == "die" && strings.HasPrefix(e.String("container"), "chaos-mx-") {
			n, _ := strconv.Atoi(fmt.Sprint(e.Get("exit_code")))
			codes = append(codes, int(n))
		}
	}
	t.Logf("exit codes of the target's container: %v", codes)
	if want := []int{137, 137, 137, 42, 137}; len(codes) < len(want) || !slices.Equal(codes[:len(want)], want) {
		t.Errorf("exit codes of the target's container %v, want %v first (42: the graceful restart's SIGTERM)", codes, want)
	}
	if len(ids) != 1 {
		t.Fatalf("the target's container ids in the timeline: %v, want one", ids)
	}
	for id := range ids {
		if left := processesInContainer(id); len(left) > 0 {
			t.Errorf("processes of container %s left on the host after the run: %v", id, left)
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL) // leave the machine clean
			}
		}
		list, _ := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("id", id)})
		if len(list.Items) != 0 {
			t.Errorf("container %s left after the run", id)
		}
	}
}

// processesInContainer lists the host's processes whose cgroup (any
// hierarchy) is the container's: a path element holding its id.
func processesInContainer(id string) []int {
	return processes(func(proc string) bool {
		b, _ := os.ReadFile(proc + "/cgroup")
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && strings.Contains(filepath.Base(parts[2]), id) {
				return true
			}
		}
		return false
	})
}

// processes lists the host's processes for which match holds, given the
// process's /proc directory.
func processes(match func(proc string) bool) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && match("/proc/"+e.Name()) {
			out = append(out, pid)
		}
	}
	return out
}
