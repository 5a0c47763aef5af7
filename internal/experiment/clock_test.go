package experiment

import (
	"testing"
	"time"
)

// clockBad are clock operations each wrong in a known way, with every
// problem at its file:line:col.
var clockBad = []badCase{
	{name: "clock-offset without offset", yaml: resHead + `  - {name: skew, uses: clock-offset, target: {workload: db}}
flow: {parallel: [db, skew]}
`, want: []prob{
		e(6, 5, "operations[0]", "missing clock.offset: clock-offset needs it, e.g. clock: {offset: -90s}"),
	}},
	{name: "an offset without a unit", yaml: resHead + `  - {name: skew, uses: clock-offset, target: {workload: db}, clock: {offset: "90"}}
flow: {parallel: [db, skew]}
`, want: []prob{
		e(6, 78, "operations[0].clock.offset", `"90" is not an offset: want a duration with a unit, ahead (90s, 1h) or behind (-90s)`),
	}},
	{name: "an offset of nothing", yaml: resHead + `  - {name: skew, uses: clock-jump, target: {workload: db}, clock: {offset: 0s}}
flow: {parallel: [db, skew]}
`, want: []prob{
		e(6, 76, "operations[0].clock.offset", "offset 0s moves nothing"),
	}},
	{name: "an offset past ten years", yaml: resHead + `  - {name: skew, uses: clock-offset, target: {workload: db}, clock: {offset: -100000h}}
flow: {parallel: [db, skew]}
`, want: []prob{
		e(6, 78, "operations[0].clock.offset", "offset -100000h is more than ten years either way"),
	}},
	{name: "a drift at true speed", yaml: resHead + `  - {name: d, uses: clock-drift, target: {workload: db}, clock: {rate: 1}}
flow: {parallel: [db, d]}
`, want: []prob{
		e(6, 72, "operations[0].clock.rate", "1 is not a rate: want a speed above 0, not 1 and at most 1000 (1.5 is half again as fast)"),
	}},
	{name: "a field of another clock fault", yaml: resHead + `  - {name: d, uses: clock-drift, target: {workload: db}, clock: {rate: 2, offset: 1h}}
flow: {parallel: [db, d]}
`, want: []prob{
		e(6, 83, "operations[0].clock.offset", "offset does not apply to clock-drift (it takes rate)"),
	}},
	{name: "a strobe too quick and without offset", yaml: resHead + `  - {name: s, uses: clock-strobe, target: {workload: db}, clock: {period: 10ms}}
flow: {parallel: [db, s]}
`, want: []prob{
		e(6, 5, "operations[0]", "missing clock.offset: clock-strobe needs it, e.g. clock: {offset: -90s}"),
		e(6, 75, "operations[0].clock.period", "10ms is below 100ms, the shortest period a strobe keeps"),
	}},
	{name: "a jump with a duration", yaml: resHead + `  - {name: j, uses: clock-jump, target: {workload: db}, duration: 5s, clock: {offset: 1h}}
flow: {parallel: [db, j]}
`, want: []prob{
		e(6, 67, "operations[0].duration", "a clock-jump holds until the flow ends; for a step undone after a while use clock-offset with a duration"),
	}},
	{name: "clock on a fault that takes none", yaml: resHead + `  - {name: k, uses: kill, target: {workload: db}, clock: {offset: 1h}}
flow: {parallel: [db, k]}
`, want: []prob{
		e(6, 58, "operations[0].clock", "clock gives the parameters of clock faults (clock-offset, clock-jump, clock-drift, clock-strobe); kill takes none"),
	}},
	{name: "a workload clock in fractions of a second", yaml: `apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: db, run: "true", clock: {monotonic: 1500ms}}
flow: db
`, want: []prob{
		e(4, 48, "workloads[0].clock.monotonic", "offset 1500ms is not whole seconds, which a time namespace takes"),
	}},
	{name: "a workload clock with no offset", yaml: `apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: db, run: "true", clock: {}}
flow: db
`, want: []prob{
		e(4, 36, "workloads[0].clock", "clock needs monotonic or boottime (or both), e.g. clock: {monotonic: 1h}"),
	}},
}

func TestBadClockOperations(t *testing.T) {
	for _, tc := range clockBad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("bad.yaml", []byte(tc.yaml))
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}

func TestGoodClockOperations(t *testing.T) {
	x, ps := Parse("good.yaml", []byte(resHead+`  - {name: ahead, uses: clock-offset, target: {workload: db}, duration: 5s, clock: {offset: 90s}}
  - {name: step, uses: clock-jump, target: {workload: db}, clock: {offset: -2h30m}}
  - {name: fast, uses: clock-drift, target: {workload: db}, clock: {rate: 1.5}}
  - {name: flip, uses: clock-strobe, target: {workload: db}, duration: 10s, clock: {offset: -1m, period: 1s}}
flow: {parallel: [db, {serial: [ahead, step, fast, flip]}]}
`))
	for _, p := range ps {
		t.Errorf("%v", p)
	}
	if o := x.Operation("flip"); o.Clock.Period.D() != time.Second || o.Clock.Offset != "-1m" {
		t.Errorf("flip: %+v", o.Clock)
	}
}

func TestParseClockOffset(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"90s", 90 * time.Second, false}, {"-1h", -time.Hour, false}, {"+2h30m", 150 * time.Minute, false},
		{"0", 0, true}, {"90", 0, true}, {"soon", 0, true}, {"87600h", 87600 * time.Hour, false}, {"87601h", 0, true},
	}
	for _, c := range cases {
		got, err := ParseClockOffset(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParseClockOffset(%q) = %v, %v", c.in, got, err)
		}
	}
}
