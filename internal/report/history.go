package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// Limits of the history plots, so a history of a million operations still
// makes a small page.
const (
	// MaxOpPoints is the most operations one latency plot draws. Past it,
	// fail and info operations are kept first (up to half of it) and ok
	// operations are sampled evenly; operations a checker named are
	// always drawn.
	MaxOpPoints = 2000
	// rateBuckets is how many time buckets the rate plot has.
	rateBuckets = 200
	// maxFindingOps bounds the operations listed under each finding.
	maxFindingOps = 8

	histH     = 210 // latency plot height
	histTop   = 10
	histPlotH = 170
	rateH     = 130
	ratePlotH = 90
)

// histPlot is one workload's operations: latency over time and rate.
type histPlot struct {
	ID, Workload, Summary, Note string
	Instances                   []string
	Files                       []logLink
	// Latency: one path per result (ok, fail, info) and one of the
	// operations checkers named.
	Latency                   []series
	LatH, LatTop, LatPlotH    int
	LatAxisY, LatGridBot      int
	LatY                      []tick
	Rate                      []series
	RateH, RateTop, RatePlotH int
	RateAxisY, RateGridBot    int
	RateY                     []tick
	Ticks                     []tick
	LatBands, RateBands       []gbar
	Shown, Total              int
}

// finding is one checker finding, with links to the operations it names.
type finding struct {
	Check, Kind, Summary string
	Bad                  bool
	Values               string
	Ops                  []findingOp
	// All are every operation the finding names (up to
	// limits.MaxFindingOps), when there are more than the cell shows:
	// a scrollable table of them follows. ID anchors it; Unlisted says
	// how many the checker counted but did not name.
	All      []findingRow
	ID       string
	Unlisted int
	// Witness is a cycle's witness, one line each (Values joins them);
	// Graph draws the cycle.
	Witness []string
	Graph   *cycleGraph
}

type findingOp struct {
	Text, Zoom, File string
}

// findingRow is one operation of a finding's table.
type findingRow struct {
	N                            int
	Instance, Process, F, Value  string
	Type, Start, End, Zoom, File string
}

// buildHistories draws each workload's history and lists the checkers'
// findings.
func buildHistories(r *runview.Run, span float64) (plots []*histPlot, findings []finding, note string) {
	marked := map[string]bool{} // instance/line of operations checkers named
	tableRows := limits.MaxFindingOps
	graphs := 0
	if v := r.Verdict; v != nil {
		for _, c := range v.Checks {
			for _, f := range c.Findings {
				fd := finding{Check: c.ID, Kind: f.Kind, Bad: f.Bad, Summary: fmt.Sprintf("%d", f.Count)}
				if len(f.Values) > 0 {
					fd.Values = strings.Join(f.Values, ", ")
					if f.Count > len(f.Values) {
						fd.Values += fmt.Sprintf(", … (%d more)", f.Count-len(f.Values))
					}
				}
				// The tables of all the findings together list at most
				// limits.MaxFindingOps operations: a hostile verdict.json
				// of many findings makes no page of gigabytes.
				ops := f.Ops
				table := len(ops) > maxFindingOps && tableRows > 0
				if table {
					ops = ops[:min(len(ops), max(tableRows, maxFindingOps))]
					tableRows -= len(ops)
				} else if len(ops) > maxFindingOps {
					ops = ops[:maxFindingOps]
				}
				for i, o := range ops {
					w, _, _ := experiment.SplitInstance(o.Instance)
					z := fmt.Sprintf("#t=%s-%s", num(math.Max(0, o.Start-0.5), 3), num(math.Min(span, o.End+0.5), 3))
					file := href(fmt.Sprintf("workloads/%s/instances/%s/output/%s", w, o.Instance, history.File))
					if table {
						fd.All = append(fd.All, findingRow{N: i + 1, Instance: o.Instance, Process: o.Process, F: o.F, Value: clip(o.Value, 200), Type: o.Type, Start: num(o.Start, 3), End: num(o.End, 3), Zoom: z, File: file})
					}
					if i >= maxFindingOps {
						continue
					}
					marked[o.Instance+"\x00"+strconv.Itoa(o.Line)] = true
					fd.Ops = append(fd.Ops, findingOp{
						Text: fmt.Sprintf("%s/%s %s %s %s, t=%s to %s (line %d)", o.Instance, o.Process, o.F, clip(o.Value, 80), o.Type, num(o.Start, 3), num(o.End, 3), o.Line),
						Zoom: z,
						File: file,
					})
				}
				if len(f.Cycle) > 0 && graphs < maxCycleGraphs {
					if fd.Graph = drawCycle(fmt.Sprintf("cycle-%d", len(findings)), f); fd.Graph != nil {
						graphs++
						fd.Witness = f.Values
					}
				}
				if fd.All != nil {
					fd.ID = fmt.Sprintf("finding-%d", len(findings))
					fd.Unlisted = max(0, f.Count-len(fd.All))
				}
				findings = append(findings, fd)
			}
		}
	}
	if r.Experiment == nil {
		return nil, findings, ""
	}
	start := verdict.RunStart(r.Events)
	for _, w := range r.Experiment.Workloads {
		srcs := verdict.HistorySources(r.Dir, r.Events, []string{w.Name})
		h, err := history.Load(r.Context(), srcs, start)
		if err != nil {
			note += fmt.Sprintf("The history of %s could not be read: %v. ", w.Name, err)
			continue
		}
		if len(h.Ops) == 0 {
			continue
		}
		p := drawHistory(h, span, marked)
		p.ID = "history-" + strconv.Itoa(len(plots))
		p.Workload = w.Name
		for _, in := range h.Instances {
			p.Files = append(p.Files, logLink{Href: href(fmt.Sprintf("workloads/%s/instances/%s/output/%s", w.Name, in, history.File)), Name: in})
		}
		for _, op := range r.Operations {
			x, wd := num(tx(op.Start, span), 2), num(math.Max(0, tx(op.End, span)-tx(op.Start, span)), 2)
			p.LatBands = append(p.LatBands, gbar{X: x, W: wd, Y: itoa(p.LatTop), H: itoa(p.LatPlotH), Title: opTitle(op)})
			p.RateBands = append(p.RateBands, gbar{X: x, W: wd, Y: itoa(p.RateTop), H: itoa(p.RatePlotH), Title: opTitle(op)})
		}
		p.Ticks = ticks(0, span, span)
		plots = append(plots, p)
	}
	return plots, findings, strings.TrimSpace(note)
}

// pickOps chooses at most MaxOpPoints operations to draw: every marked one,
// then fail and info ones (up to half the budget), then ok ones evenly.
func pickOps(ops []history.Op, marked map[string]bool) []*history.Op {
	if len(ops) <= MaxOpPoints {
		out := make([]*history.Op, len(ops))
		for i := range ops {
			out[i] = &ops[i]
		}
		return out
	}
	var must, bad, ok []*history.Op
	for i := range ops {
		o := &ops[i]
		switch {
		case marked[o.Instance+"\x00"+strconv.Itoa(o.Line)]:
			must = append(must, o)
		case o.Type != history.OK:
			bad = append(bad, o)
		default:
			ok = append(ok, o)
		}
	}
	out := must
	room := MaxOpPoints - len(out)
	out = append(out, sample(bad, min(len(bad), room/2))...)
	room = MaxOpPoints - len(out)
	out = append(out, sample(ok, room)...)
	return out
}

// sample picks n of l evenly.
func sample(l []*history.Op, n int) []*history.Op {
	if n <= 0 {
		return nil
	}
	if n >= len(l) {
		return l
	}
	out := make([]*history.Op, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, l[i*len(l)/n])
	}
	return out
}

func drawHistory(h *history.History, span float64, marked map[string]bool) *histPlot {
	p := &histPlot{
		LatH: histH, LatTop: histTop, LatPlotH: histPlotH, LatAxisY: histTop + histPlotH + 16, LatGridBot: histTop + histPlotH,
		RateH: rateH, RateTop: histTop, RatePlotH: ratePlotH, RateAxisY: histTop + ratePlotH + 16, RateGridBot: histTop + ratePlotH,
		Instances: h.Instances, Total: len(h.Ops),
	}
	// Latency in milliseconds on a log scale, decades from the fastest to
	// the slowest operation.
	lo, hi := math.Inf(1), 0.0
	for _, o := range h.Ops {
		ms := math.Max((o.End-o.Start)*1000, 0.01)
		lo, hi = math.Min(lo, ms), math.Max(hi, ms)
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	y := func(ms float64) float64 {
		v := (math.Log10(math.Max(ms, 0.01)) - dlo) / (dhi - dlo)
		return float64(histTop+histPlotH) - v*histPlotH
	}
	for d := dlo; d <= dhi; d++ {
		p.LatY = append(p.LatY, tick{X: num(y(math.Pow(10, d)), 1), Label: msLabel(math.Pow(10, d))})
	}
	picked := pickOps(h.Ops, marked)
	p.Shown = len(picked)
	var b [4]strings.Builder
	counts := map[string]int{}
	for _, o := range h.Ops {
		counts[o.Type]++
	}
	for _, o := range picked {
		i := 0
		switch o.Type {
		case history.Fail:
			i = 1
		case history.Info:
			i = 2
		}
		ms := (o.End - o.Start) * 1000
		pt := fmt.Sprintf("M%s %sh0", num(tx(o.Start, span), 2), num(y(ms), 1))
		b[i].WriteString(pt)
		if marked[o.Instance+"\x00"+strconv.Itoa(o.Line)] {
			b[3].WriteString(pt)
		}
	}
	names := []string{"ok", "fail", "info", "named by a check"}
	classes := []string{"h-ok", "h-fail", "h-info", "h-find"}
	for i := range b {
		if b[i].Len() == 0 {
			continue
		}
		label := names[i]
		stats := ""
		if i < 3 {
			stats = fmt.Sprintf("%d operations", counts[names[i]])
		}
		p.Latency = append(p.Latency, series{Dots: b[i].String(), Class: classes[i] + " dot", Label: label, Stats: stats})
	}
	// Throughput: completions per second in each bucket, by result.
	width := span / rateBuckets
	var rates [3][rateBuckets]float64
	for _, o := range h.Ops {
		k := int(o.End / width)
		if k < 0 || k >= rateBuckets {
			k = max(0, min(rateBuckets-1, k))
		}
		i := 0
		switch o.Type {
		case history.Fail:
			i = 1
		case history.Info:
			i = 2
		}
		rates[i][k] += 1 / width
	}
	top := 0.0
	for i := range rates {
		for _, v := range rates[i] {
			top = math.Max(top, v)
		}
	}
	top = niceCeil(top)
	ry := func(v float64) float64 { return float64(histTop+ratePlotH) - v/top*ratePlotH }
	for _, v := range []float64{0, top / 2, top} {
		p.RateY = append(p.RateY, tick{X: num(ry(v), 1), Label: num(v, 0) + "/s"})
	}
	for i := range rates {
		if counts[names[i]] == 0 {
			continue
		}
		var d strings.Builder
		for k, v := range rates[i] {
			cmd := "L"
			if k == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%s %s", cmd, num(tx((float64(k)+0.5)*width, span), 2), num(ry(v), 1))
		}
		p.Rate = append(p.Rate, series{D: d.String(), Class: "r" + classes[i][1:], Label: names[i] + " per second"})
	}
	p.Summary = fmt.Sprintf("%d operations: %d ok, %d fail, %d info", len(h.Ops), counts[history.OK], counts[history.Fail], counts[history.Info])
	if p.Shown < p.Total {
		p.Note = fmt.Sprintf("%d of %d operations drawn (at most %d: every operation a check named, then fail and info, then ok ones sampled evenly); the rate counts them all.", p.Shown, p.Total, MaxOpPoints)
	}
	return p
}

func msLabel(ms float64) string {
	switch {
	case ms >= 1000:
		return num(ms/1000, 3) + " s"
	case ms >= 1:
		return num(ms, 3) + " ms"
	}
	return num(ms*1000, 0) + " µs"
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// sortFindings puts bad findings first, keeping each check's order.
func sortFindings(f []finding) {
	sort.SliceStable(f, func(i, j int) bool { return f[i].Bad && !f[j].Bad })
}
