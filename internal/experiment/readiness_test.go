package experiment

import (
	"strings"
	"testing"
)

func TestReadinessAndAimsProblems(t *testing.T) {
	head := "apiVersion: chaos/v1alpha1\nid: r\n"
	w := "workloads:\n  - name: w\n    run: \"true\"\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"ready needs something", head + w + "    ready: {}\nflow: w\n", "workloads[0].ready: ready needs pattern"},
		{"bad pattern", head + w + "    ready: {pattern: '('}\nflow: w\n", "workloads[0].ready.pattern: invalid regular expression"},
		{"file outside", head + w + "    ready: {file: ../x}\nflow: w\n", `workloads[0].ready.file: "../x" must be a path inside`},
		{"ready wait without ready", head + w + "flow: [{wait: {workload: w, condition: ready}}, w]\n", "flow[0].wait.condition: workload w says nothing of how it is ready"},
		{"since on a running wait", head + w + "flow: [{wait: {workload: w, condition: running, since: now}}, w]\n", "flow[0].wait.since: since applies to signal waits and to condition: ready"},
		{"since of a ready wait", head + w + "    ready: {file: up}\nflow: [{wait: {workload: w, condition: ready, since: k}}, w]\n", `a ready wait counts since each instance's latest start (start, the default) or since the wait began (now); got "k"`},
		{"since no operation", head + w + "operations:\n  - {name: kill-w, uses: kill, target: {workload: w}}\nflow: [w, {wait: {signal: s, since: kil-w}}, kill-w]\n", `flow[1].wait.since: expected now, start or an operation's name (lines since its latest application began), got "kil-w" (did you mean "kill-w"?)`},
		{"skip needs something", head + w + "operations:\n  - {name: o, uses: kill, target: {workload: w}, skip: {}}\nflow: [w, o]\n", "operations[0].skip: skip needs states"},
		{"skip unknown state", head + w + "operations:\n  - {name: o, uses: kill, target: {workload: w}, skip: {states: [Error]}}\nflow: [w, o]\n", `operations[0].skip.states[0]: unknown state "Error"`},
		{"skip states of a named target", head + w + "operations:\n  - {name: o, uses: kill, target: gateway, skip: {states: [Unknown]}}\nflow: [w, o]\n", "operations[0].skip.states: states leave out instances by their state"},
		{"phases not crash-loop", head + w + "operations:\n  - {name: o, uses: kill, target: gateway, phases: {ready: {signal: up}}}\nflow: [w, o]\n", "operations[0].phases: phases aim the kills of a crash-loop; kill has none"},
		{"phase without signal", head + w + "operations:\n  - {name: o, uses: crash-loop, target: gateway, phases: {ready: {timeout: 1s}}}\nflow: [w, o]\n", "operations[0].phases.ready: missing signal"},
		{"duration-max below", head + w + "operations:\n  - {name: o, uses: outage, target: gateway, duration: 2s, duration-max: 1s}\nflow: [w, o]\n", "operations[0].duration-max: duration-max 1s is below duration 2s"},
		{"duration-max alone", head + w + "operations:\n  - {name: o, uses: freeze, target: gateway, duration-max: 1s}\nflow: [w, o]\n", "operations[0].duration-max: duration-max needs duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("r.yaml", []byte(tc.doc))
			if !strings.Contains(ps.Error(), tc.want) || !strings.Contains(ps.Error(), "r.yaml:") {
				t.Errorf("problems:\n%v\nwant %q", ps, tc.want)
			}
		})
	}
}

func TestReadinessAndAimsParse(t *testing.T) {
	doc := `apiVersion: chaos/v1alpha1
id: r
workloads:
  - name: w
    run: "true"
    ready: {pattern: 'sandbox ready', file: boot.log}
operations:
  - name: k6
    uses: crash-loop
    target: gateway
    phases:
      recovering: {signal: server-recovering}
      ready: {signal: server-ready, timeout: 5s}
  - name: hold
    uses: outage
    target: gateway
    duration: 2s
    duration-max: 5s
  - name: stop-start
    uses: restart
    target: {workload: w}
    skip: {states: [Unknown], run: 'test -e "$CHAOS_RUN_DIR/$CHAOS_INSTANCE.error"'}
flow:
  serial:
    - w
    - {wait: {workload: w, condition: ready}}
    - k6
    - {wait: {signal: server-ready, since: k6}}
    - hold
    - stop-start
`
	x, ps := Parse("r.yaml", []byte(doc))
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	if r := x.Workloads[0].Ready; r == nil || r.Pattern != "sandbox ready" || r.File != "boot.log" {
		t.Errorf("ready %+v", r)
	}
	if ph := x.Operations[0].Phases; ph.Recovering.Signal != "server-recovering" || ph.Ready.Timeout.String() != "5s" {
		t.Errorf("phases %+v", ph)
	}
	if o := x.Operations[1]; o.DurationMax.String() != "5s" {
		t.Errorf("duration-max %s", o.DurationMax)
	}
	if s := x.Operations[2].Skip; len(s.States) != 1 || s.Run == "" {
		t.Errorf("skip %+v", s)
	}
	if w := x.Flow.Children[3].Wait; w.Since != "k6" {
		t.Errorf("since %q", w.Since)
	}
}
