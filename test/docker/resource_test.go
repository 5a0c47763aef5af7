package docker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/loopfs"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/test/probelog"
)

// needResourceRoot skips without Docker or root, unless in CI.
func needResourceRoot(t *testing.T) {
	t.Helper()
	needDocker(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("resource faults need root, and CI is set")
		}
		t.Skip("resource faults need root")
	}
}

// window is when a fault held, in whole seconds of the machine's clock
// (what date +%s prints): applied to reverted.
type window struct{ from, to int64 }

// runHeld runs the experiment, which must PASS, and returns the windows in
// which each of ops held.
func runHeld(t *testing.T, adapterFile, expFile string, ops ...string) map[string]window {
	t.Helper()
	_, events := runPASS(t, adapterFile, expFile)
	held := map[string]window{}
	for _, e := range events {
		switch e.Name {
		case "resource.applied":
			held[e.String("operation")] = window{from: e.TS.Unix()}
		case "resource.reverted":
			w := held[e.String("operation")]
			w.to = e.TS.Unix()
			held[e.String("operation")] = w
		}
	}
	for _, op := range ops {
		if w := held[op]; w.from == 0 || w.to == 0 {
			t.Fatalf("%s: applied at %d, reverted at %d", op, w.from, w.to)
		}
	}
	return held
}

// probeScript runs in the target's container: every half second a
// subshell writes 1 MiB with direct I/O to /data (the test's file system)
// and forks ten children, and logs each outcome to /log/out with the time,
// as a user's own program logs what it saw: dd's rate line or its error, a
// fork the shell could not make. A shell whose fork fails dies, so the
// forks are the subshell's; the loop itself uses builtins only (read -t
// on a FIFO is its sleep), so that it lives through the task limit.
const probeScript = `mkfifo /tmp/tick
while :; do
( date +%s > /log/ts; read ts < /log/ts; ` + probelog.IOProbe + `; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1 & done; wait; echo "$ts fork ok" >> /log/out ) 2>> /log/fork.err
if [ -s /log/fork.err ]; then read ts < /log/ts; echo "$ts fork failed" >> /log/out; : > /log/fork.err; fi
read -t 0.5 x <> /tmp/tick
done`

// TestResourceFaultsOnAContainer: io-limit, task-limit and disk-fill on a
// container target, one after the other, each seen from inside the
// container by its own program: dd with direct I/O slowed to about
// 1 MB/s, a fork failing (EAGAIN), a write failing with ENOSPC; after each
// revert the program does as before, and after the run no filler file is
// left on the file system and its space is back.
func TestResourceFaultsOnAContainer(t *testing.T) {
	needResourceRoot(t)
	mnt, _ := loopfs.Mount(t, 64)
	logs := t.TempDir()
	os.Chmod(logs, 0o777)
	dir := t.TempDir()
	adapterFile := containerAdapter(t, dir, "docker-resource-target", "store", "res", fmt.Sprintf(`-v %s:/data -v %s:/log chaos/busybox:latest sh -c '%s'`, mnt, logs, strings.ReplaceAll(strings.ReplaceAll(probeScript, "do\n", "do "), "\n", "; ")))
	expFile := writeFile(t, filepath.Join(dir, "x.yaml"), `apiVersion: chaos/v1alpha1
id: docker-resource-faults
timeout: 2m
workloads:
  - {name: w, run: "sleep 40"}
operations:
  - {name: slow-disk, uses: io-limit, target: store, resource: {path: /data, write-bps: 1MiB}, duration: 7s}
  - {name: few-tasks, uses: task-limit, target: store, resource: {tasks: 6}, duration: 5s}
  - {name: full-disk, uses: disk-fill, target: store, resource: {path: /data, free: 0}, duration: 5s}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - {delay: 3s}
        - slow-disk
        - {delay: 3s}
        - few-tasks
        - {delay: 3s}
        - full-disk
        - {delay: 4s}
`)
	held := runHeld(t, adapterFile, expFile, "slow-disk", "few-tasks", "full-disk")
	inside := func(w window, ts int64) bool { return ts > w.from && ts < w.to }
	after := func(w window, ts int64) bool { return ts > w.to+1 }
	if b, err := os.ReadFile(filepath.Join(logs, "out")); err == nil && testing.Verbose() {
		t.Logf("the program's log:\n%s", b)
	}
	probe, err := probelog.Read(filepath.Join(logs, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var slowRates, fastAfter []float64
	var forkFailed, forkOKAfter, enospc, writeOKAfter bool
	for _, l := range probe {
		n := l.TS
		rate, ok, err := probelog.IORate(l)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Join(logs, "out"), err)
		}
		switch {
		case ok:
			// A write that began in the window's last seconds may end
			// after the revert, partly unthrottled: only those that end
			// inside it (1 MiB at 1 MiB/s is a second) count.
			if w := held["slow-disk"]; n > w.from && n+2 <= w.to {
				slowRates = append(slowRates, rate)
			} else if after(held["slow-disk"], n) && n < held["few-tasks"].from {
				fastAfter = append(fastAfter, rate)
			}
			if after(held["full-disk"], n) {
				writeOKAfter = true
			}
		case probelog.IOError(l, "No space left"):
			enospc = enospc || inside(held["full-disk"], n)
		case strings.HasPrefix(l.What, "fork failed"):
			forkFailed = forkFailed || inside(held["few-tasks"], n)
		case l.What == "fork ok":
			forkOKAfter = forkOKAfter || after(held["few-tasks"], n)
		}
	}
	t.Logf("dd's MB/s while io-limit held: %.2f; after: %.2f", slowRates, fastAfter)
	for _, rate := range slowRates {
		if rate > 1.3 {
			t.Errorf("dd wrote at %.2f MB/s under a 1MiB/s limit, want about 1", rate)
		}
	}
	if len(slowRates) == 0 {
		t.Error("no write completed while io-limit held")
	}
	if !forkFailed || !forkOKAfter {
		t.Errorf("a fork failed while task-limit held: %v; forks worked after: %v", forkFailed, forkOKAfter)
	}
	if !enospc || !writeOKAfter {
		t.Errorf("a write failed with ENOSPC while disk-fill held: %v; writes worked after: %v", enospc, writeOKAfter)
	}
	ents, _ := os.ReadDir(mnt)
	for _, e := range ents {
		if e.Name() != "lost+found" && e.Name() != probelog.IOProbeFile {
			t.Errorf("left on the file system after the run: %s", e.Name())
		}
	}
}

// TestResourceFaultsOnAContainerCleanedUpAfterSIGKILL: every resource fault
// held on a container target (its groups limited, two stress helpers in
// them, a filler file on its file system) while the harness is SIGKILLed;
// chaos cleanup --backend docker RUN then leaves no helper, no filler file
// and no journal, and says it restored each.
func TestResourceFaultsOnAContainerCleanedUpAfterSIGKILL(t *testing.T) {
	needResourceRoot(t)
	mnt, _ := loopfs.Mount(t, 64)
	dir := t.TempDir()
	adapterFile := containerAdapter(t, dir, "docker-resource-killed", "store", "resk", fmt.Sprintf(`-v %s:/data chaos/busybox:latest sleep 600`, mnt))
	expFile := writeFile(t, filepath.Join(dir, "x.yaml"), `apiVersion: chaos/v1alpha1
id: docker-resource-killed
timeout: 2m
workloads:
  - {name: w, run: "sleep 90"}
operations:
  - {name: cpu, uses: cpu-limit, target: store, resource: {cpu: 20%}}
  - {name: pressure, uses: memory-pressure, target: store, resource: {memory: 256MiB}}
  - {name: tasks, uses: task-limit, target: store, resource: {tasks: 50}}
  - {name: io, uses: io-limit, target: store, resource: {path: /data, write-bps: 1MiB}}
  - {name: burn, uses: cpu-stress, target: store, resource: {cores: 0.2}}
  - {name: hog, uses: memory-stress, target: store, resource: {memory: 16MiB}}
  - {name: fill, uses: disk-fill, target: store, resource: {path: /data, free: 1MiB}}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - parallel: [cpu, pressure, tasks, io, burn, hog, fill]
`)
	r := startBG(t, "docker-resource-killed", "--plain", "--adapter", adapterFile, expFile)
	runDir := r.dir()
	runID := filepath.Base(runDir)
	for _, op := range []string{"cpu", "pressure", "tasks", "io", "burn", "hog", "fill"} {
		r.await(runDir, "resource.applied", map[string]string{"operation": op}, 60*time.Second)
	}
	helpers := func() []int {
		return processes(func(proc string) bool {
			env, _ := os.ReadFile(proc + "/environ")
			cmd, _ := os.ReadFile(proc + "/cmdline")
			return strings.Contains(string(env), "CHAOS_RUN_ID="+runID) && strings.Contains(string(cmd), fault.StressCommand)
		})
	}
	fillers := func() []string { m, _ := filepath.Glob(filepath.Join(mnt, ".chaos-fill-*")); return m }
	if len(helpers()) != 2 || len(fillers()) != 1 {
		t.Fatalf("held: helpers %v, filler files %v; want 2 and 1", helpers(), fillers())
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	// The dry run lists what is held, from the journal on this machine.
	dry, _ := exec.Command(chaosBin, "cleanup", "--dry-run", "--backend", "docker", runDir).CombinedOutput()
	t.Logf("chaos cleanup --dry-run said:\n%s", dry)
	for _, want := range []string{"stress helper pid", "filler file", "cpu-limit", "task-limit", "io-limit", "memory-pressure"} {
		if !strings.Contains(string(dry), want) {
			t.Errorf("chaos cleanup --dry-run does not list the %s the killed run holds", want)
		}
	}
	out, err := exec.Command(chaosBin, "cleanup", "--backend", "docker", runDir).CombinedOutput()
	t.Logf("chaos cleanup said:\n%s", out)
	if err != nil {
		t.Fatalf("chaos cleanup: %v", err)
	}
	if h, f := helpers(), fillers(); len(h)+len(f) > 0 {
		t.Errorf("left after chaos cleanup: helpers %v, filler files %v", h, f)
	}
	if m, _ := filepath.Glob(filepath.Join(fault.ResourceStateDir(), cgroup.SafeName(runID, 200)+".*")); len(m) > 0 {
		t.Errorf("journals left for chaos cleanup: %v", m)
	}
	if n := strings.Count(string(out), "undid "); n != 9 {
		t.Errorf("chaos cleanup undid %d changes, want the 9 the dry run listed", n)
	}
	if !strings.Contains(string(out), "container chaos-resk-"+runID) {
		t.Errorf("chaos cleanup did not remove the target's container")
	}
}

// memoryProbe runs in the target's container (`sh /log/probe.sh out`),
// and in a neighbour's beside it that no fault touches (to log ctl): it
// writes a 96 MiB working set of file pages (/tmp/ws, charged to its own
// memory group), then in a loop does a fixed piece of shell arithmetic
// (about 0.15 s of a CPU: several of the quota's 100 ms periods, so that
// where in a period it starts matters little; /proc/uptime counts 10 ms),
// reads the working set through once, and logs, as a user's own program
// would, what it sees of itself: the wall second, the uptime before the
// work, after it and after the pass, and its groups' CPU time (ns), memory
// use, memory limit and anonymous memory (bytes: total_rss of memory.stat,
// which file pages the kernel reclaims at will do not move) as the
// container's own /sys/fs/cgroup shows them.
const memoryProbe = `cd /sys/fs/cgroup
dd if=/dev/urandom of=/tmp/ws bs=1M count=96 2>/dev/null
while :; do
  read t0 x < /proc/uptime
  i=0; while [ $i -lt 25000 ]; do i=$((i+1)); done
  read t1 x < /proc/uptime
  cat /tmp/ws > /dev/null
  read t2 x < /proc/uptime
  echo "$(date +%s) $t0 $t1 $t2 $(cat cpuacct/cpuacct.usage) $(cat memory/memory.usage_in_bytes) $(cat memory/memory.limit_in_bytes) $(awk '$1 == "total_rss" {print $2}' memory/memory.stat)" >> /log/$1
  sleep 0.3
done
`

// probeLine is one line of memoryProbe's log.
type probeLine struct {
	ts               int64   // wall second the line was written
	t0, work, pass   float64 // uptime at the start; seconds of work; seconds of the pass
	cpuNS            float64 // the group's CPU time so far
	memUse, memLimit int64
	anon             int64 // total_rss: anonymous memory, the helper's included
}

func readProbe(t *testing.T, file string) []probeLine {
	t.Helper()
	lines, err := probelog.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]probeLine, len(lines))
	for i, l := range lines {
		p := &out[i]
		var t1, t2 float64
		if err := probelog.Fields(l, &p.t0, &t1, &t2, &p.cpuNS, &p.memUse, &p.memLimit, &p.anon); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		p.ts, p.work, p.pass = l.TS, t1-p.t0, t2-t1
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestCPUAndMemoryStressAndPressureOnAContainer: cpu-stress,
// memory-pressure and memory-stress on a container target (a quota of
// half a CPU, as `docker run --cpus 0.2` gives), one after the other, each seen
// from inside the container by its own program: under cpu-stress its
// groups' CPU time rises and its own fixed work takes longer, beside the
// same program in a neighbouring container (the machine's own load slows
// both alike; the helper shares the target's groups only); under memory-pressure it sees its memory limit drop
// to the asked 32 MiB, its use held below it (its 96 MiB of file pages
// reclaimed) and its pass over them slow; under memory-stress its use
// rises by the helper's 64 MiB; after each revert it is as before.
func TestCPUAndMemoryStressAndPressureOnAContainer(t *testing.T) {
	needResourceRoot(t)
	logs := t.TempDir()
	os.Chmod(logs, 0o777)
	if err := os.WriteFile(filepath.Join(logs, "probe.sh"), []byte(memoryProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	neighbour := fmt.Sprintf("chaos-resm-ctl-%d", os.Getpid())
	if out, err := exec.Command("docker", "run", "-d", "--name", neighbour, "--cpus", "0.2", "-v", logs+":/log", "chaos/busybox:latest", "sh", "/log/probe.sh", "ctl").CombinedOutput(); err != nil {
		t.Fatalf("starting the neighbour: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", neighbour).Run() })
	dir := t.TempDir()
	adapterFile := containerAdapter(t, dir, "docker-stress-target", "app", "resm", fmt.Sprintf(`--cpus 0.2 -v %s:/log chaos/busybox:latest sh /log/probe.sh out`, logs))
	expFile := writeFile(t, filepath.Join(dir, "x.yaml"), `apiVersion: chaos/v1alpha1
id: docker-stress-faults
timeout: 2m
workloads:
  - {name: w, run: "sleep 67"}
operations:
  - {name: burn, uses: cpu-stress, target: app, resource: {cores: 1}, duration: 9s}
  - {name: squeeze, uses: memory-pressure, target: app, resource: {memory: 32MiB}, duration: 9s}
  - {name: hog, uses: memory-stress, target: app, resource: {memory: 64MiB}, duration: 9s}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - {delay: 10s}
        - burn
        - {delay: 7s}
        - squeeze
        - {delay: 5s}
        - hog
        - {delay: 5s}
`)
	held := runHeld(t, adapterFile, expFile, "burn", "squeeze", "hog")
	lines, ctl := readProbe(t, filepath.Join(logs, "out")), readProbe(t, filepath.Join(logs, "ctl"))
	if testing.Verbose() {
		b, _ := os.ReadFile(filepath.Join(logs, "out"))
		t.Logf("the program's log (wall s, uptime, after work, after pass, cpu ns, memory use, limit):\n%s", b)
	}
	// Each line's span is from the line before it to it; it counts in a
	// window when the whole span is inside, a second clear of each end
	// (the wall seconds are whole).
	in := func(w window, i int) bool { return i > 0 && lines[i-1].ts > w.from && lines[i].ts < w.to }
	// between: clear of a before, and of b after (0: no end).
	between := func(a, b int64, i int) bool {
		return i > 0 && lines[i-1].ts > a+1 && (b == 0 || lines[i].ts < b)
	}
	// ctlWork is the neighbour's work at the same time: the median of its
	// lines written in the same wall seconds.
	ctlMedian := func(i int, f func(probeLine) float64) float64 {
		var w []float64
		for _, c := range ctl {
			if c.ts >= lines[i-1].ts && c.ts <= lines[i].ts {
				w = append(w, f(c))
			}
		}
		return median(w)
	}
	type phase struct{ cores, work, relWork, pass, relPass, use, anon []float64 }
	add := func(p *phase, i int) {
		cur, prev := lines[i], lines[i-1]
		p.cores = append(p.cores, (cur.cpuNS-prev.cpuNS)/1e9/(cur.t0-prev.t0))
		p.work = append(p.work, cur.work)
		if c := ctlMedian(i, func(l probeLine) float64 { return l.work }); c > 0 {
			p.relWork = append(p.relWork, cur.work/c)
		}
		if c := ctlMedian(i, func(l probeLine) float64 { return l.pass }); c > 0 {
			p.relPass = append(p.relPass, cur.pass/c)
		}
		p.pass = append(p.pass, cur.pass)
		p.use = append(p.use, float64(cur.memUse))
		p.anon = append(p.anon, float64(cur.anon))
	}
	var before, burn, afterBurn, squeeze, afterSqueeze, hog, afterHog phase
	var limits []int64
	first := lines[0].ts
	for i := range lines {
		switch {
		case between(first, held["burn"].from, i):
			add(&before, i)
		case in(held["burn"], i):
			add(&burn, i)
		case between(held["burn"].to, held["squeeze"].from, i):
			add(&afterBurn, i)
		case in(held["squeeze"], i):
			add(&squeeze, i)
			limits = append(limits, lines[i].memLimit)
		case between(held["squeeze"].to, held["hog"].from, i):
			add(&afterSqueeze, i)
		case in(held["hog"], i):
			add(&hog, i)
		case between(held["hog"].to, 0, i):
			add(&afterHog, i)
		}
	}
	for name, p := range map[string]phase{"before": before, "cpu-stress": burn, "after cpu-stress": afterBurn, "memory-pressure": squeeze, "after memory-pressure": afterSqueeze, "memory-stress": hog, "after memory-stress": afterHog} {
		if len(p.work) < 2 {
			t.Fatalf("%s: %d lines of the program's log, want 2 or more", name, len(p.work))
		}
		t.Logf("%-22s CPUs %.2f, work %.3f s (%.2f of the neighbour's), pass %.3f s (%.2f), memory use %.1f MiB, anonymous %.1f MiB (medians of %d)", name+":", median(p.cores), median(p.work), median(p.relWork), median(p.pass), median(p.relPass), median(p.use)/(1<<20), median(p.anon)/(1<<20), len(p.work))
	}

	// cpu-stress: the group's CPU time rises, and the program's work, now
	// sharing its quota with the helper, takes longer; then it does not.
	// The program alone uses about half its quota; with the helper the
	// group is at it.
	if b, d := median(before.cores), median(burn.cores); d < b+0.05 || d < 0.8*0.2 {
		t.Errorf("the container's CPUs went from %.2f to %.2f under cpu-stress of 1 core, want a rise to its quota (0.2)", b, d)
	}
	if ratio := median(burn.relWork) / median(before.relWork); ratio < 1.3 {
		t.Errorf("beside its neighbour, the program's work took %.2f times as long under cpu-stress, want 1.3 or more", ratio)
	}
	if median(afterBurn.relWork) > median(burn.relWork)/1.2 {
		t.Errorf("beside its neighbour, the program's work took %.2f of its time after cpu-stress, %.2f under it: not back", median(afterBurn.relWork), median(burn.relWork))
	}

	// memory-pressure: the program sees its limit at 32 MiB and its use
	// below it (its working set reclaimed, read again each pass, slower);
	// after, the old limit and its working set back.
	for _, l := range limits {
		if l != 32<<20 {
			t.Errorf("the program saw a memory limit of %d under memory-pressure of 32MiB", l)
			break
		}
	}
	if m := median(before.use); m < 96<<20 {
		t.Fatalf("the program used %.1f MiB before, want its 96 MiB working set or more", m/(1<<20))
	}
	for _, u := range squeeze.use {
		if u > 32<<20 {
			t.Errorf("the program used %.1f MiB under memory-pressure of 32MiB", u/(1<<20))
			break
		}
	}
	// The baseline is the quicker of the two phases without a fault before
	// it: the first passes of "before" may still read the working set from
	// disk (4.5 times the neighbour's once in CI, against 0.67 after
	// cpu-stress).
	if ratio := median(squeeze.relPass) / min(median(before.relPass), median(afterBurn.relPass)); ratio < 1.5 {
		t.Errorf("beside its neighbour, a pass over the working set took %.2f times as long under memory-pressure, want 1.5 or more (reclaimed pages read again)", ratio)
	}
	if l := lines[len(lines)-1].memLimit; l != lines[0].memLimit {
		t.Errorf("the program's memory limit is %d after the run, was %d", l, lines[0].memLimit)
	}
	if m := median(afterSqueeze.use); m < 96<<20 {
		t.Errorf("the program used %.1f MiB after memory-pressure, want its working set back (96 MiB or more)", m/(1<<20))
	}

	// memory-stress: the group's anonymous memory rises by the 64 MiB the
	// helper touches, and falls back after. (Its whole use also counts the
	// working set's file pages, which the kernel may take back meanwhile:
	// in CI it rose by only 42 MiB once.)
	rise := median(hog.anon) - median(afterSqueeze.anon)
	if rise < 0.95*(64<<20) || rise > 1.2*(64<<20) {
		t.Errorf("the program's anonymous memory rose by %.1f MiB under memory-stress of 64MiB", rise/(1<<20))
	}
	if back := median(afterHog.anon) - median(afterSqueeze.anon); back > 4<<20 {
		t.Errorf("the program's anonymous memory is %.1f MiB above what it was before memory-stress after it", back/(1<<20))
	}
}
