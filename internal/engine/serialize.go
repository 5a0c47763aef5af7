package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Overlapping faults on one target are serialized, in the order they were
// applied: a fault that takes a process down, starts it, waits for it or
// stops it (kill, restart, restart-in-place, outage, crash-loop, freeze)
// acts on a target, instance or role only once every such fault applied to
// it before has returned. Two of them at once would act on one process
// from two sides (one's start taken for the other's, a kill landing in a
// start), which no experiment means. Network and resource faults change
// the target's surroundings, not its process, so they overlap freely.
//
// A fault that has to wait records operation.waiting (which operation it
// waits behind) and, once it may act, operation.waited; a wait ends with
// the flow (timeout, signal), and the fault then never acts.

// lifecycleFaults are the faults serialized per victim.
var lifecycleFaults = map[string]bool{
	experiment.FaultKill: true, experiment.FaultRestart: true, experiment.FaultRestartInPlace: true,
	experiment.FaultOutage: true, experiment.FaultCrashLoop: true, experiment.FaultFreeze: true,
}

// faultTicket is one fault's place in a victim's queue.
type faultTicket struct {
	operation string
	run       int
	// turn is closed when the ticket reaches the head of its queue.
	turn chan struct{}
}

// queueKey names a victim of one run's engine.
type queueKey struct {
	e      *engine
	victim string
}

// faultQueues holds the queue of every victim that has a fault acting or
// waiting; a queue is removed once empty, so nothing outlives a run.
var faultQueues struct {
	mu sync.Mutex
	q  map[queueKey][]*faultTicket
}

// victimKey tells victims apart across kinds: a target, an instance or an
// instance's role.
func victimKey(v victim) string {
	if v.target != "" {
		return "target/" + v.target
	}
	return "instance/" + v.name
}

// serialized runs act, a lifecycle fault of operation o (application run)
// on v, once every lifecycle fault applied to v before it has returned. It
// returns without acting when ctx ends first.
func (e *engine) serialized(ctx context.Context, o *experiment.Operation, run int, v victim, act func() error) error {
	if !lifecycleFaults[o.Uses] {
		return act()
	}
	key := queueKey{e, victimKey(v)}
	t := &faultTicket{operation: o.Name, run: run, turn: make(chan struct{})}
	faultQueues.mu.Lock()
	if faultQueues.q == nil {
		faultQueues.q = map[queueKey][]*faultTicket{}
	}
	q := faultQueues.q[key]
	faultQueues.q[key] = append(q, t)
	var head *faultTicket
	if len(q) == 0 {
		close(t.turn)
	} else {
		head = q[0]
	}
	faultQueues.mu.Unlock()
	defer leaveQueue(key, t)

	if head != nil {
		e.rec.Record("operation.waiting", rundir.F("operation", o.Name), rundir.F("run", run), rundir.F("target", v.name),
			rundir.F("behind", head.operation), rundir.F("behind_run", head.run))
		begin := time.Now()
		select {
		case <-t.turn:
		case <-ctx.Done():
			return fmt.Errorf("waiting for operation %s (run %d) on %s to finish: %w", head.operation, head.run, v.name, context.Cause(ctx))
		}
		e.rec.Record("operation.waited", rundir.F("operation", o.Name), rundir.F("run", run), rundir.F("target", v.name),
			rundir.F("waited", time.Since(begin).Round(time.Millisecond).String()))
	}
	return act()
}

// leaveQueue takes t out of its queue; when t was acting, the next fault in
// line may act.
func leaveQueue(key queueKey, t *faultTicket) {
	faultQueues.mu.Lock()
	defer faultQueues.mu.Unlock()
	q := faultQueues.q[key]
	for i, x := range q {
		if x != t {
			continue
		}
		q = append(q[:i:i], q[i+1:]...)
		if i == 0 && len(q) > 0 {
			close(q[0].turn)
		}
		break
	}
	if len(q) == 0 {
		delete(faultQueues.q, key)
	} else {
		faultQueues.q[key] = q
	}
}
