package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

type nopEnv struct{}

func (nopEnv) Record(string, ...rundir.Field) {}
func (nopEnv) Back(backend.Handle)            {}
func (nopEnv) Revert(undo func(context.Context) error) func(context.Context) error {
	return undo
}

// TestRestartRacingAnExit restarts instances that end by themselves at about
// the same moment: every one must either restart or end, never hang.
func TestRestartRacingAnExit(t *testing.T) {
	b := New(backendtest.NewRun(t, nil))
	dir := t.TempDir()
	wrapper, run := filepath.Join(dir, "wrapper.sh"), filepath.Join(dir, "run.sh")
	os.WriteFile(wrapper, []byte(backend.WrapperScript), 0o755)
	// The first start ends within 0 to 30 ms; a restarted one ends at once.
	os.WriteFile(run, []byte(`[ -s .chaos/attempts ] && [ "$(wc -l < .chaos/attempts)" -gt 1 ] && exit 0; sleep 0.0$((RANDOM % 3))`), 0o755)
	for i := 0; i < 60; i++ {
		out := filepath.Join(dir, "out", string(rune('a'+i%26))+string(rune('a'+i/26)))
		inst, err := b.Create(context.Background(), backend.InstanceSpec{Workload: "w", Name: "w-0", Dir: dir, OutputDir: out, LogDir: filepath.Join(out, "logs"),
			Wrapper: wrapper, Script: run, Env: append(os.Environ(), "CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR="+out, "CHAOS_RUN_SCRIPT="+run),
			OnState: func(backend.State, string) {}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%20) * time.Millisecond)
		_ = fault.Apply(context.Background(), nopEnv{}, fault.Op{Fault: experiment.FaultRestartInPlace}, inst)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		select {
		case <-inst.Done():
		case <-ctx.Done():
			cancel()
			t.Fatalf("iteration %d: the instance neither restarted to its end nor ended", i)
		}
		cancel()
	}
}
