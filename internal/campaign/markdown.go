package campaign

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/chaos-harness/chaos/internal/markdown"
	"github.com/chaos-harness/chaos/internal/stats"
)

// ShareOptions shape a campaign's Markdown page.
type ShareOptions struct {
	// Unit names a chance ("starts"); default "chances".
	Unit string
	// PerRun lists each run of a campaign of at most this many runs on its
	// own row (the seeds' table has a row per run); 0 means 12.
	PerRun int
}

// primary is the check a campaign's table is about: the first flaky
// expectation's, else the check hit most.
func primary(files []*File) (ref, issue string) {
	var all []stats.Entry
	for _, f := range files {
		all = append(all, f.Entries()...)
	}
	s := Summarize(all)
	for _, f := range s.Flaky {
		return f.Check, f.Issue
	}
	if len(s.Checks) > 0 && s.Checks[0].Hit > 0 {
		return s.Checks[0].Check, ""
	}
	return "", ""
}

// tallyOf is one entry's hits of chances of the check ref (its flaky
// count when issue is set).
func tallyOf(e stats.Entry, ref, issue string) (hit, of int) {
	if issue != "" {
		for _, f := range e.Flaky {
			if f.Check == ref && f.Issue == issue {
				return len(f.Instances), f.Of
			}
		}
		return 0, 0
	}
	t := e.Checks[ref]
	return t.Hit, t.Of
}

// Markdown renders campaigns as a page for an issue or a pull request:
// for each campaign its verdicts and hit rate with the 95% interval, then
// the table of the seeds' story (a row per run, or per campaign when it has
// many runs: chances and hits of the check the campaigns are about), and,
// for two campaigns, the comparison sentence; for one, how many chances a
// second campaign needs to show a fix.
func Markdown(files []*File, o ShareOptions) []byte {
	if o.Unit == "" {
		o.Unit = "chances"
	}
	if o.PerRun <= 0 {
		o.PerRun = 12
	}
	var b bytes.Buffer
	title := files[0].Experiment.Title
	if title == "" {
		title = files[0].Experiment.ID
	}
	fmt.Fprintf(&b, "# %s\n\n", markdown.Inline(title))
	for _, f := range files {
		s := Summarize(f.Entries())
		fmt.Fprintf(&b, "- **%s**: %d runs of %s on %s (%s), %s", markdown.Inline(f.Name()), len(f.Runs), markdown.Code(f.Experiment.ID), markdown.Code(f.Adapter.ID), VerdictCounts(f.Counts), markdown.Inline(f.State))
		if s.Hits.Of > 0 {
			fmt.Fprintf(&b, "; %d of %d decided runs hit (%s, 95%% CI %s to %s)", s.Hits.Hit, s.Hits.Of, pct(s.Hits.P()), pct(s.Hits.Lo), pct(s.Hits.Hi))
		}
		fmt.Fprintf(&b, "; campaign %s", markdown.Code(f.ID))
		if f.Build.Git != "" {
			fmt.Fprintf(&b, ", experiment at %s", markdown.Code(f.Build.Git))
		}
		b.WriteString(".\n")
	}
	b.WriteString("\n")
	ref, issue := primary(files)
	if ref == "" {
		b.WriteString("No check was hit in any run.\n")
		return b.Bytes()
	}
	hitHead := "hits (" + markdown.Code(ref) + ")"
	if issue != "" {
		hitHead = "hits (" + markdown.Code(ref) + ", " + markdown.Cell(issue) + ")"
	}
	fmt.Fprintf(&b, "| campaign | %s | %s | rate | 95%% CI |\n| --- | ---: | ---: | ---: | --- |\n", markdown.Cell(o.Unit), hitHead)
	var totals []Rate
	for _, f := range files {
		th, to := 0, 0
		var rows []string
		for _, r := range f.Runs {
			if !Decided(r.Verdict) {
				continue
			}
			h, n := tallyOf(r.Entry, ref, issue)
			th += h
			to += n
			rows = append(rows, fmt.Sprintf("| %s, run %s | %d | %d | %s | |\n", markdown.Cell(f.Name()), markdown.Cell(shortRun(r.RunID)), n, h, stats.Rate(h, n)))
		}
		total := NewRate(th, to)
		totals = append(totals, total)
		if len(rows) > 1 && len(rows) <= o.PerRun {
			for _, row := range rows {
				b.WriteString(row)
			}
		}
		fmt.Fprintf(&b, "| **%s** (%d runs) | %d | %d | %s | %s to %s |\n", markdown.Cell(f.Name()), len(rows), to, th, stats.Rate(th, to), pct(total.Lo), pct(total.Hi))
	}
	b.WriteString("\n")
	switch len(files) {
	case 2:
		a, c := totals[0], totals[1]
		p := stats.FisherExact(a.Hit, a.Of-a.Hit, c.Hit, c.Of-c.Hit)
		fmt.Fprintf(&b, "%s vs %s: %s.\n", markdown.Inline(files[0].Name()), markdown.Inline(files[1].Name()), markdown.Inline(Sentence(a, c, p, o.Unit)))
		if a.Of > 0 && c.Of > 0 {
			d, lo, hi := stats.Diff(a.Hit, a.Of, c.Hit, c.Of, stats.Z(Confidence))
			fmt.Fprintf(&b, "The difference in rate is %s (95%% CI %s to %s, Newcombe); Fisher's exact test, two-sided.\n", signedPct(d), signedPct(lo), signedPct(hi))
		}
	case 1:
		a := totals[0]
		var need []string
		for _, alpha := range []float64{0.05, 0.01} {
			if n, ok := stats.ChancesForZero(a.Hit, a.Of, alpha); ok {
				need = append(need, fmt.Sprintf("%d %s at the %s level", n, markdown.Inline(o.Unit), alphaText(alpha)))
			}
		}
		if len(need) > 0 {
			fmt.Fprintf(&b, "To show a fix, a second campaign needs, without a hit, %s (Fisher's exact test).\n", strings.Join(need, ", or "))
		}
	}
	return b.Bytes()
}

// shortRun is a run id's last four hex digits, as the seeds' table names
// runs ("run db22").
func shortRun(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 && i+1 < len(id) {
		return id[i+1:]
	}
	return id
}
