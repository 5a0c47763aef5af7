package engine

import (
	"github.com/chaos-harness/chaos/internal/fault"
)

// resourceJournal is the run's journal of resource faults, which chaos
// cleanup reads after a crash; it is made at the first resource fault, so
// a run without one writes nothing.
func (e *engine) resourceJournal() *fault.ResourceJournal {
	e.resOnce.Do(func() { e.resJ = fault.NewResourceJournal(e.runID, e.dir.SystemDir(), "") })
	return e.resJ
}
