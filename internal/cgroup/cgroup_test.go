package cgroup_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/proc"
)

// The tests start real processes in real cgroups. A proc.Supervisor makes
// the test binary a child subreaper whose reaper collects the orphans the
// tests' double forks leave (PID 1 here does not reap).
func TestMain(m *testing.M) {
	sup, err := proc.NewSupervisor(fmt.Sprintf("CHAOS_RUN_ID=cgroup-test-%d", os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	sup.Close()
	os.Exit(code)
}

// newRun returns a fresh run tree, skipping the test where cgroup v2 cannot
// be used; the tree is killed and removed when the test ends.
func newRun(t *testing.T) *cgroup.Run {
	t.Helper()
	info := cgroup.Detect()
	if !info.Usable {
		t.Skipf("cgroup v2 unusable: %s", info.Reason)
	}
	r, err := cgroup.NewRun(info, fmt.Sprintf("test-%s-%d", t.Name(), time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Thaw(ctx)
		_ = r.Kill()
		if err := r.WaitEmpty(ctx); err != nil {
			t.Error(err)
		}
		if err := r.Remove(ctx); err != nil {
			t.Error(err)
		}
	})
	return r
}

// startIn starts sh -c script directly in g (clone3 CLONE_INTO_CGROUP) and
// returns the command, whose Wait is called at cleanup.
func startIn(t *testing.T, g *cgroup.Group, script string) *exec.Cmd {
	t.Helper()
	fd, err := g.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setpgid: true}
	if err := proc.StartTracked(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, 5*time.Second, "pid file", func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func TestDetect(t *testing.T) {
	info := cgroup.Detect()
	if info.Mount == "" {
		t.Skipf("no cgroup2 mount: %s", info.Reason)
	}
	mnt, _, err := cgroup.FindMount()
	if err != nil || mnt != info.Mount {
		t.Fatalf("FindMount = %q, %v; Detect found %q", mnt, err, info.Mount)
	}
	if info.Usable && info.Root != filepath.Join(info.Mount, "chaos") {
		t.Fatalf("Root = %q", info.Root)
	}
	t.Setenv(cgroup.DisableEnv, "off")
	if off := cgroup.Detect(); off.Usable || !strings.Contains(off.Reason, cgroup.DisableEnv) {
		t.Fatalf("Detect with %s=off = %+v", cgroup.DisableEnv, off)
	}
}

// TestKillReachesEscapees: a child that setsid's, clears its environment and
// double-forks is still in the leaf, and cgroup.kill reaches it. WaitEmpty
// returns as soon as the kernel says the group is empty: the latency is
// measured.
func TestKillReachesEscapees(t *testing.T) {
	r := newRun(t)
	leaf, err := r.NewLeaf("escapees")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "pid")
	cmd := startIn(t, leaf, "setsid env -i sh -c 'sleep 1000 & echo $! > "+f+".tmp && mv "+f+".tmp "+f+"'; exec sleep 1000")
	esc := readPid(t, f)
	eventually(t, 5*time.Second, "escapee reparented", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(esc) + "/stat")
		fields := strings.Fields(string(b))
		return len(fields) > 3 && fields[3] == strconv.Itoa(os.Getpid())
	})
	// env -i left it only what sh itself exports (PWD).
	if env, _ := os.ReadFile("/proc/" + strconv.Itoa(esc) + "/environ"); strings.Contains(string(env), "CHAOS_RUN_ID=") || strings.Contains(string(env), "PATH=") {
		t.Fatalf("escapee %d kept its environment: %q", esc, env)
	}
	pids, err := leaf.Procs()
	if err != nil || !slices.Contains(pids, esc) {
		t.Fatalf("Procs = %v (%v), want escapee %d among them", pids, err, esc)
	}
	if rp, err := r.Procs(); err != nil || !slices.Equal(rp, pids) {
		t.Fatalf("run Procs = %v (%v), want the leaf's %v", rp, err, pids)
	}
	for _, pid := range pids {
		if in, err := leaf.Contains(pid); err != nil || !in {
			t.Fatalf("Contains(%d) = %v, %v", pid, in, err)
		}
	}
	if in, _ := leaf.Contains(os.Getpid()); in {
		t.Fatal("the test process is in the leaf")
	}
	if pop, err := leaf.Populated(); err != nil || !pop {
		t.Fatalf("Populated = %v, %v", pop, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	if err := leaf.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := leaf.WaitEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	latency := time.Since(begin)
	t.Logf("cgroup.kill -> WaitEmpty returned after %v", latency)
	if latency > 500*time.Millisecond {
		t.Errorf("WaitEmpty took %v after cgroup.kill", latency)
	}
	if left, err := leaf.Procs(); err != nil || len(left) != 0 {
		t.Fatalf("Procs after WaitEmpty = %v, %v", left, err)
	}
	_ = cmd.Wait() // the leader's status is ours; the reaper takes the orphans
	eventually(t, 5*time.Second, "every process reaped", func() bool {
		for _, pid := range pids {
			if exists(pid) {
				return false
			}
		}
		return true
	})
	if err := leaf.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leaf.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leaf still there: %v", err)
	}
}

// TestWaitEmptyLatency measures how long WaitEmpty takes to notice that the
// last process left, over several rounds, to show it is woken by the kernel
// rather than by a polling interval.
func TestWaitEmptyLatency(t *testing.T) {
	r := newRun(t)
	var worst time.Duration
	for i := range 10 {
		leaf, err := r.NewLeaf("latency")
		if err != nil {
			t.Fatal(err)
		}
		startIn(t, leaf, "exec sleep 1000")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		done := make(chan time.Time, 1)
		go func() {
			if err := leaf.WaitEmpty(ctx); err != nil {
				t.Error(err)
			}
			done <- time.Now()
		}()
		time.Sleep(20 * time.Millisecond) // WaitEmpty is asleep in poll now
		begin := time.Now()
		if err := leaf.Kill(); err != nil {
			t.Fatal(err)
		}
		d := (<-done).Sub(begin)
		cancel()
		worst = max(worst, d)
		t.Logf("round %d: %v", i, d)
	}
	if worst > 200*time.Millisecond {
		t.Errorf("worst WaitEmpty latency %v", worst)
	}
}

func TestWaitEmptyHonoursContext(t *testing.T) {
	r := newRun(t)
	leaf, err := r.NewLeaf("ctx")
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, leaf, "exec sleep 1000")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := leaf.WaitEmpty(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitEmpty on a populated group = %v, want deadline exceeded", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("WaitEmpty returned %v after its deadline", took)
	}
}

// TestFreezeStopsForks: a group whose shells fork a new sleep every 10 ms
// is frozen as a whole: no process runs and no new one appears until Thaw.
func TestFreezeStopsForks(t *testing.T) {
	r := newRun(t)
	leaf, err := r.NewLeaf("forker")
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, leaf, "(while :; do sleep 0.01; done) & (setsid sh -c 'while :; do sleep 0.01; done') & wait")
	eventually(t, 5*time.Second, "forkers running", func() bool { p, _ := leaf.Procs(); return len(p) >= 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leaf.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if fz, err := leaf.Frozen(); err != nil || !fz {
		t.Fatalf("Frozen = %v, %v", fz, err)
	}
	// A frozen parent still shows as frozen in a run-wide view.
	before, _ := leaf.Procs()
	time.Sleep(200 * time.Millisecond) // 20 forks each if anything ran
	if after, _ := leaf.Procs(); !slices.Equal(before, after) {
		t.Fatalf("processes changed while frozen: %v -> %v", before, after)
	}
	if err := leaf.Thaw(ctx); err != nil {
		t.Fatal(err)
	}
	if fz, err := leaf.Frozen(); err != nil || fz {
		t.Fatalf("Frozen after Thaw = %v, %v", fz, err)
	}
	eventually(t, 5*time.Second, "new forks after Thaw", func() bool {
		after, _ := leaf.Procs()
		return !slices.Equal(before, after)
	})
}

func TestRemoveRefusesPopulated(t *testing.T) {
	r := newRun(t)
	leaf, err := r.NewLeaf("busy")
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, leaf, "exec sleep 1000")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Remove(ctx); !errors.Is(err, cgroup.ErrPopulated) {
		t.Fatalf("Remove of a populated tree = %v, want ErrPopulated", err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(ctx); err != nil {
		t.Fatalf("Remove after WaitEmpty: %v", err)
	}
	if err := r.Remove(ctx); err != nil {
		t.Fatalf("Remove of a removed tree: %v", err)
	}
	// Leaf names are never reused, even once removed.
	if a, b := filepath.Base(leaf.Path), "busy.1"; a != b {
		t.Fatalf("leaf name %q, want %q", a, b)
	}
}

// TestSweepStale: a tree whose harness is gone is killed and removed; the
// tree of a live harness (ours) is left alone.
func TestSweepStale(t *testing.T) {
	live := newRun(t)
	liveLeaf, err := live.NewLeaf("keep")
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, liveLeaf, "exec sleep 1000")

	info := cgroup.Detect()
	// A tree in the name of this very pid but another start time: its
	// harness is "gone" (the pid was reused by us).
	stale := filepath.Join(info.Root, fmt.Sprintf("stale-%d.%d.%d", time.Now().UnixNano(), os.Getpid(), live.HarnessStart+1))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := cgroup.Open(stale)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := g.Mkdir("leaf.1")
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, sl, "setsid sleep 1000 & exec sleep 1000")
	eventually(t, 5*time.Second, "two processes in the stale tree", func() bool { p, _ := sl.Procs(); return len(p) == 2 })
	want, _ := sl.Procs()

	runs, err := cgroup.ListRuns(info)
	if err != nil {
		t.Fatal(err)
	}
	idx := slices.IndexFunc(runs, func(r *cgroup.Run) bool { return r.Path == stale })
	if idx < 0 || runs[idx].HarnessAlive() || runs[idx].HarnessPid != os.Getpid() {
		t.Fatalf("ListRuns did not report %s as a stale tree", stale)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	swept, procs, err := cgroup.SweepStale(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(swept, func(r *cgroup.Run) bool { return r.Path == stale })
	if i < 0 || !slices.Equal(procs[i], want) {
		t.Fatalf("SweepStale swept %v, want %s with %v", swept, stale, want)
	}
	if slices.ContainsFunc(swept, func(r *cgroup.Run) bool { return r.Path == live.Path }) {
		t.Fatal("SweepStale swept the tree of a live harness")
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale tree still there: %v", err)
	}
	_ = cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process of the stale tree ended with %v, want SIGKILL", cmd.ProcessState)
	}
	if pop, err := liveLeaf.Populated(); err != nil || !pop {
		t.Fatalf("live tree's leaf populated = %v, %v", pop, err)
	}
}

func TestOpenAndCgroupOf(t *testing.T) {
	r := newRun(t)
	leaf, err := r.NewLeaf("open")
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, leaf, "exec sleep 1000")
	p, err := cgroup.CgroupOf(cmd.Process.Pid)
	if err != nil || p != leaf.CgroupPath() {
		t.Fatalf("CgroupOf = %q, %v; want %q", p, err, leaf.CgroupPath())
	}
	g, err := cgroup.Open(leaf.Path)
	if err != nil || g.CgroupPath() != leaf.CgroupPath() {
		t.Fatalf("Open = %+v, %v", g, err)
	}
	if _, err := cgroup.Open("/tmp"); err == nil {
		t.Fatal("Open outside the mount succeeded")
	}
	if th, err := leaf.Threads(); err != nil || !slices.Contains(th, cmd.Process.Pid) {
		t.Fatalf("Threads = %v, %v", th, err)
	}
}
