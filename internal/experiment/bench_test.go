package experiment_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/experiment"
)

// manyKeys is an experiment whose env has n keys.
func manyKeys(n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: chaos/v1alpha1\nid: big\nenv:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  K%d: v%d\n", i, i)
	}
	b.WriteString("workloads:\n  - name: w\n    run: 'true'\nflow: w\n")
	return []byte(b.String())
}

// BenchmarkParseManyKeys: parsing is linear in the number of map keys
// (80 000 env keys took 26 s when it was quadratic).
func BenchmarkParseManyKeys(b *testing.B) {
	for _, n := range []int{1000, 10000, 80000} {
		data := manyKeys(n)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, ps := experiment.Parse("big.yaml", data); ps.Err() != nil {
					b.Fatal(ps)
				}
			}
		})
	}
}

// TestParseIsLinearInKeys: eight times the keys take well under 32 times
// as much CPU (a quadratic step would take 64 times). CPU time of the
// process, best of three, and the comparison made again before it fails:
// on a loaded machine wall time says more about the neighbours than about
// the parser.
func TestParseIsLinearInKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	cpuOf := func(n int) time.Duration {
		data := manyKeys(n)
		best := time.Hour
		for i := 0; i < 3; i++ {
			start := cpuTime(t)
			if _, ps := experiment.Parse("big.yaml", data); ps.Err() != nil {
				t.Fatal(ps)
			}
			best = min(best, cpuTime(t)-start)
		}
		return max(best, time.Microsecond)
	}
	var small, large time.Duration
	for try := 0; try < 3; try++ {
		small, large = cpuOf(2500), cpuOf(20000)
		if large <= 32*small {
			return
		}
	}
	t.Errorf("2 500 keys: %v of CPU; 20 000 keys: %v (%.0fx for 8x the keys)", small, large, float64(large)/float64(small))
}

// cpuTime is the CPU time the test process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A manifest over the size limit is refused with a clear error, before it
// is parsed.
func TestParseRefusesHugeManifest(t *testing.T) {
	data := manyKeys(300000) // about 5 MiB
	if len(data) <= 4<<20 {
		t.Fatalf("%d bytes is not over the limit", len(data))
	}
	_, ps := experiment.Parse("big.yaml", data)
	if ps.Err() == nil || !strings.Contains(ps.Error(), "big.yaml:1:1: the file is ") || !strings.Contains(ps.Error(), "a manifest is at most 4 MiB") {
		t.Errorf("got %v", ps)
	}
}
