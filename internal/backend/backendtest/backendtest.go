// Package backendtest is the conformance suite every backend runs: the
// engine composes the built-in faults from the Instance primitives, so each
// backend must give them the same meaning, proven by their effects on the
// instance's output and states.
package backendtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
)

// Harness makes a fresh backend for one test and says what it supports.
type Harness struct {
	New func(t *testing.T) backend.Backend
	// Image is the image instances run from, for backends that need one.
	Image string
	// Env is added to every instance's environment.
	Env []string
}

// recorder keeps an instance's states and wakes waiters on each change.
type recorder struct {
	mu      sync.Mutex
	states  []string
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) on(s backend.State, reason string) {
	r.mu.Lock()
	r.states = append(r.states, string(s))
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.states...)
}

// waitFor waits until the states recorded satisfy ok.
func (r *recorder) waitFor(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
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
func (h Harness) create(t *testing.T, b backend.Backend, script string) (backend.Instance, *recorder, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "output")
	wrapper, run := filepath.Join(dir, "wrapper.sh"), filepath.Join(dir, "run.sh")
	os.WriteFile(wrapper, []byte(backend.WrapperScript), 0o755)
	os.WriteFile(run, []byte(script), 0o755)
	rec := newRecorder()
	env := append(append(os.Environ(), h.Env...), "CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR="+out, "CHAOS_RUN_SCRIPT="+run)
	name := "w-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
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

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("a short instance shows every state and its exit code", func(t *testing.T) {
		b := h.New(t)
		inst, rec, out := h.create(t, b, "echo hi > greeting; exit 3")
		<-inst.Done()
		rec.waitFor(t, "Failed", func(s []string) bool { return count(s, "Failed") == 1 })
		if got := strings.Join(rec.list(), ","); got != "Created,Running,Failed" {
			t.Fatalf("states %s, want Created,Running,Failed", got)
		}
		if code := strings.TrimSpace(read(t, inst, out, ".chaos/exit_code")); code != "3" {
			t.Fatalf("exit code %q, want 3", code)
		}
		if read(t, inst, out, "greeting") != "hi\n" {
			t.Fatal("output not collected")
		}
	})

	t.Run("kill ends it with no exit code", func(t *testing.T) {
		b := h.New(t)
		inst, rec, out := h.create(t, b, "sleep 60")
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		if err := inst.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-inst.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("Done not closed after Kill")
		}
		rec.waitFor(t, "Failed", func(s []string) bool { return count(s, "Failed") == 1 })
		if code := read(t, inst, out, ".chaos/exit_code"); code != "" {
			t.Fatalf("a killed instance recorded exit code %q", code)
		}
	})

	t.Run("restart in place keeps the output and starts again", func(t *testing.T) {
		for _, r := range []backend.Restart{{}, {Graceful: true, Grace: 5 * time.Second}, {Hold: 300 * time.Millisecond}} {
			b := h.New(t)
			inst, rec, out := h.create(t, b, `n=$(cat n 2>/dev/null || echo 0); echo $((n + 1)) > n; sleep 60`)
			rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
			waitFile(t, inst, out, "n")
			start := time.Now()
			if err := inst.Restart(ctx, r); err != nil {
				t.Fatal(err)
			}
			if r.Hold > 0 && time.Since(start) < r.Hold {
				t.Fatalf("restart with hold %s returned after %s", r.Hold, time.Since(start))
			}
			rec.waitFor(t, "Pending then Running again", func(s []string) bool { return count(s, "Pending") == 1 && count(s, "Running") == 2 })
			select {
			case <-inst.Done():
				t.Fatal("Done closed by a restart")
			default:
			}
			deadline := time.Now().Add(10 * time.Second)
			for strings.TrimSpace(read(t, inst, out, "n")) != "2" || lines(read(t, inst, out, ".chaos/attempts")) != 2 {
				if time.Now().After(deadline) {
					t.Fatalf("after %+v: n=%q attempts=%q: the output dir must be kept and the script started again", r, read(t, inst, out, "n"), read(t, inst, out, ".chaos/attempts"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			inst.Kill(ctx)
		}
	})

	t.Run("freeze stops progress and thaw resumes it", func(t *testing.T) {
		b := h.New(t)
		inst, rec, out := h.create(t, b, `while true; do echo . >> ticks; sleep 0.05; done`)
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		waitFile(t, inst, out, "ticks")
		if err := inst.Freeze(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		before := lines(read(t, inst, out, "ticks"))
		time.Sleep(500 * time.Millisecond)
		if after := lines(read(t, inst, out, "ticks")); after != before {
			t.Fatalf("a frozen instance went on: %d ticks, then %d", before, after)
		}
		if err := inst.Thaw(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for lines(read(t, inst, out, "ticks")) <= before {
			if time.Now().After(deadline) {
				t.Fatal("a thawed instance did not go on")
			}
			time.Sleep(50 * time.Millisecond)
		}
		inst.Kill(ctx)
	})

	t.Run("delete ends a running instance", func(t *testing.T) {
		b := h.New(t)
		inst, rec, _ := h.create(t, b, "sleep 60")
		rec.waitFor(t, "Running", func(s []string) bool { return count(s, "Running") == 1 })
		if err := inst.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-inst.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("Done not closed after Delete")
		}
	})
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
