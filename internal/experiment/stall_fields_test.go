package experiment

import (
	"reflect"
	"strings"
	"testing"
)

// TestStallFaultFields: after-ready and except-during belong to stall
// checks, and except-during names operations of the experiment.
func TestStallFaultFields(t *testing.T) {
	const head = `apiVersion: chaos/v1alpha1
id: stall-fields
workloads:
  - name: client
    run: echo hi
    checks:
`
	const tail = `operations:
  - name: server-down
    uses: outage
    target: server
    duration: 5s
flow: {parallel: [client, server-down]}
`
	cases := []struct {
		name   string
		checks string
		want   []prob
	}{
		{"valid", `      - {name: live, kind: stall, file: log, limit: 10s, after-ready: server, except-during: [server-down]}
`, nil},
		{"unknown operation", `      - {name: live, kind: stall, file: log, limit: 10s, except-during: [server-dwn]}
`, []prob{e(7, 74, "workloads[0].checks[0].except-during[0]", `no operation named "server-dwn" (did you mean "server-down"?)`)}},
		{"not a target name", `      - {name: live, kind: stall, file: log, limit: 10s, after-ready: "Server Two"}
`, []prob{e(7, 71, "workloads[0].checks[0].after-ready", `"Server Two" is not a target name: name a target of the adapter, e.g. after-ready: gateway`)}},
		{"misplaced", `      - {name: code, kind: exit-code, after-ready: server, except-during: [server-down]}
`, []prob{
			e(7, 52, "workloads[0].checks[0].after-ready", "after-ready only applies to stall checks, not exit-code"),
			e(7, 75, "workloads[0].checks[0].except-during", "except-during only applies to stall checks, not exit-code"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ps := Parse("x.yaml", []byte(head+c.checks+tail))
			var got []prob
			for _, p := range probsOf(ps) {
				if !p.Warning {
					got = append(got, p)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("problems:\n got %v\nwant %v", got, c.want)
			}
		})
	}
}

// TestStallAfterReadyInstanceNeedsReady: after-ready: instance reads the
// workload's own ready, so the workload must have one.
func TestStallAfterReadyInstanceNeedsReady(t *testing.T) {
	src := `apiVersion: chaos/v1alpha1
id: stall-self
workloads:
  - name: client
    run: echo hi
    checks:
      - {name: live, kind: stall, file: log, limit: 10s, after-ready: instance}
flow: client
`
	_, ps := Parse("x.yaml", []byte(src))
	want := []prob{e(7, 71, "workloads[0].checks[0].after-ready", "after-ready: instance needs the workload's ready: how an instance says it is ready (a line it prints, a file it makes)")}
	if got := probsOf(ps); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n got %v\nwant %v", got, want)
	}
	_, ps = Parse("x.yaml", []byte(strings.Replace(src, "    run: echo hi\n", "    run: echo hi\n    ready: {pattern: ready}\n", 1)))
	if got := probsOf(ps); len(got) != 0 {
		t.Errorf("with ready: %v", got)
	}
}
