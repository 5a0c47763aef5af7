package backend

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// On says what a fault acts on: a workload's instances, a named target, or
// a role inside each instance.
type On string

// What faults act on.
const (
	OnInstances On = "instances"
	OnTarget    On = "target"
	OnRole      On = "role"
)

// Registration is one backend: its name (an adapter's backend field), what
// it can do, and how to open it for a run. Everything but Name and Open is
// optional.
type Registration struct {
	Name string
	// Doc is one line for chaos adapters and the docs.
	Doc string
	// Instances is the kind of a native instance; "" when the backend makes
	// no instances itself.
	Instances Kind
	// Targets and Roles are the kinds of named targets and of roles inside
	// instances the backend can act on for an adapter that names it.
	Targets, Roles []Kind
	// Shared are kinds of named targets it acts on for an adapter of any
	// backend: processes on this machine.
	Shared []Kind
	// Support returns why fault cannot be applied on a thing of kind (""
	// for instances of a backend without native instances), or "" when it
	// can. Nil supports every fault on every kind it lists.
	Support func(a *adapter.Adapter, on On, kind Kind, fault string) string
	// TargetSupport returns why fault cannot be applied to the named
	// target t (of a kind the backend acts on), or "" when it can: what
	// depends on the target itself (an external process runs in the
	// host's network namespace). Nil leaves it to Support.
	TargetSupport func(a *adapter.Adapter, name string, t *adapter.Target, fault string) string
	// FSLayer says the harness can put its file-system layer between what
	// the backend runs and a directory of it; without it the file-system
	// faults are n/a.
	FSLayer bool
	// Claims reports whether the backend makes a's instances whatever a's
	// backend field says (instance hooks make them, on any backend).
	Claims func(a *adapter.Adapter) bool
	// TimeNamespaces says its instances can start in a time namespace of
	// their own (InstanceSpec.TimeOffsets, a workload's clock).
	TimeNamespaces bool
	// Always opens the backend in every run, for the processes the harness
	// itself starts on this machine (hooks, watchers): its captures and
	// sweeps see them.
	Always bool
	// Open opens the backend for one run. An unreachable system is not an
	// error here: the backend's preflight checks report it.
	Open func(ctx context.Context, run *Run) (Backend, error)
	// Cleanup removes what an interrupted run left behind (chaos cleanup).
	Cleanup func(ctx context.Context, c Cleanup) error
	// BuildImage builds the backend's default instance image with no
	// registry (chaos build-image), saying what it did on out.
	BuildImage func(ctx context.Context, out io.Writer) error
	// Check says what the backend needs of an adapter that names it,
	// reported when the adapter is parsed.
	Check func(a *adapter.Adapter) []adapter.BackendProblem
	// Adapters are built-in adapters the backend brings: file name to
	// manifest.
	Adapters map[string][]byte
	// Cost is what one running instance costs this machine, for the check
	// that refuses a run it cannot take; nil is a local process's cost
	// (LocalCost).
	Cost *Cost
}

// Cost is what one running instance of a backend costs this machine.
type Cost struct {
	// Tasks are its processes and threads on this machine, counted against
	// the machine's limits (pid_max, threads-max).
	Tasks int
	// OwnTasks are those of Tasks the harness's own limits count too: its
	// user's RLIMIT_NPROC and the pids cgroups it is in (the processes it
	// starts, and its own threads).
	OwnTasks int
	// FDs are the files the harness holds open for it.
	FDs int
	// BaseFDs are the files the backend holds open however many instances
	// there are: its connections and the most streams it opens at once.
	BaseFDs int
}

// LocalCost is one instance that is processes the harness starts: the
// wrapper shell, the workload's script shell and at least one command it
// runs, and a harness thread while it waits in a system call; the pidfd
// os/exec holds until the process is waited for and, while a fault waits
// on it, its cgroup.events, an eventfd and a signal's pidfd. (200 instances
// of sleep, frozen and restarted together, held at most 415 open files of
// the harness and 18 of its threads.)
var LocalCost = Cost{Tasks: 4, OwnTasks: 4, FDs: 4}

// InstanceCost is what one instance of r costs this machine.
func (r Registration) InstanceCost() Cost {
	if r.Cost == nil {
		return LocalCost
	}
	return *r.Cost
}

// Cleanup is what chaos cleanup asks of a backend.
type Cleanup struct {
	// RunID names the run whose leftovers go; "" means those of every run
	// whose harness is gone.
	RunID string
	// DryRun says what would go and removes nothing.
	DryRun bool
	// Env is the harness's environment.
	Env []string
	// Found is called once per thing removed (or that would be).
	Found func(what string)
}

var (
	mu   sync.RWMutex
	regs = map[string]Registration{}
)

// Register adds a backend; a backend package calls it from init. Its
// built-in adapters become resolvable by id.
func Register(r Registration) {
	if r.Name == "" || r.Open == nil {
		panic("backend.Register: a backend needs a name and Open")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := regs[r.Name]; dup {
		panic("backend.Register: " + r.Name + " registered twice")
	}
	regs[r.Name] = r
	for file, data := range r.Adapters {
		adapter.RegisterBuiltin(file, data)
	}
}

// Lookup returns the backend registered under name.
func Lookup(name string) (Registration, bool) {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := regs[name]
	return r, ok
}

// All returns every registered backend, by name.
func All() []Registration {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Registration, 0, len(regs))
	for _, n := range slices.Sorted(maps.Keys(regs)) {
		out = append(out, regs[n])
	}
	return out
}

// Names lists the registered backends.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(regs))
}

// ForInstances returns the backend that makes a's instances: one that
// claims the adapter (instance hooks), else the one a names.
func ForInstances(a *adapter.Adapter) (Registration, error) {
	for _, r := range All() {
		if r.Claims != nil && r.Claims(a) {
			return r, nil
		}
	}
	if r, ok := Lookup(a.Backend); ok {
		return r, nil
	}
	return Registration{}, fmt.Errorf("this build has no %s backend (it has %v)", a.Backend, Names())
}

// ForKind returns the backend that acts on a's targets (on = OnTarget) or
// roles (OnRole) of kind k: the one a names when it can, else, for
// targets, one that acts on that kind for any adapter. Roles live inside
// instances, so only a's own backend has them.
func ForKind(a *adapter.Adapter, on On, k Kind) (Registration, bool) {
	if r, ok := Lookup(a.Backend); ok {
		kinds := r.Targets
		if on == OnRole {
			kinds = r.Roles
		}
		if slices.Contains(kinds, k) {
			return r, true
		}
	}
	if on == OnRole {
		return Registration{}, false
	}
	for _, r := range All() {
		if slices.Contains(r.Shared, k) {
			return r, true
		}
	}
	return Registration{}, false
}

// Supports returns why fault cannot be applied to what on names (of kind k)
// on backend r with adapter a, or "" when it can.
func (r Registration) Supports(a *adapter.Adapter, on On, k Kind, fault string) string {
	if experiment.IsFSFault(fault) && !r.FSLayer {
		return fmt.Sprintf("the file-system layer is not built for the %s backend yet (it works on processes of this machine)", r.Name)
	}
	if r.Support == nil {
		return ""
	}
	return r.Support(a, on, k, fault)
}

// SupportsTarget returns why fault cannot be applied to the named target t
// on backend r with adapter a, or "" when it can: Support for its kind,
// then TargetSupport for the target itself.
func (r Registration) SupportsTarget(a *adapter.Adapter, name string, t *adapter.Target, fault string) string {
	if why := r.Supports(a, OnTarget, Kind(t.Type), fault); why != "" {
		return why
	}
	if r.TargetSupport == nil {
		return ""
	}
	return r.TargetSupport(a, name, t, fault)
}

// CheckAdapter reports, with positions in a's file, what is wrong with a
// for this build: a backend it does not have, or what the backend a names
// needs of an adapter. Parsing an adapter does not check this, so a run
// directory's adapter reads on any build; binding an experiment to an
// adapter does.
func CheckAdapter(a *adapter.Adapter) manifest.Problems {
	if a.Backend == "" {
		return nil
	}
	d := &manifest.Decoder{File: a.File, Positions: a.Positions}
	r, ok := Lookup(a.Backend)
	switch {
	case !ok:
		d.Problem("backend", "unknown backend %q; this build has %s%s", a.Backend, strings.Join(Names(), ", "), manifest.DidYouMean(a.Backend, Names()))
	case r.Check != nil:
		for _, p := range r.Check(a) {
			d.Problem(p.Field, "%s", p.Msg)
		}
	}
	return d.Problems
}
