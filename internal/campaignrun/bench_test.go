package campaignrun

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/runners"
)

// cpuTime is the CPU time (user and system) of this process and of its
// children that have been waited for: the harness and every process a run
// started. Unlike wall time it hardly depends on what else the machine
// runs.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// noop is the cheapest experiment: one instance whose script does nothing,
// with no checks of its own (the local adapter's two still run).
const noop = `apiVersion: chaos/v1alpha1
id: noop
title: Nothing at all, to measure the harness
hypothesis: The instance exits.
default-adapter: local
timeout: 1m
workloads:
  - name: w
    instances: 1
    run: ":"
flow: w
`

// timed is an executor that measures the engine's share of each run.
type timed struct {
	inner Executor
	mu    sync.Mutex
	sum   time.Duration
	n     int
}

func (x *timed) Run(ctx context.Context, dir string, i int, seed uint64) (string, string, error) {
	t0 := time.Now()
	root, where, err := x.inner.Run(ctx, dir, i, seed)
	x.mu.Lock()
	x.sum += time.Since(t0)
	x.n++
	x.mu.Unlock()
	return root, where, err
}

// BenchmarkCampaignOverhead is the harness's own cost per run in a
// campaign of a run that does nothing: ns/op is the campaign's wall time
// per run (runs/s at --parallel P is P/op); engine-ms is the whole run as
// the engine makes it (set-up, preflight, the flow, cleanup, the checks,
// verdict.json); outputs-ms is what the campaign adds per run (report.html,
// two ledger lines, campaign.json rewritten, the console line); cpu-ms is
// the CPU time per run of the harness and of every process the runs
// started, the figure a loaded machine distorts least.
func BenchmarkCampaignOverhead(b *testing.B) {
	file := filepath.Join(b.TempDir(), "noop.yaml")
	if err := os.WriteFile(file, []byte(noop), 0o644); err != nil {
		b.Fatal(err)
	}
	x, ps := experiment.Load(file)
	if ps.Err() != nil {
		b.Fatal(ps)
	}
	a := local(b)
	for _, parallel := range []int{1, 2} {
		b.Run("parallel="+string(rune('0'+parallel)), func(b *testing.B) {
			ex := &timed{inner: &runners.Local{Config: engine.Config{Experiment: x, Adapter: a, Env: os.Environ()}}}
			seed := uint64(1)
			cpu0 := cpuTime()
			b.ResetTimer()
			t0 := time.Now()
			res, err := Execute(context.Background(), Options{Experiment: x, Adapter: a, RunsDir: b.TempDir(), Count: b.N, Parallel: parallel,
				Seed: &seed, Executor: ex, Console: io.Discard})
			wall := time.Since(t0)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			if err != nil || len(res.File.Runs) != b.N || res.File.Counts["PASS"] != b.N {
				b.Fatalf("%v: %+v", err, res.File.Counts)
			}
			engineMS := float64(ex.sum.Milliseconds()) / float64(ex.n)
			perRun := float64(wall.Milliseconds()) * float64(parallel) / float64(b.N)
			b.ReportMetric(engineMS, "engine-ms/run")
			b.ReportMetric(perRun-engineMS, "outputs-ms/run")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/run")
		})
	}
}
