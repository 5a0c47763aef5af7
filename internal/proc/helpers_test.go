package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testGrace keeps orphan zombies short-lived in tests so cleanups are quick;
// the production default is exercised by TestNaiveExecStatusNotStolen.
const testGrace = 100 * time.Millisecond

func TestMain(m *testing.M) {
	setOrphanGrace(testGrace)
	os.Exit(m.Run())
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
