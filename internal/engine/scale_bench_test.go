package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Benchmarks of many local instances (docs/performance.md, "Faults on many
// local instances"). Sizes come from CHAOS_BENCH_N (comma-separated) so CI
// can run a small N and a person the full 1,000.

func benchSizes() []int {
	spec := os.Getenv("CHAOS_BENCH_N")
	if spec == "" {
		spec = "10,100,1000"
	}
	var out []int
	for f := range strings.SplitSeq(spec, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// faultAll is N instances that sleep, the fault on all of them once they
// all run, then (unless the fault is a kill) a kill of all to end them.
func faultAll(uses string, n int) string {
	flow := "[{wait: {workload: w, condition: running, timeout: 5m}}, op"
	ops := fmt.Sprintf("  - {name: op, uses: %s, target: {workload: w}, select: all}\n", uses)
	if uses != "kill" {
		flow += ", end"
		ops += "  - {name: end, uses: kill, target: {workload: w}, select: all}\n"
	}
	return fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: fault-all
timeout: 10m
workloads:
  - {name: w, instances: %d, run: "sleep 600"}
operations:
%sflow:
  parallel:
    - w
    - serial: %s]
`, n, ops, flow)
}

// spreadOf measures the first application of operation op from the
// timeline: how many instances it reached, when the first and the last was
// reached after operation.started, and when the operation finished. An
// instance is reached when its state changes (a kill: Failed; a restart:
// Pending, recorded just before the kill). A freeze changes no state, so
// its last hit is when the operation finished: every cgroup confirmed
// frozen by then.
func spreadOf(events []rundir.Event, op, uses string) (hit int, first, last, finished time.Duration, err error) {
	var t0 time.Time
	var hits []time.Time
	for _, e := range events {
		switch {
		case e.Name == "operation.started" && e.String("operation") == op && t0.IsZero():
			t0 = e.TS
		case t0.IsZero():
		case e.Name == "instance.state" && finished == 0 && (uses == "kill" && e.String("state") == "Failed" || uses != "kill" && e.String("state") == "Pending"):
			hits = append(hits, e.TS)
		case (e.Name == "operation.finished" || e.Name == "operation.reverted") && e.String("operation") == op && finished == 0:
			finished = e.TS.Sub(t0)
		}
	}
	if t0.IsZero() || finished == 0 {
		return 0, 0, 0, 0, fmt.Errorf("operation %s did not start and finish", op)
	}
	if uses == "freeze" {
		return 0, 0, finished, finished, nil
	}
	if len(hits) == 0 {
		return 0, 0, 0, finished, nil
	}
	return len(hits), slices.MinFunc(hits, time.Time.Compare).Sub(t0), slices.MaxFunc(hits, time.Time.Compare).Sub(t0), finished, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's high-water mark of resident memory (VmHWM), in
// bytes; resetPeakRSS starts it again from the current RSS.
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func benchRun(b *testing.B, src string) (*Outcome, []rundir.Event) {
	b.Helper()
	x, ps := experiment.Parse("bench.yaml", []byte(src))
	if err := ps.Err(); err != nil {
		b.Fatalf("experiment: %v", err)
	}
	zero := time.Duration(0)
	out, err := Run(context.Background(), Config{Experiment: x, Adapter: adapter.Builtins()["local"], RunsDir: b.TempDir(), Settle: &zero})
	if err != nil {
		b.Fatalf("run: %v", err)
	}
	events, err := rundir.ReadTimeline(out.Dir.TimelineFile())
	if err != nil {
		b.Fatal(err)
	}
	return out, events
}

// BenchmarkFaultAll applies kill, freeze and restart-in-place to every one
// of N local instances and reports the first-to-last spread of the hits
// (spread-ms), when the last was hit and when the operation finished after
// it started (last-ms, op-ms), the share of instances reached (reached,
// 1 when all were) and the harness's CPU time per instance for the whole
// run (cpu-ms/inst), which stays flat when its cost is linear in N.
func BenchmarkFaultAll(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes")
	}
	for _, uses := range []string{"kill", "freeze", "restart-in-place"} {
		for _, n := range benchSizes() {
			b.Run(fmt.Sprintf("%s/N=%d", uses, n), func(b *testing.B) {
				src := faultAll(uses, n)
				var spread, last, op, cpu, base time.Duration
				var reached float64
				for b.Loop() {
					if uses == "kill" {
						base += killBaseline(b, n)
					}
					c0 := cpuTime()
					out, events := benchRun(b, src)
					cpu += cpuTime() - c0
					if out.Verdict.Verdict != rundir.VerdictPass {
						b.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
					}
					hit, first, l, fin, err := spreadOf(events, "op", uses)
					if err != nil {
						b.Fatal(err)
					}
					if uses == "freeze" {
						hit = n // every Freeze returned: the kernel said frozen
					}
					spread += l - first
					last += l
					op += fin
					reached += float64(hit) / float64(n)
				}
				k := float64(b.N)
				b.ReportMetric(float64(spread.Milliseconds())/k, "spread-ms")
				b.ReportMetric(float64(last.Milliseconds())/k, "last-ms")
				b.ReportMetric(float64(op.Milliseconds())/k, "op-ms")
				b.ReportMetric(reached/k, "reached")
				b.ReportMetric(float64(cpu.Microseconds())/1e3/k/float64(n), "cpu-ms/inst")
				if base > 0 {
					b.ReportMetric(float64(base.Milliseconds())/k, "shell-last-ms")
					b.ReportMetric(float64(last)/float64(base), "last-ratio")
				}
			})
		}
	}
}

// killBaseline is what the kill of N instances costs without the harness:
// N process groups of three processes each (a wrapper sh, the script's sh
// and its sleep, as an instance has) killed by a loop of kill(-pgid,
// SIGKILL), as a shell would. It returns the time from the first kill to
// the last group's leader reaped: the kernel's cost of ending them, which
// bounds how fast the harness's kill can be on the same machine.
func killBaseline(b *testing.B, n int) time.Duration {
	b.Helper()
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		c := exec.Command("sh", "-c", `sh -c "sleep 600; true"; true`)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		cmds[i] = c
	}
	// Until every sleep runs: each group has its three processes.
	for deadline := time.Now().Add(time.Minute); ; {
		procs, _ := os.ReadDir("/proc")
		groups := map[int]int{}
		for _, e := range procs {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if pg, err := syscall.Getpgid(pid); err == nil {
				groups[pg]++
			}
		}
		ready := 0
		for _, c := range cmds {
			if groups[c.Process.Pid] >= 3 {
				ready++
			}
		}
		if ready == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	done := make(chan struct{}, n)
	for _, c := range cmds {
		go func() { _ = c.Wait(); done <- struct{}{} }()
	}
	t0 := time.Now()
	for _, c := range cmds {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	for range n {
		<-done
	}
	return time.Since(t0)
}

// BenchmarkManyInstances runs N local instances of a short script and
// compares the run's wall time with a shell that starts the same N
// scripts the same way (a wrapper shell running the script in its own
// directory, its output to a file) and waits for them (shell-ratio). It
// reports the harness's peak RSS during the run (rss-MB) and the
// instances whose exit was not recorded (lost).
func BenchmarkManyInstances(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes")
	}
	const script = `echo "hello from $CHAOS_INSTANCE" > greeting`
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			src := fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: many
timeout: 10m
workloads:
  - name: w
    instances: %d
    run: '%s'
    checks: [{name: ok, kind: exit-code}]
flow: w
`, n, script)
			var harness, shell time.Duration
			var rss int64
			lost := 0
			for b.Loop() {
				dir := b.TempDir()
				t0 := time.Now()
				shellBaseline(b, dir, n, script)
				shell += time.Since(t0)

				runtime.GC()
				resetPeakRSS()
				t0 = time.Now()
				out, events := benchRun(b, src)
				harness += time.Since(t0)
				rss = max(rss, peakRSS())
				if out.Verdict.Verdict != rundir.VerdictPass {
					b.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
				}
				ended := 0
				for _, e := range find(events, "instance.state") {
					if e.String("state") == "Succeeded" {
						ended++
					}
				}
				lost += n - ended
			}
			b.ReportMetric(float64(harness.Milliseconds())/float64(b.N), "harness-ms")
			b.ReportMetric(float64(shell.Milliseconds())/float64(b.N), "shell-ms")
			b.ReportMetric(float64(harness)/float64(shell), "shell-ratio")
			b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
			b.ReportMetric(float64(lost), "lost")
		})
	}
}

// shellBaseline starts n instances as the harness does, from one shell:
// each a wrapper sh that records its start, runs the script with sh in its
// own directory and records its exit code; then it waits for all.
func shellBaseline(b *testing.B, dir string, n int, script string) {
	b.Helper()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	loop := `for i in $(seq 0 $((N - 1))); do
  d="$DIR/w-$i"; mkdir -p "$d/.chaos"
  ( cd "$d" && echo start >> .chaos/attempts && CHAOS_INSTANCE=w-$i /bin/sh "$DIR/run.sh" >> process.log 2>&1; echo $? > .chaos/exit_code ) &
done
wait`
	cmd := exec.Command("/bin/sh", "-c", loop)
	cmd.Env = append(os.Environ(), "N="+strconv.Itoa(n), "DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("shell baseline: %v: %s", err, out)
	}
}
