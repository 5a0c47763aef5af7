package experiment

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Target is what an operation acts on: a named adapter target (gateway), a
// workload's instances ({workload: counter}) or a role inside each instance
// ({workload: counter, role: supervisor}).
type Target struct {
	Pos      manifest.Pos `yaml:"-" json:"-"`
	Name     string       `yaml:"-" json:"name,omitempty"`
	Workload string       `yaml:"workload" json:"workload,omitempty"`
	Role     string       `yaml:"role" json:"role,omitempty"`
}

// String renders the target as the seeds write it.
func (t *Target) String() string {
	switch {
	case t == nil:
		return ""
	case t.Name != "":
		return t.Name
	case t.Role != "":
		return fmt.Sprintf("{workload: %s, role: %s}", t.Workload, t.Role)
	default:
		return fmt.Sprintf("{workload: %s}", t.Workload)
	}
}

// Ref is the target as the timeline records it (operation.started's
// target, run directory format 2): an object, {"name": "gateway"},
// {"workload": "counter"} or {"workload": "counter", "role": "sidecar"};
// nil without a target.
func (t *Target) Ref() any {
	if t == nil {
		return nil
	}
	return Target{Name: t.Name, Workload: t.Workload, Role: t.Role}
}

// UnmarshalNode implements manifest.Unmarshaler.
func (t *Target) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	t.Pos = manifest.PosOf(n)
	if n.Kind == yaml.ScalarNode {
		t.Name = n.Value
		if t.Name == "" {
			d.Errorf(n, path, "expected a target name or {workload: NAME}, got an empty string")
		}
		return
	}
	type plain Target
	var p plain
	d.Decode(n, path, reflect.ValueOf(&p).Elem())
	*t = Target(p)
	t.Pos = manifest.PosOf(n)
	if n.Kind == yaml.MappingNode && t.Workload == "" {
		d.Errorf(n, path, "a target mapping needs workload (and optionally role)")
	}
}

// Select kinds.
const (
	SelectOne       = "one"
	SelectAll       = "all"
	SelectCount     = "count"
	SelectPercent   = "percent"
	SelectInstances = "instances"
)

// Select says which of a target's candidates an operation hits: one, all,
// {count: N}, {percent: P} or {instances: [counter-0, counter-2]}. Random
// choices come from the run's seed.
type Select struct {
	Pos       manifest.Pos `yaml:"-" json:"-"`
	Kind      string       `yaml:"-" json:"kind"`
	Count     int          `yaml:"count" json:"count,omitempty"`
	Percent   float64      `yaml:"percent" json:"percent,omitempty"`
	Instances []string     `yaml:"instances" json:"instances,omitempty"`
}

// String renders the selection in words.
func (s *Select) String() string {
	if s == nil {
		return "all"
	}
	switch s.Kind {
	case SelectCount:
		return fmt.Sprintf("%d", s.Count)
	case SelectPercent:
		return strconv.FormatFloat(s.Percent, 'f', -1, 64) + "%"
	case SelectInstances:
		return strings.Join(s.Instances, ", ")
	}
	return s.Kind
}

// KindOrDefault returns the selection kind; an absent select means all.
func (s *Select) KindOrDefault() string {
	if s == nil || s.Kind == "" {
		return SelectAll
	}
	return s.Kind
}

// UnmarshalNode implements manifest.Unmarshaler.
func (s *Select) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	s.Pos = manifest.PosOf(n)
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case SelectOne, SelectAll:
			s.Kind = n.Value
		default:
			d.Errorf(n, path, "expected one, all, {count: N}, {percent: P} or {instances: [...]}, got %q", n.Value)
		}
		return
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		d.Errorf(n, path, "expected one, all, {count: N}, {percent: P} or {instances: [...]}, got %s", manifest.Describe(n))
		return
	}
	type plain Select
	var p plain
	d.Decode(n, path, reflect.ValueOf(&p).Elem())
	*s = Select(p)
	s.Pos = manifest.PosOf(n)
	s.Kind = n.Content[0].Value
	switch s.Kind {
	case SelectCount:
		if s.Count < 1 {
			d.Errorf(n.Content[1], path+".count", "count must be at least 1")
		}
	case SelectPercent:
		if s.Percent <= 0 || s.Percent > 100 {
			d.Errorf(n.Content[1], path+".percent", "percent must be above 0 and at most 100")
		}
	case SelectInstances:
		if len(s.Instances) == 0 {
			d.Errorf(n.Content[1], path+".instances", "name at least one instance")
		}
	}
}

// Flow node kinds.
const (
	FlowRef      = "ref"
	FlowSerial   = "serial"
	FlowParallel = "parallel"
	FlowWait     = "wait"
	FlowDelay    = "delay"
	FlowRepeat   = "repeat"
	// FlowStop asks a workload's running instances to stop: the harness
	// creates $CHAOS_STOP_FILE in each, and the script ends when it sees it.
	FlowStop = "stop"
)

// FlowNode is one node of the flow tree: a bare name of a workload or an
// operation, serial, parallel, wait, delay or repeat.
type FlowNode struct {
	Pos manifest.Pos `json:"-"`
	// Path is the node's field path in the file, e.g. flow.serial[0].
	Path     string      `json:"-"`
	Kind     string      `json:"kind"`
	Ref      string      `json:"ref,omitempty"`
	Children []*FlowNode `json:"children,omitempty"`
	Wait     *Wait       `json:"wait,omitempty"`
	Delay    Duration    `json:"delay,omitempty"`
	Repeat   *Repeat     `json:"repeat,omitempty"`
	// Stop is the workload a stop node asks to stop.
	Stop string `json:"stop,omitempty"`
	// Generate is a generate node's declaration (generate.go).
	Generate *Generate `json:"generate,omitempty"`
}

// Wait ends on a workload condition or on a signal.
type Wait struct {
	Pos       manifest.Pos `yaml:"-" json:"-"`
	Workload  string       `yaml:"workload" json:"workload,omitempty"`
	Condition string       `yaml:"condition" json:"condition,omitempty" jsonschema:"enum=created,enum=started,enum=running,enum=finished,enum=succeeded,enum=ready"`
	Signal    string       `yaml:"signal" json:"signal,omitempty"`
	// Since says which lines count (readiness.go): now, start, or an
	// operation's name.
	Since   string   `yaml:"since" json:"since,omitempty"`
	Delay   Duration `yaml:"delay" json:"delay,omitempty"`
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// Workload wait conditions.
const (
	CondCreated   = "created"
	CondStarted   = "started"
	CondRunning   = "running"
	CondFinished  = "finished"
	CondSucceeded = "succeeded"
	// CondReady waits for each instance's own readiness (Workload.Ready)
	// since its latest start.
	CondReady = "ready"
)

// Conditions lists the workload wait conditions.
var Conditions = []string{CondCreated, CondStarted, CondRunning, CondFinished, CondSucceeded, CondReady}

// Repeat runs its body again and again: for a duration (no new round starts
// after it), a number of times, or both (whichever ends first).
type Repeat struct {
	For   Duration  `json:"for,omitempty"`
	Times int       `json:"times,omitempty"`
	Body  *FlowNode `json:"body"`
}

// flowKeys are the keys error messages list; stop and generate are accepted too (and
// suggested), but left out of those lists so their wording stays stable.
var flowKeys = []string{FlowSerial, FlowParallel, FlowWait, FlowDelay, FlowRepeat}

// UnmarshalNode implements manifest.Unmarshaler.
func (f *FlowNode) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	f.Pos = manifest.PosOf(n)
	f.Path = path
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Value == "" {
			d.Errorf(n, path, "expected a flow node, got nothing")
			return
		}
		f.Kind = FlowRef
		f.Ref = n.Value
	case yaml.SequenceNode:
		// A bare list reads as serial.
		f.Kind = FlowSerial
		f.Children = decodeChildren(d, n, path)
	case yaml.MappingNode:
		if len(n.Content) != 2 {
			if len(n.Content) == 0 {
				d.Errorf(n, path, "expected one of %s, got an empty mapping", strings.Join(flowKeys, ", "))
				return
			}
			var keys []string
			for i := 0; i < len(n.Content); i += 2 {
				keys = append(keys, n.Content[i].Value)
			}
			d.Errorf(n, path, "a flow node has exactly one key (one of %s), got %s; put several steps in serial: [...]", strings.Join(flowKeys, ", "), strings.Join(keys, ", "))
			return
		}
		k, v := n.Content[0], n.Content[1]
		child := manifest.Join(path, k.Value)
		switch k.Value {
		case FlowSerial, FlowParallel:
			f.Kind = k.Value
			if v.Kind != yaml.SequenceNode {
				d.Errorf(v, child, "expected a list of flow nodes, got %s", manifest.Describe(v))
				return
			}
			f.Children = decodeChildren(d, v, child)
		case FlowWait:
			f.Kind = FlowWait
			f.Wait = &Wait{}
			d.Decode(v, child, reflect.ValueOf(f.Wait).Elem())
			f.Wait.Pos = manifest.PosOf(v)
		case FlowDelay:
			f.Kind = FlowDelay
			d.Decode(v, child, reflect.ValueOf(&f.Delay).Elem())
		case FlowRepeat:
			f.Kind = FlowRepeat
			f.Repeat = decodeRepeat(d, v, child)
		case FlowGenerate:
			f.Kind = FlowGenerate
			f.Generate = decodeGenerate(d, v, child)
		case FlowStop:
			f.Kind = FlowStop
			if v.Kind != yaml.ScalarNode || v.Value == "" || v.Tag == "!!null" {
				d.Errorf(v, child, "expected a workload name, got %s", manifest.Describe(v))
				return
			}
			f.Stop = v.Value
		default:
			msg := fmt.Sprintf("unknown flow node %q: expected one of %s, or a bare workload or operation name", k.Value, strings.Join(flowKeys, ", "))
			if s := manifest.Suggest(k.Value, append(flowKeys[:len(flowKeys):len(flowKeys)], FlowStop, FlowGenerate)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.Errorf(k, child, "%s", msg)
		}
	default:
		d.Errorf(n, path, "expected a flow node, got %s", manifest.Describe(n))
	}
}

func decodeChildren(d *manifest.Decoder, n *yaml.Node, path string) []*FlowNode {
	out := make([]*FlowNode, 0, len(n.Content))
	for i, c := range n.Content {
		child := &FlowNode{}
		d.Decode(c, fmt.Sprintf("%s[%d]", path, i), reflect.ValueOf(child).Elem())
		out = append(out, child)
	}
	return out
}

func decodeRepeat(d *manifest.Decoder, n *yaml.Node, path string) *Repeat {
	r := &Repeat{}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "expected a mapping with for or times and a body (serial, parallel or do), got %s", manifest.Describe(n))
		return r
	}
	keys := []string{"for", "times", FlowSerial, FlowParallel, "do"}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		child := manifest.Join(path, k.Value)
		switch k.Value {
		case "for":
			d.Decode(v, child, reflect.ValueOf(&r.For).Elem())
		case "times":
			d.Decode(v, child, reflect.ValueOf(&r.Times).Elem())
			if r.Times < 0 {
				d.Errorf(v, child, "times must not be negative")
			}
		case FlowSerial, FlowParallel, "do":
			if r.Body != nil {
				d.Errorf(k, child, "repeat has more than one body; use one of serial, parallel or do")
				continue
			}
			body := &FlowNode{}
			if k.Value == "do" {
				d.Decode(v, child, reflect.ValueOf(body).Elem())
			} else {
				body.Kind = k.Value
				body.Pos = manifest.PosOf(k)
				body.Path = child
				if v.Kind != yaml.SequenceNode {
					d.Errorf(v, child, "expected a list of flow nodes, got %s", manifest.Describe(v))
				} else {
					body.Children = decodeChildren(d, v, child)
				}
			}
			r.Body = body
		default:
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s := manifest.Suggest(k.Value, keys); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.Errorf(k, child, "%s", msg)
		}
	}
	if r.Body == nil {
		d.Errorf(n, path, "repeat needs a body: serial: [...], parallel: [...] or do: NODE")
	}
	if r.For == 0 && r.Times == 0 {
		d.Errorf(n, path, "repeat needs for: DURATION, times: N, or both")
	}
	return r
}

// Walk calls fn for f and every node below it, depth first.
func (f *FlowNode) Walk(fn func(*FlowNode)) {
	if f == nil {
		return
	}
	fn(f)
	for _, c := range f.Children {
		c.Walk(fn)
	}
	if f.Repeat != nil {
		f.Repeat.Body.Walk(fn)
	}
}

// Label is a short human name for a node, used in events and charts.
func (f *FlowNode) Label() string {
	switch f.Kind {
	case FlowRef:
		return f.Ref
	case FlowWait:
		w := f.Wait
		if w.Signal != "" {
			s := "wait " + w.Signal
			if w.Delay > 0 {
				s += " +" + w.Delay.String()
			}
			return s
		}
		return fmt.Sprintf("wait %s %s", w.Workload, w.Condition)
	case FlowDelay:
		return "delay " + f.Delay.String()
	case FlowStop:
		return "stop " + f.Stop
	case FlowGenerate:
		return generateLabel(f.Generate)
	case FlowRepeat:
		var parts []string
		if f.Repeat.For > 0 {
			parts = append(parts, "for "+f.Repeat.For.String())
		}
		if f.Repeat.Times > 0 {
			parts = append(parts, fmt.Sprintf("%d times", f.Repeat.Times))
		}
		return "repeat " + strings.Join(parts, ", ")
	}
	return f.Kind
}
