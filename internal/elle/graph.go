package elle

import (
	"sort"
)

// Rel is a set of dependency kinds between two transactions.
type Rel uint8

// Dependency kinds. Their order is the order an edge is explained in when
// it has several (Elle's explainers: ww, then wr, then rw, then the
// session and real-time orders).
const (
	WW Rel = 1 << iota
	WR
	RW
	Process
	Realtime
)

var relNames = []string{"ww", "wr", "rw", "process", "realtime"}

func (r Rel) String() string {
	for i, n := range relNames {
		if r == 1<<i {
			return n
		}
	}
	return "?"
}

// first is the rel an edge is explained as.
func (r Rel) first() Rel { return r & -r }

// Why justifies one edge: the key and the values that make it.
type Why struct {
	Key string `json:"key,omitempty"`
	// Value is what the first transaction wrote or read; Value2 what the
	// second wrote or read (ww, rw).
	Value  string `json:"value,omitempty"`
	Value2 string `json:"value2,omitempty"`
}

// graph is a dependency graph over transactions (by index in the txn list).
type graph struct {
	n   int
	out [][]int32
	rel map[uint64]Rel
	why map[uint64]Why
	// keep says which edges' justifications to keep: only those that can
	// lie on a cycle are ever shown, and keeping all of them cost more
	// memory than the rest of the graph (nil keeps none).
	keep func(a, b int) bool
	// stop, when closed, ends the cycle search; stopped says it did.
	stop    <-chan struct{}
	stopped bool
}

func newGraph(n int) *graph {
	return &graph{n: n, out: make([][]int32, n), rel: map[uint64]Rel{}, why: map[uint64]Why{}}
}

func edgeKey(a, b int) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }

func whyKey(a, b int, r Rel) uint64 { return edgeKey(a, b)<<0 ^ uint64(r)<<59 }

// link adds a -> b of kind r, justified by w (kept when it is the first).
func (g *graph) link(a, b int, r Rel, w Why) {
	if a == b || a < 0 || b < 0 {
		return
	}
	k := edgeKey(a, b)
	old, ok := g.rel[k]
	if !ok {
		g.out[a] = append(g.out[a], int32(b))
	}
	if old&r == 0 {
		g.rel[k] = old | r
		if r != Process && r != Realtime && g.keep != nil && g.keep(a, b) {
			g.why[whyKey(a, b, r)] = w
		}
	}
}

func (g *graph) edges() int { return len(g.rel) }

// sccs lists the strongly connected components with a cycle (more than one
// vertex), by Tarjan's algorithm without recursion (a history of 100,000
// transactions would overflow nothing, but would be deep).
func (g *graph) sccs() [][]int {
	index := make([]int32, g.n)
	low := make([]int32, g.n)
	on := make([]bool, g.n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := int32(0)
	type frame struct{ v, i int }
	for s := 0; s < g.n; s++ {
		if index[s] >= 0 {
			continue
		}
		call := []frame{{s, 0}}
		index[s], low[s] = next, next
		next++
		stack = append(stack, s)
		on[s] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.i < len(g.out[v]) {
				w := int(g.out[v][f.i])
				f.i++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					on[w] = true
					call = append(call, frame{w, 0})
				} else if on[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				var c []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					on[w] = false
					c = append(c, w)
					if w == v {
						break
					}
				}
				if len(c) > 1 {
					sort.Ints(c)
					out = append(out, c)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// halted reports whether the search was asked to stop.
func (g *graph) halted() bool {
	if g.stop == nil {
		return false
	}
	select {
	case <-g.stop:
		g.stopped = true
		return true
	default:
		return false
	}
}

// spec is a kind of cycle to look for, as Elle's cycle-anomaly-specs.
type spec struct {
	name string
	// rels may be used; required must each appear at least once.
	rels     Rel
	required []Rel
	// rw: 0 any number, 1 exactly one, 2 at least two.
	rw int
	// nonadjacent: no two rw edges follow each other (around the cycle).
	nonadjacent bool
	// typed: the cycle found must be classified as this very name.
	typed bool
}

// cycleSpecs are Elle's, with their -process and -realtime variants, worst
// first. The predicate kinds (G-single, G-nonadjacent, G2) cannot be told
// from item histories and are left out, as Elle finds none of them here.
var cycleSpecs = func() []spec {
	base := []spec{
		{name: "G0", rels: WW},
		{name: "G1c", rels: WW | WR, required: []Rel{WR}},
		{name: "G-single-item", rels: WW | WR | RW, rw: 1, typed: true},
		{name: "G-nonadjacent-item", rels: WW | WR | RW, rw: 2, nonadjacent: true, typed: true},
		{name: "G2-item", rels: WW | WR | RW, rw: 2, typed: true},
	}
	var out []spec
	for _, s := range base {
		out = append(out, s)
		for _, v := range []struct {
			name string
			rel  Rel
		}{{"process", Process}, {"realtime", Realtime}} {
			x := s
			x.name = s.name + "-" + v.name
			x.rels |= v.rel
			x.required = append(append([]Rel(nil), s.required...), v.rel)
			out = append(out, x)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		di, dj := anomalyDepth[out[i].name], anomalyDepth[out[j].name]
		if di != dj {
			return di < dj
		}
		return out[i].name < out[j].name
	})
	return out
}()

// Step is one edge of a cycle, as a witness.
type Step struct {
	From, To int
	Rel      Rel
	Why      Why
}

// classify names a cycle as Elle's cycle explainer does, from the kind each
// edge is explained as.
func classify(steps []Step) string {
	var n [5]int
	rwAdj := false
	for i, s := range steps {
		for b := 0; b < 5; b++ {
			if s.Rel == 1<<b {
				n[b]++
			}
		}
		prev := steps[(i+len(steps)-1)%len(steps)]
		if s.Rel == RW && prev.Rel == RW {
			rwAdj = true
		}
	}
	var t string
	switch rw, wr, ww := n[2], n[1], n[0]; {
	case rw == 1:
		t = "G-single-item"
	case rw > 1 && rwAdj:
		t = "G2-item"
	case rw > 1:
		t = "G-nonadjacent-item"
	case wr > 0:
		t = "G1c"
	case ww > 0:
		t = "G0"
	default:
		return ""
	}
	switch {
	case n[4] > 0:
		t += "-realtime"
	case n[3] > 0:
		t += "-process"
	}
	return t
}

// searchState is a vertex and what the path to it has used.
type searchState struct {
	v        int32
	rw       uint8 // rw edges so far, capped at 2
	lastRW   bool
	firstRW  bool
	required uint8 // bits of spec.required met
}

// find looks for the shortest cycle of the spec through the vertices of one
// SCC, trying start vertices in order; budget bounds the edges examined
// (Elle bounds its search by time). It returns the cycle's steps, and
// false when the budget ran out.
func (g *graph) find(sc spec, scc []int, in map[int]bool, budget *int) ([]Step, bool) {
	allReq := uint8(1)<<len(sc.required) - 1
	for _, start := range scc {
		type node struct {
			s    searchState
			prev int32
			from int32
			rel  Rel
		}
		nodes := []node{{s: searchState{v: int32(start)}, prev: -1}}
		seen := map[searchState]bool{nodes[0].s: true}
		for head := 0; head < len(nodes); head++ {
			cur := nodes[head]
			for _, w := range g.out[cur.s.v] {
				if !in[int(w)] {
					continue
				}
				*budget--
				if *budget < 0 {
					return nil, false
				}
				if *budget&4095 == 0 && g.stop != nil {
					select {
					case <-g.stop:
						g.stopped = true
						*budget = -1
						return nil, false
					default:
					}
				}
				rels := g.rel[edgeKey(int(cur.s.v), int(w))] & sc.rels
				for rels != 0 {
					r := rels.first()
					rels &^= r
					ns := cur.s
					ns.v = w
					if r == RW {
						if sc.rw == 0 && sc.rels&RW == 0 {
							continue
						}
						if sc.rw == 1 && ns.rw >= 1 {
							continue
						}
						if sc.nonadjacent && cur.s.lastRW {
							continue
						}
						if head == 0 {
							ns.firstRW = true
						}
						if ns.rw < 2 {
							ns.rw++
						}
						ns.lastRW = true
					} else {
						ns.lastRW = false
					}
					for i, q := range sc.required {
						if r == q {
							ns.required |= 1 << i
						}
					}
					if int(w) == start {
						ok := ns.required == allReq
						switch sc.rw {
						case 1:
							ok = ok && ns.rw == 1
						case 2:
							ok = ok && ns.rw >= 2
						}
						if sc.nonadjacent && ns.lastRW && ns.firstRW {
							ok = false
						}
						if !ok {
							continue
						}
						// Walk back.
						steps := []Step{{From: int(cur.s.v), To: start, Rel: r}}
						for i := head; nodes[i].prev >= 0; i = int(nodes[i].prev) {
							steps = append(steps, Step{From: int(nodes[i].from), To: int(nodes[i].s.v), Rel: nodes[i].rel})
						}
						for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
							steps[i], steps[j] = steps[j], steps[i]
						}
						return steps, true
					}
					if seen[ns] {
						continue
					}
					seen[ns] = true
					nodes = append(nodes, node{s: ns, prev: int32(head), from: cur.s.v, rel: r})
				}
			}
		}
	}
	return nil, true
}

// explain labels each step as the kind it is explained as (the first of
// its edge's kinds), with the keys and values that justify it.
func (g *graph) explain(steps []Step) []Step {
	for i := range steps {
		s := &steps[i]
		s.Rel = g.rel[edgeKey(s.From, s.To)].first()
		s.Why = g.why[whyKey(s.From, s.To, s.Rel)]
	}
	return steps
}

// Cycle is an anomaly found as a cycle, with its witness.
type Cycle struct {
	Type  string
	Steps []Step
	// SCC is the component of a cycle-exists anomaly (no cycle named).
	SCC []int
}

// cycles searches every SCC for every kind of cycle, worst first, skipping
// the kinds a cycle already found implies (as Elle does). timedOut reports
// SCCs whose search ran out of budget.
func (g *graph) cycles(budgetPerSCC int) (found []Cycle, timedOut int) {
	for _, scc := range g.sccs() {
		in := make(map[int]bool, len(scc))
		for _, v := range scc {
			in[v] = true
		}
		redundant := map[string]bool{}
		budget := budgetPerSCC
		exists := g.cycleExists(scc, in)
		var types []string
		for _, sc := range cycleSpecs {
			if redundant[sc.name] {
				continue
			}
			steps, ok := g.find(sc, scc, in, &budget)
			if !ok {
				timedOut++
				break
			}
			if steps == nil {
				continue
			}
			steps = g.explain(steps)
			t := classify(steps)
			if sc.typed && t != sc.name {
				continue
			}
			if t == "" {
				continue
			}
			found = append(found, Cycle{Type: t, Steps: steps})
			types = append(types, t)
			for a := range reach(impliedAnomalies, []string{t}) {
				redundant[a] = true
			}
		}
		// A cycle that breaks a model is shown when one was found; where
		// none was named, the model's own subgraph says a cycle exists.
		impossible := impossibleModels(types)
		for _, m := range exists {
			if !impossible[m] {
				found = append(found, Cycle{Type: m + "-cycle-exists", SCC: scc})
			}
		}
	}
	return found, timedOut
}

// impossibleModels are the (canonical) models the anomalies rule out.
func impossibleModels(anomalies []string) map[string]bool {
	var ms []string
	for a := range reach(impliedAnomalies, anomalies) {
		ms = append(ms, proscribedByWhom[a]...)
	}
	return reach(modelsImpliedBy, ms)
}

// existSpec is one of Elle's cycle-exists specifications: a model, and the
// subgraph that must be acyclic for it to hold. With ext set, the subgraph
// is the extension of rels by one ext edge (snapshot isolation lets a
// cycle through a single anti-dependency hop).
type existSpec struct {
	model string
	rels  Rel
	ext   Rel
}

var existSpecs = []existSpec{
	{"PL-1", WW, 0},
	{"PL-2", WW | WR, 0},
	{"PL-SI", WW | WR, RW},
	{"PL-2.99", WW | WR | RW, 0},
	{"PL-3", WW | WR | RW, 0},
	{"strong-session-PL-1", WW | Process, 0},
	{"strong-session-PL-2", WW | WR | Process, 0},
	{"strong-session-snapshot-isolation", WW | WR | Process, RW},
	{"strong-session-serializable", WW | WR | RW | Process, 0},
	{"strong-PL-1", WW | Realtime, 0},
	{"strong-PL-2", WW | WR | Realtime, 0},
	{"strong-snapshot-isolation", WW | WR | Realtime, RW},
	{"PL-SS", WW | WR | RW | Realtime, 0},
}

// cycleExists is Elle's cycle-exists-cases for one SCC: for each model in
// turn, whether its subgraph has a cycle (a self-loop counts), skipping
// the models stronger than one already ruled out.
func (g *graph) cycleExists(scc []int, in map[int]bool) []string {
	var out []string
	redundant := map[string]bool{}
	pos := make(map[int]int, len(scc))
	for i, v := range scc {
		pos[v] = i
	}
	for _, sp := range existSpecs {
		if redundant[sp.model] || g.halted() {
			continue
		}
		adj := make([][]int32, len(scc))
		self := false
		for i, u := range scc {
			seen := map[int]bool{}
			for _, y := range g.out[u] {
				if !in[int(y)] {
					continue
				}
				r := g.rel[edgeKey(u, int(y))]
				if r&sp.rels != 0 && !seen[int(y)] {
					seen[int(y)] = true
					adj[i] = append(adj[i], int32(pos[int(y)]))
				}
				if sp.ext == 0 || r&sp.rels == 0 {
					continue
				}
				for _, z := range g.out[y] {
					if !in[int(z)] || seen[int(z)] && int(z) != u || g.rel[edgeKey(int(y), int(z))]&sp.ext == 0 {
						continue
					}
					if int(z) == u {
						self = true
						continue
					}
					seen[int(z)] = true
					adj[i] = append(adj[i], int32(pos[int(z)]))
				}
			}
		}
		sub := &graph{n: len(scc), out: adj}
		if self || len(sub.sccs()) > 0 {
			out = append(out, sp.model)
			for m := range reach(modelsImpliedBy, []string{sp.model}) {
				redundant[m] = true
			}
		}
	}
	return out
}
