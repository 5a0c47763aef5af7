package verdict_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const stallExperiment = `apiVersion: chaos/v1alpha1
id: stall-test
version: 1
workloads:
  - name: client
    run: echo hi
    checks:
      - name: live
        kind: stall
        file: log
        limit: 10s
OPTIONS
operations:
  - name: server-outage
    uses: outage
    target: server
    duration: 38s
  - name: server-crash-loop
    uses: crash-loop
    target: server
flow:
  parallel:
    - client
    - serial: [server-outage, server-crash-loop]
`

const stallAdapter = `apiVersion: chaos/v1alpha1
id: stall-local
backend: process
targets:
  server:
    type: process
    pid-file: $CHAOS_RUN_DIR/server.pid
    start: ./server & echo $! > "$CHAOS_RUN_DIR/server.pid"
    health: true
    lifecycle: run
`

// stallRun writes the timeline of a client whose log grows every second
// while its server is ready, through an outage of the server (t=20 to 58)
// and a crash loop (t=80 to 90). The client needs a few seconds after each
// recovery before it writes again. stalled, when set, is an extra stretch
// with no progress while nothing was wrong.
func stallRun(t *testing.T, options string, stalled [2]float64) *rundir.Verdict {
	t.Helper()
	r := vt.New(t, "stall-test", strings.Replace(stallExperiment, "OPTIONS\n", options, 1), stallAdapter)
	ev := func(at float64, name string, fields string) {
		ts := vt.Start.Add(time.Duration(at * float64(time.Second))).Format("2006-01-02T15:04:05.000000Z")
		if fields != "" {
			fields = ", " + fields
		}
		r.Raw(fmt.Sprintf(`{"t": %.3f, "ts": %q, "event": %q%s}`, at, ts, name, fields))
	}
	ev(0, "run.started", `"experiment": "stall-test", "version": 1, "seed": 0, "adapter": "stall-local", "run_id": "`+vt.RunID+`"`)
	ev(0.5, "target.started", `"target": "server", "pid": 100`)
	ev(1, "instance.created", `"workload": "client", "instance": "client-0", "system_id": "200"`)
	ev(2, "instance.state", `"workload": "client", "instance": "client-0", "state": "Running", "reason": ""`)
	ev(20, "operation.started", `"operation": "server-outage", "uses": "outage", "run": 1, "target": {"name": "server"}, "scope": "target", "instances": ["server"], "ids": ["100"], "duration": "38s"`)
	ev(58, "target.restarted", `"target": "server", "operation": "server-outage", "pid": 101`)
	ev(58.1, "operation.reverted", `"operation": "server-outage", "uses": "outage", "run": 1`)
	ev(80, "operation.started", `"operation": "server-crash-loop", "uses": "crash-loop", "run": 1, "target": "server", "scope": "target", "instances": ["server"], "ids": ["101"]`)
	ev(80, "crash-loop.kill", `"operation": "server-crash-loop", "target": "server", "phase": "first", "id": "101"`)
	ev(82, "crash-loop.kill", `"operation": "server-crash-loop", "target": "server", "phase": "recovering", "id": "102"`)
	ev(86, "crash-loop.kill", `"operation": "server-crash-loop", "target": "server", "phase": "ready", "id": "103"`)
	ev(90, "target.restarted", `"target": "server", "operation": "server-crash-loop", "pid": 104`)
	ev(90.1, "operation.finished", `"operation": "server-crash-loop", "uses": "crash-loop", "run": 1`)
	ev(130, "instance.state", `"workload": "client", "instance": "client-0", "state": "Succeeded", "reason": ""`)
	ev(130.5, "instance.collected", `"workload": "client", "instance": "client-0", "exit_code": 0`)
	ev(131, "run.finished", `"verdict": "?"`)
	r.Write()

	// The client writes while the server is ready, starting a few seconds
	// after each recovery.
	var b strings.Builder
	size := 0
	writes := func(t float64) bool {
		switch {
		case t > 20 && t < 62, t > 80 && t < 93:
			return false
		case t > stalled[0] && t < stalled[1]:
			return false
		}
		return true
	}
	for at := 2.0; at <= 130; at++ {
		if writes(at) {
			size += 10
		}
		fmt.Fprintf(&b, `{"t": %.1f, "file": "log", "size": %d}`+"\n", at, size)
	}
	r.File("workloads/client/instances/client-0/"+verdict.ProgressFile, b.String())
	r.Output("client", "client-0", ".chaos/exit_code", "0\n")

	x, a := load(t, r.Dir)
	v, err := verdict.Evaluate(context.Background(), r.Dir, x, a, verdict.Options{Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStallOutsideFaults(t *testing.T) {
	none := [2]float64{}
	realStall := [2]float64{100, 116} // 16s of nothing, server ready, no fault
	cases := []struct {
		name    string
		options string
		stalled [2]float64
		result  string
		detail  string
	}{
		{
			name:   "outage counted without options",
			result: "fail", stalled: none,
			detail: "file log did not advance for 42.0s (t=20.0s to 62.0s) while client-0 was Running; the limit is 10s",
		},
		{
			name:    "after-ready starts the clock at each recovery",
			options: "        after-ready: server\n",
			result:  "ok", stalled: none,
		},
		{
			name:    "except-during stops the clock in the fault windows",
			options: "        except-during: [server-outage, server-crash-loop]\n",
			result:  "ok", stalled: none,
		},
		{
			name:    "except-during one of two faults still counts the other",
			options: "        except-during: [server-outage]\n",
			result:  "fail", stalled: none,
			detail: "file log did not advance for 13.0s (t=80.0s to 93.0s) while client-0 was Running; the limit is 10s",
		},
		{
			name:    "after-ready still fails a real stall",
			options: "        after-ready: server\n",
			result:  "fail", stalled: realStall,
			detail: "file log did not advance for 16.0s (t=100.0s to 116.0s) while client-0 was Running and server was ready; the limit is 10s",
		},
		{
			name:    "except-during still fails a real stall",
			options: "        except-during: [server-outage, server-crash-loop]\n",
			result:  "fail", stalled: realStall,
			detail: "file log did not advance for 16.0s (t=100.0s to 116.0s) while client-0 was Running; the limit is 10s",
		},
		{
			name:    "both still fail a real stall",
			options: "        after-ready: server\n        except-during: [server-outage, server-crash-loop]\n",
			result:  "fail", stalled: realStall,
			detail: "did not advance for 16.0s (t=100.0s to 116.0s)",
		},
		{
			// The clock stops in the window and goes on after it: a client
			// stuck before the outage and still stuck after it is a stall.
			name:    "except-during adds the time on both sides of a window",
			options: "        except-during: [server-outage]\n",
			result:  "fail", stalled: [2]float64{10, 21},
			detail: "file log did not advance for 13.9s (t=10.0s to 62.0s) while client-0 was Running, not counting 38.1s in windows of server-outage",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := stallRun(t, c.options, c.stalled)
			var got *rundir.CheckResult
			for i := range v.Checks {
				if v.Checks[i].ID == "client-0/live" {
					got = &v.Checks[i]
				}
			}
			if got == nil {
				t.Fatalf("no result for client-0/live:\n%s", describe(v))
			}
			if got.Result != c.result {
				t.Fatalf("result %s, want %s; detail: %s", got.Result, c.result, got.Detail)
			}
			if !strings.Contains(got.Detail, c.detail) {
				t.Errorf("detail %q\nwant it to contain %q", got.Detail, c.detail)
			}
		})
	}
}

const stallSelfExperiment = `apiVersion: chaos/v1alpha1
id: stall-self
version: 1
workloads:
  - name: client
    ready: {pattern: 'client ready'}
    run: echo hi
    checks:
      - name: live
        kind: stall
        file: log
        limit: 10s
OPTIONS
operations:
  - name: client-restart
    uses: restart-in-place
    target: {workload: client}
flow:
  parallel: [client, client-restart]
`

// TestStallAfterTheInstanceIsReady: after-ready: instance starts the
// clock at each instance.ready of the instance itself: a client that takes
// 15 s to set up, and again after a restart in place, does not stall; a
// stall once it said it was ready still fails.
func TestStallAfterTheInstanceIsReady(t *testing.T) {
	run := func(t *testing.T, options string, stalled [2]float64) rundir.CheckResult {
		r := vt.New(t, "stall-self", strings.Replace(stallSelfExperiment, "OPTIONS\n", options, 1), "")
		ev := func(at float64, name string, fields string) {
			ts := vt.Start.Add(time.Duration(at * float64(time.Second))).Format("2006-01-02T15:04:05.000000Z")
			r.Raw(fmt.Sprintf(`{"t": %.3f, "ts": %q, "event": %q, %s}`, at, ts, name, fields))
		}
		ev(0, "run.started", `"experiment": "stall-self", "version": 1, "seed": 0, "adapter": "", "run_id": "`+vt.RunID+`"`)
		ev(1, "instance.created", `"workload": "client", "instance": "client-0", "system_id": "200"`)
		ev(2, "instance.state", `"workload": "client", "instance": "client-0", "state": "Running", "reason": ""`)
		ev(17, "instance.ready", `"workload": "client", "instance": "client-0", "on": "logs/client.log:3"`)
		ev(40, "operation.started", `"operation": "client-restart", "uses": "restart-in-place", "run": 1, "target": "{workload: client}", "scope": "instances", "instances": ["client-0"], "ids": ["200"]`)
		ev(41, "operation.finished", `"operation": "client-restart", "uses": "restart-in-place", "run": 1`)
		ev(55, "instance.ready", `"workload": "client", "instance": "client-0", "on": "logs/client.log:9"`)
		ev(100, "instance.state", `"workload": "client", "instance": "client-0", "state": "Succeeded", "reason": ""`)
		ev(101, "run.finished", `"verdict": "?"`)
		r.Write()
		var b strings.Builder
		size := 0
		for at := 2.0; at <= 100; at++ {
			setup := at < 18 || (at > 40 && at < 57)
			if !setup && !(at > stalled[0] && at < stalled[1]) {
				size += 10
			}
			fmt.Fprintf(&b, `{"t": %.1f, "file": "log", "size": %d}`+"\n", at, size)
		}
		r.File("workloads/client/instances/client-0/"+verdict.ProgressFile, b.String())
		x, ps := experiment.Load(r.Dir.ExperimentFile())
		if err := ps.Err(); err != nil {
			t.Fatal(err)
		}
		v, err := verdict.Evaluate(context.Background(), r.Dir, x, nil, verdict.Options{Env: os.Environ()})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Checks {
			if c.ID == "client-0/live" {
				return c
			}
		}
		t.Fatalf("no result for client-0/live:\n%s", describe(v))
		return rundir.CheckResult{}
	}
	for _, c := range []struct {
		name, options string
		stalled       [2]float64
		result        string
		detail        string
	}{
		{"set-up time counted without it", "", [2]float64{}, "fail", "did not advance for 17.0s (t=40.0s to 57.0s) while client-0 was Running;"},
		{"after-ready: instance", "        after-ready: instance\n", [2]float64{}, "ok", ""},
		{"a stall once ready still fails", "        after-ready: instance\n", [2]float64{70, 85}, "fail", "did not advance for 15.0s (t=70.0s to 85.0s) while client-0 was Running and ready;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := run(t, c.options, c.stalled)
			if got.Result != c.result || !strings.Contains(got.Detail, c.detail) {
				t.Errorf("result %s detail %q; want %s with %q", got.Result, got.Detail, c.result, c.detail)
			}
		})
	}
}
