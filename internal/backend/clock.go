package backend

import "context"

// Processed is a handle whose processes the harness can reach from this
// machine (ptrace and /proc): the clock faults patch each one. A handle
// that is not one makes those faults fail with ErrUnsupported; which
// handles can do it is said before the run by the registration's Support.
type Processed interface {
	// Processes returns every process of the handle now, as host pids,
	// and what it is for the timeline ("instance db-0").
	Processes(ctx context.Context) (what string, pids []int, err error)
}
