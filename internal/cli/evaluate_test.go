package cli

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// evalFixtureRun is the committed run the verdict package's golden test
// reads; tests copy it before evaluating, since evaluate writes under
// evaluations/.
const evalFixtureRun = "../verdict/testdata/runs/gateway-kill-keeps-state/20261029T120842Z-3b2c"

const evalExperiment = `apiVersion: chaos/v1alpha1
id: hello-world
version: 1
workloads:
  - name: hello
    instances: 1
    run: echo "hello, world" > "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/greeting"
    checks:
      - name: exited-ok
        kind: exit-code
        equals: 0
      - name: said-hello
        kind: shell
        run: |
          grep -qx "hello, world" "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/greeting"
flow: hello
`

const evalAdapter = `apiVersion: chaos/v1alpha1
id: eval-local
backend: process
checks:
  - name: nothing-left
    run: test ! -s "$CHAOS_RUN_DIR/system/left.txt"
`

// evalRun builds a hello-world run directory; code is hello-0's exit code
// (nil: none recorded).
func evalRun(t *testing.T, code *int, extra func(r *vt.Run), finished bool) *rundir.Dir {
	t.Helper()
	r := vt.New(t, "hello-world", evalExperiment, evalAdapter)
	r.Started("hello-world", "eval-local").Preflight("shell-runs", true, "")
	r.Instance("hello", "hello-0", code).Output("hello", "hello-0", "greeting", "hello, world\n")
	if extra != nil {
		extra(r)
	}
	if finished {
		r.Finished("?")
	}
	return r.Write()
}

func evalMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = mainTest(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

var evalHeader = regexp.MustCompile(`^  evaluated with (\S+) \(sha256 ([0-9a-f]{12})\) and adapter (\S+) \((\S+), sha256 ([0-9a-f]{12})\)$`)

func TestEvaluateCommand(t *testing.T) {
	cases := []struct {
		name     string
		code     *int
		extra    func(r *vt.Run)
		finished bool
		exit     int
		verdict  string
		lines    []string // lines stdout must contain
	}{
		{name: "pass", code: vt.Code(0), finished: true, exit: ExitOK, verdict: "PASS",
			lines: []string{"  ok    preflight/shell-runs", "  ok    hello-0/exited-ok", "  ok    hello-0/said-hello", "  ok    adapter/nothing-left"}},
		{name: "fail", code: vt.Code(3), finished: true, exit: ExitFail, verdict: "FAIL",
			lines: []string{"  FAIL  hello-0/exited-ok", "          exit code 3, want 0"}},
		{name: "no exit code recorded", code: nil, finished: true, exit: ExitFail, verdict: "FAIL",
			lines: []string{"  FAIL  hello-0/exited-ok", "          no exit code recorded"}},
		{name: "harness error", code: vt.Code(0), finished: true, exit: ExitError, verdict: "ERROR",
			extra: func(r *vt.Run) { r.Event("run.error", "error", "operation gateway-down did not complete") },
			lines: []string{"  error: operation gateway-down did not complete"}},
		{name: "crashed run: no run.finished", code: vt.Code(0), finished: false, exit: ExitError, verdict: "ERROR",
			lines: []string{"  error: the run did not finish: the timeline has no run.finished event (the harness crashed or was killed)"}},
		{name: "n/a", finished: true, exit: ExitOK, verdict: "n/a",
			extra: func(r *vt.Run) { r.Event("run.na", "reasons", []string{"no such fault here"}) },
			lines: []string{"  n/a: no such fault here"}},
		{name: "aborted", code: vt.Code(0), finished: false, exit: ExitError, verdict: "ERROR",
			extra: func(r *vt.Run) { r.Event("run.aborted", "signal", "SIGTERM") },
			lines: []string{"  error: the run was aborted (SIGTERM)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := evalRun(t, c.code, c.extra, c.finished)
			exit, out, errOut := evalMain(t, "evaluate", "--trust", d.Root)
			t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
			if exit != c.exit {
				t.Errorf("exit %d, want %d", exit, c.exit)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) < 3 {
				t.Fatalf("too little output")
			}
			m := evalHeader.FindStringSubmatch(lines[0])
			if m == nil {
				t.Errorf("first line %q is not the evaluated-with line", lines[0])
			} else if m[1] != d.ExperimentFile() || m[3] != "eval-local" || m[4] != d.AdapterFile() {
				t.Errorf("header names %q", m[1:])
			}
			if got := lines[len(lines)-2]; got != c.verdict {
				t.Errorf("verdict line %q, want %q", got, c.verdict)
			}
			if got := lines[len(lines)-1]; got != d.Root {
				t.Errorf("last line %q, want the run directory %q", got, d.Root)
			}
			for _, want := range c.lines {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("stdout lacks %q", want)
				}
			}
			ents, err := os.ReadDir(d.EvaluationsDir())
			if err != nil || len(ents) != 1 {
				t.Fatalf("evaluations/: %v, %v", ents, err)
			}
			var v rundir.Verdict
			if err := rundir.ReadJSON(filepath.Join(d.EvaluationsDir(), ents[0].Name()), &v); err != nil {
				t.Fatal(err)
			}
			if v.Verdict != c.verdict || v.By != "evaluate" || v.ExitCode != c.exit {
				t.Errorf("evaluation says %s by %s exit %d", v.Verdict, v.By, v.ExitCode)
			}
			if _, err := os.Stat(d.VerdictFile()); err == nil {
				t.Errorf("evaluate wrote verdict.json")
			}
		})
	}
}

// evalCopyDir copies the committed fixture run to a temporary directory.
func evalCopyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "runs", "gateway-kill-keeps-state", filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "evaluations" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestEvaluateNeverTouchesVerdictJSON(t *testing.T) {
	root := evalCopyDir(t, evalFixtureRun)
	vf := filepath.Join(root, "verdict.json")
	old := time.Date(2026, 10, 29, 12, 9, 28, 0, time.UTC)
	if err := os.Chtimes(vf, old, old); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(vf)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		exit, out, errOut := evalMain(t, "evaluate", "--trust", root)
		if exit != ExitOK || !strings.Contains(out, "\nXFAIL\n") {
			t.Fatalf("exit %d\n%s%s", exit, out, errOut)
		}
		after, _ := os.ReadFile(vf)
		st, _ := os.Stat(vf)
		if !bytes.Equal(before, after) || !st.ModTime().Equal(old) {
			t.Fatalf("evaluation %d modified verdict.json", i)
		}
		ents, _ := os.ReadDir(filepath.Join(root, "evaluations"))
		if len(ents) != i {
			t.Fatalf("after %d evaluations, evaluations/ holds %d files", i, len(ents))
		}
		if !regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{12}(-\d+)?\.json$`).MatchString(ents[i-1].Name()) {
			t.Errorf("evaluation file name %q", ents[i-1].Name())
		}
	}
}

func TestEvaluateFixtureOutput(t *testing.T) {
	root := evalCopyDir(t, evalFixtureRun)
	exit, out, _ := evalMain(t, "evaluate", "--trust", root)
	if exit != ExitOK {
		t.Fatalf("exit %d", exit)
	}
	golden, err := os.ReadFile("../verdict/testdata/gateway-kill-keeps-state.golden")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(out, "\n", 2)
	if !evalHeader.MatchString(lines[0]) {
		t.Errorf("header %q", lines[0])
	}
	if want := string(golden) + root + "\n"; lines[1] != want {
		t.Errorf("got:\n%s\nwant:\n%s", lines[1], want)
	}
}

func TestEvaluateNewerExperiment(t *testing.T) {
	root := evalCopyDir(t, evalFixtureRun)
	orig, err := os.ReadFile(filepath.Join(root, "experiment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	newer := filepath.Join(dir, "gateway-kill-keeps-state.yaml")
	added := strings.Replace(string(orig), "expectations:", `  - name: gateway-restarted-once
    kind: event
    event: target.restarted
    where: {target: gateway}
    min: 1
    max: 1
  - name: no-harness-errors
    kind: event
    event: run.error
    max: 0
expectations:`, 1)
	if err := os.WriteFile(newer, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	exit, out, errOut := evalMain(t, "evaluate", "--trust", "--experiment", newer, root)
	if exit != ExitOK {
		t.Fatalf("exit %d\n%s%s", exit, out, errOut)
	}
	for _, want := range []string{"  ok    experiment/gateway-recovered\n", "  ok    experiment/gateway-restarted-once\n", "  ok    experiment/no-harness-errors\n", "\nXFAIL\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if m := evalHeader.FindStringSubmatch(strings.SplitN(out, "\n", 2)[0]); m == nil || m[1] != newer {
		t.Errorf("header does not name %s: %q", newer, m)
	}

	// The same file with a failing extra check turns the verdict.
	failing := strings.Replace(added, "max: 0\n", "max: 0\n  - name: never-restarted\n    kind: event\n    event: target.restarted\n    max: 0\n", 1)
	if err := os.WriteFile(newer, []byte(failing), 0o644); err != nil {
		t.Fatal(err)
	}
	exit, out, _ = evalMain(t, "evaluate", "--trust", "--experiment", newer, root)
	if exit != ExitFail || !strings.Contains(out, "  FAIL  experiment/never-restarted\n          want no target.restarted event, found 1\n") {
		t.Errorf("exit %d\n%s", exit, out)
	}
}

func TestEvaluateRefusals(t *testing.T) {
	d := evalRun(t, vt.Code(0), nil, true)
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte(strings.Replace(evalExperiment, "id: hello-world", "id: other", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: chaos/v1alpha1\nid: hello-world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	otherAdapter := filepath.Join(t.TempDir(), "a.yaml")
	if err := os.WriteFile(otherAdapter, []byte(strings.Replace(evalAdapter, "id: eval-local", "id: else", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"not a run directory", []string{"evaluate", t.TempDir()}, "is not a run directory"},
		{"experiment of another id", []string{"evaluate", "--experiment", other, d.Root}, `has id "other", but the run`},
		{"invalid experiment", []string{"evaluate", "--experiment", broken, d.Root}, "cannot evaluate"},
		{"adapter of another id", []string{"evaluate", "--adapter", otherAdapter, d.Root}, `has id "else", but the run`},
		{"no run", []string{"evaluate"}, "evaluate needs a run directory (RUN)\n  usage: chaos evaluate RUN"},
		{"no such run", []string{"evaluate", filepath.Join(t.TempDir(), "nope")}, "nope: it does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exit, out, errOut := evalMain(t, c.args...)
			if exit != ExitInvalid || !strings.Contains(errOut, c.msg) {
				t.Errorf("exit %d, stderr %q (want %q)\nstdout %s", exit, errOut, c.msg, out)
			}
		})
	}
	if _, err := os.Stat(d.EvaluationsDir()); err == nil {
		t.Errorf("a refused evaluation wrote under evaluations/")
	}
}

func TestEvaluateAdapterFlag(t *testing.T) {
	d := evalRun(t, vt.Code(0), func(r *vt.Run) { r.File("system/left.txt", "x\n") }, true)
	newer := filepath.Join(t.TempDir(), "eval-local.yaml")
	// A newer adapter whose check no longer fails on this evidence.
	if err := os.WriteFile(newer, []byte(strings.Replace(evalAdapter, `test ! -s "$CHAOS_RUN_DIR/system/left.txt"`, "true", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if exit, out, _ := evalMain(t, "evaluate", "--trust", d.Root); exit != ExitFail || !strings.Contains(out, "  FAIL  adapter/nothing-left\n") {
		t.Errorf("with the run's adapter: exit %d\n%s", exit, out)
	}
	exit, out, _ := evalMain(t, "evaluate", "--trust", "--adapter", newer, d.Root)
	if exit != ExitOK || !strings.Contains(out, "and adapter eval-local ("+newer+", sha256 ") {
		t.Errorf("with --adapter: exit %d\n%s", exit, out)
	}
}

func TestEvaluateWithoutProcesses(t *testing.T) {
	// A run directory that lacks adapter.yaml (and verdict.json) is still
	// evaluated, without adapter checks.
	d := evalRun(t, vt.Code(0), nil, true)
	if err := os.Remove(d.AdapterFile()); err != nil {
		t.Fatal(err)
	}
	exit, out, errOut := evalMain(t, "evaluate", "--trust", d.Root)
	if exit != ExitOK || !strings.Contains(out, "and no adapter") || strings.Contains(out, "adapter/") {
		t.Errorf("exit %d\n%s%s", exit, out, errOut)
	}
}
