package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// A flow that writes more events than a run may (a long repeat) is
// stopped with a harness error that says so: ERROR, every fault reverted,
// and a timeline its readers take.
func TestTimelineLimitStopsTheFlow(t *testing.T) {
	old := timelineLimits
	timelineLimits = rundir.RecorderLimits{FlowEvents: 80, FlowBytes: 1 << 30, MaxEvents: 400, MaxBytes: 1 << 30, MaxLine: 1 << 20}
	t.Cleanup(func() { timelineLimits = old })
	start := time.Now()
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: chatty
workloads:
  - {name: w, run: "sleep 60"}
operations:
  - {name: pause, uses: freeze, target: {workload: w}, duration: 5m}
flow:
  parallel:
    - w
    - serial: [{wait: {workload: w, condition: running}}, pause]
    - repeat: {times: 100000, serial: [{delay: 1ms}]}
`, nil)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the run took %s: the flow was not stopped", took)
	}
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Fatalf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
	if msg := strings.Join(out.Verdict.Errors, "\n"); !strings.Contains(msg, "the most a run's flow may write") {
		t.Errorf("errors do not say the timeline was full: %s", msg)
	}
	if len(find(events, "operation.reverted")) != 1 {
		t.Error("the freeze was not reverted")
	}
	if len(events) > 400 {
		t.Errorf("%d events, more than the hard limit", len(events))
	}
	if len(find(events, "run.finished")) != 1 {
		t.Error("no run.finished: cleanup and checks had no room")
	}
}
