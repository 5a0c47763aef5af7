package report

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/chaos-harness/chaos/internal/runview"
)

// --- a small helper over golang.org/x/net/html ---

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, c string) bool {
	for _, f := range strings.Fields(attr(n, "class")) {
		if f == c {
			return true
		}
	}
	return false
}

// find returns every element under n (n included) that match.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func tag(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == name }
}

// text is the text of n without its <title> children (SVG tooltips).
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == "title" {
				continue
			}
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func render(t testing.TB, root string) (*runview.Run, []byte) {
	t.Helper()
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, r); err != nil {
		t.Fatal(err)
	}
	return r, buf.Bytes()
}

// keep copies the report (and its screenshot) to $CHAOS_REPORT_KEEP, so a
// developer can look at them after the test's temporary directory is gone.
func keep(t *testing.T, files ...string) {
	dir := os.Getenv("CHAOS_REPORT_KEEP")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("kept %s", dst)
	}
}

func TestReportStructure(t *testing.T) {
	root := smallRun(t, t.TempDir())
	r, out := render(t, root)
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("report.html does not parse: %v", err)
	}

	// Self-contained: nothing is loaded from anywhere, links are relative.
	if src := find(doc, func(n *html.Node) bool { return attr(n, "src") != "" }); len(src) > 0 {
		t.Errorf("%d elements load something (src=%q)", len(src), attr(src[0], "src"))
	}
	for _, n := range find(doc, func(n *html.Node) bool { return attr(n, "href") != "" }) {
		h := attr(n, "href")
		if strings.Contains(h, "://") || strings.HasPrefix(h, "/") || strings.HasPrefix(h, "javascript:") {
			t.Errorf("link %q is not relative to the run directory", h)
		}
	}
	for _, bad := range []string{"@import", "url(http", "<link", "@font-face"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Errorf("report contains %q", bad)
		}
	}

	// Header: verdict, ids, replay command, hypothesis.
	if v := find(doc, func(n *html.Node) bool { return attr(n, "id") == "verdict" }); len(v) != 1 || text(v[0]) != "XFAIL" || !hasClass(v[0], "v-xfail") {
		t.Errorf("verdict element: %v", v)
	}
	for _, want := range []string{"gateway-kill-keeps-state", "20261029T120842Z-3b2c", "46s", "fixture-local (process backend)", "4424193670053326",
		"chaos run --adapter fixture-local --seed 4424193670053326 small-experiment.yaml", "stays stopped for 15s"} {
		if !strings.Contains(text(doc), want) {
			t.Errorf("the page does not show %q", want)
		}
	}

	// One SVG timeline, one row per instance, a red band for the operation.
	tls := find(doc, func(n *html.Node) bool { return n.Data == "svg" && attr(n, "id") == "timeline" })
	if len(tls) != 1 {
		t.Fatalf("%d timelines, want 1", len(tls))
	}
	tl := tls[0]
	var rows []string
	for _, n := range find(tl, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "instance") }) {
		rows = append(rows, text(n))
	}
	if got, want := strings.Join(rows, " "), "counter-0 counter-1 counter-2 fresh-sandbox-0"; got != want || len(r.Instances) != 4 {
		t.Errorf("instance rows %q, want %q", got, want)
	}
	ops := find(tl, func(n *html.Node) bool { return n.Data == "rect" && attr(n, "data-op") == "gateway-down" })
	if len(ops) != 1 || attr(ops[0], "fill") != "#dc2626" {
		t.Errorf("operation bars in the timeline: %d", len(ops))
	} else if tip := find(ops[0], tag("title")); len(tip) != 1 || tip[0].FirstChild == nil {
		t.Error("the operation bar has no tooltip")
	} else if s := tip[0].FirstChild.Data; !strings.Contains(s, "22.861 s → 41.038 s") || !strings.Contains(s, "12:09:05.177") {
		t.Errorf("operation tooltip %q lacks its times", s)
	}
	if lbl := find(tl, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "op") }); len(lbl) != 1 || text(lbl[0]) != "gateway-down" {
		t.Errorf("operation row label: %v", lbl)
	}
	fills := map[string]int{}
	for _, n := range find(tl, func(n *html.Node) bool { return (n.Data == "rect" || n.Data == "path") && attr(n, "fill") != "" }) {
		fills[attr(n, "fill")]++
	}
	for _, c := range []string{colRunning, colPending, colRed, colSucceeded, colCreated} {
		if fills[c] == 0 {
			t.Errorf("no timeline element coloured %s: %v", c, fills)
		}
	}
	// Adjacent Running stretches are merged: counter-0 runs twice (before
	// and after the outage), so 3 counters give 6 Running bars plus 1.
	running := find(tl, func(n *html.Node) bool { return n.Data == "rect" && attr(n, "fill") == colRunning })
	if len(running) != 7 {
		t.Errorf("%d Running bars, want 7", len(running))
	}

	// A chart per family, the focus family first, each with the band: the
	// bands are drawn once, in a shared layer every chart uses.
	layer := find(doc, func(n *html.Node) bool { return n.Data == "g" && attr(n, "id") == "op-bands" })
	if len(layer) != 1 {
		t.Fatalf("%d shared layers of operation bands, want 1", len(layer))
	}
	if bands := find(layer[0], func(n *html.Node) bool { return hasClass(n, "band") && attr(n, "fill") == "#dc2626" }); len(bands) != 1 {
		t.Errorf("the shared layer has %d operation bands, want 1", len(bands))
	}
	charts := find(doc, func(n *html.Node) bool { return n.Data == "div" && hasClass(n, "chart") })
	var fams []string
	for _, c := range charts {
		fams = append(fams, attr(c, "data-family"))
		svg := find(c, tag("svg"))
		if len(svg) != 1 {
			t.Errorf("chart %s has %d svgs", attr(c, "data-family"), len(svg))
			continue
		}
		if uses := find(svg[0], func(n *html.Node) bool { return n.Data == "use" && attr(n, "href") == "#op-bands" }); len(uses) != 1 {
			t.Errorf("chart %s uses the operation bands %d times, want 1", attr(c, "data-family"), len(uses))
		}
		if paths := find(svg[0], func(n *html.Node) bool { return n.Data == "path" && attr(n, "d") != "" }); len(paths) == 0 {
			t.Errorf("chart %s draws no series", attr(c, "data-family"))
		}
	}
	if got, want := strings.Join(fams, " "), "supervisor_sessions grpc_requests_total request_duration_seconds"; got != want {
		t.Errorf("charts %q, want %q", got, want)
	}
	if len(charts) > 0 && !hasClass(charts[0], "focus") {
		t.Error("the focus chart is not marked")
	}
	if !strings.Contains(text(doc), "counter · per-second rate between scrapes") || !strings.Contains(text(doc), "histogram · observation count") {
		t.Error("chart subtitles do not say what they plot")
	}
	// The counter's series are per method: four, each in the legend.
	if keys := find(charts[1], func(n *html.Node) bool { return n.Data == "li" }); len(keys) != 4 {
		t.Errorf("grpc_requests_total legend has %d entries, want 4", len(keys))
	}

	// The check table.
	tables := find(doc, func(n *html.Node) bool { return attr(n, "id") == "check-table" })
	if len(tables) != 1 {
		t.Fatal("no check table")
	}
	trs := find(tables[0], func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" })
	if len(trs) != len(r.Verdict.Checks) {
		t.Errorf("%d check rows, want %d", len(trs), len(r.Verdict.Checks))
	}
	for i, tr := range trs {
		cells := find(tr, tag("td"))
		c := r.Verdict.Checks[i]
		if text(cells[0]) != c.ID || text(cells[1]) != c.Result {
			t.Errorf("row %d: %q %q, want %s %s", i, text(cells[0]), text(cells[1]), c.ID, c.Result)
		}
		if c.Expectation != nil && !strings.Contains(text(cells[2]), c.Expectation.Issue) {
			t.Errorf("row %d does not name %s", i, c.Expectation.Issue)
		}
		if c.Detail != "" && (len(find(cells[3], tag("pre"))) != 1 || text(cells[3]) != c.Detail) {
			t.Errorf("row %d detail %q, want %q in a pre", i, text(cells[3]), c.Detail)
		}
	}

	// Untrusted text stays text: one script element (ours), and the log line
	// and the check detail appear escaped.
	if scripts := find(doc, tag("script")); len(scripts) != 1 {
		t.Errorf("%d script elements, want 1", len(scripts))
	}
	if bytes.Contains(out, []byte("<script>alert")) || bytes.Contains(out, []byte("<b>bold")) || bytes.Contains(out, []byte("<warning>")) || bytes.Contains(out, []byte("<img")) {
		t.Error("untrusted text was written as markup")
	}
	if !bytes.Contains(out, []byte("&lt;script&gt;alert(1)&lt;/script&gt;")) {
		t.Error("the log line with <script>alert(1)</script> is not shown escaped")
	}
	if tips := find(tl, func(n *html.Node) bool {
		return n.Data == "title" && n.FirstChild != nil && strings.Contains(n.FirstChild.Data, "Pending (Starting</title><img src=x onerror=alert(4)>)")
	}); len(tips) != 1 {
		t.Errorf("a state reason with markup is shown %d times as tooltip text, want once", len(tips))
	}
	logged := find(doc, func(n *html.Node) bool {
		return n.Data == "pre" && strings.Contains(text(n), "payload <script>alert(1)</script> & friends")
	})
	if len(logged) != 1 {
		t.Errorf("the workload log line is shown %d times as text, want once", len(logged))
	}

	// Errors and warnings, inputs, links to every log.
	if !strings.Contains(text(doc), "warning: a <warning> for the report") {
		t.Error("the warning is not shown")
	}
	inputs := find(doc, func(n *html.Node) bool { return n.Data == "pre" && hasClass(n, "input") })
	if len(inputs) != 2 || !strings.Contains(text(inputs[0]), "id: gateway-kill-keeps-state") || !strings.Contains(text(inputs[1]), "id: fixture-local") {
		t.Errorf("inputs: %d pre blocks", len(inputs))
	}
	links := map[string]bool{}
	for _, a := range find(doc, tag("a")) {
		links[attr(a, "href")] = true
	}
	for _, want := range []string{"logs/harness.log", "logs/gateway.log", "workloads/counter/instances/counter-0/logs/sandbox.log",
		"system/watch/docker-events.jsonl", "system/metrics/gateway.jsonl", "verdict.json", "timeline.jsonl", "manifest.json", "experiment.yaml", "adapter.yaml"} {
		if !links[want] {
			t.Errorf("no link to %s", want)
		}
		if _, err := os.Stat(filepath.Join(root, want)); err != nil {
			t.Errorf("link target %s: %v", want, err)
		}
	}

	// WriteFile puts the same page in the run directory, atomically.
	if err := WriteFile(r); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(filepath.Join(root, "report.html"))
	if err != nil || !bytes.Equal(written, out) {
		t.Errorf("report.html differs from Write's output (%v)", err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(root, ".tmp-*")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// A run that crashed early has no verdict, no manifest and no metrics; the
// report still renders and says so.
func TestReportMinimalRun(t *testing.T) {
	dir := t.TempDir()
	s := newSynth(t, dir, "gateway-kill-keeps-state", "20261029T120842Z-0000", "small-experiment.yaml")
	s.ev(0.001, "run.started", "experiment", "gateway-kill-keeps-state", "version", 3, "seed", 7, "adapter", "fixture-local")
	s.ev(0.5, "run.error", "error", "flow: <boom>")
	root := s.finish()
	_, out := render(t, root)
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	body := text(doc)
	for _, want := range []string{"no verdict", "No check results", "No metrics were recorded", "flow: <boom>", "Nothing ran"} {
		if !strings.Contains(body, want) {
			t.Errorf("page does not say %q", want)
		}
	}
}

func TestMergeSegments(t *testing.T) {
	in := []runview.Segment{
		{State: "Running", Start: 0, End: 5},
		{State: "Running", Reason: "a", Start: 5, End: 7},
		{State: "Running", Reason: "a", Start: 7, End: 8},
		{State: "Pending", Start: 8, End: 9},
		{State: "Running", Start: 9, End: 10},
	}
	got := mergeSegments(in)
	if len(got) != 3 || got[0].End != 8 || got[0].Reason != "a" || got[2].Start != 9 {
		t.Errorf("merged: %+v", got)
	}
}

// Downsampling keeps at most two points per bucket, and a one-scrape spike
// survives it.
func TestPathKeepsSpikes(t *testing.T) {
	var pts []pt
	for i := 0; i < 20000; i++ {
		v := float64(i % 7)
		if i == 12345 {
			v = 1000
		}
		pts = append(pts, pt{float64(i) * 0.1, v})
	}
	ymap := func(v float64) float64 { return 1000 - v }
	d, _ := path(pts, 2000, buckets, ymap)
	n := len(strings.Fields(d))
	if n > 2*buckets+2 {
		t.Errorf("%d points, want at most %d", n, 2*buckets+2)
	}
	if !strings.Contains(d, ",0 ") && !strings.HasSuffix(d, ",0") {
		t.Errorf("the spike (y=0) is lost: %.200s", d)
	}
}

// However many families a source exports, the charts keep to a budget of
// points: 80 families of 10 noisy series over 3,000 scrapes.
func TestChartPointBudget(t *testing.T) {
	var fams []*family
	for f := 0; f < 80; f++ {
		fam := &family{name: fmt.Sprintf("fam_%02d", f), typ: "gauge", series: map[string]*acc{}}
		for j := 0; j < 10; j++ {
			a := &acc{key: fmt.Sprintf(`n="%d"`, j), last: -1}
			for i := 0; i < 3000; i++ {
				a.add(i, float64(i)*2, float64((i*7919+j*104729)%1000))
			}
			fam.order = append(fam.order, a)
		}
		fams = append(fams, fam)
	}
	charts, missing, note := layoutCharts(fams, []string{"fam_42", "nope"}, nil, 6000, false)
	if len(charts) != 80 || charts[0].Family != "fam_42" || len(missing) != 1 || missing[0] != "nope" {
		t.Fatalf("%d charts, first %s, missing %v", len(charts), charts[0].Family, missing)
	}
	if !strings.Contains(note, "800 series are drawn in all, so each keeps at most 300 points") {
		t.Errorf("note %q", note)
	}
	points := 0
	for _, c := range charts {
		for _, s := range c.Series {
			points += len(strings.Fields(s.D)) + len(strings.Fields(s.Dots))
		}
	}
	if points > maxPoints+2*len(charts)*maxSeries {
		t.Errorf("%d points drawn, budget %d", points, maxPoints)
	}
	var buf bytes.Buffer
	if err := tmpl().ExecuteTemplate(&buf, "report", &page{Charts: charts, Gantt: &gantt{}, W: svgW, L: gutL, P: plotW}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > maxReportBytes {
		t.Errorf("80 charts make %d bytes, want under %d", buf.Len(), maxReportBytes)
	}
	t.Logf("80 families of 10 series: %d points, %.2f MB", points, float64(buf.Len())/(1<<20))
}

func TestAxisLabels(t *testing.T) {
	for _, c := range []struct {
		t, step, span float64
		want          string
	}{
		{65, 5, 100, "01:05"},
		{1.5, 0.5, 3, "00:01.5"},
		{3725, 600, 4000, "1:02:05"},
		{0.3, 0.1, 2, "00:00.3"},
	} {
		if got := relTime(c.t, c.step, c.span); got != c.want {
			t.Errorf("relTime(%v, %v, %v) = %q, want %q", c.t, c.step, c.span, got, c.want)
		}
	}
	if ts := ticks(0, 2403, 2403); len(ts) < 4 || len(ts) > 11 || ts[1].Label != "05:00" {
		t.Errorf("ticks for 40 minutes: %v", ts)
	}
}

// --- the long run: 40 minutes, 8 instances, 20 restarts, 1,200 scrapes ---

var long struct {
	once sync.Once
	dir  string
	root string
}

func longFixture(tb testing.TB) string {
	long.once.Do(func() {
		dir, err := os.MkdirTemp("", "chaos-report-long-")
		if err != nil {
			tb.Fatal(err)
		}
		long.dir = dir
		long.root = longRun(tb, dir)
	})
	if long.root == "" {
		tb.Fatal("the long run could not be built")
	}
	return long.root
}

func TestMain(m *testing.M) {
	code := m.Run()
	if long.dir != "" {
		os.RemoveAll(long.dir)
	}
	os.Exit(code)
}

const maxReportBytes = 5 << 20

func TestReportLongRunSize(t *testing.T) {
	root := longFixture(t)
	start := time.Now()
	r, out := render(t, root)
	t.Logf("long run: %d instances, %d operations, rendered in %v, %.2f MB", len(r.Instances), len(r.Operations), time.Since(start).Round(time.Millisecond), float64(len(out))/(1<<20))
	if dir := os.Getenv("CHAOS_REPORT_KEEP"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil && os.WriteFile(filepath.Join(dir, "report-long.html"), out, 0o644) == nil {
			t.Logf("kept %s", filepath.Join(dir, "report-long.html"))
		}
	}
	if len(out) >= maxReportBytes {
		t.Errorf("report of a 40-minute run is %d bytes, want under %d", len(out), maxReportBytes)
	}
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if rows := find(doc, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "instance") }); len(rows) != 8 {
		t.Errorf("%d instance rows, want 8", len(rows))
	}
	if lbl := find(doc, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "op") }); len(lbl) != 1 || text(lbl[0]) != "restart ×20" {
		t.Errorf("operation row: %v", lbl)
	}
	charts := find(doc, func(n *html.Node) bool { return n.Data == "div" && hasClass(n, "chart") })
	if len(charts) != 30 {
		t.Fatalf("%d charts, want 30", len(charts))
	}
	if attr(charts[0], "data-family") != "fam_g00_sessions" || attr(charts[1], "data-family") != "fam_c00_requests_total" {
		t.Errorf("focus charts not first: %s, %s", attr(charts[0], "data-family"), attr(charts[1], "data-family"))
	}
	if more := find(charts[1], func(n *html.Node) bool { return hasClass(n, "more") }); len(more) != 1 || text(more[0]) != "and 4 more" {
		t.Errorf("fam_c00_requests_total does not say it left 4 series out")
	}
	pair := regexp.MustCompile(`-?[0-9.]+,-?[0-9.]+`)
	for _, p := range find(doc, func(n *html.Node) bool { return n.Data == "path" && attr(n, "d") != "" && attr(n, "class") != "ms" }) {
		if n := len(pair.FindAllString(attr(p, "d"), -1)); n > 2*buckets+2 {
			t.Errorf("a series has %d points, want at most %d", n, 2*buckets+2)
		}
	}
}

func BenchmarkReport(b *testing.B) {
	root := longFixture(b)
	var n int
	for b.Loop() {
		r, err := runview.Load(root)
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := Write(&buf, r); err != nil {
			b.Fatal(err)
		}
		n = buf.Len()
	}
	b.ReportMetric(float64(n)/(1<<20), "MB")
}

// --- in a real browser ---

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed, and CI is set: the report must be checked in a real browser (scripts/test.sh installs Debian's chromium)")
	}
	t.Skip("chromium is not installed (Debian: apt-get install chromium); skipping the browser test. With CI set this fails instead.")
	return ""
}

// consoleTrouble finds what the page itself printed: Chromium logs every
// console message of a page as `INFO:CONSOLE:<line>] "<message>", source:
// <url>`, whatever its level, and uncaught exceptions as such messages
// starting with "Uncaught". The report logs nothing, so any of them is a
// failure.
var consoleTrouble = regexp.MustCompile(`Uncaught|:CONSOLE`)

func runChromium(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--enable-logging=stderr", "--v=0", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		if consoleTrouble.MatchString(line) {
			t.Errorf("the page logged an error in chromium: %s", line)
		}
	}
	return out.String(), errb.String()
}

func TestReportInChromium(t *testing.T) {
	bin := chromium(t)
	root := smallRun(t, t.TempDir())
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(r); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, FileName)
	url := "file://" + page

	dom, _ := runChromium(t, bin, "--dump-dom", url)
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatalf("dumped DOM does not parse: %v", err)
	}
	body := find(doc, tag("body"))
	if len(body) != 1 || attr(body[0], "data-rendered") != "1" {
		t.Fatalf("the inline script did not run to its end (no data-rendered=\"1\" on body); DOM starts:\n%.2000s", dom)
	}
	tl := find(doc, func(n *html.Node) bool { return n.Data == "svg" && attr(n, "id") == "timeline" })
	if len(tl) != 1 {
		t.Fatal("no timeline in the rendered DOM")
	}
	// The script redrew the time axis and placed the zoom groups.
	if axis := find(tl[0], func(n *html.Node) bool { return hasClass(n, "ax") }); len(axis) != 1 || len(find(axis[0], tag("text"))) < 3 {
		t.Error("the timeline's time axis has no labels after the script ran")
	}
	if z := find(tl[0], func(n *html.Node) bool { return hasClass(n, "z") }); len(z) != 1 || !strings.Contains(attr(z[0], "transform"), "scale(1,1)") {
		t.Errorf("the timeline's zoom group was not set by the script: %v", z)
	}
	charts := find(doc, func(n *html.Node) bool { return n.Data == "div" && hasClass(n, "chart") })
	if len(charts) != 3 || len(find(charts[0], func(n *html.Node) bool { return n.Data == "path" && attr(n, "d") != "" })) == 0 {
		t.Errorf("%d metric charts in the rendered DOM, want 3 with lines", len(charts))
	}
	if got := find(doc, func(n *html.Node) bool { return attr(n, "id") == "range" }); len(got) != 1 || text(got[0]) != "whole run" {
		t.Error("the zoom range readout is not set")
	}

	// A link to a window of the run opens zoomed to it.
	dom, _ = runChromium(t, bin, "--dump-dom", url+"#t=20-30")
	doc, err = html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	if got := find(doc, func(n *html.Node) bool { return attr(n, "id") == "range" }); len(got) != 1 || text(got[0]) != "00:20.0 – 00:30.0 (10.0 s)" {
		t.Errorf("opened at #t=20-30, the range readout is %v", got)
	}
	for _, z := range find(doc, func(n *html.Node) bool { return hasClass(n, "z") }) {
		if tr := attr(z, "transform"); !strings.Contains(tr, "scale(4.6,1)") {
			t.Errorf("opened at #t=20-30, a zoom group has transform %q, want scale(4.6,1)", tr)
		}
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	runChromium(t, bin, "--hide-scrollbars", "--screenshot="+shot, "--window-size=1400,2000", url)
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("no screenshot at %s (%d bytes, %v)", shot, len(png), err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	keep(t, page, shot)
}

// Prepare executes the template on an empty page in the background, where
// a runtime panic (which templates do not recover) would crash the run;
// the empty page must render, and a real page after it the same as before.
func TestPrepareEmptyPage(t *testing.T) {
	if err := tmpl().Execute(io.Discard, &page{}); err != nil {
		t.Fatalf("the empty page Prepare renders: %v", err)
	}
	dir := t.TempDir()
	s := newSynth(t, dir, "gateway-kill-keeps-state", "20261029T120842Z-0000", "small-experiment.yaml")
	s.ev(0.001, "run.started", "experiment", "gateway-kill-keeps-state", "version", 3, "seed", 7, "adapter", "fixture-local")
	root := s.finish()
	_, before := render(t, root)
	Prepare()
	Prepare()
	_, after := render(t, root)
	if !bytes.Equal(before, after) {
		t.Error("the page differs after Prepare")
	}
}

// TestErrorRunTimeline: a run that ended ERROR before its flow ran (a
// preflight check failed) draws, on a timeline that had been empty, each
// preflight check with its outcome, the settle wait it skipped, and the
// error; a run that settled draws the wait as a bar.
func TestErrorRunTimeline(t *testing.T) {
	dir := t.TempDir()
	s := newSynth(t, dir, "gateway-kill-keeps-state", "20261029T120842Z-0000", "small-experiment.yaml")
	s.ev(0.001, "run.started", "experiment", "gateway-kill-keeps-state", "version", 3, "seed", 7, "adapter", "fixture-local")
	s.ev(0.1, "lock.waiting", "lock", "ports", "file", "/tmp/x.lock", "holder", "123", "timeout", "1m0s")
	s.ev(1.4, "lock.acquired", "lock", "ports", "file", "/tmp/x.lock", "waited", "1.3s")
	s.ev(1.5, "check.started", "scope", "preflight", "check", "docker-daemon")
	s.ev(1.7, "check.finished", "scope", "preflight", "check", "docker-daemon", "ok", true, "detail", "")
	s.ev(1.7, "check.started", "scope", "preflight", "check", "port-<free>")
	s.ev(2.9, "check.finished", "scope", "preflight", "check", "port-<free>", "ok", false, "detail", "port 5432 is <taken>")
	s.ev(3.0, "flow.skipped", "reason", "preflight failed")
	s.ev(3.1, "settle.skipped", "duration", "5s", "reason", "the flow did not run")
	s.ev(3.2, "run.finished", "verdict", "ERROR")
	root := s.finish()
	_, out := render(t, root)
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	svg := find(doc, func(n *html.Node) bool { return n.Data == "svg" && attr(n, "id") == "timeline" })[0]
	labels := map[string]string{}
	for _, n := range find(svg, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "phase") }) {
		labels[text(n)] = attr(n, "y")
	}
	for _, want := range []string{"run lock", "preflight docker-daemon", "preflight port-<free>", "settle", "run"} {
		if _, ok := labels[want]; !ok {
			t.Errorf("no timeline row %q (rows %v)", want, labels)
		}
	}
	// The failed check: a milestone at its end, red, saying why; the row
	// says it failed.
	var titles []string
	for _, m := range find(svg, func(n *html.Node) bool { return n.Data == "path" && hasClass(n, "ms") }) {
		title := find(m, tag("title"))[0].FirstChild.Data
		titles = append(titles, title)
		if strings.Contains(title, "port-<free> FAILED") {
			if attr(m, "data-t") != "2.9" || attr(m, "fill") != colRed {
				t.Errorf("the failed check's milestone is at %s, %s", attr(m, "data-t"), attr(m, "fill"))
			}
			if !strings.Contains(title, "port 5432 is <taken>") {
				t.Errorf("the failed check's milestone does not say why: %q", title)
			}
		}
	}
	joined := strings.Join(titles, "\n")
	for _, want := range []string{"preflight check docker-daemon passed", "preflight check port-<free> FAILED", "settle wait of 5s skipped: the flow did not run", "flow skipped: preflight failed"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no milestone says %q:\n%s", want, joined)
		}
	}
	if !strings.Contains(text(svg), "failed") {
		t.Error("the failed check's row does not say it failed")
	}
	// The lock wait and the checks that took time are bars.
	var bars []string
	for _, b := range find(svg, func(n *html.Node) bool { return n.Data == "rect" && hasClass(n, "ph") }) {
		bars = append(bars, find(b, tag("title"))[0].FirstChild.Data)
	}
	if len(bars) != 3 || !strings.Contains(bars[0], "waited for the run lock ports") {
		t.Errorf("phase bars %q", bars)
	}

	// A run that settled: the wait is a bar from settle.started for its
	// duration; an interrupted one ends at the interruption, marked.
	for _, c := range []struct {
		evs    func(s *synth)
		s, e   float64
		marked bool
	}{
		{func(s *synth) {
			s.ev(10, "settle.started", "duration", "5s")
			s.ev(15.01, "run.finished", "verdict", "PASS")
		}, 10, 15, false},
		{func(s *synth) {
			s.ev(10, "settle.started", "duration", "5s")
			s.ev(12, "settle.interrupted", "reason", "SIGINT")
			s.ev(12.5, "run.finished", "verdict", "ERROR")
		}, 10, 12, true},
	} {
		s := newSynth(t, t.TempDir(), "gateway-kill-keeps-state", "20261029T120842Z-0001", "small-experiment.yaml")
		s.ev(0.001, "run.started", "experiment", "gateway-kill-keeps-state", "version", 3, "seed", 7, "adapter", "fixture-local")
		c.evs(s)
		r, out := render(t, s.finish())
		doc, _ := html.Parse(bytes.NewReader(out))
		var bar *html.Node
		for _, b := range find(doc, func(n *html.Node) bool { return n.Data == "rect" && hasClass(n, "ph") }) {
			bar = b
		}
		if bar == nil {
			t.Fatal("no settle bar")
		}
		x, _ := strconv.ParseFloat(attr(bar, "x"), 64)
		w, _ := strconv.ParseFloat(attr(bar, "width"), 64)
		if s0, e0 := x/plotW*r.End, (x+w)/plotW*r.End; math.Abs(s0-c.s) > 0.02 || math.Abs(e0-c.e) > 0.02 {
			t.Errorf("the settle bar spans %.3f to %.3f, want %.0f to %.0f", s0, e0, c.s, c.e)
		}
		if got := strings.Contains(string(out), "settle wait interrupted: SIGINT"); got != c.marked {
			t.Errorf("interrupted mark: %v, want %v", got, c.marked)
		}
	}
}
