package hunt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// TestBisectNarrowsToTheWindowThatHits narrows delay windows against a
// simulated system: a run hits when its delay (drawn uniformly from the
// window tried) falls in [a, b], so a part's rate is the share of it that
// overlaps [a, b], over 20 runs. Narrowing must keep the part that still
// fails, so it ends inside (or on) the failing window, narrower than it
// began, and must not narrow at all when no part holds.
func TestBisectNarrowsToTheWindowThatHits(t *testing.T) {
	const runs = 20
	type span struct{ a, b int }
	cases := []struct {
		name      string
		start     window
		hits      span // the delays that hit, in ms
		threshold float64
		least     int
		// The result must lie within want and be at most wantWidth wide.
		want      span
		wantWidth int
		tries     int // at most this many parts measured
	}{
		{"at the left edge", window{ms(0), ms(125)}, span{0, 40}, 0, 20, span{0, 40}, 20, 9},
		{"in the middle", window{ms(0), ms(800)}, span{380, 440}, 0, 16, span{300, 500}, 60, 30},
		{"across the middle", window{ms(0), ms(200)}, span{90, 110}, 0, 10, span{75, 125}, 50, 12},
		{"the shrink keeps the threshold", window{ms(0), ms(125)}, span{0, 40}, 0.5, 20, span{0, 40}, 20, 9},
		{"stops at the least width", window{ms(0), ms(100)}, span{0, 100}, 0.5, 60, span{0, 100}, 50, 3},
		{"no hits: nothing narrows", window{ms(0), ms(100)}, span{500, 600}, 0, 10, span{0, 100}, 100, 3},
		{"halves below the threshold: the middle holds", window{ms(0), ms(100)}, span{30, 70}, 0.5, 40, span{25, 75}, 50, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rate := func(w window) campaign.Rate {
				lo, hi := max(w.lo, ms(tc.hits.a)), min(w.hi, ms(tc.hits.b))
				if hi <= lo {
					return campaign.NewRate(0, runs)
				}
				return campaign.NewRate(int(float64(runs)*float64(hi-lo)/float64(w.hi-w.lo)+0.5), runs)
			}
			rates := map[window]campaign.Rate{tc.start: rate(tc.start)}
			tries := 0
			got := bisect(tc.start, ms(tc.least), func(parent, p window) (campaign.Rate, bool, bool) {
				tries++
				r := rate(p)
				ok := stillFails(r, rates[parent], tc.threshold)
				if ok {
					rates[p] = r
				}
				return r, ok, true
			})
			if got.lo < ms(tc.want.a) || got.hi > ms(tc.want.b) || got.hi-got.lo > ms(tc.wantWidth) {
				t.Errorf("narrowed %s to %s, want within [%d,%d]ms and at most %dms wide", tc.start, got, tc.want.a, tc.want.b, tc.wantWidth)
			}
			if tries > tc.tries {
				t.Errorf("%d parts measured, want at most %d", tries, tc.tries)
			}
		})
	}
}

// TestBisectStopsWhenTheBudgetEnds keeps what held before the runs ran
// out.
func TestBisectStopsWhenTheBudgetEnds(t *testing.T) {
	n := 0
	got := bisect(window{ms(0), ms(400)}, ms(10), func(parent, p window) (campaign.Rate, bool, bool) {
		n++
		return campaign.NewRate(9, 10), p.lo == 0, n < 3
	})
	if want := (window{ms(0), ms(100)}); got != want || n != 3 {
		t.Errorf("bisect = %s after %d tries, want %s after 3", got, n, want)
	}
}

func TestParts(t *testing.T) {
	cases := []struct {
		w     window
		least int
		want  []window
	}{
		{window{ms(0), ms(100)}, 10, []window{{ms(0), ms(50)}, {ms(50), ms(100)}, {ms(25), ms(75)}}},
		{window{ms(10), ms(17)}, 2, []window{{ms(10), ms(13)}, {ms(13), ms(17)}, {ms(11), ms(16)}}},
		{window{ms(0), ms(10)}, 10, nil},
		{window{ms(5), ms(6)}, 0, nil},
	}
	for _, tc := range cases {
		if got := parts(tc.w, ms(tc.least)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parts(%s, %dms) = %v, want %v", tc.w, tc.least, got, tc.want)
		}
	}
}

func TestMergeWindows(t *testing.T) {
	one := func(gap, max int, op string) []experiment.Schedule {
		return []experiment.Schedule{{Node: "n", Signal: "s", Steps: []experiment.ScheduleStep{{Gap: ms(gap), Max: ms(max), Operation: op}}}}
	}
	cases := []struct {
		name string
		a, b []experiment.Schedule
		want []experiment.Schedule // nil: not merged
	}{
		{"overlapping", one(0, 100, "k"), one(60, 160, "k"), one(0, 160, "k")},
		{"inside", one(0, 100, "k"), one(20, 40, "k"), one(0, 100, "k")},
		{"apart", one(0, 100, "k"), one(120, 220, "k"), nil},
		{"another operation", one(0, 100, "k"), one(0, 100, "p"), nil},
		{"another node", one(0, 100, "k"), []experiment.Schedule{{Node: "m", Steps: one(0, 100, "k")[0].Steps}}, nil},
	}
	for _, tc := range cases {
		got, ok := mergeWindows(tc.a, tc.b)
		if ok != (tc.want != nil) || ok && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: mergeWindows = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
}

func TestCentresPinsEachWindowToItsMiddle(t *testing.T) {
	sc := []experiment.Schedule{{Node: "n", Signal: "s", Steps: []experiment.ScheduleStep{{Gap: ms(0), Max: ms(25), Operation: "k"}, {Gap: ms(300), Operation: "p"}}}}
	got := centres(sc)
	want := []experiment.ScheduleStep{{Gap: ms(12), Operation: "k"}, {Gap: ms(300), Operation: "p"}}
	if !reflect.DeepEqual(got[0].Steps, want) || got[0].Signal != "s" || !sc[0].Steps[0].Window() {
		t.Errorf("centres = %+v, want %+v (and the input left alone)", got[0], want)
	}
}

// TestKeepAimedAtASignalCarriesNoGap: a step aimed at a signal counts its
// delay from the signal, so removing the step before it changes nothing.
func TestKeepAimedAtASignalCarriesNoGap(t *testing.T) {
	sc := []experiment.Schedule{{Node: "n", Signal: "s", Timeout: ms(5000), Steps: []experiment.ScheduleStep{{Gap: ms(100), Operation: "a"}, {Gap: ms(20), Max: ms(40), Operation: "b"}}}}
	got := keep(sc, []bool{false, true})
	want := []experiment.Schedule{{Node: "n", Signal: "s", Timeout: ms(5000), Steps: []experiment.ScheduleStep{{Gap: ms(20), Max: ms(40), Operation: "b"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keep = %+v, want %+v", got, want)
	}
}

const aimedYAML = `apiVersion: chaos/v1alpha1
id: g
default-adapter: adapters/ticker.yaml
workloads:
  - {name: w, run: "true"}
operations:
  - {name: a, uses: kill, target: {workload: w}}
flow:
  parallel:
    - w
    - generate:
        after: {signal: tick, timeout: 5s}
        times: 2
        gap: {min: 0ms, max: 1s}
        operations: [a]
`

// TestPinAimedSchedule: a schedule aimed at a signal pins to signal waits
// with the delays; a windowed step to a generate of one step that draws
// from the window; each loads and draws what it should.
func TestPinAimedSchedule(t *testing.T) {
	x, err := Load("g.yaml", []byte(aimedYAML))
	if err != nil {
		t.Fatal(err)
	}
	sc := x.Schedules(3)
	if len(sc) != 1 || sc[0].Signal != "tick" || len(sc[0].Steps) != 2 {
		t.Fatalf("schedules = %+v", sc)
	}
	data, err := Pin(x.Raw, centres(sc), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load("p.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var got []string
	for _, c := range p.Flow.Children[1].Children {
		got = append(got, c.Label())
	}
	want := []string{"wait tick +" + sc[0].Steps[0].Gap.String(), "a", "wait tick +" + sc[0].Steps[1].Gap.String(), "a"}
	if !reflect.DeepEqual(got, want) || len(p.Schedules(3)) != 0 || !strings.Contains(string(data), "timeout: 5s") {
		t.Errorf("pinned flow %q, want %q, and no generate\n%s", got, want, data)
	}

	win := withWindow(sc, 1, window{ms(20), ms(45)})
	data, err = Pin(x.Raw, win, "", "/exp", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err = Load("p.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	drawn := p.Schedules(9)
	if len(drawn) != 1 || drawn[0].Signal != "tick" || drawn[0].Timeout != ms(5000) || len(drawn[0].Steps) != 1 {
		t.Fatalf("the windowed step draws %+v\n%s", drawn, data)
	}
	if g := drawn[0].Steps[0].Gap; g < ms(20) || g > ms(45) {
		t.Errorf("the windowed step drew %s, outside [20ms,45ms]", g)
	}
	if !strings.Contains(string(data), "min: 20ms") || !strings.Contains(string(data), "max: 45ms") {
		t.Errorf("pinned file lacks the window:\n%s", data)
	}
	// Written elsewhere (the hunt's directory), it still names the
	// adapter beside the experiment.
	if p.DefaultAdapter != "/exp/adapters/ticker.yaml" {
		t.Errorf("default-adapter %q, want /exp/adapters/ticker.yaml", p.DefaultAdapter)
	}
}

func TestInsideAMeasuredWindow(t *testing.T) {
	win := &Candidate{ID: "c1", Schedules: []experiment.Schedule{{Node: "n", Signal: "s", Steps: []experiment.ScheduleStep{{Gap: ms(0), Max: ms(90), Operation: "k"}}}}}
	drawn := func(gap int, op string) []experiment.Schedule {
		return []experiment.Schedule{{Node: "n", Signal: "s", Steps: []experiment.ScheduleStep{{Gap: ms(gap), Operation: op}}}}
	}
	cases := []struct {
		sc   []experiment.Schedule
		want string
	}{{drawn(40, "k"), "c1"}, {drawn(90, "k"), "c1"}, {drawn(91, "k"), ""}, {drawn(40, "p"), ""}}
	for _, tc := range cases {
		if got := inside([]*Candidate{win}, tc.sc); got != tc.want {
			t.Errorf("inside(%v) = %q, want %q", tc.sc, got, tc.want)
		}
	}
}

// TestConfirmInterruptedPinsTheMiddles: a hunt stopped before its
// confirming runs still emits a plain experiment, so the windowed
// candidate it hands on has each window pinned to its middle.
func TestConfirmInterruptedPinsTheMiddles(t *testing.T) {
	h := &hunter{f: &File{}, now: time.Now, start: time.Now()}
	c := &Candidate{ID: "c3", Schedules: []experiment.Schedule{{Node: "n", Signal: "s", Steps: []experiment.ScheduleStep{{Gap: ms(10), Max: ms(30), Operation: "k"}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := h.confirm(ctx, c)
	if got == nil || hasWindow(got.Schedules) || got.Schedules[0].Steps[0].Gap != ms(20) || !hasWindow(c.Schedules) {
		t.Errorf("confirm (interrupted) = %+v, want c3 with its window pinned to 20ms (and c3 left alone)", got)
	}
}

// TestNarrowGapsCentresATimeBasedStep narrows the gaps of time-based
// schedules against a simulated system: genYAML's schedule of two steps,
// where a run hits when the second step lands (the sum of the gaps, each
// drawn from its window, plus the run's drift, up to driftMs) inside
// [a, b]. The shrink must move a gap that sits at the edge of what hits
// towards its middle, and leave a schedule pinned as drawn when no
// narrower window still fails.
func TestNarrowGapsCentresATimeBasedStep(t *testing.T) {
	x, err := Load("g.yaml", []byte(genYAML))
	if err != nil {
		t.Fatal(err)
	}
	const node = "flow.parallel[1].serial[1]"
	cases := []struct {
		name    string
		gaps    [2]int // ms, as drawn
		a, b    int    // the times of the second step that hit, ms
		driftMs int
		// The pinned schedule's hit rate, and the least rate the result
		// (each window pinned to its middle) must have; narrowed, it must
		// hit more often than the pinned one.
		pinned, least float64
		narrowed      bool
	}{
		{"the drawn gap at the window's edge", [2]int{200, 300}, 510, 550, 40, 0.75, 0.85, true},
		{"the drawn gap early", [2]int{300, 160}, 470, 520, 30, 0.68, 0.85, true},
		{"no narrower window fails: pinned as drawn", [2]int{200, 300}, 500, 508, 10, 0.82, 0.8, false},
		{"it hit every run: left as it is", [2]int{200, 300}, 480, 560, 40, 1, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// rate is the exact hit rate of sc with its windows pinned to
			// their middles, over the drift.
			at := func(sc []experiment.Schedule, draw func(st experiment.ScheduleStep) experiment.Duration) time.Duration {
				var sum experiment.Duration
				for _, st := range sc[0].Steps {
					sum += draw(st)
				}
				return time.Duration(sum)
			}
			hits := func(t time.Duration) bool {
				return t >= time.Duration(ms(tc.a)) && t <= time.Duration(ms(tc.b))
			}
			rate := func(sc []experiment.Schedule) float64 {
				base := at(centres(sc), func(st experiment.ScheduleStep) experiment.Duration { return st.Gap })
				n := 0
				for d := 0; d <= tc.driftMs; d++ {
					if hits(base + time.Duration(d)*time.Millisecond) {
						n++
					}
				}
				return float64(n) / float64(tc.driftMs+1)
			}
			sc := []experiment.Schedule{{Node: node, Steps: []experiment.ScheduleStep{{Gap: ms(tc.gaps[0]), Operation: "b"}, {Gap: ms(tc.gaps[1]), Operation: "a"}}}}
			if got := rate(sc); got < tc.pinned-0.05 || got > tc.pinned+0.05 {
				t.Fatalf("the pinned schedule hits %.2f, want about %.2f", got, tc.pinned)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			h := &hunter{o: Options{Experiment: x, PerCandidate: 20, Threshold: 0.5}, f: &File{}, now: time.Now, start: time.Now()}
			n := 0
			h.try = func(_ context.Context, _, _ string, sc []experiment.Schedule, runs int) *Candidate {
				n++
				hit := 0
				for range runs {
					t := at(sc, func(st experiment.ScheduleStep) experiment.Duration {
						if st.Window() {
							return st.Gap + experiment.Duration(rng.Int64N(int64(st.Max-st.Gap)+1))
						}
						return st.Gap
					})
					if hits(t + time.Duration(rng.IntN(tc.driftMs+1))*time.Millisecond) {
						hit++
					}
				}
				return &Candidate{ID: fmt.Sprintf("c%d", n+1), Schedules: sc, Rate: campaign.NewRate(hit, runs)}
			}
			start := &Candidate{ID: "c1", Schedules: sc, Rate: campaign.NewRate(int(20*tc.pinned+0.5), 20)}
			got := h.narrowGaps(context.Background(), start)
			if hasWindow(got.Schedules) != tc.narrowed {
				t.Errorf("narrowed to %s (%d candidates measured); want a window: %v", describe(got.Schedules), n, tc.narrowed)
			}
			if r := rate(got.Schedules); r < tc.least || tc.narrowed && r <= tc.pinned {
				t.Errorf("narrowed to %s, whose middles hit %.2f; want at least %.2f (pinned: %.2f)", describe(got.Schedules), r, tc.least, tc.pinned)
			}
			if tc.pinned == 1 && n > 0 {
				t.Errorf("%d candidates measured for a schedule that hit every run, want none", n)
			}
			if !tc.narrowed && got != start {
				t.Errorf("narrowGaps = %s, want the schedule as drawn (%s)", got.ID, start.ID)
			}
		})
	}
}

func TestGapWindow(t *testing.T) {
	x, err := Load("g.yaml", []byte(genYAML))
	if err != nil {
		t.Fatal(err)
	}
	h := &hunter{o: Options{Experiment: x}}
	const node = "flow.parallel[1].serial[1]" // gaps of 10ms to 900ms: a pad of 55ms
	cases := []struct {
		name string
		s    experiment.Schedule
		st   experiment.ScheduleStep
		want window
		ok   bool
	}{
		{"a time-based step", experiment.Schedule{Node: node}, experiment.ScheduleStep{Gap: ms(300)}, window{ms(245), ms(355)}, true},
		{"not below 0", experiment.Schedule{Node: node}, experiment.ScheduleStep{Gap: ms(20)}, window{0, ms(75)}, true},
		{"a gap carried past the range", experiment.Schedule{Node: node}, experiment.ScheduleStep{Gap: ms(1500)}, window{ms(1445), ms(1555)}, true},
		{"aimed at a signal", experiment.Schedule{Node: node, Signal: "s"}, experiment.ScheduleStep{Gap: ms(300)}, window{}, false},
		{"a window already", experiment.Schedule{Node: node}, experiment.ScheduleStep{Gap: ms(300), Max: ms(320)}, window{}, false},
		{"no such node", experiment.Schedule{Node: "flow.serial[9]"}, experiment.ScheduleStep{Gap: ms(300)}, window{}, false},
	}
	for _, tc := range cases {
		got, ok := h.gapWindow(tc.s, tc.st)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: gapWindow = %s, %v; want %s, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPursued: a window that hit nothing, or no more than twice as often
// as the random delays, does not stand for its delays: a later hit inside
// it is aimed at again (a 197 ms window of a 3 s range that hit 0 of 10
// once kept a hunt from aiming at 0-45 ms, where every hit was).
func TestPursued(t *testing.T) {
	cases := []struct {
		c, random campaign.Rate
		want      bool
	}{
		{campaign.NewRate(0, 10), campaign.NewRate(1, 60), false},
		{campaign.NewRate(1, 10), campaign.NewRate(4, 60), false},
		{campaign.NewRate(1, 10), campaign.NewRate(2, 60), true},
		{campaign.NewRate(6, 10), campaign.NewRate(6, 120), true},
		{campaign.NewRate(2, 10), campaign.NewRate(0, 20), true},
	}
	for _, tc := range cases {
		if got := pursued(tc.c, tc.random); got != tc.want {
			t.Errorf("pursued(%v, %v) = %v, want %v", tc.c, tc.random, got, tc.want)
		}
	}
}
