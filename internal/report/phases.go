package report

import (
	"fmt"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// maxPreflightRows bounds the timeline rows of preflight checks; the rest
// share one row (a hostile timeline may name a million checks).
const maxPreflightRows = 40

// phaseMark is something the run did before or after its flow, to draw:
// a bar from S to E (a milestone when E is not after S) on row Row.
type phaseMark struct {
	Row       string
	S, E      float64
	Fill, Tip string
	Milestone bool
	Failed    bool
}

// runPhases reads the timeline for what a run does around its flow: the
// wait for the run lock, each preflight check, the settle wait, and the
// errors that ended the run early. An ERROR run (a preflight check that
// failed, a flow that never ran) has only these to show.
func runPhases(events []rundir.Event, end float64) (rows []string, marks []phaseMark) {
	seen := map[string]bool{}
	row := func(name string) {
		if !seen[name] {
			seen[name] = true
			rows = append(rows, name)
		}
	}
	str := func(e *rundir.Event, k string) string {
		if v := e.Get(k); v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	started := map[string]float64{} // preflight check -> when it started
	var lockAt, settleAt float64 = -1, -1
	var settleFor time.Duration
	checks := 0
	for i := range events {
		e := &events[i]
		switch e.Name {
		case "lock.waiting":
			lockAt = e.T
		case "lock.acquired":
			if lockAt >= 0 {
				row("run lock")
				marks = append(marks, phaseMark{Row: "run lock", S: lockAt, E: e.T, Fill: colPending, Tip: "waited for the run lock " + clip(str(e, "lock"), 200)})
				lockAt = -1
			}
		case "check.started", "check.finished":
			if str(e, "scope") != rundir.ScopePreflight {
				continue
			}
			name := clip(str(e, "check"), 120)
			if e.Name == "check.started" {
				started[name] = e.T
				continue
			}
			s, ok := started[name]
			if !ok {
				s = e.T
			}
			delete(started, name)
			r := "preflight " + name
			if !seen[r] {
				checks++
				if checks > maxPreflightRows {
					r = "other preflight checks"
				}
			}
			row(r)
			passed := e.Get("ok") == true
			word, fill := "passed", colSucceeded
			if !passed {
				word, fill = "FAILED", colRed
			}
			tip := "preflight check " + name + " " + word
			if d := str(e, "detail"); d != "" {
				tip += ": " + clip(d, 300)
			}
			marks = append(marks, phaseMark{Row: r, S: s, E: e.T, Fill: fill, Tip: tip, Milestone: true, Failed: !passed})
		case "settle.started":
			settleAt = e.T
			settleFor, _ = time.ParseDuration(str(e, "duration"))
		case "settle.interrupted":
			if settleAt >= 0 {
				row("settle")
				marks = append(marks, phaseMark{Row: "settle", S: settleAt, E: e.T, Fill: colPending, Tip: "settle wait of " + settleFor.String()})
				marks = append(marks, phaseMark{Row: "settle", S: e.T, E: e.T, Fill: colRed, Tip: "settle wait interrupted: " + clip(str(e, "reason"), 200), Milestone: true, Failed: true})
				settleAt = -1
			}
		case "settle.skipped":
			row("settle")
			marks = append(marks, phaseMark{Row: "settle", S: e.T, E: e.T, Fill: colCreated, Tip: "settle wait of " + clip(str(e, "duration"), 40) + " skipped: " + clip(str(e, "reason"), 200), Milestone: true})
		case "run.error", "flow.skipped", "run.aborted":
			row("run")
			what := map[string]string{"run.error": "error: " + str(e, "error"), "flow.skipped": "flow skipped: " + str(e, "reason"), "run.aborted": "aborted by " + str(e, "signal")}[e.Name]
			marks = append(marks, phaseMark{Row: "run", S: e.T, E: e.T, Fill: colRed, Tip: clip(what, 300), Milestone: true, Failed: true})
		}
	}
	if settleAt >= 0 {
		// Settled to its end, or the timeline ends inside the wait.
		e := end
		if settleFor > 0 && settleAt+settleFor.Seconds() < end {
			e = settleAt + settleFor.Seconds()
		}
		row("settle")
		marks = append(marks, phaseMark{Row: "settle", S: settleAt, E: e, Fill: colPending, Tip: "settle wait of " + settleFor.String()})
	}
	return rows, marks
}
