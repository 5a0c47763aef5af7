// Package binding checks an experiment against one adapter: every name the
// experiment uses must exist in the adapter, and every fault and signal it
// needs must be one the adapter's backend can provide. An experiment that
// needs what the adapter cannot give is not invalid but n/a there.
package binding

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// Status is the outcome of binding an experiment to an adapter.
type Status string

const (
	Valid   Status = "valid"
	Invalid Status = "invalid"
	NA      Status = "n/a"
)

// Result says whether an experiment can run on an adapter, and why not.
type Result struct {
	Status Status
	// Problems are errors and warnings, positioned in the experiment file.
	Problems manifest.Problems
	// Reasons say why the experiment is n/a on this adapter.
	Reasons []string
	// OnlyMissing is set when every error is a name the adapter lacks (a
	// target, role, signal, operation or check): the experiment was written
	// for another adapter.
	OnlyMissing bool
}

// Bind checks x against a. x must already be free of errors of its own.
func Bind(x *experiment.Experiment, a *adapter.Adapter) Result {
	if ps := backend.CheckAdapter(a); ps.Err() != nil {
		return Result{Status: Invalid, Problems: ps}
	}
	b := &binder{x: x, a: a, d: &manifest.Decoder{File: x.File, Positions: x.Positions}}
	for i := range x.Operations {
		b.operation(fmt.Sprintf("operations[%d]", i), &x.Operations[i])
	}
	x.Flow.Walk(func(f *experiment.FlowNode) {
		var p, name string
		switch {
		case f.Kind == experiment.FlowWait && f.Wait.Signal != "":
			p, name = f.Path+".wait.signal", f.Wait.Signal
		case f.Kind == experiment.FlowGenerate && f.Generate.After != nil && f.Generate.After.Signal != "":
			p, name = f.Path+".generate.after.signal", f.Generate.After.Signal
		default:
			return
		}
		s, ok := a.Signals[name]
		switch {
		case !ok:
			b.missing(p, "adapter %s declares no signal %q%s", a.ID, name, manifest.DidYouMean(name, slices.Sorted(maps.Keys(a.Signals))))
		case s.Unavailable != "":
			b.na(fmt.Sprintf("signal %s is unavailable on %s: %s", name, a.ID, s.Unavailable))
		}
	})
	for i := range x.Operations {
		t := x.Operations[i].Trigger
		if t == nil || t.Signal == "" {
			continue
		}
		p := fmt.Sprintf("operations[%d].trigger.signal", i)
		s, ok := a.Signals[t.Signal]
		switch {
		case !ok:
			b.missing(p, "adapter %s declares no signal %q%s", a.ID, t.Signal, manifest.DidYouMean(t.Signal, slices.Sorted(maps.Keys(a.Signals))))
		case s.Unavailable != "":
			b.na(fmt.Sprintf("signal %s is unavailable on %s: %s", t.Signal, a.ID, s.Unavailable))
		}
	}
	b.aims()
	for _, w := range x.Workloads {
		if w.Clock == nil {
			continue
		}
		if r, err := backend.ForInstances(a); err == nil && (!r.TimeNamespaces || a.Instance.HasHooks()) {
			b.na(fmt.Sprintf("workload %s: clock offsets need instances started in a time namespace of their own, which the %s backend of adapter %s does not start", w.Name, r.Name, a.ID))
		}
	}
	x.EachCheck(func(p string, c *experiment.Check) {
		if c.Kind == experiment.CheckStall && c.File != "" && a.Instance.HasHooks() {
			b.na(fmt.Sprintf("check %s watches a file inside instances, which the adapter's hooks make and the harness cannot look into", c.Name))
		}
		if c.AfterReady != "" && c.AfterReady != experiment.ReadyInstance && a.Target(c.AfterReady) == nil {
			b.missing(p+".after-ready", "adapter %s defines no target %q%s", a.ID, c.AfterReady, manifest.DidYouMean(c.AfterReady, a.TargetNames()))
		}
		if c.Family == "" {
			return
		}
		if _, err := a.MetricSource(c.Source); err != nil {
			field := p + ".source"
			if c.Source == "" {
				field = p
			}
			b.missing(field, "%v", err)
		}
	})
	if a.Limits != nil && a.Limits.Instances > 0 {
		if n := MaxConcurrentInstances(x); n > a.Limits.Instances {
			b.d.Problem("flow", "the flow can run %d instances at once, over adapter %s's budget of %d (limits.instances)", n, a.ID, a.Limits.Instances)
		}
	}
	for i, e := range x.Expectations {
		for j, ref := range e.Checks {
			scope, name, _ := strings.Cut(ref, "/")
			p := fmt.Sprintf("expectations[%d].checks[%d]", i, j)
			switch scope {
			case experiment.ScopeAdapter:
				if !hasStep(a.Checks, name) {
					b.missing(p, "adapter %s has no check named %q%s", a.ID, name, manifest.DidYouMean(name, stepNames(a.Checks)))
				}
			case experiment.ScopePreflight:
				if !hasStep(a.Preflight, name) && !hasStep(x.Preflight, name) {
					b.missing(p, "neither adapter %s nor the experiment has a preflight check named %q", a.ID, name)
				}
			}
		}
	}
	r := Result{Status: Valid, Problems: b.d.Problems, Reasons: b.reasons, OnlyMissing: b.nMissing > 0 && b.nMissing == countErrors(b.d.Problems)}
	if b.d.Problems.Err() != nil {
		r.Status = Invalid
	} else if len(b.reasons) > 0 {
		r.Status = NA
	}
	return r
}

type binder struct {
	x        *experiment.Experiment
	a        *adapter.Adapter
	d        *manifest.Decoder
	reasons  []string
	nMissing int
}

// missing records a problem that is only that the adapter lacks something
// the experiment names: on an adapter the experiment was not written for,
// that makes it not applicable rather than wrong.
func (b *binder) missing(path, format string, args ...any) {
	b.nMissing++
	b.d.Problem(path, format, args...)
}

func countErrors(ps manifest.Problems) int {
	n := 0
	for _, p := range ps {
		if !p.Warning {
			n++
		}
	}
	return n
}

func (b *binder) na(reason string) {
	for _, r := range b.reasons {
		if r == reason {
			return
		}
	}
	b.reasons = append(b.reasons, reason)
}

func (b *binder) operation(p string, o *experiment.Operation) {
	a := b.a
	if !experiment.IsFault(o.Uses) {
		op, ok := a.Operations[o.Uses]
		if !ok {
			b.missing(p+".uses", "%q is neither a built-in fault (%s) nor an operation of adapter %s%s", o.Uses, strings.Join(experiment.Faults, ", "), a.ID, manifest.DidYouMean(o.Uses, append(slices.Sorted(maps.Keys(a.Operations)), experiment.Faults...)))
			return
		}
		for _, name := range slices.Sorted(maps.Keys(op.Params)) {
			if _, given := o.With[name]; !given && op.Params[name].Default == nil {
				b.d.Problem(p, "adapter operation %s needs parameter %q under with", o.Uses, name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(o.With)) {
			if _, known := op.Params[name]; !known && len(op.Params) > 0 {
				b.d.Problem(p+".with."+name, "adapter operation %s takes no parameter %q%s", o.Uses, name, manifest.DidYouMean(name, slices.Sorted(maps.Keys(op.Params))))
			}
		}
		if o.Target != nil {
			b.target(p, o, false)
		}
		return
	}
	if o.Uses == experiment.FaultPartition {
		b.partitionMembers(p, o)
	}
	if o.Target == nil {
		return
	}
	b.target(p, o, true)
}

// partitionMembers checks the members a partition names (network.members
// or network.groups): each is a workload, an instance or a named target of
// the adapter, and the adapter can cut each one off.
func (b *binder) partitionMembers(p string, o *experiment.Operation) {
	n := o.Network
	if n == nil {
		return
	}
	type member struct{ path, name string }
	var ms []member
	for i, m := range n.Members {
		ms = append(ms, member{fmt.Sprintf("%s.network.members[%d]", p, i), m})
	}
	for i, g := range n.Groups {
		for j, m := range g {
			ms = append(ms, member{fmt.Sprintf("%s.network.groups[%d][%d]", p, i, j), m})
		}
	}
	if n.Isolate != "" && len(n.Members) > 0 {
		ms = append(ms, member{p + ".network.isolate", n.Isolate})
	}
	for _, m := range ms {
		switch kind, workload := MemberKind(b.x, b.a, m.name); kind {
		case MemberWorkload, MemberInstance:
			if why := InstanceFaultSupport(b.a, o.Uses); why != "" {
				b.na(fmt.Sprintf("operation %s: %s on instances of %s: %s", o.Name, o.Uses, workload, why))
			}
		case MemberTarget:
			if why := TargetFaultSupport(b.a, m.name, o.Uses); why != "" {
				b.na(fmt.Sprintf("operation %s: %s on target %s: %s", o.Name, o.Uses, m.name, why))
			}
		default:
			b.missing(m.path, "%q is neither a workload, an instance nor a target of adapter %s%s", m.name, b.a.ID, manifest.DidYouMean(m.name, append(b.a.TargetNames(), workloadNames(b.x)...)))
		}
	}
}

// What a partition member's name names.
const (
	MemberWorkload = "workload"
	MemberInstance = "instance"
	MemberTarget   = "target"
)

// MemberKind says what a partition member's name is: a workload of x, an
// instance of one (workload-N), a named target of a, or "" when none; with
// the workload for the first two.
func MemberKind(x *experiment.Experiment, a *adapter.Adapter, name string) (kind, workload string) {
	if x.Workload(name) != nil {
		return MemberWorkload, name
	}
	if a.Target(name) != nil {
		return MemberTarget, ""
	}
	if i := strings.LastIndex(name, "-"); i > 0 {
		if w := x.Workload(name[:i]); w != nil {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				return MemberInstance, w.Name
			}
		}
	}
	return "", ""
}

func workloadNames(x *experiment.Experiment) []string {
	var out []string
	for _, w := range x.Workloads {
		out = append(out, w.Name)
	}
	return out
}

// target checks the operation's target exists and, for a fault, that the
// adapter can apply it there.
func (b *binder) target(p string, o *experiment.Operation, fault bool) {
	a, t := b.a, o.Target
	switch {
	case t.Name != "":
		tg := a.Target(t.Name)
		if tg == nil {
			b.missing(p+".target", "adapter %s defines no target %q%s", a.ID, t.Name, manifest.DidYouMean(t.Name, a.TargetNames()))
			return
		}
		// A process target is one process; a container target may match
		// several containers.
		if tg.Type == adapter.TypeProcess && o.Select != nil && o.Select.Kind == experiment.SelectCount && o.Select.Count > 1 {
			b.d.Problem(p+".select.count", "selects %d but target %q is one %s", o.Select.Count, t.Name, tg.Type)
		}
		if fault {
			if why := TargetFaultSupport(a, t.Name, o.Uses); why != "" {
				b.na(fmt.Sprintf("operation %s: %s on target %s: %s", o.Name, o.Uses, t.Name, why))
			}
		}
	case t.Role != "":
		r, ok := a.Roles[t.Role]
		if !ok {
			b.missing(p+".target.role", "adapter %s defines no role %q%s", a.ID, t.Role, manifest.DidYouMean(t.Role, slices.Sorted(maps.Keys(a.Roles))))
			return
		}
		if fault {
			if why := RoleFaultSupport(a, r, o.Uses); why != "" {
				b.na(fmt.Sprintf("operation %s: %s on role %s: %s", o.Name, o.Uses, t.Role, why))
			}
		} else if why := roleSupport(a, r); why != "" {
			b.na(fmt.Sprintf("operation %s: role %s: %s", o.Name, t.Role, why))
		}
	default:
		if fault {
			if why := InstanceFaultSupport(a, o.Uses); why != "" {
				b.na(fmt.Sprintf("operation %s: %s on instances of %s: %s", o.Name, o.Uses, t.Workload, why))
			}
		}
	}
}

// FaultSupport returns why fault cannot be applied to a named target of
// type typ on adapter a, or "" when it can. declared narrows the faults
// the target supports when not empty.
func FaultSupport(a *adapter.Adapter, typ string, declared []string, fault string) string {
	r, ok := backend.ForKind(a, backend.OnTarget, backend.Kind(typ))
	if !ok {
		return fmt.Sprintf("the %s backend cannot act on a %s", a.Backend, typ)
	}
	return support(a, r, backend.OnTarget, backend.Kind(typ), declared, fault)
}

// TargetFaultSupport returns why fault cannot be applied to the named
// target name of adapter a, or "" when it can: what its kind supports on
// its backend, what the backend says of the target itself, and the
// target's own list of faults.
func TargetFaultSupport(a *adapter.Adapter, name, fault string) string {
	tg := a.Target(name)
	if tg == nil {
		return fmt.Sprintf("adapter %s defines no target %q", a.ID, name)
	}
	if why := FaultSupport(a, tg.Type, tg.Faults, fault); why != "" {
		return why
	}
	r, _ := backend.ForKind(a, backend.OnTarget, backend.Kind(tg.Type))
	return r.SupportsTarget(a, name, tg, fault)
}

// support asks backend r about fault, then the adapter's own list.
func support(a *adapter.Adapter, r backend.Registration, on backend.On, k backend.Kind, declared []string, fault string) string {
	if why := r.Supports(a, on, k, fault); why != "" {
		return why
	}
	if len(declared) > 0 && !slices.Contains(declared, fault) {
		return fmt.Sprintf("the adapter lists only %s for it", strings.Join(declared, ", "))
	}
	return ""
}

// roleSupport returns why roles of r's type cannot be acted on at all on
// adapter a, or "" when they can: roles live inside the instances of the
// adapter's own backend.
func roleSupport(a *adapter.Adapter, r *adapter.Role) string {
	if _, ok := backend.ForKind(a, backend.OnRole, backend.Kind(r.Type)); ok {
		return ""
	}
	if reg, ok := backend.Lookup(a.Backend); ok && len(reg.Roles) > 0 {
		var kinds []string
		for _, k := range reg.Roles {
			kinds = append(kinds, string(k))
		}
		return fmt.Sprintf("the role is a %s; on %s, roles are %s", r.Type, a.Backend, strings.Join(kinds, ", "))
	}
	return fmt.Sprintf("the %s backend of adapter %s has no roles inside instances", a.Backend, a.ID)
}

// RoleFaultSupport returns why fault cannot be applied to role r on
// adapter a, or "" when it can.
func RoleFaultSupport(a *adapter.Adapter, r *adapter.Role, fault string) string {
	if why := roleSupport(a, r); why != "" {
		return why
	}
	reg, _ := backend.ForKind(a, backend.OnRole, backend.Kind(r.Type))
	return support(a, reg, backend.OnRole, backend.Kind(r.Type), r.Faults, fault)
}

// InstanceFaultSupport returns why fault cannot be applied to workload
// instances on adapter a, or "" when it can.
func InstanceFaultSupport(a *adapter.Adapter, fault string) string {
	if why, ok := a.Unsupported[fault]; ok {
		return why
	}
	r, err := backend.ForInstances(a)
	if err != nil {
		return err.Error()
	}
	var declared []string
	if a.Instance != nil {
		declared = a.Instance.Faults
	}
	return support(a, r, backend.OnInstances, r.Instances, declared, fault)
}

func hasStep(steps []experiment.Step, name string) bool {
	for _, s := range steps {
		if s.Name == name {
			return true
		}
	}
	return false
}

func stepNames(steps []experiment.Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return out
}

// MaxConcurrentInstances is the most instances the flow can run at once:
// the children of a serial node run one after another, those of a parallel
// node together.
func MaxConcurrentInstances(x *experiment.Experiment) int {
	var walk func(f *experiment.FlowNode) int
	walk = func(f *experiment.FlowNode) int {
		if f == nil {
			return 0
		}
		switch f.Kind {
		case experiment.FlowRef:
			if w := x.Workload(f.Ref); w != nil {
				return w.InstanceCount()
			}
		case experiment.FlowSerial:
			n := 0
			for _, c := range f.Children {
				n = max(n, walk(c))
			}
			return n
		case experiment.FlowParallel:
			n := 0
			for _, c := range f.Children {
				n += walk(c)
			}
			return n
		case experiment.FlowRepeat:
			return walk(f.Repeat.Body)
		}
		return 0
	}
	return walk(x.Flow)
}
