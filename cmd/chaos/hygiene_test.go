package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// These tests prove, from outside the harness (real processes, /proc,
// cgroup files, exit codes), that the processes and targets of a run are
// the run's own: a restart never starts a replacement beside anything of
// the old process, a process that escapes its group is still found and
// killed, and two runs of one example never meet.

// modes are the process modes a test runs in: cgroup mode where this
// machine has it (it must under CI), and process-group mode.
func modes(t *testing.T) []string {
	t.Helper()
	out := []string{"process-group"}
	if info := cgroup.Detect(); info.Usable {
		out = append([]string{"cgroup"}, out...)
	} else if os.Getenv("CI") != "" {
		t.Fatalf("cgroup v2 is not usable here (%s), and CI is set", info.Reason)
	}
	return out
}

// modeEnv is the environment that puts chaos in mode.
func modeEnv(mode string) []string {
	if mode == "process-group" {
		return []string{cgroup.DisableEnv + "=off"}
	}
	return nil
}

// needCgroups skips a test of cgroup mode where it is not available (an
// error under CI).
func needCgroups(t *testing.T) cgroup.Info {
	t.Helper()
	info := cgroup.Detect()
	if !info.Usable {
		if os.Getenv("CI") != "" {
			t.Fatalf("cgroup v2 is not usable here (%s), and CI is set", info.Reason)
		}
		t.Skipf("cgroup v2 is not usable here: %s", info.Reason)
	}
	return info
}

// runMode reads manifest.json's processes.mode.
func runMode(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Processes struct{ Mode string } `json:"processes"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m.Processes.Mode
}

// checkResult returns the result of check id in verdict.json.
func checkResult(t *testing.T, dir, id string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Checks []struct{ ID, Result string } `json:"checks"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Checks {
		if c.ID == id {
			return c.Result
		}
	}
	return ""
}

// TestRestartInPlaceOfAPidFileCheckingDaemon is the minimal case:
// a target whose start hook refuses while kill -0 on the pid in its pid
// file succeeds (PostgreSQL's postmaster.pid check), restarted in place
// three times 200 ms apart. A replacement started while the old daemon
// was still there, if only as a zombie, would refuse, and the run would be
// ERROR. In both process modes it must PASS.
func TestRestartInPlaceOfAPidFileCheckingDaemon(t *testing.T) {
	t.Parallel()
	for _, mode := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := startChaosEnv(t, "restart-pidfile-daemon", modeEnv(mode),
				"--adapter", filepath.Join("testdata", "process", "adapters", "pidfile-daemon.yaml"),
				filepath.Join("testdata", "process", "restart-pidfile-daemon.yaml"))
			dir := r.dir()
			if code := r.wait(60 * time.Second); code != 0 {
				t.Errorf("chaos run exited %d, want 0 (PASS)", code)
			}
			if v := readVerdict(t, dir); v.Verdict != "PASS" {
				t.Errorf("verdict %s, want PASS (errors %q)", v.Verdict, v.Errors)
			}
			if got := runMode(t, dir); got != mode {
				t.Errorf("manifest.json processes.mode %q, want %q", got, mode)
			}
			var pids []string
			for _, e := range readEvents(t, filepath.Join(dir, "timeline.jsonl")) {
				if e.str("event") == "target.started" || e.str("event") == "target.restarted" {
					pids = append(pids, e.str("pid"))
				}
			}
			if len(pids) != 4 {
				t.Errorf("daemons %v, want the first and three replacements", pids)
			}
			assertNoProcessesLeft(t, filepath.Base(dir))
		})
	}
}

// buildC compiles testdata/process/NAME.c with gcc into a temporary
// directory.
func buildC(t *testing.T, name string, flags ...string) string {
	t.Helper()
	if ok, err := haveTools("gcc"); err != nil {
		t.Fatal(err)
	} else if !ok {
		t.Skip("gcc is not installed")
	}
	bin := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O2", "-Wall", "-o", bin, filepath.Join("testdata", "process", name+".c")}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	return bin
}

// processesOf lists the processes that have a thread running exe. A
// leader that called pthread_exit has no exe of its own any more, so each
// thread is asked.
func processesOf(exe string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%s/exe", pid, task.Name())); err == nil && l == exe {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// TestRestartsOfAServerWhoseMainThreadExited restarts five times a server
// whose main thread called pthread_exit (its leader is a zombie while a
// thread holds its listening socket), on one port the run reserved. A
// replacement started before the old server was gone could not bind the
// port and the run would be ERROR. It must PASS, and nothing of any of the
// six servers may be left: not a process, not a thread, not the port.
func TestRestartsOfAServerWhoseMainThreadExited(t *testing.T) {
	t.Parallel()
	built := buildC(t, "pexitd", "-pthread")
	for _, mode := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// A copy per mode, so what is left of one run is told apart
			// from the servers of the other by its executable.
			bin := filepath.Join(t.TempDir(), "pexitd")
			if data, err := os.ReadFile(built); err != nil || os.WriteFile(bin, data, 0o755) != nil {
				t.Fatalf("copying pexitd: %v", err)
			}
			r := startChaosEnv(t, "restart-pexitd", append(modeEnv(mode), "PEXITD="+bin),
				"--adapter", filepath.Join("testdata", "process", "adapters", "pexitd.yaml"),
				filepath.Join("testdata", "process", "restart-pexitd.yaml"))
			dir := r.dir()
			// The first server: a zombie leader whose thread holds the port.
			first := r.awaitEvent(dir, "target.started", map[string]string{"target": "server"}, 30*time.Second)
			pid, _ := strconv.Atoi(first.str("pid"))
			if st, err := procState(pid); err == nil && st != 'Z' {
				t.Logf("the first server's leader is in state %c, not yet Z", st)
			}
			if !slices.Contains(processesOf(bin), pid) {
				t.Logf("the first server %d is already gone", pid)
			}
			if code := r.wait(60 * time.Second); code != 0 {
				t.Errorf("chaos run exited %d, want 0 (PASS)", code)
			}
			if v := readVerdict(t, dir); v.Verdict != "PASS" {
				t.Errorf("verdict %s, want PASS (errors %q)", v.Verdict, v.Errors)
			}
			if got := runMode(t, dir); got != mode {
				t.Errorf("manifest.json processes.mode %q, want %q", got, mode)
			}
			if left := processesOf(bin); len(left) > 0 {
				t.Errorf("servers left after the run: %v", left)
			}
			assertNoProcessesLeft(t, filepath.Base(dir))
		})
	}
}

// TestEscapedDaemonIsKilledAndReported: a workload starts a daemon with
// setsid env -i (a new session, no run marker) and exits. In cgroup mode
// the daemon is still in the instance's cgroup: it is reported in
// system/leaked-processes.txt, the local adapter's no-leaked-processes
// check fails (verdict FAIL, exit 1), and it is killed before chaos exits.
// Before, it outlived the run and the run passed.
func TestEscapedDaemonIsKilledAndReported(t *testing.T) {
	t.Parallel()
	needCgroups(t)
	r := startChaos(t, "setsid-daemon", filepath.Join("testdata", "process", "setsid-daemon.yaml"))
	dir := r.dir()
	code := r.wait(60 * time.Second)
	pidFile := filepath.Join(dir, "workloads", "w", "instances", "w-0", "output", "daemon.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the workload wrote no daemon.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("daemon.pid holds %q", data)
	}
	// Whatever the verdict, never leave it running.
	defer func() { _ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run() }()
	if code != 1 {
		t.Errorf("chaos run exited %d, want 1 (FAIL)", code)
	}
	if v := readVerdict(t, dir); v.Verdict != "FAIL" {
		t.Errorf("verdict %s, want FAIL (errors %q)", v.Verdict, v.Errors)
	}
	if got := checkResult(t, dir, "adapter/no-leaked-processes"); got != "fail" {
		t.Errorf("adapter/no-leaked-processes is %q, want fail", got)
	}
	leaked, _ := os.ReadFile(filepath.Join(dir, "system", "leaked-processes.txt"))
	if !bytes.Contains(leaked, []byte(strconv.Itoa(pid)+" ")) || !bytes.Contains(leaked, []byte("sleep 300")) {
		t.Errorf("system/leaked-processes.txt does not name the daemon %d:\n%s", pid, leaked)
	}
	if st, err := procState(pid); err == nil && st != 'Z' {
		t.Errorf("the daemon %d is still alive (state %c) after the run", pid, st)
	}
}

// TestTwoEtcdRunsAtOnce runs examples/etcd-kill-keeps-writes.yaml twice at
// the same time. Each run gets its own ports, so each starts, kills,
// measures and stops its own etcd: both PASS, their ports differ, and each
// run's etcd log shows it serving on that run's client port and not on the
// other's. With fixed ports the second etcd could not bind, and the second
// run's health checks and scrapes were answered by the first run's etcd.
func TestTwoEtcdRunsAtOnce(t *testing.T) {
	t.Parallel()
	if ok, err := haveTools("etcd", "etcdctl"); err != nil {
		t.Fatal(err)
	} else if !ok {
		t.Skip("etcd or etcdctl is not installed")
	}
	ex := examplesDir(t)
	args := []string{"--adapter", filepath.Join(ex, "adapters", "local-etcd.yaml"), filepath.Join(ex, "etcd-kill-keeps-writes.yaml")}
	runs := []*chaosRun{startChaos(t, "etcd-kill-keeps-writes", args...), startChaos(t, "etcd-kill-keeps-writes", args...)}
	var dirs []string
	ports := map[string]bool{}
	for _, r := range runs {
		dirs = append(dirs, r.dir())
	}
	clients := make([]string, len(runs))
	for i, r := range runs {
		if code := r.wait(3 * time.Minute); code != 0 {
			t.Errorf("run %d exited %d, want 0 (PASS)", i, code)
		}
		if v := readVerdict(t, dirs[i]); v.Verdict != "PASS" {
			t.Errorf("run %d: verdict %s, want PASS (errors %q)", i, v.Verdict, v.Errors)
		}
		data, _ := os.ReadFile(filepath.Join(dirs[i], "manifest.json"))
		var m struct {
			Ports map[string]int `json:"ports"`
		}
		if err := json.Unmarshal(data, &m); err != nil || len(m.Ports) != 3 {
			t.Fatalf("run %d: manifest.json ports %v (%v)", i, m.Ports, err)
		}
		for name, p := range m.Ports {
			key := strconv.Itoa(p)
			if ports[key] {
				t.Errorf("port %d (%s) given to both runs", p, name)
			}
			ports[key] = true
		}
		clients[i] = strconv.Itoa(m.Ports["client"])
		for _, e := range readEvents(t, filepath.Join(dirs[i], "timeline.jsonl")) {
			if e.str("event") == "metrics.started" && !strings.Contains(e.str("url"), fmt.Sprintf(":%d/", m.Ports["metrics"])) {
				t.Errorf("run %d scraped %s, not its own metrics port %d", i, e.str("url"), m.Ports["metrics"])
			}
		}
	}
	for i := range runs {
		log, err := os.ReadFile(filepath.Join(dirs[i], "logs", "etcd.log"))
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		own, other := "127.0.0.1:"+clients[i], "127.0.0.1:"+clients[1-i]
		if !bytes.Contains(log, []byte(own)) || bytes.Contains(log, []byte(other)) {
			t.Errorf("run %d's etcd log does not show it serving on its own port %s only (the other run's is %s)", i, own, other)
		}
		assertNoProcessesLeft(t, filepath.Base(dirs[i]))
	}
}

// TestCgroupFreezeSeenFromOutside watches a frozen instance in cgroup mode
// through its cgroup's files: during the freeze cgroup.freeze is 1 and
// cgroup.events says frozen 1, every process of the cgroup is asleep (S or
// D, not running, and not T: no SIGSTOP the workload could see) and its
// ticks stop; after operation.reverted it is thawed and ticks on to PASS.
func TestCgroupFreezeSeenFromOutside(t *testing.T) {
	t.Parallel()
	info := needCgroups(t)
	r := startChaos(t, "freeze-watched", filepath.Join("testdata", "process", "freeze-watched.yaml"))
	dir := r.dir()
	started := r.awaitEvent(dir, "operation.started", map[string]string{"operation": "ticker-freeze"}, 20*time.Second)
	pid, err := strconv.Atoi(started.strs("ids")[0])
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cgroup.CgroupOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(info.Mount, strings.TrimPrefix(cg, info.MountRoot))
	if !strings.Contains(leaf, filepath.Base(dir)) {
		t.Fatalf("instance %d is in cgroup %s, not in its run's tree", pid, leaf)
	}
	read := func(f string) string {
		b, _ := os.ReadFile(filepath.Join(leaf, f))
		return string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(read("cgroup.events"), "frozen 1") {
		if time.Now().After(deadline) {
			t.Fatalf("the instance's cgroup never said frozen 1: %q", read("cgroup.events"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.TrimSpace(read("cgroup.freeze")) != "1" {
		t.Errorf("cgroup.freeze is %q during the freeze", read("cgroup.freeze"))
	}
	procs := strings.Fields(read("cgroup.procs"))
	if len(procs) < 2 {
		t.Errorf("the frozen cgroup holds %v; want the wrapper and its script at least", procs)
	}
	for _, p := range procs {
		n, _ := strconv.Atoi(p)
		if st, err := procState(n); err == nil && st != 'S' && st != 'D' {
			t.Errorf("process %d of the frozen cgroup is in state %c, want S or D", n, st)
		}
	}
	ticks := filepath.Join(dir, "workloads", "ticker", "instances", "ticker-0", "output", "ticks")
	before, _ := os.ReadFile(ticks)
	time.Sleep(400 * time.Millisecond)
	if after, _ := os.ReadFile(ticks); !bytes.Equal(before, after) && !hasEvent(t, filepath.Join(dir, "timeline.jsonl"), "operation.reverted") {
		t.Error("a frozen instance went on ticking")
	}
	r.awaitEvent(dir, "operation.reverted", map[string]string{"operation": "ticker-freeze"}, 10*time.Second)
	if ev := read("cgroup.events"); ev != "" && !strings.Contains(ev, "frozen 0") {
		t.Errorf("the instance's cgroup is still frozen after operation.reverted: %q", ev)
	}
	if code := r.wait(30 * time.Second); code != 0 {
		t.Errorf("chaos run exited %d, want 0 (PASS)", code)
	}
	if v := readVerdict(t, dir); v.Verdict != "PASS" {
		t.Errorf("verdict %s, want PASS (errors %q)", v.Verdict, v.Errors)
	}
	assertNoProcessesLeft(t, filepath.Base(dir))
}

// TestCleanupAfterAKilledRun kills chaos with SIGKILL while its workload
// and a daemon the workload started with setsid env -i run. Nothing is
// cleaned up then, and the daemon carries no marker: only the run's cgroup
// tree still names it. chaos cleanup RUN kills everything in the tree,
// says so, and removes the tree.
func TestCleanupAfterAKilledRun(t *testing.T) {
	t.Parallel()
	info := needCgroups(t)
	r := startChaos(t, "killed-run", filepath.Join("testdata", "process", "killed-run.yaml"))
	dir := r.dir()
	runID := filepath.Base(dir)
	pidFile := filepath.Join(dir, "workloads", "w", "instances", "w-0", "output", "daemon.pid")
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the workload wrote no daemon.pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer func() { _ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run() }()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	trees, _ := filepath.Glob(filepath.Join(info.Root, runID+".*"))
	if len(trees) != 1 {
		t.Fatalf("the killed run left cgroup trees %v, want one", trees)
	}
	if st, err := procState(pid); err != nil || st == 'Z' {
		t.Fatalf("the daemon %d is gone before cleanup (%c, %v)", pid, st, err)
	}
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "cleanup", "--backend", "process", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("chaos cleanup: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(fmt.Sprintf("killed pid %d (/bin/sleep 300) of run %s (in cgroup ", pid, runID))) {
		t.Errorf("chaos cleanup did not say it killed the daemon %d:\n%s", pid, out)
	}
	if st, err := procState(pid); err == nil && st != 'Z' {
		t.Errorf("the daemon %d is alive (state %c) after chaos cleanup", pid, st)
	}
	if _, err := os.Stat(trees[0]); !os.IsNotExist(err) {
		t.Errorf("chaos cleanup left the run's cgroup tree %s (%v)", trees[0], err)
	}
	if left := runProcesses(runID); len(left) > 0 {
		t.Errorf("processes of the run left after chaos cleanup:\n%s", strings.Join(left, "\n"))
	}
}
