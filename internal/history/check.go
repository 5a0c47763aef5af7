package history

import (
	"fmt"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Outcomes of a checker.
const (
	Valid        = "ok"
	Invalid      = "fail"
	Inconclusive = "inconclusive"
)

// Result is what a checker decided.
type Result struct {
	// Outcome is Valid, Invalid or Inconclusive.
	Outcome string
	// Summary is one line per finding, for the console and verdict.json.
	Summary  []string
	Findings []rundir.Finding
	// Page, when set, is an HTML counter-example to save next to the verdict.
	Page []byte
	// Warnings are problems of the client, not of the system under test
	// (operations a model does not know): they become verdict warnings and
	// never decide the outcome.
	Warnings []string
}

// MaxListed is how many values a finding lists, and how many operations
// the console and a check's detail name.
const MaxListed = 8

// Detail renders the result as a check's detail text.
func (r *Result) Detail() string { return strings.Join(r.Summary, "\n") }

func (r *Result) add(kind string, bad bool, values []string, ops []*Op) {
	f := rundir.Finding{Kind: kind, Count: len(values), Bad: bad}
	if len(values) == 0 && len(ops) > 0 {
		f.Count = len(ops)
	}
	for i, v := range values {
		if i == MaxListed {
			break
		}
		f.Values = append(f.Values, v)
	}
	// Every operation, up to a bound: the report lists them all (a run
	// that lost 1,830 writes shows the 1,830).
	for i, o := range ops {
		if i == limits.MaxFindingOps {
			break
		}
		f.Ops = append(f.Ops, RefOf(o))
	}
	r.Findings = append(r.Findings, f)
}

// finding is one kind of anomaly a checker found: a bad one makes the
// history invalid, the others are only told.
type finding struct {
	kind   string
	bad    bool
	says   string // the summary's words, given the count
	values []string
	ops    []*Op
}

// report adds, in order, each finding that has values, with a summary line
// that lists them, so every checker words and records its findings alike.
func (r *Result) report(findings ...finding) {
	for _, f := range findings {
		if len(f.values) == 0 {
			continue
		}
		sortKeys(f.values)
		if f.bad {
			r.Outcome = Invalid
		}
		r.Summary = append(r.Summary, fmt.Sprintf(f.says, len(f.values))+": "+Quote(f.values, MaxListed))
		r.add(f.kind, f.bad, f.values, f.ops)
	}
}

// RefOf names o in verdict.json.
func RefOf(o *Op) rundir.OpRef {
	v := string(o.InvokeValue)
	if o.Type == OK && string(o.Value) != string(o.InvokeValue) {
		v = string(o.Value)
	}
	return rundir.OpRef{Instance: o.Instance, Process: o.Process, F: o.F, Type: o.Type, Value: clip(v, 200), Line: o.Line, Start: round3(o.Start), End: round3(o.End)}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// sortKeys orders element keys numerically when they are numbers.
func sortKeys(keys []string) {
	sort.Slice(keys, func(i, j int) bool {
		a, aok := Number([]byte(keys[i]))
		b, bok := Number([]byte(keys[j]))
		if aok && bok {
			return a < b
		}
		if aok != bok {
			return aok
		}
		return keys[i] < keys[j]
	})
}

// CheckSet is Jepsen's set checker: adds (f add, value the element) and
// reads (f read, ok value the list of elements). The final read is the last
// ok read. Every element acknowledged by an ok add must be in it (else
// lost); every element in it must have been attempted and not failed (else
// unexpected); info adds present are recovered, info adds absent are
// unknown. Without an ok read the check is inconclusive.
func CheckSet(h *History) *Result {
	r := &Result{Outcome: Valid}
	var final *Op
	adds := map[string][]*Op{}
	for i := range h.Ops {
		o := &h.Ops[i]
		switch o.F {
		case "add":
			k := Key(o.InvokeValue)
			adds[k] = append(adds[k], o)
		case "read":
			if o.Type == OK && (final == nil || o.End >= final.End) {
				final = o
			}
		}
	}
	if final == nil {
		r.Outcome = Inconclusive
		r.Summary = append(r.Summary, fmt.Sprintf("no ok read: nothing to compare %d adds with", countF(h, "add")))
		return r
	}
	list, ok := List(final.Value)
	if !ok {
		r.Outcome = Invalid
		r.Summary = append(r.Summary, fmt.Sprintf("the final read's value is not a list: %s", final.Ref()))
		r.add("bad-read", true, nil, []*Op{final})
		return r
	}
	present := map[string]bool{}
	for _, v := range list {
		present[Key(v)] = true
	}
	var lost, unexpected, recovered, unknown, failedPresent []string
	var lostOps, failedOps []*Op
	var okCount, attempted int
	for k, ops := range adds {
		attempted++
		var okOp, failOp *Op
		for _, o := range ops {
			switch o.Type {
			case OK:
				okOp = o
			case Fail:
				failOp = o
			}
		}
		switch {
		case okOp != nil:
			okCount++
			if !present[k] {
				lost = append(lost, k)
				lostOps = append(lostOps, okOp)
			}
		case failOp != nil && len(ops) == 1:
			if present[k] {
				failedPresent = append(failedPresent, k)
				failedOps = append(failedOps, failOp)
			}
		default:
			if present[k] {
				recovered = append(recovered, k)
			} else {
				unknown = append(unknown, k)
			}
		}
	}
	for k := range present {
		if _, ok := adds[k]; !ok {
			unexpected = append(unexpected, k)
		}
	}
	sort.Slice(lostOps, func(i, j int) bool { return lostOps[i].Start < lostOps[j].Start })
	sort.Slice(failedOps, func(i, j int) bool { return failedOps[i].Start < failedOps[j].Start })
	r.Summary = append(r.Summary, fmt.Sprintf("%d adds attempted, %d acknowledged; the final read (%s) holds %d", attempted, okCount, final.Ref(), len(present)))
	r.report(
		finding{"lost", true, "lost: %d acknowledged adds missing", lost, lostOps},
		finding{"unexpected", true, "unexpected: %d values never added", unexpected, nil},
		finding{"failed-present", true, "failed but present: %d adds that failed are in the read", failedPresent, failedOps},
		finding{"recovered", false, "recovered: %d adds of unknown outcome are present", recovered, nil},
		finding{"unknown", false, "unknown: %d adds of unknown outcome are absent (allowed)", unknown, nil},
	)
	return r
}

func countF(h *History, f string) int {
	n := 0
	for _, o := range h.Ops {
		if o.F == f {
			n++
		}
	}
	return n
}

// CheckCounter is Jepsen's counter checker: adds (f add, value the delta,
// default 1) and reads (f read, ok value the counter). Each ok read must lie
// between the sum of the adds certainly applied before the read began and
// the sum of those that may have been applied by the time it ended. Without
// an ok read the check is inconclusive.
func CheckCounter(h *History) *Result {
	r := &Result{Outcome: Valid}
	type add struct {
		d          float64
		start, end float64
		ok         bool
	}
	var adds []add
	var reads []*Op
	var bad []string
	var badOps []*Op
	for i := range h.Ops {
		o := &h.Ops[i]
		switch o.F {
		case "add":
			if o.Type == Fail {
				continue
			}
			d := 1.0
			if len(o.InvokeValue) > 0 && string(o.InvokeValue) != "null" {
				v, ok := Number(o.InvokeValue)
				if !ok {
					bad = append(bad, fmt.Sprintf("add value %s is not a number (line %d of %s)", clip(string(o.InvokeValue), 30), o.Line, o.Instance))
					continue
				}
				d = v
			}
			adds = append(adds, add{d, o.Start, o.End, o.Type == OK})
		case "read":
			if o.Type == OK {
				reads = append(reads, o)
			}
		}
	}
	if len(reads) == 0 {
		r.Outcome = Inconclusive
		r.Summary = append(r.Summary, fmt.Sprintf("no ok read: nothing to compare %d adds with", len(adds)))
		return r
	}
	var last *Op
	var lastLo, lastHi float64
	for _, rd := range reads {
		v, ok := Number(rd.Value)
		if !ok {
			bad = append(bad, fmt.Sprintf("read value %s is not a number: %s", clip(string(rd.Value), 30), rd.Ref()))
			badOps = append(badOps, rd)
			continue
		}
		lo, hi := 0.0, 0.0
		for _, a := range adds {
			certain := a.ok && a.end < rd.Start
			possible := a.start <= rd.End
			if a.d >= 0 {
				if certain {
					lo += a.d
				}
				if possible {
					hi += a.d
				}
			} else {
				if possible {
					lo += a.d
				}
				if certain {
					hi += a.d
				}
			}
		}
		if v < lo || v > hi {
			bad = append(bad, fmt.Sprintf("read %s, want %s to %s: %s", num(v), num(lo), num(hi), rd.Ref()))
			badOps = append(badOps, rd)
		}
		if last == nil || rd.End >= last.End {
			last, lastLo, lastHi = rd, lo, hi
		}
	}
	r.Summary = append(r.Summary, fmt.Sprintf("%d adds (%d acknowledged), %d ok reads; the last read %s (allowed %s to %s)", len(adds), countOK(adds, func(a add) bool { return a.ok }), len(reads), clip(string(last.Value), 30), num(lastLo), num(lastHi)))
	if len(bad) > 0 {
		r.Outcome = Invalid
		r.Summary = append(r.Summary, fmt.Sprintf("%d reads out of bounds:", len(bad)))
		for i, b := range bad {
			if i == MaxListed {
				r.Summary = append(r.Summary, fmt.Sprintf("  (%d more)", len(bad)-MaxListed))
				break
			}
			r.Summary = append(r.Summary, "  "+b)
		}
		r.add("out-of-bounds", true, bad, badOps)
	}
	return r
}

func countOK[T any](l []T, fn func(T) bool) int {
	n := 0
	for _, x := range l {
		if fn(x) {
			n++
		}
	}
	return n
}

func num(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.6f", f), "0"), ".")
}

// CheckQueue checks a queue: enqueues (f enqueue, value the element),
// dequeues (f dequeue, ok value the element, null when the queue was empty)
// and drains (f drain, ok value the list of every element left). Nothing
// acknowledged may be lost (judged only when the history has an ok drain),
// nothing may come out that was never enqueued, and, unless duplicates are
// allowed, nothing may come out twice.
func CheckQueue(h *History, allowDuplicates bool) *Result {
	r := &Result{Outcome: Valid}
	enq := map[string][]*Op{}
	delivered := map[string]int{}
	deliveredBy := map[string]*Op{}
	drained := false
	nOut := 0
	for i := range h.Ops {
		o := &h.Ops[i]
		switch o.F {
		case "enqueue":
			k := Key(o.InvokeValue)
			enq[k] = append(enq[k], o)
		case "dequeue":
			if o.Type == OK && len(o.Value) > 0 && string(o.Value) != "null" {
				k := Key(o.Value)
				delivered[k]++
				deliveredBy[k] = o
				nOut++
			}
		case "drain":
			if o.Type != OK {
				continue
			}
			l, ok := List(o.Value)
			if !ok {
				r.Outcome = Invalid
				r.Summary = append(r.Summary, "a drain's value is not a list: "+o.Ref())
				continue
			}
			drained = true
			for _, v := range l {
				k := Key(v)
				delivered[k]++
				deliveredBy[k] = o
				nOut++
			}
		}
	}
	var lost, unexpected, dup, recovered []string
	var lostOps, unexpOps, dupOps []*Op
	okEnq := 0
	for k, ops := range enq {
		okAny, failOnly := false, true
		for _, o := range ops {
			if o.Type == OK {
				okAny = true
			}
			if o.Type != Fail {
				failOnly = false
			}
		}
		if okAny {
			okEnq++
		}
		switch {
		case delivered[k] == 0 && okAny && drained:
			lost = append(lost, k)
			lostOps = append(lostOps, ops[0])
		case delivered[k] > 0 && failOnly:
			unexpected = append(unexpected, k)
			unexpOps = append(unexpOps, deliveredBy[k])
		case delivered[k] > 0 && !okAny:
			recovered = append(recovered, k)
		}
		if delivered[k] > len(ops) && !allowDuplicates {
			dup = append(dup, k)
			dupOps = append(dupOps, deliveredBy[k])
		}
	}
	for k := range delivered {
		if _, ok := enq[k]; !ok {
			unexpected = append(unexpected, k)
			unexpOps = append(unexpOps, deliveredBy[k])
		}
	}
	r.Summary = append(r.Summary, fmt.Sprintf("%d values enqueued (%d acknowledged), %d delivered", len(enq), okEnq, nOut))
	r.report(
		finding{"lost", true, "lost: %d acknowledged enqueues never delivered", lost, lostOps},
		finding{"unexpected", true, "unexpected: %d values delivered that were never (successfully) enqueued", unexpected, unexpOps},
		finding{"duplicated", true, "duplicated: %d values delivered more often than enqueued", dup, dupOps},
		finding{"recovered", false, "recovered: %d enqueues of unknown outcome were delivered", recovered, nil},
	)
	if !drained && r.Outcome == Valid {
		r.Outcome = Inconclusive
		r.Summary = append(r.Summary, "no ok drain: whether acknowledged enqueues were lost cannot be told")
	}
	return r
}
