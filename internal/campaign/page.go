package campaign

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
)

//go:embed campaign.html.tmpl
var pageTemplate string

// pageTmpl is parsed when a page is first written, not when the binary
// starts: every command would pay for it.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("campaign").Funcs(template.FuncMap{
		"pct": stats.Percent,
		"f1":  func(x float64) string { return fmt.Sprintf("%.1f", x) },
		"f2":  func(x float64) string { return fmt.Sprintf("%.2f", x) },
	}).Parse(pageTemplate))
})

// WritePage renders campaign.html into dir, atomically.
func WritePage(dir string, f *File) error {
	data, err := Page(f)
	if err != nil {
		return err
	}
	return rundir.WriteFileAtomic(filepath.Join(dir, PageName), data)
}

// Page renders a campaign as one self-contained HTML page: no script, no
// network; the charts are SVG drawn here.
func Page(f *File) ([]byte, error) {
	p := buildPage(f)
	var b bytes.Buffer
	if err := pageTmpl().Execute(&b, p); err != nil {
		return nil, fmt.Errorf("rendering the campaign page: %w", err)
	}
	return b.Bytes(), nil
}

// Geometry of the charts, in SVG user units.
const (
	pgW    = 1100
	pgL    = 120 // labels left of the plot
	pgPlot = 940
	laneH  = 12
)

type pageData struct {
	F          *File
	Title      string
	Worst      string
	WorstCls   string
	Facts      [][2]string
	Verdicts   []vcount
	Sum        *Summary
	Durations  Durations
	Instances  []Count
	Runs       []pageRun
	RunsNote   string
	Lanes      *laneChart
	RateChart  *rateChart
	Hist       *histChart
	Checks     []rateRow
	Flaky      []rateRow
	Throughput string
}

type vcount struct {
	Verdict, Cls string
	N            int
}

type pageRun struct {
	Run
	Link     string
	Cls      string
	SeedText string
}

type rateRow struct {
	Name, Issue string
	Rate
	Runs int
	Bar  template.HTML
}

func verdictClass(v string) string {
	switch v {
	case rundir.VerdictPass:
		return "pass"
	case rundir.VerdictXFail:
		return "xfail"
	case rundir.VerdictFail:
		return "fail"
	case rundir.VerdictError:
		return "error"
	case rundir.VerdictInconclusive:
		return "inconclusive"
	}
	return "none"
}

func buildPage(f *File) *pageData {
	p := &pageData{F: f, Title: f.Experiment.Title}
	if p.Title == "" {
		p.Title = f.Experiment.ID
	}
	p.Worst = Worst(f.Counts)
	if len(f.Runs) == 0 {
		p.Worst = "no runs"
	}
	p.WorstCls = verdictClass(p.Worst)
	add := func(k, v string) {
		if v != "" {
			p.Facts = append(p.Facts, [2]string{k, v})
		}
	}
	add("campaign", f.ID)
	add("label", f.Label)
	add("experiment", fmt.Sprintf("%s v%d (sha256 %s)", f.Experiment.ID, f.Experiment.Version, short(f.Experiment.SHA256)))
	add("adapter", fmt.Sprintf("%s (%s backend)", f.Adapter.ID, f.Adapter.Backend))
	build := f.Build.Harness
	if f.Build.Git != "" {
		build += ", experiment at git " + f.Build.Git
	}
	add("build", build)
	add("seed", fmt.Sprint(f.Seed))
	var set []string
	if f.Settings.Count > 0 {
		set = append(set, fmt.Sprintf("--count %d", f.Settings.Count))
	}
	if f.Settings.For != "" {
		set = append(set, "--for "+f.Settings.For)
	}
	set = append(set, fmt.Sprintf("--parallel %d", f.Settings.Parallel))
	if f.Settings.Until != "" {
		set = append(set, "--until "+f.Settings.Until)
	}
	set = append(set, "--keep "+f.Settings.Keep, "runner "+f.Settings.Runner)
	add("settings", strings.Join(set, " "))
	add("started", f.Started.Format(time.RFC3339))
	add("took", (time.Duration(f.Seconds * float64(time.Second))).Round(time.Second).String())
	add("state", f.State+stopText(f.Stop))
	add("host", f.Host)
	if len(f.Settings.Command) > 0 {
		add("command", rundir.ShellLine(f.Settings.Command...))
	}
	for _, v := range []string{rundir.VerdictPass, rundir.VerdictXFail, rundir.VerdictFail, rundir.VerdictInconclusive, rundir.VerdictError} {
		if f.Counts[v] > 0 {
			p.Verdicts = append(p.Verdicts, vcount{v, verdictClass(v), f.Counts[v]})
		}
	}
	p.Sum = Summarize(f.Entries())
	p.Durations = RunDurations(f.Runs)
	p.Instances = InstanceHits(f.Runs)
	if f.Seconds > 0 && len(f.Runs) > 0 {
		p.Throughput = fmt.Sprintf("%.2f runs a minute", float64(len(f.Runs))/f.Seconds*60)
	}
	shown := pickRuns(f.Runs, limits.MaxCampaignPageRuns)
	for _, r := range shown {
		pr := pageRun{Run: r, Cls: verdictClass(r.Verdict), SeedText: fmt.Sprint(r.Seed)}
		if r.Kept && r.Path != "" {
			pr.Link = path.Join(filepath.ToSlash(r.Path), "report.html")
		}
		p.Runs = append(p.Runs, pr)
	}
	if len(shown) < len(f.Runs) {
		p.RunsNote = fmt.Sprintf("The table shows %d of the %d runs: every run with a hit or an error, then the first ones; campaign.json lists them all.", len(shown), len(f.Runs))
	}
	for _, c := range p.Sum.Checks {
		p.Checks = append(p.Checks, rateRow{Name: c.Check, Rate: c.Rate, Runs: c.Runs, Bar: ciBar(c.Rate)})
	}
	for _, c := range p.Sum.Flaky {
		p.Flaky = append(p.Flaky, rateRow{Name: c.Check, Issue: c.Issue, Rate: c.Rate, Runs: c.Runs, Bar: ciBar(c.Rate)})
	}
	p.Lanes = buildLanes(f)
	p.RateChart = buildRateChart(f)
	p.Hist = buildHist(f)
	return p
}

func stopText(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// ciBar draws a rate's interval on a 0–max scale as a small inline SVG:
// the interval as a bar, the estimate as a tick.
func ciBar(r Rate) template.HTML {
	if r.Of == 0 {
		return ""
	}
	const w, h = 160.0, 12.0
	// The scale is the upper end of the interval, rounded up to a nice
	// number, so small rates are not a sliver.
	scale := niceCeil(math.Max(r.Hi, 0.01))
	x := func(v float64) float64 { return v / scale * w }
	return template.HTML(fmt.Sprintf(`<svg class="ci" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s"><rect x="0" y="5" width="%g" height="2" fill="#e2e8f0"/><rect x="%.1f" y="2" width="%.1f" height="8" rx="2" fill="#93c5fd"/><rect x="%.1f" y="0" width="2" height="12" fill="#1d4ed8"/><text x="%g" y="11" text-anchor="end" font-size="9" fill="#94a3b8">%s</text></svg>`,
		w+34, h, w+34, h, template.HTMLEscapeString(r.String()), w, x(r.Lo), math.Max(1, x(r.Hi)-x(r.Lo)), math.Max(0, x(r.P())-1), w+34, template.HTMLEscapeString(stats.Percent(scale))))
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten.
func niceCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= x-1e-12 {
			return math.Min(1, m*e)
		}
	}
	return 1
}

// laneChart is every run as a bar from its start to its end, in lanes
// (one per run under way at once), coloured by verdict: the verdicts over
// time, and how busy the campaign was.
type laneChart struct {
	H     int
	Bars  []laneBar
	Ticks []tick
	Lanes int
}

type laneBar struct {
	X, Y, W float64
	Cls     string
	Title   string
	Hit     bool
}

type tick struct {
	X     float64
	Label string
}

func campaignSpan(f *File) float64 {
	span := f.Seconds
	for _, r := range f.Runs {
		span = math.Max(span, r.Offset+r.Wall)
	}
	return math.Max(span, 1)
}

func timeTicks(span float64) []tick {
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 10 {
			step = s
			break
		}
	}
	var out []tick
	for t := 0.0; t <= span+1e-9; t += step {
		out = append(out, tick{X: pgL + t/span*pgPlot, Label: clock(t)})
	}
	return out
}

func clock(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d", m, sec)
}

func buildLanes(f *File) *laneChart {
	if len(f.Runs) == 0 {
		return nil
	}
	span := campaignSpan(f)
	runs := pickRuns(f.Runs, limits.MaxCampaignPageRuns)
	sort.Slice(runs, func(i, j int) bool { return runs[i].Offset < runs[j].Offset })
	var laneEnd []float64
	c := &laneChart{Ticks: timeTicks(span)}
	for _, r := range runs {
		lane := -1
		for i, end := range laneEnd {
			if end <= r.Offset+1e-6 {
				lane = i
				break
			}
		}
		if lane < 0 && len(laneEnd) >= maxLanes {
			// More runs at once than lanes: the one that ends first is
			// drawn over.
			lane = 0
			for i, end := range laneEnd {
				if end < laneEnd[lane] {
					lane = i
				}
			}
		}
		if lane < 0 {
			lane = len(laneEnd)
			laneEnd = append(laneEnd, 0)
		}
		laneEnd[lane] = r.Offset + r.Wall
		title := fmt.Sprintf("#%d %s %s %.1fs", r.Index, r.RunID, r.Verdict, r.Wall)
		if len(r.HitChecks) > 0 {
			title += " hit " + strings.Join(r.HitChecks, ", ")
		}
		c.Bars = append(c.Bars, laneBar{X: pgL + r.Offset/span*pgPlot, Y: float64(lane*laneH + 4), W: math.Max(1.5, r.Wall/span*pgPlot-0.5), Cls: verdictClass(r.Verdict), Title: title, Hit: r.Hit})
	}
	c.Lanes = len(laneEnd)
	c.H = c.Lanes*laneH + 26
	return c
}

// rateChart is the run-level hit rate after each finished run, with its
// Wilson band: how the estimate settled.
type rateChart struct {
	H          int
	Line, Band string
	YTicks     []ytick
	Ticks      []tick
	Final      string
	Top        float64
}

type ytick struct {
	Y     float64
	Label string
}

func buildRateChart(f *File) *rateChart {
	runs := append([]Run(nil), f.Runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].Offset+runs[i].Wall < runs[j].Offset+runs[j].Wall })
	const h = 160.0
	span := campaignSpan(f)
	type pt struct{ t, p, lo, hi float64 }
	var pts []pt
	hit, of := 0, 0
	for _, r := range runs {
		if !Decided(r.Verdict) || NoChance(r.Entry) {
			continue
		}
		of++
		if r.Hit {
			hit++
		}
		rt := NewRate(hit, of)
		pts = append(pts, pt{r.Offset + r.Wall, rt.P(), rt.Lo, rt.Hi})
	}
	if len(pts) == 0 {
		return nil
	}
	pts = thinPoints(pts, limits.MaxCampaignPageRuns)
	top := 0.0
	for _, q := range pts[min(len(pts)-1, 4):] { // the first few intervals are wide; do not let them squash the rest
		top = math.Max(top, q.hi)
	}
	top = niceCeil(math.Max(top, pts[len(pts)-1].hi*1.1))
	x := func(t float64) float64 { return pgL + t/span*pgPlot }
	y := func(v float64) float64 { return 8 + (1-math.Min(v, top)/top)*(h-30) }
	var line, upper, lower strings.Builder
	for i, q := range pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&line, "%s%.1f,%.1f", cmd, x(q.t), y(q.p))
		fmt.Fprintf(&upper, "%s%.1f,%.1f", cmd, x(q.t), y(q.hi))
	}
	for i := len(pts) - 1; i >= 0; i-- {
		fmt.Fprintf(&lower, "L%.1f,%.1f", x(pts[i].t), y(pts[i].lo))
	}
	c := &rateChart{H: int(h), Line: line.String(), Band: upper.String() + lower.String() + "Z", Ticks: timeTicks(span), Top: top}
	for _, v := range []float64{0, top / 2, top} {
		c.YTicks = append(c.YTicks, ytick{Y: y(v), Label: stats.Percent(v)})
	}
	c.Final = NewRate(hit, of).String()
	return c
}

// histChart is the run durations as a histogram, stacked by verdict.
type histChart struct {
	H      int
	Bars   []histBar
	Ticks  []tick
	YTicks []ytick
}

type histBar struct {
	X, Y, W, H float64
	Cls        string
	Title      string
}

func buildHist(f *File) *histChart {
	var lo, hi float64
	n := 0
	for _, r := range f.Runs {
		if r.Wall <= 0 {
			continue
		}
		if n == 0 || r.Wall < lo {
			lo = r.Wall
		}
		hi = math.Max(hi, r.Wall)
		n++
	}
	if n == 0 {
		return nil
	}
	const bins, h = 40, 140.0
	lo = math.Floor(lo*10) / 10
	width := math.Max((hi-lo)/bins, 0.001)
	order := []string{rundir.VerdictPass, rundir.VerdictXFail, rundir.VerdictFail, rundir.VerdictInconclusive, rundir.VerdictError}
	counts := make([]map[string]int, bins)
	for i := range counts {
		counts[i] = map[string]int{}
	}
	for _, r := range f.Runs {
		if r.Wall <= 0 {
			continue
		}
		b := min(bins-1, int((r.Wall-lo)/width))
		counts[b][r.Verdict]++
	}
	most := 1
	for _, c := range counts {
		t := 0
		for _, v := range c {
			t += v
		}
		most = max(most, t)
	}
	c := &histChart{H: int(h)}
	bw := float64(pgPlot) / bins
	for i, m := range counts {
		base := h - 20
		for _, v := range order {
			if m[v] == 0 {
				continue
			}
			bh := float64(m[v]) / float64(most) * (h - 30)
			base -= bh
			c.Bars = append(c.Bars, histBar{X: pgL + float64(i)*bw + 0.5, Y: base, W: bw - 1, H: bh, Cls: verdictClass(v),
				Title: fmt.Sprintf("%.2fs to %.2fs: %d %s", lo+float64(i)*width, lo+float64(i+1)*width, m[v], v)})
		}
	}
	for i := 0; i <= 4; i++ {
		v := lo + float64(i)*width*bins/4
		c.Ticks = append(c.Ticks, tick{X: pgL + float64(i)*pgPlot/4, Label: fmt.Sprintf("%.2fs", v)})
	}
	c.YTicks = []ytick{{Y: h - 20, Label: "0"}, {Y: 10, Label: fmt.Sprint(most)}}
	return c
}

// maxLanes bounds the lanes of the lane chart (the runs under way at once
// it draws apart).
const maxLanes = 64

// pickRuns is at most n of runs, in their order: every run with a hit or
// an error first, then the first others.
func pickRuns(runs []Run, n int) []Run {
	if len(runs) <= n {
		return append([]Run(nil), runs...)
	}
	keep := make([]bool, len(runs))
	k := 0
	for i, r := range runs {
		if k < n && (r.Hit || r.Error != "") {
			keep[i] = true
			k++
		}
	}
	for i := range runs {
		if k < n && !keep[i] {
			keep[i] = true
			k++
		}
	}
	out := make([]Run, 0, n)
	for i, r := range runs {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out
}

// thinPoints keeps at most n of pts, evenly, the last one always: the
// rate's line needs no more points than the page has pixels.
func thinPoints[T any](pts []T, n int) []T {
	if len(pts) <= n || n < 2 {
		return pts
	}
	out := make([]T, 0, n)
	for i := 0; i < n-1; i++ {
		out = append(out, pts[i*(len(pts)-1)/(n-1)])
	}
	return append(out, pts[len(pts)-1])
}
