package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/docker"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// defaultGrace is how long restart waits after SIGTERM before SIGKILL.
const defaultGrace = 10 * time.Second

// victim is one thing an operation acts on.
type victim struct {
	name string // instance or target name
	id   string // system id or pid
	inst *instanceHandle
	tgt  *targetHandle
	ctr  *docker.Container
}

// applyOperation applies o once: select, record, act (with jitter), hold
// for its duration and revert. The operation is recorded before it acts, so
// the timeline shows what was under way even if the harness dies.
func (e *engine) applyOperation(ctx context.Context, o *experiment.Operation) error {
	e.mu.Lock()
	e.opRuns[o.Name]++
	run := e.opRuns[o.Name]
	e.mu.Unlock()
	rng := e.rng(o.Name, run)

	victims, scope, err := e.candidates(ctx, o)
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
	fields := []rundir.Field{rundir.F("operation", o.Name), rundir.F("uses", o.Uses), rundir.F("run", run), rundir.F("target", o.Target.String()), rundir.F("scope", scope), rundir.F("instances", names), rundir.F("ids", ids)}
	if o.Duration > 0 {
		fields = append(fields, rundir.F("duration", o.Duration.String()))
	}
	e.rec.Record("operation.started", fields...)

	if !experiment.IsFault(o.Uses) {
		return e.adapterOperation(ctx, o, run, victims, jitters)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(victims))
	for i, v := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if jitters[i] > 0 {
				if err := sleep(ctx, jitters[i]); err != nil {
					errs[i] = err
					return
				}
			}
			errs[i] = e.fault(ctx, o, v)
		}()
	}
	wg.Wait()
	held := o.Uses == experiment.FaultOutage || (o.Uses == experiment.FaultFreeze && o.Duration > 0)
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

// candidates lists what an operation's target can hit now.
func (e *engine) candidates(ctx context.Context, o *experiment.Operation) ([]victim, string, error) {
	t := o.Target
	switch {
	case t == nil:
		return nil, "system", nil
	case t.Name != "" && e.a.Target(t.Name).Type == adapter.TypeContainer:
		return e.containerVictims(ctx, t)
	case t.Name != "":
		th := e.targets[t.Name]
		if th == nil {
			return nil, "", fmt.Errorf("target %s is a %s; this backend cannot act on it", t.Name, e.a.Target(t.Name).Type)
		}
		id := ""
		if pid, err := th.pid(); err == nil {
			id = fmt.Sprint(pid)
		}
		return []victim{{name: t.Name, id: id, tgt: th}}, "target", nil
	case t.Role != "":
		return e.containerVictims(ctx, t)
	}
	e.handlesStored(ctx, t.Workload)
	var out []victim
	e.reg.mu.Lock()
	defer e.reg.mu.Unlock()
	for _, h := range e.reg.workload(t.Workload) {
		if h.inst != nil && !h.state.Terminal() {
			out = append(out, victim{name: h.name, id: h.inst.SystemID(), inst: h})
		}
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

// pushRevert registers an undo for the end of the flow; the returned func
// runs it now instead (once).
func (e *engine) pushRevert(o *experiment.Operation, fn func(ctx context.Context) error) *revert {
	e.mu.Lock()
	r := &revert{op: o.Name, uses: o.Uses, fn: fn, run: e.opRuns[o.Name]}
	e.reverts = append(e.reverts, r)
	e.mu.Unlock()
	return r
}

// hold registers undo as the operation's revert and, when the operation has
// a duration, waits it out and reverts at once; without one the revert
// waits for the end of the flow. The revert runs even when ctx ends (an
// abort): nothing is left frozen or down.
func (e *engine) hold(ctx context.Context, o *experiment.Operation, undo func(ctx context.Context) error) error {
	return e.holdRegistered(ctx, o, e.pushRevert(o, undo))
}

// holdRegistered is hold for a revert already registered.
func (e *engine) holdRegistered(ctx context.Context, o *experiment.Operation, r *revert) error {
	if o.Duration == 0 {
		return nil
	}
	err := sleep(ctx, o.Duration.D())
	if rerr := e.runRevert(context.WithoutCancel(ctx), r); rerr != nil {
		return rerr
	}
	return err
}

// runRevert runs r unless it already ran.
func (e *engine) runRevert(ctx context.Context, r *revert) error {
	e.mu.Lock()
	if r.done {
		e.mu.Unlock()
		return nil
	}
	r.done = true
	e.mu.Unlock()
	return r.fn(ctx)
}

// fault applies a built-in fault to one victim.
func (e *engine) fault(ctx context.Context, o *experiment.Operation, v victim) error {
	if v.tgt != nil {
		return e.targetFault(ctx, o, v.tgt)
	}
	grace := defaultGrace
	if o.Grace > 0 {
		grace = o.Grace.D()
	}
	if v.ctr != nil {
		return e.containerFault(ctx, o, v, backend.Restart{Graceful: true, Grace: grace})
	}
	inst := v.inst.inst
	switch o.Uses {
	case experiment.FaultKill:
		return inst.Kill(ctx)
	case experiment.FaultRestart:
		return inst.Restart(ctx, backend.Restart{Graceful: true, Grace: grace})
	case experiment.FaultRestartInPlace:
		return inst.Restart(ctx, backend.Restart{})
	case experiment.FaultOutage:
		// The hold runs on a context cleanup cannot cancel, so an aborted
		// run still brings the instance back before deleting it.
		return inst.Restart(ctx, backend.Restart{Hold: o.Duration.D()})
	case experiment.FaultCrashLoop:
		// Kill, kill again the moment it is back, then once more just
		// after it has settled.
		for phase, settle := range []time.Duration{0, 0, 500 * time.Millisecond} {
			if settle > 0 {
				if err := sleep(ctx, settle); err != nil {
					return err
				}
			}
			e.rec.Record("crash-loop.kill", rundir.F("operation", o.Name), rundir.F("target", v.name), rundir.F("phase", crashPhases[phase]), rundir.F("id", inst.SystemID()))
			if err := inst.Restart(ctx, backend.Restart{}); err != nil {
				return err
			}
		}
		return nil
	case experiment.FaultFreeze:
		if err := inst.Freeze(ctx); err != nil {
			return err
		}
		return e.hold(ctx, o, inst.Thaw)
	}
	return fmt.Errorf("unknown fault %s", o.Uses)
}

// targetFault applies a built-in fault to a named process target.
func (e *engine) targetFault(ctx context.Context, o *experiment.Operation, t *targetHandle) error {
	pid, err := t.livePid()
	if err != nil {
		return err
	}
	grace := defaultGrace
	if o.Grace > 0 {
		grace = o.Grace.D()
	}
	restarted := func(ctx context.Context) error {
		newPid, err := t.start(ctx)
		if err != nil {
			return err
		}
		e.rec.Record("target.restarted", rundir.F("target", t.name), rundir.F("operation", o.Name), rundir.F("pid", newPid))
		return nil
	}
	switch o.Uses {
	case experiment.FaultKill:
		if err := t.kill(ctx, pid); err != nil {
			return err
		}
		// A killed target is started again when the flow ends, so the run
		// leaves the system as it found it.
		e.pushRevert(o, restarted)
		return nil
	case experiment.FaultRestart:
		if err := t.terminate(ctx, pid, grace); err != nil {
			return err
		}
		return restarted(context.WithoutCancel(ctx))
	case experiment.FaultRestartInPlace:
		if err := t.kill(ctx, pid); err != nil {
			return err
		}
		return restarted(context.WithoutCancel(ctx))
	case experiment.FaultOutage:
		if err := t.kill(ctx, pid); err != nil {
			return err
		}
		return e.hold(ctx, o, restarted)
	case experiment.FaultCrashLoop:
		return e.targetCrashLoop(ctx, o, t, pid, restarted)
	case experiment.FaultFreeze:
		if err := t.signal(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("target %s: SIGSTOP to %d: %w", t.name, pid, err)
		}
		t.frozenPid = pid
		return e.hold(ctx, o, func(ctx context.Context) error {
			t.frozenPid = 0
			return t.signal(pid, syscall.SIGCONT)
		})
	}
	return fmt.Errorf("unknown fault %s", o.Uses)
}

// adapterOperation runs an adapter operation's hook, once per victim or
// once when it has no target, and its revert hook after the duration (or
// when the flow ends).
func (e *engine) adapterOperation(ctx context.Context, o *experiment.Operation, run int, victims []victim, jitters []time.Duration) error {
	spec := e.a.Operations[o.Uses]
	env := e.hookEnv()
	for name, p := range spec.Params {
		if p.Default != nil {
			env = setEnv(env, paramEnv(name), *p.Default)
		}
	}
	for k, v := range o.With {
		env = setEnv(env, paramEnv(k), v)
	}
	env = setEnv(env, "CHAOS_OPERATION", o.Name, "CHAOS_OPERATION_RUN", fmt.Sprint(run))
	timeout := e.hookTimeout()
	if spec.Timeout > 0 {
		timeout = spec.Timeout.D()
	}
	log, _ := openAppend(e.dir.LogFile("operations"))
	if log != nil {
		defer log.Close()
	}
	hook := func(ctx context.Context, which, script string, v *victim) error {
		henv := env
		if v != nil {
			henv = setEnv(henv, "CHAOS_TARGET_NAME", v.name, "CHAOS_TARGET_ID", v.id)
			if v.inst != nil {
				henv = setEnv(henv, "CHAOS_INSTANCE", v.name, "CHAOS_WORKLOAD", v.inst.workload, "CHAOS_SYSTEM_ID", v.id)
			}
		}
		s := shell.Spec{Name: fmt.Sprintf("operation %s %s hook", o.Name, which), Script: script, Dir: e.hookDir(), Env: henv, Timeout: timeout}
		if log != nil {
			s.Log = log
		}
		res, err := e.runner.Run(ctx, s)
		if err != nil {
			return err
		}
		if !res.OK() {
			return fmt.Errorf("%s %s: %s", s.Name, res.Describe(timeout), lastLines(e.redact.Redact(res.Output), 3))
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
					if err := sleep(ctx, jitters[i]); err != nil {
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
		r = e.pushRevert(o, func(ctx context.Context) error {
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

// crashPhases name the kills of a crash loop.
var crashPhases = []string{"first", "recovering", "ready"}

// targetCrashLoop kills a named target, kills its replacement as soon as it
// is up but not yet healthy (recovering), and once more just after it is
// healthy, then brings it back for good.
func (e *engine) targetCrashLoop(ctx context.Context, o *experiment.Operation, t *targetHandle, pid int, restarted func(context.Context) error) error {
	record := func(phase string, pid int) {
		e.rec.Record("crash-loop.kill", rundir.F("operation", o.Name), rundir.F("target", t.name), rundir.F("phase", phase), rundir.F("pid", pid))
	}
	record("first", pid)
	if err := t.kill(ctx, pid); err != nil {
		return err
	}
	// The start hook may itself wait for health, which the kill below
	// prevents; it runs aside and its failure is expected.
	hookDone := make(chan struct{})
	go func() {
		defer close(hookDone)
		_, _ = t.runHook(context.WithoutCancel(ctx), "start", t.spec.Start)
	}()
	limit := defaultHealthTimeout
	if t.spec.HealthTimeout > 0 {
		limit = t.spec.HealthTimeout.D()
	}
	deadline := time.Now().Add(limit)
	var next int
	for {
		if p, err := t.livePid(); err == nil && p != pid {
			next = p
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("target %s did not come back within %s after the first kill", t.name, limit)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	record("recovering", next)
	if err := t.kill(ctx, next); err != nil {
		return err
	}
	<-hookDone
	ready, err := t.start(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	record("ready", ready)
	if err := t.kill(ctx, ready); err != nil {
		return err
	}
	return restarted(context.WithoutCancel(ctx))
}

// handlesStored waits (briefly) until every instance of the workload that
// the backend reported as started has its handle stored: a trigger on the
// Running state fires from inside the backend's create, a moment before.
func (e *engine) handlesStored(ctx context.Context, workload string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		ok, _, changed := e.reg.check(func() (bool, error) {
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
