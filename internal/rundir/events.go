package rundir

import (
	"slices"
	"strings"
)

// EventSpec is one event the engine writes to timeline.jsonl: its name and
// every field it can carry, in the order written.
type EventSpec struct {
	Name   string
	Fields []string
}

// Events is the canonical list of the timeline's events, the one place
// that names them: validation checks an event check's event and where keys
// against it, and a test keeps docs/run-directory.md's tables of events
// the same.
var Events = []EventSpec{
	{"run.started", []string{"experiment", "version", "seed", "adapter", "run_id", "ports"}},
	{"run.error", []string{"error"}},
	{"run.warning", []string{"warning"}},
	{"flow.skipped", []string{"reason"}},
	{"run.aborted", []string{"signal"}},
	{"run.finished", []string{"verdict"}},
	{"run.na", []string{"reasons", "reason"}},

	{"lock.waiting", []string{"lock", "file", "holder", "timeout"}},
	{"lock.acquired", []string{"lock", "file", "waited"}},

	{"target.started", []string{"target", "pid", "ids"}},
	{"target.restarted", []string{"target", "operation", "pid"}},
	{"target.stopped", []string{"target"}},

	{"check.started", []string{"scope", "instance", "check"}},
	{"check.finished", []string{"scope", "instance", "check", "ok", "detail"}},

	{"otlp.started", []string{"grpc", "http"}},
	{"otlp.stopped", []string{"spans"}},
	{"metrics.started", []string{"metrics", "url", "interval"}},
	{"metrics.stopped", []string{"metrics", "scrapes", "failed"}},
	{"watch.started", []string{"watch"}},
	{"watch.died", []string{"watch", "attempt", "detail"}},
	{"watch.restarted", []string{"watch", "attempt"}},
	{"watch.stopped", []string{"watch"}},
	{"signal.matched", []string{"signal", "watch", "line", "delay", "since", "line_t"}},

	{"trigger.armed", []string{"operation", "trigger"}},
	{"trigger.fired", []string{"operation", "fire", "on", "delay"}},
	{"trigger.missed", []string{"operation", "trigger"}},
	{"matrix.cells", []string{"cells"}},
	{"node.started", []string{"node", "kind", "name"}},
	{"node.finished", []string{"node", "kind", "name", "ok", "error"}},
	{"repeat.round", []string{"node", "round"}},
	{"schedule.drawn", []string{"node", "steps"}},
	{"schedule.step", []string{"node", "step", "of", "operation"}},

	{"instance.state", []string{"workload", "instance", "state", "reason"}},
	{"instance.created", []string{"workload", "instance", "system_id"}},
	{"instance.timeout", []string{"workload", "instance", "timeout"}},
	{"instance.stopping", []string{"workload", "instance", "reason"}},
	{"instance.collected", []string{"workload", "instance", "exit_code"}},
	{"instance.stop-requested", []string{"workload", "instance"}},
	{"instance.ready", []string{"workload", "instance", "on"}},
	{"instance.leaked", []string{"instance", "pids"}},
	{"instance.deleted", []string{"workload", "instance"}},

	{"operation.started", []string{"operation", "uses", "run", "target", "scope", "instances", "ids", "groups", "ring", "shape", "direction", "duration", "jitter"}},
	{"crash-loop.kill", []string{"operation", "target", "phase", "id", "on"}},
	{"operation.skipped", []string{"operation", "run", "instance", "id", "reason"}},
	{"operation.waiting", []string{"operation", "run", "target", "behind", "behind_run"}},
	{"operation.waited", []string{"operation", "run", "target", "waited"}},
	{"operation.finished", []string{"operation", "uses", "run"}},
	{"operation.reverted", []string{"operation", "uses", "run", "when"}},

	{"network.created", []string{"subnet", "host", "link", "members"}},
	{"network.applied", []string{"operation", "run", "uses", "target", "rule", "netns", "mechanism", "name", "devices",
		"correlation", "delay", "jitter", "percent", "rate", "drop_from", "drop_to", "connections_aborted", "delay_queue", "kernel"}},
	{"network.removed", []string{"operation", "run", "uses", "target", "rule", "packets_delayed", "error"}},

	{"resource.applied", []string{"operation", "uses", "run", "target", "what", "writes", "device", "device_of", "helper_pid", "file", "filled", "free"}},
	{"resource.oom-kill", []string{"operation", "target", "oom_kills", "counted_by"}},
	{"resource.helper-ended", []string{"operation", "target", "how"}},
	{"resource.reverted", []string{"operation", "uses", "run", "target", "cpu_seconds", "limit_hits", "reclaimed_pages", "oom_kills"}},

	{"container.event", []string{"action", "container", "id", "role", "workload", "instance", "exit_code", "signal"}},
	{"docker.events.error", []string{"error"}},
	{"container.swept", []string{"containers"}},
	{"container.watchdog", []string{"instance", "id", "lost"}},

	{"namespace.created", []string{"namespace"}},
	{"pod.event", []string{"kind", "object", "reason", "message"}},
	{"controller.scaled", []string{"target", "controller", "replicas", "was"}},
	{"kubernetes.swept", []string{"namespace", "objects"}},

	{"settle.started", []string{"duration"}},
	{"settle.skipped", []string{"duration", "reason"}},
	{"settle.interrupted", []string{"reason"}},
	{"processes.leaked", []string{"count"}},
	{"processes.swept", []string{"count", "pids"}},
}

// EventNames lists the names of Events, in order.
func EventNames() []string {
	out := make([]string, len(Events))
	for i, e := range Events {
		out[i] = e.Name
	}
	return out
}

// Event returns the spec of the named event, or nil.
func EventSpecOf(name string) *EventSpec {
	for i := range Events {
		if Events[i].Name == name {
			return &Events[i]
		}
	}
	return nil
}

// HasField reports whether the event can carry the field.
func (s *EventSpec) HasField(f string) bool { return slices.Contains(s.Fields, f) }

// FieldList renders the fields as `a`, `b` and `c` for messages.
func (s *EventSpec) FieldList() string {
	if len(s.Fields) == 0 {
		return "no fields"
	}
	return strings.Join(s.Fields, ", ")
}
