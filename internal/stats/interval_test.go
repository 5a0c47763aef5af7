package stats

import (
	"math"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestZ(t *testing.T) {
	if z := Z(0.95); !near(z, 1.959964, 1e-6) {
		t.Fatalf("Z(0.95) = %v", z)
	}
	if z := Z(0.99); !near(z, 2.575829, 1e-6) {
		t.Fatalf("Z(0.99) = %v", z)
	}
}

func TestWilson(t *testing.T) {
	z := Z(0.95)
	for _, tc := range []struct {
		hits, n int
		lo, hi  float64
	}{
		// Reference values computed with Python from the formula.
		{7, 248, 0.0137385, 0.0571055},
		{0, 320, 0, 0.0118622},
		{15, 300, 0.0305316, 0.0808470},
		{5, 5, 0.5655, 1},
	} {
		lo, hi := Wilson(tc.hits, tc.n, z)
		if !near(lo, tc.lo, 1e-4) || !near(hi, tc.hi, 1e-4) {
			t.Errorf("Wilson(%d, %d) = [%.6f, %.6f], want [%.6f, %.6f]", tc.hits, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
	if lo, hi := Wilson(0, 0, z); lo != 0 || hi != 1 {
		t.Errorf("Wilson(0, 0) = [%v, %v]", lo, hi)
	}
}

func TestDiffNewcombe(t *testing.T) {
	// Newcombe (1998), Statistics in Medicine 17:873, table II, example
	// (a): 56/70 − 48/80, method 10: 0.0524 to 0.3339.
	d, lo, hi := Diff(56, 70, 48, 80, Z(0.95))
	if !near(d, 0.2, 1e-9) || !near(lo, 0.0524, 1e-4) || !near(hi, 0.3339, 1e-4) {
		t.Fatalf("Diff = %.4f [%.4f, %.4f]", d, lo, hi)
	}
	// Example (h) there: 0/10 − 0/20: −0.1611 to 0.2775.
	d, lo, hi = Diff(0, 10, 0, 20, Z(0.95))
	if d != 0 || !near(lo, -0.1611, 1e-4) || !near(hi, 0.2775, 1e-4) {
		t.Fatalf("Diff(0/10, 0/20) = %.4f [%.4f, %.4f]", d, lo, hi)
	}
}

func TestChancesForZero(t *testing.T) {
	// From 7 hits in 248 starts, a fixed build needs 146 starts without a
	// hit to show the fix at 5%, 249 at 1% (Python, by scanning n).
	for _, tc := range []struct {
		alpha float64
		want  int
	}{{0.05, 146}, {0.01, 249}} {
		n, ok := ChancesForZero(7, 248, tc.alpha)
		if !ok || n != tc.want {
			t.Errorf("ChancesForZero(7, 248, %v) = %d, %v; want %d", tc.alpha, n, ok, tc.want)
		}
		// The search agrees with a plain scan.
		scan := 1
		for FisherExact(7, 241, 0, scan) > tc.alpha {
			scan++
		}
		if scan != n {
			t.Errorf("scan gives %d, search %d", scan, n)
		}
	}
	if _, ok := ChancesForZero(0, 100, 0.05); ok {
		t.Error("no hits in the first campaign: nothing can show a fix")
	}
}

func TestChancesForPower(t *testing.T) {
	// A fix that halves 1 in 20 (hits 15 of 300): the second campaign
	// needs more chances than for a perfect fix, and at the number found
	// the power is reached while one less falls short or stays near.
	zero, ok := ChancesForZero(15, 300, 0.05)
	if !ok {
		t.Fatal("no answer for a perfect fix")
	}
	n, ok := ChancesForPower(15, 300, 0.025, 0.05, 0.8)
	if !ok || n <= zero {
		t.Fatalf("ChancesForPower = %d, %v (perfect fix: %d)", n, ok, zero)
	}
	if p := Power(15, 300, 0.025, n, 0.05); p < 0.8 {
		t.Fatalf("power at %d = %v", n, p)
	}
	if _, ok := ChancesForPower(15, 300, 0.06, 0.05, 0.8); ok {
		t.Fatal("a rate above the first campaign's is no fix")
	}
}

func TestFormatP(t *testing.T) {
	for p, want := range map[float64]string{0.0028823: "0.0029", 5.1e-5: "5.1e-05", 1: "1", 0.4857: "0.49", 0.011833: "0.012"} {
		if got := FormatP(p); got != want {
			t.Errorf("FormatP(%v) = %q, want %q", p, got, want)
		}
	}
}

func TestTallies(t *testing.T) {
	v := &rundir.Verdict{Checks: []rundir.CheckResult{
		{ID: "counter-0/exited-ok", Scope: "workload", Workload: "counter", Instance: "counter-0", Check: "exited-ok", OK: true, Result: "ok"},
		{ID: "counter-1/exited-ok", Scope: "workload", Workload: "counter", Instance: "counter-1", Check: "exited-ok", OK: false, Result: "xfail"},
		{ID: "counter-2/exited-ok", Scope: "workload", Workload: "counter", Instance: "counter-2", Check: "exited-ok", OK: false, Result: "error"},
		{ID: "experiment/recovered", Scope: "experiment", Check: "recovered", OK: false, Result: "fail"},
		{ID: "adapter/quiet", Scope: "adapter", Check: "quiet", OK: false, Result: "inconclusive"},
		{ID: "preflight/up", Scope: "preflight", Check: "up", OK: false, Result: "fail"},
	}}
	got := Tallies(v)
	if len(got) != 2 || got["counter/exited-ok"] != (Tally{Hit: 1, Of: 2}) || got["experiment/recovered"] != (Tally{Hit: 1, Of: 1}) {
		t.Fatalf("Tallies = %+v", got)
	}
}
