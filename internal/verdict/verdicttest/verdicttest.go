// Package verdicttest builds run directories by hand for tests of anything
// that reads a run (the verdict, chaos evaluate, reports): the experiment and
// adapter copies, timeline lines and instance output, as the engine would
// have left them.
package verdicttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// RunID is the run id of every built run.
const RunID = "20261029T112646Z-2f79"

// Start is when every built run started.
var Start = time.Date(2026, 10, 29, 11, 26, 46, 122000000, time.UTC)

// Run is a run directory being built.
type Run struct {
	T      testing.TB
	Dir    *rundir.Dir
	events []rundir.Event
	raw    map[int][]string // lines written after the first n events
	t      float64
}

// New makes an empty run directory runs/<experimentID>/<RunID> under a
// temporary directory, with experiment.yaml and (when not empty)
// adapter.yaml.
func New(t testing.TB, experimentID, experimentYAML, adapterYAML string) *Run {
	t.Helper()
	d, err := rundir.Create(filepath.Join(t.TempDir(), "runs"), experimentID, RunID)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{T: t, Dir: d}
	r.File("experiment.yaml", experimentYAML)
	if adapterYAML != "" {
		r.File("adapter.yaml", adapterYAML)
	}
	return r
}

// Event appends a timeline event; kv are key, value pairs in order.
func (r *Run) Event(name string, kv ...any) *Run {
	r.T.Helper()
	if len(kv)%2 != 0 {
		r.T.Fatalf("event %s: odd number of key/value arguments", name)
	}
	r.t += 0.5
	e := rundir.Event{T: r.t, TS: Start.Add(time.Duration(r.t * float64(time.Second))), Name: name}
	for i := 0; i < len(kv); i += 2 {
		e.Fields = append(e.Fields, rundir.F(kv[i].(string), kv[i+1]))
	}
	r.events = append(r.events, e)
	return r
}

// Raw appends a timeline line as it is, for runs that are not what the
// engine writes (hostile or broken ones).
func (r *Run) Raw(line string) *Run {
	if r.raw == nil {
		r.raw = map[int][]string{}
	}
	r.raw[len(r.events)] = append(r.raw[len(r.events)], line)
	return r
}

// Started records run.started.
func (r *Run) Started(experimentID, adapterID string) *Run {
	return r.Event("run.started", "experiment", experimentID, "version", 1, "seed", 0, "adapter", adapterID, "run_id", RunID)
}

// Preflight records a preflight check's outcome.
func (r *Run) Preflight(check string, ok bool, detail string) *Run {
	r.Event("check.started", "scope", rundir.ScopePreflight, "check", check)
	return r.Event("check.finished", "scope", rundir.ScopePreflight, "check", check, "ok", ok, "detail", detail)
}

// Instance records an instance that was created, ran and was collected with
// the given exit code (nil: none recorded, so no .chaos/exit_code file).
func (r *Run) Instance(workload, instance string, exitCode *int) *Run {
	r.T.Helper()
	r.Event("instance.created", "workload", workload, "instance", instance, "system_id", "sys-"+instance)
	state := "Succeeded"
	if exitCode == nil || *exitCode != 0 {
		state = "Failed"
	}
	r.Event("instance.state", "workload", workload, "instance", instance, "state", state, "reason", "")
	var code any
	if exitCode != nil {
		code = *exitCode
	}
	r.Event("instance.collected", "workload", workload, "instance", instance, "exit_code", code)
	if err := os.MkdirAll(filepath.Join(r.Dir.OutputDir(workload, instance), ".chaos"), 0o755); err != nil {
		r.T.Fatal(err)
	}
	r.File(filepath.Join("workloads", workload, "instances", instance, "output", ".chaos", "attempts"), "1\n")
	if exitCode != nil {
		r.File(filepath.Join("workloads", workload, "instances", instance, "output", ".chaos", "exit_code"), fmt.Sprintf("%d\n", *exitCode))
	}
	return r
}

// Output writes a file in an instance's output directory.
func (r *Run) Output(workload, instance, name, content string) *Run {
	return r.File(filepath.Join("workloads", workload, "instances", instance, "output", name), content)
}

// Finished records run.finished.
func (r *Run) Finished(verdict string) *Run {
	return r.Event("run.finished", "verdict", verdict)
}

// File writes a file under the run directory.
func (r *Run) File(rel, content string) *Run {
	r.T.Helper()
	p := r.Dir.Path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.T.Fatal(err)
	}
	return r
}

// Write writes timeline.jsonl and returns the run directory.
func (r *Run) Write() *rundir.Dir {
	r.T.Helper()
	var b strings.Builder
	for i, e := range r.events {
		for _, l := range r.raw[i] {
			b.WriteString(l + "\n")
		}
		line, err := e.MarshalJSON()
		if err != nil {
			r.T.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, l := range r.raw[len(r.events)] {
		b.WriteString(l + "\n")
	}
	r.File("timeline.jsonl", b.String())
	return r.Dir
}

// Code returns a pointer to an exit code, for Instance.
func Code(c int) *int { return &c }
