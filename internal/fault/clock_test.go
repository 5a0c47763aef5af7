package fault

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/clockpatch"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// procHandle is a handle whose processes are a process tree of this
// machine.
type procHandle struct {
	script
	pid int
}

func (h *procHandle) Processes(context.Context) (string, []int, error) {
	return "tree", append([]int{h.pid}, proc.Descendants(h.pid)...), nil
}

// lockedEnv is env for faults that record from a goroutine of their own.
type lockedEnv struct {
	mu sync.Mutex // guards env
	env
}

func (e *lockedEnv) Record(name string, fields ...rundir.Field) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.env.Record(name, fields...)
}

func patchedAll(t *testing.T, pids []int) (yes, no []int) {
	t.Helper()
	for _, pid := range pids {
		if ok, err := clockpatch.Patched(pid); err == nil && ok {
			yes = append(yes, pid)
		} else if err == nil {
			no = append(no, pid)
		}
	}
	return yes, no
}

// A clock fault patches every process of its handle, new ones too, is
// refused on a process another one holds, and its revert (at the flow's
// end) leaves none patched and no journal for chaos cleanup.
func TestClockFaultOnAProcessTree(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("clock faults need root (ptrace)")
		}
		t.Skip("clock faults need root (ptrace)")
	}
	tree := exec.Command("/bin/sh", "-c", "sleep 60 & sleep 60 & while :; do sleep 0.3; done")
	if err := tree.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Process.Kill(); tree.Wait() })
	h := &procHandle{pid: tree.Process.Pid}
	time.Sleep(200 * time.Millisecond)
	state := t.TempDir()
	j := NewResourceJournal("20261202T000000Z-test", t.TempDir(), state)
	e := &lockedEnv{}
	for _, tc := range []struct {
		name  string
		fault string
		clock experiment.Clock
	}{
		{"offset", experiment.FaultClockOffset, experiment.Clock{Offset: "1h"}},
		{"drift", experiment.FaultClockDrift, experiment.Clock{Rate: 2}},
		{"strobe", experiment.FaultClockStrobe, experiment.Clock{Offset: "-1m", Period: manifest.Duration(100 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := Op{Operation: tc.name, Fault: tc.fault, Run: 1, Journal: j, Clock: &tc.clock}
			if err := Apply(context.Background(), e, op, h); err != nil {
				t.Fatal(err)
			}
			// The loop's sleeps are new programs; the fault's looks
			// patch them when they live long enough.
			time.Sleep(1200 * time.Millisecond)
			_, pids, _ := h.Processes(context.Background())
			yes, _ := patchedAll(t, pids)
			if len(yes) < 3 {
				t.Errorf("patched %v of %v, want the shell and both sleep 60", yes, pids)
			}
			other := Op{Operation: "again", Fault: experiment.FaultClockOffset, Run: 1, Journal: j, Clock: &experiment.Clock{Offset: "2h"}}
			if err := Apply(context.Background(), e, other, h); err == nil || !strings.Contains(err.Error(), "another clock fault holds it") {
				t.Errorf("a second clock fault on the same processes: %v", err)
			}
			e.flowEnd(t)
			e.reverts = nil
			_, pids, _ = h.Processes(context.Background())
			if yes, _ := patchedAll(t, pids); len(yes) > 0 {
				t.Errorf("after the revert, still patched: %v", yes)
			}
			if left, _ := os.ReadDir(state); len(left) > 0 {
				t.Errorf("journals left for chaos cleanup: %v", left)
			}
		})
	}
}

// A handle the harness cannot list the processes of is unsupported.
func TestClockFaultNeedsProcesses(t *testing.T) {
	j := NewResourceJournal("r", t.TempDir(), t.TempDir())
	op := Op{Operation: "o", Fault: experiment.FaultClockJump, Journal: j, Clock: &experiment.Clock{Offset: "1h"}}
	if err := Apply(context.Background(), &env{}, op, &script{}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("got %v, want ErrUnsupported", err)
	}
}
