package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability models.
const (
	ModelRegister = "register"
	ModelKV       = "kv"
	ModelMutex    = "mutex"
)

// Models lists the linearizability models.
var Models = []string{ModelRegister, ModelKV, ModelMutex}

// linInput is one operation of a model: read, write v, cas old to new,
// append v (kv), acquire or release (mutex), on Key (kv; "" otherwise).
type linInput struct {
	Op       string
	Key      string
	Value    string
	Old, New string
}

// linOutput is what a read returned; Unknown marks an operation of unknown
// outcome (info), which may or may not have taken effect.
type linOutput struct {
	Value   string
	Unknown bool
}

// Mutex states.
const (
	mutexFree = "free"
	mutexHeld = "held"
)

// linStep is the models' step: deterministic, as porcupine's own models are
// (its etcd and kv models), because a NondeterministicModel makes porcupine
// carry sets of states through its cache and was 7-10x slower on the etcd
// suite. An operation of unknown outcome is placed after the history's end
// (its return is past every other), so it can always take effect last,
// where nothing observes it: applying it whenever it can apply, and letting
// it pass unapplied when it cannot (a cas whose compare fails, an acquire
// of a held lock), decides exactly what the nondeterministic model did.
func linStep(state, input, output any) (bool, any) {
	s := state.(string)
	in := input.(linInput)
	out := output.(linOutput)
	switch in.Op {
	case "read":
		return out.Unknown || out.Value == s, s
	case "write":
		return true, in.Value
	case "append":
		if s == "null" {
			s = ""
		}
		return true, s + in.Value
	case "cas":
		if s == in.Old {
			return true, in.New
		}
		return out.Unknown, s
	case "acquire":
		if s == mutexFree {
			return true, mutexHeld
		}
		return out.Unknown, s
	case "release":
		if s == mutexHeld {
			return true, mutexFree
		}
		return out.Unknown, s
	}
	return false, s
}

// partitionByKey splits a history by key, in key order, so porcupine checks
// the keys independently and in parallel (a kv history is linearizable iff
// each key's is).
func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	m := map[string][]porcupine.Operation{}
	for _, o := range ops {
		k := o.Input.(linInput).Key
		m[k] = append(m[k], o)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// linModel is the porcupine model of a history check; describe names an
// operation (by its index in the history) on the counter-example page.
func linModel(model, initial string, describe func(int) string) porcupine.Model {
	m := porcupine.Model{
		Init: func() any { return initial },
		Step: linStep,
		DescribeOperation: func(input, output any) string {
			in := input.(linInput)
			out := output.(linOutput)
			q := ""
			if out.Unknown {
				q = " (unknown)"
			}
			k := ""
			if in.Key != "" || model == ModelKV {
				k = in.Key + ": "
			}
			switch in.Op {
			case "read":
				return k + "read → " + out.Value
			case "write", "append":
				return k + in.Op + " " + in.Value + q
			case "cas":
				return fmt.Sprintf("%scas %s→%s%s", k, in.Old, in.New, q)
			}
			return k + in.Op + q
		},
		DescribeState: func(state any) string { return state.(string) },
		DescribeOperationMetadata: func(info any) string {
			if i, ok := info.(int); ok && describe != nil {
				return describe(i)
			}
			return fmt.Sprint(info)
		},
	}
	if model == ModelKV {
		m.Partition = partitionByKey
		// Without a hash, porcupine's cache keeps every state of one set of
		// linearized operations in one bucket and compares them all: the
		// kv histories of 50 clients, whose appended values make many
		// states, ran out of a minute. A register's few states gain nothing.
		m.Hash = func(state any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(string)))
			return h.Sum64()
		}
	}
	return m
}

// LinearOptions configure CheckLinearizable.
type LinearOptions struct {
	Model string
	// Initial is the register's value before the history, as a JSON value
	// (null when empty). A mutex starts free.
	Initial string
	// Timeout bounds the search; past it the check is inconclusive.
	Timeout time.Duration
}

// CheckLinearizable checks the history with Porcupine against a register
// model (f read, write, cas with value [old, new]), a key-value model (the
// same with the key first: [key, value], [key, old, new], and append
// [key, suffix] which concatenates), or a mutex (f acquire, release).
// Failed operations are left out (they did not happen, as knossos reads
// them); info operations may or may not have happened; reads that did not
// complete ok say nothing. An operation the model does not know is the
// client's mistake, not the system's: it is left out and named in a
// warning. When the history is not linearizable, the result names the
// operation that cannot be placed and carries Porcupine's page of the
// partial linearizations.
func CheckLinearizable(h *History, opt LinearOptions) *Result {
	r := &Result{Outcome: Valid}
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	initial := "null"
	if opt.Initial != "" {
		initial = Key(json.RawMessage(opt.Initial))
	}
	if opt.Model == ModelMutex {
		initial = mutexFree
	}
	end := 0.0
	for _, o := range h.Ops {
		end = max(end, o.End)
	}
	var ops []porcupine.Operation
	keys := map[string]bool{}
	clients := map[string]int{}
	var skipped []string
	var skippedOps []*Op
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Type == Fail || (o.F == "read" && o.Type != OK) {
			continue
		}
		in, out, err := linOp(opt.Model, o)
		if err != "" {
			skipped = append(skipped, fmt.Sprintf("%s: %s", o.Ref(), err))
			skippedOps = append(skippedOps, o)
			continue
		}
		if o.Type != OK {
			out.Unknown = true
		}
		c, ok := clients[o.PID()]
		if !ok {
			c = len(clients)
			clients[o.PID()] = c
		}
		ret := o.End
		if o.Type != OK {
			ret = end + 1
		}
		keys[in.Key] = true
		ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Output: out, Call: nanos(o.Start), Return: nanos(ret), Metadata: i})
	}
	if len(skipped) > 0 {
		// The client wrote operations this model cannot read: its bug, said
		// as a warning, and the rest is checked (docs/checkers.md).
		w := fmt.Sprintf("%d operations are not %s operations and were left out of the check (a client problem): %s", len(skipped), opt.Model, Quote(skipped, 3))
		r.Warnings = append(r.Warnings, w)
		r.Summary = append(r.Summary, fmt.Sprintf("left out: %d operations the %s model does not know (see the warning)", len(skipped), opt.Model))
		r.add("not-"+opt.Model+"-operation", false, skipped, skippedOps)
	}
	if len(ops) == 0 {
		r.Outcome = Inconclusive
		r.Summary = append(r.Summary, "no "+strings.Join(modelOps(opt.Model), ", ")+" to check")
		return r
	}
	model := linModel(opt.Model, initial, func(i int) string { o := &h.Ops[i]; return o.Ref() + " " + o.Type })
	deadline := time.Now().Add(opt.Timeout)
	// The fast check first (it stops every key at the first that fails);
	// the verbose one, which keeps every partial order, only to explain a
	// failure.
	switch porcupine.CheckOperationsTimeout(model, ops, opt.Timeout) {
	case porcupine.Ok:
		r.Summary = append(r.Summary, fmt.Sprintf("linearizable: %d operations of %d processes on %d %s", len(ops), len(clients), len(keys), plural(len(keys), "key", opt.Model)))
		return r
	case porcupine.Unknown:
		r.Outcome = Inconclusive
		r.Summary = append(r.Summary, fmt.Sprintf("the search ran out of time (%s); the history may or may not be linearizable", opt.Timeout))
		return r
	}
	r.Outcome = Invalid
	r.explain(h, opt.Model, model, ops, deadline)
	return r
}

// explain finds a key that is not linearizable and asks porcupine for its
// partial linearizations, which the fast check does not keep. The verbose
// search of every key at once does not stop at the first key that fails
// (it ran past a minute on porcupine's kv histories of 50 clients, where
// some keys are slow to accept), so the keys race with the fast check and
// the first to fail stops the others; then only that key is searched
// verbosely. Past the deadline (at least a second is given) the check still
// fails, without a counter-example.
func (r *Result) explain(h *History, name string, model porcupine.Model, ops []porcupine.Operation, deadline time.Time) {
	parts := [][]porcupine.Operation{ops}
	if model.Partition != nil {
		parts = model.Partition(ops)
	}
	single := model
	single.Partition = nil
	bad := 0
	if len(parts) > 1 {
		// Once a key has failed, every step of the others is refused, so
		// their searches end at once; their results are ignored.
		var stop atomic.Bool
		racing := single
		racing.Step = func(state, input, output any) (bool, any) {
			if stop.Load() {
				return false, state
			}
			return single.Step(state, input, output)
		}
		first := make(chan int, len(parts))
		var wg sync.WaitGroup
		left := max(time.Until(deadline), time.Second)
		for i, p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if porcupine.CheckOperationsTimeout(racing, p, left) == porcupine.Illegal && stop.CompareAndSwap(false, true) {
					first <- i
				}
			}()
		}
		wg.Wait()
		close(first)
		bad = -1
		if i, ok := <-first; ok {
			bad = i
		}
	}
	if bad >= 0 {
		p := parts[bad]
		res, info := porcupine.CheckOperationsVerbose(single, p, max(time.Until(deadline), time.Second))
		lins := info.PartialLinearizationsOperations()
		if res == porcupine.Illegal && len(lins) == 1 && r.counterExample(h, name, p, lins[0]) {
			var buf bytes.Buffer
			if porcupine.Visualize(single, info, &buf) == nil {
				r.Page = buf.Bytes()
			}
			return
		}
	}
	r.Summary = append(r.Summary, "not linearizable (the search for a counter-example ran out of time)")
	r.add("not-linearizable", true, nil, nil)
}

func modelOps(model string) []string {
	if model == ModelMutex {
		return []string{"acquire", "release"}
	}
	if model == ModelKV {
		return []string{"read", "write", "cas", "append"}
	}
	return []string{"read", "write", "cas"}
}

func plural(n int, what, model string) string {
	if model != ModelKV {
		return model
	}
	if n == 1 {
		return what
	}
	return what + "s"
}

func keyName(model, k string) string {
	if model != ModelKV {
		return "the " + model
	}
	return "key " + k
}

// counterExample explains a key that is not linearizable: the longest
// order Porcupine found, and the operation that cannot follow it. It
// returns false when every operation of the key could be placed.
func (r *Result) counterExample(h *History, model string, ops []porcupine.Operation, lins [][]porcupine.Operation) bool {
	var longest []porcupine.Operation
	for _, lin := range lins {
		if len(lin) > len(longest) {
			longest = lin
		}
	}
	if len(longest) == len(ops) || len(ops) == 0 {
		return false
	}
	key := ops[0].Input.(linInput).Key
	in := map[int]bool{}
	for _, o := range longest {
		in[o.Metadata.(int)] = true
	}
	// The operation that cannot be placed: the earliest one left out.
	var stuck []*Op
	for _, o := range ops {
		if i := o.Metadata.(int); !in[i] {
			stuck = append(stuck, &h.Ops[i])
		}
	}
	sort.Slice(stuck, func(i, j int) bool { return stuck[i].End < stuck[j].End })
	r.Summary = append(r.Summary, fmt.Sprintf("not linearizable on %s: %d operations, at most %d of them can be put in one order", keyName(model, key), len(ops), len(longest)))
	var lastOps []*Op
	if len(longest) > 0 {
		r.Summary = append(r.Summary, "the longest order found ends with:")
		from := max(0, len(longest)-5)
		for _, o := range longest[from:] {
			op := &h.Ops[o.Metadata.(int)]
			lastOps = append(lastOps, op)
			r.Summary = append(r.Summary, fmt.Sprintf("  %s %s → %s", op.Ref(), op.Type, clip(string(op.Value), 40)))
		}
	}
	if len(stuck) > 0 {
		o := stuck[0]
		r.Summary = append(r.Summary, fmt.Sprintf("and cannot go on with: %s %s → %s [t=%.3f..%.3f]", o.Ref(), o.Type, clip(string(o.Value), 40), o.Start, o.End))
	}
	var vals []string
	for _, o := range stuck {
		vals = append(vals, o.Ref())
	}
	r.add("not-linearizable", true, vals, stuck)
	r.add("longest-order-tail", false, nil, lastOps)
	return true
}

func nanos(t float64) int64 { return int64(t * 1e9) }

// linOp reads an operation of the model; problem says why it is not one.
func linOp(model string, o *Op) (in linInput, out linOutput, problem string) {
	in.Op = o.F
	if model == ModelMutex {
		switch o.F {
		case "acquire", "release":
			return in, out, ""
		}
		return in, out, fmt.Sprintf("unknown f %q: want acquire or release", o.F)
	}
	args := []json.RawMessage{o.InvokeValue}
	res := o.Value
	if model == ModelKV {
		l, ok := List(o.InvokeValue)
		if !ok || len(l) == 0 {
			return in, out, "want a value [key, ...]"
		}
		in.Key = Key(l[0])
		args = l[1:]
		if o.F == "read" {
			rl, ok := List(o.Value)
			if !ok || len(rl) != 2 {
				return in, out, "want an ok read's value [key, value]"
			}
			res = rl[1]
		}
	}
	switch o.F {
	case "read":
		out.Value = Key(res)
	case "write":
		if len(args) != 1 {
			return in, out, "want write's value: the value (kv: [key, value])"
		}
		in.Value = Key(args[0])
	case "append":
		if model != ModelKV || len(args) != 1 {
			return in, out, "append is a kv operation: want [key, suffix]"
		}
		in.Value = Key(args[0])
	case "cas":
		if model == ModelRegister {
			l, ok := List(o.InvokeValue)
			if !ok || len(l) != 2 {
				return in, out, "want cas's value [old, new]"
			}
			args = l
		}
		if len(args) != 2 {
			return in, out, "want cas's value [old, new] (kv: [key, old, new])"
		}
		in.Old, in.New = Key(args[0]), Key(args[1])
	default:
		return in, out, fmt.Sprintf("unknown f %q: want %s", o.F, strings.Join(modelOps(model), ", "))
	}
	return in, out, ""
}
