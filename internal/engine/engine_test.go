package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/report"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

func localAdapter(t *testing.T) *adapter.Adapter {
	t.Helper()
	a, ok := adapter.Builtins()["local"]
	if !ok {
		t.Fatal("no built-in local adapter")
	}
	return a
}

func parse(t *testing.T, src string) *experiment.Experiment {
	t.Helper()
	x, ps := experiment.Parse("test.yaml", []byte(src))
	if err := ps.Err(); err != nil {
		t.Fatalf("experiment: %v", err)
	}
	return x
}

// runOnce runs src on the local adapter and returns the outcome and timeline.
func runOnce(t *testing.T, src string, seed *uint64) (*Outcome, []rundir.Event) {
	t.Helper()
	zero := time.Duration(0)
	out, err := Run(context.Background(), Config{Experiment: parse(t, src), Adapter: localAdapter(t), RunsDir: t.TempDir(), Seed: seed, Settle: &zero})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	events, err := rundir.ReadTimeline(out.Dir.TimelineFile())
	if err != nil {
		t.Fatal(err)
	}
	return out, events
}

func find(events []rundir.Event, name string) []rundir.Event {
	var out []rundir.Event
	for _, e := range events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

const killTwo = `apiVersion: chaos/v1alpha1
id: seeded
workloads:
  - name: w
    instances: 6
    run: sleep 1
operations:
  - {name: k, uses: kill, target: {workload: w}, select: {count: 2}, jitter: 50ms}
flow:
  parallel:
    - w
    - serial: [{wait: {workload: w, condition: running}}, k]
`

func chosen(events []rundir.Event) string {
	ops := find(events, "operation.started")
	if len(ops) != 1 {
		return ""
	}
	return rundir.ValueString(ops[0].Get("instances"))
}

func TestSameSeedSameChoices(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	seed := uint64(42)
	_, a := runOnce(t, killTwo, &seed)
	_, b := runOnce(t, killTwo, &seed)
	if chosen(a) == "" || chosen(a) != chosen(b) {
		t.Fatalf("seed 42 chose %s, then %s", chosen(a), chosen(b))
	}
	// Some other seed must choose differently, or the seed is not used.
	differs := false
	for s := uint64(1); s < 6 && !differs; s++ {
		_, c := runOnce(t, killTwo, &s)
		differs = chosen(c) != chosen(a)
	}
	if !differs {
		t.Fatalf("seeds 1 to 5 all chose %s like seed 42", chosen(a))
	}
}

func TestShortInstanceHasEveryState(t *testing.T) {
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: brief
workloads:
  - {name: w, run: "true", checks: [{name: ok, kind: exit-code}]}
flow: w
`, nil)
	var states []string
	for _, e := range find(events, "instance.state") {
		states = append(states, e.String("state"))
	}
	if got := strings.Join(states, ","); got != "Created,Running,Succeeded" {
		t.Fatalf("states %s, want Created,Running,Succeeded", got)
	}
	if out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("verdict %s", out.Verdict.Verdict)
	}
}

func TestRepeatTimesAndFor(t *testing.T) {
	_, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: rep
workloads:
  - {name: w, run: "true"}
flow:
  serial:
    - w
    - repeat: {times: 3, serial: [{delay: 10ms}]}
    - repeat: {for: 250ms, do: {delay: 100ms}}
`, nil)
	rounds := map[string]int{}
	for _, e := range find(events, "repeat.round") {
		rounds[e.String("node")]++
	}
	if rounds["flow.serial[1]"] != 3 {
		t.Errorf("times: 3 ran %d rounds", rounds["flow.serial[1]"])
	}
	// for: 250ms with 100 ms rounds starts rounds at 0, 100 and 200 ms
	// only (100 ms is the shortest round an unbounded repeat may have).
	if n := rounds["flow.serial[2]"]; n < 2 || n > 3 {
		t.Errorf("for: 250ms of 100ms rounds ran %d rounds, want 2 or 3", n)
	}
}

func TestWorkloadTimeoutKillsAndFails(t *testing.T) {
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: slow
workloads:
  - {name: w, timeout: 200ms, run: "sleep 30", checks: [{name: exited-ok, kind: exit-code, equals: 0}]}
flow: w
`, nil)
	if len(find(events, "instance.timeout")) != 1 {
		t.Fatal("no instance.timeout event")
	}
	if out.Verdict.Verdict != rundir.VerdictFail {
		t.Fatalf("verdict %s, want FAIL", out.Verdict.Verdict)
	}
	for _, c := range out.Verdict.Checks {
		if c.ID == "w-0/exited-ok" && !strings.Contains(c.Detail, "no exit code recorded") {
			t.Fatalf("detail %q", c.Detail)
		}
	}
}

func TestExperimentTimeoutIsError(t *testing.T) {
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: late
timeout: 200ms
workloads:
  - {name: w, run: "sleep 30"}
flow: w
`, nil)
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Fatalf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
	if len(find(events, "instance.deleted")) != 1 {
		t.Fatal("the running instance was not cleaned up")
	}
}

func TestSecretsAreRedactedFromEnvFile(t *testing.T) {
	out, _ := runOnce(t, `apiVersion: chaos/v1alpha1
id: secret
env: {API_TOKEN: hunter2hunter2, PLAIN: visible}
workloads:
  - {name: w, run: "true"}
flow: w
`, nil)
	data, err := readFile(out.Dir.Path("workloads", "w", "instances", "w-0", "env"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(data, "hunter2") || !strings.Contains(data, "API_TOKEN=<redacted>") || !strings.Contains(data, "PLAIN=visible") {
		t.Fatalf("env file not redacted as expected:\n%s", data)
	}
}

const hookAdapter = `apiVersion: chaos/v1alpha1
id: hooky
backend: process
operations:
  mark:
    run: echo "$CHAOS_PARAM_LEVEL $CHAOS_INSTANCE" >> "$CHAOS_RUN_DIR/marks"
    revert: echo "undo $CHAOS_INSTANCE" >> "$CHAOS_RUN_DIR/marks"
    params: {level: {description: how hard}}
  broken:
    run: echo "the policy server said no" >&2; exit 3
`

func runWith(t *testing.T, adapterSrc, src string) (*Outcome, []rundir.Event) {
	t.Helper()
	a, ps := adapter.Parse("hooky.yaml", []byte(adapterSrc))
	if err := ps.Err(); err != nil {
		t.Fatal(err)
	}
	zero := time.Duration(0)
	out, err := Run(context.Background(), Config{Experiment: parse(t, src), Adapter: a, RunsDir: t.TempDir(), Settle: &zero})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	events, err := rundir.ReadTimeline(out.Dir.TimelineFile())
	if err != nil {
		t.Fatal(err)
	}
	return out, events
}

func TestAdapterOperationRunsAndReverts(t *testing.T) {
	out, events := runWith(t, hookAdapter, `apiVersion: chaos/v1alpha1
id: marks
workloads:
  - {name: w, instances: 2, run: "sleep 0.5"}
operations:
  - {name: tighten, uses: mark, target: {workload: w}, with: {level: high}, duration: 50ms}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, tighten]}]
`)
	if out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
	}
	marks, _ := readFile(out.Dir.Path("marks"))
	for _, want := range []string{"high w-0", "high w-1", "undo w-0", "undo w-1"} {
		if !strings.Contains(marks, want) {
			t.Errorf("marks lack %q:\n%s", want, marks)
		}
	}
	if len(find(events, "operation.reverted")) != 1 {
		t.Error("no operation.reverted event")
	}
}

func TestFailingHookIsAnErrorNamingTheHook(t *testing.T) {
	out, _ := runWith(t, hookAdapter, `apiVersion: chaos/v1alpha1
id: broken
workloads:
  - {name: w, run: "true"}
operations:
  - {name: break-it, uses: broken}
flow: {serial: [w, break-it]}
`)
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Fatalf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
	msg := strings.Join(out.Verdict.Errors, "\n")
	if !strings.Contains(msg, "operation break-it run hook exited 3") || !strings.Contains(msg, "the policy server said no") {
		t.Fatalf("errors do not name the hook and its output: %s", msg)
	}
	log, _ := readFile(out.Dir.Path("logs", "operations.log"))
	if !strings.Contains(log, "the policy server said no") {
		t.Fatalf("hook output not in logs/operations.log: %q", log)
	}
}

func TestSecretsAreRedactedFromLogs(t *testing.T) {
	// Secrets come from the environment the harness runs in, as in CI.
	t.Setenv("DB_PASSWORD", "s3cr3t-value-42")
	out, _ := runWith(t, `apiVersion: chaos/v1alpha1
id: leaky
backend: process
operations:
  leak:
    run: echo "connecting with $DB_PASSWORD"
watch:
  - {name: chatty, run: "echo watcher saw $DB_PASSWORD; sleep 5"}
`, `apiVersion: chaos/v1alpha1
id: leak
workloads:
  - {name: w, run: "echo instance saw $DB_PASSWORD; sleep 0.3"}
operations:
  - {name: leak-it, uses: leak}
flow: {serial: [w, leak-it]}
checks:
  - {name: tells, kind: shell, run: 'echo "the password is $DB_PASSWORD"; exit 1'}
`)
	// The report is made from the finished run directory, as chaos run does.
	rv, err := runview.Load(out.Dir.Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteFile(rv); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"verdict.json", "report.html", "logs/operations.log", "logs/watch-chatty.log", "system/watch/chatty.jsonl", "workloads/w/instances/w-0/logs/process.log", "workloads/w/instances/w-0/env"} {
		data, err := readFile(out.Dir.Path(p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if strings.Contains(data, "s3cr3t-value-42") || !strings.Contains(data, "redacted") {
			t.Errorf("%s is not redacted:\n%s", p, data)
		}
	}
}
