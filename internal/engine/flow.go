package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// errFlowTimeout marks the experiment's timeout running out.
var errFlowTimeout = errors.New("experiment timeout")

// runFlow runs the flow tree under the experiment's timeout. A flow error
// (an operation that did not complete, a wait that timed out) stops the
// flow and is a harness error.
func (e *engine) runFlow(ctx context.Context) {
	if e.x.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, e.x.Timeout.D(), errFlowTimeout)
		defer cancel()
	}
	untap := e.tapSignals()
	defer untap()
	if m := e.x.Matrix; m != nil {
		e.rec.Record("matrix.cells", rundir.F("cells", m.Cells()))
	}
	disarm := e.armTriggers(ctx)
	err := e.node(ctx, e.x.Flow)
	disarm()
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errFlowTimeout):
		e.errorf("the flow did not finish within the experiment's timeout of %s", e.x.Timeout)
	case e.abortedBy() != "", errors.Is(context.Cause(ctx), errHarnessStop):
		// The abort is recorded by the caller; the harness's own stop by
		// the guard that stopped it.
	default:
		e.errorf("flow: %v", err)
	}
}

func (e *engine) node(ctx context.Context, f *experiment.FlowNode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fields := []rundir.Field{rundir.F("node", nodeID(f)), rundir.F("kind", f.Kind), rundir.F("name", f.Label())}
	e.rec.Record("node.started", fields...)
	err := e.nodeBody(ctx, f)
	fin := append(fields[:3:3], rundir.F("ok", err == nil))
	if err != nil {
		fin = append(fin, rundir.F("error", err.Error()))
	}
	e.rec.Record("node.finished", fin...)
	return err
}

// nodeID names a node in events: its path in the manifest.
func nodeID(f *experiment.FlowNode) string { return f.Path }

func (e *engine) nodeBody(ctx context.Context, f *experiment.FlowNode) error {
	switch f.Kind {
	case experiment.FlowRef:
		if w := e.x.Workload(f.Ref); w != nil {
			return e.runWorkload(ctx, w)
		}
		return e.applyOperation(ctx, e.x.Operation(f.Ref))
	case experiment.FlowSerial:
		for _, c := range f.Children {
			if err := e.node(ctx, c); err != nil {
				return err
			}
		}
		return nil
	case experiment.FlowParallel:
		return e.parallel(ctx, f.Children)
	case experiment.FlowDelay:
		return backend.Sleep(ctx, f.Delay.D())
	case experiment.FlowWait:
		if f.Wait.Signal != "" {
			return e.waitSignal(ctx, f.Wait)
		}
		return e.waitWorkload(ctx, f.Wait)
	case experiment.FlowRepeat:
		return e.repeat(ctx, f)
	case experiment.FlowStop:
		return e.stopWorkload(ctx, f.Stop)
	case experiment.FlowGenerate:
		return e.generate(ctx, f)
	}
	return fmt.Errorf("unknown flow node kind %q", f.Kind)
}

// stopWorkload asks every running instance of the workload to stop: the
// backend creates the stop file ($CHAOS_STOP_FILE) in each, and each
// request is recorded as instance.stop-requested. It does not wait for
// them to end (the workload's node, or a wait, does). Instances not yet
// created, or already ended, are left alone. An instance whose backend
// cannot be asked to stop is a harness error: the flow cannot do what the
// experiment says.
func (e *engine) stopWorkload(ctx context.Context, workload string) error {
	live := e.reg.live(workload)
	var errs []error
	for _, h := range live {
		sr, ok := h.inst.(backend.StopRequester)
		if !ok {
			errs = append(errs, fmt.Errorf("instance %s cannot be asked to stop: its backend does not support the stop node", h.name))
			continue
		}
		if err := sr.RequestStop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("asking %s to stop: %w", h.name, err))
			continue
		}
		e.rec.Record("instance.stop-requested", rundir.F("workload", workload), rundir.F("instance", h.name))
	}
	return errors.Join(errs...)
}

// parallel runs children at once; the first error cancels the others.
func (e *engine) parallel(ctx context.Context, children []*experiment.FlowNode) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.node(ctx, c); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		}()
	}
	wg.Wait()
	return first
}

func (e *engine) repeat(ctx context.Context, f *experiment.FlowNode) error {
	r := f.Repeat
	var deadline time.Time
	if r.For > 0 {
		deadline = time.Now().Add(r.For.D())
	}
	for round := 1; ; round++ {
		if r.Times > 0 && round > r.Times {
			return nil
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil
		}
		e.rec.Record("repeat.round", rundir.F("node", nodeID(f)), rundir.F("round", round))
		if err := e.node(ctx, r.Body); err != nil {
			return err
		}
	}
}

// generate runs the schedule the node draws from the run's seed: each
// step's gap (after the signal's next line, when the node has after), then
// its operation (with its duration and revert), as the serial flow of
// delays (or signal waits) and operations a reproducer writes would.
func (e *engine) generate(ctx context.Context, f *experiment.FlowNode) error {
	s := f.Generate.Draw(e.seed, nodeID(f))
	e.rec.Record("schedule.drawn", rundir.F("node", s.Node), rundir.F("steps", s.Steps))
	for i, st := range s.Steps {
		var err error
		if s.Signal != "" {
			err = e.waitSignal(ctx, &experiment.Wait{Signal: s.Signal, Delay: st.Gap, Timeout: s.Timeout})
		} else {
			err = backend.Sleep(ctx, st.Gap.D())
		}
		if err != nil {
			return err
		}
		e.rec.Record("schedule.step", rundir.F("node", s.Node), rundir.F("step", i+1), rundir.F("of", len(s.Steps)), rundir.F("operation", st.Operation))
		if err := e.applyOperation(ctx, e.x.Operation(st.Operation)); err != nil {
			return err
		}
	}
	return nil
}

// waitSignal waits for the first line matching the adapter's signal since
// the moment the wait's since names (by default the wait's own start: the
// next line), then for the wait's delay. A timeout is a flow error.
func (e *engine) waitSignal(ctx context.Context, w *experiment.Wait) error {
	sig := e.a.Signals[w.Signal]
	since := e.reg.signals.sinceTime(w.Since, time.Now())
	if w.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, w.Timeout.D(), fmt.Errorf("wait for signal %s timed out after %s", w.Signal, w.Timeout))
		defer cancel()
	}
	l, err := e.signalSince(ctx, w.Signal, since)
	if err != nil {
		return err
	}
	fields := []rundir.Field{rundir.F("signal", w.Signal), rundir.F("watch", sig.Watch), rundir.F("line", l.Text), rundir.F("delay", w.Delay.String())}
	if w.Since != "" {
		fields = append(fields, rundir.F("since", w.Since), rundir.F("line_t", roundSeconds(l.TS.Sub(e.rec.Start()).Seconds())))
	}
	e.rec.Record("signal.matched", fields...)
	return backend.Sleep(ctx, w.Delay.D())
}

// roundSeconds rounds to the millisecond, as the timeline's times are.
func roundSeconds(t float64) float64 { return float64(int64(t*1e3+0.5)) / 1e3 }

// waitWorkload waits until the workload's instances meet the condition.
func (e *engine) waitWorkload(ctx context.Context, w *experiment.Wait) error {
	if w.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.Timeout.D())
		defer cancel()
	}
	insts := e.reg.workload(w.Workload)
	begun := time.Now()
	cond := func() (bool, error) {
		for _, in := range insts {
			// An instance whose backend reported it running before its
			// handle was stored is not yet one an operation can act on.
			if in.inst == nil && !in.state.Terminal() {
				return false, nil
			}
			switch w.Condition {
			case experiment.CondCreated:
				if !in.created {
					return false, nil
				}
			case experiment.CondStarted:
				if !in.everRan {
					return false, nil
				}
			case experiment.CondRunning:
				// Running is impossible once an instance has ended: say so
				// at once, not after waiting for the others.
				if in.state.Terminal() {
					return false, fmt.Errorf("instance %s ended (%s) before all of %s were running", in.name, in.state, w.Workload)
				}
				if in.state != backend.Running {
					return false, nil
				}
			case experiment.CondFinished:
				if !in.state.Terminal() {
					return false, nil
				}
			case experiment.CondReady:
				// Ready since its latest start (markReady), or, with
				// since: now, since the wait began.
				if in.state.Terminal() {
					return false, fmt.Errorf("instance %s ended (%s) before all of %s were ready", in.name, in.state, w.Workload)
				}
				if !in.ready || w.Since == experiment.SinceNow && in.readyAt.Before(begun) {
					return false, nil
				}
			case experiment.CondSucceeded:
				if in.state == backend.Failed {
					return false, fmt.Errorf("instance %s failed, so %s can never all succeed", in.name, w.Workload)
				}
				if in.state != backend.Succeeded {
					return false, nil
				}
			}
		}
		return true, nil
	}
	for {
		ok, changed, err := e.reg.check(cond)
		if err != nil || ok {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if w.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && context.Cause(ctx) == context.DeadlineExceeded {
				return fmt.Errorf("wait for %s %s timed out after %s", w.Workload, w.Condition, w.Timeout)
			}
			return context.Cause(ctx)
		}
	}
}

// runWorkload creates every instance of w, waits for each to end (killing
// it at the workload's timeout), then collects and deletes it.
func (e *engine) runWorkload(ctx context.Context, w *experiment.Workload) error {
	runSh, wrapper, err := writeWorkloadFiles(e.dir, w.Name, w.Run)
	if err != nil {
		return err
	}
	insts := e.reg.workload(w.Name)
	var wg sync.WaitGroup
	errs := make([]error, len(insts))
	for i, h := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.runInstance(ctx, w, h, runSh, wrapper)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e *engine) instanceEnv(w *experiment.Workload, h *instanceHandle) []string {
	out := e.dir.OutputDir(w.Name, h.name)
	env := envvar.Merge(e.baseEnv, w.Env)
	return envvar.Set(env,
		"CHAOS_WORKLOAD", w.Name,
		"CHAOS_INSTANCE", h.name,
		"CHAOS_INSTANCE_INDEX", fmt.Sprint(h.index),
		"CHAOS_INSTANCES", fmt.Sprint(w.InstanceCount()),
		"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR", out,
		"CHAOS_RUN_SCRIPT", e.dir.Path("workloads", w.Name, "run.sh"),
		// Operation histories and the stop node (docs/checkers.md). A
		// backend whose output directory is elsewhere maps these two paths
		// into the instance as it does the output directory.
		"CHAOS_HISTORY", filepath.Join(out, filepath.FromSlash(history.File)),
		"CHAOS_STOP_FILE", filepath.Join(out, filepath.FromSlash(backend.StopFile)),
		"CHAOS_RUN_START", fmt.Sprintf("%.6f", float64(e.rec.Start().UnixNano())/1e9),
		"CHAOS_HISTORY_SH", history.ShellHelper,
	)
}

func (e *engine) runInstance(ctx context.Context, w *experiment.Workload, h *instanceHandle, runSh, wrapper string) error {
	idir := e.dir.InstanceDir(w.Name, h.name)
	env := e.instanceEnv(w, h)
	if err := os.MkdirAll(idir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(idir, "env"), e.redact.EnvFile(env), 0o644); err != nil {
		return err
	}
	spec := backend.InstanceSpec{
		Workload: w.Name, Name: h.name, Index: h.index,
		Dir: idir, OutputDir: e.dir.OutputDir(w.Name, h.name), LogDir: filepath.Join(idir, "logs"),
		Wrapper: wrapper, Script: runSh, Env: env, Image: w.Image,
		OnState: func(s backend.State, reason string) { e.setState(h, s, reason) },
	}
	if w.Clock != nil {
		spec.TimeOffsets = &backend.TimeOffsets{Monotonic: w.Clock.MonotonicOffset(), Boottime: w.Clock.BoottimeOffset()}
	}
	inst, err := e.be.Create(ctx, spec)
	if err != nil {
		e.setState(h, backend.Failed, "CreateFailed")
		return fmt.Errorf("creating instance %s: %w", h.name, err)
	}
	e.reg.update(func() { h.inst = inst })
	e.rec.Record("instance.created", rundir.F("workload", w.Name), rundir.F("instance", h.name), rundir.F("system_id", inst.ID()))
	e.reg.update(func() { h.created = true })
	e.sampleProgress(w, h, inst)
	e.watchReady(w, h, inst)

	var timeout <-chan time.Time
	if w.Timeout > 0 {
		t := time.NewTimer(w.Timeout.D())
		defer t.Stop()
		timeout = t.C
	}
	var runErr error
	select {
	case <-inst.Done():
	case <-timeout:
		e.rec.Record("instance.timeout", rundir.F("workload", w.Name), rundir.F("instance", h.name), rundir.F("timeout", w.Timeout.String()))
		kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := inst.Kill(kctx); err != nil && !errors.Is(err, backend.ErrUnsupported) && !errors.Is(err, backend.ErrEnded) {
			runErr = fmt.Errorf("killing timed-out instance %s: %w", h.name, err)
		}
		cancel()
	case <-ctx.Done():
		// Cleanup stops, collects and deletes it.
		return context.Cause(ctx)
	}
	if err := e.finishInstance(context.Background(), h); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// setState records a state change and wakes waiters.
func (e *engine) setState(h *instanceHandle, s backend.State, reason string) {
	if s == backend.Pending {
		// Taken down: what it reports from here on is its next start's.
		e.markReady(h)
	}
	e.reg.update(func() {
		h.state = s
		if s == backend.Running {
			h.everRan = true
		}
		if s == backend.Created {
			h.created = true
		}
	})
	e.rec.Record("instance.state", rundir.F("workload", h.workload), rundir.F("instance", h.name), rundir.F("state", string(s)), rundir.F("reason", reason))
	e.states.publish(stateEvent{workload: h.workload, instance: h.name, state: s, reason: reason})
}

// finishInstance collects and deletes an instance once; errors are harness
// errors since a sandbox that cannot be deleted is the harness's problem.
func (e *engine) finishInstance(ctx context.Context, h *instanceHandle) error {
	// One caller at a time finishes an instance; a delete that failed is
	// tried again by cleanup, a collect is not repeated.
	h.finishing.Lock()
	defer h.finishing.Unlock()
	var inst backend.Instance
	var collected, deleted bool
	e.reg.view(func() { inst, collected, deleted = h.inst, h.collected, h.deleted })
	if inst == nil {
		return nil
	}
	var errs []error
	if !collected {
		if err := inst.Collect(ctx); err != nil {
			errs = append(errs, fmt.Errorf("collecting %s: %w", h.name, err))
		}
		e.reg.update(func() { h.collected = true })
		e.rec.Record("instance.collected", rundir.F("workload", h.workload), rundir.F("instance", h.name), rundir.F("exit_code", readExitCode(e.dir.OutputDir(h.workload, h.name))))
	}
	if !deleted {
		if err := inst.Delete(ctx); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w", h.name, err))
		} else {
			e.reg.update(func() { h.deleted = true })
			e.rec.Record("instance.deleted", rundir.F("workload", h.workload), rundir.F("instance", h.name))
		}
	}
	return errors.Join(errs...)
}

// readExitCode returns the recorded exit code, or nil when none was.
func readExitCode(out string) any {
	data, err := os.ReadFile(filepath.Join(out, ".chaos", "exit_code"))
	if err != nil {
		return nil
	}
	var code int
	if _, err := fmt.Sscan(string(data), &code); err != nil {
		return nil
	}
	return code
}
