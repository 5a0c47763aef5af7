package binding

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

type prob struct {
	Line, Col int
	Field     string
	Msg       string
}

func (p prob) String() string { return fmt.Sprintf("%d:%d %s: %s", p.Line, p.Col, p.Field, p.Msg) }

func e(line, col int, field, msg string) prob { return prob{line, col, field, msg} }

func doc(s string) string { return strings.TrimPrefix(s, "\n") }

// The adapters the cases bind to.
var adapters = map[string]string{
	"proc": doc(`
apiVersion: chaos/v1alpha1
id: proc
backend: process
targets:
  gateway: {type: process, pid-file: gw.pid}
  front: {type: process, pid-file: front.pid, faults: [kill, restart]}
  db: {type: container, container: db}
operations:
  policy-set:
    run: ./policy set "$CHAOS_PARAM_POLICY"
    params:
      policy: {description: the policy}
      mode: {default: enforce}
      level:
  sandbox-restart:
    run: ./restart
watch:
  - {name: log, run: tail -F gw.log}
signals:
  reconcile-sweep: {watch: log, pattern: sweep done}
  leader-change: {unavailable: a single gateway elects no leader}
preflight:
  - {name: disk-space, run: df}
checks:
  - {name: no-leaked-processes, run: "true"}
unsupported:
  restart-in-place: instances here have no place to restart in
`),
	"pods": doc(`
apiVersion: chaos/v1alpha1
id: pods
backend: kubernetes
targets:
  gateway: {type: pod, labels: {app: gateway}}
  db: {type: container, container: db}
roles:
  supervisor: {type: pod}
  agent: {type: process}
`),
	"hooks": doc(`
apiVersion: chaos/v1alpha1
id: hooks
backend: hooks
instance:
  create: ./create
  state: ./state
targets:
  gateway: {type: process, pid-file: gw.pid}
`),
	"docker": doc(`
apiVersion: chaos/v1alpha1
id: docker
backend: docker
instance:
  faults: [kill, restart]
targets:
  db: {type: container, container: db}
  gateway: {type: process, pid-file: gw.pid}
  roles:
    supervisor: {type: container, faults: [kill]}
`),
}

// faults is the list of built-in faults as messages print it.
var faults = strings.Join(experiment.Faults, ", ")

type bindCase struct {
	name       string
	adapter    string
	experiment string
	status     Status
	problems   []prob
	reasons    []string
}

var bindCases = []bindCase{
	{name: "valid", adapter: "proc", status: Valid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: down, uses: outage, target: gateway, duration: 15s}
  - {name: kill-two, uses: kill, target: {workload: counter}, select: {count: 2}}
  - {name: freeze-all, uses: freeze, target: {workload: counter}, duration: 5s}
  - {name: policy, uses: policy-set, target: {workload: counter}, with: {policy: strict, level: "3"}}
  - {name: bounce, uses: sandbox-restart}
  - {name: front-kill, uses: kill, target: front}
flow:
  parallel:
    - counter
    - serial:
        - wait: {signal: reconcile-sweep, delay: 57500ms, timeout: 3m}
        - down
        - kill-two
        - freeze-all
        - policy
        - bounce
        - front-kill
checks:
  - {name: swept, kind: event, event: node.finished}
expectations:
  - issue: x/y#1
    checks: [adapter/no-leaked-processes, preflight/disk-space, experiment/swept]
`)},
	{name: "uses neither a fault nor an adapter operation", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: p, uses: policy-sett, with: {policy: x}}
flow:
  parallel:
    - counter
    - p
`), problems: []prob{
		e(8, 21, "operations[0].uses", "\"policy-sett\" is neither a built-in fault ("+faults+") nor an operation of adapter proc (did you mean \"policy-set\"?)"),
	}},
	{name: "uses an adapter operation the adapter lacks, no suggestion", adapter: "pods", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: p, uses: policy-set}
flow:
  parallel:
    - counter
    - p
`), problems: []prob{
		e(8, 21, "operations[0].uses", "\"policy-set\" is neither a built-in fault ("+faults+") nor an operation of adapter pods"),
	}},
	{name: "target not defined by the adapter", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: down, uses: outage, target: gatway, duration: 15s}
flow:
  parallel:
    - counter
    - down
`), problems: []prob{
		e(8, 40, "operations[0].target", "adapter proc defines no target \"gatway\" (did you mean \"gateway\"?)"),
	}},
	{name: "role not defined by the adapter", adapter: "docker", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: {workload: counter, role: supervisr}}
flow:
  parallel:
    - counter
    - k
`), problems: []prob{
		e(8, 61, "operations[0].target.role", "adapter docker defines no role \"supervisr\" (did you mean \"supervisor\"?)"),
	}},
	{name: "adapter operation on an undefined target", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: p, uses: sandbox-restart, target: database}
flow:
  parallel:
    - counter
    - p
`), problems: []prob{
		e(8, 46, "operations[0].target", "adapter proc defines no target \"database\""),
	}},
	{name: "wait on a signal the adapter does not declare", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
flow:
  parallel:
    - counter
    - wait: {signal: reconcile-swept}
`), problems: []prob{
		e(10, 22, "flow.parallel[1].wait.signal", "adapter proc declares no signal \"reconcile-swept\" (did you mean \"reconcile-sweep\"?)"),
	}},
	{name: "a generate aimed at a signal the adapter does not declare", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    run: echo
operations:
  - {name: k, uses: kill, target: {workload: counter}}
flow:
  parallel:
    - counter
    - generate: {times: 1, after: {signal: reconcile-swept}, operations: [k]}
    - generate: {times: 1, after: reconcile-swep, operations: [k]}
    - generate: {times: 1, after: reconcile-sweep, operations: [k]}
`), problems: []prob{
		e(11, 44, "flow.parallel[1].generate.after.signal", "adapter proc declares no signal \"reconcile-swept\" (did you mean \"reconcile-sweep\"?)"),
		e(12, 35, "flow.parallel[2].generate.after.signal", "adapter proc declares no signal \"reconcile-swep\" (did you mean \"reconcile-sweep\"?)"),
	}},
	{name: "wait on a signal of an adapter with none", adapter: "pods", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
flow:
  parallel:
    - counter
    - wait: {signal: reconcile-sweep}
`), problems: []prob{
		e(10, 22, "flow.parallel[1].wait.signal", "adapter pods declares no signal \"reconcile-sweep\""),
	}},
	{name: "signal declared unavailable is n/a", adapter: "proc", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
flow:
  parallel:
    - counter
    - wait: {signal: leader-change}
    - serial: [{wait: {signal: leader-change, timeout: 1m}}]
`), reasons: []string{
		"signal leader-change is unavailable on proc: a single gateway elects no leader",
	}},
	{name: "freeze on a pod target is valid (its cgroup)", adapter: "pods", status: Valid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: f, uses: freeze, target: gateway, duration: 5s}
flow:
  parallel:
    - counter
    - f
`)},
	{name: "kill on a pod target is valid", adapter: "pods", status: Valid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: gateway}
  - {name: o, uses: outage, target: gateway, duration: 1s}
flow:
  parallel:
    - counter
    - k
    - o
`)},
	{name: "container target on a kubernetes adapter is n/a", adapter: "pods", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: db}
flow:
  parallel:
    - counter
    - k
`), reasons: []string{
		"operation k: kill on target db: the kubernetes backend cannot act on a container",
	}},
	{name: "container target on a process adapter is n/a", adapter: "proc", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: db}
flow:
  parallel:
    - counter
    - k
`), reasons: []string{
		"operation k: kill on target db: the process backend cannot act on a container",
	}},
	{name: "fault on the instances of a hooks adapter is n/a", adapter: "hooks", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: {workload: counter}}
flow:
  parallel:
    - counter
    - k
`), reasons: []string{
		"operation k: kill on instances of counter: instances are made by the adapter's hooks, so the harness cannot act on them directly; target a role or named target instead",
	}},
	{name: "fault on a process target of a hooks adapter is valid", adapter: "hooks", status: Valid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: restart, target: gateway}
flow:
  parallel:
    - counter
    - k
`)},
	{name: "fault on pod instances the backend cannot do", adapter: "pods", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: f, uses: outage, target: {workload: counter}, duration: 1s}
flow:
  parallel:
    - counter
    - f
`), reasons: []string{
		"operation f: outage on instances of counter: kubelet restarts a container on its own schedule, so a container cannot be held down; no outage",
	}},
	{name: "fault the adapter declares unsupported", adapter: "proc", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: r, uses: restart-in-place, target: {workload: counter}}
flow:
  parallel:
    - counter
    - r
`), reasons: []string{
		"operation r: restart-in-place on instances of counter: instances here have no place to restart in",
	}},
	{name: "fault a target does not list", adapter: "proc", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: f, uses: freeze, target: front}
flow:
  parallel:
    - counter
    - f
`), reasons: []string{
		"operation f: freeze on target front: the adapter lists only kill, restart for it",
	}},
	{name: "fault instances do not list", adapter: "docker", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: f, uses: freeze, target: {workload: counter}}
  - {name: k, uses: kill, target: {workload: counter}}
flow:
  parallel:
    - counter
    - f
    - k
`), reasons: []string{
		"operation f: freeze on instances of counter: the adapter lists only kill, restart for it",
	}},
	{name: "workload clock offsets on containers are n/a", adapter: "docker", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: w, run: echo, clock: {monotonic: 1h}}
flow: w
`), reasons: []string{
		"workload w: clock offsets need instances started in a time namespace of their own, which the docker backend of adapter docker does not start",
	}},
	{name: "workload clock offsets on local processes bind", adapter: "proc", status: Valid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: w, run: echo, clock: {monotonic: 1h}}
flow: w
`)},
	{name: "fault a role does not list", adapter: "docker", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: r, uses: restart, target: {workload: counter, role: supervisor}}
flow:
  parallel:
    - counter
    - r
`), reasons: []string{
		"operation r: restart on role supervisor: the adapter lists only kill for it",
	}},
	{name: "a pod role on kubernetes is valid", adapter: "pods", status: Valid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: {workload: counter, role: supervisor}}
flow:
  parallel:
    - counter
    - k
`)},
	{name: "a role of a kind the backend has no roles of is n/a", adapter: "pods", status: NA, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: {workload: counter, role: agent}}
flow:
  parallel:
    - counter
    - k
`), reasons: []string{
		"operation k: kill on role agent: the role is a process; on kubernetes, roles are container, pod",
	}},
	{name: "select count above one on a named target", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: k, uses: kill, target: gateway, select: {count: 2}}
flow:
  parallel:
    - counter
    - k
`), problems: []prob{
		e(8, 60, "operations[0].select.count", "selects 2 but target \"gateway\" is one process"),
	}},
	{name: "adapter check expectation names a missing adapter check", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
flow:
  parallel:
    - counter
expectations:
  - issue: x/y#1
    checks: [adapter/no-leaked-process, preflight/disk-spcae]
`), problems: []prob{
		e(12, 14, "expectations[0].checks[0]", "adapter proc has no check named \"no-leaked-process\" (did you mean \"no-leaked-processes\"?)"),
		e(12, 41, "expectations[0].checks[1]", "neither adapter proc nor the experiment has a preflight check named \"disk-spcae\""),
	}},
	{name: "adapter operation missing required parameters", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: p, uses: policy-set, target: {workload: counter}}
flow:
  parallel:
    - counter
    - p
`), problems: []prob{
		e(8, 5, "operations[0]", "adapter operation policy-set needs parameter \"level\" under with"),
		e(8, 5, "operations[0]", "adapter operation policy-set needs parameter \"policy\" under with"),
	}},
	{name: "adapter operation given an unknown parameter", adapter: "proc", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: p, uses: policy-set, with: {policy: strict, level: "1", modes: audit}}
flow:
  parallel:
    - counter
    - p
`), problems: []prob{
		e(8, 75, "operations[0].with.modes", "adapter operation policy-set takes no parameter \"modes\" (did you mean \"mode\"?)"),
	}},
	{name: "errors win over n/a", adapter: "pods", status: Invalid, experiment: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: counter
    instances: 3
    run: echo
operations:
  - {name: f, uses: freeze, target: gateway}
  - {name: g, uses: kill, target: gatewy}
flow:
  parallel:
    - counter
    - f
    - g
`), problems: []prob{
		e(9, 35, "operations[1].target", "adapter pods defines no target \"gatewy\" (did you mean \"gateway\"?)"),
	}},
}

func TestBind(t *testing.T) {
	parsed := map[string]*adapter.Adapter{}
	for id, src := range adapters {
		a, ps := adapter.Parse(id+".yaml", []byte(src))
		if len(ps) != 0 {
			t.Fatalf("adapter %s: %v", id, ps)
		}
		parsed[id] = a
	}
	for _, tc := range bindCases {
		t.Run(tc.name, func(t *testing.T) {
			x, ps := experiment.Parse("x.yaml", []byte(tc.experiment))
			if ps.Err() != nil {
				t.Fatalf("the experiment is invalid on its own: %v", ps)
			}
			r := Bind(x, parsed[tc.adapter])
			got := probsOf(r.Problems)
			if os.Getenv("PRINT_PROBLEMS") != "" {
				fmt.Printf("@@ %s %s\n", tc.name, r.Status)
				for _, p := range got {
					fmt.Printf("\t\te(%d, %d, %q, %q),\n", p.Line, p.Col, p.Field, p.Msg)
				}
				for _, s := range r.Reasons {
					fmt.Printf("\t\t%q,\n", s)
				}
			}
			if r.Status != tc.status {
				t.Errorf("status %s, want %s", r.Status, tc.status)
			}
			n := max(len(got), len(tc.problems))
			for i := 0; i < n; i++ {
				switch {
				case i >= len(got):
					t.Errorf("missing problem %d: %v", i, tc.problems[i])
				case i >= len(tc.problems):
					t.Errorf("unexpected problem %d: %v", i, got[i])
				case got[i] != tc.problems[i]:
					t.Errorf("problem %d:\n got  %v\n want %v", i, got[i], tc.problems[i])
				}
			}
			if strings.Join(r.Reasons, "\n") != strings.Join(tc.reasons, "\n") {
				t.Errorf("reasons\n got  %q\n want %q", r.Reasons, tc.reasons)
			}
			for _, p := range r.Problems {
				if p.File != "x.yaml" {
					t.Errorf("problem %v is not in the experiment file", p)
				}
			}
		})
	}
}

func probsOf(ps manifest.Problems) []prob {
	out := []prob{}
	for _, p := range ps {
		out = append(out, prob{p.Pos.Line, p.Pos.Column, p.Field, p.Msg})
	}
	return out
}

func TestInstanceBudget(t *testing.T) {
	x, ps := experiment.Parse("x.yaml", []byte(`apiVersion: chaos/v1alpha1
id: budget
workloads:
  - {name: a, instances: 3, run: "true"}
  - {name: b, instances: 4, run: "true"}
  - {name: c, instances: 6, run: "true"}
flow:
  serial:
    - parallel: [a, b]
    - c
`))
	if err := ps.Err(); err != nil {
		t.Fatal(err)
	}
	if n := MaxConcurrentInstances(x); n != 7 {
		t.Fatalf("MaxConcurrentInstances = %d, want 7 (a and b together; c alone)", n)
	}
	for limit, want := range map[int]Status{7: Valid, 6: Invalid} {
		a, aps := adapter.Parse("a.yaml", []byte(fmt.Sprintf("apiVersion: chaos/v1alpha1\nid: small\nbackend: process\nlimits: {instances: %d}\n", limit)))
		if err := aps.Err(); err != nil {
			t.Fatal(err)
		}
		r := Bind(x, a)
		if r.Status != want {
			t.Errorf("limit %d: %s, want %s: %v", limit, r.Status, want, r.Problems)
		}
		if want == Invalid && !strings.Contains(r.Problems.Error(), "the flow can run 7 instances at once, over adapter small's budget of 6") {
			t.Errorf("limit %d: %v", limit, r.Problems)
		}
	}
}
