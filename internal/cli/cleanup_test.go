package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/proc"
)

// startMarked starts a sleeping process that looks like one a run started
// by the harness harness names (harnessTag).
func startMarked(t *testing.T, runID, harness string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), "CHAOS_RUN_ID="+runID, proc.InstanceEnv+"="+harness)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// harnessTag is an InstanceEnv value naming pid, started at start.
func harnessTag(pid int, start uint64) string { return fmt.Sprintf("%d-1-%d", pid, start) }

// deadHarness names a harness that has exited. Its pid may go to another
// process meanwhile (pids wrap); the start time tells them apart.
func deadHarness(t *testing.T) string {
	t.Helper()
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := proc.StartTime(c.Process.Pid)
	c.Process.Kill()
	c.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return harnessTag(c.Process.Pid, start)
}

func alive(c *exec.Cmd) bool {
	st, err := proc.State(c.Process.Pid)
	return err == nil && st != 'Z'
}

func TestCleanupRemovesOnlyLeftovers(t *testing.T) {
	// Processes only: a cleanup of every dead run would also reach the
	// containers other packages' tests are making at the same time; and
	// journals of its own, or it would undo what another package's test
	// left of a run it killed on purpose, before that test looks.
	t.Setenv(journalfile.StateEnv, t.TempDir())
	self, err := proc.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	orphan := startMarked(t, "20990101T000000Z-dead", deadHarness(t))
	live := startMarked(t, "20990101T000000Z-live", harnessTag(os.Getpid(), self))
	other := startMarked(t, "20990101T000000Z-othr", deadHarness(t))
	time.Sleep(100 * time.Millisecond)

	var out, errb bytes.Buffer
	if code := mainTest([]string{"cleanup", "--backend", "process", "--dry-run", "20990101T000000Z-dead"}, nil, &out, &errb); code != 0 || !alive(orphan) {
		t.Fatalf("dry run: exit %d, orphan alive %v: %s%s", code, alive(orphan), out.String(), errb.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("would kill pid %d", orphan.Process.Pid)) {
		t.Fatalf("dry run output:\n%s", out.String())
	}
	out.Reset()
	if code := mainTest([]string{"cleanup", "--backend", "process", "20990101T000000Z-dead"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	time.Sleep(100 * time.Millisecond)
	if alive(orphan) || !alive(live) || !alive(other) {
		t.Fatalf("after cleanup of one run: orphan alive %v, live %v, other run %v", alive(orphan), alive(live), alive(other))
	}
	// With no argument: every run whose harness is gone, never a live one.
	out.Reset()
	mainTest([]string{"cleanup", "--backend", "process"}, nil, &out, &errb)
	time.Sleep(100 * time.Millisecond)
	if alive(other) || !alive(live) {
		t.Fatalf("after cleanup of all: other run alive %v, live run alive %v\n%s", alive(other), alive(live), out.String())
	}
}

func TestProvisionRunsTheHook(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/p.yaml"
	os.WriteFile(f, []byte("apiVersion: chaos/v1alpha1\nid: p\nbackend: process\nenv: {WHERE: there}\nprovision: echo provisioned $CHAOS_ADAPTER $WHERE\ndeprovision: exit 4\n"), 0o644)
	var out, errb bytes.Buffer
	if code := mainTest([]string{"provision", f}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "provisioned p there") {
		t.Fatalf("provision: exit %d: %q %q", code, out.String(), errb.String())
	}
	if code := mainTest([]string{"deprovision", f}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "deprovision hook of p exited 4") {
		t.Fatalf("deprovision: exit %d: %q", code, errb.String())
	}
	if code := mainTest([]string{"provision", "local"}, nil, &out, &errb); code != ExitInvalid || !strings.Contains(errb.String(), "has no provision hook") {
		t.Fatalf("local has no provision hook: exit %d: %q", code, errb.String())
	}
}
