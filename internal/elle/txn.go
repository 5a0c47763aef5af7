// Package elle checks transactional histories the way Jepsen's Elle does
// (github.com/jepsen-io/elle): from list-append or read-write-register
// transactions it infers the write-write, write-read and read-write
// dependencies between transactions, adds process and real-time order
// where the consistency models asked for need them, finds the cycles
// (Tarjan's strongly connected components, then the shortest cycle of each
// kind by breadth-first search) and names them as Adya's anomalies (G0,
// G1c, G-single, G-nonadjacent, G2-item and their -process and -realtime
// variants), beside the anomalies seen without a cycle (G1a, G1b, internal,
// duplicate elements, incompatible orders, lost and dirty updates). Which
// anomalies fail the check depends on the consistency models named, as in
// Elle's consistency-model graph.
package elle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/history"
)

// Checker kinds.
const (
	ListAppend = "list-append"
	RWRegister = "rw-register"
)

// Mop is one micro-operation of a transaction: [f, key, value].
type Mop struct {
	F   string
	Key string
	// Value is the written or appended value, or a register read's value
	// ("null" for nil), canonical (history.Key).
	Value string
	// List is a list-append read's elements; Nil marks a read with no
	// value (an invocation's, or an info's).
	List []string
	Nil  bool
}

func (m Mop) String() string {
	switch {
	case m.F == "r" && m.Nil:
		return fmt.Sprintf("r %s nil", m.Key)
	case m.F == "r" && len(m.List) > 4:
		// The end of a long list is what the edges speak of.
		return fmt.Sprintf("r %s [(%d more) … %s]", m.Key, len(m.List)-3, strings.Join(m.List[len(m.List)-3:], " "))
	case m.F == "r" && m.List != nil:
		return fmt.Sprintf("r %s [%s]", m.Key, strings.Join(m.List, " "))
	}
	return fmt.Sprintf("%s %s %s", m.F, m.Key, m.Value)
}

// Txn is one transaction of the history.
type Txn struct {
	// Op is the history's operation (its completion decides Type).
	Op   *history.Op
	Type string
	Mops []Mop
}

// Name is how a witness names the transaction: process, line and time.
func (t *Txn) Name() string {
	return fmt.Sprintf("%s (line %d, t=%.3f)", t.Op.PID(), t.Op.Line, t.Op.Start)
}

// Text is the transaction's micro-operations, as completed.
func (t *Txn) Text() string {
	parts := make([]string, len(t.Mops))
	for i, m := range t.Mops {
		parts[i] = "[" + m.String() + "]"
	}
	return t.Type + " " + strings.Join(parts, " ")
}

// parseTxns reads the history's txn operations; anything else, or a
// malformed transaction, is the client's problem: left out and named.
func parseTxns(h *history.History, kind string) (txns []Txn, problems []string) {
	p := newParser(kind)
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.F != "txn" {
			problems = append(problems, fmt.Sprintf("%s: f %q is not txn", o.Ref(), o.F))
			continue
		}
		raw := o.InvokeValue
		if o.Type == history.OK {
			raw = o.Value
		}
		mops, err := p.mops(raw, o.Type == history.OK)
		if err != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", o.Ref(), err))
			continue
		}
		txns = append(txns, Txn{Op: o, Type: o.Type, Mops: mops})
	}
	return txns, problems
}

// parser reads micro-operations. A history of 100,000 transactions holds
// millions of list elements, so it keeps as few copies as it can: one
// string per element (in), and one backing array per key that every read
// of the key which is a prefix of it shares (lists; a key's list only
// grows, so in a sound history every read is a prefix of the longest).
type parser struct {
	kind  string
	in    interner
	lists map[string][]string
	// outer, mop, elems and scratch are reused from one call to the next.
	outer, mop, elems [][]byte
	scratch           []string
}

func newParser(kind string) *parser {
	return &parser{kind: kind, in: interner{}, lists: map[string][]string{}}
}

const notMops = "the value is not a list of micro-operations [f, key, value]"

func (p *parser) mops(raw json.RawMessage, ok bool) ([]Mop, string) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return []Mop{}, ""
	}
	if !json.Valid(raw) {
		return nil, notMops
	}
	var isList bool
	if p.outer, isList = splitArray(raw, p.outer); !isList {
		return nil, notMops
	}
	out := make([]Mop, 0, len(p.outer))
	for _, e := range p.outer {
		var m [][]byte
		if string(e) != "null" {
			if p.mop, isList = splitArray(e, p.mop); !isList {
				return nil, notMops
			}
			m = p.mop
		}
		if len(m) != 3 {
			return nil, fmt.Sprintf("micro-operation %s is not [f, key, value]", clip(fmt.Sprintf("%s", m)))
		}
		f, isString := mopF(m[0])
		if !isString {
			return nil, fmt.Sprintf("micro-operation [%s, …]: f is not a string", clip(string(m[0])))
		}
		mop := Mop{F: f, Key: key(m[1])}
		v := m[2]
		null := string(v) == "null"
		switch {
		case p.kind == ListAppend && f == "append":
			mop.Value = key(m[2])
		case p.kind == ListAppend && f == "r":
			if !ok {
				mop.Nil = true
				break
			}
			if null {
				// An ok read of nil is the empty list, as Elle reads it.
				mop.List = []string{}
				break
			}
			if p.elems, isList = splitArray(v, p.elems); !isList {
				return nil, fmt.Sprintf("read [%q, %s, %s]: the value is not a list", f, clip(string(m[1])), clip(string(v)))
			}
			mop.List = p.list(mop.Key, p.elems)
		case p.kind == RWRegister && f == "w":
			mop.Value = key(m[2])
		case p.kind == RWRegister && f == "r":
			mop.Value = key(m[2])
			mop.Nil = !ok
		default:
			want := "append or r"
			if p.kind == RWRegister {
				want = "w or r"
			}
			return nil, fmt.Sprintf("micro-operation [%q, %s, %s]: unknown f %q, want %s", f, clip(string(m[1])), clip(string(v)), f, want)
		}
		out = append(out, mop)
	}
	return out, ""
}

// list is a read's elements, sharing the key's backing array when the
// read is a prefix of it or extends it. The slice returned is capped at
// its length, so that no append through it reaches the shared array.
func (p *parser) list(k string, elems [][]byte) []string {
	if len(elems) == 0 {
		return []string{}
	}
	l := p.scratch[:0]
	for _, e := range elems {
		l = append(l, p.in.key(e))
	}
	p.scratch = l
	n := len(l)
	buf := p.lists[k]
	switch {
	case n <= len(buf) && equal(buf[:n], l):
	case isPrefix(buf, l):
		buf = append(buf, l[len(buf):]...)
		p.lists[k] = buf
	default:
		// Not in the key's order (an anomaly): a copy of its own, which
		// becomes the one to share when it is the longer.
		own := append([]string(nil), l...)
		if n > len(buf) {
			p.lists[k] = own
		}
		return own
	}
	return buf[:n:n]
}

// mopF is a micro-operation's f, without the decoder for the usual ones.
func mopF(raw []byte) (string, bool) {
	switch string(raw) {
	case `"r"`:
		return "r", true
	case `"append"`:
		return "append", true
	case `"w"`:
		return "w", true
	}
	var f string
	return f, json.Unmarshal(raw, &f) == nil
}

// splitArray splits the JSON array raw (already known to be valid JSON)
// into its elements' text, trimmed, without copying; false when raw is
// not an array. dst is reused.
func splitArray(raw []byte, dst [][]byte) ([][]byte, bool) {
	raw = bytes.TrimSpace(raw)
	dst = dst[:0]
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return dst, false
	}
	body := raw[1 : len(raw)-1]
	if len(bytes.TrimSpace(body)) == 0 {
		return dst, true
	}
	depth, inString, escaped, start := 0, false, false, 0
	for i, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				dst = append(dst, bytes.TrimSpace(body[start:i]))
				start = i + 1
			}
		}
	}
	return append(dst, bytes.TrimSpace(body[start:])), true
}

type interner map[string]string

func (in interner) key(raw []byte) string {
	if s, ok := in[string(raw)]; ok {
		return s
	}
	s := key(raw)
	in[string(raw)] = s
	return s
}

// key is history.Key with a fast path for the small integers histories
// are made of (a JSON integer without a fraction is already canonical).
func key(raw json.RawMessage) string {
	if n := len(raw); n > 0 && n < 16 {
		digits := true
		for i, c := range raw {
			if !(c >= '0' && c <= '9' || c == '-' && i == 0 && n > 1) {
				digits = false
				break
			}
		}
		if digits && !(string(raw) == "-0") {
			return string(raw)
		}
	}
	return history.Key(raw)
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Anomaly is one instance of an anomaly.
type Anomaly struct {
	Type string
	// Txns are the transactions involved (indices into the checked list),
	// in the cycle's order for a cycle (the first is not repeated).
	Txns []int
	// Steps are a cycle's edges, each labelled (cycles only).
	Steps []Step
	// Text says what happened, for people.
	Text string
}

// addEdgesOfOrder adds process edges (each ok transaction of a process to
// its next ok one) and real-time edges (an ok transaction to every one
// invoked after it completed, transitively reduced as Elle does: only
// from the completions no later completion has already followed).
func addOrderEdges(g *graph, txns []Txn, process, realtime bool) {
	if process {
		last := map[string]int{}
		idx := make([]int, len(txns))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return txns[idx[a]].Op.Start < txns[idx[b]].Op.Start })
		for _, i := range idx {
			if txns[i].Type != history.OK {
				continue
			}
			p := txns[i].Op.PID()
			if j, ok := last[p]; ok {
				g.link(j, i, Process, Why{})
			}
			last[p] = i
		}
	}
	if realtime {
		type ev struct {
			t      float64
			invoke bool
			i      int
		}
		evs := make([]ev, 0, 2*len(txns))
		for i, t := range txns {
			evs = append(evs, ev{t.Op.Start, true, i})
			if t.Type == history.OK {
				evs = append(evs, ev{t.Op.End, false, i})
			}
		}
		// At equal times the invocation comes first: no order is claimed
		// between operations the clock cannot tell apart.
		sort.SliceStable(evs, func(a, b int) bool {
			if evs[a].t != evs[b].t {
				return evs[a].t < evs[b].t
			}
			return evs[a].invoke && !evs[b].invoke
		})
		buf := map[int]bool{}
		preds := map[int][]int{}
		for _, e := range evs {
			if e.invoke {
				for j := range buf {
					g.link(j, e.i, Realtime, Why{})
					preds[e.i] = append(preds[e.i], j)
				}
				continue
			}
			for _, j := range preds[e.i] {
				delete(buf, j)
			}
			delete(preds, e.i)
			buf[e.i] = true
		}
	}
}

// lostUpdates finds ok transactions that read the same value of a key and
// then both wrote it (Elle's lost-update-cases).
func lostUpdates(txns []Txn, write string, readValue func(Mop) string) []Anomaly {
	type kv struct{ k, v string }
	groups := map[kv][]int{}
	var order []kv
	for i, t := range txns {
		if t.Type != history.OK {
			continue
		}
		// The first read of each key, rendered only when the key is then
		// written (most reads are not followed by a write of their key).
		reads := map[string]Mop{}
		wrote := map[string]bool{}
		for _, m := range t.Mops {
			if m.F == write {
				if wrote[m.Key] {
					continue
				}
				rm, read := reads[m.Key]
				if !read {
					continue
				}
				wrote[m.Key] = true
				g := kv{m.Key, readValue(rm)}
				if len(groups[g]) == 0 {
					order = append(order, g)
				}
				groups[g] = append(groups[g], i)
				continue
			}
			if _, read := reads[m.Key]; !read {
				reads[m.Key] = m
			}
		}
	}
	var out []Anomaly
	for _, g := range order {
		if ts := groups[g]; len(ts) > 1 {
			out = append(out, Anomaly{Type: "lost-update", Txns: ts, Text: fmt.Sprintf("%d transactions read key %s = %s and each then wrote it", len(ts), g.k, g.v)})
		}
	}
	return out
}
