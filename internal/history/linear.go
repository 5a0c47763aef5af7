package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability models.
const (
	ModelRegister = "register"
	ModelKV       = "kv"
)

// Models lists the linearizability models.
var Models = []string{ModelRegister, ModelKV}

// regInput is one register operation: read, write v, or cas old to new.
type regInput struct {
	Op       string
	Value    string
	Old, New string
}

// regOutput is what a read returned; Unknown marks an operation of unknown
// outcome (info), which may or may not have taken effect.
type regOutput struct {
	Value   string
	Unknown bool
}

// registerModel is a single register holding a JSON value (by Key);
// describe names an operation (by its index in the history) on the
// counter-example page.
func registerModel(initial string, describe func(int) string) porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Init: func() []any { return []any{initial} },
		Step: func(state, input, output any) []any {
			s := state.(string)
			in := input.(regInput)
			out := output.(regOutput)
			switch in.Op {
			case "read":
				if out.Value == s {
					return []any{s}
				}
				return nil
			case "write":
				if out.Unknown {
					return []any{in.Value, s}
				}
				return []any{in.Value}
			case "cas":
				if out.Unknown {
					if s == in.Old {
						return []any{in.New, s}
					}
					return []any{s}
				}
				if s == in.Old {
					return []any{in.New}
				}
				return nil
			}
			return nil
		},
		DescribeOperation: func(input, output any) string {
			in := input.(regInput)
			out := output.(regOutput)
			q := ""
			if out.Unknown {
				q = " (unknown)"
			}
			switch in.Op {
			case "read":
				return "read → " + out.Value
			case "write":
				return "write " + in.Value + q
			case "cas":
				return fmt.Sprintf("cas %s→%s%s", in.Old, in.New, q)
			}
			return in.Op
		},
		DescribeState: func(state any) string { return state.(string) },
	}
	m := nd.ToModel()
	m.DescribeOperationMetadata = func(info any) string {
		if i, ok := info.(int); ok && describe != nil {
			return describe(i)
		}
		return fmt.Sprint(info)
	}
	return m
}

// LinearOptions configure CheckLinearizable.
type LinearOptions struct {
	Model string
	// Initial is the register's value before the history, as a JSON value
	// (null when empty).
	Initial string
	// Timeout bounds the search; past it the check is inconclusive.
	Timeout time.Duration
}

// CheckLinearizable checks the history against a register model (f read,
// write, cas with value [old, new]) or a key-value model (the same with the
// key first: [key, value], [key, old, new]), with Porcupine. Failed
// operations are left out (they did not happen); info writes and cas may or
// may not have happened; reads that did not complete ok say nothing. When
// the history is not linearizable, the result names the operation that
// cannot be placed and carries Porcupine's page of the partial
// linearizations.
func CheckLinearizable(h *History, opt LinearOptions) *Result {
	r := &Result{Outcome: Valid}
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	initial := "null"
	if opt.Initial != "" {
		initial = Key(json.RawMessage(opt.Initial))
	}
	end := 0.0
	for _, o := range h.Ops {
		end = max(end, o.End)
	}
	parts := map[string][]porcupine.Operation{}
	clients := map[string]int{}
	var skipped []string
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Type == Fail || (o.F == "read" && o.Type != OK) {
			continue
		}
		key, in, out, err := regOp(opt.Model, o)
		if err != "" {
			skipped = append(skipped, fmt.Sprintf("%s: %s", o.Ref(), err))
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
		parts[key] = append(parts[key], porcupine.Operation{ClientId: c, Input: in, Output: out, Call: nanos(o.Start), Return: nanos(ret), Metadata: i})
	}
	if len(skipped) > 0 {
		r.Outcome = Invalid
		r.Summary = append(r.Summary, fmt.Sprintf("%d operations are not %s operations:", len(skipped), opt.Model))
		for i, s := range skipped {
			if i == MaxListed {
				break
			}
			r.Summary = append(r.Summary, "  "+s)
		}
		return r
	}
	keys := make([]string, 0, len(parts))
	n := 0
	for k, p := range parts {
		keys = append(keys, k)
		n += len(p)
	}
	sort.Strings(keys)
	if n == 0 {
		r.Outcome = Inconclusive
		r.Summary = append(r.Summary, "no read, write or cas to check")
		return r
	}
	model := registerModel(initial, func(i int) string { o := &h.Ops[i]; return o.Ref() + " " + o.Type })
	deadline := time.Now().Add(opt.Timeout)
	for _, k := range keys {
		left := time.Until(deadline)
		if left <= 0 {
			r.Outcome = Inconclusive
			r.Summary = append(r.Summary, fmt.Sprintf("the search ran out of time (%s) before every key was checked", opt.Timeout))
			return r
		}
		res, info := porcupine.CheckOperationsVerbose(model, parts[k], left)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			r.Outcome = Inconclusive
			r.Summary = append(r.Summary, fmt.Sprintf("the search ran out of time (%s) on %s; the history may or may not be linearizable", opt.Timeout, keyName(opt.Model, k)))
			return r
		}
		r.Outcome = Invalid
		r.counterExample(h, opt.Model, k, parts[k], info)
		var buf bytes.Buffer
		if porcupine.Visualize(model, info, &buf) == nil {
			r.Page = buf.Bytes()
		}
		return r
	}
	r.Summary = append(r.Summary, fmt.Sprintf("linearizable: %d operations of %d processes on %d %s", n, len(clients), len(keys), plural(len(keys), "key", opt.Model)))
	return r
}

func plural(n int, what, model string) string {
	if model == ModelRegister {
		return "register"
	}
	if n == 1 {
		return what
	}
	return what + "s"
}

func keyName(model, k string) string {
	if model == ModelRegister {
		return "the register"
	}
	return "key " + k
}

// counterExample explains a history that is not linearizable: the longest
// order Porcupine found, and the operation that cannot follow it.
func (r *Result) counterExample(h *History, model, key string, ops []porcupine.Operation, info porcupine.LinearizationInfo) {
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
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
}

func nanos(t float64) int64 { return int64(t * 1e9) }

// regOp reads a register or key-value operation.
func regOp(model string, o *Op) (key string, in regInput, out regOutput, problem string) {
	in.Op = o.F
	args := []json.RawMessage{o.InvokeValue}
	res := o.Value
	if model == ModelKV {
		l, ok := List(o.InvokeValue)
		if !ok || len(l) == 0 {
			return "", in, out, "want a value [key, ...]"
		}
		key = Key(l[0])
		args = l[1:]
		if o.F == "read" {
			rl, ok := List(o.Value)
			if !ok || len(rl) != 2 {
				return "", in, out, "want an ok read's value [key, value]"
			}
			res = rl[1]
		}
	}
	switch o.F {
	case "read":
		out.Value = Key(res)
	case "write":
		if len(args) != 1 {
			return "", in, out, "want write's value: the value (kv: [key, value])"
		}
		in.Value = Key(args[0])
	case "cas":
		if model == ModelRegister {
			l, ok := List(o.InvokeValue)
			if !ok || len(l) != 2 {
				return "", in, out, "want cas's value [old, new]"
			}
			args = l
		}
		if len(args) != 2 {
			return "", in, out, "want cas's value [old, new] (kv: [key, old, new])"
		}
		in.Old, in.New = Key(args[0]), Key(args[1])
	default:
		return "", in, out, fmt.Sprintf("unknown f %q: want read, write or cas", o.F)
	}
	return key, in, out, ""
}
