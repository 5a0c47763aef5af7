package experiment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Network faults: they act on the network namespace of what they target,
// from the host, and are held for the operation's duration (or to the end
// of the flow without one), then removed.
const (
	// FaultLatency delays every packet the target sends by delay, give or
	// take jitter.
	FaultLatency = "latency"
	// FaultLoss drops a percentage of the packets the target sends.
	FaultLoss = "loss"
	// FaultBandwidth limits the rate at which the target sends.
	FaultBandwidth = "bandwidth"
	// FaultReset answers every TCP segment to or from the target with a
	// reset: its connections are reset and new ones refused.
	FaultReset = "reset"
	// FaultBlackhole drops every packet to and from the target:
	// connections hang.
	FaultBlackhole = "blackhole"
	// FaultPartition splits members into groups that cannot reach each
	// other.
	FaultPartition = "partition"
)

// NetworkFaults lists the network faults.
var NetworkFaults = []string{FaultLatency, FaultLoss, FaultBandwidth, FaultReset, FaultBlackhole, FaultPartition}

// IsNetworkFault reports whether name is one of the network faults.
func IsNetworkFault(name string) bool { return slices.Contains(NetworkFaults, name) }

// Partition shapes.
const (
	ShapeHalves     = "halves"
	ShapeMajority   = "majority"
	ShapeIsolateOne = "isolate-one"
	ShapeRing       = "ring"
	ShapeGroups     = "groups"
)

// Shapes lists the partition shapes.
var Shapes = []string{ShapeHalves, ShapeMajority, ShapeIsolateOne, ShapeRing, ShapeGroups}

// Partition directions.
const (
	DirectionBoth   = "both"
	DirectionOneWay = "one-way"
)

// Network holds the parameters of a network fault (an operation's network
// field). Which fields apply depends on the fault.
type Network struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// latency
	Delay       Duration `yaml:"delay" json:"delay,omitempty" jsonschema_description:"latency: added to every packet the target sends, e.g. 100ms."`
	Jitter      Duration `yaml:"jitter" json:"jitter,omitempty" jsonschema_description:"latency: each packet's delay varies by up to this much either way (default 0)."`
	Correlation *float64 `yaml:"correlation" json:"correlation,omitempty" jsonschema:"minimum=0,maximum=100" jsonschema_description:"latency: how much each packet's variation follows the previous one's, in percent (default 0: independent)."`
	// loss
	Percent float64 `yaml:"percent" json:"percent,omitempty" jsonschema:"exclusiveMinimum=0,maximum=100" jsonschema_description:"loss: the share of the packets the target sends that are dropped, in percent."`
	// bandwidth
	Rate string `yaml:"rate" json:"rate,omitempty" jsonschema_description:"bandwidth: the most the target may send, e.g. 1mbit, 512kbit, 100kbps (bit: bits, bps: bytes per second; k, m, g prefixes)."`
	// partition
	Shape     string     `yaml:"shape" json:"shape,omitempty" jsonschema:"enum=halves,enum=majority,enum=isolate-one,enum=ring,enum=groups" jsonschema_description:"partition: how the members are split (groups when groups is given)."`
	Members   []string   `yaml:"members" json:"members,omitempty" jsonschema_description:"partition: who takes part, instead of target: workloads (their live instances), instances (name-N) and named targets."`
	Isolate   string     `yaml:"isolate" json:"isolate,omitempty" jsonschema_description:"partition isolate-one: the member to cut off (default: one drawn from the seed)."`
	Groups    [][]string `yaml:"groups" json:"groups,omitempty" jsonschema_description:"partition: explicit groups of members (workloads, instances, named targets) that cannot reach each other."`
	Direction string     `yaml:"direction" json:"direction,omitempty" jsonschema:"enum=both,enum=one-way" jsonschema_description:"partition: both (default), or one-way: the first group's packets do not reach the others, theirs still reach it."`
}

// DirectionOrDefault returns the partition's direction, both when unset.
func (n *Network) DirectionOrDefault() string {
	if n == nil || n.Direction == "" {
		return DirectionBoth
	}
	return n.Direction
}

// ShapeOrDefault returns the partition's shape: groups when groups are
// given and no shape is.
func (n *Network) ShapeOrDefault() string {
	if n == nil {
		return ""
	}
	if n.Shape == "" && len(n.Groups) > 0 {
		return ShapeGroups
	}
	return n.Shape
}

// ParseRate reads a bandwidth as tc writes it: a number and a unit, bit,
// kbit, mbit, gbit (bits per second) or bps, kbps, mbps, gbps (bytes per
// second), case-insensitive. It returns bits per second.
func ParseRate(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mult   float64
	}{
		{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
		{"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8},
	}
	for _, u := range units {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%q is not a rate: want a number and a unit, e.g. 1mbit or 100kbps", s)
		}
		bits := f * u.mult
		if bits < 8000 {
			return 0, fmt.Errorf("rate %s is below 8kbit, the least a bandwidth fault can hold", s)
		}
		if bits > 100e9 {
			return 0, fmt.Errorf("rate %s is above 100gbit", s)
		}
		return uint64(bits), nil
	}
	return 0, fmt.Errorf("%q is not a rate: want a number and a unit (bit, kbit, mbit, gbit, or bps, kbps, mbps, gbps for bytes), e.g. 1mbit", s)
}

// networkFields are the network field's keys each fault takes.
var networkFields = map[string][]string{
	FaultLatency:   {"delay", "jitter", "correlation"},
	FaultLoss:      {"percent"},
	FaultBandwidth: {"rate"},
	FaultReset:     {},
	FaultBlackhole: {},
	FaultPartition: {"shape", "members", "isolate", "groups", "direction"},
}

// validateNetwork checks the network fields of operation o at p, which
// uses a network fault (or, with a network field, any other).
func validateNetwork(d *manifest.Decoder, x *Experiment, p string, o *Operation) {
	n := o.Network
	np := p + ".network"
	if !IsNetworkFault(o.Uses) {
		if n != nil {
			d.Problem(np, "network gives the parameters of network faults (%s); %s takes none", strings.Join(NetworkFaults, ", "), o.Uses)
		}
		return
	}
	set := func(field string) bool {
		_, ok := x.Positions[np+"."+field]
		return ok
	}
	// Fields another fault takes, given here.
	for _, f := range NetworkFaults {
		for _, field := range networkFields[f] {
			if set(field) && !slices.Contains(networkFields[o.Uses], field) {
				d.Problem(np+"."+field, "%s applies to %s, not %s", field, f, o.Uses)
			}
		}
	}
	need := func(field, example string) {
		if n == nil || !set(field) {
			d.Problem(p, "missing network.%s: %s needs it, e.g. network: {%s}", field, o.Uses, example)
		}
	}
	switch o.Uses {
	case FaultLatency:
		need("delay", "delay: 100ms")
		if n == nil {
			break
		}
		if set("delay") && n.Delay <= 0 {
			d.Problem(np+".delay", "must be more than 0")
		}
		if n.Jitter < 0 {
			d.Problem(np+".jitter", "must not be negative")
		}
		if n.Delay > 0 && n.Jitter > n.Delay {
			d.Problem(np+".jitter", "jitter %s is more than the delay %s: a packet cannot leave before it was sent", n.Jitter, n.Delay)
		}
		if n.Delay > Duration(60e9) {
			d.Problem(np+".delay", "%s; a latency fault delays by at most 1m", n.Delay)
		}
		if c := n.Correlation; c != nil && (*c < 0 || *c > 100) {
			d.Problem(np+".correlation", "%g is not a percentage from 0 to 100", *c)
		}
		if n.Correlation != nil && *n.Correlation > 0 && n.Jitter == 0 {
			d.Problem(np+".correlation", "correlation shapes the jitter, and there is none")
		}
	case FaultLoss:
		need("percent", "percent: 10")
		if n != nil && set("percent") && (n.Percent <= 0 || n.Percent > 100) {
			d.Problem(np+".percent", "%g is not a percentage above 0 and at most 100", n.Percent)
		}
	case FaultBandwidth:
		need("rate", "rate: 1mbit")
		if n != nil && set("rate") {
			if _, err := ParseRate(n.Rate); err != nil {
				d.Problem(np+".rate", "%v", err)
			}
		}
	case FaultPartition:
		validatePartition(d, x, p, o)
	}
}

// validatePartition checks a partition's members, shape and direction.
func validatePartition(d *manifest.Decoder, x *Experiment, p string, o *Operation) {
	n := o.Network
	np := p + ".network"
	if n == nil {
		d.Problem(p, "missing network: a partition needs a shape and its members, e.g. network: {shape: isolate-one}, with target: {workload: NAME}")
		return
	}
	ways := 0
	for _, given := range []bool{o.Target != nil, len(n.Members) > 0, len(n.Groups) > 0} {
		if given {
			ways++
		}
	}
	switch {
	case ways == 0:
		d.Problem(p, "a partition needs its members: target (a workload's instances, a target's containers or pods), network.members, or network.groups")
	case ways > 1:
		d.Problem(np, "name the partition's members one way: target, network.members or network.groups")
	}
	shape := n.ShapeOrDefault()
	switch {
	case shape == "":
		d.Problem(np, "missing shape: one of %s", strings.Join(Shapes, ", "))
	case !slices.Contains(Shapes, shape):
		d.Problem(np+".shape", "unknown shape %q; expected one of %s%s", n.Shape, strings.Join(Shapes, ", "), manifest.DidYouMean(n.Shape, Shapes))
	case shape == ShapeGroups && len(n.Groups) == 0:
		d.Problem(np+".shape", "shape groups needs groups: [[a, b], [c]]")
	case shape != ShapeGroups && len(n.Groups) > 0:
		d.Problem(np+".groups", "groups make the shape; leave shape out or write shape: groups")
	}
	if n.Isolate != "" && shape != ShapeIsolateOne {
		d.Problem(np+".isolate", "isolate applies to shape isolate-one")
	}
	switch n.Direction {
	case "", DirectionBoth, DirectionOneWay:
	default:
		d.Problem(np+".direction", "unknown direction %q; expected both or one-way", n.Direction)
	}
	if len(n.Groups) == 1 {
		d.Problem(np+".groups", "one group cuts nothing off: give at least two")
	}
	seen := map[string]string{}
	check := func(fp, name string) {
		if name == "" {
			d.Problem(fp, "empty member name")
			return
		}
		if prev, dup := seen[name]; dup {
			d.Problem(fp, "%s is already a member (%s)", name, prev)
			return
		}
		seen[name] = fp
		if w := instanceWorkload(x, name); w != nil && !isInstanceOf(name, w) {
			d.Problem(fp, "%q is not an instance of workload %q (its instances are %s-0 to %s-%d)", name, w.Name, w.Name, w.Name, w.InstanceCount()-1)
		}
	}
	for i, m := range n.Members {
		check(fmt.Sprintf("%s.members[%d]", np, i), m)
	}
	for i, g := range n.Groups {
		if len(g) == 0 {
			d.Problem(fmt.Sprintf("%s.groups[%d]", np, i), "empty group")
		}
		for j, m := range g {
			check(fmt.Sprintf("%s.groups[%d][%d]", np, i, j), m)
		}
	}
	if n.Isolate != "" && len(n.Members) > 0 {
		if _, ok := seen[n.Isolate]; !ok && x.Workload(n.Isolate) == nil {
			if w := instanceWorkload(x, n.Isolate); w == nil || !slices.Contains(n.Members, w.Name) {
				d.Problem(np+".isolate", "%q is not one of the members", n.Isolate)
			}
		}
	}
	if (len(n.Members) > 0 || len(n.Groups) > 0) && o.Select != nil {
		d.Problem(p+".select", "select picks among a target's candidates; the partition names its members")
	}
	if o.Jitter > 0 {
		d.Problem(p+".jitter", "a partition cuts every member off at once; jitter does not apply")
	}
	if shape == ShapeRing && o.Target != nil && o.Target.Workload != "" && o.Select == nil {
		if w := x.Workload(o.Target.Workload); w != nil && w.InstanceCount() < 4 {
			d.Problem(np+".shape", "a ring needs at least 4 members (each reaches only its two neighbours); workload %q has %d", w.Name, w.InstanceCount())
		}
	}
}

// instanceWorkload returns the workload whose instance name looks like
// name (workload-N), or nil.
func instanceWorkload(x *Experiment, name string) *Workload {
	m := instancePattern.FindStringSubmatch(name)
	if m == nil {
		return nil
	}
	return x.Workload(m[1])
}
