package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// manyEnvKeys writes an experiment whose env has n keys.
func manyEnvKeys(t testing.TB, n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: chaos/v1alpha1\nid: big\nenv:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  K%d: v%d\n", i, i)
	}
	b.WriteString("workloads:\n  - name: w\n    run: 'true'\nflow: w\n")
	p := filepath.Join(t.TempDir(), fmt.Sprintf("keys-%d.yaml", n))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// BenchmarkValidateManyKeys: chaos validate of an experiment with many
// env keys, which took 26 s for 80 000 keys when telling an experiment
// from an adapter decoded the whole file into Go maps (yaml.v3 checks
// each key of a map against every other).
func BenchmarkValidateManyKeys(b *testing.B) {
	for _, n := range []int{1000, 10000, 80000} {
		file := manyEnvKeys(b, n)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s := &streams{out: io.Discard, err: io.Discard, st: &State{}}
			for i := 0; i < b.N; i++ {
				if !allValid(validateFile(s, file, "local", "", false, nil)) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// TestValidateIsLinearInKeys: eight times the keys take well under 32
// times as long (the quadratic step took 64 times).
func TestValidateIsLinearInKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	timeOf := func(n int) time.Duration {
		file := manyEnvKeys(t, n)
		s := &streams{out: io.Discard, err: io.Discard, st: &State{}}
		best := time.Hour
		for i := 0; i < 3; i++ {
			start := time.Now()
			if !allValid(validateFile(s, file, "local", "", false, nil)) {
				t.Fatal("invalid")
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := timeOf(2500), timeOf(20000)
	if large > 32*small {
		t.Errorf("2 500 keys: %v; 20 000 keys: %v (%.0fx for 8x the keys)", small, large, float64(large)/float64(small))
	}
}

// allValid is whether no result of validateFile is invalid.
func allValid(rs []validated) bool {
	for _, r := range rs {
		if r.json.Status == "invalid" {
			return false
		}
	}
	return len(rs) > 0
}
