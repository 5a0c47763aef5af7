package experiment_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// FuzzParseExperiment: Parse never panics, whatever the input; a manifest
// it accepts has an id and a flow, and binding it never panics either.
// testdata/fuzz/FuzzParseExperiment holds inputs that once broke it.
func FuzzParseExperiment(f *testing.F) {
	for _, pattern := range []string{"testdata/good/*.yaml", "testdata/seeds/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, tc := range experiment.BadExperimentsForFuzz() {
		f.Add([]byte(tc))
	}
	var adapters []*adapter.Adapter
	for _, a := range adapter.Builtins() {
		adapters = append(adapters, a)
	}
	files, _ := filepath.Glob("testdata/adapters/*.yaml")
	for _, file := range files {
		a, ps := adapter.Load(file)
		if ps.Err() != nil {
			f.Fatal(ps)
		}
		adapters = append(adapters, a)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		x, ps := experiment.Parse("fuzz.yaml", data)
		if x == nil {
			t.Fatal("Parse returned no experiment")
		}
		if !sort.SliceIsSorted(ps, func(i, j int) bool {
			a, b := ps[i].Pos, ps[j].Pos
			return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
		}) {
			t.Errorf("problems are not sorted: %v", ps)
		}
		for _, p := range ps {
			if p.File != "fuzz.yaml" || p.Msg == "" {
				t.Errorf("bad problem %#v", p)
			}
		}
		if ps.Err() != nil {
			return
		}
		if x.ID == "" {
			t.Fatalf("accepted an experiment without an id:\n%s", data)
		}
		if x.Flow == nil {
			t.Fatalf("accepted an experiment without a flow:\n%s", data)
		}
		x.Flow.Walk(func(n *experiment.FlowNode) { _ = n.Label() })
		for _, a := range adapters {
			r := binding.Bind(x, a)
			if r.Status == binding.Invalid && r.Problems.Err() == nil {
				t.Errorf("invalid on %s without an error", a.ID)
			}
		}
	})
}
