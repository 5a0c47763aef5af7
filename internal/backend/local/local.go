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
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
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
		// unshare --time before the wrapper (netns.go).
		TimeNamespaces: true,
		// Network faults: netns.go.
		Support:       support,
		TargetSupport: targetSupport,
		FSLayer:       true,
		Check:         check,
		Open:          open,
		Cleanup:       cleanup,
		Adapters:      map[string][]byte{"local.yaml": builtinAdapter},
	})
}

// Backend starts instances through the run's process supervisor and keeps
// the run's process targets.
type Backend struct {
	run *backend.Run

	mu      sync.Mutex
	targets map[string]*target
	// leaked lists processes found outliving their instance's script when
	// it was deleted (and killed then), for system/leaked-processes.txt.
	leaked []string
	// net is the run's own network, when the adapter asks for one
	// (netns.go).
	net *localNet
}

// New returns a local backend for run.
func New(run *backend.Run) *Backend { return &Backend{run: run, targets: map[string]*target{}} }

// Create starts the instance's wrapper. The Created and Running states are
// reported around the start, so even an instance that lives 20 ms shows all
// of its states.
func (b *Backend) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	for _, d := range []string{filepath.Join(spec.OutputDir, ".chaos"), spec.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	in := &instance{sup: b.run.Sup, spec: spec, done: make(chan struct{}), leaked: b.noteLeaked}
	spec.OnState(backend.Created, "")
	err := b.joinNetwork(ctx, in)
	if err == nil {
		err = in.start()
	}
	if err != nil {
		spec.OnState(backend.Failed, "StartFailed")
		close(in.done)
		return nil, err
	}
	return in, nil
}

// Close lets go of the run's network, if it has one; the supervisor is
// the engine's.
func (b *Backend) Close() error { return b.closeNetwork() }

// noteLeaked keeps what of an ended instance was still running when it was
// deleted, described as leaked-processes.txt has it, and records
// instance.leaked.
func (b *Backend) noteLeaked(instance string, pids []int) {
	var lines []string
	for _, pid := range pids {
		lines = append(lines, describe(pid))
	}
	b.mu.Lock()
	b.leaked = append(b.leaked, lines...)
	b.mu.Unlock()
	b.run.Record("instance.leaked", rundir.F("instance", instance), rundir.F("pids", pids))
}

// Preflight says how the run contains its processes: in cgroup mode with
// the run's cgroup tree, else in process-group mode and why. Either mode
// works, so the check passes; its detail is what a reader of the run needs
// to know what kill, freeze and gone meant (docs/faults.md).
//
// It is a check of runs whose system is processes on this machine: the
// adapter's backend is this one, or it has process targets.
func (b *Backend) Preflight(ctx context.Context) []backend.Check {
	if a := b.run.Adapter; a != nil && a.Backend != Name && !hasProcessTargets(a) {
		return nil
	}
	m := b.run.Sup.ModeInfo()
	detail := string(m.Mode) + ": "
	if m.Mode == proc.ModeCgroup {
		detail += "every process of the run in its own cgroup below " + m.Cgroup
	} else {
		detail += "every process of the run in its own process group, with the run's marker (cgroup v2 not used: " + m.Reason + ")"
	}
	return append([]backend.Check{{Name: "processes", OK: true, Detail: detail}}, b.networkChecks()...)
}

func hasProcessTargets(a *adapter.Adapter) bool {
	for _, name := range a.TargetNames() {
		if a.Target(name).Type == adapter.TypeProcess {
			return true
		}
	}
	return false
}

// Sweep kills what is left of the run's processes after the captures
// (which reported them as leaks): in cgroup mode everything in the run's
// cgroup tree, whatever it did to its session or environment; in either
// mode every process that carries the run's marker. It waits until they
// are gone; what is left then is an error.
func (b *Backend) Sweep(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	left, err := b.run.Sup.KillLeftovers(sctx)
	if len(left) > 0 {
		pids := make([]int, 0, len(left))
		for _, l := range left {
			pids = append(pids, l.Pid)
		}
		b.run.Record("processes.swept", rundir.F("count", len(left)), rundir.F("pids", pids))
	}
	if err != nil {
		return fmt.Errorf("killing what is left of the run's processes: %w", err)
	}
	return nil
}

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

// cleanup kills the processes a run left behind: first, in cgroup mode,
// everything in the cgroup trees of runID (else of every run whose harness
// is gone), whatever those processes did to their session or environment,
// and removes the trees; then the processes found by the run's
// CHAOS_RUN_ID marker.
func cleanup(ctx context.Context, c backend.Cleanup) error {
	runID, dryRun, found := c.RunID, c.DryRun, c.Found
	var errs []string
	// What the run changed around its processes (network rules, resource
	// limits) is restored by chaos cleanup before any backend's cleanup,
	// whatever the backend (fault.RestoreHost).
	if err := cleanupCgroups(ctx, runID, dryRun, found); err != nil {
		errs = append(errs, err.Error())
	}
	marked, err := proc.ListMarked("CHAOS_RUN_ID")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	for _, m := range marked {
		switch {
		case runID != "" && m.RunID != runID:
			continue
		case runID == "" && (m.HarnessPid == 0 || m.HarnessRuns()):
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

// cleanupCgroups kills and removes the cgroup trees of runID, or, without
// one, of every run whose harness is gone (cgroup.SweepStale). A tree whose
// harness still runs is left alone unless runID names it. A run's tree is
// killed as one, until it is empty (cgroup.Group.KillWait): that reaches
// every process in it, whatever it did to its session or environment,
// frozen ones, ones forked meanwhile and ones whose main thread has exited.
func cleanupCgroups(ctx context.Context, runID string, dryRun bool, found func(string)) error {
	info := cgroup.Detect()
	if !info.Usable {
		return nil // process-group mode: nothing of ours in cgroups
	}
	runs, err := cgroup.ListRuns(info)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// What each tree holds, described before anything is killed.
	cmds := map[int]string{}
	var picked []*cgroup.Run
	for _, r := range runs {
		switch {
		case runID != "" && r.RunID != cgroup.SafeName(runID, 200):
			continue
		case runID == "" && r.HarnessAlive():
			continue
		}
		picked = append(picked, r)
		pids, _ := r.Procs()
		for _, pid := range pids {
			cmds[pid] = cmdline(pid)
		}
	}
	report := func(verb string, r *cgroup.Run, pids []int) {
		for _, pid := range pids {
			found(fmt.Sprintf("%s pid %d (%s) of run %s (in cgroup %s)", verb, pid, cmds[pid], r.RunID, r.Path))
		}
	}
	switch {
	case dryRun:
		for _, r := range picked {
			pids, _ := r.Procs()
			report("would kill", r, pids)
		}
		return nil
	case runID == "":
		swept, procs, err := cgroup.SweepStale(ctx, info)
		for i, r := range swept {
			report("killed", r, procs[i])
		}
		return err
	}
	var errs []error
	for _, r := range picked {
		pids, _ := r.Procs()
		if err := r.Thaw(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := r.KillWait(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
		report("killed", r, pids)
	}
	return errors.Join(errs...)
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
