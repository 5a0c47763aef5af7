package bigrun

import (
	"os"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// TestWrite writes a small run and reads its timeline back. With BIGRUN_DIR
// set it writes the full-size run there instead (scripts/bench.sh).
func TestWrite(t *testing.T) {
	parent, sz := t.TempDir(), Size{Instances: 4, Applications: 50, Scrapes: 20, Span: 30}
	if d := os.Getenv("BIGRUN_DIR"); d != "" {
		parent, sz = d, Default
	}
	root, err := Write(parent, sz)
	if err != nil {
		t.Fatal(err)
	}
	events, err := rundir.ReadTimeline(root + "/timeline.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if want := 11*sz.Applications + 5*sz.Instances + 16; len(events) != want {
		t.Errorf("%d events, want %d", len(events), want)
	}
	scrapes, err := rundir.ReadScrapes(root + "/system/metrics/gateway.jsonl")
	if err != nil || len(scrapes) != sz.Scrapes || len(scrapes[0].Families) != 31 {
		t.Errorf("%d scrapes (%v), want %d of 31 families", len(scrapes), err, sz.Scrapes)
	}
	t.Logf("%s: %d events, %d scrapes", root, len(events), len(scrapes))
}
