package proc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestListMarkedReadsTheHarnessTag: a process's InstanceEnv tag gives the
// harness's pid and start time, and HarnessRuns says the harness is gone
// once its pid is another process's. Before, the tag had the pid only, and
// a dead harness whose pid had gone to another process (pids wrap) kept
// its run's leftovers from chaos cleanup (TestCleanupRemovesOnlyLeftovers,
// with pids made to wrap every 50 ms).
func TestListMarkedReadsTheHarnessTag(t *testing.T) {
	self := os.Getpid()
	start, err := StartTime(self)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tag  string
		pid  int
		st   uint64
		runs bool
	}{
		{"this harness", fmt.Sprintf("%d-7-%d", self, start), self, start, true},
		{"its pid, another start: a pid gone to another process", fmt.Sprintf("%d-7-%d", self, start+1), self, start + 1, false},
		{"an older harness's tag, pid only", fmt.Sprintf("%d-7", self), self, 0, true},
		{"a dead harness", fmt.Sprintf("%d-7-%d", dead.Process.Pid, start), dead.Process.Pid, start, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := fmt.Sprintf("CHAOS_TEST_MARK_%d", time.Now().UnixNano())
			cmd := exec.Command("sleep", "30")
			cmd.Env = append(os.Environ(), marker+"=r", InstanceEnv+"="+c.tag)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			var m *Marked
			for end := time.Now().Add(5 * time.Second); m == nil && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				all, err := ListMarked(marker)
				if err != nil {
					t.Fatal(err)
				}
				for i := range all {
					if all[i].Pid == cmd.Process.Pid {
						m = &all[i]
					}
				}
			}
			if m == nil {
				t.Fatal("the marked process was not listed")
			}
			if m.HarnessPid != c.pid || m.HarnessStart != c.st {
				t.Errorf("harness %d started %d, want %d started %d", m.HarnessPid, m.HarnessStart, c.pid, c.st)
			}
			if got := m.HarnessRuns(); got != c.runs {
				t.Errorf("HarnessRuns = %v, want %v", got, c.runs)
			}
		})
	}
}
