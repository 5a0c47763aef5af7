package campaign

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/chaos-harness/chaos/internal/stats"
)

// Group is a set of runs compared with another: a campaign, the runs under
// a path, or the runs of one build, adapter or experiment version.
type Group struct {
	Name    string
	Entries []stats.Entry
}

// Comparison is two groups side by side: A is before (the build with the
// bug), B after (the build with the fix).
type Comparison struct {
	A    GroupInfo `json:"a"`
	B    GroupInfo `json:"b"`
	Unit string    `json:"unit"`
	Rows []Row     `json:"rows"`
	// Quiet counts the checks that neither group hit, left out of Rows.
	Quiet int `json:"quiet"`
}

// GroupInfo describes one side.
type GroupInfo struct {
	Name    string `json:"name"`
	Runs    int    `json:"runs"`
	Decided int    `json:"decided"`
}

// Row compares one thing across the groups: the runs with a hit, a flaky
// expectation or a check.
type Row struct {
	Kind  string `json:"kind"` // runs, flaky, check
	Name  string `json:"name"`
	Issue string `json:"issue,omitempty"`
	A     Rate   `json:"a"`
	B     Rate   `json:"b"`
	// Diff is A's rate minus B's, with Newcombe's 95% interval.
	Diff   float64 `json:"diff"`
	DiffLo float64 `json:"diff_lo"`
	DiffHi float64 `json:"diff_hi"`
	// P is Fisher's exact test, two-sided.
	P float64 `json:"p"`
	// Sentence says it for a reviewer.
	Sentence string `json:"sentence"`
}

// MarshalJSON writes the numbers that do not exist (a side without
// chances has no difference and no p) as null: JSON has no NaN.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	num := func(f float64) *float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return &f
	}
	// Without a difference its interval (left at zero) means nothing either.
	lo, hi := num(r.DiffLo), num(r.DiffHi)
	if math.IsNaN(r.Diff) {
		lo, hi = nil, nil
	}
	return json.Marshal(struct {
		plain
		Diff   *float64 `json:"diff"`
		DiffLo *float64 `json:"diff_lo"`
		DiffHi *float64 `json:"diff_hi"`
		P      *float64 `json:"p"`
	}{plain(r), num(r.Diff), lo, hi, num(r.P)})
}

// Row kinds.
const (
	KindRuns  = "runs"
	KindFlaky = "flaky"
	KindCheck = "check"
)

// Compare compares A (before) with B (after). unit names a chance in the
// sentences ("starts"; default "chances").
func Compare(a, b Group, unit string) *Comparison {
	if unit == "" {
		unit = "chances"
	}
	sa, sb := Summarize(a.Entries), Summarize(b.Entries)
	c := &Comparison{Unit: unit,
		A: GroupInfo{Name: a.Name, Runs: sa.Runs, Decided: sa.Hits.Of},
		B: GroupInfo{Name: b.Name, Runs: sb.Runs, Decided: sb.Hits.Of}}
	c.Rows = append(c.Rows, newRow(KindRuns, "runs with a hit", "", sa.Hits, sb.Hits, "runs"))
	flakyA, flakyB := map[string]FlakyRate{}, map[string]FlakyRate{}
	var fkeys []string
	for _, f := range sa.Flaky {
		k := f.Check + "\x00" + f.Issue
		flakyA[k] = f
		fkeys = append(fkeys, k)
	}
	for _, f := range sb.Flaky {
		k := f.Check + "\x00" + f.Issue
		if _, ok := flakyA[k]; !ok {
			fkeys = append(fkeys, k)
		}
		flakyB[k] = f
	}
	sort.Strings(fkeys)
	for _, k := range fkeys {
		check, issue, _ := strings.Cut(k, "\x00")
		c.Rows = append(c.Rows, newRow(KindFlaky, check, issue, flakyA[k].Rate, flakyB[k].Rate, unit))
	}
	checksA, checksB := map[string]Rate{}, map[string]Rate{}
	var ckeys []string
	for _, r := range sa.Checks {
		checksA[r.Check] = r.Rate
		ckeys = append(ckeys, r.Check)
	}
	for _, r := range sb.Checks {
		if _, ok := checksA[r.Check]; !ok {
			ckeys = append(ckeys, r.Check)
		}
		checksB[r.Check] = r.Rate
	}
	sort.Strings(ckeys)
	for _, k := range ckeys {
		ra, rb := checksA[k], checksB[k]
		if ra.Hit == 0 && rb.Hit == 0 {
			c.Quiet++
			continue
		}
		c.Rows = append(c.Rows, newRow(KindCheck, k, "", ra, rb, unit))
	}
	return c
}

func newRow(kind, name, issue string, a, b Rate, unit string) Row {
	if a.Of > 0 {
		a = NewRate(a.Hit, a.Of)
	}
	if b.Of > 0 {
		b = NewRate(b.Hit, b.Of)
	}
	r := Row{Kind: kind, Name: name, Issue: issue, A: a, B: b, P: math.NaN(), Diff: math.NaN()}
	if a.Of > 0 && b.Of > 0 {
		r.Diff, r.DiffLo, r.DiffHi = stats.Diff(a.Hit, a.Of, b.Hit, b.Of, stats.Z(Confidence))
		r.P = stats.FisherExact(a.Hit, a.Of-a.Hit, b.Hit, b.Of-b.Hit)
	}
	r.Sentence = Sentence(a, b, r.P, unit)
	return r
}

// Sentence is one line a reviewer can paste: "7 of 248 starts vs 0 of 320
// (p = 0.0029): the fix is effective at the 1% level". A is before, B
// after. The level is the smaller of 1% and 5% that p is below.
func Sentence(a, b Rate, p float64, unit string) string {
	if a.Of == 0 || b.Of == 0 {
		return fmt.Sprintf("%d of %d %s vs %d of %d: nothing to compare (a side has no chance)", a.Hit, a.Of, unit, b.Hit, b.Of)
	}
	base := fmt.Sprintf("%d of %d %s vs %d of %d (p = %s)", a.Hit, a.Of, unit, b.Hit, b.Of, stats.FormatP(p))
	level := ""
	switch {
	case p < 0.01:
		level = "1%"
	case p < 0.05:
		level = "5%"
	}
	pa, pb := a.P(), b.P()
	switch {
	case level != "" && pb < pa:
		return base + ": the fix is effective at the " + level + " level"
	case level != "" && pb > pa:
		return base + ": the second hits more often, a regression at the " + level + " level"
	case a.Hit == 0 && b.Hit == 0:
		return base + ": neither hit"
	}
	s := base + ": not a significant difference at the 5% level"
	if pb < pa {
		if n, ok := stats.ChancesForZero(a.Hit, a.Of, 0.05); ok && n > b.Of {
			s += fmt.Sprintf(" (without a hit, %d %s would show a fix at 5%%)", n, unit)
		}
	}
	return s
}

// Print writes the comparison as a table and the sentences.
func (c *Comparison) Print(w io.Writer) {
	fmt.Fprintf(w, "A: %s: %d runs, %d decided\n", c.A.Name, c.A.Runs, c.A.Decided)
	fmt.Fprintf(w, "B: %s: %d runs, %d decided\n\n", c.B.Name, c.B.Runs, c.B.Decided)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tA\tB\tA − B (95% CI)\tFisher p\t")
	for _, r := range c.Rows {
		name := r.Name
		switch r.Kind {
		case KindFlaky:
			name = "flaky " + r.Name + " (" + r.Issue + ")"
		case KindCheck:
			name = "check " + r.Name
		}
		diff := "-"
		if !math.IsNaN(r.Diff) {
			diff = fmt.Sprintf("%s (%s to %s)", signedPct(r.Diff), signedPct(r.DiffLo), signedPct(r.DiffHi))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, rateCell(r.A), rateCell(r.B), diff, stats.FormatP(r.P))
	}
	tw.Flush()
	if c.Quiet > 0 {
		fmt.Fprintf(w, "(%d check%s hit in neither)\n", c.Quiet, plural(c.Quiet))
	}
	fmt.Fprintln(w)
	for _, r := range c.Rows {
		if r.Kind == KindCheck && c.hasFlaky(r.Name) {
			continue // said by its flaky row
		}
		label := r.Name
		if r.Issue != "" {
			label += " (" + r.Issue + ")"
		}
		fmt.Fprintf(w, "%s: %s\n", label, r.Sentence)
	}
}

func (c *Comparison) hasFlaky(check string) bool {
	for _, r := range c.Rows {
		if r.Kind == KindFlaky && r.Name == check {
			return true
		}
	}
	return false
}

func rateCell(r Rate) string {
	if r.Of == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d (%s)", r.Hit, r.Of, pct(r.P()))
}

func signedPct(x float64) string {
	if x > 0 {
		return "+" + stats.Percent(x)
	}
	if x < 0 {
		return "−" + stats.Percent(-x)
	}
	return "0%"
}

// Plan is how many chances (and runs) a second campaign needs to show a
// fix, from a first campaign's rate.
type Plan struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Issue string `json:"issue,omitempty"`
	A     Rate   `json:"a"`
	// PerRun is the first campaign's chances per decided run.
	PerRun float64     `json:"chances_per_run"`
	Needs  []PlanLevel `json:"needs"`
}

// PlanLevel is the need at one significance level.
type PlanLevel struct {
	Alpha   float64 `json:"alpha"`
	Chances int     `json:"chances"`
	Runs    int     `json:"runs"`
	OK      bool    `json:"ok"`
}

// PlanFix computes, for each thing a group hit (the runs, flaky
// expectations, checks), how many chances a second campaign needs to show
// a fix at each alpha: with no hit when rateB is 0, else with power power
// when its true rate is rateB.
func PlanFix(g Group, alphas []float64, rateB, power float64) []Plan {
	s := Summarize(g.Entries)
	var out []Plan
	add := func(kind, name, issue string, r Rate, runsHit int) {
		if r.Hit == 0 {
			return
		}
		p := Plan{Kind: kind, Name: name, Issue: issue, A: r}
		if s.Hits.Of > 0 {
			p.PerRun = float64(r.Of) / float64(s.Hits.Of)
		}
		for _, a := range alphas {
			n, ok := stats.ChancesForPower(r.Hit, r.Of, rateB, a, power)
			lv := PlanLevel{Alpha: a, Chances: n, OK: ok}
			if ok && p.PerRun > 0 {
				lv.Runs = int(math.Ceil(float64(n) / p.PerRun))
			}
			p.Needs = append(p.Needs, lv)
		}
		out = append(out, p)
	}
	add(KindRuns, "runs with a hit", "", s.Hits, s.Hits.Hit)
	flakyChecks := map[string]bool{}
	for _, f := range s.Flaky {
		add(KindFlaky, f.Check, f.Issue, f.Rate, f.Runs)
		flakyChecks[f.Check] = true
	}
	for _, c := range s.Checks {
		if !flakyChecks[c.Check] {
			add(KindCheck, c.Check, "", c.Rate, c.Runs)
		}
	}
	return out
}

// PrintPlans writes the plans.
func PrintPlans(w io.Writer, name string, plans []Plan, unit string, rateB, power float64) {
	if unit == "" {
		unit = "chances"
	}
	if len(plans) == 0 {
		fmt.Fprintf(w, "%s: nothing was hit, so no number of runs can show a fix\n", name)
		return
	}
	goal := "with no hit"
	if rateB > 0 {
		goal = fmt.Sprintf("at a true rate of %s, with %.0f%% power", stats.Percent(rateB), 100*power)
	}
	fmt.Fprintf(w, "%s: to show a fix, a second campaign needs (%s, Fisher's exact test):\n", name, goal)
	for _, p := range plans {
		label := p.Name
		if p.Issue != "" {
			label = "flaky " + p.Name + " (" + p.Issue + ")"
		} else if p.Kind == KindCheck {
			label = "check " + p.Name
		}
		u := unit
		if p.Kind == KindRuns {
			u = "runs"
		}
		var parts []string
		for _, lv := range p.Needs {
			if !lv.OK {
				parts = append(parts, fmt.Sprintf("at %s: out of reach", alphaText(lv.Alpha)))
				continue
			}
			s := fmt.Sprintf("at %s: %d %s", alphaText(lv.Alpha), lv.Chances, u)
			if p.Kind != KindRuns && lv.Runs > 0 {
				s += fmt.Sprintf(" (about %d runs)", lv.Runs)
			}
			parts = append(parts, s)
		}
		fmt.Fprintf(w, "  %s, %d of %d: %s\n", label, p.A.Hit, p.A.Of, strings.Join(parts, "; "))
	}
}

func alphaText(a float64) string { return fmt.Sprintf("%g%%", math.Round(a*1e6)/1e4) }
