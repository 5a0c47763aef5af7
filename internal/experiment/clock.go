package experiment

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Clock faults: the target's wall clock (CLOCK_REALTIME as its processes
// read it) is wrong, the machine's is not. Each holds for the operation's
// duration (or to the end of the flow without one) and is then undone.
const (
	// FaultClockOffset puts the clock clock.offset ahead (or behind,
	// negative) for the duration.
	FaultClockOffset = "clock-offset"
	// FaultClockJump steps the clock by clock.offset at a moment: the
	// operation ends at once and the flow goes on with the step in place
	// until the flow ends.
	FaultClockJump = "clock-jump"
	// FaultClockDrift makes the clock run clock.rate times as fast as
	// the true one from the moment it applies.
	FaultClockDrift = "clock-drift"
	// FaultClockStrobe flips the clock between true and clock.offset
	// every clock.period.
	FaultClockStrobe = "clock-strobe"
)

// ClockFaults lists the clock faults.
var ClockFaults = []string{FaultClockOffset, FaultClockJump, FaultClockDrift, FaultClockStrobe}

// IsClockFault reports whether name is one of the clock faults.
func IsClockFault(name string) bool { return slices.Contains(ClockFaults, name) }

// MaxClockOffset bounds a clock offset: within ten years either way, so
// the shifted clock stays a time after 1970 that programs can print.
const MaxClockOffset = 10 * 365 * 24 * time.Hour

// Clock holds the parameters of a clock fault (an operation's clock
// field).
type Clock struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// Offset is signed, so it is a string: +90s, -1h, 30m.
	Offset string   `yaml:"offset" json:"offset,omitempty" jsonschema_description:"clock-offset, clock-jump, clock-strobe: how far the clock is moved, ahead or (negative) behind: 90s, -1h, 2h30m."`
	Rate   float64  `yaml:"rate" json:"rate,omitempty" jsonschema:"exclusiveMinimum=0" jsonschema_description:"clock-drift: how fast the clock runs against the true one: 1.5 is half again as fast, 0.5 half as fast."`
	Period Duration `yaml:"period" json:"period,omitempty" jsonschema_description:"clock-strobe: how long each state lasts before the clock flips (true, shifted, true, ...); at least 100ms."`
}

// clockFields are the clock field's keys each fault takes.
var clockFields = map[string][]string{
	FaultClockOffset: {"offset"},
	FaultClockJump:   {"offset"},
	FaultClockDrift:  {"rate"},
	FaultClockStrobe: {"offset", "period"},
}

// ParseClockOffset reads a signed offset (90s, -1h, +2h30m).
func ParseClockOffset(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not an offset: want a duration with a unit, ahead (90s, 1h) or behind (-90s)", s)
	}
	if d == 0 {
		return 0, fmt.Errorf("offset %s moves nothing", s)
	}
	if d > MaxClockOffset || d < -MaxClockOffset {
		return 0, fmt.Errorf("offset %s is more than ten years either way", s)
	}
	return d, nil
}

// validateClock checks the clock fields of operation o at p.
func validateClock(d *manifest.Decoder, x *Experiment, p string, o *Operation) {
	c := o.Clock
	cp := p + ".clock"
	if !IsClockFault(o.Uses) {
		if c != nil {
			d.Problem(cp, "clock gives the parameters of clock faults (%s); %s takes none", strings.Join(ClockFaults, ", "), o.Uses)
		}
		return
	}
	set := func(field string) bool {
		_, ok := x.Positions[cp+"."+field]
		return ok
	}
	for _, field := range []string{"offset", "rate", "period"} {
		if set(field) && !slices.Contains(clockFields[o.Uses], field) {
			d.Problem(cp+"."+field, "%s does not apply to %s (it takes %s)", field, o.Uses, strings.Join(clockFields[o.Uses], " and "))
		}
	}
	need := func(field, example string) bool {
		if c == nil || !set(field) {
			d.Problem(p, "missing clock.%s: %s needs it, e.g. clock: {%s}", field, o.Uses, example)
			return false
		}
		return true
	}
	switch o.Uses {
	case FaultClockOffset, FaultClockJump, FaultClockStrobe:
		if need("offset", "offset: -90s") {
			if _, err := ParseClockOffset(c.Offset); err != nil {
				d.Problem(cp+".offset", "%v", err)
			}
		}
	case FaultClockDrift:
		if need("rate", "rate: 1.5") && (c.Rate <= 0 || c.Rate == 1 || c.Rate > 1000 || math.IsNaN(c.Rate)) {
			d.Problem(cp+".rate", "%g is not a rate: want a speed above 0, not 1 and at most 1000 (1.5 is half again as fast)", c.Rate)
		}
	}
	if o.Uses == FaultClockStrobe && need("period", "period: 2s") && c.Period.D() < 100*time.Millisecond {
		d.Problem(cp+".period", "%s is below 100ms, the shortest period a strobe keeps", c.Period)
	}
	if o.Uses == FaultClockJump && o.Duration > 0 {
		d.Problem(p+".duration", "a clock-jump holds until the flow ends; for a step undone after a while use clock-offset with a duration")
	}
}

// WorkloadClock offsets the monotonic and boot-time clocks of a
// workload's instances through a time namespace, set before each starts
// and fixed for its life (a workload's clock field).
type WorkloadClock struct {
	Pos       manifest.Pos `yaml:"-" json:"-"`
	Monotonic string       `yaml:"monotonic" json:"monotonic,omitempty" jsonschema_description:"How far CLOCK_MONOTONIC reads ahead (or, negative, behind) in whole seconds: 1h, -30s."`
	Boottime  string       `yaml:"boottime" json:"boottime,omitempty" jsonschema_description:"How far CLOCK_BOOTTIME (and /proc/uptime) reads ahead (or, negative, behind) in whole seconds."`
}

// MonotonicOffset is Monotonic parsed (0 when unset or unreadable).
func (c *WorkloadClock) MonotonicOffset() time.Duration { d, _ := parseNSOffset(c.Monotonic); return d }

// BoottimeOffset is Boottime parsed (0 when unset or unreadable).
func (c *WorkloadClock) BoottimeOffset() time.Duration { d, _ := parseNSOffset(c.Boottime); return d }

func parseNSOffset(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := ParseClockOffset(s)
	if err == nil && d%time.Second != 0 {
		err = fmt.Errorf("offset %s is not whole seconds, which a time namespace takes", s)
	}
	return d, err
}

// validateWorkloadClock checks a workload's clock field at p.
func validateWorkloadClock(d *manifest.Decoder, p string, c *WorkloadClock) {
	if c == nil {
		return
	}
	if c.Monotonic == "" && c.Boottime == "" {
		d.Problem(p+".clock", "clock needs monotonic or boottime (or both), e.g. clock: {monotonic: 1h}")
	}
	for _, f := range []struct{ field, v string }{{"monotonic", c.Monotonic}, {"boottime", c.Boottime}} {
		if f.v == "" {
			continue
		}
		if _, err := parseNSOffset(f.v); err != nil {
			d.Problem(p+".clock."+f.field, "%v", err)
		}
	}
}
