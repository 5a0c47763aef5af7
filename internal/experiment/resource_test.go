package experiment

import (
	"testing"
)

const resHead = `apiVersion: chaos/v1alpha1
id: t
workloads:
  - {name: db, run: "true"}
operations:
`

// resBad are resource operations each wrong in a known way, with every
// problem at its file:line:col.
var resBad = []badCase{
	{name: "cpu-limit without cpu", yaml: resHead + `  - {name: slow, uses: cpu-limit, target: {workload: db}}
flow: {parallel: [db, slow]}
`, want: []prob{
		e(6, 5, "operations[0]", "missing resource.cpu: cpu-limit needs it, e.g. resource: {cpu: 20%}"),
	}},
	{name: "a cpu share that is not one", yaml: resHead + `  - {name: slow, uses: cpu-limit, target: {workload: db}, resource: {cpu: lots}}
flow: {parallel: [db, slow]}
`, want: []prob{
		e(6, 75, "operations[0].resource.cpu", `"lots" is not a CPU share: want a percentage of one CPU (20%) or a number of CPUs (0.2)`),
	}},
	{name: "a field of another fault", yaml: resHead + `  - {name: hog, uses: memory-limit, target: {workload: db}, resource: {memory: 64MiB, tasks: 3}}
flow: {parallel: [db, hog]}
`, want: []prob{
		e(6, 94, "operations[0].resource.tasks", "tasks applies to task-limit, not memory-limit"),
	}},
	{name: "a memory size below a MiB", yaml: resHead + `  - {name: hog, uses: memory-pressure, target: {workload: db}, resource: {memory: 4k}}
flow: {parallel: [db, hog]}
`, want: []prob{
		e(6, 83, "operations[0].resource.memory", "4k is below 1MiB, the least memory-pressure takes"),
	}},
	{name: "io-limit with a relative path and no limit", yaml: resHead + `  - {name: io, uses: io-limit, target: {workload: db}, resource: {path: data}}
flow: {parallel: [db, io]}
`, want: []prob{
		e(6, 66, "operations[0].resource", "an io-limit needs at least one of read-bps, write-bps, read-iops, write-iops"),
		e(6, 73, "operations[0].resource.path", `"data" must be a clean absolute path, as the target sees it`),
	}},
	{name: "resource on a fault that takes none", yaml: resHead + `  - {name: k, uses: kill, target: {workload: db}, resource: {cpu: 20%}}
flow: {parallel: [db, k]}
`, want: []prob{
		e(6, 61, "operations[0].resource", "resource gives the parameters of resource faults (cpu-limit, cpu-stress, memory-pressure, memory-limit, memory-stress, io-limit, task-limit, disk-fill); kill takes none"),
	}},
	{name: "no tasks at all", yaml: resHead + `  - {name: t, uses: task-limit, target: {workload: db}, resource: {tasks: 0}}
flow: {parallel: [db, t]}
`, want: []prob{
		e(6, 75, "operations[0].resource.tasks", "must be 1 or more"),
	}},
}

func TestBadResourceOperations(t *testing.T) {
	for _, tc := range resBad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("bad.yaml", []byte(tc.yaml))
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}

func TestGoodResourceOperations(t *testing.T) {
	x, ps := Parse("good.yaml", []byte(resHead+`  - {name: cpu, uses: cpu-limit, target: {workload: db}, duration: 5s, resource: {cpu: 20%}}
  - {name: burn, uses: cpu-stress, target: {workload: db}, resource: {cores: 1.5}}
  - {name: pressure, uses: memory-pressure, target: {workload: db}, resource: {memory: 64MiB}}
  - {name: hard, uses: memory-limit, target: {workload: db}, resource: {memory: 1g}}
  - {name: hog, uses: memory-stress, target: {workload: db}, resource: {memory: 256MiB}}
  - {name: io, uses: io-limit, target: {workload: db}, resource: {path: /var/lib/db, write-bps: 1MiB, read-iops: 100}}
  - {name: tasks, uses: task-limit, target: {workload: db}, resource: {tasks: 20}}
  - {name: fill, uses: disk-fill, target: {workload: db}, resource: {path: /var/lib/db, free: 0}}
flow: {parallel: [db, {serial: [cpu, burn, pressure, hard, hog, io, tasks, fill]}]}
`))
	for _, p := range ps {
		t.Errorf("%v", p)
	}
	if o := x.Operation("fill"); o.Resource.Free == nil || *o.Resource.Free != "0" {
		t.Errorf("fill: %+v", o.Resource)
	}
}

func TestParseCPUShare(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		bad  bool
	}{
		{"20%", 0.2, false}, {"0.2", 0.2, false}, {"150%", 1.5, false}, {"2", 2, false},
		{"0.5%", 0, true}, {"x", 0, true}, {"NaN", 0, true}, {"2000", 0, true},
	}
	for _, c := range cases {
		got, err := ParseCPUShare(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParseCPUShare(%q) = %v, %v", c.in, got, err)
		}
	}
}
