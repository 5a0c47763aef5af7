package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// manyInstances is an experiment whose flow runs n instances at once.
func manyInstances(n int) string {
	return fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: many
workloads:
  - {name: w, instances: %d, run: "sleep 5"}
flow: w
`, n)
}

// runLimited runs `chaos run` of experiment src through sh -c prefix, so
// prefix can limit what chaos may use, and returns the exit code, the
// output and the runs directory.
func runLimited(t *testing.T, prefix, src string) (code int, stdout, stderr, runs string) {
	t.Helper()
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatalf("chaos is not on $PATH (TestMain puts it there): %v", err)
	}
	dir := t.TempDir()
	exp := filepath.Join(dir, "x.yaml")
	if err := os.WriteFile(exp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	runs = filepath.Join(dir, "runs")
	cmd := exec.Command("/bin/sh", "-c", prefix+` exec "$0" run --plain --settle 0s --adapter local --runs-dir "$1" "$2"`, bin, runs, exp)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("chaos took %s to refuse the run: it started it", took)
	}
	return code, out.String(), errb.String(), runs
}

// assertRefused checks a refusal before anything started: exit 2, a
// message that names the limit, and no run directory.
func assertRefused(t *testing.T, code int, stdout, stderr, runs, limit string) {
	t.Helper()
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr, "this machine cannot take the run") || !strings.Contains(stderr, limit) {
		t.Errorf("stderr does not say the run is refused by %s:\n%s", limit, stderr)
	}
	if _, err := os.Stat(runs); err == nil {
		t.Errorf("a refused run left %s", runs)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", stdout)
	}
}

// More instances at once than the open files limit leaves room for: the
// run is refused before anything starts.
func TestRunRefusedByTheOpenFilesLimit(t *testing.T) {
	code, stdout, stderr, runs := runLimited(t, "ulimit -n 128 &&", manyInstances(100))
	assertRefused(t, code, stdout, stderr, runs, "RLIMIT_NOFILE")
}

// More instances at once than the harness's pids cgroup leaves room for
// (it crashed the harness: pthread_create failed, SIGABRT, no verdict):
// the run is refused before anything starts.
func TestRunRefusedByThePidsCgroup(t *testing.T) {
	group := pidsCgroup(t, 300)
	code, stdout, stderr, runs := runLimited(t, `echo $$ > `+filepath.Join(group, "cgroup.procs")+` &&`, manyInstances(200))
	assertRefused(t, code, stdout, stderr, runs, "pids cgroup")
}

// pidsCgroup makes a pids cgroup with pids.max set to max, in the v1 pids
// hierarchy or in cgroup v2 where the root delegates pids, and removes it
// (and anything left in it) when the test ends.
func pidsCgroup(t *testing.T, max int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a pids cgroup needs root")
	}
	var parent string
	for _, p := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err != nil {
			continue
		}
		if p == "/sys/fs/cgroup" {
			ctl, _ := os.ReadFile(filepath.Join(p, "cgroup.subtree_control"))
			if !strings.Contains(string(ctl), "pids") {
				continue
			}
		}
		parent = p
		break
	}
	if parent == "" {
		t.Skip("no pids cgroup controller to use")
	}
	group := filepath.Join(parent, fmt.Sprintf("chaos-test-%d", os.Getpid()))
	if err := os.Mkdir(group, 0o755); err != nil {
		t.Skipf("cannot make a pids cgroup: %v", err)
	}
	t.Cleanup(func() {
		for range 50 {
			data, _ := os.ReadFile(filepath.Join(group, "cgroup.procs"))
			pids := strings.Fields(string(data))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := os.Remove(group); err != nil {
			t.Errorf("removing %s: %v", group, err)
		}
	})
	if err := os.WriteFile(filepath.Join(group, "pids.max"), []byte(strconv.Itoa(max)), 0o644); err != nil {
		t.Skipf("cannot limit pids: %v", err)
	}
	return group
}
