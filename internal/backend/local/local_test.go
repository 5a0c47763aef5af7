package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/proc"
)

// TestConformance runs the suite in the mode a run gets on this machine:
// cgroup mode where cgroup v2 can be used (it can on the test machines;
// under CI its absence is a failure), else process groups.
func TestConformance(t *testing.T) {
	want := proc.DetectMode()
	if want.Mode != proc.ModeCgroup && os.Getenv("CI") != "" {
		t.Fatalf("cgroup mode is not available (%s), and CI is set: the cgroup half of the suite would not run", want.Reason)
	}
	conformance(t, want.Mode)
}

// TestConformanceProcessGroups runs the suite with cgroups turned off
// (CHAOS_CGROUP=off): the fallback must give the primitives the same
// meaning.
func TestConformanceProcessGroups(t *testing.T) {
	t.Setenv(cgroup.DisableEnv, "off")
	conformance(t, proc.ModeProcessGroup)
}

func conformance(t *testing.T, mode proc.Mode) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			run := backendtest.NewRun(t, nil)
			if got := run.Sup.ModeInfo(); got.Mode != mode {
				t.Fatalf("the run's supervisor is in %s mode (%s), want %s", got.Mode, got.Reason, mode)
			}
			return New(run)
		},
		NoLostEvents: "an instance's end is the wait status the harness reaps as the process's subreaper, not an event that can be lost",
		NewHandle:    newTargetHandle,
	})
}

// newTargetHandle is a process target the run owns: a start hook that
// starts a ticking shell in the background and writes its pid file.
func newTargetHandle(t *testing.T) (backend.Handle, func() int) {
	run := backendtest.NewRun(t, nil)
	dir := t.TempDir()
	ticks := filepath.Join(dir, "ticks")
	spec := &adapter.Target{Type: adapter.TypeProcess, Lifecycle: "run", PidFile: filepath.Join(dir, "pid"),
		Start: `sh -c 'while true; do echo . >> ` + ticks + `; sleep 0.05; done' > /dev/null 2>&1 & echo $! > "$CHAOS_PID_FILE"`}
	b := New(run)
	tg, err := b.OpenTarget(context.Background(), "ticker", spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Stop(context.Background()) })
	hs, err := tg.Handles(context.Background())
	if err != nil || len(hs) != 1 {
		t.Fatalf("handles %v, %v", hs, err)
	}
	return hs[0], func() int {
		b, _ := os.ReadFile(ticks)
		return strings.Count(string(b), "\n")
	}
}

// TestTargetThawAfterAFreezeCutShort: a target's Freeze whose context
// ends before the kernel says frozen leaves cgroup.freeze asked for; its
// Thaw must still undo it, since the fault thaws a freeze that failed.
func TestTargetThawAfterAFreezeCutShort(t *testing.T) {
	if m := proc.DetectMode(); m.Mode != proc.ModeCgroup {
		t.Skipf("cgroup mode only (%s): SIGSTOP is sent whole or not at all", m.Reason)
	}
	h, _ := newTargetHandle(t)
	tg := h.(*target)
	cg := tg.contained().Cgroup()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	// The kernel may confirm before the first look: then try again, thawed.
	cut := false
	for i := 0; i < 20 && !cut; i++ {
		cut = tg.Freeze(done) != nil
		if err := tg.Thaw(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !cut {
		t.Skip("the kernel confirmed every freeze before its first look: none was cut short")
	}
	if frozen, err := cg.Frozen(); err != nil || frozen {
		t.Fatalf("after Thaw the target's cgroup is frozen %v (%v)", frozen, err)
	}
	b, err := os.ReadFile(filepath.Join(cg.Path, "cgroup.freeze"))
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("after Thaw cgroup.freeze is %q (%v), want 0", b, err)
	}
}
