package experiment

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// genDoc is a complete experiment around a generate node; body is the
// generate node's mapping, indented under it (line 13 onwards).
func genDoc(body string) string {
	return doc(`
apiVersion: chaos/v1alpha1
id: g
workloads:
  - {name: w, run: "true"}
operations:
  - {name: a, uses: kill, target: {workload: w}}
  - {name: b, uses: freeze, target: {workload: w}, duration: 1s}
  - {name: t, uses: kill, target: {workload: w}, trigger: {signal: s}}
flow:
  parallel:
    - w
    - generate:
` + body)
}

func mustParse(t *testing.T, yaml string) *Experiment {
	t.Helper()
	x, ps := Parse("g.yaml", []byte(yaml))
	if err := ps.Err(); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return x
}

func TestGenerateDrawIsTheSeeds(t *testing.T) {
	x := mustParse(t, genDoc(`        times: 20
        gap: {min: 10ms, max: 2s}
        operations: [a, {operation: b, weight: 3}]
`))
	one := x.Schedules(7)
	if len(one) != 1 || one[0].Node != "flow.parallel[1]" || len(one[0].Steps) != 20 {
		t.Fatalf("schedules = %+v, want one of 20 steps at flow.parallel[1]", one)
	}
	if again := x.Schedules(7); !reflect.DeepEqual(one, again) {
		t.Errorf("the same seed drew %v, then %v", one, again)
	}
	if other := x.Schedules(8); reflect.DeepEqual(one, other) {
		t.Errorf("seeds 7 and 8 drew the same schedule %v", one)
	}
	// Over many seeds the weights show: b is drawn about three times as
	// often as a, and every gap is within the range, in milliseconds.
	counts := map[string]int{}
	for seed := uint64(0); seed < 200; seed++ {
		for _, s := range x.Schedules(seed)[0].Steps {
			counts[s.Operation]++
			if g := s.Gap.D(); g < 10*time.Millisecond || g > 2*time.Second || g%time.Millisecond != 0 {
				t.Fatalf("seed %d drew a gap of %s, outside 10ms..2s or not whole milliseconds", seed, g)
			}
		}
	}
	if r := float64(counts["b"]) / float64(counts["a"]); r < 2.6 || r > 3.4 {
		t.Errorf("b/a = %d/%d = %.2f, want about 3 (the weights)", counts["b"], counts["a"], r)
	}
}

func TestGenerateBounds(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		check func(t *testing.T, s Schedule)
	}{
		{"max caps an operation and ends the schedule when all are used up", `        times: 10
        gap: 0s
        operations: [{operation: a, max: 2}, {operation: b, max: 1}]
`, func(t *testing.T, s Schedule) {
			if len(s.Steps) != 3 {
				t.Errorf("drew %v, want 3 steps (a twice, b once)", s)
			}
			n := map[string]int{}
			for _, st := range s.Steps {
				n[st.Operation]++
			}
			if n["a"] != 2 || n["b"] != 1 {
				t.Errorf("drew %v, want a twice and b once", n)
			}
		}},
		{"for ends when the gaps add up to it", `        for: 1s
        gap: 300ms
        operations: [a]
`, func(t *testing.T, s Schedule) {
			if len(s.Steps) != 3 {
				t.Errorf("drew %v, want 3 steps of 300ms within 1s", s)
			}
		}},
		{"for and times: whichever ends first", `        for: 10s
        times: 2
        gap: 100ms
        operations: [a]
`, func(t *testing.T, s Schedule) {
			if len(s.Steps) != 2 {
				t.Errorf("drew %v, want 2 steps", s)
			}
		}},
		{"a single duration is the gap", `        times: 4
        gap: 250ms
        operations: [a]
`, func(t *testing.T, s Schedule) {
			for _, st := range s.Steps {
				if st.Gap.D() != 250*time.Millisecond {
					t.Errorf("drew %v, want every gap 250ms", s)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := mustParse(t, genDoc(tc.body))
			for seed := uint64(0); seed < 20; seed++ {
				tc.check(t, x.Schedules(seed)[0])
			}
		})
	}
}

func TestScheduleFlowRunsTheSameSteps(t *testing.T) {
	s := Schedule{Node: "flow", Steps: []ScheduleStep{{Gap: Duration(1500 * time.Millisecond), Operation: "a"}, {Gap: 0, Operation: "b"}}}
	got := ScheduleFlow(s)
	want := []any{map[string]string{"delay": "1.5s"}, "a", "b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ScheduleFlow = %v, want %v", got, want)
	}
	if s.String() != "+1.5s a, +0s b" {
		t.Errorf("String = %q", s.String())
	}
}

// TestScheduleAimedAtASignal: with after, the drawn schedule names the
// signal and its timeout, and written out as flow nodes each step is a
// wait on the signal with the step's gap as its delay.
func TestScheduleAimedAtASignal(t *testing.T) {
	x := mustParse(t, genDoc(`        times: 2
        after: {signal: s, timeout: 5s}
        gap: {min: 0ms, max: 1s}
        operations: [a]
`))
	sc := x.Schedules(4)
	if len(sc) != 1 || sc[0].Signal != "s" || sc[0].Timeout != Duration(5*time.Second) || len(sc[0].Steps) != 2 {
		t.Fatalf("schedules = %+v", sc)
	}
	g0, g1 := sc[0].Steps[0].Gap.String(), sc[0].Steps[1].Gap.String()
	want := []any{
		map[string]any{"wait": map[string]string{"signal": "s", "delay": g0, "timeout": "5s"}}, "a",
		map[string]any{"wait": map[string]string{"signal": "s", "delay": g1, "timeout": "5s"}}, "a",
	}
	if got := ScheduleFlow(sc[0]); !reflect.DeepEqual(got, want) {
		t.Errorf("ScheduleFlow = %v, want %v", got, want)
	}
	if got := sc[0].String(); got != "s+"+g0+" a, s+"+g1+" a" {
		t.Errorf("String = %q", got)
	}
	if l := x.Flow.Children[1].Label(); l != "generate 2 times, after s" {
		t.Errorf("label %q", l)
	}
	// after: NAME is short for after: {signal: NAME}.
	short := mustParse(t, genDoc(`        times: 1
        after: s
        operations: [a]
`))
	if sc := short.Schedules(4); sc[0].Signal != "s" || sc[0].Timeout != 0 {
		t.Errorf("after: s drew %+v", sc[0])
	}
}

func TestGenerateProblems(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []prob
	}{
		{"no for or times", `        gap: 1s
        operations: [a]
`, []prob{e(13, 9, "flow.parallel[1].generate", "generate needs for: DURATION, times: N, or both")}},
		{"unknown operation with a suggestion", `        times: 3
        gap: 1s
        operations: [a, bb]
`, []prob{e(15, 25, "flow.parallel[1].generate.operations[1]", `no operation named "bb" (did you mean "b"?)`)}},
		{"a triggered operation", `        times: 3
        operations: [{operation: t}]
`, []prob{e(14, 22, "flow.parallel[1].generate.operations[0]", `operation "t" has a trigger, so it fires by itself while the flow runs; a generate cannot draw it`)}},
		{"gap max below min", `        times: 3
        gap: {min: 2s, max: 1s}
        operations: [a]
`, []prob{e(14, 29, "flow.parallel[1].generate.gap.max", "max (1s) is below min (2s)")}},
		{"for with gaps too short to end", `        for: 1m
        gap: 0s
        operations: [a]
`, []prob{e(14, 14, "flow.parallel[1].generate.gap", "a generate without times needs gaps of at least 100ms (this one's longest gap is 0s); widen the gap or set times")}},
		{"negative weight", `        times: 1
        operations: [{operation: a, weight: -1}]
`, []prob{e(14, 45, "flow.parallel[1].generate.operations[0].weight", "weight must not be negative")}},
		{"unknown field", `        times: 1
        gaps: 1s
        operations: [a]
`, []prob{e(14, 9, "flow.parallel[1].generate.gaps", `unknown field "gaps" (did you mean "gap"?)`)}},
		{"no operations", `        times: 1
`, []prob{e(13, 9, "flow.parallel[1].generate", "generate needs operations: the operations it may draw")}},
		{"after without a signal", `        times: 1
        after: {timeout: 5s}
        operations: [a]
`, []prob{e(14, 16, "flow.parallel[1].generate.after", "after needs signal: a signal the adapter declares, whose next line each step waits for")}},
		{"after with a negative timeout", `        times: 1
        after: {signal: s, timeout: -1s}
        operations: [a]
`, []prob{e(14, 37, "flow.parallel[1].generate.after.timeout", `expected a duration such as 15s, 500ms or 2m30s, got "-1s" (it must not be negative)`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("g.yaml", []byte(genDoc(tc.body)))
			var errs []prob
			for _, p := range probsOf(ps) {
				if !p.Warning {
					errs = append(errs, p)
				}
			}
			for _, p := range ps {
				if p.File != "g.yaml" {
					t.Errorf("problem %v names file %q", p, p.File)
				}
			}
			assertProblems(t, errs, tc.want)
		})
	}
}

func TestGenerateInsideRepeatIsRefused(t *testing.T) {
	y := doc(`
apiVersion: chaos/v1alpha1
id: g
workloads:
  - {name: w, run: "true"}
operations:
  - {name: a, uses: kill, target: {workload: w}}
flow:
  parallel:
    - w
    - repeat:
        times: 2
        do: {generate: {times: 1, operations: [a]}}
`)
	_, ps := Parse("g.yaml", []byte(y))
	if ps.Err() == nil || !strings.Contains(ps.Error(), "a generate cannot be inside a repeat") || !strings.Contains(ps.Error(), "g.yaml:12") {
		t.Errorf("problems = %v, want a generate inside a repeat refused at g.yaml:12", ps)
	}
}
