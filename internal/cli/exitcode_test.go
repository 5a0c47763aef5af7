package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exitCode is the one place errors become exit codes: an error keeps the
// code it carries through wrapping and hints; one without a code is a
// usage error before the command ran and a harness error after.
func TestExitCodeMapping(t *testing.T) {
	base := errors.New("boom")
	for _, c := range []struct {
		name string
		err  error
		ran  bool
		want int
	}{
		{"nil", nil, true, ExitOK},
		{"cobra's own, before the command", base, false, ExitInvalid},
		{"the command's own, uncoded", base, true, ExitError},
		{"invalid input", invalidf("bad"), true, ExitInvalid},
		{"harness", harnessf("broke"), false, ExitError},
		{"a verdict", verdictExit("FAIL"), true, ExitFail},
		{"INCONCLUSIVE", verdictExit("INCONCLUSIVE"), true, ExitInconclusive},
		{"ERROR", verdictExit("ERROR"), true, ExitError},
		{"not ready", withCode(ExitNotReady, ""), true, ExitNotReady},
		{"wrapped", fmt.Errorf("context: %w", invalidf("bad")), true, ExitInvalid},
		{"a hint keeps the code", withHint(invalidf("bad"), "do this"), true, ExitInvalid},
		{"withExitCode keeps an existing code", withExitCode(invalidf("bad"), ExitError), true, ExitInvalid},
	} {
		if got := exitCode(c.err, c.ran); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
	if verdictExit("PASS") != nil || verdictExit("XFAIL") != nil || verdictExit("n/a") != nil {
		t.Error("PASS, XFAIL and n/a are not errors")
	}
}

// The table of docs/commands.md: invalid input is 4, whatever the command.
func TestExitCodesInvalidInput(t *testing.T) {
	dir := writeTemp(t, map[string]string{"bad.yaml": "apiVersion: chaos/v1alpha1\nid: bad\n"})
	for _, args := range [][]string{
		{"run", filepath.Join(dir, "bad.yaml")},
		{"run", "--adapter", "locl", hello},
		{"run", filepath.Join(dir, "none.yaml")},
		{"run", "--frob", hello},
		{"run"},
		{"preflight", filepath.Join(dir, "bad.yaml")},
		{"evaluate", filepath.Join(dir, "no-run")},
		{"report", filepath.Join(dir, "no-run")},
		{"evidence", dir},
		{"share", filepath.Join(dir, "no-run")},
		{"export", filepath.Join(dir, "no-run")},
		{"dashboard", filepath.Join(dir, "no-run")},
		{"stats", filepath.Join(dir, "no-runs")},
		{"stats", "--by", "colour", dir},
		{"validate", filepath.Join(dir, "bad.yaml")},
		{"show", "--dir", exps, "nope"},
		{"list", "--dir", filepath.Join(dir, "none")},
		{"adapters", "--show", "nope"},
		{"schema", "run"},
		{"cleanup", "not-a-run"},
		{"provision", "local"},
		{"build-image", "nope"},
		{"frob"},
	} {
		code, out, errs := chaos(t, args...)
		if code != ExitInvalid {
			t.Errorf("chaos %s: exit %d, want %d\nstdout %s\nstderr %s", strings.Join(args, " "), code, ExitInvalid, out, errs)
		}
		if !strings.HasPrefix(errs, "chaos: ") && !strings.Contains(errs, ":1:1: ") && !strings.HasPrefix(out, "invalid ") {
			t.Errorf("chaos %s: stderr does not start with chaos: \n%s", strings.Join(args, " "), errs)
		}
	}
}

// chaos preflight says not ready with 5, ready with 0.
func TestExitCodePreflight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs preflight checks")
	}
	x := "apiVersion: chaos/v1alpha1\nid: pf\ndefault-adapter: local\nworkloads:\n  - name: w\n    run: echo\nflow: w\npreflight:\n  - name: up\n    run: test -e \"$PF_FILE\"\n"
	dir := writeTemp(t, map[string]string{"pf.yaml": x})
	f := filepath.Join(dir, "pf.yaml")
	marker := filepath.Join(dir, "up")
	t.Setenv("PF_FILE", marker)
	code, out, errs := chaos(t, "preflight", f)
	if code != ExitNotReady || !strings.Contains(out, "  FAIL  preflight/up\n") || !strings.HasSuffix(out, "not ready\n") {
		t.Errorf("not ready: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = chaos(t, "preflight", f)
	if code != ExitOK || !strings.HasSuffix(out, "ready\n") {
		t.Errorf("ready: exit %d\n%s", code, out)
	}
}
