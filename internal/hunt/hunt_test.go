package hunt

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/experiment"
)

const genYAML = `apiVersion: chaos/v1alpha1
id: g
# a comment that stays
workloads:
  - {name: w, run: "true"}
operations:
  - {name: a, uses: kill, target: {workload: w}}
  - {name: b, uses: freeze, target: {workload: w}, duration: 10ms}
flow:
  parallel:
    - w
    - serial:
        - delay: 1s
        - generate:
            times: 4
            gap: {min: 10ms, max: 900ms}
            operations: [a, b]
`

func ms(n int) experiment.Duration { return experiment.Duration(time.Duration(n) * time.Millisecond) }

func TestPinWritesThePlainSchedule(t *testing.T) {
	x, err := Load("g.yaml", []byte(genYAML))
	if err != nil {
		t.Fatal(err)
	}
	sc := x.Schedules(11)
	if len(sc) != 1 || sc[0].Node != "flow.parallel[1].serial[1]" {
		t.Fatalf("schedules = %+v", sc)
	}
	data, err := Pin(x.Raw, sc, "g-repro", "", "line one\nline two")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"# line one\n# line two\n", "# a comment that stays", "id: g-repro", "# pinned by chaos hunt"} {
		if !strings.Contains(text, want) {
			t.Errorf("pinned file lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "generate") && !strings.Contains(text, "pinned by chaos hunt: the schedule") {
		t.Errorf("pinned file still has a generate node:\n%s", text)
	}
	p, err := Load("p.yaml", data)
	if err != nil {
		t.Fatalf("the pinned file does not load: %v\n%s", err, text)
	}
	if got := p.Schedules(11); len(got) != 0 {
		t.Errorf("the pinned file still draws %v", got)
	}
	// Its flow node is the schedule as delays and operation names.
	node := p.Flow.Children[1].Children[1]
	var got []string
	for _, c := range node.Children {
		got = append(got, c.Label())
	}
	var want []string
	for _, st := range sc[0].Steps {
		want = append(want, "delay "+st.Gap.String(), st.Operation)
	}
	if node.Kind != experiment.FlowSerial || !reflect.DeepEqual(got, want) {
		t.Errorf("pinned node %s %v, want serial %v", node.Kind, got, want)
	}
}

func TestPinEmptyScheduleAndBadPaths(t *testing.T) {
	x, err := Load("g.yaml", []byte(genYAML))
	if err != nil {
		t.Fatal(err)
	}
	data, err := Pin(x.Raw, []experiment.Schedule{{Node: "flow.parallel[1].serial[1]"}}, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load("p.yaml", data); err != nil || !strings.Contains(string(data), "delay: 0s") {
		t.Errorf("an empty schedule pins to %q (load: %v), want delay: 0s", data, err)
	}
	for _, bad := range []string{"flow.parallel[1].serial[0]", "flow.parallel[5]", "flow.serial[1]", "nope"} {
		if _, err := Pin(x.Raw, []experiment.Schedule{{Node: bad}}, "", "", ""); err == nil {
			t.Errorf("Pin at %q: no error", bad)
		}
	}
}

func TestKeepMovesGapsToTheNextKeptStep(t *testing.T) {
	sc := []experiment.Schedule{{Node: "n", Steps: []experiment.ScheduleStep{{Gap: ms(100), Operation: "a"}, {Gap: ms(200), Operation: "b"}, {Gap: ms(300), Operation: "a"}, {Gap: ms(400), Operation: "b"}}}}
	cases := []struct {
		kept []bool
		want []experiment.ScheduleStep
	}{
		{[]bool{true, true, true, true}, sc[0].Steps},
		{[]bool{false, true, false, true}, []experiment.ScheduleStep{{Gap: ms(300), Operation: "b"}, {Gap: ms(700), Operation: "b"}}},
		{[]bool{true, false, false, false}, []experiment.ScheduleStep{{Gap: ms(100), Operation: "a"}}},
		{[]bool{false, false, false, false}, []experiment.ScheduleStep{}},
	}
	for _, tc := range cases {
		got := keep(sc, tc.kept)
		if !reflect.DeepEqual(got[0].Steps, tc.want) {
			t.Errorf("keep %v = %v, want %v", tc.kept, got[0].Steps, tc.want)
		}
	}
}

func TestChunks(t *testing.T) {
	idx := []int{0, 1, 2, 3, 4}
	cases := map[int][][]int{1: {{0, 1, 2, 3, 4}}, 2: {{0, 1}, {2, 3, 4}}, 5: {{0}, {1}, {2}, {3}, {4}}}
	for n, want := range cases {
		if got := chunks(idx, n); !reflect.DeepEqual(got, want) {
			t.Errorf("chunks(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestStillFails(t *testing.T) {
	cases := []struct {
		name      string
		c, parent campaign.Rate
		threshold float64
		want      bool
	}{
		{"as often as its parent", campaign.NewRate(9, 10), campaign.NewRate(9, 10), 0.5, true},
		{"more often", campaign.NewRate(10, 10), campaign.NewRate(7, 10), 0.5, true},
		{"a little less, not significantly", campaign.NewRate(7, 10), campaign.NewRate(9, 10), 0.5, true},
		{"below the threshold", campaign.NewRate(4, 10), campaign.NewRate(5, 10), 0.5, false},
		{"significantly below its parent", campaign.NewRate(30, 50), campaign.NewRate(50, 50), 0.5, false},
		{"never hit", campaign.NewRate(0, 10), campaign.NewRate(9, 10), 0.5, false},
		{"no decided run", campaign.NewRate(0, 0), campaign.NewRate(9, 10), 0.5, false},
	}
	for _, tc := range cases {
		if got := stillFails(tc.c, tc.parent, tc.threshold); got != tc.want {
			t.Errorf("%s: stillFails(%v, %v) = %v, want %v", tc.name, tc.c, tc.parent, got, tc.want)
		}
	}
}

func TestBetterPrefersTheSurerRate(t *testing.T) {
	if !better(campaign.NewRate(18, 20), campaign.NewRate(2, 2)) {
		t.Error("18 of 20 is not better than 2 of 2 (its interval's lower end is higher)")
	}
	if better(campaign.NewRate(1, 10), campaign.NewRate(5, 10)) {
		t.Error("1 of 10 is better than 5 of 10")
	}
}

func TestCountTalliesEachOperationOnce(t *testing.T) {
	tally := map[string]*[2]int{}
	var all [2]int
	sched := func(ops ...string) []experiment.Schedule {
		s := experiment.Schedule{Node: "n"}
		for _, o := range ops {
			s.Steps = append(s.Steps, experiment.ScheduleStep{Operation: o})
		}
		return []experiment.Schedule{s}
	}
	count(tally, &all, sched("a", "a", "b"), true)
	count(tally, &all, sched("a"), false)
	count(tally, &all, sched("b"), true)
	if all != [2]int{2, 3} || *tally["a"] != [2]int{1, 2} || *tally["b"] != [2]int{2, 2} {
		t.Errorf("all %v, a %v, b %v; want [2 3], [1 2], [2 2]", all, *tally["a"], *tally["b"])
	}
}

// TestClearlyAboveStopsTheSearchEarly: the search stops at a candidate
// whose interval lies clearly above the random schedules' and whose hit
// rate reaches --until (the threshold without it), rather than going on
// until half the budget is spent.
func TestClearlyAboveStopsTheSearchEarly(t *testing.T) {
	cases := []struct {
		name             string
		c, random        campaign.Rate
		until, threshold float64
		want             bool
	}{
		{"7 of 10 against 1 of 20", campaign.NewRate(7, 10), campaign.NewRate(1, 20), 0, 0.5, true},
		{"6 of 10 against 6 of 120", campaign.NewRate(6, 10), campaign.NewRate(6, 120), 0, 0.5, true},
		{"7 of 10 against 4 of 20: the intervals too close", campaign.NewRate(7, 10), campaign.NewRate(4, 20), 0, 0.5, false},
		{"below --until", campaign.NewRate(7, 10), campaign.NewRate(1, 40), 0.8, 0.5, false},
		{"at --until", campaign.NewRate(8, 10), campaign.NewRate(1, 40), 0.8, 0.5, true},
		{"below the threshold", campaign.NewRate(4, 10), campaign.NewRate(0, 60), 0, 0.5, false},
		{"3 of 3 against 4 of 20: too few runs", campaign.NewRate(3, 3), campaign.NewRate(4, 20), 0, 0.5, false},
		{"no random runs yet", campaign.NewRate(9, 10), campaign.Rate{}, 0, 0.5, false},
	}
	for _, tc := range cases {
		h := &hunter{o: Options{Until: tc.until, Threshold: tc.threshold}}
		if got := h.clearlyAbove(tc.c, tc.random); got != tc.want {
			t.Errorf("%s: clearlyAbove(%v, %v) = %v, want %v", tc.name, tc.c, tc.random, got, tc.want)
		}
	}
}
