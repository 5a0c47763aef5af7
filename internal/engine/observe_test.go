package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

func TestStateTriggerFiresOperation(t *testing.T) {
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: trig
workloads:
  - {name: w, instances: 2, run: "sleep 1", checks: [{name: exited-ok, kind: exit-code}]}
operations:
  - name: kill-when-running
    uses: kill
    target: {workload: w}
    select: one
    trigger: {state: {workload: w, state: Running}, delay: 50ms, delay-max: 100ms}
flow: w
`, nil)
	if len(find(events, "trigger.fired")) != 1 || len(find(events, "operation.started")) != 1 {
		t.Fatalf("trigger fired %d times, operation started %d times", len(find(events, "trigger.fired")), len(find(events, "operation.started")))
	}
	if out.Verdict.Counts[rundir.ResultFail] != 1 {
		t.Fatalf("want exactly the killed instance to fail exited-ok: %+v", out.Verdict.Counts)
	}
}

func TestUnfiredTriggerIsRecordedMissed(t *testing.T) {
	_, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: missed
workloads:
  - {name: w, run: "true"}
operations:
  - {name: never, uses: kill, target: {workload: w}, trigger: {state: {workload: w, state: Pending}}}
flow: w
`, nil)
	if len(find(events, "trigger.missed")) != 1 {
		t.Fatal("no trigger.missed event")
	}
}

func TestStallCheckCatchesAFrozenInstance(t *testing.T) {
	const src = `apiVersion: chaos/v1alpha1
id: stall
workloads:
  - name: w
    instances: 2
    run: for i in $(seq 1 30); do echo $i >> journal; sleep 0.05; done
    checks:
      - {name: alive, kind: stall, file: journal, limit: 600ms}
operations:
  - {name: pause, uses: freeze, target: {workload: w}, select: {instances: [w-1]}, duration: 1200ms}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, {delay: 200ms}, pause]}]
`
	out, _ := runOnce(t, src, nil)
	results := map[string]rundir.CheckResult{}
	for _, c := range out.Verdict.Checks {
		results[c.ID] = c
	}
	if r := results["w-0/alive"]; r.Result != rundir.ResultOK {
		t.Errorf("w-0 was never frozen but its stall check is %s: %s", r.Result, r.Detail)
	}
	if r := results["w-1/alive"]; r.Result != rundir.ResultFail || !strings.Contains(r.Detail, "did not advance") {
		t.Errorf("w-1 was frozen 1.2s but its stall check is %s: %s", r.Result, r.Detail)
	}
}

func TestMetricCheckReadsRecordedScrapes(t *testing.T) {
	var ready atomic.Int32
	ready.Store(1)
	// A test server of our own that speaks OpenMetrics, with a histogram.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		fmt.Fprintf(w, "# TYPE db_ready gauge\ndb_ready{probe=\"readiness\"} %d\ndb_ready{probe=\"liveness\"} 1\n", ready.Load())
		fmt.Fprint(w, "# TYPE rpc_seconds histogram\nrpc_seconds_bucket{le=\"0.1\"} 3\nrpc_seconds_bucket{le=\"+Inf\"} 5\nrpc_seconds_sum 1.5\nrpc_seconds_count 5\n# EOF\n")
	}))
	defer srv.Close()
	adapterSrc := `apiVersion: chaos/v1alpha1
id: scraped
backend: process
metrics:
  - {name: gateway, url: "` + srv.URL + `/metrics", interval: 50ms}
`
	x := func(want string) string {
		return `apiVersion: chaos/v1alpha1
id: metric
metrics: [db_ready, never_exported]
workloads:
  - {name: w, run: "sleep 0.3"}
flow: w
checks:
  - {name: db-healthy, kind: metric, family: db_ready, labels: {probe: readiness}, op: "==", value: ` + want + `}
  - {name: always-live, kind: metric, family: db_ready, labels: {probe: /live.*/}, scrapes: all, op: ">=", value: 1}
  - {name: rpcs-counted, kind: metric, family: rpc_seconds, field: count, op: "==", value: 5}
`
	}
	out, _ := runWith(t, adapterSrc, x("1"))
	if out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("verdict %s: %+v", out.Verdict.Verdict, out.Verdict.Checks)
	}
	if len(out.Verdict.Warnings) != 1 || !strings.Contains(out.Verdict.Warnings[0], "never_exported") {
		t.Errorf("warnings %v, want one about never_exported", out.Verdict.Warnings)
	}
	ready.Store(0)
	out, _ = runWith(t, adapterSrc, x("1"))
	var detail string
	for _, c := range out.Verdict.Checks {
		if c.ID == "experiment/db-healthy" {
			detail = c.Detail
		}
	}
	if out.Verdict.Verdict != rundir.VerdictFail || !strings.Contains(detail, `{probe="readiness"} 0`) {
		t.Fatalf("verdict %s, detail %q: the failure must show the value it saw", out.Verdict.Verdict, detail)
	}
}

func TestSignalWaitActsWithinMilliseconds(t *testing.T) {
	out, events := runWith(t, `apiVersion: chaos/v1alpha1
id: sig
backend: process
watch:
  - {name: log, run: "sleep 0.3; echo sweep done; sleep 5"}
signals:
  sweep: {watch: log, pattern: "sweep done"}
`, `apiVersion: chaos/v1alpha1
id: sigwait
workloads:
  - {name: w, run: "sleep 1"}
operations:
  - {name: k, uses: kill, target: {workload: w}}
flow:
  parallel: [w, {serial: [{wait: {signal: sweep, delay: 100ms, timeout: 5s}}, k]}]
`)
	m, s := find(events, "signal.matched"), find(events, "operation.started")
	if len(m) != 1 || len(s) != 1 {
		t.Fatalf("matched %d, started %d (errors %v)", len(m), len(s), out.Verdict.Errors)
	}
	// The delay is 100 ms; the harness adds no sampling delay on top.
	if lag := s[0].T - m[0].T; lag < 0.099 || lag > 0.2 {
		t.Fatalf("operation started %.3fs after the signal, want 0.1s plus a few ms", lag)
	}
}

func TestCrashLoopOnInstances(t *testing.T) {
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: crashloop
workloads:
  - name: w
    run: sleep 2
    checks:
      - {name: exited-ok, kind: exit-code}
operations:
  - {name: loop, uses: crash-loop, target: {workload: w}}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, loop]}]
`, nil)
	kills := find(events, "crash-loop.kill")
	ids := map[string]bool{}
	for _, k := range kills {
		ids[k.String("id")] = true
	}
	// Three kills of three different processes; the fourth runs to its end.
	// (How many of them got as far as .chaos/attempts is a race by design:
	// the second kill lands as soon as the instance is back.)
	if len(kills) != 3 || len(ids) != 3 || out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("%d crash-loop kills of %d processes, verdict %s %+v", len(kills), len(ids), out.Verdict.Verdict, out.Verdict.Checks)
	}
	if n := len(find(events, "instance.state")); n < 8 {
		t.Fatalf("only %d state changes for three restarts", n)
	}
}

func TestCrashLoopOnATarget(t *testing.T) {
	out, events := runWith(t, `apiVersion: chaos/v1alpha1
id: looped
backend: process
targets:
  server:
    type: process
    lifecycle: run
    pid-file: $CHAOS_RUN_DIR/server.pid
    # Up at once, healthy only after 300 ms: the window the loop aims at.
    start: |
      setsid sh -c 'sleep 0.3; touch "$CHAOS_RUN_DIR/ready.$$"; exec sleep 600' </dev/null >/dev/null 2>&1 &
      echo $! > "$CHAOS_RUN_DIR/server.pid"
    health: test -e "$CHAOS_RUN_DIR/ready.$(cat "$CHAOS_RUN_DIR/server.pid")"
`, `apiVersion: chaos/v1alpha1
id: loop-target
workloads:
  - {name: w, run: "true"}
operations:
  - {name: loop, uses: crash-loop, target: server}
flow: {serial: [w, loop]}
`)
	kills := find(events, "crash-loop.kill")
	if len(kills) != 3 {
		t.Fatalf("%d crash-loop kills: %v (errors %v)", len(kills), kills, out.Verdict.Errors)
	}
	pids := map[string]bool{}
	for i, k := range kills {
		if want := []string{"first", "recovering", "ready"}[i]; k.String("phase") != want {
			t.Errorf("kill %d phase %s, want %s", i, k.String("phase"), want)
		}
		pids[k.String("id")] = true
	}
	if len(pids) != 3 {
		t.Errorf("the loop killed %d distinct processes, want 3", len(pids))
	}
	if len(find(events, "target.restarted")) != 1 || out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("verdict %s, errors %v", out.Verdict.Verdict, out.Verdict.Errors)
	}
}
