package elle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// txnHist builds a history from lines "process type value start end" (the
// value JSON without spaces; type ok, info or fail, an invoke implied).
func txnHist(t testing.TB, text string) *history.History {
	t.Helper()
	var evs []history.Event
	for i, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Fatalf("bad line %q", l)
		}
		var s, e float64
		fmt.Sscan(f[3], &s)
		fmt.Sscan(f[4], &e)
		inv := json.RawMessage(f[2])
		evs = append(evs,
			history.Event{Instance: "c", Line: 2*i + 1, Process: f[0], Type: history.Invoke, F: "txn", Value: inv, T: s, Timed: true},
			history.Event{Instance: "c", Line: 2*i + 2, Process: f[0], Type: f[1], F: "txn", Value: inv, T: e, Timed: true})
	}
	sortEvents(evs)
	return history.FromEvents(evs)
}

func sortEvents(evs []history.Event) {
	slices.SortStableFunc(evs, func(a, b history.Event) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
}

// TestEachAnomalyAlone: a hand-made history for each anomaly, holding that
// one (and what it implies by construction), checked against the model
// that forbids it and one that allows it.
func TestEachAnomalyAlone(t *testing.T) {
	for _, c := range []struct {
		name, kind, hist string
		models           []string
		want             []string // anomaly types reported
		valid            string
	}{
		{"G0: two appends each first on one key", ListAppend, `
			0 ok [["append","x",1],["append","y",1]] 0 1
			1 ok [["append","x",2],["append","y",2]] 0 1
			2 ok [["r","x",[1,2]],["r","y",[2,1]]] 2 3`, []string{"read-uncommitted"}, []string{"G0"}, "false"},
		{"G1a: read of a failed append", ListAppend, `
			0 fail [["append","x",1]] 0 1
			1 ok [["r","x",[1]],["append","y",1]] 2 3
			1 ok [["r","y",[1]]] 4 5`, []string{"read-committed"}, []string{"G1a"}, "false"},
		{"G1a allowed by read-uncommitted", ListAppend, `
			0 fail [["append","x",1]] 0 1
			1 ok [["r","x",[1]],["append","y",1]] 2 3
			1 ok [["r","y",[1]]] 4 5`, []string{"read-uncommitted"}, nil, "true"},
		{"G1b: read of an intermediate append", ListAppend, `
			0 ok [["append","x",1],["append","x",2]] 0 1
			1 ok [["r","x",[1]]] 0 1`, []string{"read-committed"}, []string{"G1b"}, "false"},
		{"G1c: circular information flow", ListAppend, `
			0 ok [["append","x",1],["r","y",[1]]] 0 1
			1 ok [["append","y",1],["r","x",[1]]] 0 1`, []string{"read-committed"}, []string{"G1c"}, "false"},
		{"G-single-item: read skew", RWRegister, `
			0 ok [["w","x",1],["w","y",1]] 0 1
			1 ok [["r","x",null],["r","y",1]] 0 1`, []string{"snapshot-isolation"}, []string{"G-single-item"}, "false"},
		{"G-single-item allowed by read-committed", RWRegister, `
			0 ok [["w","x",1],["w","y",1]] 0 1
			1 ok [["r","x",null],["r","y",1]] 0 1`, []string{"read-committed"}, nil, "true"},
		{"G2-item: write skew, allowed by snapshot isolation", ListAppend, `
			0 ok [["r","x",[]],["append","y",1]] 0 1
			1 ok [["r","y",[]],["append","x",1]] 0 1`, []string{"snapshot-isolation"}, nil, "true"},
		{"G2-item: write skew, forbidden by serializable", ListAppend, `
			0 ok [["r","x",[]],["append","y",1]] 0 1
			1 ok [["r","y",[]],["append","x",1]] 0 1`, []string{"serializable"}, []string{"G2-item"}, "false"},
		{"G-nonadjacent-item: two rw apart", ListAppend, `
			0 ok [["r","x",[]],["r","w",[1]]] 0 1
			1 ok [["append","x",1],["append","y",1]] 0 1
			2 ok [["r","y",[1]],["r","z",[]]] 0 1
			3 ok [["append","z",1],["append","w",1]] 0 1`, []string{"snapshot-isolation"}, []string{"G-nonadjacent-item"}, "false"},
		{"G0-process: a process's own writes out of order", ListAppend, `
			0 ok [["append","x",1]] 0 1
			0 ok [["append","y",1]] 2 3
			1 ok [["append","y",2]] 0 0.5
			1 ok [["append","x",2]] 0.6 0.7
			2 ok [["r","x",[2,1]],["r","y",[1,2]]] 4 5`, []string{"strong-session-read-uncommitted"}, []string{"G0-process"}, "false"},
		{"G1c-realtime: a stale read after a completed write", ListAppend, `
			0 ok [["append","x",1]] 0 1
			1 ok [["r","x",[]],["append","y",1]] 2 3
			2 ok [["r","y",[1]]] 4 5`, []string{"strict-serializable"}, []string{"G-single-item-realtime"}, "false"},
		{"the same stale read is serializable", ListAppend, `
			0 ok [["append","x",1]] 0 1
			1 ok [["r","x",[]],["append","y",1]] 2 3
			2 ok [["r","y",[1]]] 4 5`, []string{"serializable"}, nil, "true"},
		{"internal: a read that misses the txn's own append", ListAppend, `
			0 ok [["append","x",1],["r","x",[]]] 0 1
			1 ok [["r","x",[1]]] 2 3`, []string{"serializable"}, []string{"internal"}, "false"},
		{"duplicate elements", ListAppend, `
			0 ok [["append","x",1]] 0 1
			1 ok [["r","x",[1,1]]] 2 3`, []string{"read-uncommitted"}, []string{"duplicate-elements"}, "false"},
		{"incompatible orders", ListAppend, `
			0 ok [["append","x",1]] 0 1
			1 ok [["append","x",2]] 0 1
			2 ok [["r","x",[1,2]]] 2 3
			3 ok [["r","x",[2,1]]] 2 3`, []string{"read-committed"}, []string{"incompatible-order"}, "false"},
		{"lost update", RWRegister, `
			0 ok [["w","x",0]] 0 1
			1 ok [["r","x",0],["w","x",1]] 2 3
			2 ok [["r","x",0],["w","x",2]] 2 3`, []string{"repeatable-read"}, []string{"lost-update"}, "false"},
		{"dirty update", ListAppend, `
			0 fail [["append","x",1]] 0 1
			1 ok [["append","x",2]] 2 3
			2 ok [["r","x",[1,2]]] 4 5`, []string{"read-committed"}, []string{"G1a", "dirty-update"}, "false"},
		{"an info append may have happened", ListAppend, `
			0 info [["append","x",1]] 0 1
			1 ok [["r","x",[1]]] 2 3
			1 ok [["append","x",2],["r","x",[1,2]]] 4 5`, []string{"strict-serializable"}, nil, "true"},
		{"a serial history", RWRegister, `
			0 ok [["w","x",1]] 0 1
			1 ok [["r","x",1],["w","y",1]] 2 3
			0 ok [["r","y",1],["r","x",1]] 4 5`, []string{"strict-serializable"}, nil, "true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Analyze(txnHist(t, c.hist), Options{Kind: c.kind, Models: c.models})
			if !slices.Equal(a.Types, c.want) || a.Valid != c.valid {
				t.Errorf("types %v valid %s, want %v %s", a.Types, a.Valid, c.want, c.valid)
				for _, as := range a.Found {
					for _, an := range as {
						t.Logf("%s: %s", an.Type, strings.Join(a.describe(an), "\n    "))
					}
				}
			}
			for _, ty := range c.want {
				for _, an := range a.Found[ty] {
					if len(a.describe(an)) == 0 || (strings.HasPrefix(ty, "G") && len(an.Steps) == 0 && an.Text == "") {
						t.Errorf("%s has no witness", ty)
					}
				}
			}
		})
	}
}

// TestWitness: each edge of a cycle is labelled with its kind, key and
// values, and the cycle closes.
func TestWitness(t *testing.T) {
	a := Analyze(txnHist(t, `
		0 ok [["r","x",[]],["append","y",1]] 0 1
		1 ok [["r","y",[]],["append","x",1]] 0 1`), Options{Kind: ListAppend, Models: []string{"serializable"}})
	c := a.Found["G2-item"]
	if len(c) != 1 || len(c[0].Steps) != 2 {
		t.Fatalf("G2-item: %+v", a.Found)
	}
	s := c[0].Steps
	if s[0].To != s[1].From || s[1].To != s[0].From {
		t.Errorf("the cycle does not close: %+v", s)
	}
	got := a.describe(c[0])
	want := []string{
		"T1 = c/0 (line 1, t=0.000) ok [r x []] [append y 1]",
		"T2 = c/1 (line 3, t=0.000) ok [r y []] [append x 1]",
		"T1 -rw-> T2: key x: T1 read (initial), and T2 wrote 1, the next version, which T1 did not see",
		"T2 -rw-> T1: key y: T2 read (initial), and T1 wrote 1, the next version, which T2 did not see",
	}
	if !slices.Equal(got, want) {
		t.Errorf("witness:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// verdict.json's finding carries the same cycle as edges between its
	// operations, for the report to draw.
	r := Check(txnHist(t, `
		0 ok [["r","x",[]],["append","y",1]] 0 1
		1 ok [["r","y",[]],["append","x",1]] 0 1`), Options{Kind: ListAppend, Models: []string{"serializable"}})
	if len(r.Findings) != 1 {
		t.Fatalf("findings %+v", r.Findings)
	}
	f := r.Findings[0]
	wantEdges := []rundir.Edge{{From: 0, To: 1, Rel: "rw", Key: "x", Value: "(initial)", Value2: "1"}, {From: 1, To: 0, Rel: "rw", Key: "y", Value: "(initial)", Value2: "1"}}
	if !slices.Equal(f.Cycle, wantEdges) || len(f.Ops) != 2 || f.Ops[0].Line != 1 || f.Ops[1].Line != 3 {
		t.Errorf("cycle %+v between %+v", f.Cycle, f.Ops)
	}
}

func TestInconclusive(t *testing.T) {
	for _, c := range []struct{ name, hist, why string }{
		{"every transaction failed", `
			0 fail [["append","x",1]] 0 1
			1 fail [["r","x",null]] 0 1`, "no transaction completed ok"},
		{"no dependency", `
			0 ok [["r","x",[]]] 0 1`, "empty-transaction-graph"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(txnHist(t, c.hist), Options{Kind: ListAppend})
			if r.Outcome != history.Inconclusive || !strings.Contains(r.Detail(), c.why) {
				t.Errorf("%s:\n%s", r.Outcome, r.Detail())
			}
		})
	}
}

// TestClientProblems: operations that are not transactions, or hold
// micro-operations of the other checker, are the client's problem: a
// warning, left out, never a FAIL.
func TestClientProblems(t *testing.T) {
	h := txnHist(t, `
		0 ok [["append","x",1]] 0 1
		1 ok [["w","x",2]] 0 1
		1 ok [["r","x",[1]]] 2 3`)
	h.Ops = append(h.Ops, history.Op{Index: len(h.Ops), Instance: "c", Process: "9", F: "read", Type: history.OK, Value: json.RawMessage(`1`), InvokeValue: json.RawMessage(`1`)})
	r := Check(h, Options{Kind: ListAppend})
	if r.Outcome != history.Valid || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `2 problem(s) of the client`) || !strings.Contains(r.Warnings[0], `unknown f "w", want append or r`) {
		t.Errorf("%s %q\n%s", r.Outcome, r.Warnings, r.Detail())
	}
}

// TestModels: every model an experiment may name is one Elle's graph knows
// and forbids something.
func TestModels(t *testing.T) {
	known := KnownModels()
	for _, m := range experiment.TxnModels {
		if !slices.Contains(known, m) {
			t.Errorf("%s: not in Elle's model graph", m)
		}
		if len(Prohibited([]string{m}, nil)) == 0 {
			t.Errorf("%s forbids nothing", m)
		}
	}
	if p := Prohibited([]string{"serializable"}, nil); !p["G2-item"] || !p["G-single-item"] || p["G-single-item-realtime"] {
		t.Errorf("serializable: %v", sortedKeys(p))
	}
	if p := Prohibited([]string{"snapshot-isolation"}, nil); p["G2-item"] || !p["G-single-item"] {
		t.Errorf("snapshot-isolation: %v", sortedKeys(p))
	}
}

// TestSplitArray: the splitter the parser uses instead of the decoder
// finds the elements encoding/json finds.
func TestSplitArray(t *testing.T) {
	for _, s := range []string{`[]`, ` [ ] `, `[1]`, `[1, 2 ,3]`, `["a,b", "c\\"]", "[\"]\"]"]`, `[[1,[2,3]],{"a":[1,2],"b":"}"},null]`, `{"a":1}`, `"x"`, `3`, `[["append",1,2],["r",1,[1,2]]]`} {
		checkSplit(t, s)
	}
}

func checkSplit(t *testing.T, s string) {
	t.Helper()
	if !json.Valid([]byte(s)) {
		return
	}
	var want []json.RawMessage
	wantOK := json.Unmarshal([]byte(s), &want) == nil && strings.HasPrefix(strings.TrimSpace(s), "[")
	got, ok := splitArray([]byte(s), nil)
	if ok != wantOK {
		t.Fatalf("%q: array %v, encoding/json says %v", s, ok, wantOK)
	}
	if !ok {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%q: %d elements %q, encoding/json %d %q", s, len(got), got, len(want), want)
	}
	for i := range got {
		if string(got[i]) != strings.TrimSpace(string(want[i])) {
			t.Errorf("%q: element %d is %q, encoding/json %q", s, i, got[i], want[i])
		}
	}
}

func FuzzSplitArray(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a,]",[2,{"b":[3]}]]`, `"\\"`} {
		f.Add(s)
	}
	f.Fuzz(checkSplit)
}

func FuzzParseMops(f *testing.F) {
	for _, s := range []string{`[["append",1,2],["r",1,[1,2]]]`, `[["w","x",1],["r","x",null]]`, `[]`, `null`, `[["r"]]`, `[[1,2,3]]`, `[["r",{"a":1},[[1]]]]`} {
		f.Add(s, true, false)
	}
	f.Fuzz(func(t *testing.T, s string, ok, register bool) {
		kind := ListAppend
		if register {
			kind = RWRegister
		}
		mops, problem := newParser(kind).mops(json.RawMessage(s), ok)
		if problem != "" && mops != nil {
			t.Errorf("%q: problem %q and %d mops", s, problem, len(mops))
		}
		for _, m := range mops {
			if m.F != "r" && m.F != "append" && m.F != "w" {
				t.Errorf("%q: f %q", s, m.F)
			}
			_ = m.String()
		}
		// Whatever the value, a history of it checks without a panic.
		h := history.FromEvents([]history.Event{
			{Instance: "c", Line: 1, Process: "0", Type: history.Invoke, F: "txn", Value: json.RawMessage(s), T: 0, Timed: true},
			{Instance: "c", Line: 2, Process: "0", Type: history.OK, F: "txn", Value: json.RawMessage(s), T: 1, Timed: true},
		})
		Check(h, Options{Kind: kind})
	})
}

// TestStop: a cancelled context stops the cycle search, and the check says
// it could not decide.
func TestStop(t *testing.T) {
	h := genListAppend(1000, 16, 3, 7)
	// Make every read stale by one element, so the graph is one big knot.
	for i := range h.Ops {
		o := &h.Ops[i]
		var mops [][]json.RawMessage
		json.Unmarshal(o.Value, &mops)
		for _, m := range mops {
			var l []int
			if string(m[0]) == `"r"` && json.Unmarshal(m[2], &l) == nil && len(l) > 1 {
				m[2], _ = json.Marshal(l[:len(l)-1])
			}
		}
		o.Value, _ = json.Marshal(mops)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := Analyze(h, Options{Kind: ListAppend, Ctx: ctx})
	if len(a.Found["cycle-search-timeout"]) != 1 || !strings.Contains(a.Found["cycle-search-timeout"][0].Text, "stopped") {
		t.Errorf("found %v", sortedKeys(a.Found))
	}
}
