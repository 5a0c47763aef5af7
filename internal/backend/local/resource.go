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

// ownShare is the groups of its own that resource faults on one handle
// share: the first makes them and moves the processes in, the last one
// reverted moves them back and removes them, so faults held at once (a
// CPU limit and memory pressure) act on the same processes.
type ownShare struct {
	// mu guards the fields below it.
	mu    sync.Mutex
	own   *cgroup.Own
	users int
	// oomBase is the OOM kill count when the groups were made; oom is set
	// once an OOM kill was seen in them.
	oomBase uint64
	oom     bool
}

// resState is what an instance knows of the resource faults on it, so its
// end can say it was the OOM killer.
type resState struct{ ownShare }

// look records an OOM kill in the groups, if there was one since they
// were made; the caller holds mu.
func (o *ownShare) look() {
	if o.own == nil {
		return
	}
	if u, err := cgroup.ReadUsage(o.own.Place); err == nil && u.OOMKills > o.oomBase {
		o.oom = true
	}
}

// oomKilled reports whether the OOM killer killed in the groups of the
// resource faults on the instance.
func (r *resState) oomKilled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.look()
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
	return processResources(ctx, p, p.Pid, p.Members, "instance "+in.spec.Name, need, &in.res.ownShare)
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
	v, _ := targetShares.LoadOrStore(t, &ownShare{})
	return processResources(ctx, p, pid, list, "target "+t.name, need, v.(*ownShare))
}

// targetShares holds each process target's ownShare (a target lives as
// long as its run's backend).
var targetShares sync.Map // *target -> *ownShare

// processResources makes groups of its own for the processes list
// returns (pid is one of them; p, when not nil, is what started them, in
// a v2 leaf of its own), or joins those another fault on them made, and
// moves the processes in.
func processResources(ctx context.Context, p *proc.Process, pid int, list func() ([]int, error), what string, need backend.ResourceNeed, share *ownShare) (backend.Resources, error) {
	share.mu.Lock()
	defer share.mu.Unlock()
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return backend.Resources{}, err
	}
	res := backend.Resources{What: fmt.Sprintf("%s (pid %d)", what, pid), Pid: pid, Root: "/"}
	if share.own == nil {
		leaf := ""
		if p != nil && p.Cgroup() != nil {
			leaf = p.Cgroup().Path
		}
		own, err := cgroup.MakeOwn(h, pid, leaf, need.Name, need.Made)
		if own != nil && len(own.Dirs) > 0 && err != nil {
			return res, errors.Join(err, own.Release(ctx))
		}
		if err != nil {
			return res, err
		}
		if len(own.Place.Dirs) == 0 {
			return res, fmt.Errorf("%s: %w: this machine has none of the cpu, memory, io and pids controllers where the harness can write", what, cgroup.ErrNoController)
		}
		u, _ := cgroup.ReadUsage(own.Place)
		share.own, share.users, share.oomBase = own, 0, u.OOMKills
	} else if need.Made != nil {
		// Each fault journals the groups it uses: whichever is reverted
		// last, chaos cleanup can still release them.
		for _, d := range share.own.Dirs {
			if err := need.Made(d); err != nil {
				return res, err
			}
		}
	}
	own := share.own
	share.users++
	res.Place = own.Place
	res.Release = func(ctx context.Context) error {
		share.mu.Lock()
		defer share.mu.Unlock()
		share.users--
		if share.users > 0 || share.own != own {
			return nil
		}
		share.look()
		share.own = nil
		return own.Release(ctx)
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
	return res, nil
}

// Processes are the instance's processes, for the clock faults.
func (in *instance) Processes(ctx context.Context) (string, []int, error) {
	p, _, down, ended := in.current()
	if ended || down {
		return "", nil, fmt.Errorf("instance %s is not running", in.spec.Name)
	}
	pids, err := p.Members()
	return "instance " + in.spec.Name, pids, err
}

// Processes are the processes of a target, for the clock faults: its pid
// and descendants, or every process of its cgroup when the run started it
// in one. An external target's too: a fake clock moves nothing and is
// undone at the revert (or by chaos cleanup).
func (t *target) Processes(ctx context.Context) (string, []int, error) {
	pid, err := t.livePid()
	if err != nil {
		return "", nil, err
	}
	if c := t.contained(); c != nil {
		pids, err := c.Members()
		return "target " + t.name, pids, err
	}
	return "target " + t.name, append([]int{pid}, proc.Descendants(pid)...), nil
}
