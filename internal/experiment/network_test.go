package experiment

import (
	"testing"
)

const netHead = `apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: db, instances: 3, run: "true"}
operations:
`

// netBad are network operations each wrong in a known way, with every
// problem at its file:line:col.
var netBad = []badCase{
	{name: "latency without delay", yaml: netHead + `  - {name: slow, uses: latency, target: {workload: db}}
flow: {parallel: [db, slow]}
`, want: []prob{
		e(6, 5, "operations[0]", "missing network.delay: latency needs it, e.g. network: {delay: 100ms}"),
	}},
	{name: "latency with a jitter above the delay and a bad correlation", yaml: netHead + `  - name: slow
    uses: latency
    target: {workload: db}
    network: {delay: 10ms, jitter: 20ms, correlation: 120}
flow: {parallel: [db, slow]}
`, want: []prob{
		e(9, 36, "operations[0].network.jitter", "jitter 20ms is more than the delay 10ms: a packet cannot leave before it was sent"),
		e(9, 55, "operations[0].network.correlation", "120 is not a percentage from 0 to 100"),
	}},
	{name: "a field of another fault", yaml: netHead + `  - {name: lossy, uses: loss, target: {workload: db}, network: {percent: 10, delay: 5ms}}
flow: {parallel: [db, lossy]}
`, want: []prob{
		e(6, 85, "operations[0].network.delay", "delay applies to latency, not loss"),
	}},
	{name: "loss over 100 percent", yaml: netHead + `  - {name: lossy, uses: loss, target: {workload: db}, network: {percent: 150}}
flow: {parallel: [db, lossy]}
`, want: []prob{
		e(6, 74, "operations[0].network.percent", "150 is not a percentage above 0 and at most 100"),
	}},
	{name: "bandwidth with a bad rate", yaml: netHead + `  - {name: thin, uses: bandwidth, target: {workload: db}, network: {rate: fast}}
flow: {parallel: [db, thin]}
`, want: []prob{
		e(6, 75, "operations[0].network.rate", `"fast" is not a rate: want a number and a unit (bit, kbit, mbit, gbit, or bps, kbps, mbps, gbps for bytes), e.g. 1mbit`),
	}},
	{name: "network on a fault that takes none", yaml: netHead + `  - {name: k, uses: kill, target: {workload: db}, network: {delay: 1s}}
flow: {parallel: [db, k]}
`, want: []prob{
		e(6, 60, "operations[0].network", "network gives the parameters of network faults (latency, loss, bandwidth, reset, blackhole, partition); kill takes none"),
	}},
	{name: "partition with no members", yaml: netHead + `  - {name: split, uses: partition, network: {shape: halves}}
flow: {parallel: [db, split]}
`, want: []prob{
		e(6, 5, "operations[0]", "a partition needs its members: target (a workload's instances, a target's containers or pods), network.members, or network.groups"),
	}},
	{name: "partition with an unknown shape, isolate on halves, a bad direction", yaml: netHead + `  - name: split
    uses: partition
    target: {workload: db}
    jitter: 1s
    network: {shape: isolate, isolate: db-0, direction: sideways}
flow: {parallel: [db, split]}
`, want: []prob{
		e(9, 13, "operations[0].jitter", "a partition cuts every member off at once; jitter does not apply"),
		e(10, 22, "operations[0].network.shape", "unknown shape \"isolate\"; expected one of halves, majority, isolate-one, ring, groups"),
		e(10, 40, "operations[0].network.isolate", "isolate applies to shape isolate-one"),
		e(10, 57, "operations[0].network.direction", "unknown direction \"sideways\"; expected both or one-way"),
	}},
	{name: "partition named two ways, a member twice, an instance that is not", yaml: netHead + `  - name: split
    uses: partition
    target: {workload: db}
    network: {groups: [[db-0, db-9], [db-0]]}
flow: {parallel: [db, split]}
`, want: []prob{
		e(9, 14, "operations[0].network", "name the partition's members one way: target, network.members or network.groups"),
		e(9, 31, "operations[0].network.groups[0][1]", "\"db-9\" is not an instance of workload \"db\" (its instances are db-0 to db-2)"),
		e(9, 39, "operations[0].network.groups[1][0]", "db-0 is already a member (operations[0].network.groups[0][0])"),
	}},
	{name: "a ring of three", yaml: netHead + `  - {name: split, uses: partition, target: {workload: db}, network: {shape: ring}}
flow: {parallel: [db, split]}
`, want: []prob{
		e(6, 77, "operations[0].network.shape", "a ring needs at least 4 members (each reaches only its two neighbours); workload \"db\" has 3"),
	}},
}

func TestBadNetworkOperations(t *testing.T) {
	for _, tc := range netBad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("bad.yaml", []byte(tc.yaml))
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}

func TestGoodNetworkOperations(t *testing.T) {
	x, ps := Parse("good.yaml", []byte(netHead+`  - {name: slow, uses: latency, target: {workload: db}, select: one, duration: 5s, network: {delay: 100ms, jitter: 10ms, correlation: 25}}
  - {name: lossy, uses: loss, target: {workload: db}, network: {percent: 2.5}}
  - {name: thin, uses: bandwidth, target: {workload: db}, network: {rate: 1mbit}}
  - {name: rst, uses: reset, target: {workload: db}}
  - {name: hole, uses: blackhole, target: {workload: db}, duration: 1s}
  - {name: split, uses: partition, network: {members: [db], shape: isolate-one, isolate: db-2, direction: one-way}, duration: 2s}
  - {name: groups, uses: partition, network: {groups: [[db-0], [db-1, db-2]]}}
flow: {parallel: [db, {serial: [slow, lossy, thin, rst, hole, split, groups]}]}
`))
	for _, p := range ps {
		t.Errorf("%v", p)
	}
	if o := x.Operation("groups"); o.Network.ShapeOrDefault() != ShapeGroups || o.Network.DirectionOrDefault() != DirectionBoth {
		t.Errorf("groups: %+v", o.Network)
	}
	if o := x.Operation("slow"); o.Network.Delay.D().Milliseconds() != 100 || *o.Network.Correlation != 25 {
		t.Errorf("slow: %+v", o.Network)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{"1mbit": 1e6, "512kbit": 512e3, "100kbps": 800e3, "2.5Mbit": 2.5e6, "1gbit": 1e9, "10000bps": 80000} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "mbit", "1 parsec", "100bit", "-1mbit"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}
