package report

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
			if typ == "ok" && !(w == 0 && i == 3) {
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
