package experiment

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// prob is one expected problem: where it is, which field, and the full
// message.
type prob struct {
	Line, Col int
	Field     string
	Msg       string
	Warning   bool
}

func (p prob) String() string {
	w := ""
	if p.Warning {
		w = "warning: "
	}
	return fmt.Sprintf("%d:%d %s%s: %s", p.Line, p.Col, w, p.Field, p.Msg)
}

// e is an expected error, w an expected warning.
func e(line, col int, field, msg string) prob { return prob{line, col, field, msg, false} }
func w(line, col int, field, msg string) prob { return prob{line, col, field, msg, true} }

func probsOf(ps manifest.Problems) []prob {
	out := make([]prob, 0, len(ps))
	for _, p := range ps {
		out = append(out, prob{p.Pos.Line, p.Pos.Column, p.Field, p.Msg, p.Warning})
	}
	return out
}

// doc drops the newline that follows the opening backquote, so line 1 of
// the YAML is the first line written.
func doc(s string) string { return strings.TrimPrefix(s, "\n") }

// faults is the list of built-in faults as messages print it.
var faults = strings.Join(Faults, ", ")

type badCase struct {
	name string
	yaml string
	want []prob
}

// badExperiments are small complete manifests that are each wrong in a
// known way. The fuzz target is seeded with them too.
var badExperiments = []badCase{
	{name: "unknown field with a typo suggestion", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instnaces: 3
    run: echo
flow: counter
`), want: []prob{
		e(5, 5, "workloads[0].instnaces", "unknown field \"instnaces\" (did you mean \"instances\"?)"),
	}},
	{name: "unknown top-level field without a suggestion", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
owner: someone
workloads:
  - name: w
    run: echo
flow: w
`), want: []prob{
		e(3, 1, "owner", "unknown field \"owner\""),
	}},
	{name: "string where an integer goes", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
version: one
workloads:
  - name: w
    instances: three
    run: echo
flow: w
`), want: []prob{
		e(3, 10, "version", "expected an integer, got \"one\""),
		e(6, 16, "workloads[0].instances", "expected an integer, got \"three\""),
	}},
	{name: "list where a mapping goes", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
env: [TICKS=120]
workloads:
  - name: w
    run: echo
    checks:
      name: exited-ok
flow: w
`), want: []prob{
		e(3, 6, "env", "expected a mapping, got a list"),
		e(8, 7, "workloads[0].checks", "expected a list, got a mapping"),
	}},
	{name: "mapping where a list goes", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  name: w
  run: echo
flow: w
`), want: []prob{
		e(4, 3, "workloads", "expected a list, got a mapping"),
		e(6, 7, "flow", "\"w\" is neither a workload nor an operation of this experiment"),
	}},
	{name: "bare number as a duration", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
timeout: 30
workloads:
  - name: w
    run: echo
flow: w
`), want: []prob{
		e(3, 10, "timeout", "expected a duration such as 15s, 500ms or 2m30s, got \"30\" (add a unit: 30s)"),
	}},
	{name: "duration in words", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    timeout: 5 minutes
    run: echo
flow: w
`), want: []prob{
		e(5, 14, "workloads[0].timeout", "expected a duration such as 15s, 500ms or 2m30s, got \"5 minutes\""),
	}},
	{name: "negative duration", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  serial: [w, {delay: -5s}]
`), want: []prob{
		e(7, 23, "flow.serial[1].delay", "expected a duration such as 15s, 500ms or 2m30s, got \"-5s\" (it must not be negative)"),
	}},
	{name: "flow names a missing workload", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
flow:
  serial: [countr]
`), want: []prob{
		w(4, 11, "workloads[0].name", "workload \"counter\" is never used by the flow"),
		e(7, 12, "flow.serial[0]", "\"countr\" is neither a workload nor an operation of this experiment (did you mean \"counter\"?)"),
	}},
	{name: "flow names a missing operation", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
operations:
  - name: gateway-down
    uses: outage
    target: gateway
    duration: 15s
flow:
  parallel: [counter, gateway-up]
`), want: []prob{
		w(7, 11, "operations[0].name", "operation \"gateway-down\" is never used by the flow"),
		e(12, 23, "flow.parallel[1]", "\"gateway-up\" is neither a workload nor an operation of this experiment"),
	}},
	{name: "unknown flow key", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  seriel: [w]
`), want: []prob{
		w(4, 11, "workloads[0].name", "workload \"w\" is never used by the flow"),
		e(7, 3, "flow.seriel", "unknown flow node \"seriel\": expected one of serial, parallel, wait, delay, repeat, or a bare workload or operation name (did you mean \"serial\"?)"),
	}},
	{name: "flow node mapping with two keys", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  serial:
    - w
    - {delay: 5s, wait: {workload: w, condition: started}}
`), want: []prob{
		e(9, 7, "flow.serial[1]", "a flow node has exactly one key (one of serial, parallel, wait, delay, repeat), got delay, wait; put several steps in serial: [...]"),
	}},
	{name: "empty serial", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - serial: []
`), want: []prob{
		e(9, 7, "flow.parallel[1]", "serial has no steps"),
	}},
	{name: "repeat without a body", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - repeat: {for: 20m}
`), want: []prob{
		e(9, 15, "flow.parallel[1].repeat", "repeat needs a body: serial: [...], parallel: [...] or do: NODE"),
	}},
	{name: "repeat without for or times", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - repeat:
        serial: [{delay: 1s}]
`), want: []prob{
		e(10, 9, "flow.parallel[1].repeat", "repeat needs for: DURATION, times: N, or both"),
	}},
	{name: "repeat with a negative count and an unknown key", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - repeat:
        times: -2
        until: done
        do: {delay: 1s}
`), want: []prob{
		e(10, 16, "flow.parallel[1].repeat.times", "times must not be negative"),
		e(11, 9, "flow.parallel[1].repeat.until", "unknown field \"until\""),
	}},
	{name: "workload inside a repeat", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  repeat:
    times: 3
    serial: [w]
`), want: []prob{
		e(9, 14, "flow.repeat.serial[0]", "workload \"w\" is inside a repeat (flow); a workload runs once, so start it beside the repeat in a parallel"),
	}},
	{name: "workload run twice", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  serial:
    - w
    - parallel: [w]
`), want: []prob{
		e(9, 18, "flow.serial[1].parallel[0]", "workload \"w\" already runs at flow.serial[0] (line 8); each workload runs once"),
	}},
	{name: "wait without a condition", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - wait: {workload: w}
`), want: []prob{
		e(9, 13, "flow.parallel[1].wait", "missing condition: one of created, started, running, finished, succeeded, ready"),
	}},
	{name: "wait on a workload and a signal", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - wait: {workload: w, condition: started, signal: reconcile-sweep}
`), want: []prob{
		e(9, 13, "flow.parallel[1].wait", "a wait is on a workload or on a signal, not both"),
	}},
	{name: "wait on nothing", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - wait: {timeout: 3m}
`), want: []prob{
		e(9, 13, "flow.parallel[1].wait", "a wait needs workload and condition, or signal"),
	}},
	{name: "unknown wait condition", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - wait: {workload: w, condition: strated}
`), want: []prob{
		e(9, 38, "flow.parallel[1].wait.condition", "unknown condition \"strated\"; expected one of created, started, running, finished, succeeded, ready (did you mean \"started\"?)"),
	}},
	{name: "wait on a missing workload with a delay", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
flow:
  parallel:
    - counter
    - wait: {workload: countr, condition: started, delay: 5s}
`), want: []prob{
		e(9, 24, "flow.parallel[1].wait.workload", "no workload named \"countr\" (did you mean \"counter\"?)"),
		e(9, 59, "flow.parallel[1].wait.delay", "delay applies to signal waits; add a delay node after the wait instead"),
	}},
	{name: "signal wait with a condition", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
  parallel:
    - w
    - wait: {signal: sweep, condition: started}
`), want: []prob{
		e(9, 40, "flow.parallel[1].wait.condition", "condition applies to workload waits, not signals"),
	}},
	{name: "duplicate workload names", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
  - name: w
    run: echo
flow: w
`), want: []prob{
		e(6, 11, "workloads[1].name", "duplicate name \"w\": already used by workloads[0] at line 4 (workloads and operations share one namespace, the flow's)"),
	}},
	{name: "duplicate name across a workload and an operation", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
operations:
  - name: counter
    uses: kill
    target: {workload: counter}
flow: counter
`), want: []prob{
		e(7, 11, "operations[0].name", "duplicate name \"counter\": already used by workloads[0] at line 4 (workloads and operations share one namespace, the flow's)"),
	}},
	{name: "duplicate check names", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
    checks:
      - name: ok
        kind: exit-code
        equals: 0
      - name: ok
        kind: shell
        run: "true"
flow: w
checks:
  - name: recovered
    kind: event
    event: operation.reverted
  - name: recovered
    kind: shell
    run: "true"
`), want: []prob{
		e(10, 15, "workloads[0].checks[1].name", "duplicate check name \"ok\""),
		e(18, 11, "checks[1].name", "duplicate check name \"recovered\""),
	}},
	{name: "exit-code check at experiment scope", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow: w
checks:
  - name: exited-ok
    kind: exit-code
    equals: 0
`), want: []prob{
		e(9, 11, "checks[0].kind", "exit-code checks belong to a workload; an experiment check is shell, event or metric"),
	}},
	{name: "shell check without run", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
    checks:
      - name: said-hello
        kind: shell
flow: w
`), want: []prob{
		e(7, 9, "workloads[0].checks[0]", "a shell check needs run: a script whose exit 0 means the check passed"),
	}},
	{name: "event check without event", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow: w
checks:
  - name: recovered
    kind: event
    where: {operation: gateway-down}
`), want: []prob{
		e(8, 5, "checks[0]", "an event check needs event: the timeline event to look for, e.g. operation.reverted"),
	}},
	{name: "equals on a shell check", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
    checks:
      - name: said-hello
        kind: shell
        run: grep -q hello greeting
        equals: 0
flow: w
`), want: []prob{
		e(10, 17, "workloads[0].checks[0].equals", "equals only applies to exit-code checks, not shell"),
	}},
	{name: "unknown check kind and a check without kind or name", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
    checks:
      - name: exited-ok
        kind: exitcode
      - description: no name, no kind
flow: w
`), want: []prob{
		e(8, 15, "workloads[0].checks[0].kind", "unknown check kind \"exitcode\"; expected one of exit-code, shell, event, metric, stall (did you mean \"exit-code\"?)"),
		e(9, 9, "workloads[0].checks[1]", "missing name"),
		e(9, 9, "workloads[0].checks[1]", "missing kind: one of exit-code, shell, event, metric, stall"),
	}},
	{name: "event check counts", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow: w
checks:
  - name: restarts
    kind: event
    event: target.restarted
    min: 3
    max: 1
  - name: negative
    kind: event
    event: target.restarted
    min: -1
`), want: []prob{
		e(12, 10, "checks[0].max", "max 1 is below min 3"),
		e(16, 10, "checks[1].min", "must not be negative"),
	}},
	{name: "outage without duration", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
operations:
  - name: gateway-down
    uses: outage
    target: gateway
flow: [w, gateway-down]
`), want: []prob{
		e(7, 5, "operations[0]", "missing duration: an outage holds its target down for a duration, e.g. duration: 15s"),
	}},
	{name: "kill with a duration", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
operations:
  - name: gateway-down
    uses: kill
    target: gateway
    duration: 15s
flow: [w, gateway-down]
`), want: []prob{
		e(10, 15, "operations[0].duration", "kill takes no duration; use outage to hold a target down"),
	}},
	{name: "fault options that do not apply", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
operations:
  - name: pause
    uses: freeze
    target: gateway
    grace: 5s
    with: {policy: strict}
flow: [w, pause]
`), want: []prob{
		e(10, 12, "operations[0].grace", "grace applies to restart only"),
		e(11, 11, "operations[0].with", "with gives parameters to adapter operations; freeze is a built-in fault"),
	}},
	{name: "operation without uses, fault without target", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
operations:
  - name: nothing
  - name: bounce
    uses: restart
flow: [w, nothing, bounce]
`), want: []prob{
		e(7, 5, "operations[0]", "missing uses: a built-in fault ("+faults+") or an operation of the adapter"),
		e(8, 5, "operations[1]", "missing target: restart needs something to act on (a named target such as gateway, or {workload: NAME})"),
	}},
	{name: "select count larger than the instances", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - name: kill-some
    uses: kill
    target: {workload: counter}
    select: {count: 4}
flow: [counter, kill-some]
`), want: []prob{
		e(11, 21, "operations[0].select.count", "selects 4 instances but workload \"counter\" has 3"),
	}},
	{name: "select instances naming instances that do not exist", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - name: kill-some
    uses: kill
    target: {workload: counter}
    select: {instances: [counter-0, counter-3, counter-01, other-1]}
flow: [counter, kill-some]
`), want: []prob{
		e(11, 37, "operations[0].select.instances[1]", "\"counter-3\" is not an instance of workload \"counter\" (its instances are counter-0 to counter-2)"),
		e(11, 48, "operations[0].select.instances[2]", "\"counter-01\" is not an instance of workload \"counter\" (its instances are counter-0 to counter-2)"),
		e(11, 60, "operations[0].select.instances[3]", "\"other-1\" is not an instance of workload \"counter\" (its instances are counter-0 to counter-2)"),
	}},
	{name: "bad select values", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - name: a
    uses: kill
    target: {workload: counter}
    select: some
  - name: b
    uses: kill
    target: {workload: counter}
    select: {percent: 0}
  - name: c
    uses: kill
    target: {workload: counter}
    select: {count: 0}
  - name: d
    uses: kill
    target: gateway
    select: {instances: [gateway-0]}
flow: [counter, a, b, c, d]
`), want: []prob{
		e(11, 13, "operations[0].select", "expected one, all, {count: N}, {percent: P} or {instances: [...]}, got \"some\""),
		e(15, 23, "operations[1].select.percent", "percent must be above 0 and at most 100"),
		e(19, 21, "operations[2].select.count", "count must be at least 1"),
		e(23, 13, "operations[3].select", "instances selects workload instances; target \"gateway\" is a named target"),
	}},
	{name: "target workload missing", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
operations:
  - name: kill-supervisors
    uses: kill
    target: {workload: countre, role: supervisor}
flow: [counter, kill-supervisors]
`), want: []prob{
		e(9, 24, "operations[0].target.workload", "no workload named \"countre\" (did you mean \"counter\"?)"),
	}},
	{name: "bad targets", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
operations:
  - name: a
    uses: kill
    target: ""
  - name: b
    uses: kill
    target: {role: supervisor}
flow: [w, a, b]
`), want: []prob{
		e(9, 13, "operations[0].target", "expected a target name or {workload: NAME}, got an empty string"),
		e(12, 13, "operations[1].target", "a target mapping needs workload (and optionally role)"),
	}},
	{name: "expectation naming a missing check", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
    checks:
      - name: exited-ok
        kind: exit-code
        equals: 0
flow: counter
checks:
  - name: gateway-recovered
    kind: event
    event: operation.reverted
expectations:
  - issue: NVIDIA/OpenShell#4910
    checks: [counter/exited-okay, experiment/gateway-recoverd]
`), want: []prob{
		e(17, 14, "expectations[0].checks[0]", "workload \"counter\" has no check named \"exited-okay\" (did you mean \"exited-ok\"?)"),
		e(17, 35, "expectations[0].checks[1]", "the experiment has no check named \"gateway-recoverd\" (did you mean \"gateway-recovered\"?)"),
	}},
	{name: "expectation naming a missing workload or instance", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
    checks:
      - name: exited-ok
        kind: exit-code
        equals: 0
flow: counter
expectations:
  - issue: NVIDIA/OpenShell#4910
    checks: [countr/exited-ok, counter-3/exited-ok, counter-2/exited-ok, exited-ok]
`), want: []prob{
		e(14, 14, "expectations[0].checks[0]", "\"countr\" names no workload, instance, experiment or adapter (did you mean \"counter\"?)"),
		e(14, 32, "expectations[0].checks[1]", "\"counter-3\" is not an instance of workload \"counter\" (its instances are counter-0 to counter-2)"),
		e(14, 74, "expectations[0].checks[3]", "\"exited-ok\" is not a check reference; write workload/check, instance/check, experiment/check or adapter/check"),
	}},
	{name: "expectation with an unknown kind and nothing else", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow: w
expectations:
  - kind: sometimes
`), want: []prob{
		e(8, 5, "expectations[0]", "missing issue: the known issue the checks are tied to, e.g. org/repo#123"),
		e(8, 5, "expectations[0]", "missing checks: the checks this issue makes fail, as workload/check or experiment/check"),
		e(8, 11, "expectations[0].kind", "unknown expectation kind \"sometimes\"; expected known or flaky"),
	}},
	{name: "bad id", yaml: doc(`
apiVersion: chaos/v1alpha1
id: Gateway_Kill!
workloads:
  - name: w
    run: echo
flow: w
`), want: []prob{
		e(2, 5, "id", "\"Gateway_Kill!\" is not a valid id: use lower-case letters, digits, dots, underscores and dashes"),
	}},
	{name: "wrong apiVersion", yaml: doc(`
apiVersion: chaos/v1
id: t
workloads:
  - name: w
    run: echo
flow: w
`), want: []prob{
		e(1, 13, "apiVersion", "unsupported version \"chaos/v1\"; this harness reads chaos/v1alpha1"),
	}},
	{name: "missing apiVersion, id and flow", yaml: doc(`
title: nothing much
workloads:
  - name: w
    run: echo
`), want: []prob{
		e(1, 1, "apiVersion", "missing; write apiVersion: chaos/v1alpha1"),
		e(1, 1, "id", "missing; every experiment needs an id"),
		e(1, 1, "", "missing flow: say what runs, e.g. flow: w"),
	}},
	{name: "empty flow", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow:
`), want: []prob{
		e(6, 6, "flow", "empty flow: say what runs, e.g. flow: w"),
	}},
	{name: "empty file", yaml: "", want: []prob{
		e(1, 1, "", "the file is empty"),
	}},
	{name: "file with only a comment", yaml: "# nothing yet\n", want: []prob{
		e(1, 1, "", "the file is empty"),
	}},
	{name: "invalid YAML syntax", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: "echo
flow: w
`), want: []prob{
		e(5, 1, "", "found unexpected end of stream"),
	}},
	{name: "tab in indentation", yaml: "apiVersion: chaos/v1alpha1\nid: t\nworkloads:\n\t- name: w\n", want: []prob{
		e(4, 1, "", "found character that cannot start any token"),
	}},
	{name: "duplicate key", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
    run: echo again
flow: w
`), want: []prob{
		e(6, 5, "workloads[0].run", "duplicate key \"run\""),
	}},
	{name: "workload problems", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: Counter
    kind: python
    instances: 0
    env: {1BAD: x}
  - description: no name, no run
flow: Counter
`), want: []prob{
		e(4, 5, "workloads[0]", "missing run: the script each instance runs"),
		e(4, 11, "workloads[0].name", "\"Counter\" is not a valid workload name: use lower-case letters, digits, dots, underscores and dashes"),
		e(5, 11, "workloads[0].kind", "unknown workload kind \"python\"; the only kind is shell"),
		e(6, 16, "workloads[0].instances", "must be at least 1, got 0"),
		e(7, 17, "workloads[0].env.1BAD", "\"1BAD\" is not a valid environment variable name"),
		e(8, 5, "workloads[1]", "missing name: every workload needs one"),
		e(8, 5, "workloads[1]", "missing run: the script each instance runs"),
	}},
	{name: "unused workload and operation are warnings", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
  - name: spare
    run: echo
operations:
  - name: later
    uses: kill
    target: {workload: w}
flow: w
`), want: []prob{
		w(6, 11, "workloads[1].name", "workload \"spare\" is never used by the flow"),
		w(9, 11, "operations[0].name", "operation \"later\" is never used by the flow"),
	}},
	{name: "preflight and metrics problems", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: w
    run: echo
flow: w
metrics: [openshell_server_grpc_requests_total, ""]
preflight:
  - name: jq
    run: jq --version
  - name: jq
  - run: "true"
`), want: []prob{
		e(7, 49, "metrics[1]", "empty metric family name"),
		e(11, 5, "preflight[1]", "missing run: the shell script to run (or free: the room the run needs, or commands: what must be installed)"),
		e(11, 11, "preflight[1].name", "duplicate name \"jq\""),
		e(12, 5, "preflight[2]", "missing name"),
	}},
	{name: "five errors in one file are reported at once", yaml: doc(`
apiVersion: chaos/v1alpha1
id: five-errors
timeout: 5 minutes
workloads:
  - name: counter
    instnaces: 3
    run: echo
operations:
  - name: gateway-down
    uses: outage
    target: gateway
flow:
  serial:
    - counter
    - wait: {workload: counter, condition: strated}
    - gateway-down
expectations:
  - issue: NVIDIA/OpenShell#4910
    checks: [counter/exited-ok]
`), want: []prob{
		e(3, 10, "timeout", "expected a duration such as 15s, 500ms or 2m30s, got \"5 minutes\""),
		e(6, 5, "workloads[0].instnaces", "unknown field \"instnaces\" (did you mean \"instances\"?)"),
		e(9, 5, "operations[0]", "missing duration: an outage holds its target down for a duration, e.g. duration: 15s"),
		e(15, 44, "flow.serial[1].wait.condition", "unknown condition \"strated\"; expected one of created, started, running, finished, succeeded, ready (did you mean \"started\"?)"),
		e(19, 14, "expectations[0].checks[0]", "workload \"counter\" has no check named \"exited-ok\""),
	}},
	{name: "what cannot sensibly run: instances, rounds, durations, trigger times", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
timeout: 200h
workloads:
  - name: w
    instances: 100000000
    run: echo
  - name: v
    instances: 900
    run: echo
  - name: u
    instances: 900
    run: echo
operations:
  - name: freeze-one
    uses: freeze
    target: {workload: w}
    trigger: {state: {workload: w, state: Running}, times: 100000}
  - name: kill-one
    uses: kill
    target: {workload: v}
flow:
  parallel:
    - w
    - v
    - u
    - repeat: {times: 1000000000, serial: [{delay: 1ns}, kill-one]}
    - repeat: {for: 1h, do: kill-one}
    - repeat:
        times: 1000
        do: {repeat: {times: 1000, do: kill-one}}
    - repeat: {for: 1h, serial: [{delay: 1s}, kill-one]}
    - repeat: {for: 24h, serial: [{delay: 100ms}, kill-one]}
`), want: []prob{
		e(3, 10, "timeout", "expected a duration such as 15s, 500ms or 2m30s, got \"200h\" (at most 168h, 7 days)"),
		e(5, 3, "workloads", "100001800 instances in all; an experiment has at most 10000"),
		e(6, 16, "workloads[0].instances", "100000000 instances; a workload has at most 10000"),
		e(18, 60, "operations[0].trigger.times", "100000; a trigger fires at most 10000 times"),
		e(27, 23, "flow.parallel[3].repeat.times", "1000000000 rounds; a flow runs at most 100000 rounds of repeats in all"),
		e(28, 7, "flow.parallel[4].repeat", "a repeat without times needs rounds of at least 100ms (this one's shortest round is 0s); add a delay to its body, e.g. delay: 1s, or set times"),
		e(31, 30, "flow.parallel[5].repeat.do.repeat.times", "1000000 rounds (1000 rounds inside 1000 rounds of the repeats around it); a flow runs at most 100000 rounds of repeats in all"),
		e(33, 7, "flow.parallel[7].repeat", "864001 rounds; a flow runs at most 100000 rounds of repeats in all"),
	}},
	{name: "event checks name events, fields and names that exist", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: u
    instances: 2
    run: echo
    checks:
      - name: reverted
        kind: event
        event: operation.revertd
      - name: where-key
        kind: event
        event: operation.reverted
        where: {operaton: freeze-one}
      - name: where-value
        kind: event
        event: operation.reverted
        where: {operation: freeze-on}
      - name: where-instance
        kind: event
        event: instance.state
        where: {instance: u-2, state: Runing, workload: uu}
      - name: fine
        kind: event
        event: operation.reverted
        where: {operation: freeze-one, when: flow end, run: "1"}
operations:
  - name: freeze-one
    uses: freeze
    target: {workload: u}
flow: {parallel: [u, freeze-one]}
`), want: []prob{
		e(10, 16, "workloads[0].checks[0].event", "no event \"operation.revertd\" is written to the timeline (did you mean \"operation.reverted\"?); the events are listed in docs/run-directory.md"),
		e(14, 27, "workloads[0].checks[1].where.operaton", "event operation.reverted has no field \"operaton\" (did you mean \"operation\"?); its fields are operation, uses, run, when"),
		e(18, 28, "workloads[0].checks[2].where.operation", "no operation named \"freeze-on\" (did you mean \"freeze-one\"?)"),
		e(22, 27, "workloads[0].checks[3].where.instance", "no instance named \"u-2\": workload u has the instances u-0 to u-1"),
		e(22, 39, "workloads[0].checks[3].where.state", "no state named \"Runing\" (did you mean \"Running\"?)"),
		e(22, 57, "workloads[0].checks[3].where.workload", "no workload named \"uu\" (did you mean \"u\"?)"),
	}},
	{name: "secrets that are not names or patterns", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
secrets:
  env: [GOOD_NAME, "not a name"]
  patterns: ["sk-[a-z]{10}", "(unclosed", "x*", "  "]
workloads:
  - {name: u, run: "true"}
flow: u
`), want: []prob{
		e(4, 20, "secrets.env[1]", "\"not a name\" is not a valid environment variable name"),
		e(5, 30, "secrets.patterns[1]", "invalid regular expression: error parsing regexp: missing closing ): `(unclosed`"),
		e(5, 43, "secrets.patterns[2]", "\"x*\" matches empty text, so it would redact between every two characters; make it match the secret itself"),
		e(5, 49, "secrets.patterns[3]", "empty pattern: give a regular expression for the secret text"),
	}},
}

func TestBadExperiments(t *testing.T) {
	if len(badExperiments) < 30 {
		t.Fatalf("only %d bad manifests; want at least 30", len(badExperiments))
	}
	for _, tc := range badExperiments {
		t.Run(tc.name, func(t *testing.T) {
			x, ps := Parse("bad.yaml", []byte(tc.yaml))
			if x == nil {
				t.Fatal("Parse returned no experiment")
			}
			wantErr := false
			for _, p := range tc.want {
				wantErr = wantErr || !p.Warning
			}
			if (ps.Err() != nil) != wantErr {
				t.Errorf("Err() = %v, want an error: %v", ps.Err(), wantErr)
			}
			for _, p := range ps {
				if p.File != "bad.yaml" {
					t.Errorf("problem %v names file %q", p, p.File)
				}
			}
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}

func assertProblems(t *testing.T, got, want []prob) {
	t.Helper()
	if os.Getenv("PRINT_PROBLEMS") != "" {
		fmt.Printf("@@ %s\n", t.Name()[strings.Index(t.Name(), "/")+1:])
		for _, p := range got {
			fn := "e"
			if p.Warning {
				fn = "w"
			}
			fmt.Printf("\t\t%s(%d, %d, %q, %q),\n", fn, p.Line, p.Col, p.Field, p.Msg)
		}
	}
	n := max(len(got), len(want))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(got):
			t.Errorf("missing problem %d: %v", i, want[i])
		case i >= len(want):
			t.Errorf("unexpected problem %d: %v", i, got[i])
		case got[i] != want[i]:
			t.Errorf("problem %d:\n got  %v\n want %v", i, got[i], want[i])
		}
	}
}

// TestGoodExperiments: the manifests under testdata/good are free of
// problems, warnings included.
func TestGoodExperiments(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d good manifests; want at least 3", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			x, ps := Load(f)
			for _, p := range ps {
				t.Errorf("%v", p)
			}
			if x == nil || x.ID == "" || x.Flow == nil {
				t.Fatalf("Load(%s) = %+v", f, x)
			}
		})
	}
}

// TestGoodModel checks the model of testdata/good/everything.yaml means
// what the file says.
func TestGoodModel(t *testing.T) {
	x, ps := Load("testdata/good/everything.yaml")
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	if x.Version != 4 || x.Timeout.String() != "15m" || x.Env["TICKS"] != "120" || len(x.Metrics) != 2 {
		t.Errorf("top level: version %d timeout %s env %v metrics %v", x.Version, x.Timeout, x.Env, x.Metrics)
	}
	c := x.Workload("counter")
	if c == nil || c.InstanceCount() != 4 || c.Timeout.String() != "5m" || c.Image != "busybox:1.36" || len(c.Checks) != 2 {
		t.Fatalf("counter: %+v", c)
	}
	if c.Checks[0].Equals == nil || *c.Checks[0].Equals != 0 || c.Checks[1].Timeout.String() != "10s" {
		t.Errorf("counter checks: %+v", c.Checks)
	}
	if w := x.Workload("fresh"); w == nil || w.InstanceCount() != 1 {
		t.Errorf("fresh: %+v", w)
	}
	sel := map[string]string{}
	for _, o := range x.Operations {
		sel[o.Name] = o.Select.KindOrDefault() + " " + o.Select.String()
	}
	want := map[string]string{
		"freeze-half": "percent 50%",
		"kill-two":    "instances counter-1, counter-3",
		"bounce-one":  "one one",
		"again":       "count 2",
		"all-of-them": "all all",
	}
	for k, v := range want {
		if sel[k] != v {
			t.Errorf("select of %s = %q, want %q", k, sel[k], v)
		}
	}
	if o := x.Operation("kill-two"); o.Jitter.String() != "4s" || o.Target.String() != "{workload: counter}" {
		t.Errorf("kill-two: jitter %s target %s", o.Jitter, o.Target)
	}
	if o := x.Operation("bounce-one"); o.Grace.String() != "5s" {
		t.Errorf("bounce-one grace %s", o.Grace)
	}
	var labels []string
	x.Flow.Walk(func(f *FlowNode) { labels = append(labels, f.Label()) })
	wantLabels := "serial|parallel|counter|serial|wait counter running|delay 2s|freeze-half|repeat for 1m, 2 times|kill-two|repeat 1 times|parallel|bounce-one|again|all-of-them|wait counter finished|fresh"
	if got := strings.Join(labels, "|"); got != wantLabels {
		t.Errorf("flow labels\n got  %s\n want %s", got, wantLabels)
	}
	if e := x.Expectations[0]; e.KindOrDefault() != ExpectFlaky || len(e.Checks) != 2 {
		t.Errorf("expectation 0: %+v", e)
	}
	if e := x.Expectations[1]; e.KindOrDefault() != ExpectKnown {
		t.Errorf("expectation 1: %+v", e)
	}
	if got := strings.Join(x.Issues(), ","); got != "example/repo#1,example/repo#2" {
		t.Errorf("Issues() = %s", got)
	}
	if ch := x.Checks[0]; ch.Max == nil || *ch.Max != 0 || ch.Min != nil {
		t.Errorf("no-restart-events: %+v", ch)
	}
}

// TestAliasBomb: nested aliases that would expand to millions of flow
// nodes are refused quickly instead of walked.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: chaos/v1alpha1\nid: t\nworkloads:\n  - name: w\n    run: echo\n")
	b.WriteString("operations:\n  - name: k\n    uses: kill\n    target: {workload: w}\nflow:\n  serial:\n    - w\n")
	b.WriteString("    - &a0 [k, k, k, k, k, k, k, k, k, k]\n")
	for i := 1; i < 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "    - &a%d [%s]\n", i, refs)
	}
	_, ps := Parse("bomb.yaml", []byte(b.String()))
	assertProblems(t, probsOf(ps), []prob{
		e(13, 15, "flow.serial[4][7][9][0][1]", "the document expands more than 10000 values through aliases; write the repeated parts out"),
	})
}

// TestAliasesAreFollowed: a modest use of anchors and aliases decodes as if
// written out.
func TestAliasesAreFollowed(t *testing.T) {
	src := doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: a
    run: &script echo hi
    checks: &checks
      - {name: exited-ok, kind: exit-code, equals: 0}
  - name: b
    run: *script
    checks: *checks
flow: [a, b]
`)
	x, ps := Parse("aliases.yaml", []byte(src))
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	if x.Workloads[1].Run != "echo hi" || len(x.Workloads[1].Checks) != 1 || x.Workloads[1].Checks[0].Name != "exited-ok" {
		t.Errorf("b = %+v", x.Workloads[1])
	}
}

// TestProblemText: a problem prints as file:line:col: field: message.
func TestProblemText(t *testing.T) {
	_, ps := Parse("dir/x.yaml", []byte(badExperiments[0].yaml))
	want := `dir/x.yaml:5:5: workloads[0].instnaces: unknown field "instnaces" (did you mean "instances"?)`
	if ps.Error() != want {
		t.Errorf("got  %s\nwant %s", ps.Error(), want)
	}
}

// TestLoadMissingFile: a file that cannot be read is one problem naming it.
func TestLoadMissingFile(t *testing.T) {
	x, ps := Load("testdata/no-such-file.yaml")
	if x != nil || len(ps) != 1 || ps[0].File != "testdata/no-such-file.yaml" || !strings.HasPrefix(ps[0].Msg, "cannot read the experiment: ") {
		t.Errorf("Load = %v, %v", x, ps)
	}
}
