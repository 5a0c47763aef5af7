package docker

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// The test binary is the stress helper too, as the chaos binary is.
func init() {
	if len(os.Args) > 1 && os.Args[1] == fault.StressCommand {
		os.Exit(fault.StressMain(os.Args[2:]))
	}
}

type resEnv struct {
	mu      sync.Mutex
	events  map[string]map[string]any
	reverts []func(context.Context) error
}

func (e *resEnv) Record(name string, fields ...rundir.Field) {
	m := map[string]any{}
	for _, f := range fields {
		m[f.Key] = f.Value
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.events == nil {
		e.events = map[string]map[string]any{}
	}
	if _, ok := e.events[name]; !ok {
		e.events[name] = m
	}
}
func (e *resEnv) Back(backend.Handle) {}
func (e *resEnv) Revert(undo func(context.Context) error) func(context.Context) error {
	var once sync.Once
	var err error
	run := func(ctx context.Context) error { once.Do(func() { err = undo(ctx) }); return err }
	e.reverts = append(e.reverts, run)
	return run
}

func (e *resEnv) revert(t *testing.T) {
	for _, r := range e.reverts {
		if err := r(context.Background()); err != nil {
			t.Errorf("revert: %v", err)
		}
	}
}

func applyRes(t *testing.T, h backend.Handle, uses string, r *experiment.Resource) *resEnv {
	t.Helper()
	env := &resEnv{}
	j := fault.NewResourceJournal(randomID("res"), t.TempDir(), t.TempDir())
	if err := fault.Apply(context.Background(), env, fault.Op{Operation: "op", Fault: uses, Run: 1, Resource: r, Journal: j}, h); err != nil {
		t.Fatalf("applying %s: %v", uses, err)
	}
	t.Cleanup(func() { env.revert(t) })
	return env
}

// groupShare measures how much of a CPU a container's own group uses.
func groupShare(t *testing.T, p cgroup.Place, d time.Duration) float64 {
	t.Helper()
	a, err := cgroup.ReadUsage(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	b, _ := cgroup.ReadUsage(p)
	return float64(b.CPUNanos-a.CPUNanos) / 1e9 / d.Seconds()
}

// A CPU limit of 20% on a container's busy loop: its own group's cpuacct
// says 0.17-0.23 of a CPU while held (the upper bound always; the lower
// one when the machine leaves it a CPU), and the old quota is back after.
func TestCPULimitOnAContainer(t *testing.T) {
	h := newHarness(t, nil)
	in := h.create("busy-0", "while :; do :; done")
	in.st.waitFor(t, "Running")
	res, err := in.Instance.(backend.Resourced).Resources(ctx(t), backend.ResourceNeed{})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := res.Place.Dir(cgroup.CPU)
	env := applyRes(t, in.Instance, experiment.FaultCPULimit, &experiment.Resource{CPU: "20%"})
	time.Sleep(300 * time.Millisecond)
	held := groupShare(t, res.Place, 3*time.Second)
	t.Logf("a container's busy loop under a 20%% limit: %.3f of a CPU (%s)", held, dir)
	if held > 0.23 {
		t.Errorf("held at %.3f of a CPU, want at most 0.23", held)
	}
	if q := backendtest.CPUQuotas(t, res.Place); len(q) == 0 {
		t.Errorf("while the limit holds no cpu group of the container has a quota")
	}
	env.revert(t)
	if q := backendtest.CPUQuotas(t, res.Place); len(q) > 0 {
		t.Errorf("after the revert the container's cpu groups still have quotas: %v", q)
	}
	after := groupShare(t, res.Place, 2*time.Second)
	t.Logf("after the revert: %.3f of a CPU", after)
}

// CPU stress on an idle container: the helper (a process of this
// machine) is in the container's own groups and its cpuacct shows the
// work; it is gone after the revert.
func TestCPUStressInAContainer(t *testing.T) {
	h := newHarness(t, nil)
	in := h.create("idle-0", "sleep 60")
	in.st.waitFor(t, "Running")
	res, err := in.Instance.(backend.Resourced).Resources(ctx(t), backend.ResourceNeed{})
	if err != nil {
		t.Fatal(err)
	}
	env := applyRes(t, in.Instance, experiment.FaultCPUStress, &experiment.Resource{Cores: 0.5})
	helper := env.events["resource.applied"]["helper_pid"].(int)
	hc, _ := cgroup.ProcCgroups(helper)
	cc, _ := cgroup.ProcCgroups(res.Pid)
	if hc["cpu"] != cc["cpu"] || hc["memory"] != cc["memory"] {
		t.Errorf("the helper is in %v, the container in %v", hc, cc)
	}
	used := groupShare(t, res.Place, 2*time.Second)
	t.Logf("an idle container under cpu-stress 0.5: %.3f of a CPU", used)
	if used < 0.05 {
		t.Errorf("the container's group used %.3f of a CPU under stress", used)
	}
	env.revert(t)
	if _, err := os.Stat("/proc/" + itoa(helper)); err == nil {
		t.Errorf("the helper %d is still there after the revert", helper)
	}
}

// A hard memory limit on a container that allocates past it: the engine
// says OOMKilled, and the fault recorded the kill.
func TestMemoryLimitOnAContainer(t *testing.T) {
	h := newHarness(t, nil)
	// It allocates again and again, so the limit meets an allocation
	// however late it lands on a loaded machine.
	in := h.create("hog-0", "sleep 2; while :; do head -c 268435456 /dev/zero | tail > /dev/null; sleep 0.2; done")
	in.st.waitFor(t, "Running")
	env := applyRes(t, in.Instance, experiment.FaultMemoryLimit, &experiment.Resource{Memory: "32MiB"})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		env.mu.Lock()
		_, ok := env.events["resource.oom-kill"]
		env.mu.Unlock()
		if ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	env.mu.Lock()
	ev := env.events["resource.oom-kill"]
	env.mu.Unlock()
	if ev == nil {
		t.Fatalf("no OOM kill recorded; states %v", in.st.list())
	}
	t.Logf("resource.oom-kill %v", ev)
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
