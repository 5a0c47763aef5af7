package experiment

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// matrixDoc is Paperclip's plan in small: each fault × each task kind, a
// workload, a triggered operation and a check per cell.
const matrixDoc = `apiVersion: chaos/v1alpha1
id: plan
matrix:
  fault:
    - {name: k1, uses: restart-in-place}
    - {name: k4, uses: outage, duration: 1s, duration-max: 2s}
  task: [a1, b1]
workloads:
  - name: task-${matrix.fault}-${matrix.task}
    env: {TASK: "${matrix.task}"}
    run: echo $TASK
    checks:
      - {name: x, kind: exit-code, equals: 0}
  - name: plain
    run: "true"
operations:
  - name: ${matrix.fault}-${matrix.task}
    uses: ${matrix.fault.uses}
    target: {workload: plain}
    duration: ${matrix.fault.duration}
    duration-max: ${matrix.fault.duration-max}
    trigger:
      state: {workload: "task-${matrix.fault}-${matrix.task}", state: Running}
flow:
  parallel:
    - plain
    - task-${matrix.fault}-${matrix.task}
checks:
  - name: ran-${matrix.fault}-${matrix.task}
    kind: event
    event: operation.started
    where: {operation: "${matrix.fault}-${matrix.task}"}
expectations:
  - issue: example/plan#1
    kind: flaky
    checks: ["task-k4-${matrix.task}/x"]
`

func TestMatrixWritesOutEachCell(t *testing.T) {
	x, ps := Parse("plan.yaml", []byte(matrixDoc))
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	var ws, ops, checks []string
	for _, w := range x.Workloads {
		ws = append(ws, w.Name)
	}
	for _, o := range x.Operations {
		ops = append(ops, o.Name+":"+o.Uses+":"+o.Duration.String()+":"+o.DurationMax.String()+":"+o.Trigger.State.Workload)
	}
	for _, c := range x.Checks {
		checks = append(checks, c.Name)
	}
	wantW := []string{"task-k1-a1", "task-k1-b1", "task-k4-a1", "task-k4-b1", "plain"}
	wantOps := []string{"k1-a1:restart-in-place:0s:0s:task-k1-a1", "k1-b1:restart-in-place:0s:0s:task-k1-b1", "k4-a1:outage:1s:2s:task-k4-a1", "k4-b1:outage:1s:2s:task-k4-b1"}
	if !slices.Equal(ws, wantW) || !slices.Equal(ops, wantOps) || !slices.Equal(checks, []string{"ran-k1-a1", "ran-k1-b1", "ran-k4-a1", "ran-k4-b1"}) {
		t.Errorf("workloads %v\noperations %v\nchecks %v", ws, ops, checks)
	}
	if got := x.Workloads[1].Env["TASK"]; got != "b1" {
		t.Errorf("TASK = %q", got)
	}
	if n := len(x.Flow.Children); n != 5 {
		t.Errorf("the flow's parallel has %d steps, want plain and 4 cells", n)
	}
	// The outermost list item that refers to an axis is written out: one
	// expectation per task.
	if len(x.Expectations) != 2 || !slices.Equal(x.Expectations[1].Checks, []string{"task-k4-b1/x"}) {
		t.Errorf("expectations %+v", x.Expectations)
	}
	if got := x.Matrix.Cells(); !slices.Equal(got, []string{"fault=k1,task=a1", "fault=k1,task=b1", "fault=k4,task=a1", "fault=k4,task=b1"}) {
		t.Errorf("cells %v", got)
	}
}

// One cell, as chaos replay --cell runs it: only that cell's items are
// written out, with the same names as in the whole matrix.
func TestMatrixCellKeepsOneCell(t *testing.T) {
	data, err := CellData([]byte(matrixDoc), "fault=k4,task=b1")
	if err != nil {
		t.Fatal(err)
	}
	x, ps := Parse("plan.yaml", data)
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	var names []string
	for _, w := range x.Workloads {
		names = append(names, w.Name)
	}
	for _, o := range x.Operations {
		names = append(names, o.Name)
	}
	if !slices.Equal(names, []string{"task-k4-b1", "plain", "k4-b1"}) || x.MatrixCell != "fault=k4,task=b1" {
		t.Errorf("got %v, cell %q", names, x.MatrixCell)
	}
	if _, err := CellData(data, "fault=k1"); err == nil {
		t.Error("a second matrix-cell was added")
	}
}

func TestMatrixProblems(t *testing.T) {
	base := "apiVersion: chaos/v1alpha1\nid: m\nworkloads:\n  - name: w\n    run: \"true\"\nflow: w\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"no matrix", base + "checks:\n  - {name: \"c-${matrix.x}\", kind: event, event: e}\n", "8:12: checks[0].name: ${matrix.x} refers to the matrix, but the experiment has no matrix"},
		{"unknown axis", base + "matrix: {fault: [a]}\nchecks:\n  - {name: \"c-${matrix.faults}\", kind: event, event: e}\n", `${matrix.faults}: the matrix has no axis "faults" (did you mean "fault"?)`},
		{"outside a list", base + "matrix: {fault: [a]}\ntitle: t ${matrix.fault}\n", "title: ${matrix.fault} is not inside a list item"},
		{"no such field", base + "matrix: {fault: [a]}\nchecks:\n  - {name: \"c-${matrix.fault.x}\", kind: event, event: e}\n", `value a of axis fault has no field "x"`},
		{"bad value", base + "matrix: {fault: [A B]}\n", `matrix.fault[0]: "A B" is not a valid value name`},
		{"twice", base + "matrix: {fault: [a, a]}\n", `matrix.fault[1]: value "a" is listed twice`},
		{"not a list", base + "matrix: {fault: a}\n", "matrix.fault: expected a list of at least one value"},
		{"cell of no axis", base + "matrix: {fault: [a]}\nmatrix-cell: task=a\n", `matrix-cell: no axis "task" in the matrix`},
		{"cell of no value", base + "matrix: {fault: [a, b]}\nmatrix-cell: fault=c\n", `matrix-cell: axis fault has no value "c"`},
		{"bad cell", base + "matrix: {fault: [a]}\nmatrix-cell: fault\n", "matrix-cell: \"fault\": a cell is written AXIS=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("m.yaml", []byte(tc.doc))
			if !strings.Contains(ps.Error(), tc.want) || !strings.Contains(ps.Error(), "m.yaml:") {
				t.Errorf("problems:\n%v\nwant %q", ps, tc.want)
			}
		})
	}
}

func TestMatrixCellsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: chaos/v1alpha1\nid: m\nmatrix:\n")
	for _, a := range []string{"a", "b", "c", "d"} {
		b.WriteString("  " + a + ": [")
		for i := range 10 {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a + string(rune('0'+i)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("workloads:\n  - {name: w, run: \"true\"}\nflow: w\n")
	start := time.Now()
	_, ps := Parse("m.yaml", []byte(b.String()))
	if !strings.Contains(ps.Error(), "more than 1000 cells") || time.Since(start) > 5*time.Second {
		t.Errorf("%v (%s)", ps, time.Since(start))
	}
}

func TestParseCell(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"fault=k6,task=b1", map[string]string{"fault": "k6", "task": "b1"}},
		{"fault=k6", map[string]string{"fault": "k6"}},
		{"fault", nil},
		{"fault=k6,fault=k1", nil},
		{"=k6", nil},
		{"", nil},
	} {
		got, err := ParseCell(tc.in)
		if (err != nil) != (tc.want == nil) || len(got) != len(tc.want) {
			t.Errorf("ParseCell(%q) = %v, %v", tc.in, got, err)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("ParseCell(%q)[%s] = %q", tc.in, k, got[k])
			}
		}
	}
}

// FuzzMatrix: whatever the matrix and its references, parsing ends with
// problems or an experiment, never a panic, and writes out at most the
// bounded number of items.
func FuzzMatrix(f *testing.F) {
	f.Add([]byte(matrixDoc))
	f.Add([]byte("matrix: {a: [x, {name: y, f: '${matrix.a}'}]}\nworkloads: [{name: '${matrix.a.f}-${matrix.b}'}]\n"))
	f.Add([]byte("matrix-cell: a=x\nmatrix: {a: [x]}\nflow: ['${matrix.a}', {serial: ['${matrix.a}']}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, _ := Parse("f.yaml", data)
		if x != nil && len(x.Workloads)+len(x.Operations)+len(x.Checks) > 3*MaxMatrixCells*100 {
			t.Fatalf("%d items written out", len(x.Workloads)+len(x.Operations)+len(x.Checks))
		}
	})
}
