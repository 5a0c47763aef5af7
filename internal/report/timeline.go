package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/runview"
)

// State colours, those of the Gantt charts in bug reports and chaos share.
const (
	colRunning   = "#34d399"
	colPending   = "#fbbf24"
	colRed       = "#dc2626"
	colSucceeded = "#047857"
	colCreated   = "#64748b"
	colNode      = "#64748b"
	colOther     = "#94a3b8"
	colThin      = "#cbd5e1"
	colFrozen    = "#7c3aed"
	colHealthy   = "#10b981" // a target's healthy stretch, darker than Running
)

// Timeline geometry.
const (
	axisH = 26 // tick labels above the rows
	rowH  = 20
	barH  = 12
	thinH = 4
)

// gantt is the timeline SVG, ready to print.
type gantt struct {
	Height, PlotTop int
	Rows            []grow
	// EmptyY, when not 0, is where to say that nothing ran (no flow, no
	// instance): below what the run did around its flow, if anything.
	EmptyY int
	Bands  []gbar // operations drawn faintly across every row
	// LostBands span, across every row, the writes a check found
	// acknowledged and then lost: from the first one's invocation to
	// the last one's acknowledgement.
	LostBands  []gbar
	Bars       []gbar
	Milestones []gms
	Ticks      []tick
	// Marks are the lines of watchers, logs and failed scrapes, each a
	// short vertical stroke on its source's row.
	Marks []gmark
	// Above compactBars bars, Bars is empty: Paths draw them, one path
	// per row, class and colour, and Tips (JSON) gives the script what
	// their tooltips say.
	Paths []gpath
	Tips  template.JS
}

// compactBars is the number of bars above which the timeline draws them
// as paths, without a <title> each: a run of hours or with thousands of
// operations would otherwise make report.html tens of megabytes.
const compactBars = 2000

// gpath is the bars of one row, class and colour, one subpath each.
type gpath struct {
	D, Class, Fill string
}

type grow struct {
	Y, TextY, LabelX int
	Label, Title     string
	Right, RightCls  string
	Section, Alt     bool
	Kind             string // "node", "op", "target", "instance", "line"
	// ID anchors the row, for links from the failures at the top.
	ID string
}

// gmark is one line of a source on the time axis: D draws it (in plot
// units, so it zooms), Text is its tooltip and what the filter matches.
type gmark struct {
	D, Class, Text string
}

// gbar is a rectangle in plot units (x: 0..plotW over the run's span).
type gbar struct {
	X, W, Y, H   string
	Fill, Class  string
	Title, Label string

	// Of a timeline bar, before it is printed: its row, its top and
	// height, its times and the tooltip without them (run, if not 0,
	// replaces the first runMark).
	row, y, h int
	s, e      float64
	tip       string
	run       int
}

// runMark stands for an operation's run number in a bar's tooltip, so
// the applications of one operation on the same targets share a label.
const runMark = "\x01"

// gms is a milestone; the script moves it when the axis zooms, so it keeps
// its shape.
type gms struct {
	X, Y, T     string
	Fill, Title string
}

type tick struct {
	X, Label string
}

// tx maps seconds to plot units.
func tx(t, span float64) float64 { return t / span * plotW }

func buildGantt(r *runview.Run, span float64, lines []runview.Line) (*gantt, string) {
	g := &gantt{PlotTop: axisH - 4}
	g.Ticks = ticks(0, span, span)
	y := axisH
	alt := false
	add := func(row grow) int {
		row.Y = y
		row.TextY = y + rowH/2 + 4
		if !row.Section {
			row.Alt = alt
			alt = !alt
		} else {
			alt = false
		}
		if row.LabelX == 0 {
			row.LabelX = 8
		}
		g.Rows = append(g.Rows, row)
		y += rowH
		return row.Y
	}
	when := func(s, e float64) string {
		return fmt.Sprintf("%s → %s (%s) · %s → %s UTC", secs(s), secs(e), secs(e-s), r.Start.Add(dur(s)).UTC().Format("15:04:05.000"), r.Start.Add(dur(e)).UTC().Format("15:04:05.000"))
	}
	// bar is a bar of the row at y; its tooltip is tip and its times, and
	// its coordinates are printed once it is known whether it is a
	// <rect> or part of a path (see finishBars).
	bar := func(y int, s, e float64, fill, class, tip string, thin bool) gbar {
		h, off := barH, (rowH-barH)/2
		if thin {
			h, off = thinH, (rowH-thinH)/2
		}
		return gbar{row: y, y: y + off, h: h, s: s, e: e, Fill: fill, Class: class, tip: tip}
	}
	milestone := func(y int, t float64, fill, title string) gms {
		return gms{X: num(gutL+tx(t, span), 2), Y: itoa(y + rowH/2), T: num(t, 3), Fill: fill, Title: title}
	}

	// The flow: one row per node (repeats of a node share it) and one per
	// operation, in the order they first started.
	type flowRow struct {
		start float64
		node  []runview.Bar
		ops   []runview.OpRun
	}
	var rows []*flowRow
	byNode := map[string]*flowRow{}
	for _, b := range r.Nodes {
		if structural(b) || isOperationRef(r, b) {
			continue
		}
		fr := byNode[b.Node]
		if fr == nil {
			fr = &flowRow{start: b.Start}
			byNode[b.Node] = fr
			rows = append(rows, fr)
		}
		fr.node = append(fr.node, b)
	}
	byOp := map[string]*flowRow{}
	for _, op := range r.Operations {
		fr := byOp[op.Name]
		if fr == nil {
			fr = &flowRow{start: op.Start}
			byOp[op.Name] = fr
			rows = append(rows, fr)
		}
		fr.ops = append(fr.ops, op)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].start < rows[j].start })

	// What the run did around its flow: the lock, preflight, settling.
	if prows, marks, unshown := runPhases(r.Events, span); len(prows) > 0 {
		add(grow{Section: true, Label: "run", Title: "the run lock, preflight checks, the settle wait and what ended the run early"})
		at := map[string]int{}
		failed := map[string]int{}
		for _, m := range marks {
			if m.Failed {
				failed[m.Row]++
			}
		}
		for _, name := range prows {
			row := grow{Kind: "phase", Label: clip(name, 40), Title: name}
			if n := unshown[name]; n > 0 {
				row.Title += fmt.Sprintf(" (%d more not drawn; timeline.jsonl has them)", n)
			}
			if n := failed[name]; n > 0 {
				row.Right, row.RightCls = "failed", "bad"
				if n > 1 {
					row.Right = fmt.Sprintf("%d failed", n)
				}
			}
			at[name] = add(row)
		}
		for _, m := range marks {
			ry := at[m.Row]
			if m.E > m.S {
				g.Bars = append(g.Bars, bar(ry, m.S, m.E, m.Fill, "ph", m.Tip, m.Milestone))
			}
			if m.Milestone {
				g.Milestones = append(g.Milestones, milestone(ry, m.E, m.Fill, m.Tip+" · at "+secs(m.E)))
			}
		}
	}
	if len(rows) > 0 {
		add(grow{Section: true, Label: "flow", Title: "flow nodes and operations"})
	}
	for _, fr := range rows {
		if len(fr.node) > 0 {
			b0 := fr.node[0]
			label := b0.Label
			if len(fr.node) > 1 {
				label += fmt.Sprintf(" ×%d", len(fr.node))
			}
			kind := b0.Kind
			if kind == "" {
				kind = "node"
			}
			ry := add(grow{Kind: "node", Label: label, Title: fmt.Sprintf("%s (%s) at %s, ran %d time(s)", b0.Label, kind, b0.Node, len(fr.node))})
			for _, b := range fr.node {
				g.Bars = append(g.Bars, bar(ry, b.Start, b.End, colNode, "node", b.Label, false))
			}
			continue
		}
		op0 := fr.ops[0]
		label := op0.Name
		if len(fr.ops) > 1 {
			label += fmt.Sprintf(" ×%d", len(fr.ops))
		}
		ry := add(grow{Kind: "op", Label: label, Title: fmt.Sprintf("operation %s (uses %s), applied %d time(s)", op0.Name, op0.Uses, len(fr.ops))})
		for _, op := range fr.ops {
			b := bar(ry, op.Start, op.End, colRed, "op", opTip(op), false)
			b.Label, b.run = op.Name, op.Run
			g.Bars = append(g.Bars, b)
		}
	}

	if len(r.NamedTargets) > 0 {
		add(grow{Section: true, Label: "targets", Title: "one row per named target: healthy, held down by a fault, starting again and waiting for its health check, frozen, stopped"})
	}
	for i := range r.NamedTargets {
		l := &r.NamedTargets[i]
		title := "target " + l.Name
		if n := len(l.Restarts); n > 0 {
			title += fmt.Sprintf(" · healthy again %d time(s) after a fault", n)
		}
		right, rightCls := "", "muted"
		down := 0.0
		for _, s := range l.Segments {
			if s.State == runview.TargetDown || s.State == runview.TargetStarting {
				down += s.End - s.Start
			}
		}
		if down > 0 {
			right, rightCls = "down "+num(down, 1)+" s", "bad"
		}
		ry := add(grow{Kind: "target", Label: l.Name, Title: title, Right: right, RightCls: rightCls, ID: "row-target-" + l.Name})
		for _, s := range l.Segments {
			tip := "target " + l.Name + " · " + s.State
			if s.Reason != "" {
				tip += " (" + s.Reason + ")"
			}
			switch s.State {
			case runview.TargetHealthy:
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colHealthy, "tg", tip, false))
			case runview.TargetDown:
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colRed, "tg", tip, false))
			case runview.TargetStarting:
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colPending, "tg", tip, false))
			case runview.TargetFrozen:
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colFrozen, "tg", tip, false))
			case runview.TargetStopped:
				g.Milestones = append(g.Milestones, milestone(ry, s.Start, colCreated, tip+" · "+when(s.Start, s.End)))
			}
		}
	}

	if len(r.Instances) > 0 {
		add(grow{Section: true, Label: "instances", Title: "one row per instance, coloured by state"})
	}
	for _, in := range r.Instances {
		title := fmt.Sprintf("%s (workload %s)", in.Name, in.Workload)
		if in.Created >= 0 {
			title += " · first seen at " + secs(in.Created)
		}
		if in.Final != "" {
			title += " · last state " + in.Final
		}
		right, rightCls := "no exit", "muted"
		if n := len(in.Segments); n > 0 && in.ExitCode == nil && in.Segments[n-1].State == "Failed" && in.Segments[n-1].Reason != "" {
			// How it ended, where it shows, not only in a tooltip.
			right, rightCls = in.Segments[n-1].Reason, "bad"
		}
		if in.ExitCode != nil {
			right = fmt.Sprintf("exit %d", *in.ExitCode)
			rightCls = "ok"
			if *in.ExitCode != 0 {
				rightCls = "bad"
			}
			title += " · " + right
		} else {
			title += " · no exit code recorded"
		}
		if len(in.Faults) > 0 {
			title += " · hit by " + strings.Join(uniq(in.Faults), ", ")
		}
		ry := add(grow{Kind: "instance", Label: in.Name, Title: title, Right: right, RightCls: rightCls, ID: "row-" + in.Name})
		for _, s := range mergeSegments(in.Segments) {
			tip := in.Name + " · " + s.State
			if s.Reason != "" {
				tip += " (" + s.Reason + ")"
			}
			mtip := tip + " · " + when(s.Start, s.End)
			switch s.State {
			case "Running":
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colRunning, "st", tip, false))
			case "Pending":
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colPending, "st", tip, false))
			case "Unknown":
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colRed, "st", tip, false))
			case "Failed":
				if s.End > s.Start {
					g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colRed, "st", tip, false))
				}
				g.Milestones = append(g.Milestones, milestone(ry, s.Start, colRed, mtip))
			case "Succeeded":
				if s.End > s.Start {
					g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colSucceeded, "st", tip, true))
				}
				g.Milestones = append(g.Milestones, milestone(ry, s.Start, colSucceeded, mtip))
			case "Created":
				if s.End > s.Start {
					g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colThin, "st", tip, true))
				}
				g.Milestones = append(g.Milestones, milestone(ry, s.Start, colCreated, mtip))
			default:
				g.Bars = append(g.Bars, bar(ry, s.Start, s.End, colOther, "st", tip, false))
			}
		}
	}
	lost := addFindingRows(r, add, func(ry int, s, e float64, tip string) {
		g.Bars = append(g.Bars, bar(ry, s, e, colRed, "fd", tip, true))
	})
	addLineRows(g, lines, span, add)
	if len(rows) == 0 && len(r.Instances) == 0 && len(r.NamedTargets) == 0 {
		g.EmptyY = y + 24
		y += 30
	}
	g.Height = y + 6
	for _, l := range lost {
		g.LostBands = append(g.LostBands, gbar{
			X: num(tx(l.s, span), 2), W: num(math.Max(0.5, tx(l.e, span)-tx(l.s, span)), 2),
			Y: itoa(axisH), H: itoa(y - axisH), Title: l.tip + " · " + when(l.s, l.e),
		})
	}
	// Operations, faintly, across every row.
	for i, op := range r.Operations {
		if i >= limits.MaxReportBands {
			break
		}
		g.Bands = append(g.Bands, gbar{
			X: num(tx(op.Start, span), 2), W: num(math.Max(0, tx(op.End, span)-tx(op.Start, span)), 2),
			Y: itoa(axisH), H: itoa(y - axisH), Title: opTitle(op),
		})
	}
	var notes []string
	if n := len(g.Bars) + len(g.Milestones); n > limits.MaxReportBars {
		notes = append(notes, fmt.Sprintf("The timeline has %d bars and milestones; the first %d are drawn, the rest are in timeline.jsonl.", n, limits.MaxReportBars))
		if len(g.Bars) > limits.MaxReportBars {
			g.Bars = g.Bars[:limits.MaxReportBars]
		}
		if room := limits.MaxReportBars - len(g.Bars); len(g.Milestones) > room {
			g.Milestones = g.Milestones[:room]
		}
	}
	if len(r.Operations) > limits.MaxReportBands {
		notes = append(notes, fmt.Sprintf("%d operation applications ran; the first %d are shaded across the rows.", len(r.Operations), limits.MaxReportBands))
	}
	finishBars(g, span, when)
	return g, strings.Join(notes, " ")
}

// finishBars prints the bars: each a <rect> with its <title> up to
// compactBars of them, else one path per row, class and colour, and
// their tooltips as JSON for the script.
func finishBars(g *gantt, span float64, when func(s, e float64) string) {
	if len(g.Bars) <= compactBars {
		for i := range g.Bars {
			b := &g.Bars[i]
			b.X, b.W = num(tx(b.s, span), 2), num(math.Max(0, tx(b.e, span)-tx(b.s, span)), 2)
			b.Y, b.H = itoa(b.y), itoa(b.h)
			b.Title = b.tip
			if b.run != 0 {
				b.Title = strings.Replace(b.Title, runMark, itoa(b.run), 1)
			}
			b.Title += " · " + when(b.s, b.e)
		}
		return
	}
	type key struct {
		y, h        int
		class, fill string
	}
	paths := map[key]*strings.Builder{}
	var order []key
	labels := map[string]int{}
	tips := tipData{L: []string{}}
	rows := map[int]int{} // a row's y: its index in tips.R
	for _, b := range g.Bars {
		k := key{b.y, b.h, b.Class, b.Fill}
		d := paths[k]
		if d == nil {
			d = &strings.Builder{}
			paths[k] = d
			order = append(order, k)
		}
		x0 := round(tx(b.s, span), 2)
		w := round(math.Max(0, tx(b.e, span)-x0), 2)
		ws := num(w, 2)
		d.WriteString("M" + num(x0, 2) + " " + itoa(b.y) + "h" + ws + "v" + itoa(b.h) + "h-" + ws + "z")

		li, ok := labels[b.tip]
		if !ok {
			li = len(tips.L)
			labels[b.tip] = li
			tips.L = append(tips.L, b.tip)
		}
		ri, ok := rows[b.row]
		if !ok {
			ri = len(tips.R)
			rows[b.row] = ri
			tips.R = append(tips.R, tipRow{Y: b.row})
		}
		iv := []float64{round(b.s, 3), round(b.e, 3), float64(li)}
		if b.run != 0 {
			iv = append(iv, float64(b.run))
		}
		tips.R[ri].I = append(tips.R[ri].I, iv)
	}
	for _, k := range order {
		g.Paths = append(g.Paths, gpath{D: paths[k].String(), Class: k.class, Fill: k.fill})
	}
	for i := range tips.R {
		iv := tips.R[i].I
		sort.SliceStable(iv, func(a, b int) bool { return iv[a][0] < iv[b][0] })
	}
	g.Bars = nil
	// encoding/json writes <, > and & as \u003c, \u003e and \u0026: a
	// label cannot end the script element.
	data, err := json.Marshal(tips)
	if err == nil {
		g.Tips = template.JS(data)
	}
}

// tipData is what the script needs for the tooltips of bars drawn as
// paths: the distinct labels (L), and per row (its top, Y) the bars'
// [start, end, label, run] in seconds, sorted by start.
type tipData struct {
	L []string `json:"l"`
	R []tipRow `json:"r"`
}

type tipRow struct {
	Y int         `json:"y"`
	I [][]float64 `json:"i"`
}

func round(v float64, dec int) float64 {
	p := math.Pow(10, float64(dec))
	return math.Round(v*p) / p
}

// structural nodes (serial, parallel) only group others; their bars would
// span everything and say nothing.
func structural(b runview.Bar) bool {
	k := b.Kind
	if k == "" {
		k = b.Label
	}
	return k == "serial" || k == "parallel"
}

// isOperationRef is a flow step that applies an operation: the operation's
// own row shows it.
func isOperationRef(r *runview.Run, b runview.Bar) bool {
	if b.Kind != "" && b.Kind != "ref" {
		return false
	}
	if r.Experiment != nil {
		return r.Experiment.Operation(b.Label) != nil
	}
	for _, op := range r.Operations {
		if op.Name == b.Label {
			return true
		}
	}
	return false
}

func opTitle(op runview.OpRun) string {
	return strings.Replace(opTip(op), runMark, itoa(op.Run), 1)
}

// opTip is opTitle with runMark for the run number.
func opTip(op runview.OpRun) string {
	s := op.Name + " run " + runMark
	if op.Uses != "" {
		s += " (" + op.Uses + ")"
	}
	if len(op.Targets) > 0 {
		s += " on " + strings.Join(op.Targets, ", ")
	}
	switch {
	case op.Open:
		s += " · still active when the run ended"
	case op.Reverted:
		s += " · reverted"
	}
	return s
}

// mergeSegments joins adjacent segments in the same state, keeping every
// distinct reason.
func mergeSegments(in []runview.Segment) []runview.Segment {
	var out []runview.Segment
	for _, s := range in {
		if n := len(out); n > 0 && out[n-1].State == s.State && s.Start <= out[n-1].End+1e-9 {
			last := &out[n-1]
			last.End = math.Max(last.End, s.End)
			if s.Reason != "" && !containsReason(last.Reason, s.Reason) {
				if last.Reason != "" {
					last.Reason += ", "
				}
				last.Reason += s.Reason
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

func containsReason(list, r string) bool {
	for _, x := range strings.Split(list, ", ") {
		if x == r {
			return true
		}
	}
	return false
}

func uniq(l []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range l {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func secs(s float64) string { return num(s, 3) + " s" }

func itoa(i int) string { return fmt.Sprint(i) }

// tickSteps are the spacings the time axis picks from; the script has the
// same list.
var tickSteps = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400}

// ticks are the time axis labels for the window [a, b] of a run of span
// seconds, at x positions in SVG units.
func ticks(a, b, span float64) []tick {
	w := b - a
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if w/s <= 10 {
			step = s
			break
		}
	}
	var out []tick
	// However wide the window, at most a few hundred ticks: the widest
	// step covers a day and a run is at most limits.MaxRunSeconds.
	for i := math.Ceil(a/step - 1e-9); len(out) < 400; i++ {
		t := i * step
		if t > b+1e-9 || math.IsNaN(t) {
			break
		}
		out = append(out, tick{X: num(gutL+(t-a)/w*plotW, 2), Label: relTime(t, step, span)})
	}
	return out
}

// relTime prints seconds since the start as mm:ss (h:mm:ss for runs of an
// hour or more), with decimals when the step is under a second.
func relTime(t, step, span float64) string {
	dec := 0
	for s := step; s < 1-1e-9 && dec < 3; s *= 10 {
		dec++
	}
	p := math.Pow(10, float64(dec))
	t = math.Round(t*p) / p
	whole := math.Floor(t + 1e-9)
	frac := ""
	if dec > 0 {
		frac = fmt.Sprintf("%.*f", dec, math.Max(0, t-whole))[1:]
	}
	s := int64(whole)
	if span >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d%s", s/3600, s/60%60, s%60, frac)
	}
	return fmt.Sprintf("%02d:%02d%s", s/60, s%60, frac)
}

// maxFindingRows bounds the timeline rows of checkers' findings.
const maxFindingRows = 20

// addFindingRows adds a row for each bad finding of a history check that
// names operations, each operation a thin bar at its times, and returns
// the span of each lost-writes finding, to draw across every row.
func addFindingRows(r *runview.Run, add func(grow) int, bar func(ry int, s, e float64, tip string)) (lost []gbar) {
	if r.Verdict == nil {
		return nil
	}
	rows := 0
	for _, c := range r.Verdict.Checks {
		for _, f := range c.Findings {
			if !f.Bad || len(f.Ops) == 0 || rows == maxFindingRows {
				continue
			}
			if rows == 0 {
				add(grow{Section: true, Label: "findings", Title: "what the history checks found, each operation they name at its times"})
			}
			rows++
			ops := f.Ops
			if len(ops) > limits.MaxFindingOps {
				ops = ops[:limits.MaxFindingOps]
			}
			ry := add(grow{Kind: "finding", Label: clip(f.Kind, 40) + " · " + clip(c.ID, 60), Title: fmt.Sprintf("%s of %s: %d", f.Kind, c.ID, f.Count), Right: fmt.Sprintf("%d %s", f.Count, clip(f.Kind, 20)), RightCls: "bad"})
			s, e := math.Inf(1), math.Inf(-1)
			for _, o := range ops {
				if !(o.Start >= 0 && o.End >= o.Start && o.End <= limits.MaxRunSeconds) {
					continue
				}
				bar(ry, o.Start, o.End, fmt.Sprintf("%s: %s/%s %s %s %s", f.Kind, o.Instance, o.Process, o.F, clip(o.Value, 80), o.Type))
				s, e = math.Min(s, o.Start), math.Max(e, o.End)
			}
			if f.Kind == "lost" && s <= e {
				lost = append(lost, gbar{s: s, e: e, tip: fmt.Sprintf("%d acknowledged writes lost (%s)", f.Count, c.ID)})
			}
		}
	}
	return lost
}
