package experiment

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// FlowGenerate draws a schedule of operations from the run's seed, as
// Jepsen's nemesis generators do: which operation (by weight, each at most
// its max), and the gap before each (from a range), for a duration or a
// number of operations.
const FlowGenerate = "generate"

// Generate is a generate node's declaration.
type Generate struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// For ends the schedule once the gaps drawn add up to it; Times after
	// that many operations. Either or both (whichever ends first).
	For   Duration `yaml:"for" json:"for,omitempty"`
	Times int      `yaml:"times" json:"times,omitempty"`
	// Gap is the wait before each operation: after the previous step, or,
	// with After, after the signal's next line.
	Gap        Gap          `yaml:"gap" json:"gap"`
	Operations []GenerateOp `yaml:"operations" json:"operations"`
	// After aims each step at a signal: the step waits for the signal's
	// next line, then its gap, as a wait on the signal with that delay
	// would. What a hunt varies is then the delay after what the system
	// reports, not the time since the flow began.
	After *GenerateAfter `yaml:"after" json:"after,omitempty"`
}

// GenerateAfter is the signal a generate node's steps count their gaps
// from, and how long each waits for it.
type GenerateAfter struct {
	Pos     manifest.Pos `yaml:"-" json:"-"`
	Signal  string       `yaml:"signal" json:"signal"`
	Timeout Duration     `yaml:"timeout" json:"timeout,omitempty"`
}

// UnmarshalNode implements manifest.Unmarshaler: after: SIGNAL, or
// after: {signal: SIGNAL, timeout: D}.
func (a *GenerateAfter) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode {
		a.Signal, a.Pos = n.Value, manifest.PosOf(n)
		// The binding names the signal's field, short form or not.
		d.Positions[path+".signal"] = a.Pos
		return
	}
	type plain GenerateAfter
	var p plain
	d.Decode(n, path, reflect.ValueOf(&p).Elem())
	*a = GenerateAfter(p)
	a.Pos = manifest.PosOf(n)
}

// Gap is a range of waits, [Min, Max]; a single duration is both ends.
type Gap struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	Min Duration     `yaml:"min" json:"min"`
	Max Duration     `yaml:"max" json:"max"`
}

// UnmarshalNode implements manifest.Unmarshaler: gap: 1s or
// gap: {min: 200ms, max: 2s}.
func (g *Gap) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	g.Pos = manifest.PosOf(n)
	if n.Kind == yaml.ScalarNode {
		d.Decode(n, path, reflect.ValueOf(&g.Min).Elem())
		g.Max = g.Min
		return
	}
	type plain Gap
	var p plain
	d.Decode(n, path, reflect.ValueOf(&p).Elem())
	*g = Gap(p)
	g.Pos = manifest.PosOf(n)
}

// GenerateOp is one operation a generate node may draw.
type GenerateOp struct {
	Pos       manifest.Pos `yaml:"-" json:"-"`
	Operation string       `yaml:"operation" json:"operation"`
	// Weight is its relative chance (default 1).
	Weight int `yaml:"weight" json:"weight,omitempty"`
	// Max caps how often it is drawn (0: no cap).
	Max int `yaml:"max" json:"max,omitempty"`
}

// UnmarshalNode implements manifest.Unmarshaler: a bare operation name, or
// {operation: NAME, weight: W, max: N}.
func (o *GenerateOp) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	o.Pos = manifest.PosOf(n)
	if n.Kind == yaml.ScalarNode {
		o.Operation = n.Value
		return
	}
	type plain GenerateOp
	var p plain
	d.Decode(n, path, reflect.ValueOf(&p).Elem())
	*o = GenerateOp(p)
	o.Pos = manifest.PosOf(n)
}

// WeightOrDefault is the operation's weight, 1 when unset.
func (o *GenerateOp) WeightOrDefault() int {
	if o.Weight == 0 {
		return 1
	}
	return o.Weight
}

// Schedule and ScheduleStep are what a generate node drew: the run
// directory records them (manifest.json, schedule.drawn).
type (
	Schedule     = rundir.Schedule
	ScheduleStep = rundir.ScheduleStep
)

// gapStep is the resolution of drawn gaps: milliseconds, as the timeline
// records times, so a schedule written out as delays is the same schedule.
const gapStep = time.Millisecond

// Draw draws the schedule of the generate node at path from seed. It
// depends only on seed, path and g, so a replay with the seed draws the
// same schedule and other random choices of the run do not shift it.
func (g *Generate) Draw(seed uint64, path string) Schedule {
	h := uint64(14695981039346656037)
	for _, c := range []byte("generate " + path) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	r := rand.New(rand.NewPCG(seed, h))
	s := Schedule{Node: path, Steps: []ScheduleStep{}}
	if g.After != nil {
		s.Signal, s.Timeout = g.After.Signal, g.After.Timeout
	}
	used := make([]int, len(g.Operations))
	var elapsed time.Duration
	for n := 0; n < limits.MaxRepeatRounds; n++ {
		if g.Times > 0 && n >= g.Times {
			break
		}
		gap := g.Gap.Min.D()
		if span := (g.Gap.Max.D() - g.Gap.Min.D()) / gapStep; span > 0 {
			gap += time.Duration(r.Int64N(int64(span)+1)) * gapStep
		}
		if g.For > 0 && elapsed+gap > g.For.D() {
			break
		}
		total := 0
		for i := range g.Operations {
			if g.Operations[i].Max == 0 || used[i] < g.Operations[i].Max {
				total += g.Operations[i].WeightOrDefault()
			}
		}
		if total == 0 {
			break
		}
		pick := r.IntN(total)
		for i := range g.Operations {
			o := &g.Operations[i]
			if o.Max != 0 && used[i] >= o.Max {
				continue
			}
			if pick < o.WeightOrDefault() {
				used[i]++
				s.Steps = append(s.Steps, ScheduleStep{Gap: Duration(gap), Operation: o.Operation})
				break
			}
			pick -= o.WeightOrDefault()
		}
		elapsed += gap
	}
	return s
}

// Schedules draws every generate node of the flow from seed, in flow order.
func (x *Experiment) Schedules(seed uint64) []Schedule {
	var out []Schedule
	x.Flow.Walk(func(f *FlowNode) {
		if f.Kind == FlowGenerate && f.Generate != nil {
			out = append(out, f.Generate.Draw(seed, f.Path))
		}
	})
	return out
}

// ScheduleFlow is the schedule as plain flow nodes (delay, operation,
// delay, ...), as a reproducer writes it: running it does what the
// generate node did when it drew this schedule. A schedule aimed at a
// signal waits for it before each step: {wait: {signal, delay: GAP}}. A
// step whose gap is a window (a hunt's candidate) is a generate of one
// step drawing its gap from the window, so each run draws anew.
func ScheduleFlow(s Schedule) []any {
	out := make([]any, 0, 2*len(s.Steps))
	for _, st := range s.Steps {
		if st.Window() {
			g := map[string]any{"times": 1, "gap": map[string]string{"min": st.Gap.String(), "max": st.Max.String()}, "operations": []string{st.Operation}}
			if s.Signal != "" {
				a := map[string]string{"signal": s.Signal}
				if s.Timeout > 0 {
					a["timeout"] = s.Timeout.String()
				}
				g["after"] = a
			}
			out = append(out, map[string]any{FlowGenerate: g})
			continue
		}
		if s.Signal != "" {
			out = append(out, map[string]any{FlowWait: SignalWait(s, st.Gap)})
			out = append(out, st.Operation)
			continue
		}
		if st.Gap > 0 {
			out = append(out, map[string]string{FlowDelay: st.Gap.String()})
		}
		out = append(out, st.Operation)
	}
	return out
}

// SignalWait is the wait a step of a schedule aimed at a signal begins
// with, as a flow's wait node writes it.
func SignalWait(s Schedule, delay Duration) map[string]string {
	w := map[string]string{"signal": s.Signal, "delay": delay.String()}
	if s.Timeout > 0 {
		w["timeout"] = s.Timeout.String()
	}
	return w
}

func decodeGenerate(d *manifest.Decoder, n *yaml.Node, path string) *Generate {
	g := &Generate{}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "expected a mapping with operations, gap and for or times, got %s", manifest.Describe(n))
		return g
	}
	d.Decode(n, path, reflect.ValueOf(g).Elem())
	g.Pos = manifest.PosOf(n)
	return g
}

// validateGenerate checks a generate node on its own and against the
// experiment's operations.
func validateGenerate(d *manifest.Decoder, x *Experiment, f *FlowNode, used map[string]bool) {
	g := f.Generate
	p := manifest.Join(f.Path, FlowGenerate)
	if g.For == 0 && g.Times == 0 {
		d.Problem(p, "generate needs for: DURATION, times: N, or both")
	}
	if g.Times < 0 {
		d.Problem(p+".times", "times must not be negative")
	}
	if g.Gap.Min < 0 || g.Gap.Max < 0 {
		d.Problem(p+".gap", "a gap must not be negative")
	}
	if g.Gap.Max < g.Gap.Min {
		d.Problem(p+".gap.max", "max (%s) is below min (%s)", g.Gap.Max, g.Gap.Min)
	}
	if g.Times == 0 && g.For > 0 {
		if g.Gap.Max < Duration(limits.MinRepeatRound) {
			d.Problem(p+".gap", "a generate without times needs gaps of at least %s (this one's longest gap is %s); widen the gap or set times", manifest.Duration(limits.MinRepeatRound), g.Gap.Max)
		} else if g.Gap.Min > 0 && int64(g.For.D()/g.Gap.Min.D()) > limits.MaxRepeatRounds {
			d.Problem(p+".for", "up to %d operations; a generate draws at most %d", int64(g.For.D()/g.Gap.Min.D()), limits.MaxRepeatRounds)
		}
	}
	if g.Times > limits.MaxRepeatRounds {
		d.Problem(p+".times", "%d operations; a generate draws at most %d", g.Times, limits.MaxRepeatRounds)
	}
	if len(g.Operations) == 0 {
		d.Problem(p, "generate needs operations: the operations it may draw")
	}
	if a := g.After; a != nil {
		if a.Signal == "" {
			d.Problem(p+".after", "after needs signal: a signal the adapter declares, whose next line each step waits for")
		}
	}
	var names []string
	for _, o := range x.Operations {
		names = append(names, o.Name)
	}
	for i := range g.Operations {
		o := &g.Operations[i]
		op := fmt.Sprintf("%s.operations[%d]", p, i)
		used[o.Operation] = true
		switch xo := x.Operation(o.Operation); {
		case o.Operation == "":
			d.Problem(op, "missing operation: the name of an operation of this experiment")
		case xo == nil:
			d.Problem(op, "no operation named %q%s", o.Operation, manifest.DidYouMean(o.Operation, names))
		case xo.Trigger != nil:
			d.Problem(op, "operation %q has a trigger, so it fires by itself while the flow runs; a generate cannot draw it", o.Operation)
		}
		if o.Weight < 0 {
			d.Problem(op+".weight", "weight must not be negative")
		}
		if o.Max < 0 {
			d.Problem(op+".max", "max must not be negative")
		}
	}
}

func generateLabel(g *Generate) string {
	var parts []string
	if g.For > 0 {
		parts = append(parts, "for "+g.For.String())
	}
	if g.Times > 0 {
		parts = append(parts, fmt.Sprintf("%d times", g.Times))
	}
	if g.After != nil {
		parts = append(parts, "after "+g.After.Signal)
	}
	return "generate " + strings.Join(parts, ", ")
}
