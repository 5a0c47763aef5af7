// Package experiment holds the experiment manifest: its Go model, how it is
// parsed from YAML and how it is checked on its own. Checks that need an
// adapter live in package binding.
package experiment

import (
	units "github.com/docker/go-units"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// APIVersion is the only manifest version this harness reads.
const APIVersion = "chaos/v1alpha1"

// Duration is re-exported so callers need not import package manifest.
type Duration = manifest.Duration

// Experiment is one experiment manifest.
type Experiment struct {
	Pos            manifest.Pos      `yaml:"-" json:"-"`
	APIVersion     string            `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=chaos/v1alpha1"`
	ID             string            `yaml:"id" json:"id" jsonschema_description:"Identifier: lower-case letters, digits and dashes; names the run directory."`
	Version        int               `yaml:"version" json:"version,omitempty" jsonschema_description:"Version of the experiment; chaos list prints id (vN)."`
	Title          string            `yaml:"title" json:"title,omitempty"`
	Hypothesis     string            `yaml:"hypothesis" json:"hypothesis,omitempty"`
	Description    string            `yaml:"description" json:"description,omitempty"`
	DefaultAdapter string            `yaml:"default-adapter" json:"default-adapter,omitempty"`
	Timeout        Duration          `yaml:"timeout" json:"timeout,omitempty" jsonschema_description:"Limit for the whole flow; past it running work is stopped and the run ends in ERROR."`
	Env            map[string]string `yaml:"env" json:"env,omitempty" jsonschema_description:"Variables given to every workload script, check and operation hook."`
	Secrets        *Secrets          `yaml:"secrets" json:"secrets,omitempty"`
	Workloads      []Workload        `yaml:"workloads" json:"workloads,omitempty"`
	Operations     []Operation       `yaml:"operations" json:"operations,omitempty"`
	Flow           *FlowNode         `yaml:"flow" json:"flow,omitempty"`
	Checks         []Check           `yaml:"checks" json:"checks,omitempty"`
	Expectations   []Expectation     `yaml:"expectations" json:"expectations,omitempty"`
	Metrics        []string          `yaml:"metrics" json:"metrics,omitempty" jsonschema_description:"Metric families this experiment is about: drawn first in reports and the only ones on the dashboard."`
	Preflight      []Step            `yaml:"preflight" json:"preflight,omitempty"`
	// Matrix and MatrixCell: matrix.go.
	Matrix     *Matrix `yaml:"matrix" json:"matrix,omitempty" jsonschema_description:"Named axes, each a list of values; every list item that refers to ${matrix.AXIS} is written out once per value (docs/experiment.md#matrix)."`
	MatrixCell string  `yaml:"matrix-cell" json:"matrix-cell,omitempty" jsonschema_description:"Keep the matrix to one cell, AXIS=VALUE[,AXIS=VALUE...]; chaos replay --cell writes it into the run's copy."`

	// File is the path the experiment was read from; SHA256 its content's digest.
	File   string `yaml:"-" json:"-"`
	SHA256 string `yaml:"-" json:"-"`
	// Raw is the file's content, copied into every run directory as read.
	Raw []byte `yaml:"-" json:"-"`
	// Positions maps field paths to their place in File.
	Positions map[string]manifest.Pos `yaml:"-" json:"-"`
}

// Secrets marks what the harness must keep out of what it writes, beyond
// the variables whose names look secret: more variable names, and
// regular expressions for secret text wherever it appears. An experiment
// and an adapter each may have one; a run uses both.
type Secrets struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// Env names variables whose values are secrets, whatever their names
	// look like.
	Env []string `yaml:"env" json:"env,omitempty" jsonschema_description:"Names of environment variables whose values are secrets, whatever the names look like (the harness's own environment, the manifests' env and workloads' env)."`
	// Patterns are regular expressions (Go syntax) for secret text: every
	// match is redacted, or, when the expression has groups, what they
	// matched.
	Patterns []string `yaml:"patterns" json:"patterns,omitempty" jsonschema_description:"Regular expressions (Go RE2 syntax) for secret text: every match is redacted wherever it appears; when the expression has groups, only what the groups matched."`
}

// Workload is something to run as one or more instances.
type Workload struct {
	Pos         manifest.Pos      `yaml:"-" json:"-"`
	Name        string            `yaml:"name" json:"name"`
	Description string            `yaml:"description" json:"description,omitempty"`
	Kind        string            `yaml:"kind" json:"kind,omitempty" jsonschema:"enum=shell,default=shell"`
	Instances   int               `yaml:"instances" json:"instances,omitempty" jsonschema:"minimum=1,default=1"`
	Timeout     Duration          `yaml:"timeout" json:"timeout,omitempty" jsonschema_description:"Limit for each instance; a timed-out instance is killed and fails its checks."`
	Env         map[string]string `yaml:"env" json:"env,omitempty"`
	Image       string            `yaml:"image" json:"image,omitempty" jsonschema_description:"Container image for backends that run instances as containers."`
	Run         string            `yaml:"run" json:"run"`
	Checks      []Check           `yaml:"checks" json:"checks,omitempty"`
	Ready       *Readiness        `yaml:"ready" json:"ready,omitempty" jsonschema_description:"How an instance says it is ready (a line it prints, a file it creates), for wait condition ready (readiness.go)."`
	// Clock offsets the instances' monotonic and boot clocks (clock.go).
	Clock *WorkloadClock `yaml:"clock" json:"clock,omitempty" jsonschema_description:"Start each instance in a time namespace of its own whose monotonic and boot-time clocks are offset (process backend only)."`
}

// InstanceCount returns the number of instances, 1 when unset.
func (w *Workload) InstanceCount() int {
	if w.Instances <= 0 {
		return 1
	}
	return w.Instances
}

// ReadyInstance, as a stall check's after-ready, is the instance's own
// readiness (its workload's ready) instead of a named target's.
const ReadyInstance = "instance"

// What a metric check does with the scrapes taken before its series
// first appeared.
const (
	MissingSkip = "skip"
	MissingFail = "fail"
)

// Check kinds.
const (
	CheckExitCode = "exit-code"
	CheckShell    = "shell"
	CheckEvent    = "event"
	CheckMetric   = "metric"
	CheckStall    = "stall"
	// History checkers: they read the operation histories workloads wrote
	// (output/.chaos/history.jsonl) and run at experiment scope.
	CheckSet          = "set"
	CheckCounter      = "counter"
	CheckQueue        = "queue"
	CheckLinearizable = "linearizable"
	// Transactional checkers (internal/elle): Elle's list-append and
	// rw-register.
	CheckListAppend = "list-append"
	CheckRWRegister = "rw-register"
)

// HistoryChecks lists the check kinds that read operation histories.
var HistoryChecks = []string{CheckSet, CheckCounter, CheckQueue, CheckLinearizable, CheckListAppend, CheckRWRegister}

// Check is a belief about the evidence a run recorded. Which fields apply
// depends on Kind.
type Check struct {
	Pos         manifest.Pos `yaml:"-" json:"-"`
	Name        string       `yaml:"name" json:"name"`
	Description string       `yaml:"description" json:"description,omitempty"`
	Kind        string       `yaml:"kind" json:"kind" jsonschema:"enum=exit-code,enum=shell,enum=event,enum=metric,enum=stall,enum=set,enum=counter,enum=queue,enum=linearizable,enum=list-append,enum=rw-register"`
	// exit-code
	Equals *int `yaml:"equals" json:"equals,omitempty" jsonschema_description:"exit-code: the exit code the script must end with."`
	// shell
	Run     string   `yaml:"run" json:"run,omitempty" jsonschema_description:"shell: a script; exit 0 passes and what it prints is the failure detail."`
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// event
	Event string            `yaml:"event" json:"event,omitempty" jsonschema_description:"event: the timeline event name to look for, e.g. operation.reverted."`
	Where map[string]string `yaml:"where" json:"where,omitempty" jsonschema_description:"event: fields the event must have, compared as text."`
	Min   *int              `yaml:"min" json:"min,omitempty" jsonschema_description:"event: at least this many matching events (default 1)."`
	Max   *int              `yaml:"max" json:"max,omitempty" jsonschema_description:"event: at most this many matching events; max: 0 asserts the event never happened."`
	// metric, and stall on a metric
	Source    string            `yaml:"source" json:"source,omitempty" jsonschema_description:"metric: the adapter's metrics endpoint (its name); may be left out when the adapter has one."`
	Family    string            `yaml:"family" json:"family,omitempty" jsonschema_description:"metric, stall: the metric family, e.g. http_requests_total."`
	Labels    map[string]string `yaml:"labels" json:"labels,omitempty" jsonschema_description:"metric, stall: label values a series must have; a value written /regex/ is a regular expression. In workload checks ${instance} and ${workload} are replaced."`
	Field     string            `yaml:"field" json:"field,omitempty" jsonschema:"enum=value,enum=count,enum=sum" jsonschema_description:"metric: which number of a sample: value (default), or count or sum of a histogram or summary."`
	Aggregate string            `yaml:"aggregate" json:"aggregate,omitempty" jsonschema:"enum=each,enum=sum,enum=min,enum=max,enum=count" jsonschema_description:"metric: how the matching series of one scrape combine: each (every series must hold; default), sum, min, max or count."`
	Scrapes   string            `yaml:"scrapes" json:"scrapes,omitempty" jsonschema:"enum=last,enum=any,enum=all" jsonschema_description:"metric: which scrapes must hold: last (default), any or all."`
	Window    *Window           `yaml:"window" json:"window,omitempty"`
	Op        string            `yaml:"op" json:"op,omitempty" jsonschema:"enum=<,enum=<=,enum===,enum=!=,enum=>=,enum=>" jsonschema_description:"metric: the comparison."`
	Value     *float64          `yaml:"value" json:"value,omitempty" jsonschema_description:"metric: the number compared against."`
	Missing   string            `yaml:"missing" json:"missing,omitempty" jsonschema:"enum=skip,enum=fail" jsonschema_description:"metric: scrapes taken before a matching series first appeared are left out (skip, the default) or fail the check (fail)."`
	// stall
	File  string   `yaml:"file" json:"file,omitempty" jsonschema_description:"stall: a file in the instance's output that must keep growing while it runs."`
	Limit Duration `yaml:"limit" json:"limit,omitempty" jsonschema_description:"stall: the longest time the evidence may stand still while the instance is Running."`
	// AfterReady and ExceptDuring keep the time a fault took the system
	// down out of a stall: a client cannot progress while its server is
	// restarting.
	AfterReady   string   `yaml:"after-ready" json:"after-ready,omitempty" jsonschema_description:"stall: a named target of the adapter, or instance (the instance's own ready); time counts only while it is ready, and the clock starts over each time it is ready again (target.started, target.restarted, instance.ready)."`
	ExceptDuring []string `yaml:"except-during" json:"except-during,omitempty" jsonschema_description:"stall: operations whose windows (from operation.started to its operation.reverted or operation.finished) do not count; the clock stops in them and goes on after."`
	// history checkers (set, counter, queue, linearizable, list-append, rw-register)
	Workloads         []string      `yaml:"workloads" json:"workloads,omitempty" jsonschema_description:"set, counter, queue, linearizable: the workloads whose histories are read together (default: every workload)."`
	Model             string        `yaml:"model" json:"model,omitempty" jsonschema:"enum=register,enum=kv,enum=mutex" jsonschema_description:"linearizable: register (read, write, cas), kv (the same with a key first, and append) or mutex (acquire, release)."`
	Initial           string        `yaml:"initial" json:"initial,omitempty" jsonschema_description:"linearizable: the register's value before the history, as JSON (default null)."`
	ConsistencyModels []string      `yaml:"consistency-models" json:"consistency-models,omitempty" jsonschema_description:"list-append, rw-register: the consistency models the history must satisfy, as Elle names them (default strict-serializable); the check fails only on anomalies they forbid."`
	Anomalies         []string      `yaml:"anomalies" json:"anomalies,omitempty" jsonschema_description:"list-append, rw-register: more anomalies that fail the check, e.g. G1c."`
	AllowDuplicates   bool          `yaml:"allow-duplicates" json:"allow-duplicates,omitempty" jsonschema_description:"queue: the queue delivers at least once, so a value may come out twice."`
	Requires          *Requirements `yaml:"requires" json:"requires,omitempty"`
}

// Requirements say what a run must have shown for a history check to
// count; a run that did not show it is INCONCLUSIVE, not PASS.
type Requirements struct {
	Pos                   manifest.Pos `yaml:"-" json:"-"`
	FaultDuringOperations bool         `yaml:"fault-during-operations" json:"fault-during-operations,omitempty" jsonschema_description:"At least one operation of the experiment acted while an operation of the histories was open."`
	OKAfterLastFault      int          `yaml:"ok-after-last-fault" json:"ok-after-last-fault,omitempty" jsonschema_description:"At least this many operations completed ok that were invoked after the last fault ended."`
	MinOK                 int          `yaml:"min-ok" json:"min-ok,omitempty" jsonschema_description:"At least this many operations completed ok in all."`
}

// Window limits a metric check to the scrapes around an operation: from
// Before before it started to After after it ended.
type Window struct {
	Pos       manifest.Pos `yaml:"-" json:"-"`
	Operation string       `yaml:"operation" json:"operation"`
	Before    Duration     `yaml:"before" json:"before,omitempty"`
	After     Duration     `yaml:"after" json:"after,omitempty"`
}

// Step is a named shell script run on the harness machine: a preflight
// check, or an adapter check.
type Step struct {
	Pos         manifest.Pos `yaml:"-" json:"-"`
	Name        string       `yaml:"name" json:"name"`
	Description string       `yaml:"description" json:"description,omitempty"`
	Run         string       `yaml:"run" json:"run,omitempty"`
	// Empty, in an adapter check instead of run, names a file of the run
	// directory the check wants present and empty: read, not run, so it
	// costs no process and is evaluated even where scripts from a run
	// directory are refused.
	Empty string `yaml:"empty" json:"empty,omitempty" jsonschema_description:"An adapter check only, instead of run: a file of the run directory (e.g. system/leaked-processes.txt) that must exist and be empty; the check fails with its contents."`
	// Free and Commands, in a preflight step instead of run, are the two
	// things preflight scripts most often check, looked at without
	// starting a process.
	Free     string   `yaml:"free" json:"free,omitempty" jsonschema_description:"A preflight step only, instead of run: the room the file system of the run directory must have free, e.g. 100MiB."`
	Commands []string `yaml:"commands" json:"commands,omitempty" jsonschema_description:"A preflight step only, instead of run: commands that must be executable, each a name found on the run's PATH (as command -v finds it) or an absolute path."`
	Timeout  Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// FreeBytes is Free in bytes (100MiB, 1g, 512k: powers of 1024).
func (s *Step) FreeBytes() (int64, error) { return units.RAMInBytes(s.Free) }

// Operation is something the experiment does to the system during the flow.
type Operation struct {
	Pos         manifest.Pos      `yaml:"-" json:"-"`
	Name        string            `yaml:"name" json:"name"`
	Description string            `yaml:"description" json:"description,omitempty"`
	Uses        string            `yaml:"uses" json:"uses" jsonschema_description:"A built-in fault (kill, restart, outage, restart-in-place, freeze, crash-loop; network faults latency, loss, bandwidth, reset, blackhole, partition; resource faults cpu-limit, cpu-stress, memory-pressure, memory-limit, memory-stress, io-limit, task-limit, disk-fill; clock faults clock-offset, clock-jump, clock-drift, clock-strobe; file-system faults fs-latency, fs-error, fsync-fail, fs-corrupt, fs-torn-write) or an operation of the adapter."`
	Target      *Target           `yaml:"target" json:"target,omitempty"`
	Select      *Select           `yaml:"select" json:"select,omitempty"`
	Duration    Duration          `yaml:"duration" json:"duration,omitempty" jsonschema_description:"How long the change is held before it is reverted."`
	DurationMax Duration          `yaml:"duration-max" json:"duration-max,omitempty" jsonschema_description:"With duration: each application holds for a random time between the two, drawn from the run's seed and recorded in operation.started."`
	Jitter      Duration          `yaml:"jitter" json:"jitter,omitempty" jsonschema_description:"Each selected target waits a random time from 0 to this before the operation acts on it."`
	Grace       Duration          `yaml:"grace" json:"grace,omitempty" jsonschema_description:"restart: how long to wait after SIGTERM before SIGKILL (default 10s)."`
	With        map[string]string `yaml:"with" json:"with,omitempty" jsonschema_description:"Parameters for an adapter operation; its hooks see them as CHAOS_PARAM_<NAME>."`
	Trigger     *Trigger          `yaml:"trigger" json:"trigger,omitempty"`
	// Skip and Phases: readiness.go.
	Skip   *Skip   `yaml:"skip" json:"skip,omitempty"`
	Phases *Phases `yaml:"phases" json:"phases,omitempty"`
	// Network holds the parameters of a network fault.
	Network *Network `yaml:"network" json:"network,omitempty" jsonschema_description:"The parameters of a network fault (latency, loss, bandwidth, partition)."`
	// Resource holds the parameters of a resource fault (resource.go).
	Resource *Resource `yaml:"resource" json:"resource,omitempty" jsonschema_description:"The parameters of a resource fault (cpu-limit, cpu-stress, memory-pressure, memory-limit, memory-stress, io-limit, task-limit, disk-fill)."`
	// Clock holds the parameters of a clock fault (clock.go).
	Clock *Clock `yaml:"clock" json:"clock,omitempty" jsonschema_description:"The parameters of a clock fault (clock-offset, clock-jump, clock-drift, clock-strobe)."`
	// FS holds the parameters of a file-system fault (filesystem.go).
	FS *FS `yaml:"fs" json:"fs,omitempty" jsonschema_description:"The parameters of a file-system fault (fs-latency, fs-error, fsync-fail, fs-corrupt, fs-torn-write)."`
}

// Trigger fires an operation relative to an observed state instead of at a
// place in the flow. A triggered operation is armed while the flow runs and
// is not named in the flow.
type Trigger struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// Signal fires on the next line matching an adapter signal.
	Signal string `yaml:"signal" json:"signal,omitempty"`
	// State fires when an instance of a workload enters a state.
	State *StateTrigger `yaml:"state" json:"state,omitempty"`
	// Delay waits a random time in [Delay, DelayMax] (from the seed) after
	// the trigger before the operation acts.
	Delay    Duration `yaml:"delay" json:"delay,omitempty" jsonschema_description:"Wait this long after the trigger; with delay-max, a random time between the two, from the run's seed."`
	DelayMax Duration `yaml:"delay-max" json:"delay-max,omitempty"`
	// Times is how often the trigger may fire (default 1).
	Times int `yaml:"times" json:"times,omitempty" jsonschema:"minimum=1,default=1"`
}

// StateTrigger matches an instance entering a state.
type StateTrigger struct {
	Workload string `yaml:"workload" json:"workload"`
	State    string `yaml:"state" json:"state" jsonschema:"enum=Created,enum=Pending,enum=Running,enum=Succeeded,enum=Failed,enum=Unknown"`
	// Reason, when set, must equal the state change's reason.
	Reason string `yaml:"reason" json:"reason,omitempty"`
}

// Built-in faults.
const (
	FaultKill           = "kill"
	FaultRestart        = "restart"
	FaultOutage         = "outage"
	FaultRestartInPlace = "restart-in-place"
	FaultFreeze         = "freeze"
	// FaultCrashLoop kills its target, kills it again as soon as it reports
	// recovering, and once more just after it is healthy again.
	FaultCrashLoop = "crash-loop"
)

// Faults lists the built-in faults.
var Faults = []string{FaultKill, FaultRestart, FaultOutage, FaultRestartInPlace, FaultFreeze, FaultCrashLoop,
	FaultLatency, FaultLoss, FaultBandwidth, FaultReset, FaultBlackhole, FaultPartition,
	FaultCPULimit, FaultCPUStress, FaultMemoryPressure, FaultMemoryLimit, FaultMemoryStress, FaultIOLimit, FaultTaskLimit, FaultDiskFill,
	FaultClockOffset, FaultClockJump, FaultClockDrift, FaultClockStrobe,
	FaultFSLatency, FaultFSError, FaultFsyncFail, FaultFSCorrupt, FaultFSTornWrite}

// IsFault reports whether name is a built-in fault.
func IsFault(name string) bool {
	for _, f := range Faults {
		if f == name {
			return true
		}
	}
	return false
}

// Expectation kinds.
const (
	ExpectKnown = "known"
	ExpectFlaky = "flaky"
)

// Expectation ties checks to a known issue: they are expected to fail
// (known) or may fail (flaky).
type Expectation struct {
	Pos         manifest.Pos `yaml:"-" json:"-"`
	Issue       string       `yaml:"issue" json:"issue"`
	Kind        string       `yaml:"kind" json:"kind,omitempty" jsonschema:"enum=known,enum=flaky,default=known"`
	Description string       `yaml:"description" json:"description,omitempty"`
	Checks      []string     `yaml:"checks" json:"checks" jsonschema_description:"Checks as workload/check, instance/check, experiment/check or adapter/check."`
}

// KindOrDefault returns the expectation's kind, known when unset.
func (e *Expectation) KindOrDefault() string {
	if e.Kind == "" {
		return ExpectKnown
	}
	return e.Kind
}

// Workload returns the workload with the given name.
func (x *Experiment) Workload(name string) *Workload {
	for i := range x.Workloads {
		if x.Workloads[i].Name == name {
			return &x.Workloads[i]
		}
	}
	return nil
}

// Operation returns the operation with the given name.
func (x *Experiment) Operation(name string) *Operation {
	for i := range x.Operations {
		if x.Operations[i].Name == name {
			return &x.Operations[i]
		}
	}
	return nil
}

// Issues lists the issues the experiment's expectations name, in order.
func (x *Experiment) Issues() []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range x.Expectations {
		if e.Issue != "" && !seen[e.Issue] {
			seen[e.Issue] = true
			out = append(out, e.Issue)
		}
	}
	return out
}
