// Package local is the process backend: an instance is a process group on
// this machine running the harness's wrapper and the workload's script in
// the instance's own output directory, which lives in the run directory,
// so collecting it costs nothing and it survives restarts. It also acts on
// named process targets (a pid file and hooks), and, opened in every run,
// captures which of the run's processes outlived it.
package local

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/proc"
)

// Name is the backend's name in an adapter's backend field.
const Name = "process"

//go:embed local.yaml
var builtinAdapter []byte

func init() {
	backend.Register(backend.Registration{
		Name:      Name,
		Doc:       "an instance is a process group on this machine; targets are processes with a pid file",
		Instances: backend.Process,
		Targets:   []backend.Kind{backend.Process},
		Shared:    []backend.Kind{backend.Process},
		Always:    true,
		Open: func(ctx context.Context, run *backend.Run) (backend.Backend, error) {
			return New(run), nil
		},
		Cleanup:  cleanup,
		Adapters: map[string][]byte{"local.yaml": builtinAdapter},
	})
}

// Backend starts instances through the run's process supervisor and keeps
// the run's process targets.
type Backend struct {
	run *backend.Run

	mu      sync.Mutex
	targets map[string]*target
}

// New returns a local backend for run.
func New(run *backend.Run) *Backend { return &Backend{run: run, targets: map[string]*target{}} }

// Create starts the instance's wrapper. The Created and Running states are
// reported around the start, so even an instance that lives 20 ms shows all
// of its states.
func (b *Backend) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	for _, d := range []string{spec.OutputDir, spec.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	in := &instance{sup: b.run.Sup, spec: spec, done: make(chan struct{})}
	spec.OnState(backend.Created, "")
	if err := in.start(); err != nil {
		spec.OnState(backend.Failed, "StartFailed")
		close(in.done)
		return nil, err
	}
	return in, nil
}

// Close does nothing; the supervisor is the engine's.
func (b *Backend) Close() error { return nil }

// OpenTarget returns a named process target.
func (b *Backend) OpenTarget(ctx context.Context, name string, spec *adapter.Target) (backend.Target, error) {
	if spec.Type != adapter.TypeProcess {
		return nil, fmt.Errorf("target %s is a %s, not a process", name, spec.Type)
	}
	t := &target{b: b, name: name, spec: spec}
	b.mu.Lock()
	b.targets[name] = t
	b.mu.Unlock()
	return t, nil
}

// Capture writes system/targets.json (each process target's pid, state and
// health at the end of the run, taken before a target the run owns was
// stopped), copies each target's own log to logs/<target>.log, and writes
// system/leaked-processes.txt and system/frozen-processes.txt.
func (b *Backend) Capture(ctx context.Context, systemDir string) error {
	b.captureTargets(ctx)
	for _, t := range b.sortedTargets() {
		t.copyLog()
	}
	b.captureProcesses()
	return nil
}

func (b *Backend) sortedTargets() []*target {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*target, 0, len(b.targets))
	for _, name := range slices.Sorted(maps.Keys(b.targets)) {
		out = append(out, b.targets[name])
	}
	return out
}

// cleanup kills the processes a run left behind, found by the run's
// CHAOS_RUN_ID marker: those of runID, else of every run whose harness is
// gone.
func cleanup(ctx context.Context, c backend.Cleanup) error {
	runID, dryRun, found := c.RunID, c.DryRun, c.Found
	marked, err := proc.ListMarked("CHAOS_RUN_ID")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	var errs []string
	for _, m := range marked {
		switch {
		case runID != "" && m.RunID != runID:
			continue
		case runID == "" && (m.HarnessPid == 0 || proc.Alive(m.HarnessPid)):
			continue // its harness still runs, or it is not the harness's
		}
		verb := "killed"
		if dryRun {
			verb = "would kill"
		} else if err := proc.KillMarked(m.Pid, "CHAOS_RUN_ID="+m.RunID); err != nil {
			errs = append(errs, fmt.Sprintf("run %s: pid %d: %v", m.RunID, m.Pid, err))
			continue
		}
		found(fmt.Sprintf("%s pid %d (%s) of run %s", verb, m.Pid, m.Cmdline, m.RunID))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
