package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestKillReachesEveryDescendant(t *testing.T) {
	cases := []struct {
		name string
		// script must publish the grandchild's pid to $GC via publish.
		script      func(gc string) string
		leaderExits bool // the leader exits on its own before Kill
		leftGroup   bool // the grandchild is not in the instance's group
	}{
		{
			name:   "same group",
			script: func(gc string) string { return "sleep 1000 & " + publish(gc) + "; wait" },
		},
		{
			name:      "setsid grandchild, parent alive",
			script:    func(gc string) string { return "setsid sleep 1000 & " + publish(gc) + "; wait" },
			leftGroup: true,
		},
		{
			name: "setsid grandchild double-forked, parent gone",
			script: func(gc string) string {
				return "( setsid sleep 1000 & " + publish(gc) + " ); wait; sleep 1000"
			},
			leftGroup: true,
		},
		{
			name:        "setsid grandchild, leader already exited",
			script:      func(gc string) string { return "setsid sleep 1000 & " + publish(gc) },
			leaderExits: true,
			leftGroup:   true,
		},
	}
	forModes(t, func(t *testing.T, mode Mode) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newSupervisorMode(t, mode)
				gcFile := filepath.Join(t.TempDir(), "gc")
				p, err := s.Start(exec.Command("sh", "-c", tc.script(gcFile)))
				if err != nil {
					t.Fatal(err)
				}
				var gc int
				killOnCleanup(t, p, &gc)
				gc = sleeperPid(t, gcFile)
				if !Alive(gc) {
					t.Fatalf("grandchild %d not alive before Kill", gc)
				}
				st, err := readStat(gc)
				if err != nil {
					t.Fatal(err)
				}
				if got := st.pgrp != p.Pid; got != tc.leftGroup {
					t.Fatalf("grandchild pgrp=%d, instance group %d: leftGroup=%v, want %v", st.pgrp, p.Pid, got, tc.leftGroup)
				}
				if tc.leaderExits {
					waitDone(t, p, 5*time.Second)
					// The orphan is now ours (subreaper), outside the instance's tree.
					eventually(t, 5*time.Second, "grandchild reparented to the harness", func() bool {
						st, err := readStat(gc)
						return err == nil && st.ppid == os.Getpid()
					})
				}

				if err := p.Kill(); err != nil {
					t.Fatalf("Kill: %v", err)
				}
				eventually(t, 5*time.Second, "grandchild dead", func() bool { return !Alive(gc) })
				waitDone(t, p, 5*time.Second)
				if !tc.leaderExits {
					if code, sig, signo := p.ExitStatus(); !sig || signo != syscall.SIGKILL {
						t.Fatalf("ExitStatus = (%d, %v, %v), want SIGKILL", code, sig, signo)
					}
				}
				// SIGKILL is delivered at once but acted on when each process
				// next runs: wait until nothing is left before asking again.
				eventually(t, 5*time.Second, "no member left", func() bool { m, err := p.Members(); return err == nil && len(m) == 0 })
				if err := p.Kill(); !errors.Is(err, os.ErrProcessDone) {
					t.Fatalf("second Kill = %v, want os.ErrProcessDone", err)
				}
			})
		}
	})
}

func TestDoubleForkedOrphanIsReaped(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		orphanFile := filepath.Join(t.TempDir(), "orphan")
		// The subshell forks the orphan and exits at once; the outer shell exits
		// too, so the orphan's parent chain is gone.
		p, err := s.Start(exec.Command("sh", "-c", "( sleep 1 & "+publish(orphanFile)+" ); exit 0"))
		if err != nil {
			t.Fatal(err)
		}
		var orphan int
		killOnCleanup(t, p, &orphan)
		orphan = pidFile(t, orphanFile)
		waitDone(t, p, 5*time.Second)
		if code, sig, _ := p.ExitStatus(); code != 0 || sig {
			t.Fatalf("leader ExitStatus = (%d, %v), want 0", code, sig)
		}
		eventually(t, 2*time.Second, "orphan reparented to the test process", func() bool {
			st, err := readStat(orphan)
			return err == nil && st.ppid == os.Getpid()
		})
		eventually(t, 5*time.Second, "orphan reaped", func() bool {
			_, err := os.Stat(statPath(orphan))
			return err != nil
		})
		eventually(t, 5*time.Second, "no zombie children", func() bool { return len(zombieChildren(t)) == 0 })
	})
}

func TestFreezeThaw(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		dir := t.TempDir()
		inGroup, outGroup := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		p, err := s.Start(exec.Command("sh", "-c",
			"sleep 1000 & "+publish(inGroup)+"; setsid sleep 1000 & "+publish(outGroup)+"; wait"))
		if err != nil {
			t.Fatal(err)
		}
		var a, b int
		killOnCleanup(t, p, &a, &b)
		a, b = sleeperPid(t, inGroup), sleeperPid(t, outGroup)
		pids := map[string]int{"leader": p.Pid, "grandchild": a, "setsid grandchild": b}

		stateIs := func(want bool) func() bool {
			return func() bool {
				for _, pid := range pids {
					if frozen(t, p, pid) != want {
						return false
					}
				}
				return true
			}
		}
		if err := p.Freeze(); err != nil {
			t.Fatalf("Freeze: %v", err)
		}
		eventually(t, 5*time.Second, "all frozen", stateIs(true))
		// Stopped, not dead: Done must not fire on SIGSTOP.
		select {
		case <-p.Done():
			t.Fatal("Done closed by SIGSTOP")
		case <-time.After(50 * time.Millisecond):
		}
		if err := p.Thaw(); err != nil {
			t.Fatalf("Thaw: %v", err)
		}
		eventually(t, 5*time.Second, "all running again", stateIs(false))
		for name, pid := range pids {
			if !Alive(pid) {
				t.Errorf("%s %d died across Freeze/Thaw", name, pid)
			}
		}
	})
}

func TestExitStatusOfInstantExits(t *testing.T) {
	// With no grace the reaper collects any unregistered zombie the moment
	// it sees one, so a registration race would show up as lost statuses.
	old := setOrphanGrace(0)
	defer setOrphanGrace(old)
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)

		type result struct {
			script   string
			code     int
			signaled bool
			sig      syscall.Signal
		}
		var cases []result
		for i := range 200 {
			switch i % 10 {
			case 9:
				cases = append(cases, result{"kill -KILL $$", -1, true, syscall.SIGKILL})
			default:
				c := i % 256
				cases = append(cases, result{"exit " + strconv.Itoa(c), c, false, 0})
			}
		}
		// Four concurrent starters: registration must hold up under contention
		// with each other as well as with the reaper.
		var wg sync.WaitGroup
		errc := make(chan error, len(cases))
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < len(cases); i += 4 {
					tc := cases[i]
					p, err := s.Start(exec.Command("sh", "-c", tc.script))
					if err != nil {
						errc <- err
						return
					}
					select {
					case <-p.Done():
					case <-time.After(5 * time.Second):
						errc <- errors.New("timeout waiting for " + tc.script)
						return
					}
					code, signaled, sig := p.ExitStatus()
					if code != tc.code || signaled != tc.signaled || sig != tc.sig {
						errc <- errors.New(tc.script + ": got (" + strconv.Itoa(code) + ", " +
							strconv.FormatBool(signaled) + ", " + sig.String() + ")")
					}
					if p.Exited().Before(p.Started.Add(-time.Second)) || p.Exited().IsZero() {
						errc <- errors.New("implausible Exited time for " + tc.script)
					}
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		eventually(t, 5*time.Second, "no zombie children", func() bool { return len(zombieChildren(t)) == 0 })
	})
}

func TestTerminate(t *testing.T) {
	// A generous grace for the cooperative cases: the SIGTERM exit status
	// already proves no escalation happened, so no timing bound is needed.
	cases := []struct {
		name    string
		script  string
		freeze  bool
		grace   time.Duration
		wantSig syscall.Signal
	}{
		{"cooperative", "sleep 1000 & " + publish("$GC") + "; wait", false, 5 * time.Second, syscall.SIGTERM},
		{"traps and ignores SIGTERM", `trap "" TERM; sleep 1000 & ` + publish("$GC") + "; wait", false, 300 * time.Millisecond, syscall.SIGKILL},
		{"frozen gets SIGCONT", "sleep 1000 & " + publish("$GC") + "; wait", true, 5 * time.Second, syscall.SIGTERM},
	}
	forModes(t, func(t *testing.T, mode Mode) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newSupervisorMode(t, mode)
				gcFile := filepath.Join(t.TempDir(), "gc")
				cmd := exec.Command("sh", "-c", tc.script)
				cmd.Env = append(os.Environ(), "GC="+gcFile)
				p, err := s.Start(cmd)
				if err != nil {
					t.Fatal(err)
				}
				var gc int
				killOnCleanup(t, p, &gc)
				gc = sleeperPid(t, gcFile) // also proves the trap is installed
				if tc.freeze {
					if err := p.Freeze(); err != nil {
						t.Fatal(err)
					}
					eventually(t, 5*time.Second, "frozen", func() bool { return frozen(t, p, p.Pid) })
				}
				begin := time.Now()
				if err := p.Terminate(tc.grace); err != nil {
					t.Fatalf("Terminate: %v", err)
				}
				took := time.Since(begin)
				select {
				case <-p.Done():
				default:
					t.Fatal("Terminate returned before the process exited")
				}
				if _, signaled, sig := p.ExitStatus(); !signaled || sig != tc.wantSig {
					t.Fatalf("ExitStatus signal = %v (signaled %v), want %v", sig, signaled, tc.wantSig)
				}
				if tc.wantSig == syscall.SIGKILL && took < tc.grace {
					t.Fatalf("SIGKILL after %v, before the %v grace", took, tc.grace)
				}
				eventually(t, 5*time.Second, "grandchild dead", func() bool { return !Alive(gc) })
			})
		}
	})
}

func TestFindByMarkerAndFleetSafety(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		dir := t.TempDir()

		// Strangers: one without any marker, one whose marker value merely starts
		// with ours. Neither may be found or touched.
		var strangers []int
		for _, env := range [][]string{os.Environ(), append(os.Environ(), s.Marker()+"-other")} {
			strangers = append(strangers, startSleep(t, env).Process.Pid)
		}

		gcFile := filepath.Join(dir, "gc")
		cmd := exec.Command("sh", "-c", "setsid sleep 1000 & "+publish(gcFile)+"; wait")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "WORKLOAD=custom"}
		p, err := s.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		var gc int
		killOnCleanup(t, p, &gc)
		gc = sleeperPid(t, gcFile)

		found, err := FindByMarker(s.Marker())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(found, p.Pid) || !slices.Contains(found, gc) {
			t.Fatalf("FindByMarker = %v, want leader %d and descendant %d", found, p.Pid, gc)
		}
		for _, pid := range append([]int{os.Getpid()}, strangers...) {
			if slices.Contains(found, pid) {
				t.Fatalf("FindByMarker = %v includes unrelated pid %d", found, pid)
			}
		}
		// The custom environment reached the descendant intact.
		if ok, err := hasEnvEntry(gc, "WORKLOAD=custom"); err != nil || !ok {
			t.Fatalf("descendant environ lacks WORKLOAD=custom (err %v)", err)
		}
		// The shell's publishing child (mv) may still be on its way out.
		eventually(t, 5*time.Second, "members to be the leader and its descendant", func() bool {
			m, err := p.Members()
			return err == nil && slices.Equal(m, sortedPids(p.Pid, gc))
		})

		if err := p.Freeze(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "descendant frozen", func() bool { return frozen(t, p, gc) })
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "descendant dead", func() bool { return !Alive(gc) })
		waitDone(t, p, 5*time.Second)
		for _, pid := range strangers {
			st, err := State(pid)
			if err != nil || st == 'Z' || st == 'T' {
				t.Fatalf("unrelated pid %d was touched: state %q err %v", pid, st, err)
			}
		}
		if found, _ := FindByMarker(s.Marker()); len(found) != 0 {
			t.Fatalf("after Kill, FindByMarker = %v, want none", found)
		}
	})
}

// TestSignalScope pins down the fleet-safety rule inside an instance's own
// tree. In process-group mode the process group is ours by construction,
// anything outside it only if it carries the marker; in cgroup mode the
// instance's cgroup is ours by construction, and nothing can leave it.
func TestSignalScope(t *testing.T) {
	cases := []struct {
		name       string
		launch     string
		wantKilled map[Mode]bool
	}{
		{"in group, env cleared", "env -i sleep 1000", map[Mode]bool{ModeProcessGroup: true, ModeCgroup: true}},
		{"setsid, marker inherited", "setsid sleep 1000", map[Mode]bool{ModeProcessGroup: true, ModeCgroup: true}},
		{"setsid, env cleared", "env -i /usr/bin/setsid sleep 1000", map[Mode]bool{ModeProcessGroup: false, ModeCgroup: true}},
	}
	forModes(t, func(t *testing.T, mode Mode) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newSupervisorMode(t, mode)
				gcFile := filepath.Join(t.TempDir(), "gc")
				p, err := s.Start(exec.Command("sh", "-c", tc.launch+" & "+publish(gcFile)+"; wait"))
				if err != nil {
					t.Fatal(err)
				}
				var gc int
				killOnCleanup(t, p, &gc)
				gc = sleeperPid(t, gcFile)
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
				waitDone(t, p, 5*time.Second)
				if tc.wantKilled[mode] {
					eventually(t, 5*time.Second, "grandchild dead", func() bool { return !Alive(gc) })
				} else {
					time.Sleep(100 * time.Millisecond)
					if !Alive(gc) {
						t.Fatalf("unmarked process %d outside the group was signalled", gc)
					}
				}
			})
		}
	})
}

// TestNaiveExecStatusNotStolen shows that other code using plain os/exec in
// the same binary still gets its child's exit status even if it calls Wait
// late: where os/exec holds a pidfd for its child (it does from Go 1.23 on
// kernels with pidfds) the reaper never touches that child, whatever the
// delay and even with no grace at all; where it does not, the grace period
// protects a Wait that comes a little late; StartTracked is exact in any
// case.
func TestNaiveExecStatusNotStolen(t *testing.T) {
	cases := []struct {
		name      string
		grace     time.Duration
		tracked   bool
		execPidfd int // forced reaper.execPidfd (0: as learnt)
		delay     time.Duration
	}{
		{"plain os/exec, pidfd held, no grace", 0, false, 1, 1500 * time.Millisecond},
		{"plain os/exec, no pidfd known, default grace", defaultOrphanGrace, false, -1, 300 * time.Millisecond},
		{"StartTracked, no grace", 0, true, -1, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSupervisor(t)
			// A Start lets the reaper learn whether os/exec holds pidfds.
			p, err := s.Start(exec.Command("true"))
			if err != nil {
				t.Fatal(err)
			}
			waitDone(t, p, 5*time.Second)
			theReaper.mu.Lock()
			learnt := theReaper.execPidfd
			theReaper.mu.Unlock()
			if tc.execPidfd == 1 && learnt != 1 {
				t.Skipf("os/exec does not hold pidfds here (execPidfd %d)", learnt)
			}
			old := setOrphanGrace(tc.grace)
			defer setOrphanGrace(old)
			theReaper.mu.Lock()
			theReaper.execPidfd = tc.execPidfd
			theReaper.mu.Unlock()
			defer func() {
				theReaper.mu.Lock()
				theReaper.execPidfd = learnt
				theReaper.mu.Unlock()
			}()
			// A snapshot of the pidfds taken before the child exists must
			// not answer for it.
			rescanHeld()
			cmd := exec.Command("sh", "-c", "exit 3")
			if tc.tracked {
				err = StartTracked(cmd)
			} else {
				err = cmd.Start()
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(tc.delay) // exited long ago; the reaper has swept (SIGCHLD, then its idle sweep)
			var ee *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("Wait = %v, want exit status 3", err)
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	newSupervisor(t)
	if on, err := isChildSubreaper(); err != nil || !on {
		t.Fatalf("child subreaper = %v (err %v), want true", on, err)
	}
	if st, err := State(os.Getpid()); err != nil || st == 'Z' || st == 'T' {
		t.Fatalf("State(self) = %q, %v", st, err)
	}
	if !Alive(os.Getpid()) {
		t.Fatal("Alive(self) = false")
	}
	if _, err := State(1 << 30); err == nil {
		t.Fatal("State of nonexistent pid: want error")
	}
	if Alive(1 << 30) {
		t.Fatal("Alive(nonexistent) = true")
	}
	for _, pid := range []int{-1, 0, 1, os.Getpid()} {
		if err := SignalExternal(pid, 0); err == nil {
			t.Errorf("SignalExternal(%d) = nil, want refusal", pid)
		}
	}
	for _, m := range []string{"", "NOEQUALS", "=v", "K="} {
		if _, err := NewSupervisor(m); err == nil {
			t.Errorf("NewSupervisor(%q) = nil error", m)
		}
		if _, err := FindByMarker(m); err == nil {
			t.Errorf("FindByMarker(%q) = nil error", m)
		}
	}
	// comm with spaces and parentheses must not confuse the stat parser.
	st, err := parseStat(42, []byte("42 (a) b (c) S 7 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"))
	if err != nil || st.state != 'S' || st.ppid != 7 || st.pgrp != 42 || st.start != 12345 {
		t.Fatalf("parseStat = %+v, %v", st, err)
	}
	// A full line (kernel 6.x) also yields the flags and where the
	// environment ends.
	full := "7 (sleep) S 1 7 7 0 -1 4194304 89 0 0 0 0 0 0 0 20 0 1 0 5000 2240512 128 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 4210688 4215808 4218880 140724112512001 140724112512020 140724112512020 140724112515049 0"
	if st, err = parseStat(7, []byte(full)); err != nil || st.flags != 4194304 || st.envEnd != 140724112515049 || st.start != 5000 {
		t.Fatalf("parseStat(full) = %+v, %v", st, err)
	}
}

// TestEnvironReadMidExec reads a fresh process's environment as soon as it
// has taken the new program's name: exec renames the process before it
// copies the environment in, and a read in between (40% of such reads here)
// found none, so Kill spared a process of the instance that was exec'ing.
func TestEnvironReadMidExec(t *testing.T) {
	const mark = "CHAOS_TEST_MIDEXEC=1"
	for i := range 300 {
		cmd := exec.Command("/bin/sh", "-c", "exec sleep 5")
		cmd.Env = append(os.Environ(), mark)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		comm := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"
		for {
			if b, err := os.ReadFile(comm); err != nil || string(b) == "sleep\n" {
				break
			}
		}
		ok, err := hasEnvEntry(cmd.Process.Pid, mark)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil || !ok {
			t.Fatalf("try %d: hasEnvEntry(%s) = %v, %v right after exec, want true", i, mark, ok, err)
		}
	}
}

func TestSignalExternal(t *testing.T) {
	newSupervisor(t)
	cmd := exec.Command("sleep", "1000")
	if err := StartTracked(cmd); err != nil {
		t.Fatal(err)
	}
	if err := SignalExternal(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("Wait = %v, want killed by SIGTERM", err)
	}
}

func TestStartRules(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		cmd := exec.Command("true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: os.Getpid()}
		if _, err := s.Start(cmd); err == nil {
			t.Fatal("Start joining a foreign process group: want error")
		}
		// The caller's SysProcAttr is not mutated, and Setsid is honoured.
		attr := &syscall.SysProcAttr{Setsid: true}
		cmd = exec.Command("sleep", "1000")
		cmd.SysProcAttr = attr
		p, err := s.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		killOnCleanup(t, p)
		if attr.Setpgid {
			t.Fatal("Start mutated the caller's SysProcAttr")
		}
		st, err := readStat(p.Pid)
		if err != nil || st.pgrp != p.Pid || st.sid != p.Pid {
			t.Fatalf("setsid child: pgrp %d sid %d (err %v), want %d", st.pgrp, st.sid, err, p.Pid)
		}

		s2, err := NewSupervisor(s.Marker())
		if err != nil {
			t.Fatal(err)
		}
		s2.Close()
		s2.Close() // idempotent
		if _, err := s2.Start(exec.Command("true")); !errors.Is(err, ErrClosed) {
			t.Fatalf("Start after Close = %v, want ErrClosed", err)
		}
	})
}

func sortedPids(pids ...int) []int {
	slices.Sort(pids)
	return pids
}

// TestFindByMarkerSince: a process that started before since is not read,
// one that started at since or later is found.
func TestFindByMarkerSince(t *testing.T) {
	marker := "CHAOS_TEST_MARKER=since-" + strconv.Itoa(os.Getpid())
	c := startSleep(t, append(os.Environ(), marker))
	st, err := readStat(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		since uint64
		want  bool
	}{
		{0, true},
		{st.start, true},
		{st.start + 1, false},
	} {
		found, err := findByMarker(marker, tc.since, pidCursor{})
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(found, c.Process.Pid); got != tc.want {
			t.Errorf("findByMarker(since %d) with the process started at %d: found %v, want %v", tc.since, st.start, got, tc.want)
		}
	}
	if selfStart() == 0 || selfStart() > st.start {
		t.Errorf("selfStart() = %d, want this test's start, before its child's %d", selfStart(), st.start)
	}
}
