package hunt

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/stats"
)

// A step aimed at a signal (a generate node with after) lands a delay
// after the signal's line, and the hunt aims at windows of such delays
// rather than at one delay: the moment a step lands varies from run to run
// (the line's latency, the operation's own), so the window is what hits
// or misses. A candidate step's window is its Gap to its Max; each run of
// the candidate draws its delay from it.

// window is a range of delays, [lo, hi].
type window struct{ lo, hi experiment.Duration }

func (w window) String() string { return fmt.Sprintf("[%s,%s]", w.lo, w.hi) }

// Aiming: a hit's window reaches a thirty-second of the node's declared
// gap range to each side of the delay it drew (a window a sixteenth of the
// range: a race that random delays hit in 1-3% of runs fills a good part
// of it, so ten runs of it are unlikely to miss); narrowing stops at a
// hundredth of it (and at 2 ms): finer than the runs' own jitter helps
// nothing (a 3 s range narrows to 30 ms, about the jitter of a loaded
// machine). A time-based step's gap gets a window of a sixteenth of the
// range to each side (gapPad) and narrows to a fiftieth (gapNarrowest):
// its runs drift more.
const (
	aimPad       = 32
	gapPad       = 16
	narrowest    = 100
	gapNarrowest = 50
	leastWindow  = experiment.Duration(2 * time.Millisecond)
)

// generateAt is the experiment's generate node at path.
func (h *hunter) generateAt(path string) *experiment.Generate {
	var g *experiment.Generate
	h.o.Experiment.Flow.Walk(func(f *experiment.FlowNode) {
		if f.Path == path && f.Kind == experiment.FlowGenerate {
			g = f.Generate
		}
	})
	return g
}

// aimWindows gives each step of sc that is aimed at a signal a window
// around the delay it drew, within its node's gap range; false when no
// step is aimed at a signal.
func (h *hunter) aimWindows(sc []experiment.Schedule) ([]experiment.Schedule, bool) {
	out := clone(sc)
	windowed := false
	for i := range out {
		g := h.generateAt(out[i].Node)
		if out[i].Signal == "" || g == nil {
			continue
		}
		pad := wholeMs((g.Gap.Max - g.Gap.Min) / aimPad)
		if pad <= 0 {
			continue
		}
		for j := range out[i].Steps {
			st := &out[i].Steps[j]
			st.Gap, st.Max = max(g.Gap.Min, st.Gap-pad), min(g.Gap.Max, st.Gap+pad)
			windowed = true
		}
	}
	return out, windowed
}

// minWidth is the narrowest window narrowing makes for a step of the
// schedule at node: the node's gap range divided by div.
func (h *hunter) minWidth(node string, div experiment.Duration) experiment.Duration {
	if g := h.generateAt(node); g != nil {
		return max(leastWindow, wholeMs((g.Gap.Max-g.Gap.Min)/div))
	}
	return leastWindow
}

func wholeMs(d experiment.Duration) experiment.Duration {
	return experiment.Duration(time.Duration(d).Truncate(time.Millisecond))
}

func clone(sc []experiment.Schedule) []experiment.Schedule {
	out := slices.Clone(sc)
	for i := range out {
		out[i].Steps = slices.Clone(out[i].Steps)
	}
	return out
}

// mergeWindows joins two windowed schedules with the same steps whose
// windows overlap step by step into one whose windows cover both; false
// when they differ or a pair of windows is apart.
func mergeWindows(a, b []experiment.Schedule) ([]experiment.Schedule, bool) {
	if len(a) != len(b) {
		return nil, false
	}
	out := clone(a)
	for i := range a {
		if a[i].Node != b[i].Node || len(a[i].Steps) != len(b[i].Steps) {
			return nil, false
		}
		for j, x := range a[i].Steps {
			y := b[i].Steps[j]
			if x.Operation != y.Operation || x.Window() != y.Window() {
				return nil, false
			}
			if !x.Window() {
				if x.Gap != y.Gap {
					return nil, false
				}
				continue
			}
			if x.Max < y.Gap || y.Max < x.Gap {
				return nil, false
			}
			out[i].Steps[j].Gap, out[i].Steps[j].Max = min(x.Gap, y.Gap), max(x.Max, y.Max)
		}
	}
	return out, true
}

// inside names the candidate among aimed whose windows hold the delays
// the drawn schedules sc have ("" when none does).
func inside(aimed []*Candidate, sc []experiment.Schedule) string {
	for _, c := range aimed {
		if holdsDelays(c.Schedules, sc) {
			return c.ID
		}
	}
	return ""
}

func holdsDelays(win, sc []experiment.Schedule) bool {
	if len(win) != len(sc) {
		return false
	}
	for i := range win {
		if win[i].Node != sc[i].Node || len(win[i].Steps) != len(sc[i].Steps) {
			return false
		}
		for j, w := range win[i].Steps {
			d := sc[i].Steps[j]
			if w.Operation != d.Operation || !w.Window() && w.Gap != d.Gap || w.Window() && (d.Gap < w.Gap || d.Gap > w.Max) {
				return false
			}
		}
	}
	return true
}

func hasWindow(sc []experiment.Schedule) bool {
	for _, s := range sc {
		for _, st := range s.Steps {
			if st.Window() {
				return true
			}
		}
	}
	return false
}

// centres pins each window to its middle: what a reproducer runs.
func centres(sc []experiment.Schedule) []experiment.Schedule {
	out := clone(sc)
	for i := range out {
		for j := range out[i].Steps {
			if st := &out[i].Steps[j]; st.Window() {
				st.Gap, st.Max = wholeMs((st.Gap+st.Max)/2), 0
			}
		}
	}
	return out
}

// withWindow is sc with its flat step k's window set to w.
func withWindow(sc []experiment.Schedule, k int, w window) []experiment.Schedule {
	out := clone(sc)
	for i := range out {
		if k < len(out[i].Steps) {
			out[i].Steps[k].Gap, out[i].Steps[k].Max = w.lo, w.hi
			return out
		}
		k -= len(out[i].Steps)
	}
	return out
}

// parts are the narrower windows bisection tries for w: its left and
// right halves, then its middle half; none when w is no wider than least.
func parts(w window, least experiment.Duration) []window {
	width := w.hi - w.lo
	if width <= least || width < 2*experiment.Duration(time.Millisecond) {
		return nil
	}
	mid := w.lo + wholeMs(width/2)
	q := wholeMs(width / 4)
	return []window{{w.lo, mid}, {mid, w.hi}, {w.lo + q, w.hi - q}}
}

// bisect narrows w, delta debugging on the delay range: it tries the left
// and the right half (and, when neither holds, the middle half), keeps
// the better part that holds, and goes on from it until the window is no
// wider than least or no part holds. try measures a part of the window
// parent: its rate, whether it holds (still fails as its parent does),
// and false when no more runs can be made. It returns the narrowest
// window that held (w when none did).
func bisect(w window, least experiment.Duration, try func(parent, part window) (r campaign.Rate, holds, more bool)) window {
	for {
		var next *window
		var nextRate campaign.Rate
		for k, p := range parts(w, least) {
			if k == 2 && next != nil {
				break
			}
			r, ok, more := try(w, p)
			if ok && (next == nil || better(r, nextRate)) {
				next, nextRate = &p, r
			}
			if !more {
				if next != nil {
					return *next
				}
				return w
			}
		}
		if next == nil {
			return w
		}
		w = *next
	}
}

// narrow narrows the window of each windowed step of c in turn and
// returns the candidate of the narrowest windows that still fail. A part
// holds when it hits at least threshold of its runs (0 in the aim: it
// hits at all) and not significantly less often than its parent (Fisher's
// exact test, p >= 0.05), as a shrunk schedule must. In the aim it stops
// as soon as the candidate holds the hunt's threshold: the shrink narrows
// further.
func (h *hunter) narrow(ctx context.Context, phase string, c *Candidate, threshold float64) *Candidate {
	cur := c
	for k, fs := range flatten(c.Schedules) {
		if !fs.step.Window() {
			continue
		}
		w := window{fs.step.Gap, fs.step.Max}
		if threshold > 0 {
			h.logf("%s: narrowing step %d's window %s while the hit rate stays at least %s and not significantly below its parent's", phase, k+1, w, stats.Percent(threshold))
		}
		cur = h.narrowStep(ctx, phase, cur, k, w, h.minWidth(c.Schedules[fs.sched].Node, narrowest), threshold)
	}
	return cur
}

// narrowGaps narrows the gaps of a time-based schedule (no step aimed at
// a signal) as narrow does windows: a step lands tens of milliseconds off
// its gap from run to run, so the drawn gap may sit at the edge of what
// hits. A schedule that hit every run is left as it is. Each step in
// turn, the last first (the step that fails the
// system is most often the last kept), gets a window of its gap plus or
// minus a sixteenth of its node's gap range, the other steps pinned, and
// bisection keeps the part that still fails; when none does the step
// stays pinned as drawn. The confirming runs pin each window to its
// middle.
func (h *hunter) narrowGaps(ctx context.Context, c *Candidate) *Candidate {
	if c.Rate.Of > 0 && c.Rate.Hit == c.Rate.Of {
		// It hit every run: no window could do better, so the runs
		// are not spent.
		return c
	}
	cur := c
	steps := flatten(c.Schedules)
	for k := len(steps) - 1; k >= 0 && ctx.Err() == nil; k-- {
		if _, ok := h.left(); !ok {
			break
		}
		fs := steps[k]
		w, ok := h.gapWindow(c.Schedules[fs.sched], fs.step)
		if !ok {
			continue
		}
		h.logf("shrink: narrowing step %d's gap (%s, %s): trying the window %s while the hit rate stays at least %s and not significantly below its parent's", k+1, fs.step.Gap, fs.step.Operation, w, stats.Percent(h.o.Threshold))
		cur = h.narrowStep(ctx, "shrink", cur, k, w, h.minWidth(c.Schedules[fs.sched].Node, gapNarrowest), h.o.Threshold)
	}
	return cur
}

// gapWindow is the window narrowGaps tries for a time-based step: its gap
// plus or minus a sixteenth of its node's gap range, not below 0; false
// for a step aimed at a signal, one with a window already, or a node
// whose gap range is too small to narrow.
func (h *hunter) gapWindow(s experiment.Schedule, st experiment.ScheduleStep) (window, bool) {
	g := h.generateAt(s.Node)
	if s.Signal != "" || st.Window() || g == nil {
		return window{}, false
	}
	pad := wholeMs((g.Gap.Max - g.Gap.Min) / gapPad)
	if pad <= 0 {
		return window{}, false
	}
	return window{max(0, st.Gap-pad), st.Gap + pad}, true
}

// narrowStep narrows flat step k of cur from the window w by bisection
// and returns the candidate of the narrowest part that still failed (cur
// when none did).
func (h *hunter) narrowStep(ctx context.Context, phase string, cur *Candidate, k int, w window, least experiment.Duration, threshold float64) *Candidate {
	try := h.try
	if try == nil {
		try = h.measure
	}
	start := cur
	tries := 0
	tried := map[window]*Candidate{}
	w = bisect(w, least, func(parent, p window) (campaign.Rate, bool, bool) {
		if ctx.Err() != nil || threshold == 0 && cur.Rate.P() >= h.o.Threshold {
			return campaign.Rate{}, false, false
		}
		pc := start
		if t := tried[parent]; t != nil {
			pc = t
		}
		tries++
		m := try(ctx, phase, fmt.Sprintf("%s, step %d's window narrowed to %s", pc.ID, k+1, p), withWindow(pc.Schedules, k, p), h.o.PerCandidate)
		if m == nil {
			return campaign.Rate{}, false, false
		}
		ok := stillFails(m.Rate, pc.Rate, threshold)
		m.StillFails = &ok
		if ok {
			h.logf("%s: %s still fails (%s): the window may narrow to %s", phase, m.ID, m.Rate, p)
			tried[p] = m
			if better(m.Rate, cur.Rate) || m.Rate.P() >= h.o.Threshold {
				cur = m
			}
		} else {
			h.logf("%s: %s does not (%s)", phase, m.ID, m.Rate)
		}
		return m.Rate, ok, true
	})
	if t := tried[w]; t != nil {
		cur = t
	} else {
		cur = start
	}
	if tries > 0 {
		h.logf("%s: step %d's window is %s (%s)", phase, k+1, w, cur.Rate)
	}
	return cur
}

// pursued says whether a windowed candidate that hit c is worth narrowing
// and stands for its window from then on: it hit more than twice as often
// as the random delays (random). A window that hit less is likely a
// chance hit, and a later hit inside it is aimed at again.
func pursued(c, random campaign.Rate) bool {
	return c.Hit > 0 && c.P() > 2*random.P()
}
