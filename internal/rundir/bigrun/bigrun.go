// Package bigrun writes a large run directory, the way the engine writes
// one, for the benchmarks of the offline tools (evaluate, report, export,
// share). It is used by tests and by scripts/bench.sh only.
//
// At its default size it is the run of issue 16: 3.5 minutes, 20 instances,
// 9,000 operation applications, about 100,000 timeline events and 1,114
// scrapes of 31 metric families.
package bigrun

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Size says how big the run is.
type Size struct {
	Instances    int     // instances of the one workload
	Applications int     // operation applications, each of 2 instances
	Scrapes      int     // scrapes of the one metrics source
	Span         float64 // seconds from run.started to run.finished
}

// Default is the run of issue 16.
var Default = Size{Instances: 20, Applications: 9000, Scrapes: 1114, Span: 210}

// RunID and Experiment name the run.
const (
	RunID      = "20261201T050000Z-b16a"
	Experiment = "restart-storm"
)

var start = time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)

const experimentYAML = `apiVersion: chaos/v1alpha1
id: restart-storm
version: 1
title: Twenty counters survive 9,000 restarts in three and a half minutes
hypothesis: >
  Every counter instance restarted over and over returns to Running, keeps
  the gateway's sessions up and exits 0.
default-adapter: local-gateway
timeout: 10m
metrics: [fam_g00_sessions, fam_c00_requests_total]
workloads:
  - name: counter
    instances: 20
    timeout: 5m
    run: |
      sleep 200
    checks:
      - {name: exited-ok, kind: exit-code, equals: 0}
operations:
  - name: restart
    uses: restart-in-place
    target: {workload: counter}
    select: {count: 2}
flow:
  parallel:
    - counter
    - serial:
        - wait: {workload: counter, condition: running}
        - repeat:
            times: 9000
            serial:
              - restart
checks:
  - name: restarts-ran
    kind: event
    event: operation.finished
    where: {operation: restart}
    min: 1
  - name: sessions-up
    kind: metric
    family: fam_g00_sessions
    op: ">="
    value: 0
  - name: sessions-up-during
    kind: metric
    family: fam_g00_sessions
    scrapes: all
    window: {operation: restart, after: 1s}
    op: ">="
    value: 0
`

const adapterYAML = `apiVersion: chaos/v1alpha1
id: local-gateway
title: Local processes and a gateway's metrics (large-run fixture)
backend: process
metrics:
  - {name: gateway, url: "http://127.0.0.1:9/metrics", interval: 185ms}
`

// Write writes the run directory under parent/restart-storm/RUNID and
// returns its path.
func Write(parent string, sz Size) (string, error) {
	root := filepath.Join(parent, Experiment, RunID)
	w := &writer{root: root}
	for _, sub := range []string{"logs", "system/metrics", "workloads"} {
		w.mkdir(sub)
	}
	x := strings.Replace(experimentYAML, "instances: 20", fmt.Sprintf("instances: %d", sz.Instances), 1)
	w.file("experiment.yaml", []byte(strings.Replace(x, "times: 9000", fmt.Sprintf("times: %d", sz.Applications), 1)))
	w.file("adapter.yaml", []byte(adapterYAML))
	w.timeline(sz)
	w.metrics(sz)
	w.verdict(sz)
	return root, w.err
}

type writer struct {
	root string
	err  error
}

func (w *writer) mkdir(rel string) {
	if w.err == nil {
		w.err = os.MkdirAll(filepath.Join(w.root, filepath.FromSlash(rel)), 0o755)
	}
}

func (w *writer) file(rel string, data []byte) {
	w.mkdir(filepath.Dir(rel))
	if w.err == nil {
		w.err = os.WriteFile(filepath.Join(w.root, filepath.FromSlash(rel)), data, 0o644)
	}
}

func (w *writer) json(rel string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil && w.err == nil {
		w.err = err
	}
	w.file(rel, append(data, '\n'))
}

func inst(i int) string { return fmt.Sprintf("counter-%d", i) }

// events writes timeline.jsonl and logs/harness.log together.
type events struct {
	tl, log *bufio.Writer
	n       int
}

func (e *events) ev(t float64, name string, kv ...any) {
	ts := start.Add(time.Duration(t * float64(time.Second)))
	fmt.Fprintf(e.tl, `{"t": %.3f, "ts": %q, "event": %q`, t, ts.Format("2006-01-02T15:04:05.000000Z"), name)
	fmt.Fprintf(e.log, "%s %s {", rundir.LogTime(ts), name)
	for i := 0; i+1 < len(kv); i += 2 {
		v, _ := json.Marshal(kv[i+1])
		fmt.Fprintf(e.tl, `, %q: %s`, kv[i], v)
		if i > 0 {
			e.log.WriteString(", ")
		}
		fmt.Fprintf(e.log, `%q: %s`, kv[i], v)
	}
	e.tl.WriteString("}\n")
	e.log.WriteString("}\n")
	e.n++
}

func (w *writer) timeline(sz Size) {
	if w.err != nil {
		return
	}
	w.manifest(sz)
	tf, err := os.Create(filepath.Join(w.root, "timeline.jsonl"))
	if err != nil {
		w.err = err
		return
	}
	defer tf.Close()
	lf, err := os.Create(filepath.Join(w.root, "logs", "harness.log"))
	if err != nil {
		w.err = err
		return
	}
	defer lf.Close()
	e := &events{tl: bufio.NewWriterSize(tf, 1<<16), log: bufio.NewWriterSize(lf, 1<<16)}
	rng := rand.New(rand.NewSource(16))
	e.ev(0.001, "run.started", "experiment", Experiment, "version", 1, "seed", 16, "adapter", "local-gateway", "run_id", RunID)
	e.ev(0.2, "check.started", "scope", "preflight", "check", "shell-runs")
	e.ev(0.25, "check.finished", "scope", "preflight", "check", "shell-runs", "ok", true, "detail", "")
	e.ev(0.3, "metrics.started", "metrics", "gateway", "url", "http://127.0.0.1:9/metrics", "interval", "185ms")
	node := func(t float64, begin bool, path, kind, name string) {
		if begin {
			e.ev(t, "node.started", "node", path, "kind", kind, "name", name)
		} else {
			e.ev(t, "node.finished", "node", path, "kind", kind, "name", name, "ok", true)
		}
	}
	node(0.4, true, "flow", "parallel", "parallel")
	node(0.4, true, "flow.parallel[0]", "ref", "counter")
	node(0.4, true, "flow.parallel[1]", "serial", "serial")
	node(0.4, true, "flow.parallel[1].serial[0]", "wait", "wait counter running")
	for i := 0; i < sz.Instances; i++ {
		t := 0.5 + float64(i)*0.01
		e.ev(t, "instance.state", "workload", "counter", "instance", inst(i), "state", "Created", "reason", "")
		e.ev(t+0.001, "instance.created", "workload", "counter", "instance", inst(i), "system_id", fmt.Sprint(40000+i))
		e.ev(t+0.2, "instance.state", "workload", "counter", "instance", inst(i), "state", "Running", "reason", "")
	}
	node(1, false, "flow.parallel[1].serial[0]", "wait", "wait counter running")
	node(1, true, "flow.parallel[1].serial[1]", "repeat", "repeat 9000 times")
	end := sz.Span - 10
	step := (end - 1) / float64(sz.Applications)
	for k := 1; k <= sz.Applications; k++ {
		t := 1 + float64(k-1)*step
		path := "flow.parallel[1].serial[1].serial[0]"
		e.ev(t, "repeat.round", "node", "flow.parallel[1].serial[1]", "round", k)
		node(t, true, path, "ref", "restart")
		a, b := rng.Intn(sz.Instances), rng.Intn(sz.Instances)
		if a == b {
			b = (a + 1) % sz.Instances
		}
		targets := []string{inst(a), inst(b)}
		ids := []string{fmt.Sprint(40000 + a), fmt.Sprint(40000 + b)}
		e.ev(t+0.0001, "operation.started", "operation", "restart", "uses", "restart-in-place", "run", k,
			"target", map[string]string{"workload": "counter"}, "scope", "instances", "instances", targets, "ids", ids)
		d := step * 0.8
		for j, in := range targets {
			u := t + 0.0002 + float64(j)*0.0001
			e.ev(u, "instance.state", "workload", "counter", "instance", in, "state", "Unknown", "reason", "Stopping")
			e.ev(u+d*0.3, "instance.state", "workload", "counter", "instance", in, "state", "Pending", "reason", "Restarting")
			e.ev(u+d*0.9, "instance.state", "workload", "counter", "instance", in, "state", "Running", "reason", "")
		}
		e.ev(t+d, "operation.finished", "operation", "restart", "uses", "restart-in-place", "run", k)
		node(t+d, false, path, "ref", "restart")
	}
	node(end, false, "flow.parallel[1].serial[1]", "repeat", "repeat 9000 times")
	node(end, false, "flow.parallel[1]", "serial", "serial")
	for i := 0; i < sz.Instances; i++ {
		e.ev(end+1+float64(i)*0.05, "instance.state", "workload", "counter", "instance", inst(i), "state", "Succeeded", "reason", "MainProcessCompleted")
	}
	node(end+3, false, "flow.parallel[0]", "ref", "counter")
	node(end+3, false, "flow", "parallel", "parallel")
	for i := 0; i < sz.Instances; i++ {
		e.ev(end+3.1, "instance.collected", "workload", "counter", "instance", inst(i), "exit_code", 0)
	}
	e.ev(end+4, "metrics.stopped", "metrics", "gateway", "scrapes", sz.Scrapes, "failed", 0)
	e.ev(sz.Span, "run.finished", "verdict", "PASS")
	if err := e.tl.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if err := e.log.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	for i := 0; i < sz.Instances; i++ {
		var b strings.Builder
		for n := 1; n <= 500; n++ {
			fmt.Fprintf(&b, "%d tick %d\n", n, 1000+n)
		}
		w.file(fmt.Sprintf("workloads/counter/instances/%s/logs/process.log", inst(i)), []byte(b.String()))
		w.file(fmt.Sprintf("workloads/counter/instances/%s/output/.chaos/exit_code", inst(i)), []byte("0\n"))
	}
}

func (w *writer) manifest(sz Size) {
	var m rundir.Manifest
	m.Format, m.RunID = 1, RunID
	m.Experiment.ID, m.Experiment.Version, m.Experiment.File = Experiment, 1, "/home/me/exp/restart-storm.yaml"
	m.Experiment.SHA256 = strings.Repeat("cd", 32)
	m.Adapter.ID, m.Adapter.Backend, m.Adapter.File = "local-gateway", "process", "/home/me/exp/adapters/local-gateway.yaml"
	m.Harness.Version, m.Harness.Go = "devel", "go1.26.8"
	m.Seed = 16
	m.Host = rundir.Host{Name: "vm", OS: "linux", Arch: "amd64", Kernel: "6.18.44", CPUs: 2, User: "me"}
	m.Started = start
	m.Command = []string{"chaos", "run", "restart-storm.yaml"}
	m.Replay = "chaos run --adapter local-gateway --seed 16 restart-storm.yaml"
	w.json("manifest.json", m)
}

func fl(v float64) *rundir.Float { f := rundir.Float(v); return &f }
func u64(v uint64) *uint64       { return &v }

func histogram(labels map[string]string, count uint64, sum float64) rundir.Sample {
	les := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	var bs []rundir.Bucket
	for i, le := range les {
		bs = append(bs, rundir.Bucket{LE: rundir.Float(le), Count: count * uint64(i+1) / uint64(len(les)+1)})
	}
	bs = append(bs, rundir.Bucket{LE: rundir.Float(math.Inf(1)), Count: count})
	return rundir.Sample{Labels: labels, Count: u64(count), Sum: fl(sum), Buckets: bs}
}

// metrics writes 31 families: 10 counters, 11 gauges, 10 histograms.
func (w *writer) metrics(sz Size) {
	if w.err != nil {
		return
	}
	f, err := os.Create(filepath.Join(w.root, "system", "metrics", "gateway.jsonl"))
	if err != nil {
		w.err = err
		return
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<16)
	rng := rand.New(rand.NewSource(1114))
	types := map[string]map[string]string{}
	counters := make([][]float64, 10)
	for c := range counters {
		counters[c] = make([]float64, 10)
	}
	gauges := make([][]float64, 11)
	for g := range gauges {
		gauges[g] = []float64{8, 50, 200, 1000}
	}
	hist := make([][2]uint64, 10)
	interval := (sz.Span - 1) / float64(sz.Scrapes)
	for k := 0; k < sz.Scrapes; k++ {
		t := 0.5 + interval*float64(k)
		fams := map[string]*rundir.Family{}
		for c := range counters {
			fm := &rundir.Family{Type: "counter"}
			for j := range counters[c] {
				counters[c][j] += float64(rng.Intn(20 * (j + 1)))
				fm.Samples = append(fm.Samples, rundir.Sample{Labels: map[string]string{"method": fmt.Sprintf("Method%d", j/2), "code": fmt.Sprint(j % 2)}, Value: fl(counters[c][j])})
			}
			fams[fmt.Sprintf("fam_c%02d_requests_total", c)] = fm
		}
		for g := range gauges {
			fm := &rundir.Family{Type: "gauge"}
			for j := range gauges[g] {
				gauges[g][j] = math.Max(0, gauges[g][j]+rng.NormFloat64()*gauges[g][j]*0.05)
				fm.Samples = append(fm.Samples, rundir.Sample{Labels: map[string]string{"pool": fmt.Sprintf("pool-%d", j)}, Value: fl(math.Round(gauges[g][j]*100) / 100)})
			}
			name := fmt.Sprintf("fam_g%02d_bytes", g)
			if g == 0 {
				name = "fam_g00_sessions"
			}
			fams[name] = fm
		}
		for h := range hist {
			fm := &rundir.Family{Type: "histogram"}
			for j := 0; j < 2; j++ {
				hist[h][j] += uint64(rng.Intn(30))
				fm.Samples = append(fm.Samples, histogram(map[string]string{"op": fmt.Sprintf("op%d", j)}, hist[h][j], float64(hist[h][j])*0.07))
			}
			fams[fmt.Sprintf("fam_h%02d_seconds", h)] = fm
		}
		sc := rundir.Scrape{T: t, TS: start.Add(time.Duration(t * float64(time.Second))).Format("2006-01-02T15:04:05.000000Z"), OK: true, Families: fams}
		data, err := json.Marshal(sc)
		if err != nil {
			w.err = err
			return
		}
		bw.Write(data)
		bw.WriteByte('\n')
		if k == 0 {
			for name, fm := range fams {
				types[name] = map[string]string{"type": fm.Type, "help": "synthetic " + fm.Type + " " + name}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		w.err = err
		return
	}
	w.json("system/metrics/gateway.types.json", types)
}

func (w *writer) verdict(sz Size) {
	v := rundir.Verdict{Format: 1, RunID: RunID, Verdict: "PASS", By: "run", Evaluated: start.Add(time.Duration(sz.Span * float64(time.Second)))}
	v.Experiment.ID, v.Experiment.Version = Experiment, 1
	v.Adapter.ID = "local-gateway"
	v.Checks = append(v.Checks, rundir.CheckResult{ID: "preflight/shell-runs", Scope: "preflight", Check: "shell-runs", OK: true, Result: "ok"})
	for i := 0; i < sz.Instances; i++ {
		v.Checks = append(v.Checks, rundir.CheckResult{ID: inst(i) + "/exited-ok", Scope: "workload", Workload: "counter", Instance: inst(i), Check: "exited-ok", OK: true, Result: "ok", Detail: "exit code 0"})
	}
	for _, c := range []string{"restarts-ran", "sessions-up", "sessions-up-during"} {
		v.Checks = append(v.Checks, rundir.CheckResult{ID: "experiment/" + c, Scope: "experiment", Check: c, OK: true, Result: "ok"})
	}
	v.Counts = map[string]int{"ok": len(v.Checks)}
	w.json("verdict.json", v)
}
