package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// cleanup leaves the system as the run found it: it reverts every
// operation still active, stops and removes every instance, waits for the
// adapter's settle time, captures what adapter checks read, and stops the
// targets the run started. An error in one step never skips the others.
func (e *engine) cleanup(ctx context.Context) {
	e.mu.Lock()
	reverts := append([]*revert(nil), e.reverts...)
	e.mu.Unlock()
	for i := len(reverts) - 1; i >= 0; i-- {
		r := reverts[i]
		e.mu.Lock()
		done := r.done
		e.mu.Unlock()
		if done {
			continue
		}
		if err := e.runRevert(ctx, r); err != nil {
			e.errorf("reverting operation %s (%s): %v", r.op, r.uses, err)
			continue
		}
		if experiment.IsFault(r.uses) {
			e.rec.Record("operation.reverted", rundir.F("operation", r.op), rundir.F("uses", r.uses), rundir.F("run", r.run), rundir.F("when", "flow end"))
		}
	}

	for _, h := range e.reg.all(e.x) {
		e.reg.mu.Lock()
		inst, ended, deleted := h.inst, h.state.Terminal(), h.deleted
		e.reg.mu.Unlock()
		if inst == nil || deleted {
			continue
		}
		if !ended {
			e.rec.Record("instance.stopping", rundir.F("workload", h.workload), rundir.F("instance", h.name), rundir.F("reason", "flow ended"))
			// A backend that cannot kill leaves it to its delete.
			if err := inst.Kill(ctx); err != nil && !errors.Is(err, backend.ErrUnsupported) {
				e.errorf("stopping instance %s: %v", h.name, err)
			}
		}
		if err := e.finishInstance(ctx, h); err != nil {
			e.errorf("%v", err)
		}
	}
	if e.collectL != nil {
		e.collectL.Close()
	}
	e.stopObservers()
	e.stopOTLP(ctx)

	settle := e.a.Settle.D()
	if e.cfg.Settle != nil {
		settle = *e.cfg.Settle
	}
	if settle > 0 {
		e.rec.Record("settle.started", rundir.F("duration", settle.String()))
		_ = sleep(ctx, settle)
	}

	e.captureTargets(ctx)
	e.stopContainerTargets(ctx)
	if err := e.be.Capture(ctx, e.dir.SystemDir()); err != nil {
		e.errorf("capturing the backend's state: %v", err)
	}
	if e.docker != nil {
		// Beside hook-made instances the containers were the hooks' to
		// make; capture them too, for the adapter checks.
		if e.be != backend.Backend(e.docker) {
			if err := e.docker.Capture(ctx, e.dir.SystemDir()); err != nil {
				e.errorf("capturing the run's containers: %v", err)
			}
		}
		// What is left of the run's containers goes now, before the checks,
		// and a container that cannot be removed is the run's error.
		if _, err := e.docker.Sweep(ctx); err != nil {
			e.errorf("removing the run's remaining containers: %v", err)
		}
	}
	for _, name := range e.a.TargetNames() {
		t := e.targets[name]
		if t == nil {
			continue
		}
		if t.spec.Lifecycle == "run" {
			if err := t.stop(ctx, defaultGrace); err != nil {
				e.errorf("stopping target %s: %v", name, err)
			} else {
				e.rec.Record("target.stopped", rundir.F("target", name))
			}
		}
		t.copyLog()
	}
	e.captureProcesses()
}

// targetState is one entry of system/targets.json.
type targetState struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Pid     int    `json:"pid,omitempty"`
	Alive   bool   `json:"alive"`
	State   string `json:"state,omitempty"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// captureTargets writes system/targets.json: each process target's pid,
// process state and health at the end of the run.
func (e *engine) captureTargets(ctx context.Context) {
	var out []targetState
	for _, name := range e.a.TargetNames() {
		t := e.targets[name]
		if t == nil {
			continue
		}
		st := targetState{Name: name, Type: t.spec.Type}
		if pid, err := t.pid(); err != nil {
			st.Error = err.Error()
		} else {
			st.Pid = pid
			st.Alive = proc.Alive(pid)
			if s, err := proc.State(pid); err == nil {
				st.State = string(s)
			}
		}
		hctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		st.Healthy = st.Alive && t.healthy(hctx)
		cancel()
		out = append(out, st)
	}
	if out == nil {
		out = []targetState{}
	}
	if err := rundir.WriteJSON(e.dir.Path("system", "targets.json"), out); err != nil {
		e.errorf("writing system/targets.json: %v", err)
	}
}

// captureProcesses writes system/leaked-processes.txt (processes started by
// this run, found by the run's marker, still alive after cleanup) and
// system/frozen-processes.txt (any of them, or any target, left stopped).
// Targets the run restarted but does not own are meant to outlive it and
// are not leaks.
func (e *engine) captureProcesses() {
	keep := map[int]bool{}
	var targetPids []int
	for _, t := range e.targets {
		if pid, err := t.pid(); err == nil && proc.Alive(pid) {
			targetPids = append(targetPids, pid)
			if t.spec.Lifecycle != "run" {
				keep[pid] = true
				for _, d := range proc.Descendants(pid) {
					keep[d] = true
				}
			}
		}
	}
	// Let the reaper take zombies of processes that just died.
	pids, err := proc.FindByMarker("CHAOS_RUN_ID=" + e.runID)
	if err != nil {
		e.errorf("listing the run's processes: %v", err)
	}
	var leaked, frozen []string
	seen := map[int]bool{}
	describe := func(pid int) string {
		st, _ := proc.State(pid)
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return fmt.Sprintf("%d %c %s", pid, st, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	sort.Ints(pids)
	for _, pid := range pids {
		if keep[pid] || pid == os.Getpid() {
			continue
		}
		seen[pid] = true
		leaked = append(leaked, describe(pid))
		if st, err := proc.State(pid); err == nil && (st == 'T' || st == 't') {
			frozen = append(frozen, describe(pid))
		}
	}
	for _, pid := range targetPids {
		if seen[pid] {
			continue
		}
		if st, err := proc.State(pid); err == nil && (st == 'T' || st == 't') {
			frozen = append(frozen, describe(pid))
		}
	}
	write := func(name string, lines []string) {
		body := strings.Join(lines, "\n")
		if body != "" {
			body += "\n"
		}
		if err := rundir.WriteFileAtomic(e.dir.Path("system", name), []byte(body)); err != nil {
			e.errorf("writing system/%s: %v", name, err)
		}
	}
	write("leaked-processes.txt", leaked)
	write("frozen-processes.txt", frozen)
	if len(leaked) > 0 {
		e.rec.Record("processes.leaked", rundir.F("count", len(leaked)))
	}
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}
