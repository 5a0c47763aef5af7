package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// cleanupParallel is how many instances cleanup stops at once.
const cleanupParallel = 64

// cleanup leaves the system as the run found it: it reverts every
// operation still active, stops and removes every instance, waits for the
// adapter's settle time, stops the targets the run started, and has the
// backends capture what adapter checks read and sweep what is left. An
// error in one step never skips the others.
//
// The settle wait alone also ends with interrupt (a signal ends the run at
// once rather than after the settle time), and is not waited at all when
// flowRan is false: a run whose flow was skipped disturbed nothing.
func (e *engine) cleanup(ctx, interrupt context.Context, flowRan bool) {
	reverts := e.book.allReverts()
	for i := len(reverts) - 1; i >= 0; i-- {
		r := reverts[i]
		if e.book.taken(r) {
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

	if e.reg != nil {
		// Instances are stopped side by side, a bounded number at a time:
		// one after the other, the 5,400 pods left of a 6,000-pod run took
		// minutes.
		var wg sync.WaitGroup
		slots := make(chan struct{}, cleanupParallel)
		for _, h := range e.reg.all(e.x) {
			var inst backend.Instance
			var ended, deleted bool
			e.reg.view(func() { inst, ended, deleted = h.inst, h.state.Terminal(), h.deleted })
			if inst == nil || deleted {
				continue
			}
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if !ended {
					e.rec.Record("instance.stopping", rundir.F("workload", h.workload), rundir.F("instance", h.name), rundir.F("reason", "flow ended"))
					// A backend that cannot kill leaves it to its delete.
					if err := inst.Kill(ctx); err != nil && !errors.Is(err, backend.ErrUnsupported) && !errors.Is(err, backend.ErrEnded) {
						e.errorf("stopping instance %s: %v", h.name, err)
					}
				}
				if err := e.finishInstance(ctx, h); err != nil {
					e.errorf("%v", err)
				}
			}()
		}
		wg.Wait()
	}
	e.stopObservers()
	e.stopOTLP(ctx)

	settle := e.a.Settle.D()
	if e.cfg.Settle != nil {
		settle = *e.cfg.Settle
	}
	switch {
	case settle <= 0:
	case !flowRan:
		e.rec.Record("settle.skipped", rundir.F("duration", settle.String()), rundir.F("reason", "the flow did not run"))
	case interrupt.Err() != nil:
		e.rec.Record("settle.skipped", rundir.F("duration", settle.String()), rundir.F("reason", "the run was interrupted"))
	default:
		e.rec.Record("settle.started", rundir.F("duration", settle.String()))
		wait, stop := context.WithCancel(ctx)
		unwatch := context.AfterFunc(interrupt, stop)
		if err := backend.Sleep(wait, settle); err != nil && interrupt.Err() != nil {
			e.rec.Record("settle.interrupted", rundir.F("reason", abortReason(interrupt)))
		}
		unwatch()
		stop()
	}

	e.stopOwnedTargets(ctx)
	// Nothing of the run uses the layers now.
	e.unmountLayers(true)
	e.capture(ctx)
}
