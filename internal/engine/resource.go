package engine

import (
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
)

// resourceJournal is the run's journal of resource faults, which chaos
// cleanup reads after a crash; it is made at the first resource fault, so
// a run without one writes nothing.
func (e *engine) resourceJournal() *fault.ResourceJournal {
	e.resOnce.Do(func() { e.resJ = fault.NewResourceJournal(e.runID, e.dir.SystemDir(), "") })
	return e.resJ
}

// resourceSpec is o's resource field with $VARS in its path expanded from
// the run's environment, as hooks see them (a data directory under
// /tmp/db-$CHAOS_RUN_ID).
func (e *engine) resourceSpec(o *experiment.Operation) *experiment.Resource {
	if o.Resource == nil || o.Resource.Path == "" {
		return o.Resource
	}
	r := *o.Resource
	r.Path = e.expand(r.Path)
	return &r
}
