package binding

import (
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
)

var netAdapters = map[string]string{
	"host": `apiVersion: chaos/v1alpha1
id: host
backend: process
targets:
  db: {type: process, pid-file: db.pid, lifecycle: run, start: "true"}
`,
	"isolated": `apiVersion: chaos/v1alpha1
id: isolated
backend: process
options: {network: isolated}
targets:
  db: {type: process, pid-file: db.pid, lifecycle: run, start: "true"}
  ext: {type: process, pid-file: ext.pid}
`,
	"docker": `apiVersion: chaos/v1alpha1
id: docker
backend: docker
roles:
  sidecar: {type: container, image: busybox, run: sleep 1}
targets:
  web: {type: container, container: web}
`,
	"pods": `apiVersion: chaos/v1alpha1
id: pods
backend: kubernetes
roles:
  sidecar: {type: container, image: busybox, run: sleep 1}
targets:
  web: {type: pod, labels: {app: web}}
`,
}

const netExp = `apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: w, instances: 3, run: "true"}
operations:
`

func bindNet(t *testing.T, adapterID, ops, flow string) Result {
	t.Helper()
	a, ps := adapter.Parse(adapterID+".yaml", []byte(netAdapters[adapterID]))
	if len(ps) != 0 {
		t.Fatalf("adapter %s: %v", adapterID, ps)
	}
	x, ps := experiment.Parse("x.yaml", []byte(netExp+ops+"flow: {parallel: [w, "+flow+"]}\n"))
	if ps.Err() != nil {
		t.Fatalf("experiment: %v", ps)
	}
	return Bind(x, a)
}

func TestNetworkFaultSupport(t *testing.T) {
	for _, tc := range []struct {
		name, adapter, ops, flow string
		status                   Status
		reason                   string
	}{
		{"instances share the host's network", "host", "  - {name: slow, uses: latency, target: {workload: w}, network: {delay: 1ms}}\n", "slow", NA,
			"operation slow: latency on instances of w: processes share the host's network namespace, which the harness never changes; set options: {network: isolated} on the adapter to give each instance and run-owned target one of its own"},
		{"isolated instances", "isolated", "  - {name: slow, uses: latency, target: {workload: w}, network: {delay: 1ms}}\n", "slow", Valid, ""},
		{"a run-owned target in its namespace", "isolated", "  - {name: rst, uses: reset, target: db}\n", "rst", Valid, ""},
		{"an external target", "isolated", "  - {name: rst, uses: reset, target: ext}\n", "rst", NA,
			"operation rst: reset on target ext: target ext is external: it runs in the host's network namespace, which the harness never changes (a target the run owns, lifecycle: run, gets a namespace of its own)"},
		{"a partition of instances and a target", "isolated", "  - {name: split, uses: partition, network: {groups: [[w-0, db], [w]]}}\n", "split", Valid, ""},
		{"a partition with an external member", "isolated", "  - {name: split, uses: partition, network: {members: [w, ext], shape: halves}}\n", "split", NA,
			"operation split: partition on target ext: target ext is external: it runs in the host's network namespace, which the harness never changes (a target the run owns, lifecycle: run, gets a namespace of its own)"},
		{"containers", "docker", "  - {name: hole, uses: blackhole, target: {workload: w}}\n  - {name: lossy, uses: loss, target: web, network: {percent: 5}}\n  - {name: thin, uses: bandwidth, target: {workload: w, role: sidecar}, network: {rate: 1mbit}}\n", "{serial: [hole, lossy, thin]}", Valid, ""},
		{"pods", "pods", "  - {name: hole, uses: blackhole, target: {workload: w}}\n  - {name: lossy, uses: loss, target: web, network: {percent: 5}}\n", "{serial: [hole, lossy]}", Valid, ""},
		{"a pod's sidecar", "pods", "  - {name: thin, uses: bandwidth, target: {workload: w, role: sidecar}, network: {rate: 1mbit}}\n", "thin", NA,
			"operation thin: bandwidth on role sidecar: the containers of a pod share its network namespace: a network fault there acts on the whole pod; aim it at the instance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bindNet(t, tc.adapter, tc.ops, tc.flow)
			if r.Status != tc.status || strings.Join(r.Reasons, "\n") != tc.reason {
				t.Errorf("status %s, reasons %q; want %s, %q (problems %v)", r.Status, r.Reasons, tc.status, tc.reason, r.Problems)
			}
		})
	}
}

func TestPartitionMemberNames(t *testing.T) {
	r := bindNet(t, "isolated", "  - {name: split, uses: partition, network: {members: [w, dbb], shape: halves}}\n", "split")
	if r.Status != Invalid || len(r.Problems) != 1 || r.Problems[0].Field != "operations[0].network.members[1]" ||
		r.Problems[0].Msg != `"dbb" is neither a workload, an instance nor a target of adapter isolated (did you mean "db"?)` {
		t.Errorf("%s %v", r.Status, r.Problems)
	}
}
