package share

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

var update = flag.Bool("update", false, "rewrite the golden pages under testdata")

// fixtureID is the recorded run: three counters on the local-etcd adapter,
// twenty restarts in a repeat, an etcd outage, and one counter lost to a
// checkpoint that fell in the outage, covered by a flaky expectation.
const fixtureID = "20261130T115120Z-f540"

func fixtureDir() string { return filepath.Join("testdata", "runs", fixtureID) }

func TestShareGolden(t *testing.T) {
	r, err := runview.Load(fixtureDir())
	if err != nil {
		t.Fatal(err)
	}
	got := Page(r, Options{MaxInstances: DefaultMaxInstances})
	golden := filepath.Join("testdata", fixtureID+".md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("page differs from %s (run with -update to accept):\n%s", golden, diffLines(string(want), string(got)))
	}
	for _, block := range mermaidBlocks(t, string(got)) {
		validateMermaid(t, block)
	}
	page := string(got)
	for _, want := range []string{
		"# Counters keep every checkpoint through an etcd outage and twenty restarts\n",
		"    restart ×20 :crit, ",
		"    etcd-down :crit, ",
		"  section flow\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestShareFlakyChartsOnlyHits: the fixture's flaky expectation hit one
// counter; the chart has only that counter's section, and the line under
// it names the two it left out.
func TestShareFlakyChartsOnlyHits(t *testing.T) {
	r, err := runview.Load(fixtureDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict == nil || len(r.Verdict.Flaky) == 0 {
		t.Fatal("the fixture has no flaky hits")
	}
	hits := map[string]bool{}
	for _, f := range r.Verdict.Flaky {
		for _, in := range f.Instances {
			hits[in] = true
		}
	}
	// counter-0 ended Failed; counter-2 only failed a check.
	hit := []string{"counter-0", "counter-2"}
	if len(hits) != 2 || !hits["counter-0"] || !hits["counter-2"] {
		t.Fatalf("the fixture's flaky hits are %v", hits)
	}
	sel := Select(r, DefaultMaxInstances)
	if !sel.Flaky || len(sel.Shown) != len(hit) {
		t.Fatalf("shown %v, want the hits %v", names(sel.Shown), hit)
	}
	for i, in := range sel.Shown {
		if in.Name != hit[i] {
			t.Errorf("shown %v, want %v", names(sel.Shown), hit)
		}
	}
	if len(sel.Rest) != len(r.Instances)-len(hit) {
		t.Errorf("rest %v", names(sel.Rest))
	}
	if s := sel.Summary(); s != "and 1 more instance, which the flaky expectation did not hit (Succeeded): counter-1" {
		t.Errorf("summary %q", s)
	}
}

// synthetic builds a run of n instances of workload w; failed lists the
// indexes that end Failed.
func synthetic(n int, end float64, failed ...int) *runview.Run {
	r := &runview.Run{RunID: "20261130T000000Z-0000", End: end, Manifest: &rundir.Manifest{}}
	r.Manifest.Experiment.ID = "many"
	r.Verdict = &rundir.Verdict{Verdict: "FAIL"}
	bad := map[int]bool{}
	for _, i := range failed {
		bad[i] = true
	}
	for i := 0; i < n; i++ {
		in := runview.Instance{Workload: "w", Name: fmt.Sprintf("w-%d", i), Index: i, Created: 1}
		in.Segments = []runview.Segment{{State: "Running", Start: 1, End: end - 5}}
		final := "Succeeded"
		if bad[i] {
			final = "Failed"
		}
		in.Segments = append(in.Segments, runview.Segment{State: final, Start: end - 5, End: end - 5})
		in.Final = final
		r.Instances = append(r.Instances, in)
		r.Verdict.Checks = append(r.Verdict.Checks, rundir.CheckResult{ID: in.Name + "/ok", Scope: "workload", Instance: in.Name, OK: !bad[i], Result: map[bool]string{true: "ok", false: "fail"}[!bad[i]]})
	}
	r.Nodes = []runview.Bar{{Node: "flow", Kind: "ref", Label: "w", Start: 0.5, End: end - 4}}
	return r
}

func TestShareMaxInstances(t *testing.T) {
	r := synthetic(17, 100, 13, 15)
	sel := Select(r, 12)
	if len(sel.Shown) != 12 {
		t.Fatalf("shown %d: %v", len(sel.Shown), names(sel.Shown))
	}
	// Failed first, then the first ten others in order.
	want := []string{"w-13", "w-15", "w-0", "w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "w-7", "w-8", "w-9"}
	if got := names(sel.Shown); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("shown %v, want %v", got, want)
	}
	if got := sel.Summary(); got != "and 5 more instances (all Succeeded): w-10 … w-12, w-14, w-16" {
		t.Errorf("summary %q", got)
	}
	page := string(Page(r, Options{MaxInstances: 12}))
	if !strings.Contains(page, "\nand 5 more instances (all Succeeded): w-10 … w-12, w-14, w-16\n") {
		t.Errorf("page lacks the summary:\n%s", page)
	}
	for _, block := range mermaidBlocks(t, page) {
		validateMermaid(t, block)
	}

	// A contiguous range reads first … last.
	r = synthetic(20, 100)
	if got := Select(r, 15).Summary(); got != "and 5 more instances (all Succeeded): w-15 … w-19" {
		t.Errorf("summary %q", got)
	}
	// Failed instances are kept even past the limit.
	r = synthetic(6, 100, 1, 2, 3, 4)
	sel = Select(r, 2)
	if got := strings.Join(names(sel.Shown), " "); got != "w-1 w-2 w-3 w-4" {
		t.Errorf("shown %s", got)
	}
	if got := sel.Summary(); got != "and 2 more instances (all Succeeded): w-0, w-5" {
		t.Errorf("summary %q", got)
	}
	// 0 charts all.
	if sel := Select(synthetic(30, 100), 0); len(sel.Shown) != 30 || len(sel.Rest) != 0 {
		t.Errorf("max 0: shown %d rest %d", len(sel.Shown), len(sel.Rest))
	}
	// Mixed final states are counted.
	r = synthetic(5, 100)
	r.Instances[4].Final = "Unknown"
	if got := Select(r, 2).Summary(); got != "and 3 more instances (2 Succeeded, 1 Unknown): w-2 … w-4" {
		t.Errorf("summary %q", got)
	}
}

// TestShareLongRun: a run of an hour or more switches to HH:mm:ss, since
// Mermaid parses mm:ss strictly and has no minute 60.
func TestShareLongRun(t *testing.T) {
	r := synthetic(1, 2*3600+125.4)
	c := BuildChart(r, []*runview.Instance{&r.Instances[0]})
	text := c.String()
	if !strings.Contains(text, "  dateFormat HH:mm:ss\n  axisFormat %H:%M:%S\n") {
		t.Errorf("long run not in HH:mm:ss:\n%s", text)
	}
	if !strings.Contains(text, "    w :00:00:01, 02:02:01\n") {
		t.Errorf("workload bar:\n%s", text)
	}
	validateMermaid(t, text)

	r = synthetic(1, 3599.4)
	text = BuildChart(r, nil).String()
	if !strings.Contains(text, "  dateFormat mm:ss\n") || !strings.Contains(text, "    w :00:01, 59:55\n") {
		t.Errorf("short run:\n%s", text)
	}
	validateMermaid(t, text)
}

func TestShareTaskNames(t *testing.T) {
	for in, want := range map[string]string{
		"restart ×20":                 "restart ×20",
		"wait reconcile-sweep +57.5s": "wait reconcile-sweep +57.5s",
		"a:b#c;d":                     "a∶b＃c；d",
		"two\nlines":                  "two lines",
		"50%":                         "50％",
		"title of it":                 "_title of it",
		"Section x":                   "_Section x",
		"gantt-load":                  "_gantt-load",
		"click me":                    "_click me",
		"2026-10-29 deploy":           "_2026-10-29 deploy",
		"sectionless":                 "sectionless",
		"":                            "-",
	} {
		if got := TaskName(in); got != want {
			t.Errorf("TaskName(%q) = %q, want %q", in, got, want)
		}
	}
	// An escaped name makes a valid task line.
	c := &Chart{Title: "x # y; z · r · PASS", Flow: []Task{{Name: "op: #1; 50%", Tags: []string{"crit"}, Start: 1, End: 2}}}
	validateMermaid(t, c.String())
}

// TestShareStates draws every state the seeds draw, in their style.
func TestShareStates(t *testing.T) {
	r := synthetic(1, 100)
	in := &r.Instances[0]
	in.Segments = []runview.Segment{
		{State: "Created", Start: 3.2, End: 3.9},
		{State: "Running", Start: 3.9, End: 10.2},
		{State: "Running", Reason: "again", Start: 10.2, End: 20},
		{State: "Pending", Start: 20, End: 22.4},
		{State: "Unknown", Start: 22.4, End: 30},
		{State: "Running", Start: 30, End: 95.3},
		{State: "Failed", Start: 95.3, End: 95.3},
	}
	text := BuildChart(r, []*runview.Instance{in}).String()
	// A run under ShortRun is charted to the millisecond.
	want := `  section w-0
    Created :milestone, 00:03.200, 00:03.200
    Running :active, 00:03.900, 00:20.000
    Pending :done, 00:20.000, 00:22.400
    Unknown :crit, 00:22.400, 00:30.000
    Running :active, 00:30.000, 01:35.300
    Failed :milestone, crit, 01:35.300, 01:35.300
`
	if !strings.HasSuffix(text, want) {
		t.Errorf("got\n%s\nwant the section\n%s", text, want)
	}
	in.Segments[6].State = "Succeeded"
	if text := BuildChart(r, []*runview.Instance{in}).String(); !strings.Contains(text, "    Succeeded :milestone, active, 01:35.300, 01:35.300\n") {
		t.Errorf("succeeded:\n%s", text)
	}
	if !strings.HasPrefix(text, Init+"\ngantt\n  title many · 20261130T000000Z-0000 · FAIL\n  dateFormat mm:ss.SSS\n  axisFormat %M:%S\n  todayMarker off\n  section flow\n") {
		t.Errorf("header:\n%s", text)
	}
}

func TestShareCheckTableEscapes(t *testing.T) {
	v := &rundir.Verdict{Checks: []rundir.CheckResult{{
		ID: "x-0/pipes", Scope: "workload", Result: "fail",
		Detail: "a | b <c>\nsecond line",
	}}}
	got := checkTable(v)
	if !strings.Contains(got, "| `x-0/pipes` | **FAIL** |  | a \\| b &lt;c&gt; … |\n") {
		t.Errorf("table:\n%s", got)
	}
	if strings.Count(got, "\n") != 3 {
		t.Errorf("a row spans lines:\n%s", got)
	}
}

func names(l []*runview.Instance) []string {
	var out []string
	for _, in := range l {
		out = append(out, in.Name)
	}
	return out
}

var fence = regexp.MustCompile("(?s)```mermaid\n(.*?)```")

func mermaidBlocks(t *testing.T, page string) []string {
	t.Helper()
	var out []string
	for _, m := range fence.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("no mermaid block in\n%s", page)
	}
	return out
}

var (
	// The statements of a chart, as Mermaid's Gantt grammar lexes them:
	// a task's name stops at ":", "#" or ";", its data at "#" or ";".
	titleLine   = regexp.MustCompile(`^  title [^#;\n]+$`)
	sectionLine = regexp.MustCompile(`^  section [^#:;\n]+$`)
	taskLine    = regexp.MustCompile(`^    ([^:#;%\n]+) :((?:milestone, )?(?:active|done|crit)?(?:, )?)((?:\d\d:)?\d\d:\d\d(?:\.\d{3})?), ((?:\d\d:)?\d\d:\d\d(?:\.\d{3})?)$`)
	clock       = regexp.MustCompile(`^(?:(\d\d):)?(\d\d):(\d\d)(?:\.(\d{3}))?$`)
)

// validateMermaid checks a chart line by line against what Mermaid's Gantt
// parser accepts, as far as that can be done without a browser: the fixed
// header, then sections and tasks whose names cannot end early or read as
// a statement, whose tags are Mermaid's, and whose times parse under the
// chart's dateFormat, strictly (minutes and seconds under 60) and in order.
func validateMermaid(t *testing.T, text string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 7 {
		t.Fatalf("chart too short:\n%s", text)
	}
	if lines[0] != Init {
		t.Errorf("line 1 is not the seeds' init line: %s", lines[0])
	}
	if lines[1] != "gantt" {
		t.Errorf("line 2: %q", lines[1])
	}
	if !titleLine.MatchString(lines[2]) || strings.Count(lines[2], " · ") != 2 {
		t.Errorf("title line: %q", lines[2])
	}
	res := Seconds
	switch lines[3] + "\n" + lines[4] {
	case "  dateFormat mm:ss\n  axisFormat %M:%S":
	case "  dateFormat mm:ss.SSS\n  axisFormat %M:%S", "  dateFormat mm:ss.SSS\n  axisFormat %M:%S.%L":
		res = Millis
	case "  dateFormat HH:mm:ss\n  axisFormat %H:%M:%S":
		res = Hours
	default:
		t.Errorf("date and axis formats: %q %q", lines[3], lines[4])
	}
	if lines[5] != "  todayMarker off" || lines[6] != "  section flow" {
		t.Errorf("lines 6-7: %q %q", lines[5], lines[6])
	}
	for i, l := range lines[7:] {
		n := i + 8
		if strings.HasPrefix(l, "  section ") {
			if !sectionLine.MatchString(l) {
				t.Errorf("line %d: bad section %q", n, l)
			}
			continue
		}
		m := taskLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %d: not a task line: %q", n, l)
			continue
		}
		name, tags := m[1], strings.TrimSuffix(m[2], ", ")
		if keyword.MatchString(name) || strings.TrimSpace(name) != name {
			t.Errorf("line %d: task name %q reads as a statement or has stray spaces", n, name)
		}
		if tags == "milestone" && name != "Created" && name != "Stopped" {
			// Only Created (an instance) and Stopped (a target) are bare
			// milestones.
			t.Errorf("line %d: bare milestone %q", n, l)
		}
		start, end := parseClock(t, n, m[3], res), parseClock(t, n, m[4], res)
		if end < start {
			t.Errorf("line %d: ends before it starts: %q", n, l)
		}
		if strings.HasPrefix(tags, "milestone") && start != end {
			t.Errorf("line %d: a milestone with a length: %q", n, l)
		}
	}
}

// parseClock reads a time in milliseconds, checking it has the form of the
// chart's dateFormat.
func parseClock(t *testing.T, line int, s string, res Resolution) int {
	t.Helper()
	m := clock.FindStringSubmatch(s)
	if m == nil || (m[1] != "") != (res == Hours) || (m[4] != "") != (res == Millis) {
		t.Errorf("line %d: time %q does not match the dateFormat", line, s)
		return 0
	}
	// Atoi, not Sscan, which reads "08" as a bad octal number.
	h, _ := strconv.Atoi(m[1])
	min, _ := strconv.Atoi(m[2])
	sec, _ := strconv.Atoi(m[3])
	if min > 59 || sec > 59 || h > 23 {
		t.Errorf("line %d: time %q is not a valid clock time", line, s)
	}
	ms, _ := strconv.Atoi(m[4])
	return (h*3600+min*60+sec)*1000 + ms
}

// diffLines shows the first lines that differ.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, a, c)
			if shown++; shown == 10 {
				break
			}
		}
	}
	return b.String()
}

// TestShareSeedRun draws the verdict package's hand-made run of the
// seeds' gateway-kill-keeps-state, a timeline with few events (one node,
// without a kind): the outage is red in the flow section, and every
// instance has its section.
func TestShareSeedRun(t *testing.T) {
	r, err := runview.Load("../verdict/testdata/runs/gateway-kill-keeps-state/20261029T120842Z-3b2c")
	if err != nil {
		t.Fatal(err)
	}
	page := string(Page(r, Options{MaxInstances: DefaultMaxInstances}))
	for _, want := range []string{
		"  title gateway-kill-keeps-state · 20261029T120842Z-3b2c · XFAIL\n",
		"    gateway-down :crit, 00:22.861, 00:41.038\n",
		"  section counter-0\n",
		"  section fresh-sandbox-0\n",
		"| `counter-0/exited-ok` | xfail | NVIDIA/OpenShell#4910 (known) | no exit code recorded |\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	for _, block := range mermaidBlocks(t, page) {
		validateMermaid(t, block)
	}
}

// TestShareNoVerdict: a run that crashed before its checks still gets a
// chart, and the page says why there is no table.
func TestShareNoVerdict(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"experiment.yaml", "timeline.jsonl"} {
		data, err := os.ReadFile(filepath.Join(fixtureDir(), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := runview.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	page := string(Page(r, Options{}))
	if !strings.Contains(page, "**no verdict**") || !strings.Contains(page, "The run has no verdict.json") || strings.Contains(page, "## Checks") {
		t.Errorf("page:\n%s", page)
	}
	for _, block := range mermaidBlocks(t, page) {
		validateMermaid(t, block)
	}
}

// TestShareNothingRan: a run stopped by its preflight has nothing to chart.
func TestShareNothingRan(t *testing.T) {
	r := synthetic(0, 3)
	r.Nodes = nil
	r.Verdict.Verdict = "ERROR"
	page := string(Page(r, Options{}))
	if strings.Contains(page, "```mermaid") || !strings.Contains(page, "Nothing ran: ") {
		t.Errorf("page:\n%s", page)
	}
}

// TestShareFlakyKeepsOtherFailures: an instance that failed outside the
// flaky expectation is charted with the hits.
func TestShareFlakyKeepsOtherFailures(t *testing.T) {
	r := synthetic(5, 100, 3)
	r.Verdict.Flaky = []rundir.FlakyHit{{Issue: "o/r#1", Check: "w/ok", Instances: []string{"w-1"}, Of: 5}}
	r.Verdict.Checks[1].OK = false
	sel := Select(r, DefaultMaxInstances)
	if got := strings.Join(names(sel.Shown), " "); got != "w-3 w-1" {
		t.Errorf("shown %s", got)
	}
	if got := sel.Summary(); got != "and 3 more instances, which the flaky expectation did not hit (all Succeeded): w-0, w-2, w-4" {
		t.Errorf("summary %q", got)
	}
}

// A short run is charted to the millisecond: a crash 28 ms after a 500 ms
// delay ends is drawn after the delay, not in the second it ended. Longer
// runs keep whole seconds.
func TestShareMilliseconds(t *testing.T) {
	r := synthetic(1, 3)
	r.Nodes = []runview.Bar{
		{Node: "flow.serial[0]", Kind: "delay", Label: "delay 500ms", Start: 0, End: 0.5},
	}
	r.Operations = []runview.OpRun{{Name: "crash", Uses: "kill", Run: 1, Start: 0.528, End: 0.53}}
	text := BuildChart(r, nil).String()
	for _, want := range []string{"  dateFormat mm:ss.SSS\n  axisFormat %M:%S.%L\n", "    delay 500ms :00:00.000, 00:00.500\n", "    crash :crit, 00:00.528, 00:00.530\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("chart lacks %q:\n%s", want, text)
		}
	}
	validateMermaid(t, text)
	for span, format := range map[float64]string{599: "mm:ss.SSS", 600: "mm:ss", 3599: "mm:ss", 3600: "HH:mm:ss"} {
		r := synthetic(1, span)
		if text := BuildChart(r, nil).String(); !strings.Contains(text, "  dateFormat "+format+"\n") {
			t.Errorf("a run of %vs: %s", span, text)
		}
	}
}

// Named targets get a section each: healthy, held down, starting again,
// healthy, stopped.
func TestShareTargets(t *testing.T) {
	r, err := runview.Load("../runview/testdata/format-2/gateway-kill-keeps-state/20261201T045603Z-5f56")
	if err != nil {
		t.Fatal(err)
	}
	page := string(Page(r, Options{}))
	want := `  section target gateway
    Healthy :active, 00:00.155, 00:01.181
    Down :crit, 00:01.181, 00:03.181
    Starting :done, 00:03.181, 00:03.352
    Healthy :active, 00:03.352, 00:06.197
    Stopped :milestone, 00:06.197, 00:06.197
`
	if !strings.Contains(page, want) {
		t.Errorf("page lacks the gateway's section:\n%s", page)
	}
	for _, block := range mermaidBlocks(t, page) {
		validateMermaid(t, block)
	}
}
