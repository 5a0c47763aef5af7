package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// PreflightResult is one preflight check's outcome.
type PreflightResult struct {
	Check  string
	OK     bool
	Detail string
}

// Preflight runs only what precedes a flow: it starts the targets a run
// would own, runs the adapter's and the experiment's preflight checks, and
// stops those targets again. It keeps nothing: its scratch run directory is
// removed. n/a experiments are not touched.
func Preflight(ctx context.Context, cfg Config) (results []PreflightResult, na []string, err error) {
	x, a := cfg.Experiment, cfg.Adapter
	res := binding.Bind(x, a)
	switch res.Status {
	case binding.Invalid:
		return nil, nil, res.Problems
	case binding.NA:
		return nil, res.Reasons, nil
	}
	tmp, err := os.MkdirTemp("", "chaos-preflight-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	runID := rundir.NewRunID(time.Now())
	dir, err := rundir.Create(tmp, x.ID, runID)
	if err != nil {
		return nil, nil, err
	}
	abs, _ := filepath.Abs(dir.Root)
	dir = &rundir.Dir{Root: abs}
	rec, err := rundir.NewRecorder(dir, time.Now())
	if err != nil {
		return nil, nil, err
	}
	defer rec.Close()
	if cfg.Log != nil {
		rec.AddSink(func(ev rundir.Event) {
			fmt.Fprintf(cfg.Log, "%s %s %s\n", rundir.LogTime(ev.TS.Local()), ev.Name, ev.FieldsJSON())
		})
	}
	sup, err := proc.NewSupervisor("CHAOS_RUN_ID=" + runID)
	if err != nil {
		return nil, nil, err
	}
	defer sup.Close()
	e := &engine{cfg: cfg, x: x, a: a, dir: dir, rec: rec, runID: runID, sup: sup, runner: shell.Runner{Sup: sup}, targets: map[string]*targetHandle{}, ctargets: map[string]*targetHandle{}}
	if cfg.Seed != nil {
		e.seed = *cfg.Seed
	}
	e.setupEnv()
	e.redact = NewRedactor(e.baseEnv)
	for _, name := range a.TargetNames() {
		if t := a.Target(name); t.Type == "process" {
			e.targets[name] = &targetHandle{e: e, name: name, spec: t}
		}
	}
	if e.startOwnedTargets(ctx) {
		e.dockerPreflight(ctx)
		e.preflight(ctx)
	}
	for _, name := range a.TargetNames() {
		if t := e.targets[name]; t != nil && t.spec.Lifecycle == "run" {
			if err := t.stop(context.WithoutCancel(ctx), defaultGrace); err != nil {
				e.errorf("stopping target %s: %v", name, err)
			}
		}
	}
	events, err := rundir.ReadTimeline(dir.TimelineFile())
	if err != nil {
		return nil, nil, err
	}
	for _, ev := range events {
		switch ev.Name {
		case "check.finished":
			ok, _ := ev.Get("ok").(bool)
			results = append(results, PreflightResult{Check: ev.String("check"), OK: ok, Detail: ev.String("detail")})
		case "run.error":
			results = append(results, PreflightResult{Check: "harness", Detail: ev.String("error")})
		}
	}
	return results, nil, nil
}
