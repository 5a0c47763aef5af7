// Package report renders a run directory as report.html: one self-contained
// page (no network, no fonts, no CDN) with the verdict, a zoomable Gantt
// timeline of the flow, the operations and every instance's states, a chart
// of every metric family on the same time axis, the check table, the inputs
// and links to every log. It reads the run through runview only, so it
// works on a copy of a run directory anywhere, and it renders on the server
// side: html/template escapes everything that came from workloads, logs and
// manifests, and the SVG is drawn in Go. A small inline script adds zoom,
// pan and a time cursor; without it the page still reads.
package report

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"math"
	"net/url"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// FileName is the report's name inside the run directory; rundir's
// ReportFile is its path.
const FileName = "report.html"

// Geometry shared by the timeline and every chart, in SVG user units. Every
// SVG has the same width and plot area, so a time reads at the same x in all
// of them.
const (
	svgW  = 1300 // whole width: room right of the plot for how an instance ended
	gutL  = 190  // labels left of the plot
	plotW = 1000 // the plot: the run's whole time span at zoom 1
	gutR  = svgW - gutL - plotW
)

// Limits that keep the report small for long runs.
const (
	maxSeries  = 10     // series drawn per chart
	buckets    = 300    // time buckets per series; min and max of each are kept
	minBuckets = 60     // the fewest buckets, however many series
	maxPoints  = 240000 // points in all charts together (about 3 MB)

	maxDetail      = 16 << 10  // bytes of a check's detail shown
	maxDetailShort = 1 << 10   // ... once the details shown reach maxDetails
	maxDetails     = 1 << 20   // bytes of check details in all
	tailLines      = 40        // lines of each log shown
	tailBytes      = 64 << 10  // bytes read from the end of each log
	maxTail        = 8 << 10   // bytes shown of each log
	maxTails       = 512 << 10 // bytes of logs shown in all
	maxInputSize   = 256 << 10
	maxLineLen     = 2000
)

//go:embed page.html.tmpl
var pageTemplate string

// tmpl is parsed when a report is first written, not when the binary
// starts: every command would pay for it.
var tmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Parse(pageTemplate))
})

// Prepare parses the page template and has html/template escape it, on an
// empty page, in the background. A run calls it as it starts: the 2 to 3 ms
// this takes then overlap the run's waits on its processes instead of
// following its verdict.
func Prepare() {
	go func() { _ = tmpl().Execute(io.Discard, &page{}) }()
}

// WriteFile renders the run's report to RUN/report.html (r.Dir.ReportFile()),
// atomically: a reader sees the old page or the new one, never half of one.
//
// When the run's context ended while the page was made (a signal), no
// page is written: one made of what was read before would look whole.
func WriteFile(r *runview.Run) error {
	var buf bytes.Buffer
	if err := Write(&buf, r); err != nil {
		return err
	}
	if ctx := r.Context(); ctx.Err() != nil {
		return fmt.Errorf("%s not written: %w", FileName, context.Cause(ctx))
	}
	return r.Dir.WriteFile(FileName, buf.Bytes())
}

// Write renders the run's report to w, with r.Redact's secrets replaced
// in every form the page holds them.
func Write(w io.Writer, r *runview.Run) error {
	p := build(r)
	var buf bytes.Buffer
	bw := bufio.NewWriterSize(&buf, 64<<10)
	if err := tmpl().Execute(bw, p); err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(r.Redact.HTML(buf.Bytes()))
	return err
}

// page is everything the template shows.
type page struct {
	Title        string
	Verdict      string
	VerdictClass string
	ExperimentID string
	Version      string
	RunID        string
	Duration     string
	Started      string
	Adapter      string
	Seed         string
	Replay       string
	// Schedules are what the flow's generate nodes drew, as text.
	Schedules  []scheduleRow
	Hypothesis string
	Host       string
	Harness    string
	Git        string
	Aborted    bool
	NA         []string
	Counts     []count

	// For the script: the time span and t=0 in Unix milliseconds.
	End     string
	StartMS string
	W, L, P int

	// Failures are the checks that did not hold, unexpected ones first.
	Failures          []failure
	Unexpected, Known int
	Gantt             *gantt
	HasTargets        bool
	Lines             []lineRow
	LinesNote         string
	Steady            []steadyRow
	MoreCharts        []*chart
	Empty             []string
	Nav               []navItem
	Histories         []*histPlot
	Findings          []finding
	HistoryNote       string
	Charts            []*chart
	MissingFocus      []string
	ChartNote         string
	// ChartBands are the operation bands every chart shows: drawn once,
	// in a shared layer each chart's svg uses.
	ChartBands []gbar

	Checks   []checkRow
	Errors   []string
	Warnings []string
	Flaky    []rundir.FlakyHit

	Inputs []input
	Logs   []logLink
	Tails  []tail

	// TimelineNote says what the timeline left out; FileNotes say which
	// files were refused or left out.
	TimelineNote string
	FileNotes    []string
}

// navItem is a link to a section of the page.
type navItem struct{ Href, Text string }

type scheduleRow struct{ Node, Steps string }

type count struct {
	Result string
	N      int
}

type checkRow struct {
	ID, Result, Issue, Kind, Detail, Artifact string
}

type input struct {
	Name, Href, Text, Note string
}

type logLink struct {
	Href, Name, Size string
}

type tail struct {
	Name, Href, Size, Text string
	Lines                  int
}

func build(r *runview.Run) *page {
	p := &page{
		Title:        r.Title(),
		Verdict:      r.VerdictText(),
		ExperimentID: r.ExperimentID(),
		RunID:        r.RunID,
		W:            svgW, L: gutL, P: plotW,
	}
	p.VerdictClass = "v-" + verdictClass(p.Verdict)
	span := timeSpan(r)
	p.End = num(span, 3)
	p.StartMS = "0" // unknown: the script shows no wall-clock times
	if !r.Start.IsZero() {
		p.StartMS = strconv.FormatInt(r.Start.UnixMilli(), 10)
	}
	p.Duration = duration(r.End)
	if !r.Start.IsZero() {
		p.Started = r.Start.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	if x := r.Experiment; x != nil {
		if x.Version != 0 {
			p.Version = strconv.Itoa(x.Version)
		}
		p.Hypothesis = strings.TrimSpace(x.Hypothesis)
	}
	if m := r.Manifest; m != nil {
		if p.Version == "" && m.Experiment.Version != 0 {
			p.Version = strconv.Itoa(m.Experiment.Version)
		}
		p.Adapter = m.Adapter.ID
		if m.Adapter.Backend != "" {
			p.Adapter += " (" + m.Adapter.Backend + " backend)"
		}
		p.Seed = strconv.FormatUint(m.Seed, 10)
		p.Replay = m.ReplayLine()
		for _, sc := range m.Schedules {
			steps := sc.String()
			if steps == "" {
				steps = "(nothing drawn)"
			}
			p.Schedules = append(p.Schedules, scheduleRow{Node: sc.Node, Steps: clip(steps, maxDetail)})
		}
		if m.Host.Name != "" {
			p.Host = fmt.Sprintf("%s (%s/%s, %d CPUs)", m.Host.Name, m.Host.OS, m.Host.Arch, m.Host.CPUs)
		}
		if m.Harness.Version != "" {
			p.Harness = strings.TrimSpace(m.Harness.Version + " " + m.Harness.Go)
		}
		if m.Git != nil && m.Git.SHA != "" {
			p.Git = m.Git.SHA
			if len(p.Git) > 12 {
				p.Git = p.Git[:12]
			}
			if m.Git.Dirty {
				p.Git += " (dirty)"
			}
		}
	}
	if p.Adapter == "" {
		for i := range r.Events {
			if r.Events[i].Name == "run.started" {
				p.Adapter = r.Events[i].String("adapter")
				if p.Seed == "" {
					p.Seed = r.Events[i].String("seed")
				}
				break
			}
		}
	}
	if v := r.Verdict; v != nil {
		if p.Adapter == "" {
			p.Adapter = v.Adapter.ID
		}
		p.Aborted = v.Aborted
		p.NA = v.NA
		p.Errors = v.Errors
		p.Warnings = v.Warnings
		p.Flaky = v.Flaky
		for _, k := range []string{rundir.ResultOK, rundir.ResultFail, rundir.ResultXFail, rundir.ResultXPass, rundir.ResultInconclusive, rundir.ResultNA, rundir.ResultError} {
			if n := v.Counts[k]; n > 0 {
				p.Counts = append(p.Counts, count{k, n})
			}
		}
		shown := 0
		for _, c := range v.Checks {
			limit := maxDetail
			if shown >= maxDetails {
				limit = maxDetailShort
			}
			row := checkRow{ID: c.ID, Result: c.Result, Detail: clip(c.Detail, limit)}
			if c.Artifact != "" && !strings.Contains(c.Artifact, "..") && !filepath.IsAbs(c.Artifact) {
				row.Artifact = href(c.Artifact)
			}
			shown += len(row.Detail)
			if c.Expectation != nil {
				row.Issue, row.Kind = c.Expectation.Issue, c.Expectation.Kind
			}
			p.Checks = append(p.Checks, row)
		}
	} else {
		// A run without a verdict crashed: its harness errors are in the
		// timeline.
		for i := range r.Events {
			if r.Events[i].Name == "run.error" {
				p.Errors = append(p.Errors, r.Events[i].String("error"))
			}
		}
	}
	lines, linesNote := r.Lines()
	p.Gantt, p.TimelineNote = buildGantt(r, span, lines)
	p.Lines, p.LinesNote = lineList(lines, span)
	p.HasTargets = len(r.NamedTargets) > 0
	if linesNote != "" {
		p.LinesNote = strings.TrimSpace(linesNote + " " + p.LinesNote)
	}
	p.Histories, p.Findings, p.HistoryNote = buildHistories(r, span)
	sortFindings(p.Findings)
	p.Charts, p.MissingFocus, p.ChartNote = buildCharts(r, span)
	for _, c := range p.Charts {
		p.Steady = append(p.Steady, c.Steady...)
		if p.ChartBands == nil {
			p.ChartBands = c.Bands
		}
	}
	p.Charts, p.MoreCharts = splitCharts(p.Charts)
	p.Failures = buildFailures(r, append(append([]*chart{}, p.Charts...), p.MoreCharts...), span)
	for _, f := range p.Failures {
		if f.Known {
			p.Known++
		} else {
			p.Unexpected++
		}
	}
	p.Inputs = inputs(r)
	files, notes := reportFiles(r)
	p.FileNotes = notes
	p.Logs = logLinks(r, files)
	p.Tails = tails(r, files)
	p.sections()
	return p
}

// maxOpenCharts is how many charts are open when the experiment names no
// focus metrics; the rest are behind a summary.
const maxOpenCharts = 6

// splitCharts keeps the experiment's focus families open and puts the
// others behind a disclosure; without focus families, the first few stay
// open.
func splitCharts(all []*chart) (open, more []*chart) {
	focus := 0
	for _, c := range all {
		if c.Focus {
			focus++
		}
	}
	if focus == 0 {
		focus = min(len(all), maxOpenCharts)
	}
	if len(all)-focus <= 1 {
		return all, nil
	}
	return all[:focus], all[focus:]
}

// sections lists the page's sections for the navigation, and the empty
// ones, which are named in one line instead of drawn.
func (p *page) sections() {
	nav := func(id, text string) { p.Nav = append(p.Nav, navItem{Href: "#" + id, Text: text}) }
	if len(p.Failures) > 0 {
		nav("failures", "failures")
	}
	nav("timeline-heading", "timeline")
	if len(p.Lines) > 0 {
		nav("lines", "lines")
	}
	if len(p.Charts) > 0 || len(p.MoreCharts) > 0 {
		nav("metrics", "metrics")
	} else {
		p.Empty = append(p.Empty, "No metrics were recorded in this run.")
	}
	if len(p.Histories) > 0 {
		nav("histories", "operation histories")
	} else {
		p.Empty = append(p.Empty, "No workload wrote an operation history.")
	}
	nav("checks", "checks")
	if len(p.Errors) > 0 || len(p.Warnings) > 0 {
		nav("errors", "errors and warnings")
	} else {
		p.Empty = append(p.Empty, "No errors or warnings.")
	}
	if len(p.Flaky) > 0 {
		nav("flaky", "flaky hits")
	} else {
		p.Empty = append(p.Empty, "No flaky hits.")
	}
	nav("inputs", "inputs")
	nav("files", "files")
	if len(p.Tails) > 0 {
		nav("logs", "log tails")
	}
}

// timeSpan is the time the axis covers: the run's last event, or later when
// a scrape or an operation ran past it.
func timeSpan(r *runview.Run) float64 {
	t := r.End
	for _, op := range r.Operations {
		t = math.Max(t, op.End)
	}
	for _, in := range r.Instances {
		for _, s := range in.Segments {
			t = math.Max(t, s.End)
		}
	}
	if t <= 0 {
		t = 1
	}
	return t
}

func verdictClass(v string) string {
	switch v {
	case rundir.VerdictPass, rundir.VerdictXFail, rundir.VerdictFail, rundir.VerdictError, rundir.VerdictInconclusive:
		return strings.ToLower(v)
	case rundir.VerdictNA:
		return "na"
	}
	return "none"
}

// num formats v with at most dec decimals and no trailing zeros.
func num(v float64, dec int) string {
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// duration formats seconds as 33.3s, 1m 50s or 1h 2m 3s.
func duration(s float64) string {
	if s < 10 {
		return num(s, 2) + "s"
	}
	if s < 60 {
		return num(s, 1) + "s"
	}
	d := time.Duration(math.Round(s)) * time.Second
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%dh %dm %ds", h, m, sec)
	}
	return fmt.Sprintf("%dm %ds", m, sec)
}

// clip cuts text to n bytes (on a rune boundary) and says how much was cut.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… %d more bytes (see verdict.json)", len(s)-cut)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// href makes a relative link to a file of the run directory, each path
// segment escaped.
func href(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return num(float64(n)/(1<<20), 1) + " MB"
	case n >= 1<<10:
		return num(float64(n)/(1<<10), 1) + " KB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

func inputs(r *runview.Run) []input {
	var out []input
	for _, name := range []string{"experiment.yaml", "adapter.yaml"} {
		in := input{Name: name, Href: href(name)}
		data, err := r.Dir.ReadHead(name, maxInputSize)
		switch {
		case rundir.IsEscape(err):
			in.Note = "refused: it leads outside the run directory"
		case err != nil:
			in.Note = "missing"
		default:
			in.Text = strings.ToValidUTF8(string(data), "\uFFFD")
			if fi, err := r.Dir.Stat(name); err == nil && fi.Size() > maxInputSize {
				in.Note = fmt.Sprintf("first %s of %s shown", size(maxInputSize), size(fi.Size()))
			}
		}
		out = append(out, in)
	}
	return out
}

// logPatterns are the files the report links to first, in this order;
// every other file of the run directory follows, by path.
var logPatterns = []string{
	"verdict.json",
	"timeline.jsonl",
	"manifest.json",
	"experiment.yaml",
	"adapter.yaml",
	"logs/*.log",
	"workloads/*/instances/*/logs/*",
	"system/watch/*.jsonl",
	"system/metrics/*.jsonl",
	"system/metrics/*.types.json",
	"system/*.json",
	"system/*.txt",
	"evaluations/*.json",
	"evidence.md",
}

// maxDepth is how deep below the run directory files are listed (an
// instance's output directory is five levels down).
const maxDepth = 16

// file is one file of the run directory the report links to.
type file struct {
	rel  string // slash-separated, relative to the run directory
	size int64
}

// reportFiles lists the files the report links to, in the order of
// logPatterns, at most limits.MaxReportFiles of them. A file that leads
// out of the run directory (a symlink) is left out and named in a note.
func reportFiles(r *runview.Run) (out []file, notes []string) {
	seen := map[string]bool{FileName: true}
	more := 0
	var refused []string
	// One walk of the run directory, in the order a glob lists (directory
	// by directory), with what the walk learnt of each entry.
	var walked []string
	entries := map[string]fs.DirEntry{}
	_ = r.Dir.Walk(maxDepth, func(rel string, e fs.DirEntry) error {
		walked = append(walked, rel)
		entries[rel] = e
		return nil
	})
	// The known files first, pattern by pattern, then everything else, by
	// path.
	var known []string
	for _, pat := range logPatterns {
		for _, rel := range walked {
			if ok, _ := pathpkg.Match(pat, rel); ok {
				known = append(known, rel)
			}
		}
	}
	for _, rel := range append(known, slices.Sorted(slices.Values(walked))...) {
		if base := rel[strings.LastIndexByte(rel, '/')+1:]; strings.HasPrefix(base, ".tmp-") {
			continue // a file being written atomically
		}
		if seen[rel] {
			continue
		}
		seen[rel] = true
		e := entries[rel]
		if !e.Type().IsRegular() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		// A regular file's size is the walk's; a symlink is followed inside
		// the run directory only.
		fi, err := e.Info()
		if e.Type()&fs.ModeSymlink != 0 {
			fi, err = r.Dir.Stat(rel)
		}
		if rundir.IsEscape(err) {
			refused = append(refused, rel)
			continue
		}
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if len(out) >= limits.MaxReportFiles {
			more++
			continue
		}
		out = append(out, file{rel: rel, size: fi.Size()})
	}
	if len(refused) > 0 {
		notes = append(notes, fmt.Sprintf("Not read: %s, which lead%s outside the run directory (a symlink).", strings.Join(clipList(refused, 20), ", "), map[bool]string{true: "s", false: ""}[len(refused) == 1]))
	}
	if more > 0 {
		notes = append(notes, fmt.Sprintf("%d more files are not listed: the report lists at most %d.", more, limits.MaxReportFiles))
	}
	return out, notes
}

// clipList keeps the first n names and says how many more there are.
func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("and %d more", len(l)-n))
}

func logLinks(r *runview.Run, files []file) []logLink {
	out := make([]logLink, 0, len(files))
	for _, f := range files {
		out = append(out, logLink{Href: href(f.rel), Name: f.rel, Size: size(f.size)})
	}
	return out
}

// tails are the last lines of each instance log and each target or hook
// log, so a report attached to a bug shows how things ended.
func tails(r *runview.Run, files []file) []tail {
	// Instance logs first, then target and hook logs.
	ordered := make([]file, 0, len(files))
	for pass := 0; pass < 2; pass++ {
		for _, f := range files {
			if strings.HasPrefix(f.rel, "workloads/") == (pass == 0) {
				ordered = append(ordered, f)
			}
		}
	}
	var out []tail
	shown := 0
	for _, f := range ordered {
		if shown >= maxTails {
			break // the file list links to the rest
		}
		isLog := strings.HasPrefix(f.rel, "logs/") && strings.HasSuffix(f.rel, ".log") && strings.Count(f.rel, "/") == 1 ||
			strings.HasPrefix(f.rel, "workloads/") && strings.Count(f.rel, "/") == 5 && strings.Split(f.rel, "/")[4] == "logs"
		if !isLog || f.rel == "logs/harness.log" || f.size == 0 {
			continue // the timeline and the check table show harness.log
		}
		lines, err := lastLines(r.Dir, f.rel, f.size)
		if err != nil || len(lines) == 0 {
			continue
		}
		for len(lines) > 1 && textLen(lines) > maxTail {
			lines = lines[1:]
		}
		text := strings.Join(lines, "\n")
		shown += len(text)
		out = append(out, tail{Name: f.rel, Href: href(f.rel), Size: size(f.size), Text: text, Lines: len(lines)})
	}
	return out
}

func textLen(lines []string) int {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	return n
}

func lastLines(d *rundir.Dir, rel string, n int64) ([]string, error) {
	f, err := d.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	off := int64(0)
	if n > tailBytes {
		off = n - tailBytes
	}
	buf := make([]byte, n-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil, err
	}
	text := strings.TrimRight(string(buf), "\n")
	lines := strings.Split(text, "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first is likely cut
	}
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	for i, l := range lines {
		l = strings.ToValidUTF8(strings.TrimRight(l, "\r"), "\uFFFD")
		if len(l) > maxLineLen {
			l = l[:maxLineLen] + " …"
		}
		lines[i] = strings.ToValidUTF8(l, "")
	}
	return lines, nil
}
