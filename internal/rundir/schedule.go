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
}

// Schedule is what a generate node drew for one run: the node's path and
// its steps in order. manifest.json and the timeline's schedule.drawn
// record it; the same seed draws the same one.
type Schedule struct {
	Node  string         `json:"node"`
	Steps []ScheduleStep `json:"steps"`
}

// String renders the schedule as "+1.2s kill, +300ms freeze".
func (s Schedule) String() string {
	parts := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		parts[i] = "+" + st.Gap.String() + " " + st.Operation
	}
	return strings.Join(parts, ", ")
}
