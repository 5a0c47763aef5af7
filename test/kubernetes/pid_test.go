package kubernetes_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/proc"
)

// TestPidOfContainerIsItsInit: after the machine's pids wrapped, a
// container's transient processes may have lower pids than its init.
// The tests' pidOfContainer took the lowest, once the ticker's sleep, whose
// root was gone when TestRestartedAgentReverts read the ticks through it
// in CI; the harness's kubernetes.HostPidOf, which it now calls, took the
// first started, the lowest pid among those started in the same tick.
// Here a "container" (a cgroup named by a made-up id) gets an init with a
// pid just below pid_max and children with low pids, by setting the
// kernel's last pid before each fork.
func TestPidOfContainerIsItsInit(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("placing processes in a cgroup and setting the last pid need root")
		}
		t.Skip("placing processes in a cgroup and setting the last pid need root")
	}
	h, err := cgroup.FindHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	mount := ""
	if pids, ok := h.V1["pids"]; ok {
		mount = pids.Mount
	} else if h.V2 != nil {
		mount = h.V2.Mount
	}
	if mount == "" {
		t.Fatal("no cgroup hierarchy is mounted")
	}
	id := fmt.Sprintf("%064x", time.Now().UnixNano())
	dir := filepath.Join(mount, "chaos-test-"+id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	max, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, _ := strconv.Atoi(strings.TrimSpace(string(max)))
	setLast := func(n int) {
		t.Helper()
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(n)), 0); err != nil {
			t.Fatal(err)
		}
	}

	// The init, near pid_max, placed in the group before it forks.
	setLast(pidMax - 200)
	init := exec.Command("sh", "-c", `read go; while :; do sleep 0.05; done`)
	stdin, err := init.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = init.Process.Kill()
		_ = init.Wait()
		for end := time.Now().Add(5 * time.Second); os.Remove(dir) != nil && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(init.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	// Its sleeps, from a wrapped counter.
	setLast(300)
	fmt.Fprintln(stdin, "go")
	var child int
	for end := time.Now().Add(10 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the init's sleeps never got a pid below its own")
		}
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if p, _ := strconv.Atoi(f); p != 0 && p < init.Process.Pid && proc.Parent(p) == init.Process.Pid {
				child = p
			}
		}
		setLast(300)
	}
	if got := pidOfContainer(id); got != init.Process.Pid {
		t.Fatalf("pidOfContainer = %d, want the init %d (a child is %d)", got, init.Process.Pid, child)
	}
}
