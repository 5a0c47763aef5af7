package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// usesNetwork reports whether the experiment has a network fault.
func usesNetwork(x *experiment.Experiment) bool {
	for _, o := range x.Operations {
		if experiment.IsNetworkFault(o.Uses) {
			return true
		}
	}
	return false
}

// networkFaults lists the network faults the experiment uses.
func networkFaults(x *experiment.Experiment) []string {
	var out []string
	for _, o := range x.Operations {
		if experiment.IsNetworkFault(o.Uses) && !slices.Contains(out, o.Uses) {
			out = append(out, o.Uses)
		}
	}
	return out
}

// openNetwork makes the run's keeper of network rules, when the experiment
// has network faults.
func (e *engine) openNetwork() {
	if !usesNetwork(e.x) {
		return
	}
	e.net = netfault.NewManager(netfault.Config{
		RunID:     e.runID,
		SystemDir: e.dir.SystemDir(),
		Record:    func(name string, fields ...rundir.Field) { e.rec.Record(name, fields...) },
		NoNetem:   os.Getenv("CHAOS_NETEM") == "off",
	})
}

// networkPreflight is the preflight check of a run with network faults:
// the host's tools are there and the kernel does what the faults need.
func (e *engine) networkPreflight(ctx context.Context) (ok bool, detail string, run bool) {
	if e.net == nil {
		return false, "", false
	}
	ok, detail = netfault.Preflight(ctx, networkFaults(e.x))
	return ok, detail, true
}

// captureNetwork writes system/network.json, then removes what a revert
// failed to (a harness error).
func (e *engine) captureNetwork(ctx context.Context) {
	if e.net == nil {
		return
	}
	if err := e.net.WriteCapture(ctx, e.dir.SystemDir()); err != nil {
		e.errorf("capturing the network rules: %v", err)
	}
	if err := e.net.Sweep(ctx); err != nil {
		e.errorf("%v", err)
	}
}

// networkSpec is the rule of one application of a network fault (not a
// partition), its jitter drawn from the operation's stream.
func (e *engine) networkOp(o *experiment.Operation, run int, rng *rand.Rand) (fault.Op, error) {
	op := fault.Op{Operation: o.Name, Fault: o.Uses, Duration: o.Duration.D(), Run: run, Net: e.net}
	if o.Uses == experiment.FaultPartition {
		return op, nil
	}
	s, err := fault.NetworkSpec(o, rng.Uint64())
	if err != nil {
		return op, err
	}
	op.Network = s
	return op, nil
}

// partitionMembers lists a partition's members: the target's candidates
// after select, or the names network.members or network.groups give, each
// a workload (its live instances), an instance or a named target (its
// handles). With groups, it also returns each member's group.
func (e *engine) partitionMembers(ctx context.Context, o *experiment.Operation, rng *rand.Rand) (members []victim, group []int, err error) {
	n := o.Network
	if o.Target != nil {
		c, _, err := e.candidates(ctx, o)
		if err != nil {
			return nil, nil, err
		}
		members, err = choose(rng, o, c)
		return members, nil, err
	}
	add := func(name string, g int) error {
		vs, err := e.resolveMember(ctx, name)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if slices.ContainsFunc(members, func(m victim) bool { return m.name == v.name && m.id == v.id }) {
				return fmt.Errorf("%s is in the partition twice", v.name)
			}
			members = append(members, v)
			group = append(group, g)
		}
		return nil
	}
	if len(n.Groups) > 0 {
		for g, names := range n.Groups {
			for _, name := range names {
				if err := add(name, g); err != nil {
					return nil, nil, err
				}
			}
		}
		return members, group, nil
	}
	for _, name := range n.Members {
		if err := add(name, 0); err != nil {
			return nil, nil, err
		}
	}
	return members, nil, nil
}

// resolveMember turns a member name into what it names now.
func (e *engine) resolveMember(ctx context.Context, name string) ([]victim, error) {
	switch kind, workload := binding.MemberKind(e.x, e.a, name); kind {
	case binding.MemberTarget:
		hs, err := e.targets[name].Handles(ctx)
		if err != nil {
			return nil, err
		}
		var out []victim
		for _, h := range hs {
			out = append(out, victim{name: h.Name(), id: h.ID(), h: h, target: name})
		}
		return out, nil
	case binding.MemberWorkload, binding.MemberInstance:
		e.handlesStored(ctx, workload)
		var out []victim
		for _, ih := range e.reg.live(workload) {
			if kind == binding.MemberWorkload || ih.name == name {
				out = append(out, victim{name: ih.name, id: ih.inst.ID(), h: ih.inst, inst: ih})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s has no live instance to cut off", name)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is neither a workload, an instance nor a target", name)
}

// applyPartition applies a partition once: members, layout (from the seed),
// operation.started with the groups, the rules, the hold and the revert.
func (e *engine) applyPartition(ctx context.Context, o *experiment.Operation, run int, rng *rand.Rand) error {
	members, group, err := e.partitionMembers(ctx, o, rng)
	if err != nil {
		return fmt.Errorf("operation %s: %w", o.Name, err)
	}
	var layout fault.Layout
	n := o.Network
	if group != nil {
		layout.Groups = make([][]int, len(n.Groups))
		for i, g := range group {
			layout.Groups[g] = append(layout.Groups[g], i)
		}
	} else {
		isolate := -1
		if n.Isolate != "" {
			for i, m := range members {
				if m.name == n.Isolate || m.target == n.Isolate {
					if isolate >= 0 {
						return fmt.Errorf("operation %s: isolate %s names more than one member", o.Name, n.Isolate)
					}
					isolate = i
				}
			}
			if isolate < 0 {
				return fmt.Errorf("operation %s: isolate %s is not a live member (members: %s)", o.Name, n.Isolate, victimNames(members))
			}
		}
		if layout, err = fault.Shape(n.ShapeOrDefault(), len(members), rng, isolate); err != nil {
			return fmt.Errorf("operation %s: %w", o.Name, err)
		}
	}
	layout.OneWay = n.DirectionOrDefault() == experiment.DirectionOneWay
	names, ids := []string{}, []string{}
	hs := make([]backend.Handle, 0, len(members))
	for _, m := range members {
		names, ids = append(names, m.name), append(ids, m.id)
		hs = append(hs, m.h)
	}
	fields := []rundir.Field{rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run), rundir.F("target", partitionTarget(o)), rundir.F("scope", "partition"), rundir.F("instances", names), rundir.F("ids", ids)}
	if layout.Ring != nil {
		var ring []string
		for _, i := range layout.Ring {
			ring = append(ring, members[i].name)
		}
		fields = append(fields, rundir.F("ring", ring))
	} else {
		var groups [][]string
		for _, g := range layout.Groups {
			var gn []string
			for _, i := range g {
				gn = append(gn, members[i].name)
			}
			groups = append(groups, gn)
		}
		fields = append(fields, rundir.F("groups", groups))
	}
	fields = append(fields, rundir.F("shape", n.ShapeOrDefault()), rundir.F("direction", n.DirectionOrDefault()))
	if o.Duration > 0 {
		fields = append(fields, rundir.F("duration", o.Duration.String()))
	}
	e.rec.Record("operation.started", fields...)
	op, _ := e.networkOp(o, run, rng)
	err = fault.Partition(ctx, &faultEnv{e: e, o: o, run: run}, op, hs, layout.Cut)
	if err != nil {
		if o.Duration > 0 && ctx.Err() != nil {
			e.rec.Record("operation.reverted", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run), rundir.F("when", "aborted"))
		}
		return fmt.Errorf("operation %s (%s) did not complete: %w", o.Name, o.Uses, err)
	}
	if o.Duration > 0 {
		e.rec.Record("operation.reverted", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run))
	} else {
		e.rec.Record("operation.finished", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run))
	}
	return nil
}

// partitionTarget says what a partition acts on, for operation.started.
func partitionTarget(o *experiment.Operation) string {
	if o.Target != nil {
		return o.Target.String()
	}
	n := o.Network
	if len(n.Groups) > 0 {
		var gs []string
		for _, g := range n.Groups {
			gs = append(gs, "["+strings.Join(g, ", ")+"]")
		}
		return strings.Join(gs, " | ")
	}
	return strings.Join(n.Members, ", ")
}
