package verdict_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const historyExperiment = `apiVersion: chaos/v1alpha1
id: set-test
workloads:
  - {name: writer, run: "true"}
  - {name: reader, run: "true"}
operations:
  - {name: kill-db, uses: kill, target: db}
flow: [writer, kill-db, reader]
checks:
  - name: no-lost-adds
    kind: set
    requires: {fault-during-operations: true, ok-after-last-fault: 1}
`

// The timeline: writer-0 and reader-0 ran, kill-db acted from t=4.0 to
// t=4.5 (vt.Run puts events 0.5 s apart).
func historyRun(t *testing.T, experimentYAML, writer, reader string) (*rundir.Verdict, *rundir.Dir) {
	t.Helper()
	r := vt.New(t, "set-test", experimentYAML, "").Started("set-test", "local")
	r.Instance("writer", "writer-0", vt.Code(0)).Instance("reader", "reader-0", vt.Code(0))
	r.Event("operation.started", "operation", "kill-db", "uses", "kill", "run", 1)
	r.Event("operation.finished", "operation", "kill-db", "uses", "kill", "run", 1)
	r.Finished("PASS")
	r.Output("writer", "writer-0", ".chaos/history.jsonl", writer)
	r.Output("reader", "reader-0", ".chaos/history.jsonl", reader)
	d := r.Write()
	x, ps := experiment.Parse("x.yaml", []byte(experimentYAML))
	if ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	v, err := verdict.Evaluate(context.Background(), d, x, nil, verdict.Options{By: verdict.ByRun})
	if err != nil {
		t.Fatal(err)
	}
	return v, d
}

func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

func TestHistoryCheckVerdicts(t *testing.T) {
	read := func(v string) string {
		return lines(`{"type":"invoke","f":"read","t":5.0}`, `{"type":"ok","f":"read","value":`+v+`,"t":5.1}`)
	}
	for _, c := range []struct {
		name, writer, reader, verdict string
		code                          int
		detail                        []string
	}{
		{"a fault hit an add and nothing was lost", lines(
			`{"type":"invoke","f":"add","value":1,"t":3.9}`,
			`{"type":"ok","f":"add","value":1,"t":4.2}`,
			`{"type":"invoke","f":"add","value":2,"t":4.6}`,
			`{"type":"ok","f":"add","value":2,"t":4.7}`,
		), read("[1,2]"), "PASS", 0, []string{"requires met: 1 operations open during 1 fault(s), 2 ok after the last fault"}},
		{"the fault hit nothing: inconclusive, not PASS", lines(
			`{"type":"invoke","f":"add","value":1,"t":1.0}`,
			`{"type":"ok","f":"add","value":1,"t":1.1}`,
			`{"type":"invoke","f":"add","value":2,"t":4.6}`,
			`{"type":"ok","f":"add","value":2,"t":4.7}`,
		), read("[1,2]"), "INCONCLUSIVE", 3, []string{"inconclusive: the run did not show what this check needs to count:", "none of the 1 fault(s) acted while an operation was open"}},
		{"lost adds fail whatever the coverage", lines(
			`{"type":"invoke","f":"add","value":1,"t":1.0}`,
			`{"type":"ok","f":"add","value":1,"t":1.1}`,
		), read("[]"), "FAIL", 1, []string{"lost: 1 acknowledged adds missing: 1"}},
		{"no final read", lines(
			`{"type":"invoke","f":"add","value":1,"t":3.9}`,
			`{"type":"ok","f":"add","value":1,"t":4.2}`,
		), "", "INCONCLUSIVE", 3, []string{"no ok read"}},
		{"history problems are warnings", lines(
			`{"type":"ok","f":"add","value":7,"t":1.0}`,
			`{"type":"invoke","f":"add","value":1,"t":3.9}`,
			`{"type":"ok","f":"add","value":1,"t":4.2}`,
			`{"type":"invoke","f":"add","value":2,"t":4.6}`,
			`{"type":"ok","f":"add","value":2,"t":4.7}`,
			`garbage`,
		), read("[1,2]"), "PASS", 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, _ := historyRun(t, historyExperiment, c.writer, c.reader)
			if v.Verdict != c.verdict || v.ExitCode != c.code {
				t.Fatalf("verdict %s (exit %d), want %s (exit %d): %+v", v.Verdict, v.ExitCode, c.verdict, c.code, v.Checks)
			}
			r := v.Checks[len(v.Checks)-1]
			for _, d := range c.detail {
				if !strings.Contains(r.Detail, d) {
					t.Errorf("detail lacks %q:\n%s", d, r.Detail)
				}
			}
			if c.verdict == "INCONCLUSIVE" && r.Result != rundir.ResultInconclusive {
				t.Errorf("result %s, want inconclusive", r.Result)
			}
			var b strings.Builder
			verdict.Print(&b, v)
			if c.verdict == "INCONCLUSIVE" && !strings.Contains(b.String(), "  INCONCLUSIVE experiment/no-lost-adds\n") {
				t.Errorf("check block:\n%s", b.String())
			}
			if strings.HasPrefix(c.name, "history problems") {
				want := "history of writer-0: 2 problem(s): writer-0 line 6: not a JSON object: garbage; writer-0 line 1: ok add by process 0 without an open invoke"
				if len(v.Warnings) != 1 || v.Warnings[0] != want {
					t.Errorf("warnings %q, want %q", v.Warnings, want)
				}
			}
		})
	}
}

// A fail outranks an inconclusive check, and an inconclusive check outranks
// a known failure.
func TestInconclusivePrecedence(t *testing.T) {
	x := historyExperiment + `  - {name: never, kind: event, event: run.aborted}
expectations:
  - {issue: org/repo#1, checks: [experiment/never]}
`
	v, _ := historyRun(t, x, lines(`{"type":"invoke","f":"add","value":1,"t":1.0}`, `{"type":"ok","f":"add","value":1,"t":1.1}`), "")
	if v.Verdict != rundir.VerdictInconclusive {
		t.Errorf("inconclusive and xfail: %s, want INCONCLUSIVE", v.Verdict)
	}
	x = historyExperiment + `  - {name: never, kind: event, event: run.aborted}
`
	v, _ = historyRun(t, x, lines(`{"type":"invoke","f":"add","value":1,"t":1.0}`, `{"type":"ok","f":"add","value":1,"t":1.1}`), "")
	if v.Verdict != rundir.VerdictFail {
		t.Errorf("inconclusive and fail: %s, want FAIL", v.Verdict)
	}
}

// A linearizability violation leaves Porcupine's page in checks/ and names
// it in the verdict.
func TestLinearizableCounterExample(t *testing.T) {
	x := `apiVersion: chaos/v1alpha1
id: set-test
workloads:
  - {name: writer, run: "true"}
  - {name: reader, run: "true"}
flow: [writer, reader]
checks:
  - {name: register, kind: linearizable, model: register}
`
	v, d := historyRun(t, x, lines(
		`{"type":"invoke","f":"write","value":1,"t":1.0}`,
		`{"type":"ok","f":"write","value":1,"t":1.1}`,
		`{"type":"invoke","f":"write","value":2,"t":1.2}`,
		`{"type":"ok","f":"write","value":2,"t":1.3}`,
	), lines(`{"type":"invoke","f":"read","t":2.0}`, `{"type":"ok","f":"read","value":1,"t":2.1}`))
	r := v.Checks[len(v.Checks)-1]
	if v.Verdict != "FAIL" || r.Artifact != "checks/experiment.register.html" {
		t.Fatalf("verdict %s artifact %q: %s", v.Verdict, r.Artifact, r.Detail)
	}
	page, err := os.ReadFile(filepath.Join(d.Root, r.Artifact))
	if err != nil || !strings.Contains(string(page), "<html") {
		t.Fatalf("counter-example page: %v", err)
	}
	if !strings.Contains(r.Detail, "cannot go on with: reader-0/0 read (line 1, t=2.000) ok → 1") {
		t.Errorf("detail:\n%s", r.Detail)
	}
	if len(r.Findings) == 0 || r.Findings[0].Kind != "not-linearizable" || r.Findings[0].Ops[0].Instance != "reader-0" {
		t.Errorf("findings: %+v", r.Findings)
	}
}

// Issue 23 item 12: operations a model does not know are the client's
// problem: a warning naming it, left out of the check, never a FAIL. (A kv
// history with appends, which porcupine asserts linearizable, was FAIL "31
// operations are not kv operations".)
func TestUnknownHistoryOperationsWarn(t *testing.T) {
	x := `apiVersion: chaos/v1alpha1
id: set-test
workloads:
  - {name: writer, run: "true"}
  - {name: reader, run: "true"}
flow: [writer, reader]
checks:
  - {name: kv, kind: linearizable, model: kv, initial: '""'}
`
	v, _ := historyRun(t, x, lines(
		`{"type":"invoke","f":"append","value":["k","a"],"t":1.0}`,
		`{"type":"ok","f":"append","value":["k","a"],"t":1.1}`,
		`{"type":"invoke","f":"append","value":["k","b"],"t":1.2}`,
		`{"type":"ok","f":"append","value":["k","b"],"t":1.3}`,
		`{"type":"invoke","f":"flush","value":["k"],"t":1.4}`,
		`{"type":"ok","f":"flush","value":["k"],"t":1.5}`,
	), lines(`{"type":"invoke","f":"read","value":["k",null],"t":2.0}`, `{"type":"ok","f":"read","value":["k","ab"],"t":2.1}`))
	r := v.Checks[len(v.Checks)-1]
	if v.Verdict != "PASS" || r.Result != rundir.ResultOK {
		t.Fatalf("verdict %s: %s", v.Verdict, r.Detail)
	}
	want := `check experiment/kv: 1 operations are not kv operations and were left out of the check (a client problem): writer-0/0 flush ["k"] (line 5, t=1.400): unknown f "flush"`
	if len(v.Warnings) != 1 || !strings.HasPrefix(v.Warnings[0], want) {
		t.Errorf("warnings %q, want %q", v.Warnings, want)
	}
}

// A list-append check: a G-single-item cycle (T2 read key 2 empty, T1
// appended to it; T1's append to key 1 came before T2's) FAILs against
// serializable, naming the cycle with its keys and values in the detail and
// in verdict.json's findings, and PASSes against read-committed, which
// allows it.
func TestListAppendCheck(t *testing.T) {
	writer := lines(
		`{"type":"invoke","f":"txn","value":[["append",1,1],["append",2,1]],"t":1.0}`,
		`{"type":"ok","f":"txn","value":[["append",1,1],["append",2,1]],"t":1.1}`,
	)
	reader := lines(
		`{"process":1,"type":"invoke","f":"txn","value":[["append",1,2],["r",2,null]],"t":1.0}`,
		`{"process":1,"type":"ok","f":"txn","value":[["append",1,2],["r",2,[]]],"t":1.2}`,
		`{"process":2,"type":"invoke","f":"txn","value":[["r",1,null]],"t":2.0}`,
		`{"process":2,"type":"ok","f":"txn","value":[["r",1,[1,2]]],"t":2.1}`,
	)
	for _, c := range []struct {
		models, verdict string
		detail          []string
	}{
		{"[serializable]", "FAIL", []string{
			"G-single-item (forbidden): 1",
			"T1 = writer-0/0 (line 1, t=1.000) ok [append 1 1] [append 2 1]",
			"T2 = reader-0/1 (line 1, t=1.000) ok [append 1 2] [r 2 []]",
			"T1 -ww-> T2: key 1: T1 wrote 1, then T2 wrote 2 after it",
			"T2 -rw-> T1: key 2: T2 read (initial), and T1 wrote 1, the next version, which T2 did not see",
			"rules out: consistent-view, repeatable-read",
		}},
		{"[read-committed]", "PASS", []string{"also seen, allowed by read-committed: G-single-item (1)", "still satisfies: read-committed"}},
	} {
		t.Run(c.models, func(t *testing.T) {
			x := `apiVersion: chaos/v1alpha1
id: set-test
workloads:
  - {name: writer, run: "true"}
  - {name: reader, run: "true"}
flow: [writer, reader]
checks:
  - {name: txn, kind: list-append, consistency-models: ` + c.models + `}
`
			v, _ := historyRun(t, x, writer, reader)
			r := v.Checks[len(v.Checks)-1]
			if v.Verdict != c.verdict {
				t.Fatalf("verdict %s, want %s:\n%s", v.Verdict, c.verdict, r.Detail)
			}
			for _, d := range c.detail {
				if !strings.Contains(r.Detail, d) {
					t.Errorf("detail lacks %q:\n%s", d, r.Detail)
				}
			}
			if c.verdict == "FAIL" && (len(r.Findings) != 1 || r.Findings[0].Kind != "G-single-item" || !r.Findings[0].Bad || len(r.Findings[0].Ops) != 2) {
				t.Errorf("findings: %+v", r.Findings)
			}
		})
	}
}
