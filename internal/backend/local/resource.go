package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/proc"
)

// The resource faults on processes of this machine. An instance (or a
// target the run owns) is in a v2 leaf of its own in cgroup mode, but its
// v1 groups, where this machine's controllers are, are the harness's own:
// a limit written there would hold the harness too. So a resource fault
// makes groups of its own below them (cgroup.MakeOwn), moves every process
// of the instance in (what they fork stays there), and on revert moves
// them back and removes the groups. On a v2-only machine the instance's
// own leaf is limited, after the controllers are enabled on the run's
// directories, which hold no processes.

// resourceTargetSupport makes resource faults n/a on targets the run does
// not own: the harness never moves a process it did not start.
func resourceTargetSupport(name string, t *adapter.Target, fault string) string {
	if experiment.IsResourceFault(fault) && t.Lifecycle != "run" {
		return fmt.Sprintf("target %s is external: the harness never moves a process it did not start into cgroups of its own (a target the run owns, lifecycle: run, can be limited)", name)
	}
	return ""
}

// resState is what an instance knows of the resource faults on it, so its
// end can say it was the OOM killer.
type resState struct {
	// mu guards the fields below it.
	mu sync.Mutex
	// held are the memory groups of faults now on it, each with its OOM
	// kill count when the fault began.
	held map[*cgroup.Own]uint64
	// oom is set once an OOM kill was seen in one of them.
	oom bool
}

func (r *resState) add(o *cgroup.Own) {
	u, _ := cgroup.ReadUsage(o.Place)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[*cgroup.Own]uint64{}
	}
	r.held[o] = u.OOMKills
}

// seen checks o for an OOM kill; drop also forgets it.
func (r *resState) seen(o *cgroup.Own, drop bool) {
	u, err := cgroup.ReadUsage(o.Place)
	r.mu.Lock()
	defer r.mu.Unlock()
	if base, ok := r.held[o]; ok && err == nil && u.OOMKills > base {
		r.oom = true
	}
	if drop {
		delete(r.held, o)
	}
}

// oomKilled reports whether the OOM killer killed in a group of a
// resource fault on the instance.
func (r *resState) oomKilled() bool {
	r.mu.Lock()
	held := make([]*cgroup.Own, 0, len(r.held))
	for o := range r.held {
		held = append(held, o)
	}
	r.mu.Unlock()
	for _, o := range held {
		r.seen(o, false)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.oom
}

// endReason is the reason of an instance's end: OOMKilled when it failed
// and the OOM killer killed in its limited memory group (the wrapper's
// shell then exits 137 rather than dying of the signal itself).
func (in *instance) endReason(state backend.State, reason string) string {
	if state == backend.Failed && in.res.oomKilled() {
		return "OOMKilled"
	}
	return reason
}

// Resources are the instance's own groups, made for the fault.
func (in *instance) Resources(ctx context.Context, need backend.ResourceNeed) (backend.Resources, error) {
	p, _, down, ended := in.current()
	if ended || down {
		return backend.Resources{}, fmt.Errorf("instance %s is not running", in.spec.Name)
	}
	return processResources(ctx, p, p.Pid, p.Members, "instance "+in.spec.Name, need, &in.res)
}

// Resources are the groups of a target the run owns, made for the fault.
func (t *target) Resources(ctx context.Context, need backend.ResourceNeed) (backend.Resources, error) {
	if !t.owned() {
		return backend.Resources{}, fmt.Errorf("target %s: %w: it is external", t.name, backend.ErrUnsupported)
	}
	pid, err := t.livePid()
	if err != nil {
		return backend.Resources{}, err
	}
	list := func() ([]int, error) { return append([]int{pid}, proc.Descendants(pid)...), nil }
	var p *proc.Process
	if c := t.contained(); c != nil {
		p, list = c, c.Members
	}
	return processResources(ctx, p, pid, list, "target "+t.name, need, nil)
}

// processResources makes groups of its own for the processes list
// returns (pid is one of them; p, when not nil, is what started them, in
// a v2 leaf of its own) and moves them in.
func processResources(ctx context.Context, p *proc.Process, pid int, list func() ([]int, error), what string, need backend.ResourceNeed, rs *resState) (backend.Resources, error) {
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return backend.Resources{}, err
	}
	leaf := ""
	if p != nil && p.Cgroup() != nil {
		leaf = p.Cgroup().Path
	}
	own, err := cgroup.MakeOwn(h, pid, leaf, need.Name, need.Made)
	release := func(ctx context.Context) error {
		if own == nil {
			return nil
		}
		if rs != nil {
			rs.seen(own, true)
		}
		return own.Release(ctx)
	}
	res := backend.Resources{What: fmt.Sprintf("%s (pid %d)", what, pid), Pid: pid, Root: "/", Release: release}
	if err != nil {
		return res, err
	}
	res.Place = own.Place
	if len(own.Place.Dirs) == 0 {
		return res, fmt.Errorf("%s: %w: this machine has none of the cpu, memory, io and pids controllers where the harness can write", what, cgroup.ErrNoController)
	}
	// What is already charged elsewhere stays there; what the processes
	// use from here on is charged to the new groups.
	listLive := func() ([]int, error) {
		pids, err := list()
		return slices.DeleteFunc(pids, func(q int) bool { return !proc.Alive(q) }), err
	}
	if err := own.Move(ctx, listLive); err != nil && !errors.Is(err, context.Canceled) {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	if rs != nil {
		rs.add(own)
	}
	return res, nil
}
