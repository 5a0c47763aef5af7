package report

import (
	"fmt"
	"math"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// maxCycleNodes bounds the transactions a cycle graph draws; a longer
// cycle is left to its text witness. Up to circleNodes sit on a circle;
// more, in a column, each edge to the next one an arrow down and the
// others arcs on the left.
const (
	maxCycleNodes = 60
	circleNodes   = 6
	chainGap      = 60.0 // between the rows of the column
)

// maxCycleGraphs bounds the cycle graphs of one page.
const maxCycleGraphs = 50

// cycleGraph is a small SVG of a cycle anomaly's witness: the transactions
// on a circle, each edge an arrow labelled with its kind and the key and
// values that justify it. It is drawn here, in Go, like every other SVG of
// the page: no script and nothing fetched.
type cycleGraph struct {
	ID        string
	W, H      int
	Nodes     []cycleNode
	Edges     []cycleEdge
	Rels      []string // the kinds of edge it has, for its legend
	AriaLabel string
}

type cycleNode struct {
	X, Y, LX, LY, Anchor string
	Name, Label, Title   string
}

type cycleEdge struct {
	D, LX, LY, Anchor, Class, Label, Title string
	// Rel names the edge's arrowhead marker; empty for a kind unknown.
	Rel string
}

// relText is what an edge's label says of each kind.
func relText(e rundir.Edge) string {
	k := clip(e.Key, 16)
	switch e.Rel {
	case "ww":
		return fmt.Sprintf("ww %s: %s→%s", k, clip(e.Value, 10), clip(e.Value2, 10))
	case "wr":
		return fmt.Sprintf("wr %s: %s", k, clip(e.Value, 10))
	case "rw":
		return fmt.Sprintf("rw %s: %s, next %s", k, clip(e.Value, 10), clip(e.Value2, 10))
	case "process", "realtime":
		return e.Rel
	}
	return clip(e.Rel, 12)
}

// relTitle is an edge's tooltip, in words.
func relTitle(e rundir.Edge, a, b string) string {
	switch e.Rel {
	case "ww":
		return fmt.Sprintf("%s → %s, ww: key %s: %s wrote %s, then %s wrote %s after it", a, b, clip(e.Key, 80), a, clip(e.Value, 80), b, clip(e.Value2, 80))
	case "wr":
		return fmt.Sprintf("%s → %s, wr: key %s: %s read the %s that %s wrote", a, b, clip(e.Key, 80), b, clip(e.Value, 80), a)
	case "rw":
		return fmt.Sprintf("%s → %s, rw: key %s: %s read %s, and %s wrote %s, the next version", a, b, clip(e.Key, 80), a, clip(e.Value, 80), b, clip(e.Value2, 80))
	case "process":
		return fmt.Sprintf("%s → %s, process: %s ran before %s on the same process", a, b, a, b)
	case "realtime":
		return fmt.Sprintf("%s → %s, realtime: %s completed before %s began", a, b, a, b)
	}
	return fmt.Sprintf("%s → %s, %s", a, b, clip(e.Rel, 40))
}

var relClass = map[string]string{"ww": "e-ww", "wr": "e-wr", "rw": "e-rw", "process": "e-process", "realtime": "e-realtime"}

// drawCycle lays out a finding's cycle, or returns nil when it has none
// (or one that does not fit, or names operations it does not list).
func drawCycle(id string, f rundir.Finding) *cycleGraph {
	n := len(f.Ops)
	if len(f.Cycle) == 0 || n < 1 || n > maxCycleNodes || len(f.Cycle) > 2*maxCycleNodes {
		return nil
	}
	for _, e := range f.Cycle {
		if e.From < 0 || e.From >= n || e.To < 0 || e.To >= n {
			return nil
		}
	}
	const nodeR = 15.0
	g := &cycleGraph{ID: id}
	pos := make([][2]float64, n)
	chain := n > circleNodes
	// In a column: room on the left for the widest arc and its label.
	colX := 300 + arcBulge(n-1)
	if chain {
		g.W, g.H = int(colX+420), int(30+chainGap*float64(n-1)+30)
	} else {
		// On a circle, the first at the top, clockwise; room around it
		// for the labels.
		r := 60.0 + 14*float64(n)
		if n == 1 {
			r = 0
		}
		g.W, g.H = int(2*(r+200)), int(2*(r+50))
		for i := range pos {
			a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(n)
			pos[i] = [2]float64{r + 200 + r*math.Cos(a), r + 50 + r*math.Sin(a)}
		}
	}
	for i := range pos {
		o := f.Ops[i]
		var lx, ly float64
		anchor := "start"
		if chain {
			pos[i] = [2]float64{colX, 30 + chainGap*float64(i)}
			lx, ly = pos[i][0]+nodeR+8, pos[i][1]+4
		} else {
			// Outside the circle, on the node's side.
			c, s := unit(pos[i][0]-float64(g.W)/2, pos[i][1]-float64(g.H)/2)
			if n == 1 {
				c, s = 0, -1
			}
			lx, ly = pos[i][0]+c*(nodeR+6), pos[i][1]+s*(nodeR+6)+4
			switch {
			case c < -0.3:
				anchor = "end"
			case c <= 0.3:
				anchor = "middle"
			}
			if s > 0.3 {
				ly += 10
			}
		}
		name := fmt.Sprintf("T%d", i+1)
		g.Nodes = append(g.Nodes, cycleNode{
			X: num(pos[i][0], 1), Y: num(pos[i][1], 1), LX: num(lx, 1), LY: num(ly, 1), Anchor: anchor,
			Name:  name,
			Label: clip(fmt.Sprintf("%s/%s line %d", o.Instance, o.Process, o.Line), 40),
			Title: fmt.Sprintf("%s = %s/%s %s %s %s (line %d, t=%s to %s)", name, o.Instance, o.Process, o.F, clip(o.Value, 200), o.Type, o.Line, num(o.Start, 3), num(o.End, 3)),
		})
	}
	seen := map[string]bool{}
	for _, e := range f.Cycle {
		if e.From == e.To {
			continue // a self-loop: the text says it
		}
		a, b := pos[e.From], pos[e.To]
		var d, lx, ly, anchor string
		switch {
		case chain && e.To == e.From+1:
			// Down the column, the label beside the arrow.
			d = fmt.Sprintf("M%s %sL%s %s", num(a[0], 1), num(a[1]+nodeR, 1), num(b[0], 1), num(b[1]-nodeR-3, 1))
			lx, ly, anchor = num(a[0]+10, 1), num((a[1]+b[1])/2+4, 1), "start"
		case chain:
			// An arc on the left, wider the farther it goes.
			bulge := arcBulge(e.To - e.From)
			x := a[0] - bulge
			d = fmt.Sprintf("M%s %sC%s %s %s %s %s %s", num(a[0]-nodeR, 1), num(a[1], 1), num(x, 1), num(a[1], 1), num(x, 1), num(b[1], 1), num(b[0]-nodeR-3, 1), num(b[1], 1))
			// The curve's middle is a quarter of the bulge in from x.
			lx, ly, anchor = num(x+0.25*bulge-6, 1), num((a[1]+b[1])/2+4, 1), "end"
		default:
			dx, dy := b[0]-a[0], b[1]-a[1]
			dist := math.Hypot(dx, dy)
			ux, uy := dx/dist, dy/dist
			// Bent to the left of its direction: outward for the
			// cycle's edges, which run clockwise; an edge back the
			// other way bends inward, so that two do not overlap.
			bend := math.Min(40, dist/4)
			mx, my := (a[0]+b[0])/2+uy*bend, (a[1]+b[1])/2-ux*bend
			// Ends on the nodes' rims, toward the control point.
			sx, sy := unit(mx-a[0], my-a[1])
			ex, ey := unit(mx-b[0], my-b[1])
			x0, y0 := a[0]+sx*nodeR, a[1]+sy*nodeR
			x1, y1 := b[0]+ex*(nodeR+3), b[1]+ey*(nodeR+3)
			d = fmt.Sprintf("M%s %sQ%s %s %s %s", num(x0, 1), num(y0, 1), num(mx, 1), num(my, 1), num(x1, 1), num(y1, 1))
			// At the curve's middle, a little outside.
			lx, ly, anchor = num((x0+2*mx+x1)/4+uy*10, 1), num((y0+2*my+y1)/4-ux*10+4, 1), "middle"
		}
		cls, rel := relClass[e.Rel], e.Rel
		if cls == "" {
			cls, rel = "e-other", ""
		}
		g.Edges = append(g.Edges, cycleEdge{
			D: d, LX: lx, LY: ly, Anchor: anchor, Class: cls,
			Label: relText(e),
			Title: relTitle(e, fmt.Sprintf("T%d", e.From+1), fmt.Sprintf("T%d", e.To+1)),
			Rel:   rel,
		})
		seen[cls] = true
	}
	for _, rel := range []string{"ww", "wr", "rw", "process", "realtime"} {
		if seen[relClass[rel]] {
			g.Rels = append(g.Rels, rel)
		}
	}
	g.AriaLabel = fmt.Sprintf("cycle of %d transactions: %s", n, clip(f.Kind, 40))
	return g
}

func unit(x, y float64) (float64, float64) {
	d := math.Hypot(x, y)
	if d == 0 {
		return 0, 0
	}
	return x / d, y / d
}

// arcBulge is how far left of the column an arc between rows d apart
// reaches.
func arcBulge(d int) float64 {
	if d < 0 {
		d = -d
	}
	return 30 + 3*float64(d)
}
