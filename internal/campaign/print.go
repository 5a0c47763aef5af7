package campaign

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// PrintSummary writes the campaign's result as chaos run --count ends:
// the runs by verdict, the hit rate with its interval, each check and
// flaky expectation that was hit, the run durations, then the worst
// verdict and the campaign directory.
func PrintSummary(w io.Writer, f *File, dir string) {
	fmt.Fprintf(w, "campaign %s: %d run%s, %s%s\n", f.ID, len(f.Runs), plural(len(f.Runs)), f.State, stopText(f.Stop))
	fmt.Fprintf(w, "  %s\n", VerdictCounts(f.Counts))
	s := Summarize(f.Entries())
	if s.Hits.Of > 0 {
		fmt.Fprintf(w, "  hits: %d of %d decided runs (%s, 95%% CI %s–%s)\n", s.Hits.Hit, s.Hits.Of, pct(s.Hits.P()), pct(s.Hits.Lo), pct(s.Hits.Hi))
	} else {
		fmt.Fprintln(w, "  hits: no run decided (PASS, XFAIL or FAIL)")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	shown := false
	for _, c := range s.Checks {
		if c.Hit == 0 {
			continue
		}
		if !shown {
			fmt.Fprintln(tw, "  check\thits\trate\t95% CI\t")
			shown = true
		}
		fmt.Fprintf(tw, "  %s\t%d of %d\t%s\t%s–%s\t\n", c.Check, c.Hit, c.Of, pct(c.P()), pct(c.Lo), pct(c.Hi))
	}
	for _, c := range s.Flaky {
		if !shown {
			fmt.Fprintln(tw, "  check\thits\trate\t95% CI\t")
			shown = true
		}
		fmt.Fprintf(tw, "  flaky %s (%s)\t%d of %d\t%s\t%s–%s\t\n", c.Check, c.Issue, c.Hit, c.Of, pct(c.P()), pct(c.Lo), pct(c.Hi))
	}
	tw.Flush()
	if d := RunDurations(f.Runs); d.N > 0 {
		fmt.Fprintf(w, "  run time: median %.2fs, 90th percentile %.2fs, max %.2fs", d.Median, d.P90, d.Max)
		if f.Seconds > 0 {
			fmt.Fprintf(w, "; %.1f runs a minute", float64(len(f.Runs))/f.Seconds*60)
		}
		fmt.Fprintln(w)
	}
	switch {
	case len(f.Runs) == 0:
		fmt.Fprintln(w, rundir.VerdictError)
	default:
		fmt.Fprintln(w, Worst(f.Counts))
	}
	fmt.Fprintln(w, dir)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
