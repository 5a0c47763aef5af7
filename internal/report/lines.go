package report

import (
	"fmt"
	"strings"

	"github.com/chaos-harness/chaos/internal/runview"
)

// Lines of watchers, logs and failed scrapes on the time axis: a row per
// source in the timeline, a stroke per line with the line as its tooltip,
// and under the timeline a list of them all that a filter narrows (the
// script hides the strokes that do not match too).

// Limits that keep long runs' pages small.
const (
	// maxMarksPerSource is how many lines of one source are drawn; past it
	// they are sampled evenly in time.
	maxMarksPerSource = 400
	// maxListLines is how many lines the list under the timeline shows.
	maxListLines = 2000
	// maxMarkText is how much of a line a tooltip shows.
	maxMarkText = 300
)

// lineRow is one line in the list under the timeline.
type lineRow struct {
	T, Zoom, Source, Text, Class string
}

// markSources are the sources drawn on the time axis: not the timeline's
// own events, which the rows above draw.
func markSources(lines []runview.Line) (order []string, by map[string][]runview.Line) {
	by = map[string][]runview.Line{}
	for _, l := range lines {
		if l.Source == runview.SourceTimeline {
			continue
		}
		if _, ok := by[l.Source]; !ok {
			order = append(order, l.Source)
		}
		by[l.Source] = append(by[l.Source], l)
	}
	return order, by
}

func lineClass(source string) string {
	if strings.HasPrefix(source, runview.SourceMetrics) {
		return "lm fs"
	}
	return "lm"
}

// addLineRows adds a section with a row per source of lines.
func addLineRows(g *gantt, lines []runview.Line, span float64, add func(grow) int) {
	order, by := markSources(lines)
	if len(order) == 0 {
		return
	}
	add(grow{Section: true, Label: "lines", Title: "watcher and log lines and failed scrapes, one stroke per line; hover for the line, filter them below"})
	for _, src := range order {
		ls := by[src]
		label := src
		switch {
		case strings.HasPrefix(src, runview.SourceMetrics):
			label = "scrapes " + strings.TrimPrefix(src, runview.SourceMetrics)
		}
		right := fmt.Sprintf("%d", len(ls))
		cls := "muted"
		if strings.HasPrefix(src, runview.SourceMetrics) {
			right, cls = fmt.Sprintf("%d failed", len(ls)), "bad"
		}
		ry := add(grow{Kind: "line", Label: label, Title: fmt.Sprintf("%s: %d lines", src, len(ls)), Right: right, RightCls: cls, ID: "row-" + src})
		for _, l := range sampleLines(ls, maxMarksPerSource) {
			g.Marks = append(g.Marks, gmark{
				D:     fmt.Sprintf("M%s,%dv%d", num(tx(l.T, span), 2), ry+3, rowH-6),
				Class: lineClass(src),
				Text:  fmt.Sprintf("%s %s · %s", secs(l.T), src, clipLine(l.Text, maxMarkText)),
			})
		}
	}
}

// sampleLines keeps at most n lines, evenly spread over the list.
func sampleLines(ls []runview.Line, n int) []runview.Line {
	if len(ls) <= n {
		return ls
	}
	out := make([]runview.Line, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ls[i*len(ls)/n])
	}
	return out
}

// lineList is the list under the timeline: every line of every source but
// the timeline's own events, at most maxListLines (sampled evenly past it).
func lineList(lines []runview.Line, span float64) (rows []lineRow, note string) {
	var kept []runview.Line
	for _, l := range lines {
		if l.Source != runview.SourceTimeline {
			kept = append(kept, l)
		}
	}
	if len(kept) > maxListLines {
		note = fmt.Sprintf("%d lines; %d of them, spread evenly, are listed here. The files under system/watch, system/metrics and logs have them all.", len(kept), maxListLines)
		kept = sampleLines(kept, maxListLines)
	}
	for _, l := range kept {
		rows = append(rows, lineRow{T: num(l.T, 3), Zoom: zoom(l.T, l.T, span), Source: l.Source, Text: clipLine(l.Text, maxLineLen), Class: lineClass(l.Source)})
	}
	return rows, note
}

func clipLine(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + " …"
}
