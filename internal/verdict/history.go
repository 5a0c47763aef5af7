package verdict

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/elle"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// maxHistoryProblems is how many problems of one history become warnings.
const maxHistoryProblems = 5

// RunStart is when the run started on the wall clock, from the timeline:
// the ts of an event less its t. The zero time when the timeline is empty.
func RunStart(events []rundir.Event) time.Time {
	for _, e := range events {
		if !e.TS.IsZero() {
			return e.TS.Add(-time.Duration(e.T * float64(time.Second)))
		}
	}
	return time.Time{}
}

// FaultWindows lists when each operation acted: from operation.started to
// the operation.reverted or operation.finished of the same application, or
// to the end of the timeline.
func FaultWindows(events []rundir.Event) []history.Window {
	end := 0.0
	for _, e := range events {
		end = max(end, e.T)
	}
	var out []history.Window
	open := map[string]int{}
	for _, e := range events {
		key := e.String("operation") + "\x00" + e.String("run")
		switch e.Name {
		case "operation.started":
			open[key] = len(out)
			out = append(out, history.Window{Name: e.String("operation"), Start: e.T, End: end})
		case "operation.reverted", "operation.finished":
			if i, ok := open[key]; ok {
				out[i].End = e.T
				delete(open, key)
			}
		}
	}
	return out
}

// HistorySources lists the history files of the run's instances of the
// given workloads (every workload when none is given).
func HistorySources(d *rundir.Dir, events []rundir.Event, workloads []string) []history.Source {
	var out []history.Source
	seen := map[string]bool{}
	for _, e := range events {
		if e.Name != "instance.created" {
			continue
		}
		w, name := e.String("workload"), e.String("instance")
		if name == "" || seen[name] {
			continue
		}
		if w == "" {
			w, _, _ = experiment.SplitInstance(name)
		}
		if len(workloads) > 0 && !slices.Contains(workloads, w) {
			continue
		}
		seen[name] = true
		rel := path.Join("workloads", w, "instances", name, "output", history.File)
		out = append(out, history.Source{Instance: name, Name: rel, Open: func() (*os.File, error) { return d.Open(rel) }})
	}
	return out
}

// historyCheck runs a set, counter, queue, linearizable, list-append or
// rw-register check on the merged histories of its workloads.
func (ev *evaluator) historyCheck(c *experiment.Check, id string) outcome {
	srcs := HistorySources(ev.d, ev.events, c.Workloads)
	h, err := history.Load(ev.ctx, srcs, RunStart(ev.events))
	if err != nil {
		msg := fmt.Sprintf("reading histories: %v", err)
		return outcome{err: msg, detail: msg}
	}
	ev.historyWarnings(h)
	if len(h.Events) == 0 {
		what := "any workload"
		if len(c.Workloads) > 0 {
			what = strings.Join(c.Workloads, ", ")
		}
		return outcome{inconclusive: true, detail: fmt.Sprintf("no history: no instance of %s wrote $CHAOS_HISTORY (%s)", what, history.File)}
	}
	res, err := ev.decideHistory(func() *history.Result { return ev.runHistoryCheck(c, h) })
	if err != nil {
		msg := fmt.Sprintf("not decided: %v", err)
		return outcome{err: msg, detail: msg}
	}
	if res == nil {
		msg := fmt.Sprintf("unknown history check kind %q", c.Kind)
		return outcome{err: msg, detail: msg}
	}
	for _, w := range res.Warnings {
		ev.v.Warnings = append(ev.v.Warnings, fmt.Sprintf("check %s: %s", id, w))
	}
	o := outcome{ok: res.Outcome == history.Valid, detail: res.Detail(), findings: res.Findings}
	o.inconclusive = res.Outcome == history.Inconclusive
	if r := c.Requires; r != nil && res.Outcome == history.Valid {
		req := history.Requirements{FaultDuringOperations: r.FaultDuringOperations, OKAfterLastFault: r.OKAfterLastFault, MinOK: r.MinOK}
		cov := history.Measure(h, FaultWindows(ev.events))
		if unmet := cov.Unmet(req); len(unmet) > 0 {
			o.ok, o.inconclusive = false, true
			o.detail = joinLines("inconclusive: the run did not show what this check needs to count:\n  "+strings.Join(unmet, "\n  "), o.detail)
		} else {
			o.detail = joinLines(o.detail, fmt.Sprintf("requires met: %d operations open during %d fault(s), %d ok after the last fault", cov.Overlapping, cov.Faults, cov.OKAfterLastFault))
		}
	}
	if len(res.Page) > 0 {
		o.artifact = ev.writeArtifact(id, res.Page)
	}
	return o
}

// historyWarnings turns a history's problems into verdict warnings, once
// per instance and problem.
func (ev *evaluator) historyWarnings(h *history.History) {
	if ev.historyWarned == nil {
		ev.historyWarned = map[string]bool{}
	}
	per := map[string][]history.Problem{}
	var order []string
	for _, p := range h.Problems {
		if len(per[p.Instance]) == 0 {
			order = append(order, p.Instance)
		}
		per[p.Instance] = append(per[p.Instance], p)
	}
	for _, in := range order {
		if ev.historyWarned[in] {
			continue
		}
		ev.historyWarned[in] = true
		ps := per[in]
		ev.v.Warnings = append(ev.v.Warnings, fmt.Sprintf("history of %s: %d problem(s): %s", in, len(ps), strings.Join(history.ProblemSummary(ps, maxHistoryProblems), "; ")))
	}
	if h.Untimed > 0 && !ev.historyWarned["\x00untimed"] {
		ev.historyWarned["\x00untimed"] = true
		ev.v.Warnings = append(ev.v.Warnings, fmt.Sprintf("histories: %d line(s) carry no time (ts or t) and took the time of the line before", h.Untimed))
	}
}

// writeArtifact saves a checker's page in the run directory: checks/ for
// the run's verdict, evaluations/checks/ for chaos evaluate, so an
// evaluation never overwrites what the run left. It returns the path
// relative to the run directory, or "" when it could not be written.
func (ev *evaluator) writeArtifact(id string, page []byte) string {
	rel := filepath.Join("checks", strings.ReplaceAll(id, "/", ".")+".html")
	if ev.opt.By == ByEvaluate {
		rel = filepath.Join("evaluations", rel)
	}
	// Through the run directory's root: an evaluations/ or checks/ that
	// leads out of the run directory is refused, never written through.
	if ev.opt.RedactPage != nil {
		page = ev.opt.RedactPage(page)
	}
	if err := ev.d.WriteFile(rel, page); err != nil {
		ev.v.Warnings = append(ev.v.Warnings, fmt.Sprintf("check %s: cannot save its counter-example: %v", id, err))
		return ""
	}
	return filepath.ToSlash(rel)
}

// runHistoryCheck decides one history check; nil for an unknown kind.
func (ev *evaluator) runHistoryCheck(c *experiment.Check, h *history.History) *history.Result {
	var res *history.Result
	switch c.Kind {
	case experiment.CheckSet:
		res = history.CheckSet(h)
	case experiment.CheckCounter:
		res = history.CheckCounter(h)
	case experiment.CheckQueue:
		res = history.CheckQueue(h, c.AllowDuplicates)
	case experiment.CheckLinearizable:
		res = history.CheckLinearizable(h, history.LinearOptions{Model: c.Model, Initial: c.Initial, Timeout: ev.checkTimeout(c.Timeout.D())})
	case experiment.CheckListAppend, experiment.CheckRWRegister:
		res = elle.Check(h, elle.Options{Kind: c.Kind, Models: c.ConsistencyModels, Anomalies: c.Anomalies, Ctx: ev.ctx})
	}
	return res
}

// checkTimeout is a check's own time budget, held to Options.MaxCheckTime:
// a run directory read by chaos evaluate is untrusted, and its
// experiment.yaml must not choose how long the reader searches.
func (ev *evaluator) checkTimeout(own time.Duration) time.Duration {
	if m := ev.opt.MaxCheckTime; m > 0 && (own <= 0 || own > m) {
		return m
	}
	return own
}

// decideHistory runs a checker's search aside, so that the evaluation ends
// when its context does (Ctrl-C, SIGTERM) instead of when the search does;
// a search left behind ends by its own time budget.
func (ev *evaluator) decideHistory(decide func() *history.Result) (*history.Result, error) {
	if ev.ctx.Err() != nil {
		return nil, context.Cause(ev.ctx)
	}
	done := make(chan *history.Result, 1)
	go func() { done <- decide() }()
	select {
	case res := <-done:
		return res, nil
	case <-ev.ctx.Done():
		return nil, context.Cause(ev.ctx)
	}
}
