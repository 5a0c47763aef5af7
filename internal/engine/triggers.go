package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// stateEvent is an instance state change, for state triggers.
type stateEvent struct {
	workload, instance string
	state              backend.State
	reason             string
}

// stateHub fans instance state changes out to armed triggers.
type stateHub struct {
	mu   sync.Mutex
	subs []chan stateEvent
}

func (h *stateHub) subscribe() (chan stateEvent, func()) {
	ch := make(chan stateEvent, 64)
	h.mu.Lock()
	h.subs = append(h.subs, ch)
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, c := range h.subs {
			if c == ch {
				h.subs = append(h.subs[:i], h.subs[i+1:]...)
				return
			}
		}
	}
}

func (h *stateHub) publish(ev stateEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.subs {
		select {
		case c <- ev:
		default: // a trigger that cannot keep up misses changes rather than blocking instances
		}
	}
}

// armTriggers starts one goroutine per triggered operation. They fire
// while ctx lives; the returned func stops them, waits, and records a
// trigger.missed event for each trigger that never fired.
func (e *engine) armTriggers(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	fired := map[string]*int{}
	var mu sync.Mutex
	for i := range e.x.Operations {
		o := &e.x.Operations[i]
		if o.Trigger == nil {
			continue
		}
		n := 0
		fired[o.Name] = &n
		// Subscribe before the flow starts so no change is lost.
		var states chan stateEvent
		var unsub func()
		if o.Trigger.State != nil {
			states, unsub = e.states.subscribe()
		}
		wg.Add(1)
		e.rec.Record("trigger.armed", rundir.F("operation", o.Name), rundir.F("trigger", triggerText(o.Trigger)))
		go func() {
			defer wg.Done()
			if unsub != nil {
				defer unsub()
			}
			times := o.Trigger.Times
			if times == 0 {
				times = 1
			}
			for k := 1; k <= times; k++ {
				what, err := e.awaitTrigger(ctx, o.Trigger, states)
				if err != nil {
					return
				}
				delay := o.Trigger.Delay.D()
				if o.Trigger.DelayMax > o.Trigger.Delay {
					r := e.rng(o.Name+"/trigger", k)
					delay += time.Duration(r.Int64N(int64(o.Trigger.DelayMax.D()-o.Trigger.Delay.D()) + 1))
				}
				e.rec.Record("trigger.fired", rundir.F("operation", o.Name), rundir.F("fire", k), rundir.F("on", what), rundir.F("delay", delay.String()))
				mu.Lock()
				*fired[o.Name]++
				mu.Unlock()
				if err := backend.Sleep(ctx, delay); err != nil {
					return
				}
				if err := e.applyOperation(ctx, o); err != nil && ctx.Err() == nil {
					e.errorf("triggered %v", err)
					return
				}
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
		for _, o := range e.x.Operations {
			if o.Trigger != nil && *fired[o.Name] == 0 {
				e.rec.Record("trigger.missed", rundir.F("operation", o.Name), rundir.F("trigger", triggerText(o.Trigger)))
			}
		}
	}
}

func triggerText(t *experiment.Trigger) string {
	if t.Signal != "" {
		return "signal " + t.Signal
	}
	s := fmt.Sprintf("%s instance %s", t.State.Workload, t.State.State)
	if t.State.Reason != "" {
		s += " (" + t.State.Reason + ")"
	}
	return s
}

// awaitTrigger blocks until the trigger's condition happens and says what
// it saw.
func (e *engine) awaitTrigger(ctx context.Context, t *experiment.Trigger, states chan stateEvent) (string, error) {
	if t.Signal != "" {
		ch, unsub, err := e.subscribeSignal(t.Signal)
		if err != nil {
			return "", err
		}
		defer unsub()
		select {
		case l := <-ch:
			return l.Text, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	for {
		select {
		case ev := <-states:
			st := t.State
			if ev.workload == st.Workload && string(ev.state) == st.State && (st.Reason == "" || st.Reason == ev.reason) {
				return fmt.Sprintf("%s %s", ev.instance, ev.state), nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// sampleProgress records the size of each file a stall check of w watches,
// while the instance lives, into the instance's progress.jsonl.
func (e *engine) sampleProgress(w *experiment.Workload, h *instanceHandle, inst backend.Instance) {
	var files []string
	limit := time.Duration(0)
	for _, c := range w.Checks {
		if c.Kind == experiment.CheckStall && c.File != "" {
			files = append(files, c.File)
			if limit == 0 || c.Limit.D() < limit {
				limit = c.Limit.D()
			}
		}
	}
	if len(files) == 0 {
		return
	}
	interval := min(max(limit/10, 50*time.Millisecond), time.Second)
	out, err := os.OpenFile(filepath.Join(e.dir.InstanceDir(w.Name, h.name), verdict.ProgressFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.errorf("recording progress of %s: %v", h.name, err)
		return
	}
	go func() {
		defer out.Close()
		t := time.NewTicker(interval)
		defer t.Stop()
		sample := func() {
			now := time.Since(e.rec.Start()).Seconds()
			for _, f := range files {
				size := int64(0)
				if sizer, ok := inst.(backend.OutputSizer); ok {
					if n, err := sizer.OutputSize(context.Background(), f); err == nil {
						size = n
					}
				} else if st, err := os.Stat(filepath.Join(e.dir.OutputDir(w.Name, h.name), f)); err == nil {
					size = st.Size()
				}
				line, _ := json.Marshal(map[string]any{"t": float64(int64(now*1e3+0.5)) / 1e3, "file": f, "size": size})
				out.Write(append(line, '\n'))
			}
		}
		for {
			sample()
			select {
			case <-inst.Done():
				sample()
				return
			case <-t.C:
			}
		}
	}()
}
