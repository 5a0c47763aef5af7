// Package backend is the small interface between the run engine and what an
// instance is on one system: a local process, a container, a pod, or
// whatever an adapter's hooks make. The engine composes the built-in faults
// from these primitives, so every backend gets the same semantics.
package backend

import (
	"context"
	"errors"
	"time"
)

// State is an instance state, as the timeline records it.
type State string

// Instance states.
const (
	Created   State = "Created"
	Pending   State = "Pending"
	Running   State = "Running"
	Succeeded State = "Succeeded"
	Failed    State = "Failed"
	Unknown   State = "Unknown"
)

// Terminal reports whether an instance in state s has ended.
func (s State) Terminal() bool { return s == Succeeded || s == Failed }

// ParseState reads a state name as a state hook prints it.
func ParseState(s string) (State, bool) {
	switch State(s) {
	case Created, Pending, Running, Succeeded, Failed, Unknown:
		return State(s), true
	}
	return Unknown, false
}

// ErrUnsupported is returned by an instance that cannot do a primitive;
// binding makes such experiments n/a before they run.
var ErrUnsupported = errors.New("not supported by this backend")

// InstanceSpec is everything a backend needs to create one instance.
type InstanceSpec struct {
	Workload string
	Name     string
	Index    int
	// Dir is the instance's directory in the run directory; OutputDir and
	// LogDir are inside it. Collect must leave the instance's output in
	// OutputDir.
	Dir, OutputDir, LogDir string
	// Wrapper runs Script, records attempts and the exit code.
	Wrapper, Script string
	// Env is the instance's full environment.
	Env   []string
	Image string
	// OnState is called the moment the instance changes state.
	OnState func(state State, reason string)
}

// Restart says how an instance is stopped and started again in place.
type Restart struct {
	// Graceful sends SIGTERM (or the backend's equivalent) and waits up to
	// Grace before killing; otherwise the instance is killed at once.
	Graceful bool
	Grace    time.Duration
	// Hold keeps the instance down this long before it starts again.
	Hold time.Duration
}

// Instance is one running instance.
type Instance interface {
	// SystemID is what the system calls the instance (a pid, a container id).
	SystemID() string
	// Done is closed once the instance has ended for good (Succeeded or
	// Failed), not while it is being restarted.
	Done() <-chan struct{}
	// Kill ends the instance at once; it ends Failed.
	Kill(ctx context.Context) error
	// Restart stops the instance and starts it again with the same output.
	// The instance is Pending while it is down.
	Restart(ctx context.Context, r Restart) error
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
	// Collect leaves the instance's output in its OutputDir.
	Collect(ctx context.Context) error
	// Delete stops the instance if it still runs and removes it.
	Delete(ctx context.Context) error
}

// Backend creates instances.
type Backend interface {
	Create(ctx context.Context, spec InstanceSpec) (Instance, error)
	// Capture writes what this backend knows of the system at the end of the
	// run into the run's system directory, for adapter checks to read.
	Capture(ctx context.Context, systemDir string) error
	Close() error
}

// WrapperScript runs a workload's script inside an instance. It appends one
// line to .chaos/attempts every time it starts and writes the script's exit
// code to .chaos/exit_code only when the script ends by itself, so a killed
// instance has no exit code recorded. It is POSIX sh so it runs under
// busybox too.
const WrapperScript = `#!/bin/sh
# Written by chaos: runs the workload's script in the instance's output
# directory and records each start and the script's exit code.
out="${CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR:?}"
mkdir -p "$out/.chaos"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) start" >> "$out/.chaos/attempts"
rm -f "$out/.chaos/exit_code"
cd "$out" || exit 125
/bin/sh "${CHAOS_RUN_SCRIPT:?}"
code=$?
echo "$code" > "$out/.chaos/exit_code.tmp" && mv "$out/.chaos/exit_code.tmp" "$out/.chaos/exit_code"
exit "$code"
`

// OutputSizer is an instance that can tell the size of a file in its output
// while it runs, so stall checks can watch it; instances whose output lives
// on this machine need not implement it.
type OutputSizer interface {
	OutputSize(ctx context.Context, rel string) (int64, error)
}
