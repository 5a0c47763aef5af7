package elle

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/history"
)

const initState = "\x00init"

// appendAnalysis is what a list-append history shows, as Elle's
// elle.list-append: its non-cycle anomalies and its dependency graph.
func appendAnalysis(txns []Txn) (map[string][]Anomaly, func(keep func(a, b int) bool) *graph) {
	an := map[string][]Anomaly{}
	add := func(a Anomaly) { an[a.Type] = append(an[a.Type], a) }
	failed := map[string]map[string]int{}       // key -> element -> failed txn
	intermediate := map[string]map[string]int{} // key -> element -> txn
	writerAll := map[string]map[string]int{}    // key -> element -> txn (any type)
	for i, t := range txns {
		final := map[string]string{}
		for _, m := range t.Mops {
			if m.F != "append" {
				continue
			}
			if t.Type == history.Fail {
				setIn(failed, m.Key, m.Value, i)
			}
			if prev, ok := final[m.Key]; ok {
				setIn(intermediate, m.Key, prev, i)
			}
			final[m.Key] = m.Value
			setIn(writerAll, m.Key, m.Value, i)
		}
	}
	for i, t := range txns {
		if t.Type != history.OK {
			continue
		}
		for _, m := range t.Mops {
			if m.F != "r" || m.Nil {
				continue
			}
			for _, e := range m.List {
				if w, ok := failed[m.Key][e]; ok {
					add(Anomaly{Type: "G1a", Txns: []int{i, w}, Text: fmt.Sprintf("%s read key %s = %s, holding %s, which the failed %s appended", txns[i].Name(), m.Key, showList(m.List), e, txns[w].Name())})
				}
			}
			if n := len(m.List); n > 0 {
				if w, ok := intermediate[m.Key][m.List[n-1]]; ok && w != i {
					add(Anomaly{Type: "G1b", Txns: []int{i, w}, Text: fmt.Sprintf("%s read key %s ending in %s, an intermediate append of %s (which appended to it again later)", txns[i].Name(), m.Key, m.List[n-1], txns[w].Name())})
				}
			}
		}
		if a, ok := appendInternal(txns, i); ok {
			add(a)
		}
		if a, ok := futureRead(txns, i); ok {
			add(a)
		}
	}
	// Dirty updates: along each key's version order, an aborted append
	// followed by a committed one.
	possible := make([]bool, len(txns))
	for i, t := range txns {
		possible[i] = t.Type != history.Fail
	}
	sorted, single := sortedValues(txns, nil)
	order := versionOrders(sorted, single)
	for _, k := range sortedKeys(order) {
		prevType, prevTxn := history.OK, -1
		var vs []string
		for _, v := range order[k] {
			w, ok := writerAll[k][v]
			if !ok {
				continue
			}
			t := txns[w].Type
			switch {
			case prevType == history.Fail && t == history.OK:
				vs = append(vs, v)
				add(Anomaly{Type: "dirty-update", Txns: []int{prevTxn, w}, Text: fmt.Sprintf("key %s: %s appended %s after the failed %s's appends took effect (versions %s)", k, txns[w].Name(), v, txns[prevTxn].Name(), strings.Join(vs, " "))})
				prevType, prevTxn, vs = t, w, []string{v}
			case t == history.Info:
				vs = append(vs, v)
			case t == history.Fail && prevType == history.Fail:
				vs = append(vs, v)
			default:
				prevType, prevTxn, vs = t, w, []string{v}
			}
		}
	}
	// Duplicates and incompatible orders, over transactions that may have
	// committed. One map serves every read (one per read was most of the
	// garbage of a large history).
	seen := map[string]int{}
	for i, t := range txns {
		if !possible[i] {
			continue
		}
		for _, m := range t.Mops {
			if m.F != "r" || m.Nil {
				continue
			}
			clear(seen)
			var dups []string
			for _, e := range m.List {
				seen[e]++
				if seen[e] == 2 {
					dups = append(dups, e)
				}
			}
			if len(dups) > 0 {
				add(Anomaly{Type: "duplicate-elements", Txns: []int{i}, Text: fmt.Sprintf("%s read key %s = %s: %s more than once", t.Name(), m.Key, showList(m.List), strings.Join(dups, ", "))})
			}
		}
	}
	sorted, single = sortedValues(txns, possible)
	for _, k := range sortedKeys(sorted) {
		vals := sorted[k]
		for j := 1; j < len(vals); j++ {
			if !isPrefix(vals[j-1], vals[j]) {
				add(Anomaly{Type: "incompatible-order", Text: fmt.Sprintf("key %s was read as %s and as %s: neither is a prefix of the other", k, showList(vals[j-1]), showList(vals[j]))})
				break
			}
		}
	}
	for _, a := range lostUpdates(txns, "append", func(m Mop) string {
		if m.Nil {
			return "nil"
		}
		return "[" + strings.Join(m.List, " ") + "]"
	}) {
		add(a)
	}
	order = versionOrders(sorted, single)
	return an, func(keep func(a, b int) bool) *graph { return appendGraph(txns, possible, order, keep) }
}

// showList prints a list read, its end when it is long.
func showList(l []string) string {
	if len(l) > 6 {
		return fmt.Sprintf("[(%d more) … %s]", len(l)-3, strings.Join(l[len(l)-3:], " "))
	}
	return "[" + strings.Join(l, " ") + "]"
}

func setIn(m map[string]map[string]int, k, v string, i int) {
	if m[k] == nil {
		m[k] = map[string]int{}
	}
	m[k][v] = i
}

// appendInternal is Elle's op-int-case: a read that does not follow from
// the transaction's own earlier reads and appends of the key.
func appendInternal(txns []Txn, i int) (Anomaly, bool) {
	// Only a key touched twice can be inconsistent with itself.
	if !touchesTwice(txns[i].Mops) {
		return Anomaly{}, false
	}
	type exp struct {
		known   bool // the whole list is known (after a read)
		list    []string
		present bool
	}
	state := map[string]*exp{}
	for _, m := range txns[i].Mops {
		s := state[m.Key]
		switch m.F {
		case "append":
			if s == nil {
				s = &exp{present: true}
				state[m.Key] = s
			}
			s.list = append(s.list, m.Value)
		case "r":
			if m.Nil {
				continue
			}
			if s != nil {
				bad := false
				if s.known {
					bad = !equal(s.list, m.List)
				} else {
					n := len(m.List) - len(s.list)
					bad = n < 0 || !equal(s.list, m.List[n:])
				}
				if bad {
					want := showList(s.list)
					if !s.known {
						want = "[… " + strings.Join(s.list, " ") + "]"
					}
					return Anomaly{Type: "internal", Txns: []int{i}, Text: fmt.Sprintf("%s read key %s = %s, but its own earlier reads and appends say %s", txns[i].Name(), m.Key, showList(m.List), want)}, true
				}
			}
			state[m.Key] = &exp{known: true, list: append([]string(nil), m.List...), present: true}
		}
	}
	return Anomaly{}, false
}

// futureRead: a transaction read an element it appends only later. Most
// transactions read and append different keys, so only the reads of a key
// the transaction also appends are kept.
func futureRead(txns []Txn, i int) (Anomaly, bool) {
	if !touchesTwice(txns[i].Mops) {
		return Anomaly{}, false
	}
	var reads map[string][][]string
	for _, m := range txns[i].Mops {
		switch m.F {
		case "append":
			for _, l := range reads[m.Key] {
				for _, e := range l {
					if e == m.Value {
						return Anomaly{Type: "future-read", Txns: []int{i}, Text: fmt.Sprintf("%s read %s in key %s before appending it", txns[i].Name(), m.Value, m.Key)}, true
					}
				}
			}
		case "r":
			if len(m.List) == 0 {
				continue
			}
			if reads == nil {
				reads = map[string][][]string{}
			}
			reads[m.Key] = append(reads[m.Key], m.List)
		}
	}
	return Anomaly{}, false
}

func hashList(l []string) uint64 {
	h := fnv.New64a()
	for _, e := range l {
		h.Write([]byte(e))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func touchesTwice(mops []Mop) bool {
	for i := range mops {
		for j := i + 1; j < len(mops); j++ {
			if mops[i].Key == mops[j].Key {
				return true
			}
		}
	}
	return false
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isPrefix(a, b []string) bool { return len(a) <= len(b) && equal(a, b[:len(a)]) }

// sortedValues is every distinct non-empty list read of each key (by the
// transactions in only, nil for all), shortest first; single holds the
// keys appended exactly once, with that element.
func sortedValues(txns []Txn, only []bool) (map[string][][]string, map[string]string) {
	seen := map[string]map[uint64][]int{}
	out := map[string][][]string{}
	appends := map[string]int{}
	single := map[string]string{}
	for i, t := range txns {
		if only != nil && !only[i] {
			continue
		}
		for _, m := range t.Mops {
			switch {
			case m.F == "append":
				appends[m.Key]++
				single[m.Key] = m.Value
			case m.F == "r" && len(m.List) > 0:
				// Distinct by a hash of the list, then by the lists.
				h := hashList(m.List)
				if seen[m.Key] == nil {
					seen[m.Key] = map[uint64][]int{}
				}
				dup := false
				for _, j := range seen[m.Key][h] {
					if equal(out[m.Key][j], m.List) {
						dup = true
						break
					}
				}
				if !dup {
					seen[m.Key][h] = append(seen[m.Key][h], len(out[m.Key]))
					out[m.Key] = append(out[m.Key], m.List)
				}
			}
		}
	}
	for k, n := range appends {
		if n != 1 {
			delete(single, k)
		}
	}
	for k, vs := range out {
		sort.SliceStable(vs, func(i, j int) bool { return len(vs[i]) < len(vs[j]) })
		out[k] = vs
	}
	return out, single
}

// versionOrders is each key's order of appends: its longest read (every
// other is a prefix unless the order is incompatible), or the one element
// of a key appended once and never read.
func versionOrders(sorted map[string][][]string, single map[string]string) map[string][]string {
	out := map[string][]string{}
	for k, vs := range sorted {
		seen := map[string]bool{}
		var order []string
		for _, e := range vs[len(vs)-1] {
			if !seen[e] {
				seen[e] = true
				order = append(order, e)
			}
		}
		out[k] = order
	}
	for k, v := range single {
		if _, ok := out[k]; !ok {
			out[k] = []string{v}
		}
	}
	return out
}

// appendGraph infers the dependencies of the transactions that may have
// committed: ww from each append to the one after it in the key's order,
// wr from an append to a read ending in it, rw from a read to the append
// that followed what it saw. An append never read follows the last element
// read.
func appendGraph(txns []Txn, possible []bool, order map[string][]string, keep func(a, b int) bool) *graph {
	g := newGraph(len(txns))
	g.keep = keep
	index := map[string]map[string]int{}
	for k, vs := range order {
		index[k] = make(map[string]int, len(vs))
		for i, v := range vs {
			index[k][v] = i
		}
	}
	writer := map[string]map[string]int{}
	readers := map[string]map[string][]int{}
	for i, t := range txns {
		if !possible[i] {
			continue
		}
		for _, m := range t.Mops {
			switch {
			case m.F == "append":
				setIn(writer, m.Key, m.Value, i)
			case m.F == "r" && !m.Nil:
				last := initState
				if n := len(m.List); n > 0 {
					last = m.List[n-1]
				}
				if readers[m.Key] == nil {
					readers[m.Key] = map[string][]int{}
				}
				readers[m.Key][last] = append(readers[m.Key][last], i)
			}
		}
	}
	prevOf := func(k, v string) string {
		vs := order[k]
		if i, ok := index[k][v]; ok {
			if i > 0 {
				return vs[i-1]
			}
			return initState
		}
		if len(vs) > 0 {
			return vs[len(vs)-1]
		}
		return initState
	}
	show := func(v string) string {
		if v == initState {
			return "(initial)"
		}
		return v
	}
	for i, t := range txns {
		if !possible[i] {
			continue
		}
		for _, m := range t.Mops {
			switch {
			case m.F == "append":
				prev := prevOf(m.Key, m.Value)
				if prev != initState {
					if w, ok := writer[m.Key][prev]; ok && w != i {
						g.link(w, i, WW, Why{Key: m.Key, Value: prev, Value2: m.Value})
					}
				}
				for _, r := range readers[m.Key][prev] {
					if r != i {
						g.link(r, i, RW, Why{Key: m.Key, Value: show(prev), Value2: m.Value})
					}
				}
			case m.F == "r" && !m.Nil && len(m.List) > 0:
				last := m.List[len(m.List)-1]
				if w, ok := writer[m.Key][last]; ok && w != i {
					g.link(w, i, WR, Why{Key: m.Key, Value: last})
				}
			}
		}
	}
	return g
}
