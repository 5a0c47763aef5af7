// Package backendtest is the conformance suite every backend runs: the
// built-in faults are written once over the Handle primitives (package
// fault), so each backend must give the primitives the same meaning,
// proven by their effects on the instance's output and states.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/redact"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// Harness makes a fresh backend for one test and says what it supports.
type Harness struct {
	New func(t *testing.T) backend.Backend
	// Image is the image instances run from, for backends that need one.
	Image string
	// Env is added to every instance's environment.
	Env []string
	// NoPrimitives says the backend's instances support none of the
	// faults' primitives (instances made by hooks): those cases must get
	// ErrUnsupported.
	NoPrimitives bool
	// LoseEnds, when set, makes a backend that loses every end event its
	// system sends, so the suite can prove its watchdog ends instances
	// anyway. Backends whose ends are not events (waitid, a polled state
	// hook) leave it nil and say why in NoLostEvents.
	LoseEnds     func(t *testing.T) backend.Backend
	NoLostEvents string
	// NewHandle, when set, makes a handle that is not an instance (a
	// target, a role) running a script that appends a line to a file every
	// 50 ms; lines reads that file's line count.
	NewHandle func(t *testing.T) (h backend.Handle, lines func() int)
	// Unsupported are the faults the backend cannot apply to instances
	// (and handles); their primitives must say ErrUnsupported.
	Unsupported []string
	// Patience bounds each wait for an effect (default 30 s): a backend
	// whose system restarts things on its own schedule needs more.
	Patience time.Duration
}

func (h Harness) supports(fault string) bool { return !slices.Contains(h.Unsupported, fault) }

func (h Harness) patience() time.Duration {
	if h.Patience > 0 {
		return h.Patience
	}
	return 30 * time.Second
}

// recorder keeps an instance's states and wakes waiters on each change.
type recorder struct {
	mu      sync.Mutex
	states  []string
	reasons []string
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) on(s backend.State, reason string) {
	r.mu.Lock()
	r.states = append(r.states, string(s))
	r.reasons = append(r.reasons, reason)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.states...)
}

func (r *recorder) last() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return "", ""
	}
	return r.states[len(r.states)-1], r.reasons[len(r.reasons)-1]
}

// patience is how long waitFor waits; the suite sets it from the harness.
var patience = 30 * time.Second

// waitFor waits until the states recorded satisfy ok.
func (r *recorder) waitFor(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	deadline := time.After(patience)
	for {
		r.mu.Lock()
		got, ch := append([]string(nil), r.states...), r.changed
		r.mu.Unlock()
		if ok(got) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; states %v", what, got)
		}
	}
}

// started is the states from the first Running on: a pod may be Pending
// (ContainerCreating) before it starts, which is not a fault's doing.
func started(states []string) []string {
	for i, s := range states {
		if s == "Running" {
			return states[i:]
		}
	}
	return nil
}

func count(states []string, s string) int {
	n := 0
	for _, x := range states {
		if x == s {
			n++
		}
	}
	return n
}

// create starts one instance running script and returns it, its recorder
// and its output directory.
func (h Harness) create(t *testing.T, b backend.Backend, name, script string) (backend.Instance, *recorder, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "output")
	wrapper, run := filepath.Join(dir, "wrapper.sh"), filepath.Join(dir, "run.sh")
	os.WriteFile(wrapper, []byte(backend.WrapperScript), 0o755)
	os.WriteFile(run, []byte(script), 0o755)
	rec := newRecorder()
	env := append(append(os.Environ(), h.Env...), "CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR="+out, "CHAOS_RUN_SCRIPT="+run)
	if name == "" {
		name = "w-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	}
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	inst, err := b.Create(context.Background(), backend.InstanceSpec{
		Workload: "w", Name: strings.Trim(name, "-"), Dir: dir, OutputDir: out, LogDir: filepath.Join(dir, "logs"),
		Wrapper: wrapper, Script: run, Env: env, Image: h.Image, OnState: rec.on,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Delete(context.Background()) })
	return inst, rec, out
}

func read(t *testing.T, inst backend.Instance, out, rel string) string {
	t.Helper()
	if err := inst.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(out, rel))
	return string(b)
}

func lines(s string) int { return strings.Count(s, "\n") }

// env is a fault.Env that records nothing and runs reverts when the test
// ends.
type env struct {
	t    *testing.T
	mu   sync.Mutex
	back int
}

func (e *env) Record(string, ...rundir.Field) {}
func (e *env) Back(backend.Handle) {
	e.mu.Lock()
	e.back++
	e.mu.Unlock()
}
func (e *env) Revert(undo func(ctx context.Context) error) func(ctx context.Context) error {
	var once sync.Once
	run := func(ctx context.Context) error {
		var err error
		once.Do(func() { err = undo(ctx) })
		return err
	}
	e.t.Cleanup(func() { run(context.Background()) })
	return run
}

func done(inst backend.Instance, limit time.Duration) bool {
	select {
	case <-inst.Done():
		return true
	case <-time.After(limit):
		return false
	}
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	patience = h.patience()

	t.Run("a short instance shows every state and its exit code", func(t *testing.T) {
		b := h.New(t)
		inst, rec, out := h.create(t, b, "", "echo hi > greeting; exit 3")
		<-inst.Done()
		rec.waitFor(t, "Failed", func(s []string) bool { return count(s, "Failed") == 1 })
		// A pod may wait (Pending: ContainerCreating) before it runs.
		if got := strings.Join(rec.list(), ","); strings.ReplaceAll(got, "Pending,", "") != "Created,Running,Failed" || strings.Contains(got, "Running,Pending") {
			t.Fatalf("states %s, want Created,Running,Failed (with Pending before Running, waiting to start)", got)
		}
		if code := strings.TrimSpace(read(t, inst, out, ".chaos/exit_code")); code != "3" {
			t.Fatalf("exit code %q, want 3", code)
		}
		if read(t, inst, out, "greeting") != "hi\n" {
			t.Fatal("output not collected")
		}
	})

	t.Run("many instances ending at once each end with their exit code", func(t *testing.T) {
		// Ends arrive close together and, on event-driven backends, out of
		// order across instances: none may be lost.
		b := h.New(t)
		const n = 12
		type one struct {
			inst backend.Instance
			rec  *recorder
			out  string
		}
		var all []one
		for i := 0; i < n; i++ {
			inst, rec, out := h.create(t, b, fmt.Sprintf("many-%d-%d", i, time.Now().UnixNano()%1e6), fmt.Sprintf("sleep 1; exit %d", i%3))
			all = append(all, one{inst, rec, out})
		}
		for i, o := range all {
			if !done(o.inst, 30*time.Second) {
				t.Fatalf("instance %d never ended; states %v", i, o.rec.list())
			}
			want := "Succeeded"
			if i%3 != 0 {
				want = "Failed"
			}
			if st, _ := o.rec.last(); st != want {
				t.Errorf("instance %d ended %s, want %s (states %v)", i, st, want, o.rec.list())
			}
			if code := strings.TrimSpace(read(t, o.inst, o.out, ".chaos/exit_code")); code != fmt.Sprint(i%3) {
				t.Errorf("instance %d: exit code %q, want %d", i, code, i%3)
			}
		}
	})

	t.Run("delete closes Done", func(t *testing.T) {
		b := h.New(t)
		inst, rec, _ := h.create(t, b, "", "sleep 60")
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		if err := inst.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if !done(inst, 3*time.Second) {
			t.Fatal("Done not closed within 3s of Delete")
		}
	})

	t.Run("an end event that never came is found by the watchdog", func(t *testing.T) {
		if h.LoseEnds == nil {
			t.Skip(h.NoLostEvents)
		}
		b := h.LoseEnds(t)
		inst, rec, out := h.create(t, b, "", "exit 4")
		if !done(inst, 20*time.Second) {
			t.Fatalf("an instance whose end event was lost never ended; states %v", rec.list())
		}
		if st, reason := rec.last(); st != "Failed" || reason != "ExitCode4" {
			t.Fatalf("ended %s (%s), want Failed (ExitCode4)", st, reason)
		}
		if code := strings.TrimSpace(read(t, inst, out, ".chaos/exit_code")); code != "4" {
			t.Fatalf("exit code %q, want 4", code)
		}
	})

	if h.NoPrimitives {
		t.Run("every primitive is unsupported", func(t *testing.T) {
			b := h.New(t)
			inst, _, _ := h.create(t, b, "", "sleep 5")
			for name, err := range map[string]error{
				"Kill": inst.Kill(ctx), "Down": inst.Down(ctx, backend.Down{}), "Up": inst.Up(ctx),
				"Freeze": inst.Freeze(ctx), "Thaw": inst.Thaw(ctx),
			} {
				if !errors.Is(err, backend.ErrUnsupported) {
					t.Errorf("%s: %v, want ErrUnsupported", name, err)
				}
			}
		})
		return
	}

	t.Run("kill ends it with no exit code", func(t *testing.T) {
		b := h.New(t)
		inst, rec, out := h.create(t, b, "", "sleep 60")
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		if err := fault.Apply(ctx, &env{t: t}, fault.Op{Fault: experiment.FaultKill}, inst); err != nil {
			t.Fatal(err)
		}
		if !done(inst, 20*time.Second) {
			t.Fatal("Done not closed after a kill")
		}
		if st, reason := rec.last(); st != "Failed" || reason != "Killed(SIGKILL)" {
			t.Fatalf("ended %s (%s), want Failed (Killed(SIGKILL))", st, reason)
		}
		if code := read(t, inst, out, ".chaos/exit_code"); code != "" {
			t.Fatalf("a killed instance recorded exit code %q", code)
		}
	})

	t.Run("restarts keep the output and start again", func(t *testing.T) {
		for _, op := range []fault.Op{
			{Fault: experiment.FaultRestartInPlace},
			{Fault: experiment.FaultRestart, Grace: 5 * time.Second},
			{Fault: experiment.FaultOutage, Duration: 300 * time.Millisecond},
		} {
			if !h.supports(op.Fault) {
				continue
			}
			b := h.New(t)
			inst, rec, out := h.create(t, b, "", `n=$(cat n 2>/dev/null || echo 0); echo $((n + 1)) > n; sleep 60`)
			rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
			waitFile(t, inst, out, "n")
			start := time.Now()
			e := &env{t: t}
			if err := fault.Apply(ctx, e, op, inst); err != nil {
				t.Fatal(err)
			}
			if op.Duration > 0 && time.Since(start) < op.Duration {
				t.Fatalf("%s with duration %s returned after %s", op.Fault, op.Duration, time.Since(start))
			}
			if e.back != 1 {
				t.Fatalf("%s: the fault said the instance was back %d times, want 1", op.Fault, e.back)
			}
			rec.waitFor(t, "Pending then Running again", func(s []string) bool { return count(started(s), "Pending") == 1 && count(s, "Running") == 2 })
			select {
			case <-inst.Done():
				t.Fatalf("%s closed Done", op.Fault)
			default:
			}
			deadline := time.Now().Add(patience)
			for strings.TrimSpace(read(t, inst, out, "n")) != "2" || lines(read(t, inst, out, ".chaos/attempts")) != 2 {
				if time.Now().After(deadline) {
					t.Fatalf("after %s: n=%q attempts=%q: the output dir must be kept and the script started again", op.Fault, read(t, inst, out, "n"), read(t, inst, out, ".chaos/attempts"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			inst.Kill(ctx)
		}
	})

	t.Run("a crash loop kills three times and leaves it running", func(t *testing.T) {
		if !h.supports(experiment.FaultCrashLoop) {
			t.Skipf("the backend has no crash loop on instances (Unsupported)")
		}
		b := h.New(t)
		inst, rec, out := h.create(t, b, "", `sleep 60`)
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		if err := fault.Apply(ctx, &env{t: t}, fault.Op{Fault: experiment.FaultCrashLoop}, inst); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "three downs and four runs", func(s []string) bool { return count(started(s), "Pending") == 3 && count(s, "Running") == 4 })
		if st, _ := rec.last(); st != "Running" {
			t.Fatalf("after a crash loop the instance is %s, want Running", st)
		}
		// A kill may land before a start has run the script at all; the
		// last start, left running, runs it.
		waitFile(t, inst, out, ".chaos/attempts")
		if n := lines(read(t, inst, out, ".chaos/attempts")); n < 1 || n > 4 {
			t.Fatalf("%d attempts, want 1 to 4", n)
		}
	})

	t.Run("kill while down ends it", func(t *testing.T) {
		if !h.supports(experiment.FaultRestartInPlace) {
			t.Skipf("the backend cannot take an instance down in place (Unsupported)")
		}
		b := h.New(t)
		inst, rec, _ := h.create(t, b, "", `sleep 60`)
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		if err := inst.Down(ctx, backend.Down{Reason: "Outage"}); err != nil {
			t.Fatal(err)
		}
		if err := inst.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if !done(inst, 10*time.Second) {
			t.Fatal("Done not closed by a kill while down")
		}
		if err := inst.Up(ctx); err == nil {
			t.Fatal("an ended instance came up again")
		}
	})

	t.Run("freeze stops progress and thaw resumes it", func(t *testing.T) {
		b := h.New(t)
		inst, rec, out := h.create(t, b, "", `while true; do echo . >> ticks; sleep 0.05; done`)
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		waitFile(t, inst, out, "ticks")
		if !h.supports(experiment.FaultFreeze) {
			if err := inst.Freeze(ctx); !errors.Is(err, backend.ErrUnsupported) {
				t.Fatalf("Freeze on a backend without freeze: %v, want ErrUnsupported", err)
			}
			return
		}
		checkFreeze(t, inst, func() int { return lines(read(t, inst, out, "ticks")) })
		inst.Kill(ctx)
	})

	if h.NewHandle == nil {
		return
	}
	t.Run("a handle goes down, comes back, freezes and thaws", func(t *testing.T) {
		hd, ticks := h.NewHandle(t)
		waitTicks(t, ticks, 1)
		e := &env{t: t}
		for _, op := range []fault.Op{
			{Fault: experiment.FaultRestartInPlace},
			{Fault: experiment.FaultRestart, Grace: 5 * time.Second},
			{Fault: experiment.FaultOutage, Duration: 300 * time.Millisecond},
		} {
			before := ticks()
			if err := fault.Apply(ctx, e, op, hd); err != nil {
				t.Fatalf("%s: %v", op.Fault, err)
			}
			waitTicks(t, ticks, before+2)
		}
		if e.back != 3 {
			t.Fatalf("back %d times, want 3", e.back)
		}
		// Down held (as an outage does) stops it for real, even where
		// something would bring it back by itself; Up brings it back.
		if err := hd.Down(ctx, backend.Down{Hold: true}); err != nil {
			t.Fatal(err)
		}
		n := ticks()
		time.Sleep(400 * time.Millisecond)
		if ticks() != n {
			t.Fatal("a handle went on ticking after Down")
		}
		if err := hd.Up(ctx); err != nil {
			t.Fatal(err)
		}
		if err := hd.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		waitTicks(t, ticks, n+2)
		if !h.supports(experiment.FaultFreeze) {
			if err := hd.Freeze(ctx); !errors.Is(err, backend.ErrUnsupported) {
				t.Fatalf("Freeze on a backend without freeze: %v, want ErrUnsupported", err)
			}
			return
		}
		checkFreeze(t, hd, ticks)
	})
}

// checkFreeze freezes h, proves it makes no progress, thaws it and proves
// it goes on.
func checkFreeze(t *testing.T, h backend.Handle, ticks func() int) {
	t.Helper()
	ctx := context.Background()
	if err := h.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	before := ticks()
	time.Sleep(500 * time.Millisecond)
	if after := ticks(); after != before {
		t.Fatalf("a frozen %s went on: %d ticks, then %d", h.Name(), before, after)
	}
	if err := h.Thaw(ctx); err != nil {
		t.Fatal(err)
	}
	waitTicks(t, ticks, before+1)
}

func waitTicks(t *testing.T, ticks func() int, n int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for ticks() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks, waited for %d", ticks(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitFile(t *testing.T, inst backend.Instance, out, rel string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for read(t, inst, out, rel) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", rel)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NewRun returns a backend.Run for tests of a backend: a fresh run
// directory, a process supervisor with the run's marker (in cgroup mode
// when this machine allows it, as in a run), this process's environment and
// adapter a. Harness errors fail the test.
func NewRun(t *testing.T, a *adapter.Adapter) *backend.Run {
	t.Helper()
	id := rundir.NewRunID(time.Now())
	dir, err := rundir.Create(t.TempDir(), "conformance", id)
	if err != nil {
		t.Fatal(err)
	}
	sup, err := proc.NewSupervisor("CHAOS_RUN_ID=" + id)
	if err != nil {
		t.Fatal(err)
	}
	// As a run does: every process in a cgroup of its own where cgroup v2
	// can be used (CHAOS_CGROUP=off forces process groups); the error only
	// says why not.
	_ = sup.EnableCgroups(id)
	t.Cleanup(func() { sup.Close() })
	env := append(os.Environ(), "CHAOS_RUN_ID="+id, "CHAOS_RUN_DIR="+dir.Root)
	if a == nil {
		a = &adapter.Adapter{ID: "conformance", Backend: "test"}
	}
	return &backend.Run{
		ID: id, Dir: dir, Start: time.Now(), Adapter: a, Experiment: &experiment.Experiment{ID: "conformance"},
		Env: env, HostEnv: os.Environ(), HookDir: dir.Root, HookTimeout: time.Minute,
		Sup: sup, Runner: shell.Runner{Sup: sup}, Redact: redact.New(nil),
		Record: func(string, ...rundir.Field) {},
		Errorf: func(format string, args ...any) { t.Errorf("harness error: "+format, args...) },
		Logf:   func(format string, args ...any) { t.Logf(format, args...) },
		Expand: func(s string) string { return os.Expand(s, func(k string) string { return envvar.Get(env, k) }) },
	}
}
