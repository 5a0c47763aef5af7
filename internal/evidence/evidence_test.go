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

// The windows start at the run's start at the earliest; around the etcd
// outage the page has the failed scrapes and etcd's own log lines; a known
// or flaky failure names its issue.
func TestEvidenceWindowScrapesLogsAndIssues(t *testing.T) {
	r, err := runview.Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "Everything recorded from -") {
		t.Error("a window starts before the run did")
	}
	if !strings.Contains(page, "Everything recorded from 0.000s to ") {
		t.Error("the first restart's window does not start at 0")
	}
	if !strings.Contains(page, "- `counter-0/exited-ok`: xfail (flaky: example/chaos#7): exit code 1, want 0") {
		t.Errorf("the flaky failure does not name its issue:\n%s", page[:min(len(page), 2000)])
	}
	sections := strings.Split(page, "\n## ")
	var outage string
	for _, s := range sections {
		if strings.HasPrefix(s, "etcd-down (outage), run 1") {
			outage = s
		}
	}
	if outage == "" {
		t.Fatal("no section for etcd-down")
	}
	for _, want := range []string{"metrics/etcd", "scrape failed: ", "log/etcd", "target.restarted"} {
		if !strings.Contains(outage, want) {
			t.Errorf("the etcd-down section lacks %q:\n%s", want, outage)
		}
	}
}
