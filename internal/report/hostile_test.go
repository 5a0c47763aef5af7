package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/runview"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const hostileExperiment = `apiVersion: chaos/v1alpha1
id: hostile
workloads:
  - name: w
    run: "true"
flow: w
`

// A timeline time far beyond any run (t = 1e300 once made the report grow
// to 23.7 GB) is refused with an error that names it, before it sizes
// anything.
func TestReportRefusesAbsurdTimes(t *testing.T) {
	for _, tv := range []string{"1e10", "1e12", "1e300", "-1e300"} {
		r := vt.New(t, "hostile", hostileExperiment, "")
		r.Started("hostile", "local").Instance("w", "w-0", vt.Code(0))
		r.Finished("PASS")
		r.Raw(`{"t": ` + tv + `, "ts": "2026-10-29T11:26:50.000000Z", "event": "operation.started", "operation": "x", "uses": "kill", "run": 1}`)
		d := r.Write()
		run, err := runview.Load(d.Root)
		if err == nil {
			var b bytes.Buffer
			err = Write(&b, run)
			if b.Len() > 2<<20 {
				t.Errorf("t=%s: a %d-byte page", tv, b.Len())
			}
		}
		if err == nil || !strings.Contains(err.Error(), "timeline.jsonl:") || !strings.Contains(err.Error(), "t = ") {
			t.Errorf("t=%s: got %v, want an error naming the line and t", tv, err)
		}
	}
}

// A log that is a symlink to a file outside the run directory is not put
// in the page; the page says it was refused.
func TestReportRefusesSymlinksOut(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-LINE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := vt.New(t, "hostile", hostileExperiment, "")
	r.Started("hostile", "local").Instance("w", "w-0", vt.Code(0))
	d := r.Finished("PASS").Write()
	for _, link := range []string{"logs/target.log", "workloads/w/instances/w-0/logs/process.log", "adapter.yaml"} {
		p := d.Path(link)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(secret, p); err != nil {
			t.Fatal(err)
		}
	}
	run, err := runview.Load(d.Root)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, run); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "TOP-SECRET-LINE") {
		t.Error("the report shows a file outside the run directory")
	}
	if !strings.Contains(b.String(), "logs/target.log") || !strings.Contains(b.String(), "leads outside") {
		t.Error("the report does not say which file it refused")
	}
}
