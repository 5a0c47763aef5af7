package campaign

import (
	"math"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
)

func nan() float64 { return math.NaN() }

// Summary is what a group of runs shows together. Only runs that decided
// (PASS, XFAIL, FAIL) are chances of anything.
type Summary struct {
	Runs     int            `json:"runs"`
	Verdicts map[string]int `json:"verdicts"`
	// Hits is the run-level rate: decided runs in which a check did not
	// hold.
	Hits Rate `json:"hits"`
	// Checks are the checks by reference (counter/exited-ok): on how many
	// instances of decided runs they decided, and on how many they did not
	// hold. Sorted by hits, then reference.
	Checks []CheckRate `json:"checks"`
	// Flaky are the flaky expectations' checks, as verdict.json's flaky
	// list counts them: the instances hit of the instances covered.
	Flaky []FlakyRate `json:"flaky,omitempty"`
}

// CheckRate is one check's hits of its chances.
type CheckRate struct {
	Check string `json:"check"`
	Rate
	// Runs is how many decided runs it hit in.
	Runs int `json:"runs"`
	// NA is how many instances it said n/a on: no chance, so not in Of.
	NA int `json:"na,omitempty"`
}

// FlakyRate is one flaky expectation's check, hits of chances.
type FlakyRate struct {
	Issue string `json:"issue"`
	Check string `json:"check"`
	Rate
	Runs int `json:"runs"`
}

// Summarize looks at entries together.
func Summarize(entries []stats.Entry) *Summary {
	s := &Summary{Verdicts: map[string]int{}}
	checks := map[string]*CheckRate{}
	flaky := map[string]*FlakyRate{}
	decided, hitRuns := 0, 0
	for _, e := range entries {
		s.Runs++
		s.Verdicts[e.Verdict]++
		if !Decided(e.Verdict) {
			continue
		}
		if NoChance(e) {
			for ref, t := range e.Checks {
				if t.NA > 0 {
					c := checks[ref]
					if c == nil {
						c = &CheckRate{Check: ref}
						checks[ref] = c
					}
					c.NA += t.NA
				}
			}
			continue
		}
		decided++
		hit := false
		for ref, t := range e.Checks {
			c := checks[ref]
			if c == nil {
				c = &CheckRate{Check: ref}
				checks[ref] = c
			}
			c.Hit += t.Hit
			c.Of += t.Of
			c.NA += t.NA
			if t.Hit > 0 {
				c.Runs++
				hit = true
			}
		}
		for _, f := range e.Flaky {
			k := f.Issue + "\x00" + f.Check
			r := flaky[k]
			if r == nil {
				r = &FlakyRate{Issue: f.Issue, Check: f.Check}
				flaky[k] = r
			}
			r.Hit += len(f.Instances)
			r.Of += f.Of
			if len(f.Instances) > 0 {
				r.Runs++
				hit = true
			}
		}
		if hit {
			hitRuns++
		}
	}
	s.Hits = NewRate(hitRuns, decided)
	for _, c := range checks {
		c.Rate = NewRate(c.Hit, c.Of)
		s.Checks = append(s.Checks, *c)
	}
	sort.Slice(s.Checks, func(i, j int) bool {
		a, b := s.Checks[i], s.Checks[j]
		if a.Hit != b.Hit {
			return a.Hit > b.Hit
		}
		return a.Check < b.Check
	})
	for _, f := range flaky {
		f.Rate = NewRate(f.Hit, f.Of)
		s.Flaky = append(s.Flaky, *f)
	}
	sort.Slice(s.Flaky, func(i, j int) bool {
		a, b := s.Flaky[i], s.Flaky[j]
		return a.Check+a.Issue < b.Check+b.Issue
	})
	return s
}

// NoChance says whether a run that decided was still no chance of
// anything: a check said n/a (a shell check's NotAChance exit) and none of
// the experiment's own checks (workload and experiment scope) decided, so
// the run neither passed nor failed. The adapter's checks say whether the
// harness left the machine clean, not whether the system had a chance. A
// run with some n/a checks and others that decided is a chance for those
// others.
func NoChance(e stats.Entry) bool {
	na := false
	for ref, t := range e.Checks {
		if t.Of > 0 && !strings.HasPrefix(ref, rundir.ScopeAdapter+"/") {
			return false
		}
		na = na || t.NA > 0
	}
	for _, f := range e.Flaky {
		if f.Of > 0 {
			return false
		}
	}
	return na
}

// EntryHit says whether a ledger entry is a hit: it decided and a check
// did not hold.
func EntryHit(e stats.Entry) bool {
	if !Decided(e.Verdict) || NoChance(e) {
		return false
	}
	for _, t := range e.Checks {
		if t.Hit > 0 {
			return true
		}
	}
	for _, f := range e.Flaky {
		if len(f.Instances) > 0 {
			return true
		}
	}
	return false
}

// Worst is the verdict that decides a campaign's exit code: the worst of
// its runs, ERROR > FAIL > INCONCLUSIVE > XFAIL > PASS (n/a counts as
// PASS), as a run's checks make its verdict.
func Worst(verdicts map[string]int) string {
	for _, v := range []string{rundir.VerdictError, rundir.VerdictFail, rundir.VerdictInconclusive, rundir.VerdictXFail, rundir.VerdictPass} {
		if verdicts[v] > 0 {
			return v
		}
	}
	for v, n := range verdicts {
		if n > 0 && v != rundir.VerdictNA {
			return rundir.VerdictError // a verdict no one knows
		}
	}
	return rundir.VerdictPass
}

// InstanceHits counts, per instance, the runs in which a check of that
// instance did not hold; other scopes (experiment, adapter) count by
// scope.
func InstanceHits(runs []Run) []Count {
	m := map[string]int{}
	for _, r := range runs {
		if !r.Hit {
			continue
		}
		seen := map[string]bool{}
		for _, id := range r.HitChecks {
			who, _, ok := strings.Cut(id, "/")
			if !ok || seen[who] {
				continue
			}
			seen[who] = true
			m[who]++
		}
	}
	return sortedCounts(m)
}

// Count is a name and how many.
type Count struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func sortedCounts(m map[string]int) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Durations are quantiles of the runs' wall times, in seconds.
type Durations struct {
	N                           int
	Min, Median, P90, Max, Mean float64
}

// RunDurations summarises the wall times of runs that ran.
func RunDurations(runs []Run) Durations {
	var xs []float64
	for _, r := range runs {
		if r.Wall > 0 {
			xs = append(xs, r.Wall)
		}
	}
	if len(xs) == 0 {
		return Durations{}
	}
	sort.Float64s(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	// Nearest rank.
	q := func(p float64) float64 { return xs[min(len(xs)-1, max(0, int(math.Ceil(p*float64(len(xs))))-1))] }
	return Durations{N: len(xs), Min: xs[0], Median: q(0.5), P90: q(0.9), Max: xs[len(xs)-1], Mean: sum / float64(len(xs))}
}
