package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// A run whose context is cancelled before it starts (a signal caught
// while chaos was loading) never starts its flow, however quick its setup:
// flowCtx follows ctx through a goroutine, which such a setup outruns
// (with one P it never runs in time).
func TestCancelledBeforeTheRunSkipsTheFlow(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	zero := time.Duration(0)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("SIGINT"))
		out, err := Run(ctx, Config{Experiment: parse(t, `apiVersion: chaos/v1alpha1
id: quick
workloads: [{name: w, run: "true"}]
flow: w
`), Adapter: localAdapter(t), RunsDir: t.TempDir(), Settle: &zero})
		if err != nil {
			t.Fatal(err)
		}
		out.Wait()
		events, err := rundir.ReadTimeline(out.Dir.TimelineFile())
		if err != nil {
			t.Fatal(err)
		}
		if n := find(events, "node.started"); len(n) > 0 {
			t.Fatalf("run %d: the flow started after the run was cancelled: %v", i, n[0])
		}
		if out.Verdict.Verdict != rundir.VerdictError || !out.Verdict.Aborted {
			t.Fatalf("run %d: verdict %s, aborted %v; want ERROR, aborted", i, out.Verdict.Verdict, out.Verdict.Aborted)
		}
	}
}
