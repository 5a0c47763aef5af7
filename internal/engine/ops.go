package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// victim is one thing an operation acts on.
type victim struct {
	name string // instance or target name, or instance/role
	id   string // system id or pid
	h    backend.Handle
	// inst is set when the victim is an instance; target when a named
	// target.
	inst   *instanceHandle
	target string
}

// applyOperation applies o once: select, record, act (with jitter), hold
// for its duration and revert. The operation is recorded before it acts, so
// the timeline shows what was under way even if the harness dies.
func (e *engine) applyOperation(ctx context.Context, o *experiment.Operation) error {
	run := e.book.nextRun(o.Name)
	o = e.opApplied(o, run) // readiness.go: since, duration-max
	rng := e.rng(o.Name, run)

	if o.Uses == experiment.FaultPartition {
		return e.applyPartition(ctx, o, run, rng)
	}
	victims, scope, err := e.candidates(ctx, o)
	if err == nil {
		victims, err = e.skipCandidates(ctx, o, run, victims) // readiness.go
	}
	if err != nil {
		return fmt.Errorf("operation %s: %w", o.Name, err)
	}
	victims, err = choose(rng, o, victims)
	if err != nil {
		return fmt.Errorf("operation %s: %w", o.Name, err)
	}
	jitters := make([]time.Duration, len(victims))
	for i := range victims {
		if o.Jitter > 0 {
			jitters[i] = time.Duration(rng.Int64N(int64(o.Jitter.D()) + 1))
		}
	}
	names, ids := []string{}, []string{}
	for _, v := range victims {
		names, ids = append(names, v.name), append(ids, v.id)
	}
	fields := []rundir.Field{rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run), rundir.F("target", o.Target.Ref()), rundir.F("scope", scope), rundir.F("instances", names), rundir.F("ids", ids)}
	if o.Duration > 0 {
		fields = append(fields, rundir.F("duration", o.Duration.String()))
	}
	if o.Jitter > 0 {
		js := make([]string, len(jitters))
		for i, j := range jitters {
			js[i] = j.String()
		}
		fields = append(fields, rundir.F("jitter", js))
	}
	e.rec.Record("operation.started", fields...)

	if !experiment.IsFault(o.Uses) {
		return e.adapterOperation(ctx, o, run, victims, jitters)
	}
	ops := make([]fault.Op, len(victims))
	for i := range victims {
		ops[i] = fault.Op{Operation: o.Name, Fault: o.Uses, Duration: o.Duration.D(), Grace: o.Grace.D(), Run: run, Aims: e.phaseAims(o)}
		if experiment.IsNetworkFault(o.Uses) {
			// Each victim's jitter (of a latency) is drawn from a seed of
			// its own, after the selection and the delays.
			if ops[i], err = e.networkOp(o, run, rng); err != nil {
				return fmt.Errorf("operation %s: %w", o.Name, err)
			}
		}
		if experiment.IsResourceFault(o.Uses) {
			ops[i].Resource, ops[i].Journal = e.resourceSpec(o), e.resourceJournal()
		}
		if experiment.IsClockFault(o.Uses) {
			ops[i].Clock, ops[i].Journal = o.Clock, e.resourceJournal()
		}
	}
	if experiment.IsFSFault(o.Uses) {
		// The layer serves every process that uses its directory: one
		// rule, whatever the selection picked.
		l, err := e.fsLayer(o)
		if err != nil {
			return fmt.Errorf("operation %s: %w", o.Name, err)
		}
		// files, like path, may name the run ($CHAOS_RUN_ID).
		spec := *o.FS
		spec.Files = e.expand(spec.Files)
		ops[0].FS = &fault.FSOp{Layer: l, Log: e.fsLog, Spec: &spec, Seed: rng.Uint64()}
		victims, ops, jitters = victims[:1], ops[:1], jitters[:1]
	}
	var wg sync.WaitGroup
	errs := make([]error, len(victims))
	for i, v := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if jitters[i] > 0 {
				if err := backend.Sleep(ctx, jitters[i]); err != nil {
					errs[i] = err
					return
				}
			}
			// Overlapping faults on one victim act one after another
			// (serialize.go).
			errs[i] = e.serialized(ctx, o, run, v, func() error {
				return fault.Apply(ctx, &faultEnv{e: e, o: o, run: run, v: v}, ops[i], v.h)
			})
		}()
	}
	wg.Wait()
	held := o.Uses == experiment.FaultOutage || ((o.Uses == experiment.FaultFreeze || experiment.IsNetworkFault(o.Uses) || experiment.IsResourceFault(o.Uses) || experiment.IsClockFault(o.Uses) || experiment.IsFSFault(o.Uses)) && o.Duration > 0)
	if err := errors.Join(errs...); err != nil {
		// An abort cuts the hold short, but the fault reverts itself
		// before it returns (a thaw, a restart): say so.
		if held && ctx.Err() != nil {
			e.rec.Record("operation.reverted", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run), rundir.F("when", "aborted"))
		}
		return fmt.Errorf("operation %s (%s) did not complete: %w", o.Name, o.Uses, err)
	}
	if held {
		e.rec.Record("operation.reverted", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run))
	} else {
		e.rec.Record("operation.finished", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run))
	}
	return nil
}

// faultEnv is what one application of a fault to one victim sees of the
// run.
type faultEnv struct {
	e   *engine
	o   *experiment.Operation
	run int
	v   victim
}

func (f *faultEnv) Record(name string, fields ...rundir.Field) { f.e.rec.Record(name, fields...) }

func (f *faultEnv) Revert(undo func(ctx context.Context) error) func(ctx context.Context) error {
	r := f.e.pushRevert(f.o, f.run, undo)
	return func(ctx context.Context) error { return f.e.runRevert(ctx, r) }
}

// Back records a named target's restart, with its new pid or id.
func (f *faultEnv) Back(h backend.Handle) {
	if f.v.target != "" {
		f.e.rec.Record("target.restarted", rundir.F("target", f.v.target), rundir.F("operation", f.o.Name), rundir.F("pid", pidOrID(h.ID())))
	}
}

// pidOrID is a pid as a number, as the seeds' events show it, or another
// system id as it is.
func pidOrID(id string) any {
	if n, err := strconv.Atoi(id); err == nil {
		return n
	}
	return id
}

// candidates lists what an operation's target can hit now.
func (e *engine) candidates(ctx context.Context, o *experiment.Operation) ([]victim, string, error) {
	t := o.Target
	switch {
	case t == nil:
		return nil, "system", nil
	case t.Name != "":
		hs, err := e.targets[t.Name].Handles(ctx)
		if err != nil {
			return nil, "", err
		}
		var out []victim
		for _, h := range hs {
			out = append(out, victim{name: h.Name(), id: h.ID(), h: h, target: t.Name})
		}
		return out, "target", nil
	}
	e.handlesStored(ctx, t.Workload)
	live := e.reg.live(t.Workload)
	if t.Role != "" {
		var out []victim
		for _, ih := range live {
			hs, err := e.roleHandles(ctx, ih.name, t.Role)
			if err != nil {
				return nil, "", err
			}
			for _, h := range hs {
				out = append(out, victim{name: ih.name + "/" + t.Role, id: h.ID(), h: h})
			}
		}
		if len(out) == 0 {
			return nil, "", fmt.Errorf("no live %s of workload %s", t.Role, t.Workload)
		}
		return out, "role", nil
	}
	var out []victim
	for _, ih := range live {
		out = append(out, victim{name: ih.name, id: ih.inst.ID(), h: ih.inst, inst: ih})
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("workload %s has no live instance to act on (has the flow started it?)", t.Workload)
	}
	return out, "instances", nil
}

// choose applies the operation's select to the candidates, drawing from
// rng.
func choose(rng *rand.Rand, o *experiment.Operation, c []victim) ([]victim, error) {
	if o.Target == nil {
		return nil, nil
	}
	s := o.Select
	pick := func(n int) ([]victim, error) {
		if n > len(c) {
			return nil, fmt.Errorf("select asks for %d but only %d (%s) can be hit", n, len(c), victimNames(c))
		}
		perm := rng.Perm(len(c))[:n]
		sort.Ints(perm)
		out := make([]victim, n)
		for i, p := range perm {
			out[i] = c[p]
		}
		return out, nil
	}
	switch s.KindOrDefault() {
	case experiment.SelectAll:
		return c, nil
	case experiment.SelectOne:
		return pick(1)
	case experiment.SelectCount:
		return pick(s.Count)
	case experiment.SelectPercent:
		return pick(max(1, int(math.Ceil(float64(len(c))*s.Percent/100))))
	case experiment.SelectInstances:
		var out []victim
		for _, want := range s.Instances {
			found := false
			for _, v := range c {
				if v.name == want {
					out, found = append(out, v), true
				}
			}
			if !found {
				return nil, fmt.Errorf("instance %s is not live (live: %s)", want, victimNames(c))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown select %q", s.Kind)
}

func victimNames(c []victim) string {
	var n []string
	for _, v := range c {
		n = append(n, v.name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// pushRevert registers an undo for the end of the flow.
func (e *engine) pushRevert(o *experiment.Operation, run int, fn func(ctx context.Context) error) *revert {
	r := &revert{op: o.Name, uses: o.Uses, fn: fn, run: run}
	e.book.addRevert(r)
	return r
}

// holdRegistered waits out the operation's duration, when it has one, and
// runs r at once; without one r waits for the end of the flow. r runs even
// when ctx ends (an abort): nothing is left changed.
func (e *engine) holdRegistered(ctx context.Context, o *experiment.Operation, r *revert) error {
	if o.Duration == 0 {
		return nil
	}
	err := backend.Sleep(ctx, o.Duration.D())
	if rerr := e.runRevert(context.WithoutCancel(ctx), r); rerr != nil {
		return rerr
	}
	return err
}

// runRevert runs r unless it already ran.
func (e *engine) runRevert(ctx context.Context, r *revert) error {
	if !e.book.take(r) {
		return nil
	}
	return r.fn(ctx)
}

// adapterOperation runs an adapter operation's hook, once per victim or
// once when it has no target, and its revert hook after the duration (or
// when the flow ends).
func (e *engine) adapterOperation(ctx context.Context, o *experiment.Operation, run int, victims []victim, jitters []time.Duration) error {
	spec := e.a.Operations[o.Uses]
	env := e.baseEnv
	for name, p := range spec.Params {
		if p.Default != nil {
			env = envvar.Set(env, paramEnv(name), *p.Default)
		}
	}
	for k, v := range o.With {
		env = envvar.Set(env, paramEnv(k), v)
	}
	env = envvar.Set(env, "CHAOS_OPERATION", o.Name, "CHAOS_OPERATION_RUN", fmt.Sprint(run))
	timeout := e.hookTimeout()
	if spec.Timeout > 0 {
		timeout = spec.Timeout.D()
	}
	log, _ := os.OpenFile(e.dir.LogFile("operations"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if log != nil {
		defer log.Close()
	}
	hook := func(ctx context.Context, which, script string, v *victim) error {
		henv := env
		if v != nil {
			henv = envvar.Set(henv, "CHAOS_TARGET_NAME", v.name, "CHAOS_TARGET_ID", v.id)
			if v.inst != nil {
				henv = envvar.Set(henv, "CHAOS_INSTANCE", v.name, "CHAOS_WORKLOAD", v.inst.workload, "CHAOS_SYSTEM_ID", v.id)
			}
		}
		s := shell.Spec{Name: fmt.Sprintf("operation %s %s hook", o.Name, which), Script: script, Dir: e.cfg.WorkDir, Env: henv, Timeout: timeout}
		if log != nil {
			s.Log = log
		}
		res, err := e.runner.Run(ctx, s)
		if err != nil {
			return err
		}
		if !res.OK() {
			return fmt.Errorf("%s %s: %s", s.Name, res.Describe(timeout), backend.LastLines(e.redact.String(res.Output), 3))
		}
		return nil
	}
	each := func(ctx context.Context, which, script string, jitter bool) error {
		if len(victims) == 0 {
			return hook(ctx, which, script, nil)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(victims))
		for i := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if jitter && jitters[i] > 0 {
					if err := backend.Sleep(ctx, jitters[i]); err != nil {
						errs[i] = err
						return
					}
				}
				errs[i] = hook(ctx, which, script, &victims[i])
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	// The revert is registered before the change is made: a change that
	// failed on one target may still have been made on the others.
	var r *revert
	if spec.Revert != "" {
		r = e.pushRevert(o, run, func(ctx context.Context) error {
			if err := each(ctx, "revert", spec.Revert, false); err != nil {
				return err
			}
			e.rec.Record("operation.reverted", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run))
			return nil
		})
	}
	if err := each(ctx, "run", spec.Run, true); err != nil {
		if r != nil {
			err = errors.Join(err, e.runRevert(context.WithoutCancel(ctx), r))
		}
		return fmt.Errorf("operation %s did not complete: %w", o.Name, err)
	}
	if r == nil {
		e.rec.Record("operation.finished", rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run))
		return nil
	}
	return e.holdRegistered(ctx, o, r)
}

func paramEnv(name string) string {
	return "CHAOS_PARAM_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// handlesStored waits (briefly) until every instance of the workload that
// the backend reported as started has its handle stored: a trigger on the
// Running state fires from inside the backend's create, a moment before.
func (e *engine) handlesStored(ctx context.Context, workload string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		ok, changed, _ := e.reg.check(func() (bool, error) {
			for _, h := range e.reg.workload(workload) {
				if h.state != "" && !h.state.Terminal() && h.inst == nil {
					return false, nil
				}
			}
			return true, nil
		})
		if ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
