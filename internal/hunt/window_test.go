package hunt

import (
	"context"
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
