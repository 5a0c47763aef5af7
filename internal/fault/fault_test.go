package fault

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// script is a handle that writes down the primitives it was asked for;
// upErr, when set, is what Up returns.
type script struct {
	mu    sync.Mutex
	calls []string
	upErr error
}

func (s *script) note(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}
func (s *script) Name() string { return "h" }
func (s *script) ID() string   { return "1" }
func (s *script) Down(ctx context.Context, d backend.Down) error {
	if d.Grace > 0 {
		s.note("down(" + d.Grace.String() + ")")
	} else {
		s.note("down")
	}
	return nil
}
func (s *script) Up(context.Context) error     { s.note("up"); return s.upErr }
func (s *script) Ready(context.Context) error  { s.note("ready"); return nil }
func (s *script) Freeze(context.Context) error { s.note("freeze"); return nil }
func (s *script) Thaw(context.Context) error   { s.note("thaw"); return nil }

type ender struct{ script }

func (e *ender) Kill(context.Context) error { e.note("kill"); return nil }

type env struct {
	events  []string
	reverts []func(context.Context) error
	back    int
}

func (e *env) Record(name string, fields ...rundir.Field) { e.events = append(e.events, name) }
func (e *env) Back(backend.Handle)                        { e.back++ }
func (e *env) Revert(undo func(context.Context) error) func(context.Context) error {
	done := false
	run := func(ctx context.Context) error {
		if done {
			return nil
		}
		done = true
		return undo(ctx)
	}
	e.reverts = append(e.reverts, run)
	return run
}

// flowEnd runs the reverts still pending, as cleanup does.
func (e *env) flowEnd(t *testing.T) {
	for i := len(e.reverts) - 1; i >= 0; i-- {
		if err := e.reverts[i](context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestComposition: each fault is the same sequence of primitives on any
// handle, up to the flow's end.
func TestComposition(t *testing.T) {
	for _, c := range []struct {
		op       Op
		instance bool
		want     string
		back     int
	}{
		{Op{Fault: experiment.FaultKill}, true, "kill", 0},
		{Op{Fault: experiment.FaultKill}, false, "down up ready", 1},
		{Op{Fault: experiment.FaultRestart}, false, "down(10s) up ready", 1},
		{Op{Fault: experiment.FaultRestart, Grace: time.Second}, true, "down(1s) up ready", 1},
		{Op{Fault: experiment.FaultRestartInPlace}, false, "down up ready", 1},
		{Op{Fault: experiment.FaultOutage, Duration: time.Millisecond}, false, "down up ready", 1},
		{Op{Fault: experiment.FaultFreeze, Duration: time.Millisecond}, false, "freeze thaw", 0},
		{Op{Fault: experiment.FaultFreeze}, false, "freeze thaw", 0},
		{Op{Fault: experiment.FaultCrashLoop}, false, "down up down up ready down up ready", 1},
	} {
		var h backend.Handle
		s := &script{}
		if c.instance {
			e := &ender{}
			h, s = e, &e.script
		} else {
			h = s
		}
		e := &env{}
		if err := Apply(context.Background(), e, c.op, h); err != nil {
			t.Fatal(err)
		}
		e.flowEnd(t)
		if got := strings.Join(s.calls, " "); got != c.want || e.back != c.back {
			t.Errorf("%s (instance %v): %q, back %d; want %q, back %d", c.op.Fault, c.instance, got, e.back, c.want, c.back)
		}
	}
}

// TestKilledRoleThatIsGone: a kill's revert leaves alone what no longer
// exists, and reports any other failure to bring it back.
func TestKilledRoleThatIsGone(t *testing.T) {
	for _, c := range []struct {
		upErr   error
		wantErr bool
	}{{backend.ErrGone, false}, {errors.New("engine says no"), true}} {
		e := &env{}
		if err := Apply(context.Background(), e, Op{Fault: experiment.FaultKill}, &script{upErr: c.upErr}); err != nil {
			t.Fatal(err)
		}
		err := e.reverts[0](context.Background())
		if (err != nil) != c.wantErr {
			t.Errorf("Up failing with %v: revert error %v", c.upErr, err)
		}
	}
}

// TestAbortedOutageComesBack: an abort cuts the hold short, and the
// handle is brought back before Apply returns.
func TestAbortedOutageComesBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &script{}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	err := Apply(ctx, &env{}, Op{Fault: experiment.FaultOutage, Duration: time.Hour}, s)
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	if got := strings.Join(s.calls, " "); got != "down up ready" {
		t.Fatalf("calls %q", got)
	}
}

// slowDown is a handle whose Down takes 100 ms and, like a real one, gives
// up when its context ends.
type slowDown struct{ script }

func (s *slowDown) Down(ctx context.Context, d backend.Down) error {
	s.note("down")
	select {
	case <-time.After(100 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestAbortDuringDown: an abort that comes while an outage's Down is under
// way does not leave the handle half down: Down is seen through, the hold
// is cut short and the handle brought back, and Apply reports the abort.
func TestAbortDuringDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &slowDown{}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	err := Apply(ctx, &env{}, Op{Fault: experiment.FaultOutage, Duration: time.Hour}, s)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the abort", err)
	}
	if got := strings.Join(s.calls, " "); got != "down up ready" {
		t.Fatalf("calls %q, want down up ready", got)
	}
}

// slowFreeze is a handle whose Freeze asks for the freeze, tells started,
// and then does what freeze says: like cgroup.Freeze, one that gives up
// leaves the freeze asked for.
type slowFreeze struct {
	script
	started, aborted chan struct{}
	freeze           func(ctx context.Context, aborted <-chan struct{}) error
}

func (s *slowFreeze) Freeze(ctx context.Context) error {
	s.note("freeze")
	close(s.started)
	return s.freeze(ctx, s.aborted)
}

// TestFreezeCutShortIsThawed: a freeze that has begun is seen through an
// abort, as a Down is, and one that did not complete is thawed before
// Apply returns; either way nothing is left frozen with no revert to thaw
// it.
func TestFreezeCutShortIsThawed(t *testing.T) {
	defer func(g time.Duration) { abortGrace = g }(abortGrace)
	// frozenAfterAbort: the kernel says frozen just after the abort.
	frozenAfterAbort := func(ctx context.Context, aborted <-chan struct{}) error {
		<-aborted
		return ctx.Err()
	}
	neverFrozen := func(ctx context.Context, _ <-chan struct{}) error {
		<-ctx.Done()
		return ctx.Err()
	}
	timedOut := func(context.Context, <-chan struct{}) error {
		return errors.New("freezing cgroup: waiting for frozen 1: context deadline exceeded")
	}
	for _, c := range []struct {
		name     string
		duration time.Duration
		abort    bool
		// grace is abortGrace: long where the freeze must be seen through
		// however slowly this test runs, short where it is never confirmed.
		grace   time.Duration
		freeze  func(ctx context.Context, aborted <-chan struct{}) error
		wantErr bool
	}{
		{"frozen just after an abort, held for a duration", time.Hour, true, time.Minute, frozenAfterAbort, true},
		{"frozen just after an abort, held to the flow's end", 0, true, time.Minute, frozenAfterAbort, false},
		{"never frozen, abort", time.Hour, true, 50 * time.Millisecond, neverFrozen, true},
		{"never frozen, the backend gave up", 0, false, time.Minute, timedOut, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			abortGrace = c.grace
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &slowFreeze{started: make(chan struct{}), aborted: make(chan struct{}), freeze: c.freeze}
			if c.abort {
				go func() {
					<-s.started
					cancel()
					close(s.aborted)
				}()
			}
			e := &env{}
			err := Apply(ctx, e, Op{Fault: experiment.FaultFreeze, Duration: c.duration}, s)
			if (err != nil) != c.wantErr {
				t.Errorf("err %v, want an error: %v", err, c.wantErr)
			}
			e.flowEnd(t)
			if got := strings.Join(s.calls, " "); got != "freeze thaw" {
				t.Errorf("calls %q, want freeze thaw", got)
			}
		})
	}
}
