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
	// The repeat starts only once the freeze is in effect (a freeze
	// without a duration returns once the kernel says the instance is
	// frozen, and holds to the end of the flow): begun beside the wait, it
	// filled the timeline before a loaded machine had started w, and there
	// was no freeze to revert.
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: chatty
workloads:
  - {name: w, run: "sleep 60"}
operations:
  - {name: pause, uses: freeze, target: {workload: w}}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - pause
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
	if n := len(find(events, "operation.finished")); n != 1 {
		t.Fatalf("the freeze finished %d times, want once: it was not in effect when the flow was stopped", n)
	}
	if rev := find(events, "operation.reverted"); len(rev) != 1 || rev[0].String("when") != "flow end" {
		t.Errorf("the freeze was not reverted once at the end of the flow: %v", rev)
	}
	if len(find(events, "repeat.round")) == 0 {
		t.Error("no repeat round: something else filled the timeline")
	}
	if len(events) > 400 {
		t.Errorf("%d events, more than the hard limit", len(events))
	}
	if len(find(events, "run.finished")) != 1 {
		t.Error("no run.finished: cleanup and checks had no room")
	}
}
