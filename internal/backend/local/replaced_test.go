package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/proc"
)

// TestReplacedKnowsASamePidReplacement: pids wrap, and the kernel may give
// a restarted daemon the very pid Down took down. Up took that for the old
// daemon still named by its pid file and gave up after 10 s ("its pid file
// still names pid 333, which was taken down"), seen with pids made to wrap
// every 50 ms. The replacement differs by its start time and by a pid file
// written since the start hook began.
func TestReplacedKnowsASamePidReplacement(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	start, err := proc.StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "d.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := &backend.Run{HookDir: dir, Expand: func(s string) string { return s }}
	tg := &target{b: &Backend{run: run}, name: "d", spec: &adapter.Target{PidFile: pidFile}}
	for _, c := range []struct {
		name     string
		old      int
		oldStart uint64
		since    time.Time // when the start hook began
		want     bool
	}{
		{"another pid", pid + 1, start, time.Now().Add(-time.Minute), true},
		{"the same process", pid, start, time.Now().Add(-time.Minute), false},
		{"the same pid, started later, pid file written since the start", pid, start - 1, time.Now().Add(-time.Minute), true},
		{"the same pid, started later, pid file older than the start", pid, start - 1, time.Now().Add(time.Minute), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg.mu.Lock()
			tg.startedAt = c.since
			tg.mu.Unlock()
			if got := tg.replaced(pid, c.old, c.oldStart); got != c.want {
				t.Errorf("replaced = %v, want %v", got, c.want)
			}
		})
	}
}
