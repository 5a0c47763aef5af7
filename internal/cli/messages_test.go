package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// Every command says in its help what it is for with examples, and which
// exit codes it gives.
func TestHelpHasExamplesAndExitCodes(t *testing.T) {
	root := newRoot(&streams{st: &State{}})
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			n++
			if strings.TrimSpace(sub.Example) == "" {
				t.Errorf("chaos %s has no Example", sub.Name())
			}
			if !strings.Contains(sub.Long, "Exit code") {
				t.Errorf("chaos %s --help gives no exit codes", sub.Name())
			}
			walk(sub)
		}
	}
	walk(root)
	if n < 19 {
		t.Errorf("only %d commands walked", n)
	}
}

func TestVersionFlag(t *testing.T) {
	_, v, _ := chaos(t, "version")
	code, flag, _ := chaos(t, "--version")
	if code != 0 || flag != v || !strings.HasPrefix(v, "chaos ") {
		t.Errorf("--version: exit %d %q, version %q", code, flag, v)
	}
}

// --seed and --settle are typed: a bad value is refused while the command
// line is parsed, as invalid input, with the manifests' words.
func TestTypedFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "--settle", "5", hello}, `invalid argument "5" for "--settle" flag: expected a duration such as 15s, 500ms or 2m30s, got "5" (add a unit: 5s)`},
		{[]string{"run", "--settle", "500", hello}, `got "500" (add a unit: 500ms, or 500s for 8m20s)`},
		{[]string{"run", "--settle", "-1s", hello}, `(it must not be negative)`},
		{[]string{"run", "--seed", "x", hello}, `invalid argument "x" for "--seed" flag: want a whole number`},
		{[]string{"run", "--seed", "-1", hello}, `want a whole number`},
		{[]string{"run", "--seed", "18446744073709551616", hello}, `want a whole number from 0 to 18446744073709551615`},
	} {
		code, out, errs := chaos(t, c.args...)
		if code != ExitInvalid || !strings.HasPrefix(errs, "chaos: ") || !strings.Contains(errs, c.msg) || !strings.Contains(errs, "chaos run --help lists its flags") {
			t.Errorf("chaos %s: exit %d\nstdout %s\nstderr %s\nwant %s", strings.Join(c.args, " "), code, out, errs, c.msg)
		}
	}
	// chaos run --help names the types.
	_, out, _ := chaos(t, "run", "--help")
	if !strings.Contains(out, "--seed N") || !strings.Contains(out, "--settle D") {
		t.Errorf("run --help:\n%s", out)
	}
}

// The messages of the issue, each as the user sees it.
func TestMessages(t *testing.T) {
	absHello, _ := filepath.Abs(hello)
	absExps, _ := filepath.Abs(exps)
	outside := t.TempDir()
	t.Chdir(outside)

	// Outside a checkout: where chaos looked, not lstat examples.
	for _, args := range [][]string{{"list"}, {"validate"}} {
		wantRun(t, ExitInvalid, "", "chaos: no experiments directory: neither experiments/ nor examples/ is in "+outside+"\n"+
			"  give the experiments directory with --dir DIR, or run chaos where experiments/ is\n", args...)
	}
	wantRun(t, ExitInvalid, "", `chaos: no experiment "hello-world": no such file, and no experiments directory to look the id up in (neither experiments/ nor examples/ is in `+outside+"; give --dir DIR, or the experiment's file)\n", "show", "hello-world")

	// A run directory that does not exist, a directory of runs, no argument.
	wantRun(t, ExitInvalid, "", "chaos: no run directory runs/nope: it does not exist\n", "evaluate", "runs/nope")
	wantRun(t, ExitInvalid, "", "chaos: evaluate needs a run directory (RUN)\n  usage: chaos evaluate RUN [flags]\n", "evaluate")
	d := evalRun(t, vt.Code(0), nil, true)
	runs := filepath.Dir(filepath.Dir(d.Root))
	wantRun(t, ExitInvalid, "", "chaos: "+runs+" is not a run directory but holds 1 of them\n  the latest is "+d.Root+"\n", "evaluate", runs)
	wantRun(t, ExitInvalid, "", "chaos: no run directory "+filepath.Join(runs, "hello-world", "20261029T000000Z-0000")+": it does not exist\n  the latest run directory there is "+d.Root+"\n",
		"report", filepath.Join(runs, "hello-world", "20261029T000000Z-0000"))

	// chaos stats of a path that is not there: no raw lstat error.
	wantRun(t, ExitInvalid, "", "chaos: no runs directory or run directory runs/nope: it does not exist\n", "stats", "runs/nope")
	wantRun(t, ExitInvalid, "", "chaos: no runs directory runs: it does not exist\n  chaos run makes it; give another with chaos stats DIR, or set $CHAOS_RUNS_DIR\n", "stats")

	// Not about a place in a manifest: chaos: <message>.
	code, _, errs := chaos(t, "run", "--adapter", "locl", absHello)
	if code != ExitInvalid || !strings.HasPrefix(errs, `chaos: no adapter "locl": it is not built in`) || !strings.HasSuffix(errs, "(did you mean \"local\"?)\n") {
		t.Errorf("--adapter locl: exit %d\n%s", code, errs)
	}
	wantRun(t, ExitInvalid, "", "chaos: no experiment file nope.yaml: it does not exist\n", "run", "nope.yaml")
	wantRun(t, ExitInvalid, "", `chaos: no experiment "helo-world": no such file, and no experiment in `+absExps+` has that id (did you mean "hello-world"?)`+"\n", "run", "--dir", absExps, "helo-world")

	// An empty experiments directory is said to be empty.
	empty := t.TempDir()
	wantRun(t, 0, "", "no experiments in "+empty+": it has no experiment files (.yaml with apiVersion)\n", "list", "--dir", empty)

	// A dashboard of a run with no metrics: panels [], and a warning.
	code, out, errs := chaos(t, "dashboard", d.Root)
	var dash map[string]any
	if err := json.Unmarshal([]byte(out), &dash); err != nil {
		t.Fatal(err)
	}
	if p, ok := dash["panels"].([]any); code != 0 || !ok || len(p) != 0 || !strings.Contains(errs, "no metrics were recorded") {
		t.Errorf("dashboard without metrics: exit %d, panels %v\n%s", code, dash["panels"], errs)
	}
}

// An out-of-range instance names the valid range.
func TestMessageInstanceRange(t *testing.T) {
	x := strings.Replace(mustRead(t, hello), "flow: hello", "flow: hello\nexpectations:\n  - issue: example/chaos#1\n    kind: known\n    checks: [hello-5/exited-ok]", 1)
	f := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(f, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := chaos(t, "validate", "--adapter", "local", f)
	if code != ExitInvalid || !strings.Contains(out, `"hello-5" is not an instance of workload "hello" (its only instance is hello-0)`) {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func mustRead(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
