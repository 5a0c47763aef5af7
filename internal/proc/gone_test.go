package proc

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// TestOrphanReapedAtOnce: a daemon the harness adopted (its parent chain is
// gone) and that is then killed from outside must not linger as a zombie,
// even with the production grace period: a replacement started right after
// would otherwise find its pid alive (PostgreSQL: "lock file postmaster.pid
// already exists").
func TestOrphanReapedAtOnce(t *testing.T) {
	old := setOrphanGrace(defaultOrphanGrace)
	defer setOrphanGrace(old)
	forModes(t, func(t *testing.T, mode Mode) {
		for _, viaWaitGone := range []bool{false, true} {
			name := "reaper alone"
			if viaWaitGone {
				name = "WaitGone"
			}
			t.Run(name, func(t *testing.T) {
				s := newSupervisorMode(t, mode)
				dFile := filepath.Join(t.TempDir(), "daemon")
				p, err := s.Start(exec.Command("sh", "-c", "( setsid sleep 1000 & "+publish(dFile)+" ); exit 0"))
				if err != nil {
					t.Fatal(err)
				}
				var d int
				killOnCleanup(t, p, &d)
				d = sleeperPid(t, dFile)
				waitDone(t, p, 5*time.Second)
				eventually(t, 5*time.Second, "daemon reparented to the harness", func() bool {
					st, err := readStat(d)
					return err == nil && st.ppid == os.Getpid()
				})

				// Killed from outside, as an operator or a fault on a named
				// target would.
				if err := syscall.Kill(d, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				begin := time.Now()
				if viaWaitGone {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if err := WaitGone(ctx, d); err != nil {
						t.Fatalf("WaitGone: %v", err)
					}
					if _, err := os.Stat(statPath(d)); err == nil {
						t.Fatalf("WaitGone returned while /proc/%d still exists", d)
					}
					if err := syscall.Kill(d, 0); !errors.Is(err, syscall.ESRCH) {
						t.Fatalf("kill(%d, 0) after WaitGone = %v, want ESRCH", d, err)
					}
				} else {
					eventually(t, 5*time.Second, "daemon reaped", func() bool {
						_, err := os.Stat(statPath(d))
						return err != nil
					})
				}
				if took := time.Since(begin); took > 300*time.Millisecond {
					t.Fatalf("the killed daemon stayed a zombie for %v (grace %v)", took, defaultOrphanGrace)
				} else {
					t.Logf("killed daemon gone after %v", took)
				}
			})
		}
	})
}

// TestZombieLeaderWithLiveThreads: a server whose main thread called
// pthread_exit while another thread keeps its listening socket is alive (its
// leader shows Z), and "gone" must wait for the last thread.
func TestZombieLeaderWithLiveThreads(t *testing.T) {
	bin := cProgram(t, "pexit")
	forModes(t, func(t *testing.T, mode Mode) {
		for _, pidfds := range []bool{true, false} {
			name := "pidfd"
			if !pidfds {
				name = "no pidfd"
			}
			t.Run(name, func(t *testing.T) {
				noPidfd.Store(!pidfds)
				defer noPidfd.Store(false)
				s := newSupervisorMode(t, mode)
				portFile := filepath.Join(t.TempDir(), "port")
				p, err := s.Start(exec.Command(bin, portFile))
				if err != nil {
					t.Fatal(err)
				}
				killOnCleanup(t, p)
				port := pidFile(t, portFile)
				eventually(t, 5*time.Second, "leader thread exited (state Z)", func() bool {
					st, err := State(p.Pid)
					return err == nil && st == 'Z'
				})
				addr := "127.0.0.1:" + strconv.Itoa(port)
				if l, err := net.Listen("tcp", addr); err == nil {
					l.Close()
					t.Fatalf("port %d is free although the server's thread holds it", port)
				}

				if !Alive(p.Pid) {
					t.Errorf("Alive(%d) = false for a zombie leader whose thread still runs", p.Pid)
				}
				if !slices.Contains(GroupMembers(p.Pid), p.Pid) {
					t.Errorf("GroupMembers(%d) = %v, want the leader in it", p.Pid, GroupMembers(p.Pid))
				}
				if !slices.Contains(Descendants(os.Getpid()), p.Pid) {
					t.Errorf("Descendants(harness) lacks %d", p.Pid)
				}
				if m, err := p.Members(); err != nil || !slices.Contains(m, p.Pid) {
					t.Errorf("Members = %v (%v), want the leader in it", m, err)
				}
				if found, err := FindByMarker(s.Marker()); err != nil || !slices.Contains(found, p.Pid) {
					t.Errorf("FindByMarker = %v (%v), want %d (its environment is read through the live thread)", found, err, p.Pid)
				}
				select {
				case <-p.Done():
					t.Fatal("Done closed while a thread of the process still runs")
				default:
				}
				if pidfds {
					// The kernel property WaitGone relies on: a pidfd is not
					// readable while any thread of the process runs.
					fd, err := unix.PidfdOpen(p.Pid, 0)
					if err != nil {
						t.Fatal(err)
					}
					fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
					n, err := unix.Poll(fds, 0)
					unix.Close(fd)
					if err != nil || n != 0 {
						t.Fatalf("pidfd of a zombie leader with a live thread: poll = %d (%#x), %v; want not readable", n, fds[0].Revents, err)
					}
				}

				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				errc := make(chan error, 1)
				go func() { errc <- WaitGone(ctx, p.Pid) }()
				select {
				case err := <-errc:
					t.Fatalf("WaitGone returned (%v) while a thread of %d still runs", err, p.Pid)
				case <-time.After(300 * time.Millisecond):
				}

				tid := liveThread(p.Pid)
				if tid == 0 {
					t.Fatal("no live thread found")
				}
				killed := time.Now()
				if err := syscall.Tgkill(p.Pid, tid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if err := <-errc; err != nil {
					t.Fatalf("WaitGone: %v", err)
				}
				t.Logf("WaitGone returned %v after the thread was killed", time.Since(killed))
				if _, err := os.Stat(statPath(p.Pid)); err == nil {
					t.Fatalf("WaitGone returned while /proc/%d still exists", p.Pid)
				}
				if Alive(p.Pid) {
					t.Fatalf("Alive(%d) after WaitGone", p.Pid)
				}
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("port %d still taken after WaitGone: %v", port, err)
				}
				l.Close()
				waitDone(t, p, 5*time.Second)
				if _, sig, signo := p.ExitStatus(); !sig || signo != syscall.SIGKILL {
					t.Fatalf("ExitStatus signal %v (signaled %v), want SIGKILL", signo, sig)
				}
			})
		}
	})
}

// escapee is the script of TestEscapees: the instance starts a grandchild
// that setsid's, clears its environment (so it loses the run's marker) and
// double-forks (its parent exits, so it is reparented to the harness), then
// the instance waits or exits.
func escapee(file string, leaderStays bool) string {
	s := "setsid env -i sh -c 'sleep 1000 & echo $! > " + file + ".tmp && mv " + file + ".tmp " + file + "'"
	if leaderStays {
		return s + "; sleep 1000"
	}
	return s
}

// TestEscapees: processes that leave the instance's process group and drop
// the run's marker are still the instance's in cgroup mode: Kill reaches
// them and Leftovers lists them. Process-group mode cannot prove they are
// ours, and leaves them alone (its documented limit).
func TestEscapees(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		for _, leaderStays := range []bool{true, false} {
			name := "leader running, Kill"
			if !leaderStays {
				name = "leader exited, KillLeftovers"
			}
			t.Run(name, func(t *testing.T) {
				s := newSupervisorMode(t, mode)
				eFile := filepath.Join(t.TempDir(), "escapee")
				p, err := s.Start(exec.Command("sh", "-c", escapee(eFile, leaderStays)))
				if err != nil {
					t.Fatal(err)
				}
				var e int
				killOnCleanup(t, p, &e)
				e = sleeperPid(t, eFile)
				eventually(t, 5*time.Second, "escapee reparented to the harness", func() bool {
					st, err := readStat(e)
					return err == nil && st.ppid == os.Getpid()
				})
				st, _ := readStat(e)
				if env, _ := os.ReadFile(environPath(e)); st.pgrp == p.Pid || st.sid == p.Pid || bytes.Contains(env, []byte(s.Marker())) {
					t.Fatalf("escapee %d did not escape: pgrp %d sid %d marker %v", e, st.pgrp, st.sid, bytes.Contains(env, []byte(s.Marker())))
				}

				left, err := s.Leftovers()
				if err != nil {
					t.Fatalf("Leftovers: %v", err)
				}
				i := slices.IndexFunc(left, func(l Leftover) bool { return l.Pid == e })
				if mode == ModeCgroup {
					if i < 0 || left[i].Found != "cgroup" || !strings.HasPrefix(left[i].Cgroup, p.Cgroup().CgroupPath()) {
						t.Fatalf("Leftovers = %+v, want escapee %d found in cgroup %s", left, e, p.Cgroup().CgroupPath())
					}
				} else if i >= 0 {
					t.Fatalf("Leftovers = %+v lists the unmarked escapee %d in process-group mode", left, e)
				}

				if leaderStays {
					if err := p.Kill(); err != nil {
						t.Fatalf("Kill: %v", err)
					}
					waitDone(t, p, 5*time.Second)
				} else {
					waitDone(t, p, 5*time.Second)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if _, err := s.KillLeftovers(ctx); err != nil {
						t.Fatalf("KillLeftovers: %v", err)
					}
				}
				if mode == ModeCgroup {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if err := p.WaitGone(ctx); err != nil {
						t.Fatalf("WaitGone: %v", err)
					}
					if _, err := os.Stat(statPath(e)); err == nil {
						t.Fatalf("escapee %d still exists after the instance is gone", e)
					}
					if _, err := os.Stat(p.Cgroup().Path); err == nil {
						t.Fatalf("leaf %s still exists after WaitGone", p.Cgroup().Path)
					}
				} else {
					time.Sleep(100 * time.Millisecond)
					if !Alive(e) {
						t.Fatalf("unmarked escapee %d outside the group was signalled in process-group mode", e)
					}
				}
			})
		}
	})
}

// TestFreezeIsAtomic freezes a tree of 50 processes scattered over sessions,
// process groups and parents, each waking every 20 ms, and proves from
// outside that none of them runs while frozen and all run again after Thaw.
func TestFreezeIsAtomic(t *testing.T) {
	bin := cProgram(t, "ticker")
	const n = 50
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		ready := filepath.Join(t.TempDir(), "ready")
		p, err := s.Start(exec.Command(bin, strconv.Itoa(n), ready))
		if err != nil {
			t.Fatal(err)
		}
		killOnCleanup(t, p)
		eventually(t, 10*time.Second, "ticker tree ready", func() bool { _, err := os.Stat(ready); return err == nil })
		var members []int
		eventually(t, 5*time.Second, "50 members", func() bool {
			members, err = p.Members()
			return err == nil && len(members) == n
		})

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.FreezeContext(ctx); err != nil {
			t.Fatalf("FreezeContext: %v", err)
		}
		if g := p.Cgroup(); g != nil {
			// The kernel confirmed before FreezeContext returned.
			if ev, err := g.Events(); err != nil || !ev.Frozen {
				t.Fatalf("cgroup.events after FreezeContext: %+v %v, want frozen 1", ev, err)
			}
		}
		eventually(t, 5*time.Second, "every member frozen", func() bool {
			for _, pid := range members {
				if !frozen(t, p, pid) {
					return false
				}
			}
			return true
		})
		before := switches(t, members)
		time.Sleep(250 * time.Millisecond) // >10 wake-ups each if any ran
		if after := switches(t, members); !mapsEqual(before, after) {
			for pid := range before {
				if before[pid] != after[pid] {
					t.Errorf("pid %d ran while frozen: %d -> %d context switches", pid, before[pid], after[pid])
				}
			}
		}
		if now, err := p.Members(); err != nil || !slices.Equal(now, members) {
			t.Errorf("members changed while frozen: %v -> %v (%v)", members, now, err)
		}

		if err := p.ThawContext(ctx); err != nil {
			t.Fatalf("ThawContext: %v", err)
		}
		eventually(t, 5*time.Second, "every member running again", func() bool {
			after := switches(t, members)
			for _, pid := range members {
				if after[pid] <= before[pid] || frozen(t, p, pid) {
					return false
				}
			}
			return true
		})
	})
}

func mapsEqual(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// switches reads each pid's voluntary plus involuntary context switches,
// which only grow while it runs.
func switches(t *testing.T, pids []int) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		sum := 0
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				sum += n
			}
		}
		out[pid] = sum
	}
	return out
}

// TestProcessWaitGone: after Kill, WaitGone returns once nothing of the
// instance exists, not even a zombie, and in cgroup mode its leaf is gone.
func TestProcessWaitGone(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		p, err := s.Start(exec.Command("sh", "-c",
			"sleep 1000 & "+publish(a)+"; ( setsid sleep 1000 & "+publish(b)+" ); wait"))
		if err != nil {
			t.Fatal(err)
		}
		var pa, pb int
		killOnCleanup(t, p, &pa, &pb)
		pa, pb = sleeperPid(t, a), sleeperPid(t, b)
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.WaitGone(ctx); err != nil {
			t.Fatalf("WaitGone: %v", err)
		}
		for _, pid := range []int{p.Pid, pa, pb} {
			if _, err := os.Stat(statPath(pid)); err == nil {
				t.Errorf("pid %d still exists after WaitGone", pid)
			}
		}
		if g := p.Cgroup(); g != nil {
			if _, err := os.Stat(g.Path); err == nil {
				t.Errorf("leaf %s still exists after WaitGone", g.Path)
			}
		}
		if err := p.Kill(); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Kill after WaitGone = %v, want os.ErrProcessDone", err)
		}
	})
}

// TestModeSelection: CHAOS_CGROUP=off forces process-group mode, and the
// supervisor says so and why.
func TestModeSelection(t *testing.T) {
	t.Setenv(cgroup.DisableEnv, "off")
	if mi := DetectMode(); mi.Mode != ModeProcessGroup || !strings.Contains(mi.Reason, cgroup.DisableEnv) {
		t.Fatalf("DetectMode with %s=off = %+v", cgroup.DisableEnv, mi)
	}
	s := newSupervisor(t)
	if err := s.EnableCgroups("mode-test"); err == nil {
		t.Fatal("EnableCgroups succeeded with cgroups disabled")
	}
	if mi := s.ModeInfo(); mi.Mode != ModeProcessGroup || !strings.Contains(mi.Reason, cgroup.DisableEnv) || s.CgroupRun() != nil {
		t.Fatalf("ModeInfo = %+v", mi)
	}
	p, err := s.Start(exec.Command("true"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Cgroup() != nil {
		t.Fatal("process-group mode started a process in a cgroup")
	}
	waitDone(t, p, 5*time.Second)
}

// TestNoThreadPerInstance: watching instances for their exit must not hold
// an OS thread each (a thousand instances would mean a thousand threads,
// and every walk of /proc/self/task would grow with them).
func TestNoThreadPerInstance(t *testing.T) {
	s := newSupervisor(t)
	const n = 200
	var procs []*Process
	for range n {
		p, err := s.Start(exec.Command("sleep", "1000"))
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
		killOnCleanup(t, p)
	}
	time.Sleep(100 * time.Millisecond) // every watcher is waiting now
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) >= n/2 {
		t.Fatalf("%d OS threads for %d instances", len(ents), n)
	}
	t.Logf("%d OS threads for %d instances", len(ents), n)
	for _, p := range procs {
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		waitDone(t, p, 10*time.Second)
	}
}

// A pid listed as a zombie of an instance may be reaped and given to a new
// process before the wait for it begins (pid_max is 32768 here, and a
// fault on 1,000 instances wraps it in seconds): the wait is for the
// process listed, which is gone, never for the newcomer. Before the fix
// every instance's WaitGone waited on such newcomers until its deadline.
func TestWaitGoneNotForAReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a pid to a new process (ns_last_pid) needs root")
	}
	old := exec.Command("true")
	if err := old.Run(); err != nil {
		t.Fatal(err)
	}
	pid := old.Process.Pid
	var newcomer *exec.Cmd
	for range 50 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			newcomer = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if newcomer == nil {
		t.Skip("another process kept taking the pid")
	}
	defer func() { _ = newcomer.Process.Kill(); _ = newcomer.Wait() }()
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// The listed process started before the newcomer.
	if err := waitGone(ctx, zkey{pid, st.start - 1}); err != nil {
		t.Fatalf("waiting for a process whose pid a newcomer has: %v", err)
	}
	if err := newcomer.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the newcomer was touched: %v", err)
	}
}
