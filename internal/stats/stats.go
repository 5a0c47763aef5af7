// Package stats looks across many runs: which experiments pass how often,
// and how often a flaky check hits, per group (a build, an adapter), with a
// test of whether two groups really differ. It reads run directories only.
package stats

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Entry is one run, as the ledger keeps it.
type Entry struct {
	RunID      string            `json:"run_id"`
	Dir        string            `json:"dir"`
	Experiment string            `json:"experiment"`
	Version    int               `json:"version"`
	SHA256     string            `json:"sha256"`
	Adapter    string            `json:"adapter"`
	Verdict    string            `json:"verdict"`
	Seed       uint64            `json:"seed"`
	Git        string            `json:"git,omitempty"`
	Harness    string            `json:"harness,omitempty"`
	Started    string            `json:"started,omitempty"`
	Flaky      []rundir.FlakyHit `json:"flaky,omitempty"`
	// Checks tallies each check, by its reference (workload/check,
	// experiment/check, adapter/check): on how many instances it decided
	// (of) and on how many of those it did not hold (hit), whatever an
	// expectation says. Checks that errored or were inconclusive decided
	// nothing and are not counted, nor are preflight checks (they say
	// whether the system was there, not how it behaved).
	Checks map[string]Tally `json:"checks,omitempty"`
	// Seconds is the run's duration, from its start to its verdict.
	Seconds float64 `json:"seconds,omitempty"`
}

// Tally is one check's hits of its chances in one run.
type Tally struct {
	Hit int `json:"hit"`
	Of  int `json:"of"`
	// NA counts the instances on which the check said n/a (no chance).
	NA int `json:"na,omitempty"`
}

// CheckRef is a check result's reference across instances:
// <workload>/<check> for a workload's check, <scope>/<check> otherwise.
func CheckRef(c rundir.CheckResult) string {
	if c.Scope == rundir.ScopeWorkload && c.Workload != "" {
		return c.Workload + "/" + c.Check
	}
	if c.Scope != "" && c.Check != "" {
		return c.Scope + "/" + c.Check
	}
	return c.ID
}

// Tallies counts a verdict's decided checks by reference.
func Tallies(v *rundir.Verdict) map[string]Tally {
	var out map[string]Tally
	for _, c := range v.Checks {
		if c.Result == rundir.ResultError || c.Result == rundir.ResultInconclusive || c.Scope == rundir.ScopePreflight {
			continue
		}
		if out == nil {
			out = map[string]Tally{}
		}
		t := out[CheckRef(c)]
		if c.Result == rundir.ResultNA {
			// Said by the check itself: no chance, so not counted in Of.
			t.NA++
			out[CheckRef(c)] = t
			continue
		}
		t.Of++
		if !c.OK {
			t.Hit++
		}
		out[CheckRef(c)] = t
	}
	return out
}

// Read makes the ledger entry of one run directory.
func Read(root string) (Entry, error) {
	d := &rundir.Dir{Root: root}
	defer d.Close()
	var v rundir.Verdict
	if err := d.ReadJSONFile("verdict.json", &v); err != nil {
		return Entry{}, err
	}
	e := Entry{RunID: v.RunID, Dir: root, Experiment: v.Experiment.ID, Version: v.Experiment.Version, SHA256: v.Experiment.SHA256, Adapter: v.Adapter.ID, Verdict: v.Verdict, Flaky: v.Flaky, Checks: Tallies(&v)}
	var m rundir.Manifest
	if d.ReadJSONFile("manifest.json", &m) == nil {
		e.Seed, e.Harness = m.Seed, m.Harness.Version
		if e.RunID == "" {
			e.RunID = m.RunID
		}
		if !m.Started.IsZero() {
			e.Started = m.Started.UTC().Format("2006-01-02T15:04:05Z")
			if !v.Evaluated.IsZero() && v.Evaluated.After(m.Started) {
				e.Seconds = math.Round(v.Evaluated.Sub(m.Started).Seconds()*1000) / 1000
			}
		}
		e.Git = m.Git.Short()
	}
	if e.RunID == "" {
		e.RunID = filepath.Base(root)
	}
	return e, nil
}

// Collect finds every run directory (one with a verdict.json) under the
// given paths.
func Collect(paths []string) ([]Entry, error) {
	var out []Entry
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "evaluations" || d.Name() == "workloads" || d.Name() == "system" || d.Name() == "logs" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "verdict.json")); err == nil {
				e, err := Read(path)
				if rundir.IsEscape(err) {
					return err
				}
				if err == nil {
					out = append(out, e)
				}
				return filepath.SkipDir
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// Runs the ledgers remember whose directories are gone still count.
	seen := map[string]bool{}
	for _, e := range out {
		seen[e.RunID] = true
	}
	for _, p := range paths {
		ledgers, _ := filepath.Glob(filepath.Join(p, LedgerFile))
		if st, err := os.Stat(p); err == nil && !st.IsDir() && filepath.Base(p) == LedgerFile {
			ledgers = []string{p}
		}
		for _, l := range ledgers {
			entries, err := ReadLedger(l)
			if rundir.IsRefused(err) {
				return nil, err
			}
			for _, e := range entries {
				if !seen[e.RunID] {
					seen[e.RunID] = true
					out = append(out, e)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}

// GroupKey returns an entry's group for a --by key.
func GroupKey(e Entry, by string) string {
	switch by {
	case "git":
		if e.Git == "" {
			return "(no git)"
		}
		return e.Git
	case "adapter":
		return e.Adapter
	case "version":
		return fmt.Sprintf("v%d", e.Version)
	case "harness":
		return e.Harness
	case "experiment-sha":
		if len(e.SHA256) > 12 {
			return e.SHA256[:12]
		}
		return e.SHA256
	}
	return "all"
}

// Cell is one experiment on one adapter within one group.
type Cell struct {
	Experiment string         `json:"experiment"`
	Adapter    string         `json:"adapter"`
	Group      string         `json:"group"`
	Runs       int            `json:"runs"`
	Verdicts   map[string]int `json:"verdicts"`
}

// PassRate is the share of runs that were PASS or XFAIL.
func (c *Cell) PassRate() float64 {
	if c.Runs == 0 {
		return 0
	}
	return float64(c.Verdicts[rundir.VerdictPass]+c.Verdicts[rundir.VerdictXFail]) / float64(c.Runs)
}

// Hits is a flaky check's hit count over its chances in one group.
type Hits struct {
	Experiment string `json:"experiment"`
	Issue      string `json:"issue"`
	Check      string `json:"check"`
	Group      string `json:"group"`
	Hit        int    `json:"hit"`
	Of         int    `json:"of"`
	Runs       int    `json:"runs"`
}

// Summary is the result of looking across runs.
type Summary struct {
	By    string  `json:"by"`
	Cells []*Cell `json:"cells"`
	Hits  []*Hits `json:"hits,omitempty"`
	// Compare holds, for each flaky check seen in exactly two groups, the
	// two-sided Fisher exact test p-value of their hit rates.
	Compare []Comparison `json:"compare,omitempty"`
}

// Comparison tests whether a flaky check hits at different rates in two
// groups.
type Comparison struct {
	Experiment string  `json:"experiment"`
	Check      string  `json:"check"`
	A          *Hits   `json:"a"`
	B          *Hits   `json:"b"`
	P          float64 `json:"p"`
}

// Summarize groups entries by experiment, adapter and the --by key.
func Summarize(entries []Entry, by string) *Summary {
	s := &Summary{By: by}
	cells := map[string]*Cell{}
	hits := map[string]*Hits{}
	for _, e := range entries {
		g := GroupKey(e, by)
		k := e.Experiment + "\x00" + e.Adapter + "\x00" + g
		c := cells[k]
		if c == nil {
			c = &Cell{Experiment: e.Experiment, Adapter: e.Adapter, Group: g, Verdicts: map[string]int{}}
			cells[k] = c
			s.Cells = append(s.Cells, c)
		}
		c.Runs++
		c.Verdicts[e.Verdict]++
		for _, f := range e.Flaky {
			hk := e.Experiment + "\x00" + f.Check + "\x00" + g
			h := hits[hk]
			if h == nil {
				h = &Hits{Experiment: e.Experiment, Issue: f.Issue, Check: f.Check, Group: g}
				hits[hk] = h
				s.Hits = append(s.Hits, h)
			}
			h.Hit += len(f.Instances)
			h.Of += f.Of
			h.Runs++
		}
	}
	sort.Slice(s.Cells, func(i, j int) bool {
		a, b := s.Cells[i], s.Cells[j]
		return a.Experiment+a.Adapter+a.Group < b.Experiment+b.Adapter+b.Group
	})
	sort.Slice(s.Hits, func(i, j int) bool {
		a, b := s.Hits[i], s.Hits[j]
		return a.Experiment+a.Check+a.Group < b.Experiment+b.Check+b.Group
	})
	byCheck := map[string][]*Hits{}
	var order []string
	for _, h := range s.Hits {
		k := h.Experiment + "\x00" + h.Check
		if byCheck[k] == nil {
			order = append(order, k)
		}
		byCheck[k] = append(byCheck[k], h)
	}
	for _, k := range order {
		if hs := byCheck[k]; len(hs) == 2 {
			a, b := hs[0], hs[1]
			s.Compare = append(s.Compare, Comparison{Experiment: a.Experiment, Check: a.Check, A: a, B: b,
				P: FisherExact(a.Hit, a.Of-a.Hit, b.Hit, b.Of-b.Hit)})
		}
	}
	return s
}

// FisherExact is the two-sided p-value of Fisher's exact test on the 2×2
// table [[a, b], [c, d]]: the probability, with the margins fixed, of a
// table at most as likely as the one seen.
func FisherExact(a, b, c, d int) float64 {
	if a < 0 || b < 0 || c < 0 || d < 0 {
		return math.NaN()
	}
	r1, c1, n := a+b, a+c, a+b+c+d
	if n == 0 {
		return 1
	}
	logp := func(x int) float64 {
		return lchoose(r1, x) + lchoose(n-r1, c1-x) - lchoose(n, c1)
	}
	observed := logp(a)
	lo, hi := max(0, c1-(n-r1)), min(r1, c1)
	p := 0.0
	for x := lo; x <= hi; x++ {
		if lp := logp(x); lp <= observed+1e-7 {
			p += math.Exp(lp)
		}
	}
	return math.Min(1, p)
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// Print writes the summary as text tables.
func (s *Summary) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	group := "group (" + s.By + ")"
	fmt.Fprintf(tw, "experiment\tadapter\t%s\truns\tPASS\tXFAIL\tFAIL\tINCONCLUSIVE\tERROR\tpass rate\n", group)
	for _, c := range s.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f%%\n", c.Experiment, c.Adapter, c.Group, c.Runs,
			c.Verdicts[rundir.VerdictPass], c.Verdicts[rundir.VerdictXFail], c.Verdicts[rundir.VerdictFail], c.Verdicts[rundir.VerdictInconclusive], c.Verdicts[rundir.VerdictError], 100*c.PassRate())
	}
	tw.Flush()
	if len(s.Hits) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "flaky check\tissue\t%s\truns\thits\trate\n", group)
		for _, h := range s.Hits {
			rate := "-"
			if h.Of > 0 {
				rate = fmt.Sprintf("1 in %.0f", float64(h.Of)/math.Max(1, float64(h.Hit)))
				if h.Hit == 0 {
					rate = "0"
				}
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%s\t%d\t%d of %d\t%s\n", h.Experiment, h.Check, h.Issue, h.Group, h.Runs, h.Hit, h.Of, rate)
		}
		tw.Flush()
	}
	for _, c := range s.Compare {
		verdict := "not a significant difference"
		if c.P < 0.05 {
			verdict = "a significant difference (p < 0.05)"
		}
		fmt.Fprintf(w, "\n%s %s: %s %d of %d vs %s %d of %d: Fisher's exact test p = %.3g, %s\n",
			c.Experiment, c.Check, c.A.Group, c.A.Hit, c.A.Of, c.B.Group, c.B.Hit, c.B.Of, c.P, verdict)
	}
}

// LedgerFile is the ledger's name in a runs directory: one JSON line per
// run, appended when the run ends, so the history outlives deleted run
// directories.
const LedgerFile = "ledger.jsonl"

// Append adds one run to the ledger of runsDir. One write with O_APPEND,
// so runs ending together do not interleave their lines.
func Append(runsDir string, e Entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(runsDir, LedgerFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadLedger reads a ledger file; a torn line is skipped.
//
// A ledger is untrusted like a run directory: it is read only when it is a
// regular file of at most limits.MaxLedgerBytes, with at most
// limits.MaxLedgerRuns runs; a line whose numbers no run can have is
// skipped like a torn one.
func ReadLedger(path string) ([]Entry, error) {
	var out []Entry
	err := rundir.ScanFile(path, limits.MaxLedgerBytes, limits.MaxLineBytes, func(n int, b []byte) error {
		var e Entry
		if json.Unmarshal(b, &e) == nil && e.RunID != "" && e.plausible() {
			if len(out) == limits.MaxLedgerRuns {
				return &rundir.LimitError{Msg: fmt.Sprintf("%s:%d: more than %d runs, the most the harness reads from a ledger", path, n, limits.MaxLedgerRuns)}
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// plausible reports whether e's numbers are ones a run can have.
func (e *Entry) plausible() bool {
	if math.IsNaN(e.Seconds) || e.Seconds < 0 || e.Seconds > limits.MaxRunSeconds {
		return false
	}
	for _, t := range e.Checks {
		if t.Hit < 0 || t.NA < 0 || t.Of < t.Hit || t.Of > limits.MaxRunInstances {
			return false
		}
	}
	return true
}
