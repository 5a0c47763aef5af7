// Package runview reads a run directory into the shapes every way of seeing
// a run needs: the flow's bars, each operation's band, each instance's
// state segments, the metrics sources. It reads only the run directory, so
// reports, shares and exports work on a copy of it anywhere.
package runview

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/redact"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Run is one run directory, read.
type Run struct {
	Dir        *rundir.Dir
	RunID      string
	Experiment *experiment.Experiment // nil when experiment.yaml does not parse
	Manifest   *rundir.Manifest       // nil when missing
	Verdict    *rundir.Verdict        // nil when the run has none (it crashed)
	Events     []rundir.Event
	// Start is the wall-clock time of t=0; End is the last event's t.
	Start time.Time
	End   float64
	// Nodes are the flow's nodes as they ran (one bar per start and end).
	Nodes []Bar
	// Operations are every application of every operation.
	Operations []OpRun
	Instances  []Instance
	// NamedTargets are the lives of the adapter's named targets the run
	// started or acted on.
	NamedTargets []TargetLife
	// FlowEnd is when the flow ended (-1: never recorded).
	FlowEnd float64
	// Sources are the metrics sources recorded under system/metrics.
	Sources []string
	// Redact keeps secrets out of every page made of the run: Load sets it
	// from the run's own manifests (their env values, secrets sections and
	// names); WithEnv adds an environment's secrets; chaos run sets the
	// run's own.
	Redact *redact.Redactor

	adapter *adapter.Adapter
	// ctx ends the work done with the run after loading (a page's
	// histories); see WithContext.
	ctx context.Context

	failed     map[string][]ScrapeFailure
	failedOnce sync.Once
}

// WithContext makes the work done with the run (reading its histories for
// a page) stop when ctx ends.
func (r *Run) WithContext(ctx context.Context) *Run {
	r.ctx = ctx
	return r
}

// Context is the run's context (context.Background when none was set).
func (r *Run) Context() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

// WithEnv makes Redact also replace the secrets of env (the environment
// the command runs in, as the run's was), besides the manifests'.
func (r *Run) WithEnv(env []string) *Run {
	r.Redact = redact.For(env, r.Experiment, r.adapter)
	return r
}

// Bar is one flow node's run.
type Bar struct {
	Node, Kind, Label string
	Start, End        float64
	OK                bool
}

// OpRun is one application of an operation.
type OpRun struct {
	Name, Uses string
	Run        int
	Start, End float64
	// Target is the target as the manifests write it ("gateway",
	// "{workload: counter}"; "" without one), from either form a run
	// directory records (rundir.TargetText); Scope is target, instances,
	// role or system.
	Target, Scope string
	// Duration is the operation's duration in seconds (0: none).
	Duration float64
	// Targets are the instances or targets it hit.
	Targets  []string
	Reverted bool
	// Open is true when no end was recorded (the run ended first).
	Open bool
}

// Segment is a stretch of time an instance spent in one state.
type Segment struct {
	State, Reason string
	Start, End    float64
}

// Instance is one instance's life.
type Instance struct {
	Workload, Name string
	Index          int
	Created        float64
	Segments       []Segment
	Final          string
	ExitCode       *int
	// Faults are the operations that hit this instance.
	Faults []string
}

// Load reads the run directory at root.
func Load(root string) (*Run, error) {
	d, err := rundir.Open(root)
	if err != nil {
		return nil, err
	}
	events, err := d.ReadTimeline()
	if err != nil && len(events) == 0 {
		return nil, err
	}
	r := &Run{Dir: d, Events: events, RunID: filepath.Base(root), FlowEnd: -1}
	if data, err := d.ReadFile("experiment.yaml", limits.MaxManifestBytes); err == nil {
		if x, ps := experiment.Parse(d.ExperimentFile(), data); x != nil && ps.Err() == nil {
			r.Experiment = x
		}
	} else if rundir.IsEscape(err) {
		return nil, err
	}
	// The adapter only adds secrets to redact; one that cannot be read
	// (or leads outside) is named by the pages that show it.
	if data, err := d.ReadFile("adapter.yaml", limits.MaxManifestBytes); err == nil {
		if a, ps := adapter.Parse(d.AdapterFile(), data); a != nil && ps.Err() == nil {
			r.adapter = a
		}
	}
	r.Redact = redact.For(nil, r.Experiment, r.adapter)
	var m rundir.Manifest
	if err := d.ReadJSONFile("manifest.json", &m); err == nil {
		r.Manifest = &m
		if m.RunID != "" {
			r.RunID = m.RunID
		}
	} else if rundir.IsEscape(err) {
		return nil, err
	}
	var v rundir.Verdict
	if err := d.ReadJSONFile("verdict.json", &v); err == nil {
		if len(v.Checks) > limits.MaxChecks {
			return nil, fmt.Errorf("%s has %d check results; the harness reads at most %d", d.VerdictFile(), len(v.Checks), limits.MaxChecks)
		}
		r.Verdict = &v
	} else if rundir.IsEscape(err) {
		return nil, err
	}
	if len(events) > 0 {
		r.Start = events[0].TS.Add(-time.Duration(events[0].T * float64(time.Second)))
		r.End = events[len(events)-1].T
	}
	r.build()
	files, _ := d.Glob("system/metrics/*.jsonl")
	if len(files) > limits.MaxSources {
		return nil, fmt.Errorf("%s has %d metrics sources; the harness reads at most %d", d.Path("system", "metrics"), len(files), limits.MaxSources)
	}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".jsonl")
		if !manifest.ValidName(name) {
			return nil, fmt.Errorf("%s: %q is not a valid metrics source name (%s)", d.Path(f), name, manifest.NameRule)
		}
		r.Sources = append(r.Sources, name)
	}
	sort.Strings(r.Sources)
	return r, nil
}

func (r *Run) build() {
	nodes := map[string]*Bar{}
	ops := map[string]*OpRun{}
	insts := map[string]*Instance{}
	var order []string
	inst := func(w, name string) *Instance {
		if in, ok := insts[name]; ok {
			return in
		}
		_, idx, _ := experiment.SplitInstance(name)
		in := &Instance{Workload: w, Name: name, Index: idx, Created: -1}
		insts[name] = in
		order = append(order, name)
		return in
	}
	for _, e := range r.Events {
		switch e.Name {
		case "node.started":
			b := &Bar{Node: e.String("node"), Kind: e.String("kind"), Label: e.String("name"), Start: e.T, End: -1}
			r.Nodes = append(r.Nodes, *b)
			nodes[b.Node] = &r.Nodes[len(r.Nodes)-1]
		case "node.finished":
			// Nodes inside a repeat run many times; close the latest open one.
			for i := len(r.Nodes) - 1; i >= 0; i-- {
				if r.Nodes[i].Node == e.String("node") && r.Nodes[i].End < 0 {
					r.Nodes[i].End = e.T
					ok, _ := e.Get("ok").(bool)
					r.Nodes[i].OK = ok
					break
				}
			}
		case "operation.started":
			op := OpRun{Name: e.String("operation"), Uses: e.String("uses"), Start: e.T, End: -1, Open: true,
				Target: rundir.TargetText(e.Get("target")), Scope: e.String("scope")}
			if d, err := time.ParseDuration(e.String("duration")); err == nil && d > 0 {
				op.Duration = d.Seconds()
			}
			fmt.Sscan(e.String("run"), &op.Run)
			if l, ok := e.Get("instances").([]any); ok {
				for _, x := range l {
					op.Targets = append(op.Targets, rundir.ValueString(x))
				}
			}
			r.Operations = append(r.Operations, op)
			ops[op.Name+"#"+e.String("run")] = &r.Operations[len(r.Operations)-1]
			for _, tgt := range op.Targets {
				if in, ok := insts[tgt]; ok {
					in.Faults = append(in.Faults, op.Name)
				}
			}
		case "operation.finished", "operation.reverted":
			key := e.String("operation") + "#" + e.String("run")
			op := ops[key]
			if op == nil {
				// Reverts at the flow's end carry no run: close the latest.
				for i := len(r.Operations) - 1; i >= 0; i-- {
					if r.Operations[i].Name == e.String("operation") && r.Operations[i].Open {
						op = &r.Operations[i]
						break
					}
				}
			}
			if op != nil {
				op.End, op.Open = e.T, false
				op.Reverted = op.Reverted || e.Name == "operation.reverted"
			}
		case "instance.created":
			in := inst(e.String("workload"), e.String("instance"))
			if in.Created < 0 {
				in.Created = e.T
			}
		case "instance.state":
			in := inst(e.String("workload"), e.String("instance"))
			if in.Created < 0 {
				in.Created = e.T
			}
			if n := len(in.Segments); n > 0 && in.Segments[n-1].End < 0 {
				in.Segments[n-1].End = e.T
			}
			in.Segments = append(in.Segments, Segment{State: e.String("state"), Reason: e.String("reason"), Start: e.T, End: -1})
			in.Final = e.String("state")
		case "instance.collected":
			in := inst(e.String("workload"), e.String("instance"))
			if v := e.Get("exit_code"); v != nil {
				var code int
				if _, err := fmt.Sscan(rundir.ValueString(v), &code); err == nil {
					in.ExitCode = &code
				}
			}
		}
	}
	for i := range r.Nodes {
		if r.Nodes[i].Node == "flow" && r.Nodes[i].End >= 0 {
			r.FlowEnd = r.Nodes[i].End
		}
		if r.Nodes[i].End < 0 {
			r.Nodes[i].End = r.End
		}
	}
	for i := range r.Operations {
		if r.Operations[i].End < 0 {
			r.Operations[i].End = r.End
		}
	}
	for _, name := range order {
		in := insts[name]
		// A terminal state lasts an instant; anything else runs to the end.
		for i := range in.Segments {
			s := &in.Segments[i]
			if s.End < 0 {
				if s.State == "Succeeded" || s.State == "Failed" {
					s.End = s.Start
				} else {
					s.End = r.End
				}
			}
		}
		r.Instances = append(r.Instances, *in)
	}
	rank := map[string]int{}
	if r.Experiment != nil {
		for i, w := range r.Experiment.Workloads {
			rank[w.Name] = i
		}
	}
	r.NamedTargets = buildTargets(r)
	sort.SliceStable(r.Instances, func(i, j int) bool {
		a, b := r.Instances[i], r.Instances[j]
		if rank[a.Workload] != rank[b.Workload] {
			return rank[a.Workload] < rank[b.Workload]
		}
		return a.Index < b.Index
	})
}

// Scrapes reads one metrics source.
func (r *Run) Scrapes(source string) ([]rundir.Scrape, error) {
	return r.Dir.ReadScrapes(source)
}

// Types reads a source's family types (name -> type).
func (r *Run) Types(source string) map[string]string {
	var raw map[string]struct {
		Type string `json:"type"`
		Help string `json:"help"`
	}
	out := map[string]string{}
	if r.Dir.ReadJSONFile("system/metrics/"+source+".types.json", &raw) == nil {
		for k, v := range raw {
			out[k] = v.Type
		}
	}
	return out
}

// Title is the experiment's title, or its id.
func (r *Run) Title() string {
	if r.Experiment != nil && r.Experiment.Title != "" {
		return r.Experiment.Title
	}
	return r.ExperimentID()
}

// ExperimentID is the experiment's id.
func (r *Run) ExperimentID() string {
	if r.Experiment != nil {
		return r.Experiment.ID
	}
	if r.Manifest != nil {
		return r.Manifest.Experiment.ID
	}
	return filepath.Base(filepath.Dir(r.Dir.Root))
}

// VerdictText is the verdict, or "no verdict" for a run that never wrote
// one.
func (r *Run) VerdictText() string {
	if r.Verdict == nil {
		return "no verdict"
	}
	return r.Verdict.Verdict
}

// Exists reports whether a file exists in the run directory (and does not
// lead out of it).
func (r *Run) Exists(rel string) bool {
	_, err := r.Dir.Stat(rel)
	return err == nil
}
