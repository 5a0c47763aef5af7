package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// failure is a check that did not hold, at the top of the page: what it
// claims, what it found, and what the run shows around it.
type failure struct {
	ID, Result, Label, Class string
	// Known is a failure an expectation covers (xfail, flaky).
	Known              bool
	Issue, Kind        string
	Description        string
	Detail             string
	Artifact           string
	Causes             []cause
	Links              []logLink
	CheckAnchor, Where string
}

// cause is one thing the run shows about a failure, with a link that zooms
// every chart to it.
type cause struct {
	Text, Zoom string
}

// maxCauses bounds the causes listed under one failure.
const maxCauses = 8

// buildFailures lists the checks that did not hold, unexpected failures
// (FAIL, XPASS, ERROR, INCONCLUSIVE) first, then known ones, each with its
// description and what caused it: the faults that hit its instance, how
// the instance ended, the operations around an experiment check, the chart
// of a metric check's family.
func buildFailures(r *runview.Run, charts []*chart, span float64) []failure {
	if r.Verdict == nil {
		return nil
	}
	chartOf := map[string]string{}
	for _, c := range charts {
		if _, ok := chartOf[c.Family]; !ok {
			chartOf[c.Family] = c.ID
		}
	}
	var out []failure
	for i := range r.Verdict.Checks {
		c := &r.Verdict.Checks[i]
		if c.Result == rundir.ResultOK {
			continue
		}
		f := failure{ID: c.ID, Result: c.Result, Label: verdict.Label(c), Detail: clip(c.Detail, maxDetailShort*4), CheckAnchor: "check-" + c.ID}
		f.Known = c.Result == rundir.ResultXFail
		f.Class = "bad"
		if f.Known {
			f.Class = "known"
		}
		if c.Expectation != nil {
			f.Issue, f.Kind = c.Expectation.Issue, c.Expectation.Kind
		}
		if c.Artifact != "" && !strings.Contains(c.Artifact, "..") {
			f.Artifact = href(c.Artifact)
		}
		def := checkDef(r.Experiment, c)
		if def != nil {
			f.Description = strings.TrimSpace(def.Description)
			if f.Description == "" {
				f.Description = describe(def)
			}
		}
		f.Causes, f.Links = causes(r, c, def, chartOf, span)
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].Known && out[j].Known })
	return out
}

// checkDef finds a check's definition in the experiment (nil for adapter
// checks and when the experiment did not parse).
func checkDef(x *experiment.Experiment, c *rundir.CheckResult) *experiment.Check {
	if x == nil {
		return nil
	}
	switch c.Scope {
	case rundir.ScopeWorkload:
		w := x.Workload(c.Workload)
		if w == nil {
			if name, _, ok := experiment.SplitInstance(c.Instance); ok {
				w = x.Workload(name)
			}
		}
		if w != nil {
			for i := range w.Checks {
				if w.Checks[i].Name == c.Check {
					return &w.Checks[i]
				}
			}
		}
	case rundir.ScopeExperiment:
		for i := range x.Checks {
			if x.Checks[i].Name == c.Check {
				return &x.Checks[i]
			}
		}
	case rundir.ScopePreflight:
		for _, s := range x.Preflight {
			if s.Name == c.Check {
				return &experiment.Check{Name: s.Name, Description: s.Description}
			}
		}
	}
	return nil
}

// zoom is the address of a window of the run around [a, b], a little wider.
func zoom(a, b, span float64) string {
	pad := math.Max((b-a)*0.5, 2)
	a, b = math.Max(0, a-pad), math.Min(span, b+pad)
	if b <= a {
		b = math.Min(span, a+1)
	}
	return fmt.Sprintf("#t=%s-%s", num(a, 3), num(b, 3))
}

// causes are what the run shows about a check that did not hold.
func causes(r *runview.Run, c *rundir.CheckResult, def *experiment.Check, chartOf map[string]string, span float64) (out []cause, links []logLink) {
	add := func(text string, a, b float64) {
		if len(out) < maxCauses {
			out = append(out, cause{Text: text, Zoom: zoom(a, b, span)})
		}
	}
	opText := func(op runview.OpRun) string {
		s := fmt.Sprintf("%s (%s", op.Name, op.Uses)
		if op.Target != "" {
			s += " on " + op.Target
		}
		s += fmt.Sprintf(", run %d) at %s", op.Run, secs(op.Start))
		if op.End > op.Start {
			s += " to " + secs(op.End)
		}
		return s
	}
	if c.Instance != "" {
		var in *runview.Instance
		for i := range r.Instances {
			if r.Instances[i].Name == c.Instance {
				in = &r.Instances[i]
			}
		}
		end := r.End
		if in != nil && len(in.Segments) > 0 {
			end = in.Segments[len(in.Segments)-1].Start
		}
		// The faults that hit the instance, else (a target's outage, a
		// gateway's kill) the faults while it ran; the last ones before it
		// ended are the suspects, so those are listed.
		var hits []runview.OpRun
		for _, op := range r.Operations {
			for _, tgt := range op.Targets {
				if tgt == c.Instance && op.Start <= end {
					hits = append(hits, op)
				}
			}
		}
		verb := " hit " + c.Instance
		if len(hits) == 0 {
			verb = ", while " + c.Instance + " ran"
			for _, op := range r.Operations {
				if op.Start <= end && experiment.IsFault(op.Uses) {
					hits = append(hits, op)
				}
			}
		}
		const lastFaults = maxCauses - 2
		if n := len(hits) - lastFaults; n > 0 {
			out = append(out, cause{Text: fmt.Sprintf("%d earlier fault(s)%s; the last %d before it ended:", n, verb, lastFaults)})
			hits = hits[n:]
		}
		for _, op := range hits {
			add("fault "+opText(op)+verb, op.Start, op.End)
		}
		if in != nil && len(in.Segments) > 0 {
			last := in.Segments[len(in.Segments)-1]
			state := last.State
			if last.Reason != "" {
				state += " (" + last.Reason + ")"
			}
			text := fmt.Sprintf("%s ended %s at %s", c.Instance, state, secs(last.Start))
			if last.State != "Succeeded" && last.State != "Failed" {
				text = fmt.Sprintf("%s was %s from %s to the end of the run", c.Instance, state, secs(last.Start))
			}
			if in.ExitCode != nil {
				text += fmt.Sprintf(", exit code %d", *in.ExitCode)
			} else {
				text += ", no exit code recorded"
			}
			add(text, last.Start, last.Start)
		}
		for _, f := range []string{"logs/process.log", "logs/container.log", "output/.chaos/attempts"} {
			rel := "workloads/" + c.Workload + "/instances/" + c.Instance + "/" + f
			if c.Workload != "" && r.Exists(rel) {
				links = append(links, logLink{Href: href(rel), Name: rel})
			}
		}
	} else if c.Scope == rundir.ScopeExperiment || c.Scope == rundir.ScopeAdapter {
		for _, op := range r.Operations {
			add("operation "+opText(op), op.Start, op.End)
		}
	}
	if def != nil && def.Kind == experiment.CheckEvent && def.Event != "" {
		n := 0
		for _, e := range r.Events {
			if e.Name == def.Event && n < 3 {
				n++
				add(fmt.Sprintf("event %s at %s", e.Name, secs(e.T)), e.T, e.T)
			}
		}
		if n == 0 {
			out = append(out, cause{Text: "the timeline has no " + def.Event + " event"})
		}
	}
	if def != nil && def.Family != "" {
		if id, ok := chartOf[def.Family]; ok {
			links = append(links, logLink{Href: "#" + id, Name: "chart of " + def.Family})
		}
	}
	if c.Scope == rundir.ScopePreflight {
		links = append(links, logLink{Href: "timeline.jsonl", Name: "timeline.jsonl (check.finished)"})
	}
	return out, links
}

// describe says what a check without a description of its own claims.
func describe(c *experiment.Check) string {
	switch c.Kind {
	case experiment.CheckExitCode:
		want := 0
		if c.Equals != nil {
			want = *c.Equals
		}
		return fmt.Sprintf("The script exited with code %d.", want)
	case experiment.CheckEvent:
		return "The timeline has the " + c.Event + " events the check asks for."
	case experiment.CheckShell:
		return "A script decides: it exits 0 when the claim holds."
	case experiment.CheckMetric:
		return "The metric " + c.Family + " holds the values the check asks for."
	case experiment.CheckStall:
		return "The instance kept making progress."
	}
	return ""
}
