package rundir

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// A campaign starts dozens of runs a second in one process: no two get the
// same id (with four hex digits drawn blindly, 5,000 draws in one second
// collide about 190 times).
func TestNewRunIDUniqueInAProcess(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 2, 14, 0, time.UTC)
	seen := map[string]bool{}
	for range 5000 {
		id := NewRunID(now)
		if !strings.HasPrefix(id, "20261201T130214Z-") || len(id) != len("20261201T130214Z-b91b") {
			t.Fatalf("run id %q", id)
		}
		if seen[id] {
			t.Fatalf("run id %s given out twice in one second", id)
		}
		seen[id] = true
	}
	// The next second starts afresh.
	if id := NewRunID(now.Add(time.Second)); !strings.HasPrefix(id, "20261201T130215Z-") {
		t.Fatalf("run id %q", id)
	}
}

// Two processes that draw the same id make the same directory at once:
// exactly one gets it, the other is told it exists.
func TestCreateRefusesARaceForOneDirectory(t *testing.T) {
	runs := t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = Create(runs, "x", "20261201T130214Z-b91b") })
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case !strings.Contains(err.Error(), "already exists"):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if made != 1 {
		t.Fatalf("%d of %d Creates of one directory succeeded, want 1", made, n)
	}
}
