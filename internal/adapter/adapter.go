// Package adapter holds the adapter manifest: the file that binds the harness
// to one system on one backend. It also carries the adapters built into the
// binary.
package adapter

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// Duration is re-exported so callers need not import package manifest.
type Duration = manifest.Duration

// BackendProblem is something a backend needs of an adapter that names it
// and that the adapter lacks: the field, and what is wrong.
type BackendProblem struct{ Field, Msg string }

// Target types.
const (
	TypeProcess   = "process"
	TypeContainer = "container"
	TypePod       = "pod"
)

// Adapter is one adapter manifest.
type Adapter struct {
	Pos         manifest.Pos        `yaml:"-" json:"-"`
	APIVersion  string              `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=chaos/v1alpha1"`
	ID          string              `yaml:"id" json:"id"`
	Title       string              `yaml:"title" json:"title,omitempty"`
	Description string              `yaml:"description" json:"description,omitempty"`
	Backend     string              `yaml:"backend" json:"backend" jsonschema_description:"The backend: chaos adapters lists those this build has."`
	Env         map[string]string   `yaml:"env" json:"env,omitempty" jsonschema_description:"Variables given to every hook."`
	Secrets     *experiment.Secrets `yaml:"secrets" json:"secrets,omitempty"`
	// HookTimeout bounds every hook that sets no timeout of its own.
	HookTimeout Duration `yaml:"hook-timeout" json:"hook-timeout,omitempty" jsonschema_description:"Limit for hooks that set none of their own (default 60s)."`
	// Settle is the wait between the end of the flow and the adapter checks.
	Settle      Duration              `yaml:"settle" json:"settle,omitempty" jsonschema_description:"Wait between the end of the flow and the adapter checks (default 0s)."`
	Instance    *Instance             `yaml:"instance" json:"instance,omitempty"`
	Targets     Targets               `yaml:"targets" json:"targets,omitempty"`
	Roles       map[string]*Role      `yaml:"roles" json:"roles,omitempty"`
	Operations  map[string]*Operation `yaml:"operations" json:"operations,omitempty"`
	Metrics     []Metrics             `yaml:"metrics" json:"metrics,omitempty"`
	Watch       []Watcher             `yaml:"watch" json:"watch,omitempty"`
	Signals     map[string]*Signal    `yaml:"signals" json:"signals,omitempty"`
	OTLP        *OTLP                 `yaml:"otlp" json:"otlp,omitempty"`
	Limits      *Limits               `yaml:"limits" json:"limits,omitempty"`
	Preflight   []experiment.Step     `yaml:"preflight" json:"preflight,omitempty"`
	Checks      []experiment.Step     `yaml:"checks" json:"checks,omitempty"`
	Provision   string                `yaml:"provision" json:"provision,omitempty" jsonschema_description:"Hook run by chaos provision to create the system; chaos run never provisions."`
	Deprovision string                `yaml:"deprovision" json:"deprovision,omitempty"`
	Unsupported map[string]string     `yaml:"unsupported" json:"unsupported,omitempty" jsonschema_description:"Faults this adapter cannot provide on instances, with the reason; experiments that use them are n/a."`
	// Options are settings of the backend the adapter names; each backend
	// documents its own keys and rejects others when binding.
	Options map[string]string `yaml:"options" json:"options,omitempty" jsonschema_description:"Settings of the backend: keys and values it documents (the kubernetes backend: namespace, restart-policy, ...)."`
	// Ports name the loopback ports the system needs: each run gets a free
	// one per name, as $CHAOS_PORT_<NAME>, so runs never collide.
	Ports []string `yaml:"ports" json:"ports,omitempty" jsonschema_description:"Names of loopback ports the system listens on; each run gets a free port per name as $CHAOS_PORT_<NAME> (client gives $CHAOS_PORT_CLIENT)."`
	// Locks name fixed resources the system needs (a fixed port, a shared
	// directory): concurrent runs that declare the same lock wait for it.
	Locks []string `yaml:"locks" json:"locks,omitempty" jsonschema_description:"Fixed resources only one run on this machine may use at a time; a run waits for a lock another run holds."`
	// LockTimeout bounds the wait for locks.
	LockTimeout Duration `yaml:"lock-timeout" json:"lock-timeout,omitempty" jsonschema_description:"How long a run waits for its locks before it gives up with ERROR (default 10m)."`

	File      string                  `yaml:"-" json:"-"`
	SHA256    string                  `yaml:"-" json:"-"`
	Raw       []byte                  `yaml:"-" json:"-"`
	Builtin   bool                    `yaml:"-" json:"-"`
	Positions map[string]manifest.Pos `yaml:"-" json:"-"`
}

// Instance says how instances are created, read, collected and deleted when
// the backend's native way is not wanted. Every hook is a shell script.
type Instance struct {
	Pos     manifest.Pos `yaml:"-" json:"-"`
	Create  string       `yaml:"create" json:"create,omitempty" jsonschema_description:"Creates and starts one instance running $CHAOS_WRAPPER; its last line of output is the instance's system id."`
	State   string       `yaml:"state" json:"state,omitempty" jsonschema_description:"Prints the instance's state: Created, Pending, Running, Succeeded, Failed or Unknown, optionally followed by a reason."`
	Collect string       `yaml:"collect" json:"collect,omitempty" jsonschema_description:"Copies the instance's output into $CHAOS_COLLECT_DIR."`
	Delete  string       `yaml:"delete" json:"delete,omitempty"`
	// PollInterval is how often the state hook is asked.
	PollInterval Duration `yaml:"poll-interval" json:"poll-interval,omitempty" jsonschema_description:"How often the state hook runs (default 1s)."`
	Timeout      Duration `yaml:"timeout" json:"timeout,omitempty" jsonschema_description:"Limit for each instance hook."`
	Image        string   `yaml:"image" json:"image,omitempty"`
	// Faults lists the built-in faults instances support; unset means the
	// backend's own set.
	Faults []string `yaml:"faults" json:"faults,omitempty"`
}

// HasHooks reports whether instances are handled through hooks.
func (i *Instance) HasHooks() bool { return i != nil && i.Create != "" }

// Target is a named part of the system that faults can act on.
type Target struct {
	Pos           manifest.Pos `yaml:"-" json:"-"`
	Type          string       `yaml:"type" json:"type" jsonschema:"enum=process,enum=container,enum=pod"`
	Description   string       `yaml:"description" json:"description,omitempty"`
	PidFile       string       `yaml:"pid-file" json:"pid-file,omitempty" jsonschema_description:"process: a file holding the target's pid."`
	Start         string       `yaml:"start" json:"start,omitempty" jsonschema_description:"Hook that starts the target (and writes its pid file)."`
	Stop          string       `yaml:"stop" json:"stop,omitempty" jsonschema_description:"Hook that stops the target when the run owns it (default SIGTERM to its pid)."`
	Health        string       `yaml:"health" json:"health,omitempty" jsonschema_description:"Hook that exits 0 when the target is healthy."`
	HealthTimeout Duration     `yaml:"health-timeout" json:"health-timeout,omitempty" jsonschema_description:"How long to wait for health after a start (default 120s)."`
	// Listen is where a process target serves: it is ready only once the
	// socket listening there belongs to the process the run started.
	Listen string `yaml:"listen" json:"listen,omitempty" jsonschema_description:"process: the port (or host:port) the target listens on, $VARS expanded (e.g. $CHAOS_PORT_SERVER); it is ready only when that listening socket is its own."`
	// Lifecycle says who runs the target: external (it must already be up)
	// or run (the harness starts it before the flow and stops it after).
	Lifecycle string            `yaml:"lifecycle" json:"lifecycle,omitempty" jsonschema:"enum=external,enum=run,default=external"`
	Labels    map[string]string `yaml:"labels" json:"labels,omitempty"`
	Container string            `yaml:"container" json:"container,omitempty"`
	Log       string            `yaml:"log" json:"log,omitempty" jsonschema_description:"A file the target writes its log to; copied to logs/<target>.log."`
	Faults    []string          `yaml:"faults" json:"faults,omitempty" jsonschema_description:"The built-in faults this target supports; unset means every fault its type supports."`
}

// Role is a part of each instance that faults can act on, e.g. a sidecar.
type Role struct {
	Pos         manifest.Pos      `yaml:"-" json:"-"`
	Type        string            `yaml:"type" json:"type" jsonschema:"enum=process,enum=container,enum=pod"`
	Description string            `yaml:"description" json:"description,omitempty"`
	Labels      map[string]string `yaml:"labels" json:"labels,omitempty"`
	// Image and Run make the role a sidecar the backend starts beside each
	// instance; without them the role is found by its labels.
	Image  string   `yaml:"image" json:"image,omitempty" jsonschema_description:"docker: start a sidecar container of this image beside each instance (default: the instance's image when run is set)."`
	Run    string   `yaml:"run" json:"run,omitempty" jsonschema_description:"docker: the sidecar's shell script (/bin/sh -c)."`
	Faults []string `yaml:"faults" json:"faults,omitempty"`
}

// Operation is an adapter's own operation: a hook that makes a change and
// usually one that undoes it.
type Operation struct {
	Pos         manifest.Pos `yaml:"-" json:"-"`
	Description string       `yaml:"description" json:"description,omitempty"`
	Run         string       `yaml:"run" json:"run"`
	Revert      string       `yaml:"revert" json:"revert,omitempty"`
	Timeout     Duration     `yaml:"timeout" json:"timeout,omitempty"`
	// Params lists the parameters the operation takes; an experiment's with
	// must give every one without a default.
	Params map[string]*Param `yaml:"params" json:"params,omitempty"`
}

// Param is one parameter of an adapter operation.
type Param struct {
	Description string  `yaml:"description" json:"description,omitempty"`
	Default     *string `yaml:"default" json:"default,omitempty"`
}

// Metrics is a Prometheus endpoint to scrape during the run.
type Metrics struct {
	Pos      manifest.Pos `yaml:"-" json:"-"`
	Name     string       `yaml:"name" json:"name"`
	URL      string       `yaml:"url" json:"url"`
	Interval Duration     `yaml:"interval" json:"interval,omitempty" jsonschema_description:"Time between scrapes (default 2s)."`
}

// Watcher is a command whose every output line is timestamped and saved.
type Watcher struct {
	Pos  manifest.Pos `yaml:"-" json:"-"`
	Name string       `yaml:"name" json:"name"`
	Run  string       `yaml:"run" json:"run"`
}

// Limits is the resource budget of the system the adapter drives: an
// experiment whose flow would exceed it is refused before anything runs.
type Limits struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// Instances is the most instances that may run at once.
	Instances int `yaml:"instances" json:"instances,omitempty" jsonschema:"minimum=1" jsonschema_description:"The most instances that may run at once; an experiment whose flow could run more is refused."`
	// Parallel is the most runs on this adapter that one campaign may
	// have under way at once (chaos run --parallel); 0 means no limit.
	Parallel int `yaml:"parallel" json:"parallel,omitempty" jsonschema:"minimum=1" jsonschema_description:"The most runs on this adapter a campaign may have under way at once (chaos run --parallel); a larger --parallel is refused. 1 for a system that cannot be shared."`
}

// OTLPWatch is the watcher name of the built-in OTLP receiver: its spans
// are the lines of system/watch/otel.jsonl.
const OTLPWatch = "otel"

// OTLP turns on the built-in OpenTelemetry trace receiver for the run. Its
// addresses reach hooks and instances as OTEL_EXPORTER_OTLP_* variables.
type OTLP struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// GRPC and HTTP are loopback listen addresses; port 0 picks a free one.
	GRPC string `yaml:"grpc" json:"grpc,omitempty" jsonschema_description:"Listen address for OTLP over gRPC (default 127.0.0.1:0, a free port); off disables it."`
	HTTP string `yaml:"http" json:"http,omitempty" jsonschema_description:"Listen address for OTLP over HTTP (default 127.0.0.1:0, a free port); off disables it."`
}

// Signal is a named pattern on a watcher's lines that a flow can wait for.
// On the otel watcher it may match spans by name and attributes instead.
type Signal struct {
	Pos         manifest.Pos `yaml:"-" json:"-"`
	Description string       `yaml:"description" json:"description,omitempty"`
	Watch       string       `yaml:"watch" json:"watch,omitempty"`
	Pattern     string       `yaml:"pattern" json:"pattern,omitempty"`
	// Span and Attributes match spans of the otel watcher: the span's name
	// (or /regex/) and attribute values compared as text.
	Span       string            `yaml:"span" json:"span,omitempty" jsonschema_description:"otel watcher: the span name, or /regex/."`
	Attributes map[string]string `yaml:"attributes" json:"attributes,omitempty" jsonschema_description:"otel watcher: attributes the span must have, compared as text."`
	// Unavailable declares a signal this adapter's system cannot give, with
	// the reason; an experiment that waits on it is n/a here.
	Unavailable string `yaml:"unavailable" json:"unavailable,omitempty"`
}

// Targets maps target names to targets. The key roles is also accepted here
// and holds roles, as the seeds' adapter writes it; Parse moves them to
// Adapter.Roles.
type Targets struct {
	Named map[string]*Target
	Roles map[string]*Role
}

// UnmarshalNode implements manifest.Unmarshaler.
func (t *Targets) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		// targets: with nothing after it, like any other empty mapping.
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "expected a mapping of target names to targets, got %s", manifest.Describe(n))
		return
	}
	t.Named = map[string]*Target{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		child := manifest.Join(path, k.Value)
		if k.Value == "roles" {
			d.Decode(v, child, reflect.ValueOf(&t.Roles).Elem())
			continue
		}
		if _, dup := t.Named[k.Value]; dup {
			d.Errorf(k, child, "duplicate target %q", k.Value)
			continue
		}
		tg := &Target{}
		d.Decode(v, child, reflect.ValueOf(tg).Elem())
		t.Named[k.Value] = tg
	}
}

// PortEnv is the environment variable that carries the run's port of that
// name: CHAOS_PORT_ and the name in capitals, dashes as underscores.
func PortEnv(name string) string {
	return "CHAOS_PORT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ExpandPorts replaces each $CHAOS_PORT_<NAME> (or ${CHAOS_PORT_<NAME>}) in
// s with the run's port from env (its NAME=value entries, later ones
// winning); references to ports env does not have are left as they are.
func ExpandPorts(s string, env []string) string {
	if !strings.Contains(s, "CHAOS_PORT_") {
		return s
	}
	return portRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := portRef.FindStringSubmatch(ref)[1]
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v
			}
		}
		return ref
	})
}

// Target returns the named target or nil.
func (a *Adapter) Target(name string) *Target { return a.Targets.Named[name] }

// TargetNames returns the target names in order.
func (a *Adapter) TargetNames() []string { return slices.Sorted(maps.Keys(a.Targets.Named)) }
