package verdict_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// experimentTmpl is the experiment every table case starts from; WCHECKS is
// replaced by extra workload checks (indented 6) and TOP by extra top-level
// keys.
const experimentTmpl = `apiVersion: chaos/v1alpha1
id: counter-test
version: 1
env:
  GREETING: hello
workloads:
  - name: counter
    instances: 2
    env:
      WORD: world
    run: echo hi
    checks:
      - name: exited-ok
        kind: exit-code
        equals: 0
      - name: wrote-out
        kind: shell
        run: |
          test -f "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/out" || { echo "no file out"; exit 1; }
WCHECKS
flow: counter
TOP
`

const adapterYAML = `apiVersion: chaos/v1alpha1
id: test-local
backend: process
env:
  ADAPTER_VAR: a
checks:
  - name: nothing-leaked
    run: |
      if [ -s "$CHAOS_RUN_DIR/system/leaked.txt" ]; then cat "$CHAOS_RUN_DIR/system/leaked.txt"; exit 1; fi
  - name: env-seen
    run: |
      [ "$ADAPTER_VAR" = a ] && [ "$GREETING" = hello ] && [ "$PWD" = "$CHAOS_RUN_DIR" ] || { echo "ADAPTER_VAR=$ADAPTER_VAR GREETING=$GREETING PWD=$PWD"; exit 1; }
`

func experimentYAML(wchecks, top string) string {
	s := strings.Replace(experimentTmpl, "WCHECKS\n", wchecks, 1)
	return strings.Replace(s, "TOP\n", top, 1)
}

// load parses the experiment and adapter of a built run, failing on any
// problem so fixtures stay valid manifests.
func load(t *testing.T, d *rundir.Dir) (*experiment.Experiment, *adapter.Adapter) {
	t.Helper()
	x, ps := experiment.Load(d.ExperimentFile())
	if err := ps.Err(); err != nil {
		t.Fatalf("fixture experiment is invalid: %v", err)
	}
	a, aps := adapter.Load(d.AdapterFile())
	if err := aps.Err(); err != nil {
		t.Fatalf("fixture adapter is invalid: %v", err)
	}
	return x, a
}

// okInstance records an instance that exited 0 and wrote its file.
func okInstance(r *vt.Run, inst string) {
	r.Instance("counter", inst, vt.Code(0)).Output("counter", inst, "out", "x\n")
}

func bothOK(r *vt.Run) {
	okInstance(r, "counter-0")
	okInstance(r, "counter-1")
}

type evalCase struct {
	name    string
	wchecks string // extra workload checks
	top     string // extra top-level YAML
	// build records what happened after run.started and a passing
	// preflight; nil means both instances exited 0 and wrote out.
	build func(r *vt.Run)
	// noFinish leaves run.finished out.
	noFinish bool
	by       string

	verdict string
	exit    int
	results map[string]string // check id -> result
	details map[string]string // check id -> text its detail contains
	ids     []string          // when set, the exact check ids in order
	errors  []string          // texts some error contains
	flaky   []rundir.FlakyHit
	aborted bool
	na      []string
}

func runCase(t *testing.T, c evalCase) *rundir.Verdict {
	t.Helper()
	r := vt.New(t, "counter-test", experimentYAML(c.wchecks, c.top), adapterYAML)
	r.Started("counter-test", "test-local")
	r.Preflight("shell-runs", true, "")
	if c.build != nil {
		c.build(r)
	} else {
		bothOK(r)
	}
	if !c.noFinish {
		r.Finished("?")
	}
	d := r.Write()
	x, a := load(t, d)
	by := c.by
	if by == "" {
		by = verdict.ByEvaluate
	}
	v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{By: by, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func describe(v *rundir.Verdict) string {
	var b strings.Builder
	verdict.Print(&b, v)
	return b.String()
}

func TestEvaluateVerdicts(t *testing.T) {
	cases := []evalCase{
		{
			name:    "pass",
			verdict: rundir.VerdictPass, exit: 0,
			ids: []string{"preflight/shell-runs", "counter-0/exited-ok", "counter-0/wrote-out", "counter-1/exited-ok", "counter-1/wrote-out", "adapter/nothing-leaked", "adapter/env-seen"},
			results: map[string]string{
				"preflight/shell-runs": "ok", "counter-0/exited-ok": "ok", "counter-1/wrote-out": "ok",
				"adapter/nothing-leaked": "ok", "adapter/env-seen": "ok",
			},
		},
		{
			name: "fail: exit code wrong, uncovered",
			build: func(r *vt.Run) {
				okInstance(r, "counter-0")
				r.Instance("counter", "counter-1", vt.Code(3)).Output("counter", "counter-1", "out", "x")
			},
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"counter-0/exited-ok": "ok", "counter-1/exited-ok": "fail"},
			details: map[string]string{"counter-1/exited-ok": "exit code 3, want 0"},
		},
		{
			name: "exit code absent vs wrong vs equals",
			wchecks: `      - name: exited-three
        kind: exit-code
        equals: 3
`,
			build: func(r *vt.Run) {
				r.Instance("counter", "counter-0", nil).Output("counter", "counter-0", "out", "x")
				r.Event("instance.timeout", "workload", "counter", "instance", "counter-0", "timeout", "2m")
				r.Instance("counter", "counter-1", vt.Code(3)).Output("counter", "counter-1", "out", "x")
			},
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{
				"counter-0/exited-ok": "fail", "counter-0/exited-three": "fail",
				"counter-1/exited-ok": "fail", "counter-1/exited-three": "ok",
			},
			details: map[string]string{
				"counter-0/exited-ok":    "no exit code recorded\nthe instance timed out after 2m and was stopped",
				"counter-0/exited-three": "no exit code recorded",
				"counter-1/exited-ok":    "exit code 3, want 0",
			},
		},
		{
			name: "exit_code that is not a number",
			build: func(r *vt.Run) {
				okInstance(r, "counter-0")
				r.Instance("counter", "counter-1", nil).Output("counter", "counter-1", "out", "x")
				r.Output("counter", "counter-1", ".chaos/exit_code", "killed\n")
			},
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"counter-1/exited-ok": "fail"},
			details: map[string]string{"counter-1/exited-ok": `.chaos/exit_code holds "killed", not an exit code; want 0`},
		},
		{
			name: "xfail: known expectation covers every instance",
			top: `expectations:
  - issue: NVIDIA/OpenShell#4910
    checks: [counter/exited-ok]
`,
			build: func(r *vt.Run) {
				r.Instance("counter", "counter-0", nil).Output("counter", "counter-0", "out", "x")
				r.Instance("counter", "counter-1", nil).Output("counter", "counter-1", "out", "x")
			},
			verdict: rundir.VerdictXFail, exit: 0,
			results: map[string]string{"counter-0/exited-ok": "xfail", "counter-1/exited-ok": "xfail", "counter-0/wrote-out": "ok"},
			details: map[string]string{"counter-0/exited-ok": "no exit code recorded"},
		},
		{
			name: "xpass makes the run FAIL",
			top: `expectations:
  - issue: X#1
    kind: known
    checks: [counter/exited-ok]
`,
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"counter-0/exited-ok": "xpass", "counter-1/exited-ok": "xpass"},
		},
		{
			name: "instance-scoped expectation covers only that instance",
			top: `expectations:
  - issue: X#1
    checks: [counter-1/exited-ok]
`,
			build: func(r *vt.Run) {
				r.Instance("counter", "counter-0", vt.Code(1)).Output("counter", "counter-0", "out", "x")
				r.Instance("counter", "counter-1", vt.Code(1)).Output("counter", "counter-1", "out", "x")
			},
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"counter-0/exited-ok": "fail", "counter-1/exited-ok": "xfail"},
		},
		{
			name: "instance-scoped expectation alone gives XFAIL",
			top: `expectations:
  - issue: X#1
    checks: [counter-1/exited-ok]
`,
			build: func(r *vt.Run) {
				okInstance(r, "counter-0")
				r.Instance("counter", "counter-1", vt.Code(1)).Output("counter", "counter-1", "out", "x")
			},
			verdict: rundir.VerdictXFail, exit: 0,
			results: map[string]string{"counter-0/exited-ok": "ok", "counter-1/exited-ok": "xfail"},
		},
		{
			name: "flaky hit",
			top: `expectations:
  - issue: X#2
    kind: flaky
    checks: [counter/exited-ok]
`,
			build: func(r *vt.Run) {
				okInstance(r, "counter-0")
				r.Instance("counter", "counter-1", vt.Code(1)).Output("counter", "counter-1", "out", "x")
			},
			verdict: rundir.VerdictXFail, exit: 0,
			results: map[string]string{"counter-0/exited-ok": "ok", "counter-1/exited-ok": "xfail"},
			flaky:   []rundir.FlakyHit{{Issue: "X#2", Check: "counter/exited-ok", Instances: []string{"counter-1"}, Of: 2}},
		},
		{
			name: "flaky miss",
			top: `expectations:
  - issue: X#2
    kind: flaky
    checks: [counter/exited-ok]
`,
			verdict: rundir.VerdictPass, exit: 0,
			results: map[string]string{"counter-0/exited-ok": "ok", "counter-1/exited-ok": "ok"},
			flaky:   []rundir.FlakyHit{{Issue: "X#2", Check: "counter/exited-ok", Instances: []string{}, Of: 2}},
		},
		{
			name: "error from run.error",
			build: func(r *vt.Run) {
				bothOK(r)
				r.Event("run.error", "error", "hook instance.delete failed: exited 1")
			},
			verdict: rundir.VerdictError, exit: 2,
			results: map[string]string{"counter-0/exited-ok": "ok"},
			errors:  []string{"hook instance.delete failed: exited 1"},
		},
		{
			name: "error from a preflight failure reports preflight only",
			build: func(r *vt.Run) {
				r.Preflight("disk-space", false, "only 10 KiB free")
				r.Event("flow.skipped", "reason", "preflight failed")
			},
			verdict: rundir.VerdictError, exit: 2,
			ids:     []string{"preflight/shell-runs", "preflight/disk-space"},
			results: map[string]string{"preflight/shell-runs": "ok", "preflight/disk-space": "fail"},
			details: map[string]string{"preflight/disk-space": "only 10 KiB free"},
			errors:  []string{"preflight check disk-space failed"},
		},
		{
			name: "flow.skipped alone is ERROR",
			build: func(r *vt.Run) {
				r.Event("flow.skipped", "reason", "the gateway is not up")
			},
			verdict: rundir.VerdictError, exit: 2,
			ids:    []string{"preflight/shell-runs"},
			errors: []string{"the flow was skipped: the gateway is not up"},
		},
		{
			name: "error from a check that times out, never covered",
			wchecks: `      - name: slow
        kind: shell
        timeout: 1s
        run: echo started; sleep 5
`,
			top: `expectations:
  - issue: X#1
    checks: [counter-0/slow]
`,
			build: func(r *vt.Run) {
				okInstance(r, "counter-0")
			},
			verdict: rundir.VerdictError, exit: 2,
			results: map[string]string{"counter-0/slow": "error", "counter-0/exited-ok": "ok"},
			details: map[string]string{"counter-0/slow": "started\ntimed out after 1s"},
			errors:  []string{"check counter-0/slow: timed out after 1s"},
		},
		{
			name: "aborted",
			build: func(r *vt.Run) {
				bothOK(r)
				r.Event("run.aborted", "signal", "SIGINT")
			},
			noFinish: true,
			verdict:  rundir.VerdictError, exit: 2,
			aborted: true,
			errors:  []string{"the run was aborted (SIGINT)"},
		},
		{
			name: "n/a",
			build: func(r *vt.Run) {
				r.Event("run.na", "reasons", []string{"operation x uses restart-in-place, which test-local cannot provide"})
			},
			verdict: rundir.VerdictNA, exit: 0,
			ids: []string{},
			na:  []string{"operation x uses restart-in-place, which test-local cannot provide"},
		},
		{
			name:     "a crashed run (no run.finished) evaluated is ERROR",
			noFinish: true,
			verdict:  rundir.VerdictError, exit: 2,
			results: map[string]string{"counter-0/exited-ok": "ok"},
			errors:  []string{"the run did not finish"},
		},
		{
			name:     "the engine (by run) does not need run.finished",
			noFinish: true,
			by:       verdict.ByRun,
			verdict:  rundir.VerdictPass, exit: 0,
		},
		{
			name: "shell check sees its environment and runs in the output dir",
			wchecks: `      - name: env
        kind: shell
        run: |
          echo "out=$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR pwd=$PWD"
          echo "run=$CHAOS_RUN_DIR w=$CHAOS_WORKLOAD i=$CHAOS_INSTANCE idir=$CHAOS_INSTANCE_DIR"
          echo "$GREETING, $WORD"
          [ "$(cat "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/out")" = x ] && [ "$PWD" = "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR" ]
`,
			verdict: rundir.VerdictPass, exit: 0,
			results: map[string]string{"counter-0/env": "ok", "counter-1/env": "ok"},
			details: map[string]string{
				"counter-1/env": "/runs/counter-test/" + vt.RunID + "/workloads/counter/instances/counter-1/output pwd=",
				"counter-0/env": "w=counter i=counter-0 idir=",
			},
		},
		{
			name: "shell check output is the failure detail",
			build: func(r *vt.Run) {
				okInstance(r, "counter-0")
				r.Instance("counter", "counter-1", vt.Code(0))
			},
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"counter-0/wrote-out": "ok", "counter-1/wrote-out": "fail"},
			details: map[string]string{"counter-1/wrote-out": "no file out"},
		},
		{
			name: "adapter check fails on the evidence",
			build: func(r *vt.Run) {
				bothOK(r)
				r.File("system/leaked.txt", "1234 S sleep 100\n")
			},
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"adapter/nothing-leaked": "fail", "adapter/env-seen": "ok"},
			details: map[string]string{"adapter/nothing-leaked": "1234 S sleep 100"},
		},
		{
			name: "experiment shell check runs in the run dir",
			top: `checks:
  - name: has-timeline
    kind: shell
    run: test -s timeline.jsonl && [ "$PWD" = "$CHAOS_RUN_DIR" ] && [ "$GREETING" = hello ]
  - name: fails
    kind: shell
    run: exit 4
`,
			verdict: rundir.VerdictFail, exit: 1,
			results: map[string]string{"experiment/has-timeline": "ok", "experiment/fails": "fail"},
			details: map[string]string{"experiment/fails": "exited 4"},
		},
		{
			name: "instances only from instance.created, in workload and index order",
			build: func(r *vt.Run) {
				okInstance(r, "counter-1")
				okInstance(r, "counter-0")
			},
			verdict: rundir.VerdictPass, exit: 0,
			ids: []string{"preflight/shell-runs", "counter-0/exited-ok", "counter-0/wrote-out", "counter-1/exited-ok", "counter-1/wrote-out", "adapter/nothing-leaked", "adapter/env-seen"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := runCase(t, c)
			checkVerdict(t, c, v)
		})
	}
}

func checkVerdict(t *testing.T, c evalCase, v *rundir.Verdict) {
	t.Helper()
	t.Logf("\n%s", describe(v))
	if v.Verdict != c.verdict {
		t.Errorf("verdict = %s, want %s", v.Verdict, c.verdict)
	}
	if v.ExitCode != c.exit {
		t.Errorf("exit code = %d, want %d", v.ExitCode, c.exit)
	}
	byID := map[string]*rundir.CheckResult{}
	var ids []string
	for i := range v.Checks {
		byID[v.Checks[i].ID] = &v.Checks[i]
		ids = append(ids, v.Checks[i].ID)
	}
	if c.ids != nil && !reflect.DeepEqual(append([]string{}, ids...), c.ids) {
		t.Errorf("check ids = %q, want %q", ids, c.ids)
	}
	for id, want := range c.results {
		r := byID[id]
		if r == nil {
			t.Errorf("no result for %s", id)
			continue
		}
		if r.Result != want {
			t.Errorf("%s: result %s, want %s (detail %q)", id, r.Result, want, r.Detail)
		}
	}
	for id, want := range c.details {
		if r := byID[id]; r == nil || !strings.Contains(r.Detail, want) {
			got := "<none>"
			if r != nil {
				got = r.Detail
			}
			t.Errorf("%s: detail %q does not contain %q", id, got, want)
		}
	}
	for _, want := range c.errors {
		found := false
		for _, e := range v.Errors {
			found = found || strings.Contains(e, want)
		}
		if !found {
			t.Errorf("errors %q: none contains %q", v.Errors, want)
		}
	}
	if c.verdict != rundir.VerdictError && len(v.Errors) > 0 {
		t.Errorf("unexpected errors %q", v.Errors)
	}
	if c.flaky != nil || len(v.Flaky) > 0 {
		if !reflect.DeepEqual(v.Flaky, c.flaky) {
			t.Errorf("flaky = %+v, want %+v", v.Flaky, c.flaky)
		}
	}
	if v.Aborted != c.aborted {
		t.Errorf("aborted = %v, want %v", v.Aborted, c.aborted)
	}
	if !reflect.DeepEqual(v.NA, c.na) {
		t.Errorf("na = %q, want %q", v.NA, c.na)
	}
	total := 0
	for _, n := range v.Counts {
		total += n
	}
	if total != len(v.Checks) {
		t.Errorf("counts %v add up to %d, not %d checks", v.Counts, total, len(v.Checks))
	}
	if v.RunID != vt.RunID || v.Experiment.ID != "counter-test" || len(v.Experiment.SHA256) != 64 || v.Adapter.ID != "test-local" {
		t.Errorf("identity: run %q experiment %+v adapter %+v", v.RunID, v.Experiment, v.Adapter)
	}
}

func TestEvaluateEventChecks(t *testing.T) {
	events := func(r *vt.Run) {
		bothOK(r)
		r.Event("operation.started", "operation", "gateway-down", "uses", "outage", "run", 1)
		r.Event("operation.reverted", "operation", "gateway-down", "uses", "outage")
		r.Event("operation.reverted", "operation", "other", "uses", "kill")
		r.Event("instance.state", "workload", "counter", "instance", "counter-1", "state", "Unknown", "reason", "gateway gone")
	}
	type ev struct {
		check  string // YAML of one experiment check (kind event), indented 2
		wcheck string // or of one workload check, indented 6
		result map[string]string
		detail map[string]string
	}
	cases := []struct {
		name string
		ev
	}{
		{"where matches", ev{check: "event: operation.reverted\n    where: {operation: gateway-down}",
			result: map[string]string{"experiment/e": "ok"}}},
		{"where misses with near misses", ev{check: "event: operation.reverted\n    where: {operation: gateway-up}",
			result: map[string]string{"experiment/e": "fail"},
			detail: map[string]string{"experiment/e": "want at least 1 operation.reverted event with operation=gateway-up, found 0\nnear misses:\n  t="}}},
		{"where compares numbers as text", ev{check: "event: operation.started\n    where: {run: \"1\"}",
			result: map[string]string{"experiment/e": "ok"}}},
		{"min not reached", ev{check: "event: operation.reverted\n    min: 3",
			result: map[string]string{"experiment/e": "fail"},
			detail: map[string]string{"experiment/e": "want at least 3 operation.reverted events, found 2"}}},
		{"max exceeded lists what it found", ev{check: "event: operation.reverted\n    max: 1",
			result: map[string]string{"experiment/e": "fail"},
			detail: map[string]string{"experiment/e": "want exactly 1 operation.reverted event, found 2\nfound:\n  t="}}},
		{"max 0: never happened, and it did", ev{check: "event: operation.reverted\n    where: {uses: kill}\n    max: 0",
			result: map[string]string{"experiment/e": "fail"},
			detail: map[string]string{"experiment/e": "want no operation.reverted event with uses=kill, found 1\nfound:\n  t="}}},
		{"max 0: never happened, and it did not", ev{check: "event: run.error\n    max: 0",
			result: map[string]string{"experiment/e": "ok"}}},
		{"min and max window", ev{check: "event: operation.reverted\n    min: 1\n    max: 2",
			result: map[string]string{"experiment/e": "ok"}}},
		{"min and max window missed", ev{check: "event: operation.reverted\n    min: 3\n    max: 4",
			result: map[string]string{"experiment/e": "fail"},
			detail: map[string]string{"experiment/e": "want between 3 and 4 operation.reverted events, found 2"}}},
		{"workload scope counts only the instance's events", ev{wcheck: "event: instance.state\n        where: {state: Unknown}\n        max: 0",
			result: map[string]string{"counter-0/e": "ok", "counter-1/e": "fail"},
			detail: map[string]string{"counter-1/e": "want no instance.state event of counter-1 with state=Unknown, found 1"}}},
		{"workload scope min", ev{wcheck: "event: instance.collected",
			result: map[string]string{"counter-0/e": "ok", "counter-1/e": "ok"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The operations the where values name exist (validation
			// refuses a where naming no operation of the experiment).
			ec := evalCase{build: events, top: "operations:\n  - {name: gateway-down, uses: cut}\n  - {name: gateway-up, uses: cut}\n"}
			if c.check != "" {
				ec.top += "checks:\n  - name: e\n    kind: event\n    " + c.check + "\n"
			} else {
				ec.wchecks = "      - name: e\n        kind: event\n        " + c.wcheck + "\n"
			}
			v := runCase(t, ec)
			t.Logf("\n%s", describe(v))
			for _, r := range v.Checks {
				if want, ok := c.result[r.ID]; ok && r.Result != want {
					t.Errorf("%s: %s, want %s (%s)", r.ID, r.Result, want, r.Detail)
				}
				if want, ok := c.detail[r.ID]; ok && !strings.Contains(r.Detail, want) {
					t.Errorf("%s: detail %q does not contain %q", r.ID, r.Detail, want)
				}
			}
		})
	}
}

func TestEvaluateNearMissesAreBounded(t *testing.T) {
	ec := evalCase{
		// An event the timeline has (validation refuses one it does not).
		top: "checks:\n  - name: e\n    kind: event\n    event: repeat.round\n    where: {round: \"100\"}\n",
		build: func(r *vt.Run) {
			bothOK(r)
			for i := 0; i < 8; i++ {
				r.Event("repeat.round", "node", "flow", "round", i)
			}
		},
	}
	v := runCase(t, ec)
	for _, r := range v.Checks {
		if r.ID != "experiment/e" {
			continue
		}
		if got := strings.Count(r.Detail, "\n  t="); got != 5 {
			t.Errorf("%d near misses listed, want 5:\n%s", got, r.Detail)
		}
		if !strings.Contains(r.Detail, "(3 more)") {
			t.Errorf("detail does not say how many more:\n%s", r.Detail)
		}
	}
}

func TestEvaluateRecord(t *testing.T) {
	r := vt.New(t, "counter-test", experimentYAML("", "checks:\n  - name: e\n    kind: event\n    event: run.started\n"), adapterYAML)
	r.Started("counter-test", "test-local").Preflight("shell-runs", true, "")
	okInstance(r, "counter-0")
	d := r.Finished("?").Write()
	x, a := load(t, d)
	var got []string
	rec := func(name string, fields ...rundir.Field) {
		e := rundir.Event{Name: name, Fields: fields}
		got = append(got, name+" "+string(e.FieldsJSON()))
	}
	if _, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{By: verdict.ByRun, Record: rec, Env: os.Environ()}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`check.started {"scope": "workload", "instance": "counter-0", "check": "exited-ok"}`,
		`check.finished {"scope": "workload", "instance": "counter-0", "check": "exited-ok", "ok": true}`,
		`check.started {"scope": "workload", "instance": "counter-0", "check": "wrote-out"}`,
		`check.finished {"scope": "workload", "instance": "counter-0", "check": "wrote-out", "ok": true}`,
		`check.started {"scope": "experiment", "check": "e"}`,
		`check.finished {"scope": "experiment", "check": "e", "ok": true}`,
		`check.started {"scope": "adapter", "check": "nothing-leaked"}`,
		`check.finished {"scope": "adapter", "check": "nothing-leaked", "ok": true}`,
		`check.started {"scope": "adapter", "check": "env-seen"}`,
		`check.finished {"scope": "adapter", "check": "env-seen", "ok": true}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recorded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEvaluateInterrupted(t *testing.T) {
	r := vt.New(t, "counter-test", experimentYAML("", ""), adapterYAML)
	r.Started("counter-test", "test-local").Preflight("shell-runs", true, "")
	bothOK(r)
	d := r.Finished("?").Write()
	x, a := load(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, err := verdict.Evaluate(ctx, d, x, a, verdict.Options{Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != rundir.VerdictError || !v.Aborted || len(v.Checks) != 1 {
		t.Errorf("verdict %s aborted %v with %d checks; want ERROR, aborted, preflight only\n%s", v.Verdict, v.Aborted, len(v.Checks), describe(v))
	}
}

func TestEvaluateDamagedTimeline(t *testing.T) {
	r := vt.New(t, "counter-test", experimentYAML("", ""), adapterYAML)
	r.Started("counter-test", "test-local").Preflight("shell-runs", true, "")
	bothOK(r)
	d := r.Finished("?").Write()
	data, _ := os.ReadFile(d.TimelineFile())
	lines := strings.SplitAfter(string(data), "\n")
	// A damaged line in the middle, then the rest.
	damaged := strings.Join(lines[:3], "") + "{not json\n" + strings.Join(lines[3:], "")
	if err := os.WriteFile(d.TimelineFile(), []byte(damaged), 0o644); err != nil {
		t.Fatal(err)
	}
	x, a := load(t, d)
	v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{By: verdict.ByRun, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != rundir.VerdictError || len(v.Errors) == 0 || !strings.HasPrefix(v.Errors[0], "timeline: ") {
		t.Errorf("verdict %s, errors %q; want ERROR for a damaged timeline", v.Verdict, v.Errors)
	}
}

func TestEvaluateNoTimeline(t *testing.T) {
	d := &rundir.Dir{Root: t.TempDir()}
	x, _ := experiment.Parse("x.yaml", []byte(experimentYAML("", "")))
	if _, err := verdict.Evaluate(context.Background(), d, x, nil, verdict.Options{}); err == nil {
		t.Error("no error for a run directory without a timeline")
	}
}

func TestVerdictExitCodes(t *testing.T) {
	for _, c := range []struct {
		verdict string
		code    int
	}{
		{rundir.VerdictPass, 0},
		{rundir.VerdictXFail, 0},
		{rundir.VerdictFail, 1}, // also an XPASS run
		{rundir.VerdictError, 2},
		{rundir.VerdictNA, 0},
	} {
		if got := rundir.ExitCode(c.verdict); got != c.code {
			t.Errorf("ExitCode(%s) = %d, want %d", c.verdict, got, c.code)
		}
	}
}

func TestVerdictJSONShape(t *testing.T) {
	v := runCase(t, evalCase{top: `expectations:
  - issue: X#2
    kind: flaky
    checks: [counter/exited-ok]
`})
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"verdict", "exit_code", "experiment", "adapter", "checks", "counts", "by", "evaluated", "flaky"} {
		if _, ok := m[k]; !ok {
			t.Errorf("verdict JSON has no %q: %s", k, data)
		}
	}
	counts := m["counts"].(map[string]any)
	for _, k := range []string{"ok", "fail", "xfail", "xpass", "error"} {
		if _, ok := counts[k]; !ok {
			t.Errorf("counts has no %q", k)
		}
	}
	if n := counts["ok"].(float64); int(n) != len(v.Checks) {
		t.Errorf("counts.ok = %v, want %d", n, len(v.Checks))
	}
	// A flaky pass keeps its expectation in the JSON but is ok.
	if v.Checks[1].Expectation == nil || v.Checks[1].Expectation.Kind != "flaky" || v.Checks[1].Result != "ok" {
		t.Errorf("flaky pass = %+v", v.Checks[1])
	}
}

func TestWriteEvaluation(t *testing.T) {
	r := vt.New(t, "counter-test", experimentYAML("", ""), adapterYAML)
	r.Started("counter-test", "test-local").Preflight("shell-runs", true, "")
	bothOK(r)
	r.File("verdict.json", `{"verdict": "PASS"}`+"\n")
	d := r.Finished("PASS").Write()
	before, _ := os.Stat(d.VerdictFile())
	x, a := load(t, d)
	at := time.Date(2026, 10, 30, 8, 1, 2, 0, time.UTC)
	v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{Env: os.Environ(), Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := 0; i < 2; i++ {
		p, err := verdict.WriteEvaluation(d, v)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Base(p))
		if filepath.Dir(p) != d.EvaluationsDir() {
			t.Errorf("written to %s, not under evaluations/", p)
		}
		var back rundir.Verdict
		if err := rundir.ReadJSON(p, &back); err != nil || back.Verdict != rundir.VerdictPass || back.By != "evaluate" {
			t.Errorf("read back %+v, %v", back, err)
		}
	}
	want := []string{"20261030T080102Z-" + x.SHA256[:12] + ".json", "20261030T080102Z-" + x.SHA256[:12] + "-2.json"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("files %q, want %q", paths, want)
	}
	after, _ := os.Stat(d.VerdictFile())
	data, _ := os.ReadFile(d.VerdictFile())
	if string(data) != `{"verdict": "PASS"}`+"\n" || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("verdict.json changed")
	}
}

func ExamplePrint() {
	v := &rundir.Verdict{Verdict: rundir.VerdictError, Checks: []rundir.CheckResult{
		{ID: "hello-0/said-hello", Result: rundir.ResultError, Detail: "timed out after 60s"},
	}, Errors: []string{"check hello-0/said-hello: timed out after 60s", "hook instance.delete failed"}}
	verdict.Print(os.Stdout, v)
	fmt.Println("/runs/hello-world/x")
	// Output:
	//   ERROR hello-0/said-hello
	//           timed out after 60s
	//   error: hook instance.delete failed
	// ERROR
	// /runs/hello-world/x
}

// An operation's target is recorded as an object since run directory format
// 2, as text before; where: {target: ...} matches both, in the manifests'
// words.
func TestEvaluateWhereTargetBothForms(t *testing.T) {
	build := func(r *vt.Run) {
		bothOK(r)
		r.Event("operation.started", "operation", "gateway-down", "uses", "cut", "run", 1, "target", "gateway")
		r.Event("operation.started", "operation", "gateway-down", "uses", "cut", "run", 2, "target", map[string]string{"name": "gateway"})
		r.Event("operation.started", "operation", "gateway-up", "uses", "cut", "run", 1, "target", "{workload: counter}")
		r.Event("operation.started", "operation", "gateway-up", "uses", "cut", "run", 2, "target", map[string]string{"workload": "counter"})
		r.Event("operation.started", "operation", "gateway-up", "uses", "cut", "run", 3, "target", map[string]string{"workload": "counter", "role": "sidecar"})
	}
	for _, c := range []struct {
		where string
		want  int
	}{
		{`{target: gateway}`, 2},
		{`{target: "{workload: counter}"}`, 2},
		{`{target: "{workload:counter}"}`, 2},
		{`{target: "{workload: counter, role: sidecar}"}`, 1},
		{`{target: '{"workload": "counter"}'}`, 2},
	} {
		ec := evalCase{build: build, top: "operations:\n  - {name: gateway-down, uses: cut}\n  - {name: gateway-up, uses: cut}\n" +
			"checks:\n  - name: e\n    kind: event\n    event: operation.started\n    where: " + c.where + fmt.Sprintf("\n    min: %d\n    max: %d\n", c.want, c.want)}
		v := runCase(t, ec)
		for _, r := range v.Checks {
			if r.ID == "experiment/e" && r.Result != "ok" {
				t.Errorf("where %s: %s (%s)", c.where, r.Result, r.Detail)
			}
		}
	}
}
