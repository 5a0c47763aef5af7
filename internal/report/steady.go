package report

import (
	"math"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/runview"
)

// The steady state of a focus metric around the faults: its mean before the
// first fault, its range while faults were active, and its mean after the
// last one ended, so an SRE sees at once whether the system came back.

// steadyRow is one series of a focus family.
type steadyRow struct {
	Family, Series, ChartID string
	Before, During, After   string
	Change, ChangeClass     string
}

// maxSteadySeries bounds the series summarised per family.
const maxSteadySeries = 4

// faultWindow is when faults were active: from the first fault's start to
// the last one's end (ok false without faults).
func faultWindow(ops []runview.OpRun) (from, to float64, ok bool) {
	from, to = math.Inf(1), math.Inf(-1)
	for _, op := range ops {
		if !experiment.IsFault(op.Uses) {
			continue
		}
		from, to = math.Min(from, op.Start), math.Max(to, op.End)
	}
	return from, to, from <= to
}

// steadySummary summarises the busiest series of a chart (before it is
// drawn: the values are still whole).
func steadySummary(c *chart, ops []runview.OpRun) []steadyRow {
	from, to, ok := faultWindow(ops)
	if !ok {
		return nil
	}
	var out []steadyRow
	for i, d := range c.pending {
		if i >= maxSteadySeries {
			break
		}
		pts := d.pts
		if c.Type == "histogram" || c.Type == "summary" {
			// Observation counts only grow: compare how fast they grow.
			pts = rate(pts)
		}
		var before, after stat
		during := stat{lo: math.Inf(1), hi: math.Inf(-1)}
		for _, p := range pts {
			if math.IsNaN(p.v) {
				continue
			}
			switch {
			case p.t < from:
				before.add(p.v)
			case p.t <= to:
				during.add(p.v)
			default:
				after.add(p.v)
			}
		}
		series := label(d.key)
		if c.Type == "histogram" || c.Type == "summary" {
			series += " observations/s"
		}
		row := steadyRow{Family: c.Family, Series: series, ChartID: c.ID,
			Before: before.mean(), After: after.mean(), During: during.span()}
		if before.n > 0 && after.n > 0 {
			b, a := before.sum/float64(before.n), after.sum/float64(after.n)
			switch {
			case b == 0 && a == 0:
				row.Change = "same"
			case b == 0:
				row.Change, row.ChangeClass = "from 0", "bad"
			default:
				ch := (a - b) / math.Abs(b) * 100
				row.Change = num(ch, 1) + " %"
				if ch > 0 {
					row.Change = "+" + row.Change
				}
				if math.Abs(ch) >= 20 {
					row.ChangeClass = "bad"
				}
			}
		} else {
			row.Change = "n/a"
		}
		out = append(out, row)
	}
	return out
}

type stat struct {
	n      int
	sum    float64
	lo, hi float64
}

func (s *stat) add(v float64) {
	if s.n == 0 {
		s.lo, s.hi = v, v
	}
	s.n++
	s.sum += v
	s.lo, s.hi = math.Min(s.lo, v), math.Max(s.hi, v)
}

func (s stat) mean() string {
	if s.n == 0 {
		return "none"
	}
	return value(s.sum/float64(s.n), 0)
}

func (s stat) span() string {
	if s.n == 0 {
		return "no scrape"
	}
	if s.lo == s.hi {
		return value(s.lo, 0)
	}
	return value(s.lo, 0) + " – " + value(s.hi, 0)
}
