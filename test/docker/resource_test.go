package docker_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/loopfs"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// probeScript runs in the target's container: every half second a
// subshell writes 1 MiB with direct I/O to /data (the test's file system)
// and forks ten children, and logs each outcome to /log/out with the time,
// as a user's own program logs what it saw: dd's rate line or its error, a
// fork the shell could not make. A shell whose fork fails dies, so the
// forks are the subshell's; the loop itself uses builtins only (read -t
// on a FIFO is its sleep), so that it lives through the task limit.
const probeScript = `mkfifo /tmp/tick
while :; do
( date +%s > /log/ts; read ts < /log/ts; read a x < /proc/uptime; if dd if=/dev/zero of=/data/probe bs=64k count=16 oflag=direct 2> /log/dd.err; then read b x < /proc/uptime; echo "$ts io ok $(( ${b%.*}${b#*.} - ${a%.*}${a#*.} ))" >> /log/out; else echo "$ts io error $(head -n 1 /log/dd.err)" >> /log/out; fi; rm -f /data/probe; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1 & done; wait; echo "$ts fork ok" >> /log/out ) 2>> /log/fork.err
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
	needDocker(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("resource faults need root, and CI is set")
		}
		t.Skip("resource faults need root")
	}
	mnt, _ := loopfs.Mount(t, 64)
	logs := t.TempDir()
	os.Chmod(logs, 0o777)
	dir := t.TempDir()
	adapterFile := filepath.Join(dir, "res.yaml")
	os.WriteFile(adapterFile, []byte(fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: docker-resource-target
backend: docker
instance: {image: "chaos/busybox:latest"}
targets:
  store:
    type: container
    lifecycle: run
    container: chaos-res-$CHAOS_RUN_ID
    start: |
      docker run -d --name "chaos-res-$CHAOS_RUN_ID" --label "chaos.run=$CHAOS_RUN_ID" -v %s:/data -v %s:/log chaos/busybox:latest sh -c '%s' >/dev/null
`, mnt, logs, strings.ReplaceAll(strings.ReplaceAll(probeScript, "do\n", "do "), "\n", "; "))), 0o644)
	expFile := filepath.Join(dir, "x.yaml")
	os.WriteFile(expFile, []byte(`apiVersion: chaos/v1alpha1
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
`), 0o644)
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", adapterFile, expFile)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (PASS)\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 25))
	}
	events, err := rundir.ReadTimeline(filepath.Join(r.dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The windows in which each fault held, in whole seconds of the
	// machine's clock (what date +%s prints): applied to reverted.
	type window struct{ from, to int64 }
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
	for _, op := range []string{"slow-disk", "few-tasks", "full-disk"} {
		if w := held[op]; w.from == 0 || w.to == 0 {
			t.Fatalf("%s: applied at %d, reverted at %d", op, w.from, w.to)
		}
	}
	inside := func(w window, ts int64) bool { return ts > w.from && ts < w.to }
	after := func(w window, ts int64) bool { return ts > w.to+1 }
	if b, err := os.ReadFile(filepath.Join(logs, "out")); err == nil && testing.Verbose() {
		t.Logf("the program's log:\n%s", b)
	}
	f, err := os.Open(filepath.Join(logs, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var slowRates, fastAfter []float64
	var forkFailed, forkOKAfter, enospc, writeOKAfter bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		ts, rest, _ := strings.Cut(line, " ")
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "io ok "):
			// 1 MiB in this many hundredths of a second: MB/s.
			cs, _ := strconv.ParseFloat(strings.TrimPrefix(rest, "io ok "), 64)
			rate := 1.048576 / (max(cs, 1) / 100)
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
		case strings.HasPrefix(rest, "io error") && strings.Contains(rest, "No space left"):
			enospc = enospc || inside(held["full-disk"], n)
		case strings.HasPrefix(rest, "fork failed"):
			forkFailed = forkFailed || inside(held["few-tasks"], n)
		case rest == "fork ok":
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
		if e.Name() != "lost+found" {
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
	needDocker(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("resource faults need root, and CI is set")
		}
		t.Skip("resource faults need root")
	}
	mnt, _ := loopfs.Mount(t, 64)
	dir := t.TempDir()
	adapterFile := filepath.Join(dir, "res.yaml")
	os.WriteFile(adapterFile, []byte(fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: docker-resource-killed
backend: docker
instance: {image: "chaos/busybox:latest"}
targets:
  store:
    type: container
    lifecycle: run
    container: chaos-resk-$CHAOS_RUN_ID
    start: docker run -d --name "chaos-resk-$CHAOS_RUN_ID" --label "chaos.run=$CHAOS_RUN_ID" -v %s:/data chaos/busybox:latest sleep 600 >/dev/null
`, mnt)), 0o644)
	expFile := filepath.Join(dir, "x.yaml")
	os.WriteFile(expFile, []byte(`apiVersion: chaos/v1alpha1
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
`), 0o644)
	r := startBG(t, "docker-resource-killed", "--plain", "--adapter", adapterFile, expFile)
	runDir := r.dir()
	runID := filepath.Base(runDir)
	for _, op := range []string{"cpu", "pressure", "tasks", "io", "burn", "hog", "fill"} {
		r.await(runDir, "resource.applied", map[string]string{"operation": op}, 60*time.Second)
	}
	helpers := func() []int {
		var out []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if strings.Contains(string(env), "CHAOS_RUN_ID="+runID) && strings.Contains(string(cmd), fault.StressCommand) {
				out = append(out, pid)
			}
		}
		return out
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
	if m, _ := filepath.Glob(filepath.Join(fault.DefaultResourceStateDir, cgroup.SafeName(runID, 200)+".*")); len(m) > 0 {
		t.Errorf("journals left for chaos cleanup: %v", m)
	}
	if n := strings.Count(string(out), "undid "); n != 9 {
		t.Errorf("chaos cleanup undid %d changes, want the 9 the dry run listed", n)
	}
	if !strings.Contains(string(out), "container chaos-resk-"+runID) {
		t.Errorf("chaos cleanup did not remove the target's container")
	}
}
