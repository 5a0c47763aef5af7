package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/clockpatch"
	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/fault"
)

// clockExperiment runs a Go program (static; it reads the vDSO without
// libc) that prints its wall and monotonic clocks, while its wall clock is
// put an hour ahead, made to run three times as fast, then strobed half an
// hour behind. Its workload check is what a user would write: the wall
// clock against the monotonic one, from the program's own output.
const clockExperiment = `apiVersion: chaos/v1alpha1
id: clock-faults
title: A Go program's wall clock offset, drifting and strobing, and true after
default-adapter: local
timeout: 2m
workloads:
  - name: clock
    timeout: 60s
    run: exec %[1]s 12 > "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/clock.log"
    checks:
      - {name: exited-ok, kind: exit-code}
      - name: shifted-while-held-true-after
        kind: shell
        run: |
          # skew: how far the wall clock moved against the monotonic one
          # since the first line.
          awk 'NR == 1 { b = $1 - $4 } { s = $1 - $4 - b }
               s > 3599 && s < 3601 { ahead++ }
               s < -1799 && s > -1801 { behind++ }
               { last = s }
               END { printf "ahead %%d, behind %%d, last %%.3f\n", ahead, behind, last
                     exit !(ahead > 5 && behind > 3 && last > -0.5 && last < 0.5) }' \
            "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/clock.log"
operations:
  - {name: ahead, uses: clock-offset, target: {workload: clock}, duration: 1500ms, clock: {offset: 1h}}
  - {name: fast, uses: clock-drift, target: {workload: clock}, duration: 1500ms, clock: {rate: 3}}
  - {name: flicker, uses: clock-strobe, target: {workload: clock}, duration: 2500ms, clock: {offset: -30m, period: 500ms}}
flow:
  parallel:
    - clock
    - serial:
        - {wait: {workload: clock, condition: started}}
        - {delay: 1s}
        - ahead
        - {delay: 500ms}
        - fast
        - {delay: 500ms}
        - flicker
`

// buildClockPrinter builds the Go clock printer of package clockpatch.
func buildClockPrinter(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("clock faults need root (ptrace), and CI is set")
		}
		t.Skip("clock faults need root (ptrace)")
	}
	bin := filepath.Join(t.TempDir(), "goclock")
	cmd := exec.Command("go", "build", "-o", bin, "../../internal/clockpatch/testdata/goclock")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the clock printer: %v\n%s", err, out)
	}
	return bin
}

// clockSkews reads a clock printer's log: each line's wall clock against
// its monotonic clock, relative to the first line.
func clockSkews(t *testing.T, log string) []float64 {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	var base float64
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		rt, _ := strconv.ParseFloat(f[0], 64)
		mono, _ := strconv.ParseFloat(f[3], 64)
		if i == 0 {
			base = rt - mono
		}
		out = append(out, rt-mono-base)
	}
	return out
}

// trueSkew is how far the wall clock a printer printed last is from the
// true time it printed it: the log's modification time, which the kernel
// sets from its own clock, which no fake reaches. (Relative to the first
// line, as clockSkews is, a printer patched before it printed a line, as
// one that starts slowly on a loaded machine is, seemed never patched.)
// NaN when the log has no whole line yet.
func trueSkew(t *testing.T, log string) float64 {
	t.Helper()
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	// The last line is whole only when a newline ends it.
	for i := len(lines) - 2; i >= 0; i-- {
		if f := strings.Fields(lines[i]); len(f) == 4 {
			rt, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", log, lines[i], err)
			}
			return rt - float64(fi.ModTime().UnixNano())/1e9
		}
	}
	return math.NaN()
}

func TestClockFaultsOnAGoProgram(t *testing.T) {
	bin := buildClockPrinter(t)
	file := filepath.Join(t.TempDir(), "clock-faults.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(clockExperiment, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startChaos(t, "clock-faults", file)
	dir := r.dir()
	if code := r.wait(90 * time.Second); code != 0 {
		t.Fatalf("chaos run exited %d:\n%s\n%s", code, r.stdout.String(), r.stderr.String())
	}
	if n := countEvents(t, filepath.Join(dir, "timeline.jsonl"), "clock.applied"); n != 3 {
		t.Errorf("%d clock.applied events, want 3", n)
	}
	skews := clockSkews(t, filepath.Join(dir, "workloads/clock/instances/clock-0/output/clock.log"))
	// Drift at rate 3: the skew grows by 2 s a second; its largest value
	// below the hour (after the offset) is the drift's, near 3 s.
	var ahead, behind, truth, drifted int
	maxDrift := 0.0
	for _, s := range skews {
		switch {
		case math.Abs(s-3600) < 1:
			ahead++
		case math.Abs(s+1800) < 1:
			behind++
		case math.Abs(s) < 0.05:
			truth++
		case s > 0.05 && s < 10:
			drifted++
			maxDrift = max(maxDrift, s)
		}
	}
	t.Logf("%d samples: %d an hour ahead, %d half an hour behind, %d drifted (at most +%.3fs), %d true", len(skews), ahead, behind, drifted, maxDrift, truth)
	if ahead < 10 || behind < 10 || drifted < 10 || !(maxDrift > 2 && maxDrift < 4) {
		t.Errorf("the faults were not all seen: ahead %d, behind %d, drifted %d (max %.3f)", ahead, behind, drifted, maxDrift)
	}
	// A strobe of 2.5s flipping every 500ms is behind, true, behind...:
	// at least two separate stretches behind.
	stretches := 0
	for i, s := range skews {
		if math.Abs(s+1800) < 1 && (i == 0 || math.Abs(skews[i-1]+1800) >= 1) {
			stretches++
		}
	}
	if stretches < 2 {
		t.Errorf("the strobe was behind in %d stretches, want at least 2", stretches)
	}
	if last := skews[len(skews)-1]; math.Abs(last) > 0.5 {
		t.Errorf("the last sample is %+.3fs off, want the true clock", last)
	}
	if !strings.Contains(r.stdout.String(), "PASS") {
		t.Errorf("the run did not PASS:\n%s", r.stdout.String())
	}
}

// clockKilledAdapter makes a printer the test started an external target.
const clockKilledAdapter = `apiVersion: chaos/v1alpha1
id: local-clock-printer
backend: process
targets:
  printer:
    type: process
    description: A clock printer the test started; the harness did not.
    pid-file: %s
`

// clockKilledExperiment holds an offset, with no duration, on a printer
// the run started and on one it did not, so both are held when the
// harness is SIGKILLed.
const clockKilledExperiment = `apiVersion: chaos/v1alpha1
id: clock-killed
title: A clock offset held while the harness is SIGKILLed
default-adapter: local
timeout: 2m
workloads:
  - name: clock
    timeout: 90s
    run: exec %[1]s 80 > "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/clock.log"
operations:
  - {name: ahead, uses: clock-offset, target: {workload: clock}, clock: {offset: 1h}}
  - {name: behind, uses: clock-offset, target: printer, clock: {offset: -1h}}
flow:
  parallel:
    - clock
    - serial:
        - {wait: {workload: clock, condition: started}}
        - ahead
        - behind
`

// After a SIGKILL of the harness while clock offsets hold, chaos cleanup
// RUN gives every patched process its true clock back: the printer the
// run did not start keeps running and reads the true time, is traced by
// nobody and has no page of the fake left; the run's own printer had its
// clock given back before cleanup ended it with the run's processes.
func TestClockFaultCleanedUpAfterSIGKILL(t *testing.T) {
	bin := buildClockPrinter(t)
	tmp := t.TempDir()
	extLog, pidFile := filepath.Join(tmp, "printer.log"), filepath.Join(tmp, "printer.pid")
	lf, err := os.Create(extLog)
	if err != nil {
		t.Fatal(err)
	}
	printer := exec.Command(bin, "120")
	printer.Stdout = lf
	if err := printer.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	pid := printer.Process.Pid
	t.Cleanup(func() { printer.Process.Kill(); printer.Wait() })
	os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644)
	adapter, file := filepath.Join(tmp, "adapter.yaml"), filepath.Join(tmp, "clock-killed.yaml")
	os.WriteFile(adapter, []byte(fmt.Sprintf(clockKilledAdapter, pidFile)), 0o644)
	if err := os.WriteFile(file, []byte(fmt.Sprintf(clockKilledExperiment, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startChaos(t, "clock-killed", "--adapter", adapter, file)
	dir := r.dir()
	runID := filepath.Base(dir)
	inLog := filepath.Join(dir, "workloads/clock/instances/clock-0/output/clock.log")
	lastSkew := func(log string) float64 { return trueSkew(t, log) }
	waitSkew := func(log string, want float64, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !(math.Abs(lastSkew(log)-want) < 1) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the printer's clock is %+.3fs off, want %+.0fs", what, lastSkew(log), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for countEvents(t, filepath.Join(dir, "timeline.jsonl"), "clock.applied") < 2 {
		select {
		case <-r.done:
			t.Fatalf("chaos run exited %d before both offsets applied", r.exitCode)
		case <-time.After(50 * time.Millisecond):
		}
	}
	waitSkew(inLog, 3600, "the run's printer, held")
	waitSkew(extLog, -3600, "the external printer, held")
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	if patched, err := clockpatch.Patched(pid); err != nil || !patched {
		t.Fatalf("after the SIGKILL, before cleanup, pid %d patched %v (%v)", pid, patched, err)
	}
	var out bytes.Buffer
	cmd := exec.Command("chaos", "cleanup", runID)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("chaos cleanup %s: %v\n%s", runID, err, out.String())
	}
	t.Logf("chaos cleanup said:\n%s", out.String())
	if got := strings.Count(out.String(), "undid fake clock of pid"); got < 2 {
		t.Errorf("chaos cleanup gave %d processes their clock back, want both printers (and the run's wrapper)", got)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("fake clock of pid %d ", pid)) {
		t.Errorf("chaos cleanup did not say it gave pid %d its clock back", pid)
	}
	waitSkew(extLog, 0, "the external printer after chaos cleanup")
	if printer.ProcessState != nil {
		t.Fatal("the external printer died")
	}
	if patched, err := clockpatch.Patched(pid); err != nil || patched {
		t.Errorf("after cleanup, pid %d patched %v (%v)", pid, patched, err)
	}
	if tp, err := clockpatch.TracerPid(pid); err != nil || tp != 0 {
		t.Errorf("after cleanup, TracerPid of %d is %d (%v)", pid, tp, err)
	}
	states, _ := filepath.Glob(filepath.Join(fault.ResourceStateDir(), runID+".*"))
	if len(states) > 0 {
		t.Errorf("journals left for chaos cleanup: %v", states)
	}
}

// timeNSExperiment starts an instance in a time namespace whose monotonic
// clock is an hour ahead and boot-time clock two hours ahead; it prints
// what its clocks read, and the machine's uptime is read outside it.
const timeNSExperiment = `apiVersion: chaos/v1alpha1
id: clock-timens
title: An instance whose monotonic and boot clocks are offset
default-adapter: local
timeout: 1m
workloads:
  - name: clock
    timeout: 30s
    clock: {monotonic: 1h, boottime: 2h}
    run: |
      out="$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR"
      %[1]s 3 > "$out/clock.log"
      cut -d' ' -f1 /proc/uptime > "$out/uptime"
      cat /proc/self/timens_offsets > "$out/offsets"
flow: clock
`

// An instance of a workload with clock: {monotonic, boottime} reads its
// monotonic and boot clocks offset, from its start, while the machine's
// (read by the test around the run) are not; nothing of the namespace
// outlives the instance.
func TestWorkloadTimeNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("time namespaces need root, and CI is set")
		}
		t.Skip("time namespaces need root")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc is needed (scripts/test.sh installs it): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "clockprint")
	if out, err := exec.Command(gcc, "-O2", "-o", bin, "../../internal/clockpatch/testdata/clockprint/clockprint.c").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "clock-timens.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(timeNSExperiment, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	uptime := func(s string) float64 {
		f, _ := strconv.ParseFloat(strings.Fields(s)[0], 64)
		return f
	}
	hostUp := func() float64 {
		b, err := os.ReadFile("/proc/uptime")
		if err != nil {
			t.Fatal(err)
		}
		return uptime(string(b))
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	monoBefore, upBefore := float64(ts.Nano())/1e9, hostUp()
	r := startChaos(t, "clock-timens", file)
	dir := r.dir()
	if code := r.wait(60 * time.Second); code != 0 {
		t.Fatalf("chaos run exited %d:\n%s", code, r.stdout.String())
	}
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	monoAfter, upAfter := float64(ts.Nano())/1e9, hostUp()
	out := filepath.Join(dir, "workloads/clock/instances/clock-0/output")
	log, _ := os.ReadFile(filepath.Join(out, "clock.log"))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	mono := 0.0
	if f := strings.Fields(lines[len(lines)-1]); len(f) == 4 {
		mono, _ = strconv.ParseFloat(f[3], 64)
	}
	up, _ := os.ReadFile(filepath.Join(out, "uptime"))
	offsets, _ := os.ReadFile(filepath.Join(out, "offsets"))
	t.Logf("host monotonic %.3f..%.3f, the instance's %.3f; host uptime %.2f..%.2f, the instance's %s; offsets:\n%s", monoBefore, monoAfter, mono, upBefore, upAfter, strings.TrimSpace(string(up)), offsets)
	if mono < monoBefore+3600 || mono > monoAfter+3600 {
		t.Errorf("the instance's monotonic clock read %.3f, want an hour past the host's (%.3f..%.3f)", mono, monoBefore, monoAfter)
	}
	if u := uptime(string(up) + " 0"); u < upBefore+7200-0.5 || u > upAfter+7200+0.5 {
		t.Errorf("the instance's uptime read %.2f, want two hours past the host's (%.2f..%.2f)", u, upBefore, upAfter)
	}
	// Its wall clock is the machine's: a time namespace has no realtime
	// offset.
	if f := strings.Fields(lines[0]); len(f) == 4 {
		rt, _ := strconv.ParseFloat(f[0], 64)
		if now := float64(time.Now().UnixNano()) / 1e9; rt > now || rt < now-60 {
			t.Errorf("the instance's wall clock read %.3f, the host's is %.3f", rt, now)
		}
	}
}
