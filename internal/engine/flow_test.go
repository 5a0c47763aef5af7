package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// A running wait fails as soon as one instance has ended, whichever
// instance it looks at first; it does not wait for its timeout.
func TestWaitRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	cases := []struct {
		name, run   string
		gate        string
		verdict     string
		errContains string
	}{
		{"all running", `while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done`, "running", rundir.VerdictPass, ""},
		// w-0 ends at once; before the fix the wait went on to its timeout.
		{"one ended", `[ "$CHAOS_INSTANCE_INDEX" = 0 ] && exit 0; while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done`,
			"ended", rundir.VerdictError, "instance w-0 ended (Succeeded) before all of w were running"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _ := runOnce(t, fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: wait-running
workloads:
  - name: w
    instances: 2
    timeout: 1m
    run: '%s'
  # The gate ends once w-0 has, if it does, so the wait begins after.
  - name: gate
    timeout: 1m
    run: |
      w0="$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/../../../../w/instances/w-0/output/.chaos"
      while [ ! -e "$w0/exit_code" ] && [ ! -s "$w0/attempts" ]; do sleep 0.01; done
      [ "%s" = ended ] || exit 0
      while [ ! -e "$w0/exit_code" ]; do sleep 0.01; done
flow:
  parallel:
    - w
    - serial: [gate, {delay: 100ms}, {wait: {workload: w, condition: running, timeout: 5s}}, {stop: w}]
`, c.run, c.gate), nil)
			errs := strings.Join(out.Verdict.Errors, "; ")
			if out.Verdict.Verdict != c.verdict || !strings.Contains(errs, c.errContains) {
				t.Fatalf("verdict %s, errors %q; want %s with %q", out.Verdict.Verdict, errs, c.verdict, c.errContains)
			}
			if strings.Contains(errs, "timed out") {
				t.Fatalf("the wait timed out: %s", errs)
			}
		})
	}
}
