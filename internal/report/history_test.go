package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const historyExperiment = `apiVersion: chaos/v1alpha1
id: hist
workloads:
  - {name: writer, instances: 2, run: "true"}
  - {name: reader, run: "true"}
operations:
  - {name: kill-db, uses: kill, target: db}
flow: [writer, kill-db, reader]
checks:
  - {name: no-lost-adds, kind: set, workloads: [writer, reader]}
`

// historyRun makes a run whose two writers added n elements each between
// t=1 and t=5, kill-db acting around t=4, one element (the 3rd of writer-0)
// missing from the final read. It returns the run directory with its
// verdict.json.
func historyRun(t testing.TB, n int) string {
	t.Helper()
	return historyRunLosing(t, n, func(w, i int) bool { return w == 0 && i == 3 })
}

// historyRunLosing is historyRun with the elements lost chosen by lose.
func historyRunLosing(t testing.TB, n int, lose func(w, i int) bool) string {
	t.Helper()
	r := vt.New(t, "hist", historyExperiment, "").Started("hist", "local")
	r.Instance("writer", "writer-0", vt.Code(0)).Instance("writer", "writer-1", vt.Code(0)).Instance("reader", "reader-0", vt.Code(0))
	for i := 0; i < 4; i++ {
		r.Event("node.started", "node", "flow", "kind", "serial", "name", "serial")
	}
	r.Event("operation.started", "operation", "kill-db", "uses", "kill", "run", 1, "target", "db", "scope", "target", "instances", []string{"db"}, "ids", []string{"1"})
	r.Event("operation.finished", "operation", "kill-db", "uses", "kill", "run", 1)
	r.Event("node.finished", "node", "flow", "kind", "serial", "name", "serial", "ok", true)
	r.Finished("FAIL")
	var read []string
	for w := 0; w < 2; w++ {
		var b strings.Builder
		for i := 0; i < n; i++ {
			elem := (w+1)*1000000 + i
			step := 4 / float64(n)
			t0 := 1 + step*float64(i)
			typ := "ok"
			switch {
			case i%97 == 5:
				typ = "fail"
			case i%89 == 7:
				typ = "info"
			}
			fmt.Fprintf(&b, `{"process":0,"type":"invoke","f":"add","value":%d,"t":%.6f}`+"\n", elem, t0)
			fmt.Fprintf(&b, `{"process":0,"type":%q,"f":"add","value":%d,"t":%.6f}`+"\n", typ, elem, t0+step*(0.2+0.07*float64(i%10)))
			if typ == "ok" && !lose(w, i) {
				read = append(read, fmt.Sprint(elem))
			}
		}
		r.Output("writer", fmt.Sprintf("writer-%d", w), ".chaos/history.jsonl", b.String())
	}
	r.Output("reader", "reader-0", ".chaos/history.jsonl", `{"type":"invoke","f":"read","t":5.5}`+"\n"+`{"type":"ok","f":"read","value":[`+strings.Join(read, ",")+`],"t":5.6}`+"\n")
	d := r.Write()
	x, ps := experiment.Parse("x.yaml", []byte(historyExperiment))
	if ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	v, err := verdict.Evaluate(context.Background(), d, x, nil, verdict.Options{By: verdict.ByRun})
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != "FAIL" {
		t.Fatalf("verdict %s: %+v", v.Verdict, v.Checks)
	}
	if err := os.WriteFile(d.VerdictFile(), mustJSON(t, v), 0o644); err != nil {
		t.Fatal(err)
	}
	return d.Root
}

func TestHistoryPlots(t *testing.T) {
	root := historyRun(t, 300)
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<h2 id="histories">Operation histories</h2>`,
		`<svg class="track latency"`, `<svg class="track rate"`,
		`aria-label="latency of writer's operations"`,
		`600 operations: 584 ok, 8 fail, 8 info`,
		`<path class="h-fail dot"`, `<path class="h-info dot"`, `<path class="h-find dot"`,
		`<a href="#t=0.54-1.545">writer-0/0 add 1000003 ok, t=1.04 to 1.045 (line 7)</a>`,
		`lost: 1 acknowledged adds missing: 1000003`,
		`<a href="workloads/writer/instances/writer-0/output/.chaos/history.jsonl">history</a>`,
		`<rect class="band"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "operations drawn (at most") {
		t.Error("600 operations should all be drawn")
	}
}

// A history of 20,000 operations still makes a small page: at most
// MaxOpPoints dots per plot.
func TestHistoryPlotsBounded(t *testing.T) {
	root := historyRun(t, 10000)
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "2000 of 20000 operations drawn (at most 2000") {
		t.Error("no note on the sampled operations")
	}
	if dots := strings.Count(page, "h0M") + strings.Count(page, `h0"`); dots > MaxOpPoints+50 {
		t.Errorf("%d dots drawn, want at most about %d", dots, MaxOpPoints)
	}
	if len(page) > 600<<10 {
		t.Errorf("page is %d KB for 20,000 operations", len(page)>>10)
	}
	if !strings.Contains(page, `<path class="h-find dot"`) {
		t.Error("the operation the check named is not drawn")
	}
}

func TestHistoryPlotsInChromium(t *testing.T) {
	bin := chromium(t)
	root := historyRun(t, 2000)
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(r); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, FileName)
	dom, _ := runChromium(t, bin, "--dump-dom", "file://"+page+"#t=3-5")
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	if body := find(doc, tag("body")); len(body) != 1 || attr(body[0], "data-rendered") != "1" {
		t.Fatal("the inline script did not run to its end")
	}
	plots := find(doc, func(n *html.Node) bool { return n.Data == "svg" && (hasClass(n, "latency") || hasClass(n, "rate")) })
	if len(plots) != 4 {
		t.Fatalf("%d latency and rate plots, want 4 (writer and reader)", len(plots))
	}
	for _, p := range plots {
		z := find(p, func(n *html.Node) bool { return hasClass(n, "z") })
		if len(z) != 1 || !strings.Contains(attr(z[0], "transform"), "scale(") {
			t.Errorf("a history plot's zoom group was not set by the script: %v", z)
		}
	}
	shot := filepath.Join(t.TempDir(), "history.png")
	runChromium(t, bin, "--hide-scrollbars", "--screenshot="+shot, "--window-size=1400,2400", "file://"+page)
	keep(t, page, shot)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLostWritesAll: a run that lost 1,830 acknowledged writes lists every
// one of them in a scrollable table (not the first 8), and the timeline
// draws the span from the first lost write's invocation to the last one's
// acknowledgement across its rows, with a row of the lost writes.
func TestLostWritesAll(t *testing.T) {
	// Writer 1 loses its writes from the 100th to the 1,970th but those
	// that failed or were of unknown outcome: 1,830 acknowledged ones.
	r, out := render(t, historyRunLosing(t, 2000, func(w, i int) bool { return w == 1 && i >= 100 && i <= 1970 }))
	page := string(out)
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "lost: 1830 acknowledged adds missing") {
		t.Fatalf("the run should lose 1830 writes; the page says %q", between(page, "lost:", "\n"))
	}
	tables := find(doc, func(n *html.Node) bool { return n.Data == "table" && hasClass(n, "finding-ops") })
	if len(tables) != 1 {
		t.Fatalf("%d tables of a finding's operations, want 1", len(tables))
	}
	rows := find(tables[0], tag("tr"))
	if len(rows) != 1+1830 {
		t.Errorf("the table has %d rows, want a header and 1830", len(rows))
	}
	// In the order of their invocations, each with its value and a link
	// that zooms to it.
	first, last := text(rows[1]), text(rows[len(rows)-1])
	if !strings.Contains(first, "writer-1/0") || !strings.Contains(first, "2000100") || !strings.Contains(last, "2001970") {
		t.Errorf("first row %q, last row %q", first, last)
	}
	wrap := tables[0].Parent
	if !hasClass(wrap, "lines-wrap") {
		t.Errorf("the table is not in a scrolling box: %s", wrap.Data)
	}
	if !strings.Contains(page, `<a href="#finding-0">all 1830 in the table below</a>`) {
		t.Error("the findings table does not link to the table of all of them")
	}
	// The span: writes 100 to 1970 of 2000 between t=1 and t=5.
	bands := find(doc, func(n *html.Node) bool { return n.Data == "rect" && hasClass(n, "lost") })
	if len(bands) != 1 {
		t.Fatalf("%d lost-write bands on the timeline, want 1", len(bands))
	}
	span := r.End
	x, _ := strconv.ParseFloat(attr(bands[0], "x"), 64)
	w, _ := strconv.ParseFloat(attr(bands[0], "width"), 64)
	s0, e0 := x/plotW*span, (x+w)/plotW*span
	if math.Abs(s0-(1+4.0/2000*100)) > 0.01 || math.Abs(e0-(1+4.0/2000*1970+4.0/2000*0.2)) > 0.02 {
		t.Errorf("the band spans %.3f to %.3f s", s0, e0)
	}
	if title := find(bands[0], tag("title")); len(title) != 1 || !strings.Contains(title[0].FirstChild.Data, "1830 acknowledged writes lost") {
		t.Errorf("the band has no title saying what it is")
	}
	var row *html.Node
	for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "finding") }) {
		row = n
	}
	if row == nil || !strings.HasPrefix(text(row), "lost · ") {
		t.Error("the timeline has no row of the lost writes")
	}
}

func between(s, a, b string) string {
	_, after, _ := strings.Cut(s, a)
	before, _, _ := strings.Cut(after, b)
	return a + before
}
