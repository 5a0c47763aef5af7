package runview

import (
	"fmt"
	"math"
	"slices"
)

// Target states on the timeline.
const (
	// TargetHealthy: up and healthy (started by the run, or found so).
	TargetHealthy = "Healthy"
	// TargetDown: held down by a fault (killed, or an outage's hold).
	TargetDown = "Down"
	// TargetStarting: being started again, waiting for its health check.
	TargetStarting = "Starting"
	// TargetFrozen: stopped in place by a freeze.
	TargetFrozen = "Frozen"
	// TargetStopped: stopped by the run at its end.
	TargetStopped = "Stopped"
)

// TargetLife is a named target over the run: healthy, held down by a fault,
// starting again and waiting for its health check, frozen, stopped. Each
// Segment's Reason says which operation and what it did.
type TargetLife struct {
	Name     string
	Segments []Segment
	// Restarts are the times it was healthy again after a fault.
	Restarts []float64
}

// buildTargets reads the named targets' lives from the timeline: started
// (target.started), taken down by an operation on it (operation.started
// with scope target), held for an outage's duration, started again until
// target.restarted, frozen until the freeze is reverted, killed again by a
// crash loop (crash-loop.kill), stopped at the end (target.stopped).
func buildTargets(r *Run) []TargetLife {
	type state struct {
		life *TargetLife
		cur  string
		// held is when an outage's hold ends (the start begins).
		held float64
	}
	var order []string
	lives := map[string]*state{}
	get := func(name string) *state {
		st := lives[name]
		if st == nil {
			st = &state{life: &TargetLife{Name: name}, held: -1}
			lives[name] = st
			order = append(order, name)
		}
		return st
	}
	set := func(st *state, t float64, s, reason string) {
		l := st.life
		if n := len(l.Segments); n > 0 {
			last := &l.Segments[n-1]
			if last.End < 0 {
				last.End = t
			}
			if last.State == s && last.Reason == reason {
				last.End = -1
				return
			}
		}
		l.Segments = append(l.Segments, Segment{State: s, Reason: reason, Start: t, End: -1})
		st.cur = s
	}
	// A target found by a fault before it was ever started was up until
	// then (an external target).
	touch := func(name string) *state {
		st := get(name)
		if len(st.life.Segments) == 0 {
			set(st, 0, TargetHealthy, "up before the run acted on it")
		}
		return st
	}
	// advance applies what time alone does: an outage's hold ends.
	advance := func(t float64) {
		for _, name := range order {
			st := lives[name]
			if st.held >= 0 && st.held <= t && st.cur == TargetDown {
				set(st, st.held, TargetStarting, "started again after the hold, waiting for its health check")
				st.held = -1
			}
		}
	}
	for _, e := range r.Events {
		advance(e.T)
		switch e.Name {
		case "target.started":
			set(get(e.String("target")), e.T, TargetHealthy, "started by the run, healthy")
		case "target.restarted":
			st := touch(e.String("target"))
			set(st, e.T, TargetHealthy, "healthy again after "+e.String("operation"))
			st.held = -1
			st.life.Restarts = append(st.life.Restarts, e.T)
		case "target.stopped":
			set(touch(e.String("target")), e.T, TargetStopped, "stopped by the run")
		case "crash-loop.kill":
			st := touch(e.String("target"))
			set(st, e.T, TargetStarting, fmt.Sprintf("killed by %s (%s), starting again", e.String("operation"), e.String("phase")))
		case "operation.started":
			if e.String("scope") != "target" {
				continue
			}
			op, uses := e.String("operation"), e.String("uses")
			var d float64
			for _, o := range r.Operations {
				if o.Name == op && math.Abs(o.Start-e.T) < 1e-9 {
					d = o.Duration
				}
			}
			for _, name := range stringsOf(e.Get("instances")) {
				st := touch(name)
				switch uses {
				case "kill":
					set(st, e.T, TargetDown, "killed by "+op+"; brought back when the flow ends")
				case "outage":
					set(st, e.T, TargetDown, fmt.Sprintf("held down by %s for %s", op, secs(d)))
					st.held = e.T + d
				case "restart", "restart-in-place":
					set(st, e.T, TargetStarting, uses+" by "+op+": stopped, starting again, waiting for its health check")
				case "crash-loop":
					// Its crash-loop.kill events say when each kill came.
				case "freeze":
					set(st, e.T, TargetFrozen, "frozen by "+op)
				}
			}
		case "operation.reverted", "operation.finished":
			// A freeze ends when it is reverted.
			op := e.String("operation")
			for _, name := range order {
				st := lives[name]
				if st.cur != TargetFrozen || e.Name != "operation.reverted" {
					continue
				}
				if n := len(st.life.Segments); n > 0 && st.life.Segments[n-1].Reason == "frozen by "+op {
					set(st, e.T, TargetHealthy, "thawed")
				}
			}
		case "node.finished":
			// A killed target is brought back once the flow has ended.
			if e.String("node") != "flow" {
				continue
			}
			for _, name := range order {
				st := lives[name]
				if st.cur == TargetDown && st.held < 0 {
					set(st, e.T, TargetStarting, "started again at the end of the flow, waiting for its health check")
				}
			}
		}
	}
	advance(math.Inf(1))
	var out []TargetLife
	for _, name := range order {
		l := lives[name].life
		for i := range l.Segments {
			if l.Segments[i].End < 0 {
				l.Segments[i].End = math.Max(r.End, l.Segments[i].Start)
			}
		}
		out = append(out, *l)
	}
	return out
}

func stringsOf(v any) []string {
	var out []string
	switch x := v.(type) {
	case []any:
		for _, s := range x {
			if str, ok := s.(string); ok {
				out = append(out, str)
			}
		}
	case []string:
		out = slices.Clone(x)
	case string:
		out = []string{x}
	}
	return out
}

func secs(s float64) string {
	if s == math.Trunc(s) {
		return fmt.Sprintf("%.0fs", s)
	}
	return fmt.Sprintf("%gs", math.Round(s*1000)/1000)
}
