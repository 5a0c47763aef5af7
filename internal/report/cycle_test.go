package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

var update = flag.Bool("update", false, "write the golden files of testdata/ anew")

// gSingle is a G-single-item-realtime witness of three transactions, one
// edge of each kind that justifies one, with a key that is markup.
func gSingle() rundir.Finding {
	ops := []rundir.OpRef{
		{Instance: "txn-0", Process: "0", F: "txn", Type: "ok", Value: `[["r","x",[1]],["append","y",2]]`, Line: 7, Start: 1.25, End: 1.5},
		{Instance: "txn-1", Process: "1", F: "txn", Type: "ok", Value: `[["r","y",[2]],["append","<k>",3]]`, Line: 9, Start: 1.3, End: 1.7},
		{Instance: "txn-2", Process: "0", F: "txn", Type: "ok", Value: `[["r","<k>",[]],["append","x",4]]`, Line: 11, Start: 1.8, End: 2.1},
	}
	return rundir.Finding{Kind: "G-single-item-realtime", Count: 1, Bad: true, Ops: ops, Cycle: []rundir.Edge{
		{From: 0, To: 1, Rel: "wr", Key: "y", Value: "2"},
		{From: 1, To: 2, Rel: "realtime"},
		{From: 2, To: 0, Rel: "rw", Key: "x", Value: "1", Value2: "4"},
	}}
}

func renderCycle(t *testing.T, g *cycleGraph) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := tmpl().ExecuteTemplate(&b, "cycle", g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCycleGraphGolden: the SVG of a cycle, byte for byte (go test
// -run TestCycleGraphGolden -update writes it anew; look at it in a
// browser before committing it).
func TestCycleGraphGolden(t *testing.T) {
	for _, c := range []struct {
		file string
		f    rundir.Finding
	}{
		{"cycle-3.golden.svg", gSingle()},
		{"cycle-8.golden.svg", chainOf(8)},
	} {
		got := renderCycle(t, drawCycle("cycle-0", c.f))
		path := filepath.Join("testdata", c.file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs:\n%s", c.file, got)
		}
	}
}

// chainOf is a G0 cycle of n transactions, each wrote after the previous.
func chainOf(n int) rundir.Finding {
	f := rundir.Finding{Kind: "G0", Count: 1, Bad: true}
	for i := 0; i < n; i++ {
		f.Ops = append(f.Ops, rundir.OpRef{Instance: "txn-" + strconv.Itoa(i%3), Process: strconv.Itoa(i % 3), F: "txn", Type: "ok", Line: 2*i + 1, Start: float64(i), End: float64(i) + 0.5})
		f.Cycle = append(f.Cycle, rundir.Edge{From: i, To: (i + 1) % n, Rel: "ww", Key: "1", Value: strconv.Itoa(i), Value2: strconv.Itoa(i + 1)})
	}
	return f
}

var pathNums = regexp.MustCompile(`-?[0-9.]+`)

// TestCycleGraph: what the SVG says, read back: a node per transaction
// named T1..Tn with the operation in its tooltip, an arrow per edge that
// leaves its first transaction's circle and ends at its second's, in the
// colour and with the label of its kind, and markup escaped.
func TestCycleGraph(t *testing.T) {
	for _, f := range []rundir.Finding{gSingle(), chainOf(2), chainOf(8), chainOf(40)} {
		t.Run(fmt.Sprint(len(f.Ops)), func(t *testing.T) {
			out := renderCycle(t, drawCycle("cycle-0", f))
			doc, err := html.Parse(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			circles := find(doc, tag("circle"))
			if len(circles) != len(f.Ops) {
				t.Fatalf("%d nodes, want %d", len(circles), len(f.Ops))
			}
			centre := make([][2]float64, len(circles))
			for i, c := range circles {
				x, _ := strconv.ParseFloat(attr(c, "cx"), 64)
				y, _ := strconv.ParseFloat(attr(c, "cy"), 64)
				centre[i] = [2]float64{x, y}
				g := c.Parent
				if name := text(g); !strings.HasPrefix(name, fmt.Sprintf("T%d", i+1)) {
					t.Errorf("node %d is named %q", i, name)
				}
				title := find(g, tag("title"))[0].FirstChild.Data
				if !strings.Contains(title, fmt.Sprintf("(line %d,", f.Ops[i].Line)) {
					t.Errorf("node %d's tooltip %q", i, title)
				}
			}
			edges := find(doc, func(n *html.Node) bool { return n.Data == "path" && hasClass(n, "edge") })
			if len(edges) != len(f.Cycle) {
				t.Fatalf("%d edges, want %d", len(edges), len(f.Cycle))
			}
			for i, e := range edges {
				want := f.Cycle[i]
				if !hasClass(e, "e-"+want.Rel) {
					t.Errorf("edge %d is %q, want e-%s", i, attr(e, "class"), want.Rel)
				}
				if m := attr(e, "marker-end"); m != "url(#cycle-0-"+want.Rel+")" {
					t.Errorf("edge %d has arrowhead %q", i, m)
				}
				nums := pathNums.FindAllString(attr(e, "d"), -1)
				p := func(k int) [2]float64 {
					x, _ := strconv.ParseFloat(nums[k], 64)
					y, _ := strconv.ParseFloat(nums[k+1], 64)
					return [2]float64{x, y}
				}
				from, to := p(0), p(len(nums)-2)
				if d := dist(from, centre[want.From]); math.Abs(d-15) > 0.2 {
					t.Errorf("edge %d starts %.1f from T%d's centre, not on its rim", i, d, want.From+1)
				}
				if d := dist(to, centre[want.To]); math.Abs(d-18) > 0.2 {
					t.Errorf("edge %d ends %.1f from T%d's centre, not at its rim", i, d, want.To+1)
				}
			}
			labels := find(doc, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "el") })
			for i, l := range labels {
				if want := relText(f.Cycle[i]); text(l) != want {
					t.Errorf("edge %d's label %q, want %q", i, text(l), want)
				}
			}
			if strings.Contains(string(out), "<k>") {
				t.Error("a key that is markup was not escaped")
			}
		})
	}
	if l := relText(gSingle().Cycle[2]); l != "rw x: 1, next 4" {
		t.Errorf("rw label %q", l)
	}
	// What cannot be drawn is not: no cycle, an edge to an operation not
	// listed, a cycle too long.
	bad := gSingle()
	bad.Cycle[1].To = 3
	long := chainOf(maxCycleNodes + 1)
	for i, f := range []rundir.Finding{{Kind: "lost", Ops: gSingle().Ops}, bad, long} {
		if g := drawCycle("x", f); g != nil {
			t.Errorf("case %d drawn", i)
		}
	}
}

func dist(a, b [2]float64) float64 { return math.Hypot(a[0]-b[0], a[1]-b[1]) }

const txnExperiment = `apiVersion: chaos/v1alpha1
id: txn
workloads:
  - {name: txn, instances: 2, run: "true"}
flow: [txn]
checks:
  - {name: serializable, kind: list-append, workloads: [txn], consistency-models: [serializable]}
`

// TestCycleInReport: a run whose list-append history has write skew (a
// G2-item) shows the cycle in report.html as a graph beside its witness
// lines, from verdict.json as chaos evaluate writes it.
func TestCycleInReport(t *testing.T) {
	r := vt.New(t, "txn", txnExperiment, "").Started("txn", "local")
	r.Instance("txn", "txn-0", vt.Code(0)).Instance("txn", "txn-1", vt.Code(0))
	r.Finished("FAIL")
	r.Output("txn", "txn-0", ".chaos/history.jsonl", `{"process":0,"type":"invoke","f":"txn","value":[["r","x",null],["append","y",1]],"t":1}`+"\n"+`{"process":0,"type":"ok","f":"txn","value":[["r","x",[]],["append","y",1]],"t":2}`+"\n")
	r.Output("txn", "txn-1", ".chaos/history.jsonl", `{"process":0,"type":"invoke","f":"txn","value":[["r","y",null],["append","x",1]],"t":1}`+"\n"+`{"process":0,"type":"ok","f":"txn","value":[["r","y",[]],["append","x",1]],"t":2}`+"\n")
	d := r.Write()
	x, ps := experiment.Parse("x.yaml", []byte(txnExperiment))
	if ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	v, err := verdict.Evaluate(context.Background(), d, x, nil, verdict.Options{By: verdict.ByRun})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.VerdictFile(), mustJSON(t, v), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out := render(t, d.Root)
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	svgs := find(doc, func(n *html.Node) bool { return n.Data == "svg" && hasClass(n, "cycle") })
	if len(svgs) != 1 {
		t.Fatalf("%d cycle graphs, want 1 (verdict %s)", len(svgs), v.Verdict)
	}
	if got := len(find(svgs[0], tag("circle"))); got != 2 {
		t.Errorf("%d transactions drawn, want 2", got)
	}
	var labels []string
	for _, l := range find(svgs[0], func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "el") }) {
		labels = append(labels, text(l))
	}
	if strings.Join(labels, "|") != "rw x: (initial), next 1|rw y: (initial), next 1" && strings.Join(labels, "|") != "rw y: (initial), next 1|rw x: (initial), next 1" {
		t.Errorf("edge labels %q", labels)
	}
	// The witness lines are there too, one each.
	cell := svgs[0].Parent
	if w := text(cell); !strings.Contains(w, "T1 -rw-> T2: key ") {
		t.Errorf("the witness text is missing beside the graph: %q", w)
	}
}
