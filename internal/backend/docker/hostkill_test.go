package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

const testID = "8f4a2024612bffbcb818ec20d9a9858cddf0229175b4b711ee1d6b28d4f6dab4"

func TestNamesContainer(t *testing.T) {
	for _, tc := range []struct {
		path, id string
		want     bool
	}{
		{"/docker/" + testID, testID, true},
		{"/system.slice/docker-" + testID + ".scope", testID, true},
		{"/kubepods/besteffort/pod1/" + testID, testID, true},
		{"/docker/" + testID + "/sub", testID, false}, // a child group is not the container's own
		{"/" + testID + "/docker/other", testID, false},
		{"/docker/" + testID[:12], testID, false}, // a short id could be another's
		{"/", testID, false},
		{"/docker/" + testID, testID[:12], false}, // only a full id is trusted
		{"/docker/" + testID, "", false},
	} {
		if got := namesContainer(tc.path, tc.id); got != tc.want {
			t.Errorf("namesContainer(%q, %q) = %v, want %v", tc.path, tc.id, got, tc.want)
		}
	}
}

func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		mnt, root, p, want string
		ok                 bool
	}{
		{"/sys/fs/cgroup", "/", "/docker/x", "/sys/fs/cgroup/docker/x", true},
		{"/sys/fs/cgroup/unified", "/", "/docker/x", "/sys/fs/cgroup/unified/docker/x", true},
		{"/sys/fs/cgroup", "/outer", "/outer/docker/x", "/sys/fs/cgroup/docker/x", true},
		{"/sys/fs/cgroup", "/outer", "/outerx/docker/x", "", false},
		{"/sys/fs/cgroup", "/outer", "/docker/x", "", false},
	} {
		got, ok := under(tc.mnt, tc.root, tc.p)
		if got != tc.want || ok != tc.ok {
			t.Errorf("under(%q, %q, %q) = %q, %v, want %q, %v", tc.mnt, tc.root, tc.p, got, ok, tc.want, tc.ok)
		}
	}
}

// TestHostKillInAV1Cgroup puts a process whose main thread has exited (its
// worker forking children meanwhile) in a v1 pids cgroup named like a
// container's, as the engine does on a v1 host, and kills it the way the
// backend does for such a container: every process goes, and only a cgroup
// naming the container's id is ever taken for it. Needs root and a v1 pids
// hierarchy; gcc is required under CI.
func TestHostKillInAV1Cgroup(t *testing.T) {
	h, err := cgroup.FindHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	pids, ok := h.V1["pids"]
	if !ok || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v1 pids hierarchy")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs gcc: %v", err)
		}
		t.Skipf("needs gcc: %v", err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "mainexit")
	if out, err := exec.Command(gcc, "-O2", "-pthread", "-o", bin, filepath.Join("..", "..", "cgroup", "testdata", "mainexit.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc mainexit.c: %v\n%s", err, out)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	id := hex.EncodeToString(raw)
	dir := filepath.Join(pids.Mount, "chaos-hostkill-"+id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a v1 cgroup: %v", err)
	}
	t.Cleanup(func() {
		// Whatever a failed kill left in the test's own cgroup.
		for _, pid := range listed(dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for range 50 {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	pidFile := filepath.Join(tmp, "pid")
	// The shell moves itself into the cgroup, then becomes the server.
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && exec "$2" "$3" forks`, "sh", dir, bin, pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-waited
	})
	pid := cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for !leaderIsZombie(pid) || len(listed(dir)) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the leader never became a zombie with children forked (listed %v)", listed(dir))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The container's cgroup is found only for its own id, and only from
	// one of its processes.
	if findHostCgroup(strings.Repeat("a", 64), pid) != nil {
		t.Fatal("a cgroup that names another container's id was taken for it")
	}
	if findHostCgroup(id, os.Getppid()) != nil {
		t.Fatal("a process outside the container's cgroup led to a cgroup")
	}
	hc := findHostCgroup(id, pid)
	if hc == nil || hc.v2 != nil && !namesContainer(hc.v2.CgroupPath(), id) || hc.v2 == nil && hc.v1Dir == "" {
		t.Fatalf("findHostCgroup(%s, %d) = %+v", shortID(id), pid, hc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	if err := hc.killWait(ctx); err != nil {
		t.Fatalf("killWait: %v (left %v)", err, listed(dir))
	}
	t.Logf("empty %v after the kill", time.Since(begin))
	if left := listed(dir); len(left) > 0 {
		t.Fatalf("processes left in the cgroup: %v", left)
	}
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the server ended with %v, want SIGKILL", err)
		}
		waited <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the server's process was never reaped")
	}
}

func listed(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "tasks"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}
