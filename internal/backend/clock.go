package backend

import (
	"context"
	"errors"
	"time"
)

// ErrNoTimeNamespace is a backend's refusal of TimeOffsets.
var ErrNoTimeNamespace = errors.New("a workload's clock (a time namespace of its own) is made by the process backend only: this backend cannot start an instance in one")

// TimeOffsets are the offsets of a time namespace: what its processes'
// CLOCK_MONOTONIC and CLOCK_BOOTTIME read ahead of (or, negative, behind)
// the machine's, from their start on.
type TimeOffsets struct {
	Monotonic, Boottime time.Duration
}

// Processed is a handle whose processes the harness can reach from this
// machine (ptrace and /proc): the clock faults patch each one. A handle
// that is not one makes those faults fail with ErrUnsupported; which
// handles can do it is said before the run by the registration's Support.
type Processed interface {
	// Processes returns every process of the handle now, as host pids,
	// and what it is for the timeline ("instance db-0").
	Processes(ctx context.Context) (what string, pids []int, err error)
}
