package verdict_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// An adapter check with empty: passes on a present, empty file of the run
// directory; fails with the file's contents (the first 64 KiB of a large
// one), or "no capture" when it is missing; ends in error, without
// blocking, on a FIFO. It reads and runs nothing, so it is evaluated even
// when the run directory's scripts are refused.
func TestEmptyAdapterCheck(t *testing.T) {
	const xYAML = "apiVersion: chaos/v1alpha1\nid: e\nworkloads: [{name: w, run: 'true'}]\nflow: w\n"
	const aYAML = `apiVersion: chaos/v1alpha1
id: a
backend: process
checks:
  - name: nothing-left
    empty: system/left.txt
  - name: script
    run: exit 0
`
	big := strings.Repeat("1234 S sleep 1000\n", 5000)
	for _, tc := range []struct {
		name   string
		file   func(r *vt.Run, path string)
		result string
		says   []string
		not    string
	}{
		{"empty", func(r *vt.Run, p string) { r.File("system/left.txt", "") }, rundir.ResultOK, nil, ""},
		{"not empty", func(r *vt.Run, p string) { r.File("system/left.txt", "4242 S sleep 1000\n") }, rundir.ResultFail,
			[]string{"system/left.txt is not empty:\n4242 S sleep 1000"}, "(the first"},
		{"large", func(r *vt.Run, p string) { r.File("system/left.txt", big) }, rundir.ResultFail,
			[]string{"is not empty:\n1234 S", "(the first 64 KiB of 87.9 KiB)"}, ""},
		{"missing", func(r *vt.Run, p string) {}, rundir.ResultFail, []string{"no capture: system/left.txt is missing"}, ""},
		{"fifo", func(r *vt.Run, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, rundir.ResultError, []string{"system/left.txt is not a regular file"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, ps := experiment.Parse("e.yaml", []byte(xYAML))
			if ps.Err() != nil {
				t.Fatal(ps)
			}
			a, aps := adapter.Parse("a.yaml", []byte(aYAML))
			if aps.Err() != nil {
				t.Fatal(aps)
			}
			r := vt.New(t, "e", xYAML, aYAML)
			r.Started("e", "a").Finished("PASS")
			d := r.Write()
			tc.file(r, d.Path("system", "left.txt"))
			v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{Env: os.Environ(), RefuseAdapterChecks: true, Refusal: "refused"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]rundir.CheckResult{}
			for _, c := range v.Checks {
				got[c.ID] = c
			}
			c := got["adapter/nothing-left"]
			if c.Result != tc.result {
				t.Fatalf("result %q, want %q: %s", c.Result, tc.result, c.Detail)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Detail, s) {
					t.Errorf("detail %q does not say %q", c.Detail, s)
				}
			}
			if tc.not != "" && strings.Contains(c.Detail, tc.not) {
				t.Errorf("detail %q says %q", c.Detail, tc.not)
			}
			if s := got["adapter/script"]; s.Result != rundir.ResultError || s.Detail != "refused" {
				t.Errorf("the script check was not refused: %+v", s)
			}
		})
	}
}
