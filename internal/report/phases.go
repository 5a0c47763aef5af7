package report

import (
	"fmt"
	"math"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Bounds of what a timeline's phases draw (a hostile one may name a
// million preflight checks or lock waits): rows of preflight checks (the
// rest are summed up on one row), and marks on any one row (the rest are
// counted in its label's tooltip).
const (
	maxPreflightRows = 40
	maxPhaseMarks    = 200
)

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
//
// The rows come in the order they first appear; unshown counts, per row,
// the marks left out.
func runPhases(events []rundir.Event, end float64) (rows []string, marks []phaseMark, unshown map[string]int) {
	seen := map[string]bool{}
	row := func(name string) {
		if !seen[name] {
			seen[name] = true
			rows = append(rows, name)
		}
	}
	perRow := map[string]int{}
	unshown = map[string]int{}
	mark := func(m phaseMark) {
		row(m.Row)
		if perRow[m.Row] >= maxPhaseMarks {
			unshown[m.Row]++
			return
		}
		perRow[m.Row]++
		marks = append(marks, m)
	}
	// The checks past maxPreflightRows: one bar for all of them.
	const others = "other preflight checks"
	var more, moreFailed int
	moreS, moreE := math.Inf(1), math.Inf(-1)
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
				mark(phaseMark{Row: "run lock", S: lockAt, E: e.T, Fill: colPending, Tip: "waited for the run lock " + clip(str(e, "lock"), 200)})
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
			passed := e.Get("ok") == true
			if !seen[r] && checks >= maxPreflightRows {
				row(others)
				more++
				if !passed {
					moreFailed++
				}
				moreS, moreE = math.Min(moreS, s), math.Max(moreE, e.T)
				continue
			}
			if !seen[r] {
				checks++
			}
			word, fill := "passed", colSucceeded
			if !passed {
				word, fill = "FAILED", colRed
			}
			tip := "preflight check " + name + " " + word
			if d := str(e, "detail"); d != "" {
				tip += ": " + clip(d, 300)
			}
			mark(phaseMark{Row: r, S: s, E: e.T, Fill: fill, Tip: tip, Milestone: true, Failed: !passed})
		case "settle.started":
			settleAt = e.T
			settleFor, _ = time.ParseDuration(str(e, "duration"))
		case "settle.interrupted":
			if settleAt >= 0 {
				mark(phaseMark{Row: "settle", S: settleAt, E: e.T, Fill: colPending, Tip: "settle wait of " + settleFor.String()})
				mark(phaseMark{Row: "settle", S: e.T, E: e.T, Fill: colRed, Tip: "settle wait interrupted: " + clip(str(e, "reason"), 200), Milestone: true, Failed: true})
				settleAt = -1
			}
		case "settle.skipped":
			mark(phaseMark{Row: "settle", S: e.T, E: e.T, Fill: colCreated, Tip: "settle wait of " + clip(str(e, "duration"), 40) + " skipped: " + clip(str(e, "reason"), 200), Milestone: true})
		case "run.error", "flow.skipped", "run.aborted":
			what := map[string]string{"run.error": "error: " + str(e, "error"), "flow.skipped": "flow skipped: " + str(e, "reason"), "run.aborted": "aborted by " + str(e, "signal")}[e.Name]
			mark(phaseMark{Row: "run", S: e.T, E: e.T, Fill: colRed, Tip: clip(what, 300), Milestone: true, Failed: true})
		}
	}
	if settleAt >= 0 {
		// Settled to its end, or the timeline ends inside the wait.
		e := end
		if settleFor > 0 && settleAt+settleFor.Seconds() < end {
			e = settleAt + settleFor.Seconds()
		}
		mark(phaseMark{Row: "settle", S: settleAt, E: e, Fill: colPending, Tip: "settle wait of " + settleFor.String()})
	}
	if more > 0 {
		fill, tip := colSucceeded, fmt.Sprintf("%d more preflight checks, all passed", more)
		if moreFailed > 0 {
			fill, tip = colRed, fmt.Sprintf("%d more preflight checks, %d of them FAILED (timeline.jsonl has each)", more, moreFailed)
		}
		mark(phaseMark{Row: others, S: moreS, E: moreE, Fill: fill, Tip: tip, Milestone: true, Failed: moreFailed > 0})
	}
	return rows, marks, unshown
}
