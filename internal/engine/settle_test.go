package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/rundir"
)

const settleExperiment = `apiVersion: chaos/v1alpha1
id: settle
workloads: [{name: w, run: "true"}]
flow: w
`

// A run whose preflight failed disturbed nothing, so it does not wait the
// settle time (hello-world without --adapter waited 30 s of its default
// adapter's settle after a failed preflight).
func TestNoSettleAfterASkippedFlow(t *testing.T) {
	a, ps := adapter.Parse("a.yaml", []byte(`apiVersion: chaos/v1alpha1
id: failing
backend: process
settle: 1h
preflight:
  - name: never
    run: "false"
`))
	if err := ps.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := Run(ctx, Config{Experiment: parse(t, settleExperiment), Adapter: a, RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out.Wait()
	if ctx.Err() != nil {
		t.Fatal("the run waited its settle time after a failed preflight")
	}
	events, err := rundir.ReadTimeline(out.Dir.TimelineFile())
	if err != nil {
		t.Fatal(err)
	}
	if n := find(events, "settle.started"); len(n) > 0 {
		t.Errorf("settle.started after a skipped flow: %v", n[0])
	}
	if n := find(events, "settle.skipped"); len(n) != 1 || n[0].String("reason") != "the flow did not run" {
		t.Errorf("want one settle.skipped saying the flow did not run, got %v", n)
	}
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Errorf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
}

// A signal during the settle wait ends it at once: chaos run --settle 60s
// ignored Ctrl-C for the whole minute.
func TestSignalEndsTheSettleWait(t *testing.T) {
	hour := time.Hour
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var sent time.Time
	x := parse(t, settleExperiment)
	log := watchLog(func(line string) {
		if sent.IsZero() && strings.Contains(line, "settle.started") {
			sent = time.Now()
			cancel(errors.New("SIGINT"))
		}
	})
	out, err := Run(ctx, Config{Experiment: x, Adapter: localAdapter(t), RunsDir: t.TempDir(), Settle: &hour, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	out.Wait()
	if sent.IsZero() {
		t.Fatal("the settle wait never started")
	}
	if d := time.Since(sent); d > 30*time.Second {
		t.Fatalf("the run ended %v after the signal", d)
	}
	events, err := rundir.ReadTimeline(out.Dir.TimelineFile())
	if err != nil {
		t.Fatal(err)
	}
	if n := find(events, "settle.interrupted"); len(n) != 1 || n[0].String("reason") != "SIGINT" {
		t.Errorf("want settle.interrupted by SIGINT, got %v", n)
	}
	if out.Verdict.Verdict != rundir.VerdictError || !out.Verdict.Aborted {
		t.Errorf("verdict %s aborted %v, want an aborted ERROR", out.Verdict.Verdict, out.Verdict.Aborted)
	}
}

// watchLog is a harness log that calls fn with what is written to it.
type watchLog func(line string)

var watchMu sync.Mutex // serializes the calls of every watchLog

func (w watchLog) Write(p []byte) (int, error) {
	watchMu.Lock()
	defer watchMu.Unlock()
	w(string(p))
	return len(p), nil
}
