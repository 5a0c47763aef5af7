package elle

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// DefaultModels is what a check holds the history to when it names none,
// as Elle does.
var DefaultModels = []string{"strict-serializable"}

// DefaultBudget bounds the cycle search of one strongly connected
// component, in edges examined; past it the search stops and the check
// says so (Elle bounds it by time, a second per component).
const DefaultBudget = 20_000_000

// Options configure a transactional check.
type Options struct {
	// Kind is ListAppend or RWRegister.
	Kind string
	// Models are the consistency models the history must satisfy
	// (DefaultModels when empty).
	Models []string
	// Anomalies are more anomalies that fail the check (Elle's :anomalies).
	Anomalies []string
	// WFR (rw-register) assumes writes follow reads within a transaction,
	// which orders a value read before the value the same transaction
	// then wrote.
	WFR bool
	// Budget bounds the cycle search per component (DefaultBudget).
	Budget int
	// Ctx, when set, stops the cycle search when it is cancelled (Ctrl-C):
	// the check is then INCONCLUSIVE, saying so.
	Ctx context.Context
}

// Unknown anomalies make a check inconclusive rather than failed.
var unknownTypes = []string{"empty-transaction-graph", "cycle-search-timeout"}

// Analysis is what a check found.
type Analysis struct {
	// Valid is "true", "false" or "unknown", as Elle's :valid?.
	Valid string
	// Types are the anomaly types reported: those the models forbid, and
	// the unknown ones (Elle's :anomaly-types).
	Types []string
	// Found holds every anomaly found, reported or not.
	Found map[string][]Anomaly
	// Not and AlsoNot are the models ruled out: the weakest, and the
	// stronger ones with them.
	Not, AlsoNot []string
	// Satisfied are the strongest models the history still satisfies,
	// among those the checker can decide with the edges it used.
	Satisfied []string
	Txns      []Txn
	// Problems are the client's: operations left out, values not unique.
	Problems []string
	// Edges and Components describe the dependency graph.
	Edges, Components int
	bad               map[string]bool
}

// candidates are the models Satisfied chooses from, strongest first.
var candidates = []string{"strict-serializable", "strong-snapshot-isolation", "strong-session-serializable", "strong-session-snapshot-isolation", "serializable", "snapshot-isolation", "repeatable-read", "strong-read-committed", "strong-session-read-committed", "read-committed", "strong-read-uncommitted", "strong-session-read-uncommitted", "read-uncommitted"}

// heapHook, when set (by a test), runs when the graph is complete.
var heapHook func()

// Analyze checks a transactional history.
func Analyze(h *history.History, opt Options) *Analysis {
	if len(opt.Models) == 0 {
		opt.Models = DefaultModels
	}
	if opt.Budget <= 0 {
		opt.Budget = DefaultBudget
	}
	a := &Analysis{}
	txns, problems := parseTxns(h, opt.Kind)
	a.Txns, a.Problems = txns, problems
	var found map[string][]Anomaly
	var build func(keep func(a, b int) bool) *graph
	if opt.Kind == RWRegister {
		var ps []string
		found, build, ps = registerAnalysis(txns, opt.WFR)
		a.Problems = append(a.Problems, ps...)
	} else {
		found, build = appendAnalysis(txns)
	}
	prohibited := Prohibited(opt.Models, opt.Anomalies)
	reportable := map[string]bool{}
	for t := range prohibited {
		reportable[t] = true
	}
	for _, t := range unknownTypes {
		reportable[t] = true
	}
	// Order edges only where a reportable anomaly needs them: real time
	// (which holds each process's order too), else process order.
	realtime, process := false, false
	for t := range reportable {
		realtime = realtime || strings.HasSuffix(t, "-realtime")
		process = process || strings.HasSuffix(t, "-process")
	}
	g := build(nil)
	addOrderEdges(g, txns, process && !realtime, realtime)
	// The edges that justify a cycle are kept only where there is one:
	// the graph is built again, keeping those inside a component.
	if sccs := g.sccs(); len(sccs) > 0 {
		comp := map[int]int{}
		for i, c := range sccs {
			for _, v := range c {
				comp[v] = i + 1
			}
		}
		g = build(func(a, b int) bool { return comp[a] != 0 && comp[a] == comp[b] })
		addOrderEdges(g, txns, process && !realtime, realtime)
	}
	a.Edges = g.edges()
	if a.Edges == 0 {
		found["empty-transaction-graph"] = []Anomaly{{Type: "empty-transaction-graph", Text: fmt.Sprintf("no dependency between the %d transactions: nothing to find a cycle in", len(txns))}}
	}
	if heapHook != nil {
		heapHook()
	}
	if opt.Ctx != nil {
		g.stop = opt.Ctx.Done()
	}
	cycles, timedOut := g.cycles(opt.Budget)
	if g.stopped {
		found["cycle-search-timeout"] = []Anomaly{{Type: "cycle-search-timeout", Text: "the cycle search was stopped before it finished"}}
		timedOut = 0
	}
	a.Components = len(g.sccs())
	for _, c := range cycles {
		an := Anomaly{Type: c.Type, Steps: c.Steps}
		for _, s := range c.Steps {
			an.Txns = append(an.Txns, s.From)
		}
		if c.SCC != nil {
			an.Txns = c.SCC
			an.Text = fmt.Sprintf("a cycle that %s forbids exists among %d transactions, though none of a named kind was found", friendly(strings.TrimSuffix(c.Type, "-cycle-exists")), len(c.SCC))
		}
		found[c.Type] = append(found[c.Type], an)
	}
	// As Elle's result-map: a cycle-exists anomaly says nothing more once
	// other anomalies rule its model out.
	var named []string
	for t := range found {
		if !strings.HasSuffix(t, "-cycle-exists") {
			named = append(named, t)
		}
	}
	impossible := impossibleModels(named)
	for t := range found {
		if m, ok := strings.CutSuffix(t, "-cycle-exists"); ok && impossible[m] {
			delete(found, t)
		}
	}
	if timedOut > 0 {
		found["cycle-search-timeout"] = []Anomaly{{Type: "cycle-search-timeout", Text: fmt.Sprintf("the cycle search ran past its budget (%d edges) in %d component(s): cycles there may be unnamed", opt.Budget, timedOut)}}
	}
	a.Found = found
	a.bad = map[string]bool{}
	var all []string
	for t := range found {
		all = append(all, t)
		if reportable[t] {
			a.Types = append(a.Types, t)
		}
		if prohibited[t] {
			a.bad[t] = true
		}
	}
	sort.Strings(a.Types)
	switch {
	case len(a.Types) == 0:
		a.Valid = "true"
	case len(a.bad) > 0:
		a.Valid = "false"
	default:
		a.Valid = "unknown"
	}
	a.Not, a.AlsoNot = Boundary(all)
	var decidable []string
	for _, m := range candidates {
		session := strings.HasPrefix(m, "strong-session-")
		rt := m == "strict-serializable" || strings.HasPrefix(m, "strong-") && !session
		if (rt && !realtime) || (session && !realtime && !process) {
			continue
		}
		decidable = append(decidable, m)
	}
	a.Satisfied = strongest(Satisfied(decidable, all))
	return a
}

// strongest drops each model another of the list implies.
func strongest(ms []string) []string {
	var out []string
	for _, m := range ms {
		implied := false
		for _, o := range ms {
			if o != m && canonical(o) != canonical(m) && reach(modelGraph, []string{canonical(o)})[canonical(m)] {
				implied = true
				break
			}
		}
		if !implied {
			out = append(out, m)
		}
	}
	return out
}

// Check runs Analyze and turns it into a history check's result: FAIL when
// an anomaly the models forbid was found, INCONCLUSIVE when nothing could
// be decided (no transaction, no dependency, a search past its budget).
func Check(h *history.History, opt Options) *history.Result {
	a := Analyze(h, opt)
	models := opt.Models
	if len(models) == 0 {
		models = DefaultModels
	}
	r := &history.Result{Outcome: history.Valid}
	if len(a.Problems) > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d problem(s) of the client were left out of the %s check: %s", len(a.Problems), opt.Kind, history.Quote(a.Problems, 3)))
	}
	n := map[string]int{}
	for _, t := range a.Txns {
		n[t.Type]++
	}
	r.Summary = append(r.Summary, fmt.Sprintf("%d transactions (%d ok, %d info, %d failed); %d dependencies; checked against %s", len(a.Txns), n[history.OK], n[history.Info], n[history.Fail], a.Edges, strings.Join(models, ", ")))
	if n[history.OK] == 0 {
		r.Outcome = history.Inconclusive
		r.Summary = append(r.Summary, "no transaction completed ok: nothing read, nothing to decide")
		return r
	}
	switch a.Valid {
	case "false":
		r.Outcome = history.Invalid
	case "unknown":
		r.Outcome = history.Inconclusive
	}
	for _, t := range a.Types {
		cases := a.Found[t]
		word := "forbidden"
		if !a.bad[t] {
			word = "undecided"
		}
		r.Summary = append(r.Summary, fmt.Sprintf("%s (%s): %d", t, word, len(cases)))
		var values []string
		var ops []*history.Op
		for i, c := range cases {
			if i == 3 {
				r.Summary = append(r.Summary, fmt.Sprintf("  … %d more", len(cases)-3))
				break
			}
			lines := a.describe(c)
			for _, l := range lines {
				r.Summary = append(r.Summary, "  "+l)
			}
			if i == 0 {
				values = lines
				for _, ti := range c.Txns {
					ops = append(ops, a.Txns[ti].Op)
				}
			}
		}
		f := rundir.Finding{Kind: t, Count: len(cases), Bad: a.bad[t], Values: values}
		for i, o := range ops {
			if i == limits.MaxFindingOps {
				break
			}
			f.Ops = append(f.Ops, history.RefOf(o))
		}
		f.Cycle = cycleEdges(cases[0], len(f.Ops))
		r.Findings = append(r.Findings, f)
	}
	var others []string
	for t := range a.Found {
		if !slices.Contains(a.Types, t) {
			others = append(others, fmt.Sprintf("%s (%d)", t, len(a.Found[t])))
		}
	}
	sort.Strings(others)
	if len(others) > 0 {
		r.Summary = append(r.Summary, "also seen, allowed by "+strings.Join(models, ", ")+": "+strings.Join(others, ", "))
	}
	if len(a.Not) > 0 {
		r.Summary = append(r.Summary, "rules out: "+strings.Join(a.Not, ", ")+" (and so "+strings.Join(a.AlsoNot, ", ")+")")
	}
	if len(a.Satisfied) > 0 {
		r.Summary = append(r.Summary, "still satisfies: "+strings.Join(a.Satisfied, ", "))
	} else {
		r.Summary = append(r.Summary, "satisfies none of "+strings.Join(candidates, ", "))
	}
	return r
}

// cycleEdges is a cycle's witness for verdict.json: each step an edge
// between the anomaly's transactions, as positions in its list of them
// (of which the finding names the first n).
func cycleEdges(c Anomaly, n int) []rundir.Edge {
	pos := map[int]int{}
	for i, t := range c.Txns {
		if _, seen := pos[t]; !seen {
			pos[t] = i
		}
	}
	var out []rundir.Edge
	for _, s := range c.Steps {
		from, okf := pos[s.From]
		to, okt := pos[s.To]
		if !okf || !okt || from >= n || to >= n {
			return nil
		}
		out = append(out, rundir.Edge{From: from, To: to, Rel: s.Rel.String(), Key: s.Why.Key, Value: s.Why.Value, Value2: s.Why.Value2})
	}
	return out
}

// describe renders an anomaly as lines a person can check by hand: a
// cycle as its transactions, then each edge with the key and values that
// make it.
func (a *Analysis) describe(c Anomaly) []string {
	if len(c.Steps) == 0 {
		return []string{c.Text}
	}
	name := map[int]string{}
	var out []string
	for i, s := range c.Steps {
		name[s.From] = fmt.Sprintf("T%d", i+1)
		t := &a.Txns[s.From]
		out = append(out, fmt.Sprintf("T%d = %s %s", i+1, t.Name(), t.Text()))
	}
	for _, s := range c.Steps {
		out = append(out, fmt.Sprintf("%s -%s-> %s: %s", name[s.From], s.Rel, name[s.To], a.why(s, name)))
	}
	return out
}

func (a *Analysis) why(s Step, name map[int]string) string {
	x, y := name[s.From], name[s.To]
	w := s.Why
	switch s.Rel {
	case WW:
		return fmt.Sprintf("key %s: %s wrote %s, then %s wrote %s after it", w.Key, x, w.Value, y, w.Value2)
	case WR:
		return fmt.Sprintf("key %s: %s read the %s that %s wrote", w.Key, y, w.Value, x)
	case RW:
		return fmt.Sprintf("key %s: %s read %s, and %s wrote %s, the next version, which %s did not see", w.Key, x, w.Value, y, w.Value2, x)
	case Process:
		return fmt.Sprintf("%s ran before %s on process %s", x, y, a.Txns[s.From].Op.PID())
	case Realtime:
		return fmt.Sprintf("%s completed (t=%.3f) before %s began (t=%.3f)", x, a.Txns[s.From].Op.End, y, a.Txns[s.To].Op.Start)
	}
	return ""
}
