package cli

import (
	"bytes"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// The engine configuration chaos run makes from its flags, decided apart
// from any run: where runs go, the harness log, the seed.
func TestRunConfig(t *testing.T) {
	x, a := &experiment.Experiment{ID: "x"}, &adapter.Adapter{ID: "local"}
	for _, c := range []struct {
		name    string
		cmd     runCmd
		env     []string
		runsDir string
		log     bool
	}{
		{"defaults", runCmd{}, nil, defaultRunsDir, true},
		{"CHAOS_RUNS_DIR", runCmd{}, []string{"CHAOS_RUNS_DIR=/r"}, "/r", true},
		{"--runs-dir over CHAOS_RUNS_DIR", runCmd{runsDir: "/flag"}, []string{"CHAOS_RUNS_DIR=/r"}, "/flag", true},
		{"--quiet drops the harness log", runCmd{vb: verbosity{quiet: true}}, nil, defaultRunsDir, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var errb bytes.Buffer
			c.cmd.s = &streams{out: &bytes.Buffer{}, err: &errb, st: &State{Env: c.env}}
			cfg := c.cmd.config(x, a)
			if cfg.RunsDir != c.runsDir || (cfg.Log != nil) != c.log || cfg.Progress != nil {
				t.Errorf("runs dir %q, log %v, progress %v; want %q, %v, none (not a terminal)", cfg.RunsDir, cfg.Log != nil, cfg.Progress != nil, c.runsDir, c.log)
			}
			if cfg.Experiment != x || cfg.Adapter != a || cfg.Seed != nil {
				t.Errorf("experiment, adapter or seed not as given: %+v", cfg)
			}
		})
	}
	var seeded runCmd
	if err := seeded.seed.Set("42"); err != nil {
		t.Fatal(err)
	}
	seeded.s = &streams{out: &bytes.Buffer{}, err: &bytes.Buffer{}, st: &State{}}
	if cfg := seeded.config(x, a); cfg.Seed == nil || *cfg.Seed != 42 {
		t.Errorf("--seed 42 gave %v", cfg.Seed)
	}
}
