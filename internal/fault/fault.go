// Package fault is the built-in faults, each written once over the
// primitives of a backend.Handle, so a fault means the same on a process,
// a container and a pod:
//
//	kill              Down at once. An instance ends (Failed) for good; a
//	                  target or role is brought back Up when the flow ends.
//	restart           Down gracefully (SIGTERM, grace, kill), Up, Ready.
//	restart-in-place  Down at once, Up, Ready.
//	outage            Down at once, held down for the duration, Up, Ready.
//	freeze            Freeze, for the duration (or to the flow's end), Thaw.
//	crash-loop        Down; Up and Down again the moment it has started
//	                  (recovering); Up, Ready and Down once more (ready);
//	                  then Up and Ready for good. Op.Aims aims the second
//	                  and third Downs at what the target reports instead.
//
// and the network faults, over a handle's network namespace
// (backend.Networked) with package netfault's rules, each held for the
// duration (or to the flow's end) and then removed:
//
//	latency           every packet it sends is delayed.
//	loss              a share of the packets it sends is dropped.
//	bandwidth         what it sends is limited to a rate.
//	reset             every TCP segment to or from it is answered with a reset.
//	blackhole         every packet to or from it is dropped.
//	partition         members in different groups cannot reach each other.
//
// What each primitive is on each backend is the backend's business; see
// docs/faults.md for the table.
package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// DefaultGrace is how long a graceful stop waits after SIGTERM before it
// kills.
const DefaultGrace = 10 * time.Second

// Op is one application of a fault.
type Op struct {
	Operation string
	Fault     string
	// Duration holds an outage or a freeze; zero holds a freeze until the
	// flow ends.
	Duration time.Duration
	// Grace is a restart's graceful stop (DefaultGrace when zero).
	Grace time.Duration
	// Run is the operation's application count.
	Run int
	// Net applies the run's network rules, and Network is the rule of a
	// network fault (not a partition: see Partition).
	Net     *netfault.Manager
	Network *netfault.Spec
	// Aims aim a crash loop's recovering and ready kills (by phase) at
	// what the target reports; a phase without one keeps the default:
	// the recovering kill comes once it has started, the ready kill once
	// it is healthy.
	Aims map[string]Aim
	// Resource is the parameters of a resource fault, and Journal the
	// run's journal of them (resource.go).
	Resource *experiment.Resource
	Journal  *ResourceJournal
	// Clock is the parameters of a clock fault (clock.go), which Journal
	// records too.
	Clock *experiment.Clock
	// FS is a file-system fault's (filesystem.go).
	FS *FSOp
}

// Aim waits until the target reports a phase, counting only what it
// reported at or after since (the kill before), and says what it saw.
type Aim func(ctx context.Context, since time.Time) (string, error)

// Env is what a fault needs from the run applying it.
type Env interface {
	// Record writes a timeline event.
	Record(event string, fields ...rundir.Field)
	// Revert registers undo to run when the flow ends or the run aborts,
	// whichever comes first, and returns a func that runs it now instead
	// (at most once either way).
	Revert(undo func(ctx context.Context) error) (now func(ctx context.Context) error)
	// Back is told when a handle a fault took down is up and ready again.
	Back(h backend.Handle)
}

// Ender is a handle that can end for good: an instance.
type Ender interface {
	Kill(ctx context.Context) error
}

// Apply applies op to h. It returns once the fault has had its effect and,
// for an outage or a freeze with a duration, once it has been reverted.
// An aborted ctx cuts a hold short, but the revert still runs.
func Apply(ctx context.Context, env Env, op Op, h backend.Handle) error {
	grace := op.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	// A Down that has begun is seen through even when the run is aborted
	// meanwhile: it returns once nothing of the handle runs, so what it took
	// down is always in a known state, and brought back when it should be;
	// but for abortGrace at most, so nothing keeps an aborted run alive.
	down, stop := seeThrough(ctx)
	defer stop()
	if done, err := applyRemote(ctx, env, op, h); done || err != nil {
		return err
	}
	switch op.Fault {
	case experiment.FaultKill:
		if e, ok := h.(Ender); ok {
			return e.Kill(down)
		}
		if err := h.Down(down, backend.Down{Reason: "Killed"}); err != nil {
			return err
		}
		// Leave the system as the run found it, where it still exists.
		env.Revert(func(ctx context.Context) error {
			if err := back(ctx, env, op, h); err != nil && !errors.Is(err, backend.ErrGone) {
				return err
			}
			return nil
		})
		return nil
	case experiment.FaultRestart:
		if err := h.Down(down, backend.Down{Grace: grace, Reason: "Restarting"}); err != nil {
			return err
		}
		return back(down, env, op, h)
	case experiment.FaultRestartInPlace:
		if err := h.Down(down, backend.Down{Reason: "Restarting", InPlace: true}); err != nil {
			return err
		}
		return back(down, env, op, h)
	case experiment.FaultOutage:
		if err := h.Down(down, backend.Down{Reason: "Outage", Hold: true}); err != nil {
			return err
		}
		return hold(ctx, env, op, func(ctx context.Context) error { return back(ctx, env, op, h) })
	case experiment.FaultFreeze:
		// A freeze that has begun is seen through, as a Down is. One that
		// did not complete may still be asked for (cgroup.freeze written,
		// frozen 1 never seen) with no revert registered: thaw it now, or
		// nothing ever would.
		if err := h.Freeze(down); err != nil {
			if errors.Is(err, backend.ErrUnsupported) {
				return err
			}
			tctx, stop := seeThrough(ctx)
			defer stop()
			if terr := h.Thaw(tctx); terr != nil {
				return errors.Join(err, fmt.Errorf("thawing after the freeze failed: %w", terr))
			}
			return err
		}
		return hold(ctx, env, op, h.Thaw)
	case experiment.FaultCrashLoop:
		return crashLoop(ctx, env, op, h)
	case experiment.FaultLatency, experiment.FaultLoss, experiment.FaultBandwidth, experiment.FaultReset, experiment.FaultBlackhole:
		return applyNetwork(ctx, env, op, h)
	case experiment.FaultPartition:
		// One member's own rule (what it must not take from the others),
		// as the agent of its node is asked for it by Partition.
		if op.Network != nil && op.Network.Fault == netfault.Partition {
			return applyNetwork(ctx, env, op, h)
		}
		return errors.New("a partition acts on all its members at once (fault.Partition)")
	}
	if experiment.IsFSFault(op.Fault) {
		return applyFS(ctx, env, op, h)
	}
	if experiment.IsResourceFault(op.Fault) {
		return applyResource(ctx, env, op, h)
	}
	if experiment.IsClockFault(op.Fault) {
		return applyClock(ctx, env, op, h)
	}
	return fmt.Errorf("unknown fault %s", op.Fault)
}

// nodeFault says whether fault f acts on what only the handle's node
// reaches (its cgroups, its network namespace, its processes).
func nodeFault(f string) bool {
	switch f {
	case experiment.FaultFreeze, experiment.FaultLatency, experiment.FaultLoss, experiment.FaultBandwidth, experiment.FaultReset, experiment.FaultBlackhole:
		return true
	}
	return experiment.IsResourceFault(f) || experiment.IsClockFault(f)
}

// applyRemote applies a node fault through the agent of h's node, when h
// has one (backend.Remote), and holds it as the fault is held here; done
// is false when the fault is to be applied from this machine.
func applyRemote(ctx context.Context, env Env, op Op, h backend.Handle) (done bool, err error) {
	r, ok := h.(backend.Remote)
	if !ok || !nodeFault(op.Fault) {
		return false, nil
	}
	f := backend.RemoteFault{Fault: op.Fault, Operation: op.Operation, Run: op.Run, Network: op.Network, Resource: op.Resource, Clock: op.Clock}
	// As a local application, one that has begun is seen through.
	undo, remote, err := r.ApplyRemote(context.WithoutCancel(ctx), f)
	if err != nil || !remote {
		return remote || err != nil, err
	}
	return true, hold(ctx, env, op, undo)
}

// back brings h up again and waits until it is ready.
func back(ctx context.Context, env Env, op Op, h backend.Handle) error {
	if err := h.Up(ctx); err != nil {
		return err
	}
	if err := h.Ready(ctx); err != nil {
		return err
	}
	env.Back(h)
	return nil
}

// hold registers undo as the revert and, with a duration, waits it out
// and reverts at once; without one, the revert waits for the end of the
// flow. An abort cuts the wait short and reverts at once.
func hold(ctx context.Context, env Env, op Op, undo func(ctx context.Context) error) error {
	now := env.Revert(undo)
	if op.Duration <= 0 {
		return nil
	}
	err := backend.Sleep(ctx, op.Duration)
	rctx, stop := seeThrough(ctx)
	defer stop()
	if rerr := now(rctx); rerr != nil {
		return rerr
	}
	return err
}

// Phases of a crash loop, in the order the kills come.
const (
	PhaseFirst      = "first"
	PhaseRecovering = "recovering"
	PhaseReady      = "ready"
)

// crashLoop kills h, kills it again the moment it has started (while it is
// recovering), once more just after it is ready, then brings it back for
// good. Each kill is recorded with its phase and the id it hit.
func crashLoop(ctx context.Context, env Env, op Op, h backend.Handle) error {
	// Once the first kill has landed the handle is always brought back: an
	// abort in between ends the loop early with the handle up and ready.
	bg, stop := seeThrough(ctx)
	defer stop()
	var downAt time.Time
	kill := func(ctx context.Context, phase, aimed string) error {
		fields := []rundir.Field{rundir.F("operation", op.Operation), rundir.F("target", h.Name()), rundir.F("phase", phase), rundir.F("id", h.ID())}
		if aimed != "" {
			fields = append(fields, rundir.F("on", aimed))
		}
		env.Record("crash-loop.kill", fields...)
		err := h.Down(ctx, backend.Down{Reason: "CrashLoop"})
		downAt = time.Now()
		return err
	}
	aborted := func(err error) error {
		return errors.Join(err, back(bg, env, op, h))
	}
	// settle ends the loop early on a target that is already up: an aim
	// that saw nothing, an abort while it waited.
	settle := func(err error) error {
		if rerr := h.Ready(bg); rerr != nil {
			return errors.Join(err, rerr)
		}
		env.Back(h)
		return err
	}
	// aim waits for the phase's aim, if it has one, after Up.
	aim := func(phase string) (string, bool, error) {
		a := op.Aims[phase]
		if a == nil {
			return "", false, nil
		}
		what, err := a(ctx, downAt)
		return what, true, err
	}
	if err := kill(bg, PhaseFirst, ""); err != nil {
		return err
	}
	if err := h.Up(bg); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return aborted(context.Cause(ctx))
	}
	what, _, err := aim(PhaseRecovering)
	if err != nil {
		return settle(err)
	}
	if err := kill(bg, PhaseRecovering, what); err != nil {
		return err
	}
	if err := h.Up(bg); err != nil {
		return err
	}
	what, aimed, err := aim(PhaseReady)
	if err != nil {
		return settle(err)
	}
	if !aimed {
		if err := h.Ready(bg); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return aborted(context.Cause(ctx))
	}
	if err := kill(bg, PhaseReady, what); err != nil {
		return err
	}
	return back(bg, env, op, h)
}
