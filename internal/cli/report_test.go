package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const reportExperiment = `apiVersion: chaos/v1alpha1
id: hello-world
version: 1
workloads:
  - name: hello
    instances: 1
    run: echo "hello, world" > greeting
    checks:
      - {name: exited-ok, kind: exit-code, equals: 0}
flow: hello
`

const reportAdapter = `apiVersion: chaos/v1alpha1
id: eval-local
backend: process
`

func TestReportCommand(t *testing.T) {
	r := vt.New(t, "hello-world", reportExperiment, reportAdapter)
	r.Started("hello-world", "eval-local").Preflight("shell-runs", true, "")
	r.Instance("hello", "hello-0", vt.Code(0)).Output("hello", "hello-0", "greeting", "hello, world\n")
	r.Finished("PASS")
	d := r.Write()

	var out, errb strings.Builder
	code := mainTest([]string{"report", d.Root}, strings.NewReader(""), &out, &errb)
	if code != ExitOK {
		t.Fatalf("chaos report: exit %d, stderr:\n%s", code, errb.String())
	}
	want, _ := filepath.Abs(filepath.Join(d.Root, "report.html"))
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("chaos report printed %q, want %q", got, want)
	}
	page, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<!DOCTYPE html>", `id="timeline"`, "hello-0", "hello-world"} {
		if !strings.Contains(string(page), s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
}

func TestReportCommandNotARun(t *testing.T) {
	dir := t.TempDir()
	var out, errb strings.Builder
	code := mainTest([]string{"report", dir}, strings.NewReader(""), &out, &errb)
	if code != ExitInvalid {
		t.Errorf("chaos report on an empty directory: exit %d, want %d", code, ExitInvalid)
	}
	if msg := errb.String(); !strings.Contains(msg, dir+" is not a run directory: experiment.yaml is missing") {
		t.Errorf("stderr %q does not say why", msg)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err == nil {
		t.Error("report.html was written into a directory that is not a run")
	}
	if code := mainTest([]string{"report"}, strings.NewReader(""), &out, &errb); code != ExitInvalid {
		t.Errorf("chaos report with no RUN: exit %d, want %d", code, ExitInvalid)
	}
}
