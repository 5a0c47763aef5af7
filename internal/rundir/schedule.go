package rundir

import (
	"strings"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// ScheduleStep is one operation a generate node drew: wait Gap, then
// apply Operation.
type ScheduleStep struct {
	Gap       manifest.Duration `json:"gap"`
	Operation string            `json:"operation"`
	// Max is set only in a hunt's candidates (never in what a run drew):
	// the step's gap is a window, drawn anew in each run from Gap to Max.
	Max manifest.Duration `json:"max,omitempty"`
}

// Window says whether the step's gap is a window (Gap to Max).
func (st ScheduleStep) Window() bool { return st.Max > st.Gap }

// Schedule is what a generate node drew for one run: the node's path and
// its steps in order. manifest.json and the timeline's schedule.drawn
// record it; the same seed draws the same one.
type Schedule struct {
	Node  string         `json:"node"`
	Steps []ScheduleStep `json:"steps"`
	// Signal, when set, is the signal each step waits for before its gap
	// (the node's after), Timeout how long it waits.
	Signal  string            `json:"signal,omitempty"`
	Timeout manifest.Duration `json:"timeout,omitempty"`
}

// String renders the schedule as "+1.2s kill, +300ms freeze", or, aimed
// at a signal, "sweep+1.2s kill, sweep+300ms freeze".
func (s Schedule) String() string {
	parts := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		gap := st.Gap.String()
		if st.Window() {
			gap = "[" + gap + "," + st.Max.String() + "]"
		}
		parts[i] = s.Signal + "+" + gap + " " + st.Operation
	}
	return strings.Join(parts, ", ")
}
