package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// markAdapter watches $CHAOS_RUN_DIR/marks.log; signal up is a "server up"
// line in it.
const markAdapter = `apiVersion: chaos/v1alpha1
id: marks
backend: process
watch:
  - name: marks
    run: touch "$CHAOS_RUN_DIR/marks.log"; exec tail -n +1 -F "$CHAOS_RUN_DIR/marks.log"
signals:
  up: {watch: marks, pattern: 'server up'}
operations:
  say-up:
    run: echo "server up" >> "$CHAOS_RUN_DIR/marks.log"
`

// A signal wait that begins after its line was printed: the default (the
// next line) misses it and times out, which is what turned the seed's
// readiness waits into artefacts; since: start sees it.
func TestSignalWaitSince(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	timedOut := "wait for signal up timed out"
	for _, tc := range []struct{ since, verdict, err string }{
		{"", rundir.VerdictError, timedOut},
		{"now", rundir.VerdictError, timedOut},
		{"start", rundir.VerdictPass, ""},
		{"say-up", rundir.VerdictPass, ""},
	} {
		t.Run("since "+tc.since, func(t *testing.T) {
			since := ""
			if tc.since != "" {
				since = "since: " + tc.since + ", "
			}
			out, events := runWith(t, markAdapter, fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: since
workloads:
  - name: w
    timeout: 20s
    run: |
      while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done
operations:
  - {name: say-up, uses: say-up}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - say-up
        - {delay: 300ms}
        # The line came before the wait began.
        - {wait: {signal: up, %stimeout: 1s}}
        - {stop: w}
`, since))
			errs := strings.Join(out.Verdict.Errors, "; ")
			if out.Verdict.Verdict != tc.verdict || !strings.Contains(errs, tc.err) {
				t.Fatalf("verdict %s, errors %q; want %s", out.Verdict.Verdict, errs, tc.verdict)
			}
			if tc.verdict == rundir.VerdictPass {
				m := find(events, "signal.matched")
				if len(m) != 1 || rundir.ValueString(m[0].Get("since")) != tc.since {
					t.Fatalf("signal.matched %v", m)
				}
			}
		})
	}
}

// An instance is ready only by what it reports since its latest start: the
// ready line (or file) of its first start does not make it ready again
// after a restart, and a wait that begins after the line still sees it.
func TestWorkloadReadySinceLatestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tc := range []struct{ name, ready, report string }{
		{"a line it prints", "{pattern: 'sandbox ready'}", `echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) sandbox ready (start $n)"`},
		{"a file it makes", "{file: up}", "touch up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, events := runOnce(t, fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: ready
workloads:
  - name: w
    timeout: 20s
    ready: %s
    run: |
      n=$(wc -l < .chaos/attempts)
      # A restarted sandbox takes a second to set up.
      if [ "$n" -gt 1 ]; then sleep 1; fi
      %s
      while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done
operations:
  - {name: stop-start, uses: restart, target: {workload: w}, grace: 1s}
flow:
  parallel:
    - w
    - serial:
        - {delay: 300ms}
        - {wait: {workload: w, condition: ready, timeout: 2s}}
        - stop-start
        - {wait: {workload: w, condition: ready, timeout: 5s}}
        - {stop: w}
`, tc.ready, tc.report), nil)
			if out.Verdict.Verdict != rundir.VerdictPass {
				t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
			}
			ready := find(events, "instance.ready")
			fin := find(events, "operation.finished")
			if len(ready) != 2 || len(fin) != 1 {
				t.Fatalf("instance.ready %v, operation.finished %v", ready, fin)
			}
			if ready[1].T < fin[0].T+0.9 {
				t.Errorf("ready again at %.3fs, restarted at %.3fs: the first start's report counted", ready[1].T, fin[0].T)
			}
			var waited float64
			for _, e := range find(events, "node.finished") {
				if rundir.ValueString(e.Get("node")) == "flow.parallel[1].serial[3]" {
					waited = e.T
				}
			}
			if waited < ready[1].T {
				t.Errorf("the second wait ended at %.3fs, before the instance was ready at %.3fs", waited, ready[1].T)
			}
		})
	}
}

// duration-max holds for a time drawn from the seed: the same seed holds
// as long again, the draw is in range and recorded, and the hold measured
// on the timeline is the drawn one.
func TestDurationMaxFromSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	src := `apiVersion: chaos/v1alpha1
id: hold
workloads:
  - name: w
    timeout: 20s
    run: while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done
operations:
  - {name: hold, uses: freeze, target: {workload: w}, duration: 100ms, duration-max: 700ms}
flow:
  parallel:
    - w
    - serial: [{wait: {workload: w, condition: running}}, hold, hold, hold, {stop: w}]
`
	seed := uint64(42)
	var runs [2][]string
	for i := range runs {
		out, events := runOnce(t, src, &seed)
		if out.Verdict.Verdict != rundir.VerdictPass {
			t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
		}
		started, reverted := find(events, "operation.started"), find(events, "operation.reverted")
		if len(started) != 3 || len(reverted) != 3 {
			t.Fatalf("started %d, reverted %d", len(started), len(reverted))
		}
		for j, e := range started {
			s := rundir.ValueString(e.Get("duration"))
			d, err := time.ParseDuration(s)
			if err != nil || d < 100*time.Millisecond || d > 700*time.Millisecond {
				t.Fatalf("drawn duration %q (%v)", s, err)
			}
			held := time.Duration((reverted[j].T - e.T) * float64(time.Second))
			if held < d-20*time.Millisecond || held > d+400*time.Millisecond {
				t.Errorf("held %s for a drawn %s", held, d)
			}
			runs[i] = append(runs[i], s)
		}
	}
	if strings.Join(runs[0], " ") != strings.Join(runs[1], " ") {
		t.Errorf("the same seed held %v, then %v", runs[0], runs[1])
	}
	if runs[0][0] == runs[0][1] && runs[0][1] == runs[0][2] {
		t.Errorf("three applications drew the same %s", runs[0][0])
	}
}

// skip leaves candidates out by a script's answer and by their state; the
// one left out is not touched (its attempts show one start).
func TestSkipCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	out, events := runOnce(t, `apiVersion: chaos/v1alpha1
id: skip
workloads:
  - name: w
    instances: 3
    timeout: 20s
    run: while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done
operations:
  - name: stop-start
    uses: restart
    target: {workload: w}
    grace: 1s
    skip: {run: '[ "$CHAOS_INSTANCE" = w-1 ] && echo "$CHAOS_INSTANCE is in Error"'}
  - {name: none, uses: freeze, target: {workload: w}, duration: 10ms, skip: {states: [Running]}}
flow:
  parallel:
    - w
    - serial: [{wait: {workload: w, condition: running}}, stop-start, {wait: {workload: w, condition: running}}, none, {stop: w}]
`, nil)
	if out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
	}
	started := find(events, "operation.started")
	if got := rundir.ValueString(started[0].Get("instances")); got != `["w-0","w-2"]` {
		t.Errorf("stop-start hit %s", got)
	}
	if got := rundir.ValueString(started[1].Get("instances")); got != `[]` {
		t.Errorf("none hit %s", got)
	}
	skipped := find(events, "operation.skipped")
	if len(skipped) != 4 || rundir.ValueString(skipped[0].Get("reason")) != "skip script: w-1 is in Error" || rundir.ValueString(skipped[1].Get("reason")) != "state Running" {
		t.Errorf("operation.skipped %v", skipped)
	}
	for inst, want := range map[string]int{"w-0": 2, "w-1": 1, "w-2": 2} {
		data, err := os.ReadFile(filepath.Join(out.Dir.OutputDir("w", inst), ".chaos", "attempts"))
		if n := strings.Count(string(data), "\n"); err != nil || n != want {
			t.Errorf("%s started %d times (%v), want %d", inst, n, err, want)
		}
	}
}

// pcAdapter is a stand-in server that logs starting, then recovering for
// 0.5s, then ready, each line with its pid; its log is watched.
const pcAdapter = `apiVersion: chaos/v1alpha1
id: pc
backend: process
targets:
  server:
    type: process
    lifecycle: run
    pid-file: $CHAOS_RUN_DIR/server.pid
    start: |
      setsid sh -c 'say() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) pid=$$ $*" >> "$CHAOS_RUN_DIR/logs/pc-server.log"; }
        say starting; sleep 0.2; say recovering; sleep 0.5; say ready; while :; do sleep 0.05; done' < /dev/null > /dev/null 2>&1 &
      echo $! > "$CHAOS_RUN_DIR/server.pid"
    health: grep -q "pid=$(cat "$CHAOS_RUN_DIR/server.pid") ready" "$CHAOS_RUN_DIR/logs/pc-server.log"
watch:
  - name: server-log
    run: touch "$CHAOS_RUN_DIR/logs/pc-server.log"; exec tail -n 0 -F "$CHAOS_RUN_DIR/logs/pc-server.log"
signals:
  recovering: {watch: server-log, pattern: ' recovering$'}
  ready: {watch: server-log, pattern: ' ready$'}
`

// A crash loop's kills aimed at what the server reports land in those
// phases, as the server's own log shows: the second incarnation logged
// recovering and was killed before ready, the third was killed after
// ready. Unaimed (the default), the second kill lands as soon as the
// process has started, before it logged a line, so no kill lands while the
// server recovers: the seeds' K6 could not be written.
func TestCrashLoopAimedAtPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tc := range []struct {
		name, phases string
		midway       int // incarnations killed while recovering
	}{
		{"aimed", "\n    phases: {recovering: {signal: recovering, timeout: 5s}, ready: {signal: ready, timeout: 5s}}", 1},
		{"unaimed", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, events := runWith(t, pcAdapter, `apiVersion: chaos/v1alpha1
id: k6
workloads:
  - name: w
    timeout: 30s
    run: while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done
operations:
  - name: k6
    uses: crash-loop
    target: server`+tc.phases+`
flow:
  parallel:
    - w
    - serial: [{wait: {workload: w, condition: running}}, k6, {stop: w}]
`)
			if out.Verdict.Verdict != rundir.VerdictPass {
				t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
			}
			data, err := os.ReadFile(filepath.Join(out.Dir.Root, "logs", "pc-server.log"))
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			said := map[string][]string{}
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				f := strings.Fields(l)
				if len(f) != 3 {
					t.Fatalf("server.log line %q", l)
				}
				if _, ok := said[f[1]]; !ok {
					order = append(order, f[1])
				}
				said[f[1]] = append(said[f[1]], f[2])
			}
			// Incarnations killed while recovering: they logged
			// recovering and never ready.
			midway := 0
			for _, pid := range order {
				if strings.Join(said[pid], " ") == "starting recovering" {
					midway++
				}
			}
			if midway != tc.midway {
				t.Errorf("%d incarnations were killed while recovering, want %d:\n%s", midway, tc.midway, data)
			}
			if tc.phases != "" {
				if len(order) != 4 || strings.Join(said[order[2]], " ") != "starting recovering ready" {
					t.Errorf("the third incarnation was not killed after ready:\n%s", data)
				}
				kills := find(events, "crash-loop.kill")
				if len(kills) != 3 || !strings.Contains(rundir.ValueString(kills[1].Get("on")), "recovering: ") || !strings.Contains(rundir.ValueString(kills[2].Get("on")), "ready: ") {
					t.Errorf("crash-loop.kill %v", kills)
				}
			}
		})
	}
}
