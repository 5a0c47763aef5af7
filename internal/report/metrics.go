package report

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// Chart geometry.
const (
	chartTop    = 8
	chartPlotH  = 110
	chartHeight = chartTop + chartPlotH + 24
)

// chart is one metric family's chart, ready to print.
type chart struct {
	// W, L and P are the page's geometry (the chart template's).
	W, L, P                        int
	ID, Family, Source, Type, Mode string
	Focus                          bool
	Height, PlotTop, PlotH         int
	AxisY, GridBot, ClipTop, ClipH int
	Series                         []series
	Total, More                    int
	MoreNames                      string
	YTicks                         []tick // X holds the y position
	Ticks                          []tick
	// Bands are the operation bands, the same for every chart: the
	// page draws them once (page.ChartBands) and each chart uses them.
	Bands []gbar
	Note  string
	// Fails mark the failed scrapes of the chart's source along its
	// bottom.
	Fails []gmark
	// Steady is the focus family's before and after summary.
	Steady []steadyRow

	src     string
	pending []drawn
	ymap    func(float64) float64
}

type series struct {
	// D is the series' lines; Dots its points that have no neighbour.
	D, Dots, Class, Label, Stats string
}

type pt struct{ t, v float64 }

// acc collects one series over the scrapes; a NaN value marks a gap.
type acc struct {
	key  string
	pts  []pt
	last int
}

func (a *acc) add(i int, t, v float64) {
	if a.last >= 0 && a.last != i-1 && len(a.pts) > 0 {
		a.pts = append(a.pts, pt{t, math.NaN()})
	}
	a.pts = append(a.pts, pt{t, v})
	a.last = i
}

type family struct {
	name, source, typ string
	series            map[string]*acc
	order             []*acc
}

// buildCharts draws every family of every source: the experiment's focus
// families first, in the order it lists them, then the rest by name.
func buildCharts(r *runview.Run, span float64) (charts []*chart, missing []string, note string) {
	var fams []*family
	for _, src := range r.Sources {
		fs, bad, err := readFamilies(r.Dir, src, r.Types(src))
		if err != nil {
			note += fmt.Sprintf("system/metrics/%s.jsonl could not be read: %v. ", src, err)
		}
		if bad > 0 {
			note += fmt.Sprintf("%d line(s) of system/metrics/%s.jsonl could not be parsed and were skipped. ", bad, src)
		}
		fams = append(fams, fs...)
	}
	var focus []string
	if r.Experiment != nil {
		focus = r.Experiment.Metrics
	}
	charts, missing, more := layoutCharts(fams, focus, r.Operations, span, len(r.Sources) > 1)
	fails := r.FailedScrapes()
	for _, c := range charts {
		for i, f := range fails[c.src] {
			if i >= maxMarksPerSource {
				break
			}
			c.Fails = append(c.Fails, gmark{
				D:     fmt.Sprintf("M%s,%dv%d", num(tx(f.T, span), 2), chartTop+chartPlotH-10, 10),
				Class: "lm fs",
				Text:  fmt.Sprintf("%s scrape of %s failed: %s", secs(f.T), c.src, clipLine(f.Error, maxMarkText)),
			})
		}
	}
	return charts, missing, strings.TrimSpace(note + more)
}

// layoutCharts orders the families, picks the series each chart draws and
// draws them within the page's budget of points.
func layoutCharts(fams []*family, focus []string, ops []runview.OpRun, span float64, showSource bool) (charts []*chart, missing []string, note string) {
	rank := map[string]int{}
	for i, f := range focus {
		if _, ok := rank[f]; !ok {
			rank[f] = i
		}
	}
	found := map[string]bool{}
	for _, f := range fams {
		found[f.name] = true
	}
	for _, f := range focus {
		if !found[f] {
			missing = append(missing, f)
		}
	}
	sort.SliceStable(fams, func(i, j int) bool {
		ri, fi := rank[fams[i].name]
		rj, fj := rank[fams[j].name]
		if fi != fj {
			return fi
		}
		if fi && ri != rj {
			return ri < rj
		}
		if fams[i].name != fams[j].name {
			return fams[i].name < fams[j].name
		}
		return fams[i].source < fams[j].source
	})
	var bands []gbar
	for i, op := range ops {
		if i >= limits.MaxReportBands {
			break
		}
		bands = append(bands, gbar{
			X: num(tx(op.Start, span), 2), W: num(math.Max(0, tx(op.End, span)-tx(op.Start, span)), 2),
			Y: itoa(chartTop), H: itoa(chartPlotH), Title: opTitle(op),
		})
	}
	axis := ticks(0, span, span)
	for i, f := range fams {
		_, isFocus := rank[f.name]
		c := drawChart(f, span, showSource)
		c.ID = "chart-" + strconv.Itoa(i)
		c.W, c.L, c.P = svgW, gutL, plotW
		c.Focus = isFocus
		c.Bands = bands
		c.Ticks = axis
		charts = append(charts, c)
	}
	// However many families and series, the page stays small: past a
	// budget of points, every series gets fewer buckets.
	nb, total := buckets, 0
	for _, c := range charts {
		total += len(c.pending)
	}
	if total > 0 && total*2*buckets > maxPoints {
		nb = max(minBuckets, maxPoints/(2*total))
		note += fmt.Sprintf("%d series are drawn in all, so each keeps at most %d points (the lowest and highest of each of %d stretches of time). ", total, 2*nb, nb)
	}
	for _, c := range charts {
		if c.Focus {
			c.Steady = steadySummary(c, ops)
		}
		c.draw(span, nb)
	}
	return charts, missing, note
}

// scrape is the part of a line of system/metrics/<name>.jsonl that charts
// need (rundir.Scrape without buckets, quantiles and sums, which decoding
// would only allocate to throw away: a long run has thousands of scrapes).
type scrape struct {
	T        float64                  `json:"t"`
	Families map[string]*scrapeFamily `json:"families"`
}

type scrapeFamily struct {
	Type    string         `json:"type"`
	Samples []scrapeSample `json:"samples"`
}

type scrapeSample struct {
	Labels map[string]string `json:"labels"`
	Value  *jsonFloat        `json:"value"`
	Count  *float64          `json:"count"`
}

// jsonFloat reads a number, or the strings "+Inf", "-Inf" and "NaN" that
// rundir writes for values JSON lacks.
type jsonFloat float64

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		switch string(b) {
		case `"+Inf"`, `"Inf"`:
			*f = jsonFloat(math.Inf(1))
		case `"-Inf"`:
			*f = jsonFloat(math.Inf(-1))
		default:
			*f = jsonFloat(math.NaN())
		}
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*f = jsonFloat(v)
	return nil
}

// readFamilies reads a metrics source one scrape at a time into one raw
// series per family and label set. Lines that do not parse (a torn last
// line) are skipped and counted.
func readFamilies(d *rundir.Dir, source string, types map[string]string) (out []*family, bad int, err error) {
	byName := map[string]*family{}
	var kb strings.Builder
	var keys []string
	nseries, scrapes := 0, 0
	err = d.Lines(rundir.MetricsFile(source), limits.MaxJSONLBytes, limits.MaxScrapeLineBytes, func(line int, b []byte) error {
		i := line - 1
		var s scrape
		if json.Unmarshal(b, &s) != nil {
			bad++
			return nil
		}
		if scrapes++; scrapes > limits.MaxScrapes {
			return &rundir.LimitError{Msg: fmt.Sprintf("more than %d scrapes, the most the harness reads", limits.MaxScrapes)}
		}
		if err := rundir.CheckSeconds(s.T); err != nil {
			return &rundir.LimitError{Msg: fmt.Sprintf("line %d: %v", line, err)}
		}
		for name, f := range s.Families {
			if f == nil {
				continue
			}
			fam := byName[name]
			if fam == nil {
				typ := f.Type
				if typ == "" {
					typ = types[name]
				}
				if typ == "" {
					typ = "untyped"
				}
				fam = &family{name: name, source: source, typ: typ, series: map[string]*acc{}}
				byName[name] = fam
				out = append(out, fam)
			}
			for j := range f.Samples {
				smp := &f.Samples[j]
				v, ok := sampleValue(fam.typ, smp)
				if !ok {
					continue
				}
				kb.Reset()
				keys = keys[:0]
				for k := range smp.Labels {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for n, k := range keys {
					if n > 0 {
						kb.WriteString(", ")
					}
					kb.WriteString(k)
					kb.WriteString(`="`)
					kb.WriteString(smp.Labels[k])
					kb.WriteByte('"')
				}
				a := fam.series[kb.String()]
				if a == nil {
					if nseries++; nseries > limits.MaxSeries {
						return &rundir.LimitError{Msg: fmt.Sprintf("more than %d series, the most the harness reads from one source", limits.MaxSeries)}
					}
					a = &acc{key: kb.String(), last: -1}
					fam.series[a.key] = a
					fam.order = append(fam.order, a)
				}
				a.add(i, s.T, v)
			}
		}
		return nil
	})
	if err != nil {
		return nil, bad, err
	}
	return out, bad, nil
}

// sampleValue is what a chart plots for a sample: the value of counters,
// gauges and untyped samples, the observation count of histograms and
// summaries.
func sampleValue(typ string, s *scrapeSample) (float64, bool) {
	var v float64
	switch {
	case (typ == "histogram" || typ == "summary" || s.Value == nil) && s.Count != nil:
		v = *s.Count
	case s.Value != nil:
		v = float64(*s.Value)
	default:
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// mode says what the chart plots, for its subtitle.
func mode(typ string) string {
	switch typ {
	case "counter":
		return "counter · per-second rate between scrapes"
	case "histogram", "summary":
		return typ + " · observation count (cumulative)"
	case "gauge":
		return "gauge · value"
	}
	return typ + " · value"
}

// rate turns a counter's values into per-second rates between consecutive
// scrapes; a counter that went down was reset and counts from zero.
func rate(in []pt) []pt {
	out := make([]pt, 0, len(in))
	var prev pt
	have := false
	for _, p := range in {
		if math.IsNaN(p.v) {
			if have && len(out) > 0 && !math.IsNaN(out[len(out)-1].v) {
				out = append(out, p)
			}
			have = false
			continue
		}
		if have {
			if dt := p.t - prev.t; dt > 0 {
				d := p.v - prev.v
				if d < 0 {
					d = p.v
				}
				out = append(out, pt{p.t, d / dt})
			}
		}
		prev, have = p, true
	}
	return out
}

type drawn struct {
	key            string
	pts            []pt
	lo, hi, last   float64
	peak           float64
	hasLast, valid bool
}

func drawChart(f *family, span float64, showSource bool) *chart {
	c := &chart{
		Family: f.name, Type: f.typ, Mode: mode(f.typ),
		Height: chartHeight, PlotTop: chartTop, PlotH: chartPlotH, AxisY: chartTop + chartPlotH + 16, GridBot: chartTop + chartPlotH,
		// Lines on the top or bottom gridline keep their whole stroke.
		ClipTop: chartTop - 4, ClipH: chartPlotH + 8,
		Total: len(f.order),
	}
	c.src = f.source
	if showSource {
		c.Source = f.source
	}
	var all []drawn
	for _, a := range f.order {
		pts := a.pts
		if f.typ == "counter" {
			pts = rate(pts)
		}
		d := drawn{key: a.key, pts: pts, lo: math.Inf(1), hi: math.Inf(-1)}
		for _, p := range pts {
			if math.IsNaN(p.v) {
				continue
			}
			d.valid = true
			d.lo = math.Min(d.lo, p.v)
			d.hi = math.Max(d.hi, p.v)
			d.last, d.hasLast = p.v, true
		}
		if d.valid {
			d.peak = math.Max(math.Abs(d.lo), math.Abs(d.hi))
			all = append(all, d)
		}
	}
	if len(all) == 0 {
		c.Note = "no values to plot"
		if f.typ == "counter" {
			c.Note = "no rate to plot (fewer than two scrapes of each series)"
		}
		return c
	}
	// The busiest series are drawn; the rest are named.
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].peak != all[j].peak {
			return all[i].peak > all[j].peak
		}
		return all[i].key < all[j].key
	})
	if len(all) > maxSeries {
		var names []string
		for _, d := range all[maxSeries:] {
			names = append(names, label(d.key))
		}
		c.More = len(all) - maxSeries
		if len(names) > 50 {
			names = append(names[:50], fmt.Sprintf("… %d more", len(names)-50))
		}
		c.MoreNames = strings.Join(names, "\n")
		all = all[:maxSeries]
	}
	c.Total = len(f.order)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, d := range all {
		lo, hi = math.Min(lo, d.lo), math.Max(hi, d.hi)
	}
	lo, hi, step := niceScale(lo, hi)
	ymap := func(v float64) float64 { return chartTop + chartPlotH - (v-lo)/(hi-lo)*chartPlotH }
	// By index, not by adding step: at magnitudes where step is below the
	// numbers' precision, v += step would never reach hi.
	for i := 0; i <= 12; i++ {
		v := lo + float64(i)*step
		if v > hi+step/2 {
			break
		}
		c.YTicks = append(c.YTicks, tick{X: num(ymap(v), 1), Label: value(v, step)})
	}
	c.pending, c.ymap = all, ymap
	return c
}

// draw turns the chosen series into paths of at most 2*nb points.
func (c *chart) draw(span float64, nb int) {
	for i, d := range c.pending {
		line, dots := path(d.pts, span, nb, c.ymap)
		c.Series = append(c.Series, series{
			D:     line,
			Dots:  dots,
			Class: "s" + strconv.Itoa(i),
			Label: label(d.key),
			Stats: fmt.Sprintf("min %s · max %s · last %s", value(d.lo, 0), value(d.hi, 0), value(d.last, 0)),
		})
	}
	c.pending, c.ymap = nil, nil
}

func label(key string) string {
	if key == "" {
		return "(no labels)"
	}
	return "{" + key + "}"
}

// path draws a series, at most two points (the minimum and the maximum, in
// time order) per time bucket, so a spike survives however long the run;
// flat stretches keep only their ends. A point alone between gaps goes to
// dots, drawn as a dot.
func path(pts []pt, span float64, nb int, ymap func(float64) float64) (line, dots string) {
	var b, db strings.Builder
	b.Grow(len(pts) * 8)
	var xs, ys []string
	flush := func() {
		if len(xs) == 0 {
			return
		}
		if len(xs) == 1 {
			db.WriteString("M")
			db.WriteString(xs[0])
			db.WriteByte(',')
			db.WriteString(ys[0])
			db.WriteString("h0")
			xs, ys = xs[:0], ys[:0]
			return
		}
		b.WriteString("M")
		b.WriteString(xs[0])
		b.WriteByte(',')
		b.WriteString(ys[0])
		for i := 1; i < len(xs); i++ {
			// A point between two at the same height adds nothing.
			if i+1 < len(xs) && ys[i] == ys[i-1] && ys[i] == ys[i+1] {
				continue
			}
			if xs[i] == xs[i-1] && ys[i] == ys[i-1] {
				continue
			}
			b.WriteByte(' ')
			b.WriteString(xs[i])
			b.WriteByte(',')
			b.WriteString(ys[i])
		}
		xs, ys = xs[:0], ys[:0]
	}
	emit := func(p pt) {
		xs = append(xs, num(tx(p.t, span), 1))
		ys = append(ys, num(ymap(p.v), 1))
	}
	bucket := func(t float64) int {
		k := int(t / span * float64(nb))
		return min(max(k, 0), nb)
	}
	for i := 0; i < len(pts); {
		if math.IsNaN(pts[i].v) {
			flush()
			i++
			continue
		}
		// One bucket of consecutive points.
		k := bucket(pts[i].t)
		j := i
		lo, hi := i, i
		for j < len(pts) && !math.IsNaN(pts[j].v) && bucket(pts[j].t) == k {
			if pts[j].v < pts[lo].v {
				lo = j
			}
			if pts[j].v > pts[hi].v {
				hi = j
			}
			j++
		}
		switch {
		case j-i <= 2:
			for n := i; n < j; n++ {
				emit(pts[n])
			}
		case lo == hi:
			emit(pts[lo])
		case lo < hi:
			emit(pts[lo])
			emit(pts[hi])
		default:
			emit(pts[hi])
			emit(pts[lo])
		}
		i = j
	}
	flush()
	return b.String(), db.String()
}

// niceScale widens [lo, hi] to round numbers and picks a step for about
// four gridlines. Data close to zero gets zero as its baseline.
func niceScale(lo, hi float64) (float64, float64, float64) {
	if lo >= 0 && lo <= hi/2 {
		lo = 0
	}
	if hi == lo {
		if hi == 0 {
			hi = 1
		} else {
			d := math.Abs(hi) * 0.1
			lo, hi = lo-d, hi+d
			if lo < 0 && hi > 0 && lo > -d*2 {
				lo = 0
			}
		}
	}
	step := niceNum((hi - lo) / 4)
	lo = math.Floor(lo/step+1e-9) * step
	hi = math.Ceil(hi/step-1e-9) * step
	if hi <= lo {
		hi = lo + step
	}
	return lo, hi, step
}

func niceNum(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	e := math.Floor(math.Log10(x))
	f := x / math.Pow(10, e)
	var n float64
	switch {
	case f <= 1:
		n = 1
	case f <= 2:
		n = 2
	case f <= 2.5:
		n = 2.5
	case f <= 5:
		n = 5
	default:
		n = 10
	}
	return n * math.Pow(10, e)
}

// value prints a number compactly: 12, 0.25, 1.5k, 3.2M. step, when not
// zero, is the axis step, so labels show the digits that tell ticks apart.
func value(v, step float64) string {
	a := math.Abs(v)
	if step != 0 {
		a = math.Max(a, math.Abs(step))
	}
	suffix, scale := "", 1.0
	switch {
	case a >= 1e12:
		suffix, scale = "T", 1e12
	case a >= 1e9:
		suffix, scale = "G", 1e9
	case a >= 1e6:
		suffix, scale = "M", 1e6
	case a >= 1e4:
		suffix, scale = "k", 1e3
	}
	x := v / scale
	dec := 2
	if step != 0 {
		s := step / scale
		dec = 0
		for s < 1-1e-9 && dec < 6 {
			s *= 10
			dec++
		}
		if math.Abs(s-math.Round(s)) > 1e-6 && dec < 6 {
			dec++ // 2.5, 0.25
		}
	} else if math.Abs(x) < 1 && x != 0 {
		return strconv.FormatFloat(x, 'g', 3, 64) + suffix
	}
	return num(x, dec) + suffix
}
