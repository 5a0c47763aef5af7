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
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New:          func(t *testing.T) backend.Backend { return New(backendtest.NewRun(t, nil)) },
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
