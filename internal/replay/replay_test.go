package replay

import (
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

func op(t float64, name string, run int, instances []any, jitter []any) rundir.Event {
	f := []rundir.Field{rundir.F("operation", name), rundir.F("uses", "kill"), rundir.F("run", run), rundir.F("instances", instances)}
	if jitter != nil {
		f = append(f, rundir.F("jitter", jitter))
	}
	return rundir.Event{T: t, Name: "operation.started", Fields: f}
}

func fired(t float64, name string, fire int, delay string) rundir.Event {
	return rundir.Event{T: t, Name: "trigger.fired", Fields: []rundir.Field{rundir.F("operation", name), rundir.F("fire", fire), rundir.F("delay", delay)}}
}

func TestDiff(t *testing.T) {
	orig := Choices([]rundir.Event{
		op(1, "race", 1, []any{"counter-1", "counter-3"}, nil),
		fired(2, "poke", 1, "1.5s"),
		op(3, "poke", 1, []any{"gateway"}, []any{"120ms"}),
		op(9, "race", 2, []any{"counter-0"}, nil),
	})
	if len(orig) != 4 || orig[2].Jitter[0] != "120ms" || orig[1].Delay != "1.5s" {
		t.Fatalf("choices %+v", orig)
	}
	if d := Diff(orig, orig); len(d) != 0 {
		t.Fatalf("a run differs from itself: %+v", d)
	}
	again := Choices([]rundir.Event{
		op(1, "race", 1, []any{"counter-0", "counter-2"}, nil),
		fired(2, "poke", 1, "1.5s"),
		op(3, "poke", 1, []any{"gateway"}, []any{"80ms"}),
		op(7, "race", 3, []any{"counter-2"}, nil),
	})
	d := Diff(orig, again)
	var says []string
	for _, x := range d {
		says = append(says, x.Says)
	}
	want := []string{
		"operation race, application 1: chose counter-0, counter-2 at 1.0s (the original chose counter-1, counter-3 at 1.0s)",
		"operation poke, application 1: chose gateway with jitter 80ms at 3.0s (the original chose gateway with jitter 120ms at 3.0s)",
		"operation race, application 2: not made in the replay (the original chose counter-0 at 9.0s)",
		"operation race, application 3: made only in the replay (chose counter-2 at 7.0s)",
	}
	if strings.Join(says, "\n") != strings.Join(want, "\n") {
		t.Fatalf("divergences:\n%s\nwant:\n%s", strings.Join(says, "\n"), strings.Join(want, "\n"))
	}
}

func drawn(t float64, node string, steps ...string) rundir.Event {
	var xs []any
	for i := 0; i+1 < len(steps); i += 2 {
		xs = append(xs, map[string]any{"gap": steps[i], "operation": steps[i+1]})
	}
	return rundir.Event{T: t, Name: "schedule.drawn", Fields: []rundir.Field{rundir.F("node", node), rundir.F("steps", xs)}}
}

func TestDiffSchedules(t *testing.T) {
	orig := Choices([]rundir.Event{drawn(0.5, "flow.serial[1]", "120ms", "kill", "2s", "pause")})
	if len(orig) != 1 || orig[0].Steps != "+120ms kill, +2s pause" {
		t.Fatalf("choices %+v", orig)
	}
	if d := Diff(orig, orig); len(d) != 0 {
		t.Fatalf("a schedule differs from itself: %+v", d)
	}
	d := Diff(orig, Choices([]rundir.Event{drawn(0.5, "flow.serial[1]", "120ms", "kill")}))
	want := "generate node flow.serial[1]: drew +120ms kill at 0.5s (the original drew +120ms kill, +2s pause at 0.5s)"
	if len(d) != 1 || d[0].Says != want {
		t.Fatalf("divergences %+v, want %q", d, want)
	}
}
