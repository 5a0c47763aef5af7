package engine

import (
	"context"
	"os"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// PreflightResult is one preflight check's outcome.
type PreflightResult struct {
	Check  string
	OK     bool
	Detail string
}

// Preflight does what a run does before its flow, on the same path: it
// starts the OTLP receiver and the targets a run would own, runs the
// backends', the adapter's and the experiment's preflight checks, and
// stops those targets again. It keeps nothing: its scratch run directory
// is removed. n/a experiments are not touched.
func Preflight(ctx context.Context, cfg Config) (results []PreflightResult, na []string, err error) {
	if na, err := bind(cfg); err != nil || na != nil {
		return nil, na, err
	}
	tmp, err := os.MkdirTemp("", "chaos-preflight-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	runID := rundir.NewRunID(time.Now())
	dir, err := rundir.Create(tmp, cfg.Experiment.ID, runID)
	if err != nil {
		return nil, nil, err
	}
	e, err := newEngine(cfg, dir, runID, time.Now())
	if err != nil {
		return nil, nil, err
	}
	defer e.rec.Close()
	if cfg.Log != nil {
		e.logTo(cfg.Log)
	}
	_, err = e.setUp(ctx)
	if err == nil {
		bg := context.WithoutCancel(ctx)
		e.stopOwnedTargets(bg)
		e.stopOTLP(bg)
	}
	e.tearDown()
	if err != nil {
		return nil, nil, err
	}
	events, err := rundir.ReadTimeline(e.dir.TimelineFile())
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
