package campaign

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
)

// entries makes runs of one check with the given hits of chances each.
func entries(prefix string, tallies ...[2]int) []stats.Entry {
	var out []stats.Entry
	for i, t := range tallies {
		v := rundir.VerdictPass
		inst := []string{}
		for range t[0] {
			inst = append(inst, "counter-x")
			v = rundir.VerdictXFail
		}
		out = append(out, stats.Entry{RunID: prefix + string(rune('a'+i)), Experiment: "sandbox-stop-start", Adapter: "openshell-docker", Verdict: v,
			Flaky:  []rundir.FlakyHit{{Issue: "NVIDIA/OpenShell#4981", Check: "counter/started-ok", Instances: inst, Of: t[1]}},
			Checks: map[string]stats.Tally{"counter/started-ok": {Hit: t[0], Of: t[1]}}})
	}
	return out
}

// fisherRef is Fisher's exact test summed over hypergeometric
// probabilities in exact rational arithmetic: the reference the float
// implementation is checked against.
func fisherRef(a, b, c, d int64) float64 {
	r1, c1, n := a+b, a+c, a+b+c+d
	prob := func(x int64) *big.Rat {
		num := new(big.Int).Mul(new(big.Int).Binomial(r1, x), new(big.Int).Binomial(n-r1, c1-x))
		return new(big.Rat).SetFrac(num, new(big.Int).Binomial(n, c1))
	}
	obs := prob(a)
	sum := new(big.Rat)
	for x := max(0, c1-(n-r1)); x <= min(r1, c1); x++ {
		if p := prob(x); p.Cmp(obs) <= 0 {
			sum.Add(sum, p)
		}
	}
	f, _ := sum.Float64()
	return f
}

// TestCompareTheSeedsStory: 7 of 248 starts (runs b144 and db22) against
// 0 of 320 (c592, a6f6) gives the issue's sentence.
func TestCompareTheSeedsStory(t *testing.T) {
	a := Group{Name: "main", Entries: entries("m", [2]int{5, 114}, [2]int{2, 134})}
	b := Group{Name: "main + #4983", Entries: entries("f", [2]int{0, 160}, [2]int{0, 160})}
	c := Compare(a, b, "starts")
	var flaky *Row
	for i := range c.Rows {
		if c.Rows[i].Kind == KindFlaky {
			flaky = &c.Rows[i]
		}
	}
	if flaky == nil || flaky.A.Hit != 7 || flaky.A.Of != 248 || flaky.B.Hit != 0 || flaky.B.Of != 320 {
		t.Fatalf("rows %+v", c.Rows)
	}
	if want := fisherRef(7, 241, 0, 320); math.Abs(flaky.P-want) > 1e-9 {
		t.Fatalf("p = %v, want %v", flaky.P, want)
	}
	if want := "7 of 248 starts vs 0 of 320 (p = 0.0029): the fix is effective at the 1% level"; flaky.Sentence != want {
		t.Fatalf("sentence %q\nwant     %q", flaky.Sentence, want)
	}
	if flaky.DiffLo <= 0 || flaky.DiffHi < flaky.Diff || !(flaky.Diff > 0.028 && flaky.Diff < 0.029) {
		t.Fatalf("difference %v [%v, %v]", flaky.Diff, flaky.DiffLo, flaky.DiffHi)
	}
	// A fix that only halves the rate is not shown by 320 starts.
	half := Group{Name: "half", Entries: entries("h", [2]int{2, 160}, [2]int{2, 160})}
	if s := Compare(a, half, "starts").Rows[1].Sentence; !strings.Contains(s, "not a significant difference at the 5% level") {
		t.Fatalf("half: %q", s)
	}
	// More hits after is a regression.
	if s := Compare(b, a, "starts").Rows[1].Sentence; !strings.Contains(s, "a regression at the 1% level") {
		t.Fatalf("reversed: %q", s)
	}
}

// TestPlanFix: from 7 of 248, a fixed build needs 146 starts without a
// hit to show the fix at 5%, 249 at 1%; at 124 starts a run, 2 and 3 runs.
func TestPlanFix(t *testing.T) {
	a := Group{Name: "main", Entries: entries("m", [2]int{5, 114}, [2]int{2, 134})}
	plans := PlanFix(a, []float64{0.05, 0.01}, 0, 0.8)
	var p *Plan
	for i := range plans {
		if plans[i].Kind == KindFlaky {
			p = &plans[i]
		}
	}
	if p == nil || len(p.Needs) != 2 || p.Needs[0].Chances != 146 || p.Needs[1].Chances != 249 || p.Needs[0].Runs != 2 || p.Needs[1].Runs != 3 {
		t.Fatalf("plans %+v", plans)
	}
}
