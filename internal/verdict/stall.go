package verdict

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// ProgressFile is where the engine records, per instance, the size of each
// file a stall check watches: one JSON line {t, file, size} per sample.
const ProgressFile = "progress.jsonl"

type point struct {
	t, v float64
}

// stallCheck fails an instance whose evidence of progress stood still for
// longer than the limit while it was Running: a running status alone is
// not proof of life.
func (ev *evaluator) stallCheck(c *experiment.Check, workload, inst string) outcome {
	var pts []point
	var what string
	if c.File != "" {
		what = "file " + c.File
		rel := path.Join("workloads", workload, "instances", inst, ProgressFile)
		if _, err := ev.d.Stat(rel); err != nil {
			if rundir.IsEscape(err) {
				return outcome{err: err.Error(), detail: err.Error()}
			}
			return outcome{detail: fmt.Sprintf("no progress was recorded for %s (%s missing)", c.File, ProgressFile)}
		}
		err := ev.d.Lines(rel, limits.MaxJSONLBytes, limits.MaxLineBytes, func(_ int, b []byte) error {
			var p struct {
				T    float64 `json:"t"`
				File string  `json:"file"`
				Size float64 `json:"size"`
			}
			if json.Unmarshal(b, &p) == nil && p.File == c.File && rundir.CheckSeconds(p.T) == nil {
				pts = append(pts, point{p.T, p.Size})
			}
			return nil
		})
		if err != nil {
			return outcome{err: err.Error(), detail: err.Error()}
		}
	} else {
		what = "metric " + c.Family + formatLabels(expandLabels(c.Labels, inst, workload))
		scrapes, _, err := ev.scrapes(c.Source)
		if err != nil {
			return outcome{err: err.Error(), detail: err.Error()}
		}
		m, err := newLabelMatcher(c.Labels, inst, workload)
		if err != nil {
			return outcome{err: err.Error(), detail: err.Error()}
		}
		for _, s := range scrapes {
			if !s.OK {
				continue
			}
			ss := pick(s, c.Family, "", m)
			if len(ss) == 0 {
				continue
			}
			sum := 0.0
			for _, x := range ss {
				sum += x.value
			}
			pts = append(pts, point{s.T, sum})
		}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
	running := ev.runningIntervals(inst)
	if len(running) == 0 {
		return outcome{detail: fmt.Sprintf("%s was never Running, so it never showed progress", inst)}
	}
	stretches := running
	switch c.AfterReady {
	case "":
	case experiment.ReadyInstance:
		stretches = intersect(running, ev.instanceReadyIntervals(inst))
	default:
		stretches = intersect(running, ev.readyIntervals(c.AfterReady))
	}
	var paused [][2]float64
	for _, op := range c.ExceptDuring {
		paused = append(paused, ev.window(&experiment.Window{Operation: op})...)
	}
	limit := c.Limit.D().Seconds()
	worst, from, to := 0.0, 0.0, 0.0
	for _, iv := range stretches {
		// The value at the start of the stretch is the last one before it.
		prev, have := 0.0, false
		for _, p := range pts {
			if p.t <= iv[0] {
				prev, have = p.v, true
			}
		}
		last := iv[0]
		gap := func(end float64) {
			if g := counted(last, end, paused); g > worst {
				worst, from, to = g, last, end
			}
		}
		for _, p := range pts {
			if p.t <= iv[0] || p.t > iv[1] {
				continue
			}
			if !have || p.v > prev {
				gap(p.t)
				last = p.t
			}
			prev, have = p.v, true
		}
		gap(iv[1])
	}
	if worst > limit {
		while := "while " + inst + " was Running"
		switch c.AfterReady {
		case "":
		case experiment.ReadyInstance:
			while += " and ready"
		default:
			while += " and " + c.AfterReady + " was ready"
		}
		if len(paused) > 0 {
			if out := (to - from) - worst; out > 0 {
				while += fmt.Sprintf(", not counting %.1fs in windows of %s", out, strings.Join(c.ExceptDuring, ", "))
			}
		}
		return outcome{detail: fmt.Sprintf("%s did not advance for %.1fs (t=%.1fs to %.1fs) %s; the limit is %s", what, worst, from, to, while, c.Limit)}
	}
	return outcome{ok: true}
}

// counted is the time from a to b that lies outside every paused window:
// a stall's clock stops in a declared fault window and goes on after it.
func counted(a, b float64, paused [][2]float64) float64 {
	if b <= a {
		return 0
	}
	// Merge the windows that overlap [a, b] so overlapping ones are taken
	// out once.
	var in [][2]float64
	for _, w := range paused {
		lo, hi := math.Max(w[0], a), math.Min(w[1], b)
		if hi > lo {
			in = append(in, [2]float64{lo, hi})
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i][0] < in[j][0] })
	out, end := 0.0, a
	for _, w := range in {
		if w[1] <= end {
			continue
		}
		out += w[1] - math.Max(w[0], end)
		end = w[1]
	}
	return (b - a) - out
}

// intersect returns the parts of the stretches a that lie inside one of
// the stretches b, each a stretch of its own (b's starts start the clock
// over).
func intersect(a, b [][2]float64) [][2]float64 {
	var out [][2]float64
	for _, x := range a {
		for _, y := range b {
			lo, hi := math.Max(x[0], y[0]), math.Min(x[1], y[1])
			if hi > lo {
				out = append(out, [2]float64{lo, hi})
			}
		}
	}
	return out
}

// instanceReadyIntervals returns the [start, end] times an instance was
// ready by its own word: from each instance.ready (its workload's ready,
// once per start) until an operation acted on it or the next one. Before
// its first instance.ready it is not ready.
func (ev *evaluator) instanceReadyIntervals(inst string) [][2]float64 {
	var out [][2]float64
	readyFrom, end := -1.0, 0.0
	stop := func(t float64) {
		if readyFrom >= 0 && t > readyFrom {
			out = append(out, [2]float64{readyFrom, t})
		}
		readyFrom = -1
	}
	for _, e := range ev.events {
		end = math.Max(end, e.T)
		switch e.Name {
		case "instance.ready":
			if e.String("instance") == inst {
				stop(e.T)
				readyFrom = e.T
			}
		case "operation.started":
			if slices.Contains(stringList(e.Get("instances")), inst) {
				stop(e.T)
			}
		}
	}
	stop(end)
	return out
}

// faultsThatTakeDown are the built-in faults after which a named target is
// ready again only at its target.restarted; any other operation on it
// (freeze, a network fault, an adapter operation) ends with its own
// operation.reverted or operation.finished.
var faultsThatTakeDown = map[string]bool{
	experiment.FaultKill: true, experiment.FaultRestart: true, experiment.FaultRestartInPlace: true,
	experiment.FaultOutage: true, experiment.FaultCrashLoop: true,
}

// readyIntervals returns the [start, end] times a named target was ready,
// from the timeline alone: from its target.started (or the start of the run
// when the run did not start it) until an operation acted on it, and again
// from each target.restarted. Each restart starts a stretch of its own.
// An operation that holds the target until the end of the flow without a
// restart (a kill brought back at cleanup) leaves it not ready until then.
func (ev *evaluator) readyIntervals(target string) [][2]float64 {
	end := 0.0
	started := false
	for _, e := range ev.events {
		end = math.Max(end, e.T)
		if e.Name == "target.started" && e.String("target") == target {
			started = true
		}
	}
	var out [][2]float64
	readyFrom := -1.0
	if !started {
		readyFrom = 0
	}
	// down is why the target is not ready: "" (it is, or not yet started),
	// "restart" (waits for target.restarted) or an operation's name and run
	// (waits for that operation's end).
	down, downRun := "", ""
	stop := func(t float64) {
		if readyFrom >= 0 && t > readyFrom {
			out = append(out, [2]float64{readyFrom, t})
		}
		readyFrom = -1
	}
	for _, e := range ev.events {
		switch e.Name {
		case "target.started":
			if e.String("target") == target {
				stop(e.T)
				readyFrom, down = e.T, ""
			}
		case "target.restarted":
			if e.String("target") == target {
				stop(e.T)
				readyFrom, down = e.T, ""
			}
		case "target.stopped":
			if e.String("target") == target {
				stop(e.T)
				down = "stopped"
			}
		case "operation.started":
			if e.String("scope") != "target" || canonicalTarget(rundir.TargetText(e.Get("target"))) != target {
				continue
			}
			stop(e.T)
			if faultsThatTakeDown[e.String("uses")] {
				down = "restart"
			} else {
				down, downRun = e.String("operation"), e.String("run")
			}
		case "operation.reverted", "operation.finished":
			if down != "" && down != "restart" && down != "stopped" && e.String("operation") == down && e.String("run") == downRun {
				readyFrom, down = e.T, ""
			}
		}
	}
	stop(end)
	return out
}

// runningIntervals returns the [start, end] times the instance spent
// Running, from its instance.state events.
func (ev *evaluator) runningIntervals(inst string) [][2]float64 {
	var out [][2]float64
	start := -1.0
	end := 0.0
	for _, e := range ev.events {
		if e.T > end {
			end = e.T
		}
		if e.Name != "instance.state" || e.String("instance") != inst {
			continue
		}
		if e.String("state") == "Running" {
			if start < 0 {
				start = e.T
			}
			continue
		}
		if start >= 0 {
			out = append(out, [2]float64{start, e.T})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]float64{start, end})
	}
	return out
}
