package export

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/runview"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// A metrics file that is a symlink to a file outside the run directory is
// refused, with an error naming it, and nothing of that file is exported.
func TestExportRefusesMetricsLinkedOutside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "elsewhere.jsonl")
	scrape := `{"t":1,"ts":"2026-10-29T11:26:47Z","ok":true,"families":{"secret_total":{"type":"counter","samples":[{"labels":{"password":"hunter2"},"value":1}]}}}` + "\n"
	if err := os.WriteFile(outside, []byte(scrape), 0o644); err != nil {
		t.Fatal(err)
	}
	r := vt.New(t, "hostile", "apiVersion: chaos/v1alpha1\nid: hostile\nworkloads: [{name: w, run: 'true'}]\nflow: w\n", "")
	d := r.Started("hostile", "local").Finished("PASS").Write()
	if err := os.Symlink(outside, d.Path("system", "metrics", "gw.jsonl")); err != nil {
		t.Fatal(err)
	}
	run, err := runview.Load(d.Root)
	if err == nil {
		var b bytes.Buffer
		_, err = OpenMetrics(&b, []*runview.Run{run})
		if strings.Contains(b.String(), "hunter2") {
			t.Error("exported a metrics file from outside the run directory")
		}
	}
	if err == nil || !strings.Contains(err.Error(), "system/metrics/gw.jsonl") || !strings.Contains(err.Error(), "outside") {
		t.Errorf("got %v, want an error naming system/metrics/gw.jsonl as leading outside", err)
	}
}
