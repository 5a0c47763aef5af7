package elle

import (
	"slices"
	"sort"
)

// The graphs below are Elle's (elle.consistency-model, jepsen-io/elle): which
// anomaly implies which, which consistency model implies which, and which
// anomalies each model proscribes directly. They are data, ported as they
// are, so that the models a history rules out are the ones Elle names.

// impliedAnomalies: a -> b when an anomaly a is also an anomaly b.
var impliedAnomalies = map[string][]string{
	"G0":          {"G1c", "G0-process"},
	"G0-process":  {"G1c-process", "G0-realtime"},
	"G0-realtime": {"G1c-realtime"},

	"G1a": {"G1"},
	"G1b": {"G1"},
	"G1c": {"G1", "G1c-process"},

	"G1c-process":  {"G1c-realtime", "G1-process"},
	"G1c-realtime": {"G1-realtime"},
	"G1":           {"G1-process"},
	"G1-process":   {"G1-realtime"},

	"G-single-item":          {"G-single", "G-single-item-process", "G-nonadjacent-item"},
	"G-single-item-process":  {"G-single-process", "G-single-item-realtime", "G-nonadjacent-item-process"},
	"G-single-item-realtime": {"G-single-realtime", "G-nonadjacent-item-realtime"},

	"G-single":          {"G-nonadjacent", "GSIb", "G-single-process"},
	"G-single-process":  {"G-nonadjacent-process", "G-single-realtime"},
	"G-single-realtime": {"G-nonadjacent-realtime"},

	"G-nonadjacent-item":          {"G-nonadjacent", "G2-item", "G-nonadjacent-item-process"},
	"G-nonadjacent-item-process":  {"G-nonadjacent-process", "G2-item-process", "G-nonadjacent-item-realtime"},
	"G-nonadjacent-item-realtime": {"G2-item-realtime", "G-nonadjacent-realtime"},

	"G-nonadjacent":          {"G2", "G-nonadjacent-process"},
	"G-nonadjacent-process":  {"G2-process", "G-nonadjacent-realtime"},
	"G-nonadjacent-realtime": {"G2-realtime"},

	"G2":               {"G2-process"},
	"G2-item":          {"G2", "G2-item-process"},
	"G2-item-process":  {"G2-process", "G2-item-realtime"},
	"G2-item-realtime": {"G2-realtime"},
	"G2-process":       {"G2-realtime"},

	"GSIa": {"GSI"},
	"GSIb": {"GSI"},

	"incompatible-order": {"G1a"},
	"future-read":        {"G1c"},
	"dirty-update":       {"G1a"},
	"lost-update":        {"write-skew", "G2-item"},
	"write-skew":         {"G2"},
}

// anomalySeverity orders anomalies that do not imply each other, worst
// first, so cycle search looks for the worst kinds first.
var anomalySeverity = map[string][]string{
	"G0":           {"G1c"},
	"G0-process":   {"G1c-process"},
	"G0-realtime":  {"G1c-realtime"},
	"G1c":          {"G-single", "G2-item"},
	"G1c-process":  {"G-single-process", "G2-item-process"},
	"G1c-realtime": {"G-single-realtime", "G2-item-realtime"},
	"G2":           {"G0-process"},
	"G2-process":   {"G0-realtime"},
}

// canonicalModels maps the friendly names of models to Elle's canonical ones.
var canonicalModels = map[string]string{
	"consistent-view":                 "PL-2+",
	"conflict-serializable":           "PL-3",
	"cursor-stability":                "PL-CS",
	"forward-consistent-view":         "PL-FCV",
	"monotonic-snapshot-read":         "PL-MSR",
	"monotonic-view":                  "PL-2L",
	"read-committed":                  "PL-2",
	"read-uncommitted":                "PL-1",
	"repeatable-read":                 "PL-2.99",
	"serializable":                    "PL-3",
	"snapshot-isolation":              "PL-SI",
	"strict-serializable":             "PL-SS",
	"strong-serializable":             "PL-SS",
	"update-serializable":             "PL-3U",
	"strong-session-read-uncommitted": "strong-session-PL-1",
	"strong-session-read-committed":   "strong-session-PL-2",
	"strong-read-uncommitted":         "strong-PL-1",
	"strong-read-committed":           "strong-PL-2",
}

// friendlyModels is the inverse, as Elle prints it.
var friendlyModels = func() map[string]string {
	m := map[string]string{}
	for f, c := range canonicalModels {
		m[c] = f
	}
	m["PL-3"] = "serializable"
	m["PL-SS"] = "strong-serializable"
	return m
}()

func canonical(m string) string {
	if c, ok := canonicalModels[m]; ok {
		return c
	}
	return m
}

func friendly(m string) string {
	if f, ok := friendlyModels[m]; ok {
		return f
	}
	return m
}

// modelGraph: a -> b when a history that satisfies a satisfies b (names
// canonical).
var modelGraph = canonicalGraph(map[string][]string{
	"causal-cerone":               {"read-atomic"},
	"consistent-view":             {"cursor-stability", "monotonic-view"},
	"conflict-serializable":       {"view-serializable"},
	"cursor-stability":            {"read-committed", "PL-2"},
	"forward-consistent-view":     {"consistent-view"},
	"PL-2":                        {"PL-1"},
	"PL-3":                        {"repeatable-read", "update-serializable"},
	"update-serializable":         {"forward-consistent-view"},
	"monotonic-atomic-view":       {"read-committed"},
	"monotonic-view":              {"PL-2"},
	"monotonic-snapshot-read":     {"PL-2"},
	"parallel-snapshot-isolation": {"causal-cerone", "update-atomic"},
	"prefix":                      {"causal-cerone"},
	"read-atomic":                 {"monotonic-atomic-view"},
	"read-committed":              {"read-uncommitted"},
	"repeatable-read":             {"cursor-stability", "monotonic-atomic-view"},
	"update-atomic":               {"read-atomic"},
	"serializable":                {"repeatable-read", "snapshot-isolation", "view-serializable"},
	"session-serializable":        {"1SR"},
	"snapshot-isolation":          {"forward-consistent-view", "monotonic-atomic-view", "monotonic-snapshot-read", "parallel-snapshot-isolation", "prefix"},
	"strict-serializable":         {"PL-3", "serializable", "linearizable", "snapshot-isolation", "strong-snapshot-isolation", "strong-session-serializable"},

	"strong-session-PL-1": {"PL-1"},
	"strong-session-PL-2": {"PL-2", "strong-session-PL-1"},
	"strong-PL-1":         {"strong-session-PL-1"},
	"strong-PL-2":         {"strong-session-PL-2", "strong-PL-1"},

	"strong-session-serializable":       {"serializable", "strong-session-snapshot-isolation"},
	"strong-session-snapshot-isolation": {"snapshot-isolation", "strong-session-PL-2"},
	"strong-serializable":               {"session-serializable"},
	"strong-snapshot-isolation":         {"strong-session-snapshot-isolation", "strong-PL-2"},

	"linearizable": {"sequential"},
	"sequential":   {"causal"},
	"causal":       {"writes-follow-reads", "PRAM"},
	"PRAM":         {"monotonic-reads", "monotonic-writes", "read-your-writes"},
})

// directProscribed: the anomalies each (canonical) model forbids on top of
// the models it implies.
var directProscribed = canonicalKeys(map[string][]string{
	"causal-cerone":                     {"internal", "G1a"},
	"cursor-stability":                  {"G1", "G-cursor", "lost-update"},
	"monotonic-view":                    {"G1", "G-monotonic"},
	"monotonic-snapshot-read":           {"G1", "G-MSR"},
	"consistent-view":                   {"G1", "G-single"},
	"forward-consistent-view":           {"G1", "G-SIb"},
	"parallel-snapshot-isolation":       {"internal", "G1a"},
	"PL-3":                              {"G1", "G2", "predicate-read-miss", "PL-3-cycle-exists"},
	"PL-2":                              {"G1", "PL-2-cycle-exists"},
	"PL-1":                              {"G0", "duplicate-elements", "cyclic-versions", "PL-1-cycle-exists"},
	"prefix":                            {"internal", "G1a"},
	"serializable":                      {"internal"},
	"snapshot-isolation":                {"internal", "G1", "G-SI", "G-nonadjacent", "PL-SI-cycle-exists"},
	"read-atomic":                       {"internal", "G1a", "future-read"},
	"repeatable-read":                   {"G1", "G2-item", "PL-2.99-cycle-exists", "lost-update"},
	"update-atomic":                     {"lost-update"},
	"strict-serializable":               {"G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists"},
	"strong-session-PL-1":               {"strong-session-PL-1-cycle-exists", "G0-process"},
	"strong-session-PL-2":               {"strong-session-PL-2-cycle-exists", "G1c-process"},
	"strong-PL-1":                       {"strong-PL-1-cycle-exists", "G0-realtime"},
	"strong-PL-2":                       {"strong-PL-2-cycle-exists", "G1c-realtime"},
	"strong-session-snapshot-isolation": {"internal", "G1-process", "G-nonadjacent-process", "strong-session-snapshot-isolation-cycle-exists"},
	"strong-snapshot-isolation":         {"internal", "G1-realtime", "G-nonadjacent-realtime", "strong-snapshot-isolation-cycle-exists"},
	"strong-session-serializable":       {"G1-process", "G2-process", "strong-session-serializable-cycle-exists"},
	"update-serializable":               {"G1", "G-update"},
})

func canonicalGraph(g map[string][]string) map[string][]string {
	out := map[string][]string{}
	for a, bs := range g {
		a = canonical(a)
		for _, b := range bs {
			b = canonical(b)
			if a != b && !slices.Contains(out[a], b) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

func canonicalKeys(g map[string][]string) map[string][]string {
	out := map[string][]string{}
	for a, bs := range g {
		a = canonical(a)
		for _, b := range bs {
			if !slices.Contains(out[a], b) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

func invert(g map[string][]string) map[string][]string {
	out := map[string][]string{}
	for a, bs := range g {
		for _, b := range bs {
			out[b] = append(out[b], a)
		}
	}
	return out
}

var (
	impliedBy        = invert(impliedAnomalies)
	modelsImpliedBy  = invert(modelGraph)
	proscribedByWhom = invert(directProscribed)
)

// reach is every vertex reachable from start in g, start included.
func reach(g map[string][]string, start []string) map[string]bool {
	seen := map[string]bool{}
	q := append([]string(nil), start...)
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		if seen[v] {
			continue
		}
		seen[v] = true
		q = append(q, g[v]...)
	}
	return seen
}

// KnownModels lists the consistency models a check may name.
func KnownModels() []string {
	set := map[string]bool{}
	for f := range canonicalModels {
		set[f] = true
	}
	for a, bs := range modelGraph {
		set[friendly(a)] = true
		for _, b := range bs {
			set[friendly(b)] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Prohibited is the set of anomalies that cannot appear if every model
// holds, with the anomalies that imply them.
func Prohibited(models, anomalies []string) map[string]bool {
	var cs []string
	for _, m := range models {
		cs = append(cs, canonical(m))
	}
	var direct []string
	for m := range reach(modelGraph, cs) {
		direct = append(direct, directProscribed[m]...)
	}
	out := reach(impliedBy, direct)
	for a := range reach(impliedBy, anomalies) {
		out[a] = true
	}
	return out
}

// Boundary is, for anomalies found, the weakest models they rule out (Not)
// and the stronger ones ruled out with them (AlsoNot), by friendly name.
func Boundary(anomalies []string) (not, alsoNot []string) {
	var ms []string
	for a := range reach(impliedAnomalies, anomalies) {
		ms = append(ms, proscribedByWhom[a]...)
	}
	impossible := reach(modelsImpliedBy, ms)
	// The weakest: drop a model that implies another impossible one.
	weakest := map[string]bool{}
	for m := range impossible {
		weakest[m] = true
	}
	names := sortedKeys(impossible)
	for _, m := range names {
		for w := range reach(modelGraph, []string{m}) {
			if w != m && weakest[w] {
				delete(weakest, m)
				break
			}
		}
	}
	nset, aset := map[string]bool{}, map[string]bool{}
	for _, m := range names {
		if weakest[m] {
			nset[friendly(m)] = true
		} else {
			aset[friendly(m)] = true
		}
	}
	return sortedKeys(nset), sortedKeys(aset)
}

// Satisfied lists the strongest of the given models the history still
// satisfies, given its anomalies.
func Satisfied(candidates, anomalies []string) []string {
	var out []string
	for _, m := range candidates {
		bad := false
		p := Prohibited([]string{m}, nil)
		for _, a := range anomalies {
			if p[a] {
				bad = true
				break
			}
		}
		if !bad {
			out = append(out, m)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// anomalyDepth orders anomalies: those no other implies (or outranks) first.
var anomalyDepth = func() map[string]int {
	g := map[string][]string{}
	for a, bs := range impliedAnomalies {
		g[a] = append(g[a], bs...)
	}
	for a, bs := range anomalySeverity {
		g[a] = append(g[a], bs...)
	}
	in := map[string]int{}
	verts := map[string]bool{}
	for a, bs := range g {
		verts[a] = true
		for _, b := range bs {
			verts[b] = true
			in[b]++
		}
	}
	depth := map[string]int{}
	var top []string
	for v := range verts {
		if in[v] == 0 {
			top = append(top, v)
		}
	}
	for d := 0; len(top) > 0; d++ {
		var next []string
		for _, v := range top {
			depth[v] = d
			for _, b := range g[v] {
				in[b]--
				if in[b] == 0 {
					next = append(next, b)
				}
			}
		}
		top = next
	}
	return depth
}()
