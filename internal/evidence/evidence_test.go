package evidence

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/runview"
)

// The share package's fixture is a real run: three counters, an etcd
// outage and twenty restarts.
const fixture = "../share/testdata/runs/20261130T115120Z-f540"

func TestEvidenceAroundEachFault(t *testing.T) {
	r, err := runview.Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"# Evidence: ", "Replay (the same seed", "## What did not hold", "## Faults", "operation.started", "seed: `"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// One section per application of every operation.
	if got, want := strings.Count(page, "\n## ")-2, len(r.Operations); got != want {
		t.Errorf("%d fault sections for %d operations", got, want)
	}
	// Lines are in time order within a section, and inside its window.
	for _, sec := range strings.Split(page, "\n## ")[3:] {
		last := -1.0
		for _, l := range strings.Split(sec, "\n") {
			var tm float64
			if _, err := fmtSscan(l, &tm); err != nil {
				continue
			}
			if tm < last {
				t.Fatalf("lines out of order in section:\n%s", sec)
			}
			last = tm
		}
	}
}

func TestWriteFileAndCommandPath(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, fixture, dir)
	r, err := runview.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, File)); err != nil {
		t.Fatal(err)
	}
}
