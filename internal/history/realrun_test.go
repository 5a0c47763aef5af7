package history

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loadRun reads the histories saved from a real run in testdata/<name>/:
// one <instance>.jsonl (or .jsonl.gz) per instance.
func loadRun(t *testing.T, name string) *History {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", name, "*.jsonl*"))
	if len(files) == 0 {
		t.Fatalf("no histories in testdata/%s", name)
	}
	var evs []Event
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = fh
		if strings.HasSuffix(f, ".gz") {
			gz, err := gzip.NewReader(fh)
			if err != nil {
				t.Fatal(err)
			}
			r = gz
		}
		inst := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".gz"), ".jsonl")
		// The runs' clocks started around here; only differences matter.
		e, probs, untimed := Parse(r, inst, time.Unix(1796092000, 0))
		fh.Close()
		if len(probs) > 0 || untimed > 0 {
			t.Fatalf("%s: problems %v, %d untimed", f, probs, untimed)
		}
		evs = append(evs, e...)
	}
	return FromEvents(evs)
}

// Histories from real runs of the examples: what the checkers said then,
// they must say again.
func TestRealRuns(t *testing.T) {
	t.Run("redis durable: nothing lost", func(t *testing.T) {
		h := loadRun(t, "redis-durable")
		if len(h.Problems) > 0 {
			t.Fatalf("problems: %v", h.Problems)
		}
		check(t, CheckSet(h), Valid, []string{"1608 adds attempted, 1564 acknowledged", "recovered: 1 adds of unknown outcome are present: 1000579"})
	})
	t.Run("toy register with stale reads: not linearizable", func(t *testing.T) {
		r := CheckLinearizable(loadRun(t, "toy-register-stale-reads"), LinearOptions{Model: ModelRegister})
		check(t, r, Invalid, []string{"not linearizable on the register: 82 operations", "and cannot go on with: reader-1/0 read"})
		if len(r.Page) == 0 {
			t.Error("no counter-example page")
		}
	})
	t.Run("the writer alone is linearizable", func(t *testing.T) {
		h := loadRun(t, "toy-register-stale-reads")
		var w []Event
		for _, e := range h.Events {
			if e.Instance == "writer-0" {
				w = append(w, e)
			}
		}
		check(t, CheckLinearizable(FromEvents(w), LinearOptions{Model: ModelRegister}), Valid, []string{"linearizable: 23 operations of 1 processes"})
	})
	t.Run("set written by shell helpers", func(t *testing.T) {
		check(t, CheckSet(loadRun(t, "set-history-no-fault")), Valid, []string{"20 adds attempted, 20 acknowledged; the final read (reader-0/0 read (line 1, t="})
	})
}
