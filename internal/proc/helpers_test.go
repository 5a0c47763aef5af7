package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testGrace keeps orphan zombies short-lived in tests so cleanups are quick
// where the grace applies at all; the production default is exercised by
// TestNaiveExecStatusNotStolen and TestOrphanReapedAtOnce.
const testGrace = 100 * time.Millisecond

// cDir holds the C test programs, compiled once per test binary.
var cDir string

func TestMain(m *testing.M) {
	setOrphanGrace(testGrace)
	var err error
	if cDir, err = os.MkdirTemp("", "proc-test-c-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(cDir)
	os.Exit(code)
}

var cBuilds sync.Map // name -> *cBuild

type cBuild struct {
	once sync.Once
	path string
	err  error
}

// cProgram compiles testdata/NAME.c with gcc (once) and returns the binary;
// the test is skipped where gcc is missing.
func cProgram(t testing.TB, name string) string {
	t.Helper()
	v, _ := cBuilds.LoadOrStore(name, &cBuild{})
	b := v.(*cBuild)
	b.once.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(cDir, name)
		out, err := exec.Command(gcc, "-Wall", "-O2", "-pthread", "-o", b.path, filepath.Join("testdata", name+".c")).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("gcc %s.c: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skipf("needs gcc: %v", err)
		}
		t.Fatal(b.err)
	}
	return b.path
}

// modes lists the modes every mode-dependent test runs in. CHAOS_CGROUP=off
// leaves only process-group mode (the cgroup subtests are then skipped).
var modes = []Mode{ModeProcessGroup, ModeCgroup}

// forModes runs fn once per mode, as subtests named after the mode.
func forModes(t *testing.T, fn func(t *testing.T, mode Mode)) {
	t.Helper()
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) { fn(t, m) })
	}
}

// newSupervisorMode returns a Supervisor in mode, skipping the test when
// cgroup mode is not available here. Whatever the test leaves behind is
// killed and its cgroups removed when it ends.
func newSupervisorMode(t *testing.T, mode Mode) *Supervisor {
	t.Helper()
	s := newSupervisor(t)
	if mode == ModeCgroup {
		if err := s.EnableCgroups(strings.TrimPrefix(s.Marker(), "CHAOS_RUN_ID=")); err != nil {
			t.Skipf("cgroup mode unavailable: %v", err)
		}
	}
	if got := s.Mode(); got != mode {
		t.Fatalf("Mode() = %s, want %s", got, mode)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.KillLeftovers(ctx); err != nil {
			t.Errorf("KillLeftovers at cleanup: %v", err)
		}
	})
	return s
}

// setOrphanGrace changes the reaper's grace period and returns the old one.
func setOrphanGrace(d time.Duration) time.Duration {
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	old := theReaper.grace
	theReaper.grace = d
	return old
}

func newSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	s, err := NewSupervisor(fmt.Sprintf("CHAOS_RUN_ID=test-%s-%d", name, time.Now().UnixNano()))
	if err != nil {
		t.Fatalf("NewSupervisor: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eventually polls cond until it holds or timeout expires. Polling is fine in
// tests: they observe other processes from the outside.
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

// pidFile waits for a script to publish a pid (written to path.tmp and
// renamed, so a partial write is never read).
func pidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, 5*time.Second, "pid file "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// sleeperPid reads a published pid and waits until that process has exec'd
// sleep: $! is known as soon as the shell forks, before the child has run
// setsid/env, so asserting on its group or environment any earlier is racy.
func sleeperPid(t *testing.T, path string) int {
	t.Helper()
	pid := pidFile(t, path)
	eventually(t, 5*time.Second, fmt.Sprintf("pid %d to exec sleep", pid), func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		return err == nil && string(b) == "sleep\n"
	})
	return pid
}

// publish returns the shell snippet that writes $! atomically to path.
func publish(path string) string {
	return fmt.Sprintf("echo $! > %[1]s.tmp && mv %[1]s.tmp %[1]s", path)
}

// waitDone waits for p's leader to exit.
func waitDone(t *testing.T, p *Process, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(timeout):
		t.Fatalf("pid %d did not exit within %v", p.Pid, timeout)
	}
}

// killOnCleanup makes sure nothing a test started outlives it, even when an
// assertion fails midway: the instance is killed, stray pids are killed
// directly, and the test waits until all of them are gone from /proc (reaped),
// so zombie checks in later tests start from a clean slate.
func killOnCleanup(t *testing.T, p *Process, stray ...*int) {
	t.Cleanup(func() {
		if p != nil {
			_ = p.Kill()
			<-p.Done()
		}
		pids := []int{}
		if p != nil {
			pids = append(pids, p.Pid)
		}
		for _, sp := range stray {
			if *sp > 0 {
				if Alive(*sp) {
					_ = SignalExternal(*sp, syscall.SIGKILL)
				}
				pids = append(pids, *sp)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, pid := range pids {
			for {
				if _, err := os.Stat(statPath(pid)); err != nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
}

// zombieChildren lists zombies whose parent is the test process.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	procs, err := listProcs()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for pid, st := range procs {
		if st.ppid == os.Getpid() && st.state == 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// frozen reports, from outside, whether pid (a process of p) is frozen: in
// cgroup mode the kernel's cgroup.events says the leaf is frozen and pid is
// in it (cgroup-frozen tasks show state S, not T); in process-group mode pid
// is stopped (state T).
func frozen(t *testing.T, p *Process, pid int) bool {
	t.Helper()
	if g := p.Cgroup(); g != nil {
		ev, err := g.Events()
		in, _ := g.Contains(pid)
		return err == nil && ev.Frozen && in
	}
	st, err := State(pid)
	return err == nil && st == 'T'
}

// startSleep starts `sleep 1000` with env (StartTracked: its owner reaps
// it), killed and reaped when the test ends.
func startSleep(t *testing.T, env []string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "1000")
	c.Env = env
	if err := StartTracked(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
	})
	return c
}
