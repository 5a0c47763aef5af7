package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// evaluate never writes outside the run directory: an evaluations/ that is
// a symlink to elsewhere is refused, with an error naming it.
func TestEvaluateRefusesEvaluationsLinkedOutside(t *testing.T) {
	d := evalRun(t, vt.Code(0), nil, true)
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, d.Path("evaluations")); err != nil {
		t.Fatal(err)
	}
	exit, _, errOut := evalMain(t, "evaluate", "--trust", d.Root)
	if exit != ExitError || !strings.Contains(errOut, "evaluations") || !strings.Contains(errOut, "outside") {
		t.Errorf("exit %d, stderr %q: want 2 and an error naming evaluations as leading outside", exit, errOut)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) > 0 {
		t.Errorf("evaluate wrote %s outside the run directory", entries[0].Name())
	}
}

// An instance name from the timeline that is not a name (../../x) never
// becomes a path: evaluate refuses the timeline instead of reading an
// exit code from outside the run directory or running a check there.
func TestEvaluateRefusesInstanceNamesThatArePaths(t *testing.T) {
	d := evalRun(t, vt.Code(0), func(r *vt.Run) {
		r.Event("instance.created", "workload", "hello", "instance", "../../../../var/x", "system_id", "1")
	}, true)
	outside := filepath.Join(filepath.Dir(d.Root), "var", "x", "output", ".chaos")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "exit_code"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(outside, "..", "ran-here")
	exit, out, errOut := evalMain(t, "evaluate", "--trust", "--experiment", writeTemp(t, map[string]string{"x.yaml": strings.Replace(evalExperiment, `grep -qx "hello, world" "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/greeting"`, `touch ran-here`, 1)})+"/x.yaml", d.Root)
	if strings.Contains(out, "../../../../var/x/exited-ok") {
		t.Errorf("evaluate judged an instance named by a path:\n%s", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a shell check ran in a directory outside the run directory")
	}
	if exit != ExitError || !strings.Contains(out+errOut, `"../../../../var/x" is not a valid name`) {
		t.Errorf("exit %d, output\n%s%s\nwant 2 and the bad name", exit, out, errOut)
	}
}

// Shell checks that came with the run directory do not run unless the
// user trusts it; the message says how to run them, and the declarative
// checks still decide.
func TestEvaluateDoesNotRunTheRunsShellChecks(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	x := strings.Replace(evalExperiment, `grep -qx "hello, world" "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/greeting"`, `touch `+marker, 1)
	r := vt.New(t, "hello-world", x, strings.Replace(evalAdapter, `test ! -s "$CHAOS_RUN_DIR/system/left.txt"`, `touch `+marker+`.adapter`, 1))
	r.Started("hello-world", "eval-local").Preflight("shell-runs", true, "")
	r.Instance("hello", "hello-0", vt.Code(0)).Finished("PASS")
	d := r.Write()

	exit, out, _ := evalMain(t, "evaluate", d.Root)
	for _, m := range []string{marker, marker + ".adapter"} {
		if _, err := os.Stat(m); err == nil {
			t.Errorf("evaluate ran a script from the run directory (%s exists)", filepath.Base(m))
		}
	}
	for _, want := range []string{"  ok    hello-0/exited-ok\n", "  ERROR hello-0/said-hello\n", "  ERROR adapter/nothing-left\n", "chaos evaluate --trust", "--experiment and --adapter", "ERROR\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if exit != ExitError {
		t.Errorf("exit %d, want 2", exit)
	}

	exit, out, _ = evalMain(t, "evaluate", "--trust", d.Root)
	for _, m := range []string{marker, marker + ".adapter"} {
		if _, err := os.Stat(m); err != nil {
			t.Errorf("with --trust the script did not run: %v\n%s", err, out)
		}
	}
	if exit != ExitOK {
		t.Errorf("with --trust: exit %d\n%s", exit, out)
	}
}

// A relative default-adapter is a path from the experiment file's
// directory, not from the directory chaos runs in.
func TestDefaultAdapterRelativeToTheExperiment(t *testing.T) {
	dir := writeTemp(t, map[string]string{
		"exp/hello.yaml":        "apiVersion: chaos/v1alpha1\nid: hello\ndefault-adapter: ../adapters/mine.yaml\nworkloads:\n  - name: w\n    run: echo\nflow: w\n",
		"adapters/mine.yaml":    "apiVersion: chaos/v1alpha1\nid: mine\nbackend: process\n",
		"deep/er/placeholder.x": "",
	})
	t.Chdir(filepath.Join(dir, "deep/er"))
	wantRun(t, 0, "valid    hello on mine\n", "", "validate", filepath.Join(dir, "exp/hello.yaml"))
	wantRun(t, 0, "valid    hello on mine\n", "", "validate", "../../exp/hello.yaml")
}

// Two versions of an experiment side by side share an id: list and
// validate take both (list names each file, validate warns), and only a
// command asked for the ambiguous id refuses it, naming both files and
// saying to give the file; given the file, it works.
func TestDuplicateExperimentIDs(t *testing.T) {
	x := "apiVersion: chaos/v1alpha1\nid: twin\nworkloads:\n  - name: w\n    run: echo\nflow: w\n"
	dir := writeTemp(t, map[string]string{"a.yaml": x, "b/b.yaml": strings.Replace(x, "id: twin", "id: twin\nversion: 2", 1)})
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b/b.yaml")
	code, out, _ := chaos(t, "validate", "--dir", dir, "--adapter", "local")
	if code != ExitOK || !strings.Contains(out, a+":2:5: warning: id: experiment id \"twin\" is also the id of "+b) || !strings.Contains(out, "give the file instead") || strings.Count(out, "valid    twin on local") != 2 {
		t.Errorf("validate: exit %d\n%s", code, out)
	}
	code, out, errs := chaos(t, "show", "--dir", dir, "twin")
	if code != ExitInvalid || out != "" || !strings.Contains(errs, a) || !strings.Contains(errs, b) || !strings.Contains(errs, "give the file") {
		t.Errorf("show: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	code, out, errs = chaos(t, "show", b)
	if code != ExitOK || !strings.HasPrefix(out, "twin (v2)") {
		t.Errorf("show FILE: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	code, out, errs = chaos(t, "list", "--dir", dir)
	if code != ExitOK || !strings.Contains(out, "twin (v0)  "+a) || !strings.Contains(out, "twin (v2)  "+b) || errs != "" {
		t.Errorf("list: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

// Every command that reads a run refuses a timeline time far beyond any
// run (t = 1e300 once made chaos report grow to 23.7 GB) with an error
// naming the file and line, instead of sizing anything by it.
func TestCommandsRefuseAbsurdTimes(t *testing.T) {
	d := evalRun(t, vt.Code(0), func(r *vt.Run) {
		r.Raw(`{"t": 1e300, "ts": "2026-10-29T11:26:50.000000Z", "event": "operation.started", "operation": "x", "uses": "kill", "run": 1}`)
	}, true)
	for _, args := range [][]string{
		{"report", d.Root},
		{"evidence", d.Root},
		{"share", d.Root},
		{"export", d.Root},
		{"dashboard", d.Root},
		{"evaluate", "--trust", d.Root},
	} {
		exit, out, errOut := evalMain(t, args...)
		// A run directory the commands that show it refuse is invalid
		// input; evaluate decides the verdict ERROR from it.
		want := ExitInvalid
		if args[0] == "evaluate" {
			want = ExitError
		}
		if exit != want || !strings.Contains(out+errOut, "timeline.jsonl:") || !strings.Contains(out+errOut, "t = 1e+300") {
			t.Errorf("chaos %s: exit %d\n%s%s", strings.Join(args, " "), exit, out, errOut)
		}
		if len(out) > 1<<20 {
			t.Errorf("chaos %s printed %d bytes", args[0], len(out))
		}
	}
}
