// Package runners are the places a campaign's (and a hunt's) runs run that
// need the engine: this process. The campaign package decides how many
// runs, with which seeds, and what they add up to; a runner makes one run.
// (The Kubernetes runner, Jobs on a cluster, is with its backend:
// internal/backend/kubernetes/jobrunner.)
package runners

import (
	"context"
	"errors"
	"strings"

	"github.com/chaos-harness/chaos/internal/engine"
)

// Local makes each run in this process, as chaos run does: the engine,
// with the campaign directory as its runs directory. Runs under way at
// once are isolated as any two runs on one machine are: each has its own
// run id, process supervisor and cgroup tree, its own free loopback port
// per adapter port, and waits for the adapter's locks.
type Local struct {
	// Config is the template of every run: experiment, adapter, settle,
	// OTLP addresses, environment, working directory and command line.
	// Seed, RunsDir, Log and Progress are set per run.
	Config engine.Config
}

// errNoVerdict marks a run that ended without a verdict.
var errNoVerdict = errors.New("the run left no verdict")

// Run implements campaignrun.Executor.
func (l *Local) Run(ctx context.Context, dir string, index int, seed uint64) (string, string, error) {
	cfg := l.Config
	cfg.Seed = &seed
	cfg.RunsDir = dir
	cfg.Log, cfg.Progress = nil, nil
	var out *engine.Outcome
	var err error
	// One process never draws the same id twice in a second, but another
	// (a run or campaign beside this one) may; on that rare clash the
	// second tries again.
	for range 3 {
		out, err = engine.Run(ctx, cfg)
		out.Wait()
		if err == nil || !strings.Contains(err.Error(), "already exists") || out != nil && out.Dir != nil {
			break
		}
	}
	root := ""
	if out != nil && out.Dir != nil {
		root = out.Dir.Root
	}
	if err != nil {
		return root, "", err
	}
	if out.Verdict == nil {
		if len(out.NA) > 0 {
			return root, "", errors.New("n/a: " + strings.Join(out.NA, "; "))
		}
		return root, "", errNoVerdict
	}
	return root, "", nil
}
