package elle

import (
	"fmt"

	"github.com/chaos-harness/chaos/internal/history"
)

const nilValue = "null"

// extReads is the first value read of each key a transaction did not write
// before reading; extWrites the last value written of each key.
func extReads(t *Txn) map[string]string {
	out := map[string]string{}
	touched := map[string]bool{}
	for _, m := range t.Mops {
		if m.F == "r" && !touched[m.Key] && !m.Nil {
			out[m.Key] = m.Value
		}
		touched[m.Key] = true
	}
	return out
}

func extWrites(t *Txn) map[string]string {
	out := map[string]string{}
	for _, m := range t.Mops {
		if m.F == "w" {
			out[m.Key] = m.Value
		}
	}
	return out
}

// registerAnalysis is what an rw-register history shows, as Elle's
// elle.rw-register with its default version order (the initial nil before
// every value) and, with wfr, writes following reads within a transaction.
// Values written must be unique per key; a value written twice is the
// client's problem, named in problems.
func registerAnalysis(txns []Txn, wfr bool) (map[string][]Anomaly, func(keep func(a, b int) bool) *graph, []string) {
	an := map[string][]Anomaly{}
	add := func(a Anomaly) { an[a.Type] = append(an[a.Type], a) }
	var problems []string
	failed := map[string]map[string]int{}
	intermediate := map[string]map[string]int{}
	for i, t := range txns {
		final := map[string]string{}
		for _, m := range t.Mops {
			if m.F != "w" {
				continue
			}
			if t.Type == history.Fail {
				setIn(failed, m.Key, m.Value, i)
			}
			if prev, ok := final[m.Key]; ok {
				setIn(intermediate, m.Key, prev, i)
			}
			final[m.Key] = m.Value
		}
	}
	for i, t := range txns {
		if t.Type != history.OK {
			continue
		}
		state := map[string]string{}
		internal := false
		for _, m := range t.Mops {
			switch m.F {
			case "w":
				state[m.Key] = m.Value
			case "r":
				if w, ok := failed[m.Key][m.Value]; ok {
					add(Anomaly{Type: "G1a", Txns: []int{i, w}, Text: fmt.Sprintf("%s read key %s = %s, which the failed %s wrote", t.Name(), m.Key, m.Value, txns[w].Name())})
				}
				if w, ok := intermediate[m.Key][m.Value]; ok && w != i {
					add(Anomaly{Type: "G1b", Txns: []int{i, w}, Text: fmt.Sprintf("%s read key %s = %s, an intermediate write of %s (which wrote it again later)", t.Name(), m.Key, m.Value, txns[w].Name())})
				}
				if s, ok := state[m.Key]; ok && s != m.Value && !internal {
					internal = true
					add(Anomaly{Type: "internal", Txns: []int{i}, Text: fmt.Sprintf("%s read key %s = %s, but its own earlier read or write says %s", t.Name(), m.Key, m.Value, s)})
				}
				state[m.Key] = m.Value
			}
		}
	}
	for _, a := range lostUpdates(txns, "w", func(m Mop) string { return m.Value }) {
		add(a)
	}

	// Version order: nil precedes every value; with wfr, a value read
	// precedes the value the same transaction then wrote.
	type edge struct{ a, b string }
	versions := map[string]map[edge]bool{}
	link := func(k, a, b string) {
		if versions[k] == nil {
			versions[k] = map[edge]bool{}
		}
		versions[k][edge{a, b}] = true
	}
	for _, t := range txns {
		if t.Type == history.Fail {
			continue
		}
		for k, v := range extWrites(&t) {
			if v != nilValue {
				link(k, nilValue, v)
			}
		}
		if t.Type == history.OK {
			for k, v := range extReads(&t) {
				if v != nilValue {
					link(k, nilValue, v)
				}
			}
		}
	}
	if wfr {
		wv := map[string]map[edge]bool{}
		for _, t := range txns {
			if t.Type != history.OK {
				continue
			}
			w := extWrites(&t)
			for k, v := range extReads(&t) {
				if v2, ok := w[k]; ok && v != nilValue && v != v2 {
					if wv[k] == nil {
						wv[k] = map[edge]bool{}
					}
					wv[k][edge{v, v2}] = true
				}
			}
		}
		for _, k := range sortedKeys(wv) {
			// A cycle of versions is an anomaly, and the order that made
			// it is not used (Elle's cyclic-versions).
			vg := newVersionGraph()
			for e := range wv[k] {
				vg.link(e.a, e.b)
			}
			if vg.cyclic() {
				add(Anomaly{Type: "cyclic-versions", Text: fmt.Sprintf("key %s: the versions read and then overwritten form a cycle", k)})
				continue
			}
			for e := range wv[k] {
				link(k, e.a, e.b)
			}
		}
	}

	// Dependencies between ok transactions.
	readers := map[string]map[string][]int{}
	writers := map[string]map[string][]int{}
	for i, t := range txns {
		if t.Type != history.OK {
			continue
		}
		for k, v := range extReads(&t) {
			if readers[k] == nil {
				readers[k] = map[string][]int{}
			}
			readers[k][v] = append(readers[k][v], i)
		}
		for k, v := range extWrites(&t) {
			if writers[k] == nil {
				writers[k] = map[string][]int{}
			}
			writers[k][v] = append(writers[k][v], i)
		}
	}
	for _, k := range sortedKeys(readers) {
		for _, v := range sortedKeys(readers[k]) {
			if ws := writers[k][v]; len(ws) > 1 {
				problems = append(problems, fmt.Sprintf("key %s: value %s was written by %d transactions (%s and %s); rw-register needs unique values", k, v, len(ws), txns[ws[0]].Name(), txns[ws[1]].Name()))
			}
		}
	}
	build := func(keep func(a, b int) bool) *graph {
		g := newGraph(len(txns))
		g.keep = keep
		for _, k := range sortedKeys(readers) {
			for _, v := range sortedKeys(readers[k]) {
				ws := writers[k][v]
				if len(ws) > 1 {
					continue
				}
				for _, w := range ws {
					for _, r := range readers[k][v] {
						g.link(w, r, WR, Why{Key: k, Value: v})
					}
				}
			}
		}
		for _, k := range sortedKeys(versions) {
			for e := range versions[k] {
				for _, w2 := range writers[k][e.b] {
					for _, w1 := range writers[k][e.a] {
						g.link(w1, w2, WW, Why{Key: k, Value: e.a, Value2: e.b})
					}
					for _, r := range readers[k][e.a] {
						g.link(r, w2, RW, Why{Key: k, Value: e.a, Value2: e.b})
					}
				}
			}
		}
		return g
	}
	return an, build, problems
}

// versionGraph is a small graph of one key's versions.
type versionGraph struct {
	id  map[string]int
	out [][]int
}

func newVersionGraph() *versionGraph { return &versionGraph{id: map[string]int{}} }

func (v *versionGraph) node(s string) int {
	i, ok := v.id[s]
	if !ok {
		i = len(v.out)
		v.id[s] = i
		v.out = append(v.out, nil)
	}
	return i
}

func (v *versionGraph) link(a, b string) {
	i, j := v.node(a), v.node(b)
	v.out[i] = append(v.out[i], j)
}

func (v *versionGraph) cyclic() bool {
	g := newGraph(len(v.out))
	for i, os := range v.out {
		for _, j := range os {
			g.link(i, j, WW, Why{})
		}
	}
	return len(g.sccs()) > 0
}
