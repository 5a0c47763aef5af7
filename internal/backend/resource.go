package backend

import (
	"context"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// Resourced is a handle whose cgroups and file system the harness can
// reach from the host: the resource faults (CPU, memory, I/O and task
// limits, CPU and memory stress, disk fill) act through it, with the same
// cgroup writes on every backend. A handle that is not one makes those
// faults fail with ErrUnsupported; which handles can do it is said before
// the run by the registration's Support.
type Resourced interface {
	Resources(ctx context.Context, need ResourceNeed) (Resources, error)
}

// ResourceNeed is what a resource fault asks of a handle.
type ResourceNeed struct {
	// Name names groups the backend makes for this application, unique in
	// the run.
	Name string
	// Made is told each group directory before the backend creates it,
	// so chaos cleanup can release it after a crash.
	Made func(cgroup.OwnDir) error
}

// Resources are where a handle's processes are accounted and its files
// are, as the host sees them now.
type Resources struct {
	// What says what it is, for the timeline: "instance db-0 (pid 812)",
	// "container 3f2a1b0c9d8e".
	What string
	// Pid is a process of it (the container's first one).
	Pid int
	// Root is the directory through which the host sees the handle's file
	// system: "/" for a process of this machine, /proc/<pid>/root for a
	// container.
	Root string
	// Place is its cgroup directory per controller.
	Place cgroup.Place
	// Release undoes what Resources made for the fault (groups of its own
	// for a handle that shares the harness's), once the fault is
	// reverted; nil when it made nothing.
	Release func(ctx context.Context) error
}
