// Package share turns a run directory into a Markdown page that renders on
// GitHub: the title, the verdict, the hypothesis, a Mermaid Gantt chart of
// the flow and of every instance, and the check results as a table. It reads
// only the run (through runview), so a page can be made from a copy of a run
// directory anywhere.
package share

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/markdown"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// DefaultMaxInstances is how many instance sections a chart has before the
// rest are summarised in a line under it.
const DefaultMaxInstances = 12

// Options shape a page.
type Options struct {
	// MaxInstances is how many instances the chart draws; 0 draws all.
	// Instances that failed are drawn even past it. The others are named
	// in a line under the chart, never dropped silently.
	MaxInstances int
}

// Page renders the Markdown page of a run.
func Page(r *runview.Run, o Options) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", mdInline(r.Title()))
	b.WriteString(verdictLine(r) + "\n\n")
	if r.Experiment != nil && strings.TrimSpace(r.Experiment.Hypothesis) != "" {
		fmt.Fprintf(&b, "> %s\n\n", mdInline(oneParagraph(r.Experiment.Hypothesis)))
	}

	sel := Select(r, o.MaxInstances)
	if r.Verdict != nil && len(r.Verdict.Flaky) > 0 {
		for _, line := range flakyLines(r.Verdict) {
			b.WriteString(line + "\n")
		}
		b.WriteString("\n")
	}
	chart := BuildChart(r, sel.Shown)
	if chart.Empty() && len(sel.Rest) == 0 {
		b.WriteString("Nothing ran: the timeline has no flow node, operation or instance to chart.\n")
	} else {
		b.WriteString("```mermaid\n")
		b.WriteString(chart.String())
		b.WriteString("```\n\n")
		b.WriteString(legend(r, sel) + "\n")
		if len(sel.Rest) > 0 {
			b.WriteString("\n" + sel.Summary() + "\n")
		}
	}

	if r.Verdict != nil {
		b.WriteString("\n## Checks\n\n")
		b.WriteString(checkTable(r.Verdict))
		if len(r.Verdict.Errors) > 0 {
			b.WriteString("\n## Harness errors\n\n")
			for _, e := range r.Verdict.Errors {
				fmt.Fprintf(&b, "- %s\n", mdInline(oneParagraph(e)))
			}
		}
		if len(r.Verdict.Warnings) > 0 {
			b.WriteString("\n## Warnings\n\n")
			for _, e := range r.Verdict.Warnings {
				fmt.Fprintf(&b, "- %s\n", mdInline(oneParagraph(e)))
			}
		}
		if len(r.Verdict.NA) > 0 {
			b.WriteString("\n## Not applicable\n\n")
			for _, e := range r.Verdict.NA {
				fmt.Fprintf(&b, "- %s\n", mdInline(oneParagraph(e)))
			}
		}
	} else {
		b.WriteString("\nThe run has no verdict.json: it ended before its checks ran.\n")
	}
	return r.Redact.Bytes(b.Bytes())
}

// BuildChart makes the Gantt chart of r with a section for each of shown,
// in that order.
func BuildChart(r *runview.Run, shown []*runview.Instance) *Chart {
	res := resolutionOf(r.End)
	c := &Chart{
		Title: fmt.Sprintf("%s · %s · %s", r.ExperimentID(), r.RunID, r.VerdictText()),
		Res:   res,
		Span:  r.End,
		Flow:  flowTasks(r, res),
	}
	for i := range r.NamedTargets {
		l := &r.NamedTargets[i]
		c.Sections = append(c.Sections, Section{Name: "target " + l.Name, Tasks: targetTasks(l, res)})
	}
	for _, in := range shown {
		c.Sections = append(c.Sections, Section{Name: in.Name, Tasks: instanceTasks(in, res)})
	}
	return c
}

// Selection is which instances a chart draws.
type Selection struct {
	// Shown are drawn, in this order.
	Shown []*runview.Instance
	// Rest are not drawn; the summary line names them.
	Rest []*runview.Instance
	// Flaky is true when the chart draws only the instances a flaky
	// expectation hit.
	Flaky bool
}

// Select picks the instances to draw. When a flaky expectation hit some
// instances, only those (and any other instance that failed) are drawn,
// failed ones first. Past limit (0: no
// limit), failed instances are still drawn and the others are left to the
// summary line, in their order.
func Select(r *runview.Run, limit int) Selection {
	failed := failedInstances(r)
	var all []*runview.Instance
	for i := range r.Instances {
		all = append(all, &r.Instances[i])
	}
	var sel Selection
	base := all
	if hit := flakyHits(r); len(hit) > 0 {
		sel.Flaky = true
		base = nil
		for _, in := range all {
			// An instance that failed on its own, outside the flaky
			// expectation, is drawn too.
			if hit[in.Name] || failed[in.Name] {
				base = append(base, in)
			} else {
				sel.Rest = append(sel.Rest, in)
			}
		}
	}
	var shown, extra []*runview.Instance
	if limit <= 0 || len(base) <= limit {
		shown = base
	} else {
		room := limit
		for _, in := range base {
			if failed[in.Name] {
				room--
			}
		}
		for _, in := range base {
			switch {
			case failed[in.Name]:
				shown = append(shown, in)
			case room > 0:
				shown = append(shown, in)
				room--
			default:
				extra = append(extra, in)
			}
		}
	}
	if sel.Flaky || len(extra) > 0 {
		// Failed ones first, the rest in their order.
		sort.SliceStable(shown, func(i, j int) bool { return failRank(shown[i], failed) < failRank(shown[j], failed) })
	}
	sel.Shown = shown
	sel.Rest = append(sel.Rest, extra...)
	sortInstances(r, sel.Rest)
	return sel
}

// failRank orders instances that ended Failed first, then those that
// failed a check, then the rest.
func failRank(in *runview.Instance, failed map[string]bool) int {
	switch {
	case in.Final == "Failed":
		return 0
	case failed[in.Name]:
		return 1
	}
	return 2
}

// sortInstances puts instances back in the run's order.
func sortInstances(r *runview.Run, l []*runview.Instance) {
	pos := map[string]int{}
	for i := range r.Instances {
		pos[r.Instances[i].Name] = i
	}
	sort.SliceStable(l, func(i, j int) bool { return pos[l[i].Name] < pos[l[j].Name] })
}

// failedInstances are the instances that ended Failed or failed a check
// (whether or not an expectation covered it).
func failedInstances(r *runview.Run) map[string]bool {
	out := map[string]bool{}
	for _, in := range r.Instances {
		if in.Final == "Failed" {
			out[in.Name] = true
		}
	}
	if r.Verdict != nil {
		for _, c := range r.Verdict.Checks {
			if c.Instance != "" && !c.OK {
				out[c.Instance] = true
			}
		}
	}
	return out
}

// flakyHits are the instances of the run a flaky expectation hit.
func flakyHits(r *runview.Run) map[string]bool {
	if r.Verdict == nil {
		return nil
	}
	names := map[string]bool{}
	for _, in := range r.Instances {
		names[in.Name] = true
	}
	out := map[string]bool{}
	for _, f := range r.Verdict.Flaky {
		for _, in := range f.Instances {
			if names[in] {
				out[in] = true
			}
		}
	}
	return out
}

// Summary is the line that names the instances the chart leaves out, e.g.
// "and 5 more instances (all Succeeded): counter-7 … counter-11".
func (s Selection) Summary() string {
	if len(s.Rest) == 0 {
		return ""
	}
	n := len(s.Rest)
	noun := "instances"
	if n == 1 {
		noun = "instance"
	}
	what := fmt.Sprintf("%d more %s", n, noun)
	if s.Flaky {
		what = fmt.Sprintf("%d more %s, which the flaky expectation did not hit", n, noun)
	}
	return fmt.Sprintf("and %s (%s): %s", what, finalStates(s.Rest), nameRanges(s.Rest))
}

// finalStates says how the instances ended: "all Succeeded", or
// "3 Succeeded, 2 Failed" in order of first appearance.
func finalStates(l []*runview.Instance) string {
	var order []string
	count := map[string]int{}
	for _, in := range l {
		st := in.Final
		if st == "" {
			st = "no state"
		}
		if count[st] == 0 {
			order = append(order, st)
		}
		count[st]++
	}
	if len(order) == 1 {
		if len(l) == 1 {
			return order[0]
		}
		return "all " + order[0]
	}
	parts := make([]string, len(order))
	for i, st := range order {
		parts[i] = fmt.Sprintf("%d %s", count[st], st)
	}
	return strings.Join(parts, ", ")
}

// nameRanges names instances, runs of consecutive indexes of one workload
// as "first … last".
func nameRanges(l []*runview.Instance) string {
	var parts []string
	for i := 0; i < len(l); {
		j := i
		for j+1 < len(l) && l[j+1].Workload == l[i].Workload && l[j+1].Index == l[j].Index+1 && sameShape(l[j+1]) && sameShape(l[i]) {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, l[i].Name)
		case j == i+1:
			parts = append(parts, l[i].Name, l[j].Name)
		default:
			parts = append(parts, l[i].Name+" … "+l[j].Name)
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// sameShape is whether an instance is named <workload>-<index>, so a range
// of them reads right.
func sameShape(in *runview.Instance) bool {
	return in.Name == experiment.InstanceName(in.Workload, in.Index)
}

// legend explains the colours, and what the chart leaves out.
func legend(r *runview.Run, s Selection) string {
	l := "Green is Running, amber Pending, red Unknown or Failed; red bars in the flow section are faults."
	if len(r.NamedTargets) > 0 {
		l += " A target is green while healthy, red while a fault holds it down, amber while it starts again and waits for its health check."
	}
	if r.End < ShortRun {
		l += " Times are to the millisecond."
	}
	if s.Flaky {
		l += " Only the instances a flaky expectation hit, and any other that failed, are drawn; those that ended Failed first."
	} else if len(s.Rest) > 0 {
		l += " Instances that failed are drawn first."
	}
	return l
}

// verdictLine is the line under the title: verdict, experiment, run,
// duration, adapter and seed.
func verdictLine(r *runview.Run) string {
	parts := []string{"**" + mdInline(r.VerdictText()) + "**"}
	id := code(r.ExperimentID())
	if r.Experiment != nil && r.Experiment.Version > 0 {
		id += fmt.Sprintf(" (v%d)", r.Experiment.Version)
	}
	parts = append(parts, id, "run "+code(r.RunID), Duration(r.End))
	if r.Manifest != nil {
		if r.Manifest.Adapter.ID != "" {
			parts = append(parts, "adapter "+code(r.Manifest.Adapter.ID))
		}
		parts = append(parts, fmt.Sprintf("seed %d", r.Manifest.Seed))
	}
	if !r.Start.IsZero() {
		parts = append(parts, "started "+r.Start.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return strings.Join(parts, " · ")
}

// Duration formats seconds as the seeds do: "34s", "1m 50s", "1h 02m 10s".
func Duration(sec float64) string {
	s := seconds(sec)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm %02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh %02dm %02ds", s/3600, s/60%60, s%60)
}

// flakyLines say which instances each flaky expectation hit.
func flakyLines(v *rundir.Verdict) []string {
	var order []string
	by := map[string][]rundir.FlakyHit{}
	for _, f := range v.Flaky {
		if _, ok := by[f.Issue]; !ok {
			order = append(order, f.Issue)
		}
		by[f.Issue] = append(by[f.Issue], f)
	}
	var out []string
	for _, issue := range order {
		var parts []string
		for _, f := range by[issue] {
			hit := "no instance"
			if len(f.Instances) > 0 {
				hit = mdInline(strings.Join(f.Instances, ", "))
			}
			parts = append(parts, fmt.Sprintf("%s failed on %s (%d of %d)", code(f.Check), hit, len(f.Instances), f.Of))
		}
		out = append(out, fmt.Sprintf("Flaky, %s: %s.", mdInline(issue), strings.Join(parts, "; ")))
	}
	return out
}

// checkTable is the check results as a Markdown table.
func checkTable(v *rundir.Verdict) string {
	var b strings.Builder
	b.WriteString("| check | result | expectation | detail |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	for _, c := range v.Checks {
		exp := ""
		if c.Expectation != nil {
			exp = cell(c.Expectation.Issue)
			if c.Expectation.Kind != "" {
				exp += " (" + cell(c.Expectation.Kind) + ")"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(c.ID), resultLabel(&c), exp, cell(firstLine(c.Detail)))
	}
	return b.String()
}

// resultLabel is the console's label: ok, FAIL, xfail, flaky, XPASS, ERROR.
func resultLabel(c *rundir.CheckResult) string {
	switch c.Result {
	case rundir.ResultOK:
		return "ok"
	case rundir.ResultFail:
		return "**FAIL**"
	case rundir.ResultXFail:
		if c.Expectation != nil && c.Expectation.Kind == experiment.ExpectFlaky {
			return "flaky"
		}
		return "xfail"
	case rundir.ResultXPass:
		return "**XPASS**"
	case rundir.ResultError:
		return "**ERROR**"
	}
	return cell(strings.ToUpper(c.Result))
}

// firstLine is the first non-empty line of a detail, marked when more
// follow.
func firstLine(s string) string {
	lines := strings.Split(strings.ReplaceAll(strings.TrimSpace(s), "\r\n", "\n"), "\n")
	first := strings.TrimSpace(lines[0])
	if len(lines) > 1 {
		first += " …"
	}
	return first
}

// cell, code, mdInline and oneParagraph are package markdown's, the one
// escaping helper of the Markdown pages.
func cell(s string) string         { return markdown.Cell(s) }
func code(s string) string         { return markdown.Code(s) }
func mdInline(s string) string     { return markdown.Inline(s) }
func oneParagraph(s string) string { return markdown.Paragraph(s) }
