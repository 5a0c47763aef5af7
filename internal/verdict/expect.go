package verdict

import (
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// cover is the expectation reference that covered a check result.
type cover struct {
	exp int    // index in x.Expectations, -1 when none
	ref string // the reference as written, e.g. counter/exited-ok
}

// add applies the expectations to r and appends it to the verdict.
func (ev *evaluator) add(r rundir.CheckResult) {
	if r.Result == "" {
		r.Result = rundir.ResultFail
		if r.OK {
			r.Result = rundir.ResultOK
		}
	}
	c := cover{exp: -1}
	// An error, an inconclusive or an n/a result says nothing about the
	// system, so no expectation covers it (nor counts it as a flaky chance).
	if r.Result != rundir.ResultError && r.Result != rundir.ResultInconclusive && r.Result != rundir.ResultNA {
		c = ev.coverOf(&r)
	}
	if c.exp >= 0 {
		e := &ev.x.Expectations[c.exp]
		kind := e.KindOrDefault()
		r.Expectation = &rundir.ExpectationRef{Issue: e.Issue, Kind: kind}
		switch {
		case !r.OK:
			r.Result = rundir.ResultXFail
		case kind == experiment.ExpectKnown:
			r.Result = rundir.ResultXPass
		default:
			r.Result = rundir.ResultOK
		}
	}
	ev.v.Checks = append(ev.v.Checks, r)
	ev.covers = append(ev.covers, c)
}

// coverOf finds the first expectation reference, in manifest order, that
// names r: workload/check (every instance), instance/check,
// experiment/check, adapter/check or preflight/check.
func (ev *evaluator) coverOf(r *rundir.CheckResult) cover {
	for ei := range ev.x.Expectations {
		for _, ref := range ev.x.Expectations[ei].Checks {
			if refMatches(ref, r) {
				return cover{exp: ei, ref: ref}
			}
		}
	}
	return cover{exp: -1}
}

func refMatches(ref string, r *rundir.CheckResult) bool {
	scope, name, ok := strings.Cut(ref, "/")
	if !ok || name != r.Check {
		return false
	}
	if r.Scope == rundir.ScopeWorkload {
		return scope == r.Workload || scope == r.Instance
	}
	return scope == r.Scope
}

// flakyHits records, for every reference of a flaky expectation that covered
// at least one check, which instances the check failed on and how many it
// covered.
func (ev *evaluator) flakyHits() []rundir.FlakyHit {
	var out []rundir.FlakyHit
	for ei := range ev.x.Expectations {
		e := &ev.x.Expectations[ei]
		if e.KindOrDefault() != experiment.ExpectFlaky {
			continue
		}
		seen := map[string]bool{}
		for _, ref := range e.Checks {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			hit := rundir.FlakyHit{Issue: e.Issue, Check: ref, Instances: []string{}}
			for i, c := range ev.covers {
				if c.exp != ei || c.ref != ref {
					continue
				}
				r := &ev.v.Checks[i]
				hit.Of++
				if r.Result == rundir.ResultXFail {
					where := r.Instance
					if where == "" {
						where = r.Scope
					}
					hit.Instances = append(hit.Instances, where)
				}
			}
			if hit.Of > 0 {
				out = append(out, hit)
			}
		}
	}
	return out
}
