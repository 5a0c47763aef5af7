// Package backend is the seam between the run engine and the systems a run
// touches. A backend is one package that registers itself here (see
// registry.go): it makes instances (a local process, a container, a pod) and
// acts on named targets and roles of the kinds it knows. Everything a fault
// acts on is a Handle with the same few primitives, so each built-in fault
// is written once (package fault) and means the same on every backend.
//
// The engine imports only this package: optional parts of a backend
// (preflight checks, end-of-run captures, leak sweeps, targets, roles,
// facts for manifest.json) are small interfaces found by type assertion.
package backend

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/redact"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
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

// ErrUnsupported is returned by a handle that cannot do a primitive;
// binding makes experiments that would need it n/a before they run.
var ErrUnsupported = errors.New("not supported by this backend")

// ErrGone is returned by Up on a handle that no longer exists: a role
// removed with its instance. A kill's revert takes it as nothing left to
// bring back.
var ErrGone = errors.New("it no longer exists")

// ErrEnded is returned by an instance's Kill when the instance had ended
// by itself before the kill reached it: a fault that selected it did not
// act on it. Callers that only want it ended (a timeout, cleanup) ignore
// it.
var ErrEnded = errors.New("it had ended by itself before the kill reached it")

// Kind is what a handle is on its system: the type of an adapter's
// targets and roles.
type Kind string

// Kinds of handles; they are the adapter manifest's target types.
const (
	Process   Kind = adapter.TypeProcess
	Container Kind = adapter.TypeContainer
	Pod       Kind = adapter.TypePod
)

// Down says how a handle is taken down.
type Down struct {
	// Grace > 0 stops it gracefully: SIGTERM (or the backend's
	// equivalent), then a kill once Grace has passed. Zero kills at once.
	Grace time.Duration
	// Reason is the reason of the Pending state an instance shows while it
	// is down (Restarting, Outage, CrashLoop).
	Reason string
	// Hold says the caller keeps it down until Up (an outage): a backend
	// whose system brings things back by itself (a controller replacing a
	// pod) must stop that until Up.
	Hold bool
	// InPlace keeps the thing itself (the same pod) and restarts what runs
	// in it (restart-in-place); without it a backend may replace the thing
	// (a pod deleted and replaced by its controller). Processes and
	// containers are always restarted in place.
	InPlace bool
}

// Handle is anything a fault acts on: an instance, a role inside one (a
// sidecar container), a named target (a process, containers, pods). Every
// primitive returns once its effect holds, and is bounded by ctx.
type Handle interface {
	// Name is what the timeline calls it: an instance or target name, or
	// instance/role.
	Name() string
	// ID is what its system calls it now: a pid, a container id, a pod.
	ID() string
	// Down takes it down and returns once nothing of it is left running.
	Down(ctx context.Context, d Down) error
	// Up starts it again in place after Down (same output, same container,
	// a replacement pod) and returns once it has started.
	Up(ctx context.Context) error
	// Ready returns once it is ready after Up: healthy where the backend
	// or adapter can tell, else running.
	Ready(ctx context.Context) error
	// Freeze stops it in place without ending it; Thaw resumes it.
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
}

// Instance is one instance of a workload.
type Instance interface {
	Handle
	// Done is closed once the instance has ended for good (Succeeded or
	// Failed, or deleted), never while it is down for a restart.
	Done() <-chan struct{}
	// Kill ends the instance at once, also while it is down; it ends
	// Failed and is not started again. A backend that can tell returns
	// ErrEnded when the instance ended by itself before the kill reached
	// it.
	Kill(ctx context.Context) error
	// Collect leaves the instance's output in its OutputDir.
	Collect(ctx context.Context) error
	// Delete stops the instance if it still runs, removes it and closes
	// Done.
	Delete(ctx context.Context) error
}

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
	// TimeOffsets, when set, start the instance in a time namespace of its
	// own with these offsets; a backend that cannot refuses to create it.
	TimeOffsets *TimeOffsets
	// OnState is called the moment the instance changes state.
	OnState func(state State, reason string)
}

// Backend is one opened backend: it makes the run's instances, when it is
// the adapter's instance maker.
type Backend interface {
	Create(ctx context.Context, spec InstanceSpec) (Instance, error)
	// Close releases what the backend holds (connections, streams); it is
	// called once, after cleanup.
	Close() error
}

// Run is what a backend is opened with: the run it serves.
type Run struct {
	ID         string
	Dir        *rundir.Dir
	Start      time.Time
	Adapter    *adapter.Adapter
	Experiment *experiment.Experiment
	// Env is the run's base environment, the one hooks get.
	Env []string
	// HostEnv is the harness's own environment.
	HostEnv []string
	// HookDir is where hooks run.
	HookDir     string
	HookTimeout time.Duration
	// Sup supervises every process the run starts on this machine; Runner
	// runs shell hooks under it.
	Sup    *proc.Supervisor
	Runner shell.Runner
	Redact *redact.Redactor
	// Record writes a timeline event; Errorf records a harness error (the
	// verdict becomes ERROR); Logf writes a harness log line.
	Record func(name string, fields ...rundir.Field)
	Errorf func(format string, args ...any)
	Logf   func(format string, args ...any)
	// Expand replaces $VARS from Env.
	Expand func(string) string
}

// HostPath expands $VARS in p from the run's environment and makes a
// relative path relative to the directory hooks run in.
func (r *Run) HostPath(p string) string {
	p = r.Expand(p)
	if p != "" && p[0] != '/' {
		p = r.HookDir + "/" + p
	}
	return p
}

// Check is the outcome of one of a backend's own preflight checks.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Preflighter is a backend with preflight checks of its own, run before
// the adapter's: the engine is reachable, images are there.
type Preflighter interface {
	Preflight(ctx context.Context) []Check
}

// Capturer writes what the backend knows of the system at the end of the
// run into the run's system directory, for adapter checks to read. It runs
// after run-owned targets were stopped.
type Capturer interface {
	Capture(ctx context.Context, systemDir string) error
}

// Sweeper removes whatever of the run is still there once instances and
// targets are gone, before the checks; what it cannot remove is an error.
type Sweeper interface {
	Sweep(ctx context.Context) error
}

// EnvProvider is a backend that adds variables to the environment of every
// hook, watcher and instance of the run (the namespace it made, say). They
// are read once, right after the backend is opened.
type EnvProvider interface {
	Env() []string
}

// Describer gives facts about the backend for manifest.json: versions, and
// the digest of every image the run used.
type Describer interface {
	Describe() (facts map[string]string, images map[string]string)
}

// Target is one named target of the adapter.
type Target interface {
	// Handles are what the target is now: one process, or every container
	// or pod of the run that matches it.
	Handles(ctx context.Context) ([]Handle, error)
	// Start starts a target the run owns, before the flow, and returns
	// once it is ready; Stop stops it after the flow.
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// TargetOpener is a backend that acts on named targets of its kinds.
type TargetOpener interface {
	OpenTarget(ctx context.Context, name string, spec *adapter.Target) (Target, error)
}

// RoleFinder is a backend whose instances have roles: parts of each
// instance (sidecar containers, containers of a pod) faults can act on.
type RoleFinder interface {
	Roles(ctx context.Context, instance, role string) ([]Handle, error)
}

// OutputSizer is an instance that can tell the size of a file in its output
// while it runs, so stall checks can watch it; instances whose output lives
// on this machine need not implement it.
type OutputSizer interface {
	OutputSize(ctx context.Context, rel string) (int64, error)
}

// WrapperScript runs a workload's script inside an instance. It appends one
// line to .chaos/attempts every time it starts and writes the script's exit
// code to .chaos/exit_code only when the script ends by itself, so a killed
// instance has no exit code recorded (or, killed while writing it, an
// empty one, which readers take for none). A SIGTERM the instance gets
// while the script runs is deferred until the script has ended: the script
// handles it (its trap runs to the end; where the wrapper is a container's
// main process, the runtime would kill the script the moment the wrapper
// died), and the wrapper then ends by it, recording no exit code. It is
// POSIX sh so it runs under busybox too. It forks only to run the script where it can: a backend
// that starts it passes the start time as $1 and makes .chaos first, since
// a fork is most of what starting a short instance costs.
const WrapperScript = `#!/bin/sh
# Written by chaos: runs the workload's script in the instance's output
# directory and records each start and the script's exit code.
out="${CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR:?}"
[ -d "$out/.chaos" ] || mkdir -p "$out/.chaos"
echo "${1:-$(date -u +%Y-%m-%dT%H:%M:%SZ)} start" >> "$out/.chaos/attempts"
[ ! -e "$out/.chaos/exit_code" ] || rm -f "$out/.chaos/exit_code"
cd "$out" || exit 125
# A SIGTERM to the instance is the script's to handle: the wrapper waits for
# the script (a container ends with its first process), then ends by it too.
chaos_termed=
trap 'chaos_termed=1' TERM
/bin/sh "${CHAOS_RUN_SCRIPT:?}"
code=$?
if [ -n "$chaos_termed" ]; then trap - TERM; kill -TERM $$; exit 143; fi
echo "$code" > "$out/.chaos/exit_code"
exit "$code"
`

// Sleep waits d, or until ctx ends, then returning its cause.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// ContainerEnv is an instance's environment as a container or pod gets it:
// without what only describes the harness machine (variables whose value is
// the harness's own, CHAOS_* aside), with override set last, in key order.
func ContainerEnv(env, host []string, override map[string]string) []string {
	hostVals := map[string]string{}
	for _, kv := range host {
		k, v, _ := strings.Cut(kv, "=")
		hostVals[k] = v
	}
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := override[k]; ok {
			continue
		}
		if hv, ok := hostVals[k]; ok && hv == v && !strings.HasPrefix(k, "CHAOS_") {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(override)) {
		out = append(out, k+"="+override[k])
	}
	return out
}
