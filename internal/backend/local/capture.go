package local

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

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

// state reads the target's pid, process state and health now.
func (t *target) state(ctx context.Context) targetState {
	st := targetState{Name: t.name, Type: t.spec.Type}
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
	return st
}

// captureTargets writes system/targets.json: each process target's state at
// the end of the run (for a target the run stopped, just before the stop).
func (b *Backend) captureTargets(ctx context.Context) {
	out := []targetState{}
	for _, t := range b.sortedTargets() {
		t.mu.Lock()
		snap := t.snap
		t.mu.Unlock()
		if snap == nil {
			snap = ptr(t.state(ctx))
		}
		out = append(out, *snap)
	}
	if err := rundir.WriteJSON(b.run.Dir.Path("system", "targets.json"), out); err != nil {
		b.run.Errorf("writing system/targets.json: %v", err)
	}
}

// captureProcesses writes system/leaked-processes.txt (processes of the
// run still alive, not dying, after cleanup: in cgroup mode everything in the run's
// cgroup tree, whatever it did to its session or environment, then, in
// either mode, every process carrying the run's marker; and what of an
// ended instance was still running when it was deleted) and
// system/frozen-processes.txt (any of them, or any target, left stopped:
// state T, or in a frozen cgroup). Targets the run restarted but does not
// own are meant to outlive it and are not leaks.
func (b *Backend) captureProcesses() {
	keep := map[int]bool{}
	var targetPids []int
	for _, t := range b.sortedTargets() {
		if pid, err := t.pid(); err == nil && proc.Alive(pid) {
			targetPids = append(targetPids, pid)
			if !t.owned() {
				keep[pid] = true
				for _, d := range proc.Descendants(pid) {
					keep[d] = true
				}
			}
		}
	}
	left, err := b.run.Sup.Leftovers()
	if err != nil {
		b.run.Errorf("listing the run's processes: %v", err)
	}
	frozenCg := b.frozenCgroups()
	b.mu.Lock()
	leaked := append([]string(nil), b.leaked...)
	b.mu.Unlock()
	var frozen []string
	var candidates []int
	for _, l := range left {
		if !keep[l.Pid] && l.Pid != os.Getpid() {
			candidates = append(candidates, l.Pid)
		}
	}
	livesOn := map[int]bool{}
	for _, pid := range proc.Left(candidates) {
		livesOn[pid] = true
	}
	seen := map[int]bool{}
	for _, l := range left {
		if !livesOn[l.Pid] {
			continue
		}
		seen[l.Pid] = true
		leaked = append(leaked, describe(l.Pid))
		if stopped(l.Pid, frozenCg) {
			frozen = append(frozen, describe(l.Pid))
		}
	}
	for _, pid := range targetPids {
		if !seen[pid] && stopped(pid, frozenCg) {
			frozen = append(frozen, describe(pid))
		}
	}
	write := func(name string, lines []string) {
		body := strings.Join(lines, "\n")
		if body != "" {
			body += "\n"
		}
		if err := rundir.WriteFileAtomic(b.run.Dir.Path("system", name), []byte(body)); err != nil {
			b.run.Errorf("writing system/%s: %v", name, err)
		}
	}
	write("leaked-processes.txt", leaked)
	write("frozen-processes.txt", frozen)
	if len(leaked) > 0 {
		b.run.Record("processes.leaked", rundir.F("count", len(leaked)))
	}
}

// frozenCgroups returns the cgroup paths (as /proc/PID/cgroup shows them)
// of the run's frozen cgroups: a process frozen by cgroup.freeze shows
// state S, not T.
func (b *Backend) frozenCgroups() map[string]bool {
	run := b.run.Sup.CgroupRun()
	if run == nil {
		return nil
	}
	out := map[string]bool{}
	var walk func(g *cgroup.Group)
	walk = func(g *cgroup.Group) {
		if f, err := g.Frozen(); err == nil && f {
			out[g.CgroupPath()] = true
		}
		kids, _ := g.Children()
		for _, k := range kids {
			walk(k)
		}
	}
	walk(run.Group)
	return out
}

// stopped reports whether pid is stopped: state T (SIGSTOP) or t, or in one
// of the frozen cgroups.
func stopped(pid int, frozenCg map[string]bool) bool {
	if st, err := proc.State(pid); err == nil && (st == 'T' || st == 't') {
		return true
	}
	if len(frozenCg) == 0 {
		return false
	}
	cg, err := cgroup.CgroupOf(pid)
	return err == nil && frozenCg[cg]
}

// describe is one line of leaked-processes.txt: pid, state and command.
func describe(pid int) string {
	st, _ := proc.State(pid)
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("%d %c %s", pid, st, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
}
