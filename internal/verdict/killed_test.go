package verdict_test

import (
	"testing"

	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// An instance that recorded no exit code says how the timeline saw it end:
// killed by which operation, when; stopped when the flow ended.
func TestEvaluateNoExitCodeSaysHow(t *testing.T) {
	build := func(r *vt.Run) {
		r.Event("operation.started", "operation", "gateway-down", "uses", "kill", "run", 1, "target", map[string]string{"workload": "counter"}, "scope", "instances", "instances", []string{"counter-0"})
		r.Event("instance.state", "workload", "counter", "instance", "counter-0", "state", "Failed", "reason", "Killed(SIGKILL)")
		r.Event("operation.finished", "operation", "gateway-down", "uses", "kill", "run", 1)
		r.Event("instance.stopping", "workload", "counter", "instance", "counter-1", "reason", "flow ended")
		r.Event("instance.state", "workload", "counter", "instance", "counter-1", "state", "Failed", "reason", "Killed(SIGTERM)")
		for _, in := range []string{"counter-0", "counter-1"} {
			r.Event("instance.collected", "workload", "counter", "instance", in, "exit_code", nil)
			r.Output("counter", in, "out", "x\n")
		}
	}
	v := runCase(t, evalCase{build: build, top: "operations:\n  - {name: gateway-down, uses: cut}\n"})
	want := map[string]string{
		"counter-0/exited-ok": "no exit code recorded: killed (SIGKILL) by operation gateway-down at 5.000s",
		"counter-1/exited-ok": "no exit code recorded: killed (SIGTERM) when the flow ended, at 7.500s",
	}
	for _, r := range v.Checks {
		if w, ok := want[r.ID]; ok && r.Detail != w {
			t.Errorf("%s: detail %q, want %q", r.ID, r.Detail, w)
		}
	}
}
