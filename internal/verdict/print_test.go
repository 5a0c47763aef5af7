package verdict_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

var update = flag.Bool("update", false, "rewrite golden files (and the fixture's verdict.json)")

// FixtureRun is the committed run directory the golden tests read.
const fixtureRun = "testdata/runs/gateway-kill-keeps-state/20261029T120842Z-3b2c"

func TestPrintGoldenFixtureRun(t *testing.T) {
	d, err := rundir.Open(fixtureRun)
	if err != nil {
		t.Fatal(err)
	}
	x, ps := experiment.Load(d.ExperimentFile())
	if err := ps.Err(); err != nil {
		t.Fatal(err)
	}
	a, aps := adapter.Load(d.AdapterFile())
	if err := aps.Err(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 10, 29, 12, 9, 27, 0, time.UTC)
	for _, by := range []string{verdict.ByRun, verdict.ByEvaluate} {
		t.Run(by, func(t *testing.T) {
			v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{By: by, Env: os.Environ(), Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			if v.Verdict != rundir.VerdictXFail || v.Counts[rundir.ResultXFail] != 6 || v.RunID != "20261029T120842Z-3b2c" {
				t.Errorf("verdict %s, counts %v, run %s", v.Verdict, v.Counts, v.RunID)
			}
			var b strings.Builder
			verdict.Print(&b, v)
			golden(t, filepath.Join("testdata", "gateway-kill-keeps-state.golden"), b.String())
			if by == verdict.ByRun && *update {
				// The fixture's verdict.json is what the run itself wrote.
				for i := range v.Checks {
					v.Checks[i].Seconds = 0
				}
				if err := rundir.WriteJSON(d.VerdictFile(), v); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestPrint(t *testing.T) {
	known := &rundir.ExpectationRef{Issue: "NVIDIA/OpenShell#4910", Kind: "known"}
	flaky := &rundir.ExpectationRef{Issue: "X#2", Kind: "flaky"}
	long := make([]string, 25)
	for i := range long {
		long[i] = fmt.Sprintf("line %d", i+1)
	}
	cases := []struct {
		name string
		v    rundir.Verdict
		want string
	}{
		{
			name: "every label",
			v: rundir.Verdict{Verdict: rundir.VerdictError, Checks: []rundir.CheckResult{
				{ID: "preflight/disk-space", Result: "ok", Detail: "not shown"},
				{ID: "counter-0/exited-ok", Result: "xfail", Expectation: known, Detail: "no exit code recorded"},
				{ID: "counter-1/journal-complete", Result: "fail", Detail: "< 39\nwant the ticks 1 to 120, each once, in order\n"},
				{ID: "counter-2/exited-ok", Result: "xpass", Expectation: &rundir.ExpectationRef{Issue: "X#1", Kind: "known"}, Detail: "exit code 0"},
				{ID: "counter-3/x", Result: "xfail", Expectation: flaky, Detail: "boom"},
				{ID: "counter-4/x", Result: "ok", Expectation: flaky},
				{ID: "hello-0/said-hello", Result: "error", Detail: "timed out after 60s"},
			}, Errors: []string{"check hello-0/said-hello: timed out after 60s", "cleanup failed: sandbox x could not be deleted"}},
			want: `  ok    preflight/disk-space
  xfail counter-0/exited-ok (known: NVIDIA/OpenShell#4910)
          no exit code recorded
  FAIL  counter-1/journal-complete
          < 39
          want the ticks 1 to 120, each once, in order
  XPASS counter-2/exited-ok (known: X#1)
  flaky counter-3/x (flaky: X#2)
          boom
  ok    counter-4/x
  ERROR hello-0/said-hello
          timed out after 60s
  error: cleanup failed: sandbox x could not be deleted
ERROR
`,
		},
		{
			name: "long detail shows the last 20 lines (run)",
			v: rundir.Verdict{Verdict: "FAIL", By: "run", Checks: []rundir.CheckResult{
				{ID: "experiment/x", Result: "fail", Detail: strings.Join(long, "\n")},
			}},
			want: "  FAIL  experiment/x\n          (5 earlier lines in verdict.json)\n" + indentLines(long[5:]) + "FAIL\n",
		},
		{
			name: "long detail shows the last 20 lines (evaluate)",
			v: rundir.Verdict{Verdict: "FAIL", By: "evaluate", Checks: []rundir.CheckResult{
				{ID: "experiment/x", Result: "fail", Detail: strings.Join(long[:21], "\n")},
			}},
			want: "  FAIL  experiment/x\n          (1 earlier lines in the evaluation file)\n" + indentLines(long[1:21]) + "FAIL\n",
		},
		{
			name: "exactly 20 lines are not cut, blank lines stay blank",
			v: rundir.Verdict{Verdict: "FAIL", Checks: []rundir.CheckResult{
				{ID: "experiment/x", Result: "fail", Detail: "a\n\n" + strings.Join(long[:18], "\n")},
			}},
			want: "  FAIL  experiment/x\n          a\n\n" + indentLines(long[:18]) + "FAIL\n",
		},
		{
			name: "aborted and n/a",
			v:    rundir.Verdict{Verdict: "n/a", NA: []string{"restart-in-place is not available on pods"}},
			want: "  n/a: restart-in-place is not available on pods\nn/a\n",
		},
		{
			name: "pass",
			v:    rundir.Verdict{Verdict: "PASS", Checks: []rundir.CheckResult{{ID: "hello-0/exited-ok", Result: "ok"}}},
			want: "  ok    hello-0/exited-ok\nPASS\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			verdict.Print(&b, &c.v)
			if b.String() != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), c.want)
			}
		})
	}
}

func indentLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("          " + l + "\n")
	}
	return b.String()
}

// Colours mark the labels, errors and the verdict, and change nothing else;
// verbose prints every detail, whole.
func TestPrintWithColorAndVerbose(t *testing.T) {
	long := strings.Repeat("line\n", verdict.MaxDetailLines+5)
	v := &rundir.Verdict{Verdict: rundir.VerdictFail, Errors: []string{"boom"}, Warnings: []string{"hm"}, Checks: []rundir.CheckResult{
		{ID: "a-0/ok", Result: rundir.ResultOK, OK: true, Detail: "exit code 0"},
		{ID: "a-0/bad", Result: rundir.ResultFail, Detail: long},
		{ID: "a-0/known", Result: rundir.ResultXFail, Detail: "x", Expectation: &rundir.ExpectationRef{Issue: "o/r#1", Kind: "known"}},
	}}
	var plain, color, verbose strings.Builder
	verdict.Print(&plain, v)
	verdict.PrintWith(&color, v, verdict.PrintOptions{Color: true})
	verdict.PrintWith(&verbose, v, verdict.PrintOptions{Verbose: true})
	c := color.String()
	for _, want := range []string{"  \033[32mok   \033[0m a-0/ok\n", "  \033[1;31mFAIL \033[0m a-0/bad\n", "  \033[33mxfail\033[0m a-0/known (known: o/r#1)\n",
		"  \033[1;31merror:\033[0m boom\n", "  \033[33mwarning:\033[0m hm\n", "\033[1m\033[1;31mFAIL\033[0m\n"} {
		if !strings.Contains(c, want) {
			t.Errorf("coloured block lacks %q:\n%q", want, c)
		}
	}
	if stripped := regexpANSI.ReplaceAllString(c, ""); stripped != plain.String() {
		t.Errorf("colours changed the text:\n%s\nwant\n%s", stripped, plain.String())
	}
	if strings.Contains(plain.String(), "\033") || strings.Contains(plain.String(), "exit code 0") || !strings.Contains(plain.String(), "(5 earlier lines in verdict.json)") {
		t.Errorf("plain block:\n%s", plain.String())
	}
	vb := verbose.String()
	if !strings.Contains(vb, "  ok    a-0/ok\n          exit code 0\n") || strings.Contains(vb, "earlier lines") || strings.Count(vb, "          line\n") != verdict.MaxDetailLines+5 {
		t.Errorf("verbose block:\n%s", vb)
	}
}

var regexpANSI = regexp.MustCompile("\033\\[[0-9;]*m")
