package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// A generate aimed at a signal: each step waits for the signal's next
// line, then its gap (here a fixed 150 ms), then applies its operation. The
// workload prints the line every 400 ms, so each step's schedule.step
// comes 150 ms (and well under 400 ms) after a signal.matched of its own;
// a signal that never comes ends the flow at the timeout (ERROR).
func TestGenerateAfterSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tc := range []struct{ name, pattern, verdict, err string }{
		{"the line comes", "server up", rundir.VerdictPass, ""},
		{"the line never comes", "server down", rundir.VerdictError, "wait for signal up timed out after 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adapterSrc := strings.Replace(markAdapter, "pattern: 'server up'", "pattern: '"+tc.pattern+"'", 1)
			out, events := runWith(t, adapterSrc, `apiVersion: chaos/v1alpha1
id: aimed
workloads:
  - name: w
    timeout: 20s
    run: |
      while [ ! -e "$CHAOS_STOP_FILE" ]; do echo "server up" >> "$CHAOS_RUN_DIR/marks.log"; sleep 0.4; done
operations:
  - {name: nudge, uses: freeze, target: {workload: w}, duration: 10ms}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - generate: {times: 2, after: {signal: up, timeout: 1s}, gap: 150ms, operations: [nudge]}
        - {stop: w}
`)
			errs := strings.Join(out.Verdict.Errors, "; ")
			if out.Verdict.Verdict != tc.verdict || !strings.Contains(errs, tc.err) {
				t.Fatalf("verdict %s, errors %q; want %s with %q", out.Verdict.Verdict, errs, tc.verdict, tc.err)
			}
			if tc.verdict != rundir.VerdictPass {
				if n := len(find(events, "schedule.step")); n != 0 {
					t.Errorf("%d steps applied without their line", n)
				}
				return
			}
			// Each step: its line, then 150 ms, then the step.
			var last float64 = -1
			steps := 0
			for _, e := range events {
				switch e.Name {
				case "signal.matched":
					if d := rundir.ValueString(e.Get("delay")); d != "150ms" {
						t.Errorf("signal.matched with delay %s, want 150ms", d)
					}
					last = e.T
				case "schedule.step":
					steps++
					if last < 0 {
						t.Fatalf("step %d came before any line", steps)
					}
					if gap := e.T - last; gap < 0.14 || gap > 0.39 {
						t.Errorf("step %d came %.3fs after its line, want 150ms (and before the next line)", steps, gap)
					}
					last = -1
				}
			}
			if steps != 2 {
				t.Errorf("%d steps, want 2", steps)
			}
			m := find(events, "schedule.drawn")
			if len(m) != 1 || !strings.Contains(fmt.Sprint(m[0].Fields), "nudge") {
				t.Errorf("schedule.drawn %v", m)
			}
		})
	}
}
