package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// A stop node makes the workload's scripts end by themselves, and what they
// wrote with chaos_history is a history on the run's clock.
const stopWriters = `apiVersion: chaos/v1alpha1
id: stop-writers
workloads:
  - name: w
    instances: 2
    timeout: 20s
    run: |
      eval "$CHAOS_HISTORY_SH"
      i=0
      while [ ! -e "$CHAOS_STOP_FILE" ]; do
        i=$((i + 1))
        chaos_history invoke add "$i"
        chaos_history ok add "$i"
        sleep 0.02
      done
      echo "stopped after $i"
    checks:
      - {name: exited-ok, kind: exit-code}
flow:
  parallel:
    - w
    - serial: [{wait: {workload: w, condition: running}}, {delay: 1s}, {stop: w}]
`

func TestStopNode(t *testing.T) {
	out, events := runOnce(t, stopWriters, nil)
	if out.Verdict.Verdict != "PASS" {
		t.Fatalf("verdict %s: %+v %v", out.Verdict.Verdict, out.Verdict.Checks, out.Verdict.Errors)
	}
	stops := find(events, "instance.stop-requested")
	if len(stops) != 2 || stops[0].String("workload") != "w" {
		t.Fatalf("stop events: %v", stops)
	}
	var stopAt float64
	for _, e := range events {
		if e.Name == "node.finished" && e.String("kind") == "stop" {
			stopAt = e.T
		}
	}
	srcs := verdict.HistorySources(out.Dir, events, nil)
	h, err := history.Load(context.Background(), srcs, verdict.RunStart(events))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Problems) > 0 || h.Untimed > 0 || h.Count(history.OK) < 4 {
		t.Fatalf("history: %d ok, problems %v, untimed %d", h.Count(history.OK), h.Problems, h.Untimed)
	}
	// The history is on the run's clock: it starts after the run did and
	// ends around the stop.
	first, last := h.Ops[0], h.Ops[len(h.Ops)-1]
	if first.Start <= 0 || last.End > stopAt+2 || last.End < stopAt-0.5 {
		t.Errorf("history from t=%.3f to t=%.3f, stop at t=%.3f", first.Start, last.End, stopAt)
	}
	env, _ := os.ReadFile(filepath.Join(out.Dir.InstanceDir("w", "w-0"), "env"))
	for _, v := range []string{"CHAOS_HISTORY=" + out.Dir.OutputDir("w", "w-0") + "/.chaos/history.jsonl", "CHAOS_STOP_FILE=", "CHAOS_RUN_START="} {
		if !strings.Contains(string(env), v) {
			t.Errorf("env lacks %s", v)
		}
	}
}

// plainInstance is an instance of a backend that cannot be asked to stop.
type plainInstance struct{ backend.Instance }

// A stop node on instances that cannot be asked to stop is a harness error
// naming them; ended and not yet created instances are left alone.
func TestStopUnsupportedIsAnError(t *testing.T) {
	x := parse(t, stopWriters)
	d, err := rundir.Create(t.TempDir(), "stop-writers", "r1")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rundir.NewRecorder(d, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	e := &engine{x: x, reg: newRegistry(x), rec: rec}
	hs := e.reg.workload("w")
	hs[0].inst, hs[0].state = plainInstance{}, backend.Running
	hs[1].inst, hs[1].state = plainInstance{}, backend.Succeeded
	err = e.stopWorkload(context.Background(), "w")
	if err == nil || err.Error() != "instance w-0 cannot be asked to stop: its backend does not support the stop node" {
		t.Fatalf("error %v", err)
	}
	hs[0].state = backend.Failed
	if err := e.stopWorkload(context.Background(), "w"); err != nil {
		t.Errorf("no running instance: %v", err)
	}
}
