package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// TestRunPhasesBounded: a timeline of a thousand preflight checks and a
// thousand lock waits draws 40 rows of checks and one row summing up the
// rest (saying how many failed), and at most maxPhaseMarks marks a row,
// counting the others.
func TestRunPhasesBounded(t *testing.T) {
	var evs []rundir.Event
	ev := func(at float64, name string, kv ...any) {
		e := rundir.Event{T: at, Name: name}
		for i := 0; i+1 < len(kv); i += 2 {
			e.Fields = append(e.Fields, rundir.Field{Key: kv[i].(string), Value: kv[i+1]})
		}
		evs = append(evs, e)
	}
	for i := 0; i < 1000; i++ {
		ev(float64(i), "check.started", "scope", "preflight", "check", fmt.Sprint("c", i))
		ev(float64(i)+0.5, "check.finished", "scope", "preflight", "check", fmt.Sprint("c", i), "ok", i%100 != 99, "detail", "")
		ev(float64(i)+0.5, "lock.waiting", "lock", "ports")
		ev(float64(i)+0.6, "lock.acquired", "lock", "ports")
	}
	ev(1000, "check.finished", "scope", "experiment", "check", "not-preflight", "ok", false)
	rows, marks, unshown := runPhases(evs, 1001)
	if len(rows) != 2+maxPreflightRows || rows[0] != "preflight c0" || rows[1] != "run lock" || rows[len(rows)-1] != "other preflight checks" {
		t.Fatalf("rows %q", rows)
	}
	per := map[string]int{}
	var other phaseMark
	for _, m := range marks {
		per[m.Row]++
		if m.Row == "other preflight checks" {
			other = m
		}
	}
	if per["run lock"] != maxPhaseMarks || unshown["run lock"] != 1000-maxPhaseMarks {
		t.Errorf("run lock: %d marks, %d unshown", per["run lock"], unshown["run lock"])
	}
	if per["other preflight checks"] != 1 || other.S != 40 || other.E != 999.5 || !other.Failed || !strings.Contains(other.Tip, "960 more preflight checks, 10 of them FAILED") {
		t.Errorf("the other checks: %+v", other)
	}
	for _, r := range rows {
		if strings.Contains(r, "not-preflight") {
			t.Error("an experiment check drawn as preflight")
		}
	}
}
