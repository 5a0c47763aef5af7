package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// signalRun is one chaos run that gets a SIGINT.
type signalRun struct {
	runsDir        string
	pid            int
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
	// caught is how long after the start the process began to catch
	// SIGINT.
	caught time.Duration
}

// startIgnoringSIGINT starts `chaos run FILE` the way a non-interactive
// shell starts a background job: with SIGINT ignored. Until chaos catches
// it, a SIGINT is then dropped rather than fatal, so the test can see when
// catching starts (SigCgt in /proc/PID/status) and that no signal after
// that moment is lost.
func startIgnoringSIGINT(t *testing.T, bin, file string) (*signalRun, error) {
	t.Helper()
	r := &signalRun{runsDir: t.TempDir(), done: make(chan struct{})}
	r.cmd = exec.Command("/bin/sh", "-c", `trap '' INT; exec "$0" "$@"`, bin, "run", file)
	r.cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+r.runsDir)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	start := time.Now()
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	r.pid = r.cmd.Process.Pid
	go func() {
		err := r.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			r.code = ee.ExitCode() // -1 when killed by a signal
		case err != nil:
			r.code = -2
		}
		close(r.done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !catches(r.pid, bin, syscall.SIGINT) {
		select {
		case <-r.done:
			return nil, fmt.Errorf("chaos exited %d before it caught SIGINT\n%s", r.code, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = r.cmd.Process.Kill()
			<-r.done
			return nil, errors.New("chaos did not catch SIGINT within 20s of its start")
		}
		time.Sleep(200 * time.Microsecond)
	}
	r.caught = time.Since(start)
	return r, nil
}

// catches reports whether pid runs bin (the shell has exec'd it) and has a
// handler for sig (SigCgt in /proc/PID/status).
func catches(pid int, bin string, sig syscall.Signal) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && exe == bin && sigMask(pid, "SigCgt", sig)
}

// sigMask reports whether sig is in the mask field (SigCgt, SigIgn) of
// /proc/PID/status.
// stopProcess stops r's chaos (SIGSTOP) and says whether it is stopped,
// within a second; false when it ended first. Every signal goes through
// r.cmd.Process (a pidfd), and r.pid is read only while r is not reaped:
// once chaos exits, the Wait goroutine reaps it and its pid is free for
// another process. With pids made to wrap every 50 ms, one got it at
// once: the test read a shell's or a sleep's /proc status, took it for a
// run that still caught SIGINT, and sent that process the signal; the
// run had exited 0 (4 of 4 test runs).
func stopProcess(r *signalRun) bool {
	if r.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		switch st, err := procState(r.pid); {
		case err != nil || st == 'Z' || r.reaped():
			return false
		case st == 'T':
			return true
		}
	}
	return false
}

// reaped says whether r's chaos has exited and been reaped: its pid may be
// another process's now.
func (r *signalRun) reaped() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func sigMask(pid int, field string, sig syscall.Signal) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

func (r *signalRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Errorf("chaos run did not exit within 60s\n%s", r.stderr.String())
	}
}

// TestSignalAtAnyMomentAborts sends SIGINT to 200 runs of a short
// experiment with an outage, each at a random moment between the moment
// chaos catches SIGINT and the typical end of a run: every one must end
// with exit code 2, and a run directory whose verdict is ERROR with
// run.aborted, except for a signal that came after the verdict was
// decided, which chaos must still answer with 2 and say so. An outage cut
// short by the abort is reverted with when: aborted and its node did not
// finish ok. Nothing of any run may be left: no process carrying a run's
// marker, no cgroup tree.
//
// Before signals were caught from the start (package sigcatch), a SIGINT
// before `chaos run` subscribed was dropped (with SIGINT ignored at exec)
// or killed chaos with the signal; one after the engine's last look at
// its context (while checks ran or the report was written) was dropped;
// both ended PASS with exit 0.
func TestSignalAtAnyMomentAborts(t *testing.T) {
	total := 200
	if testing.Short() {
		total = 20
	}
	if n, err := strconv.Atoi(os.Getenv("CHAOS_TEST_SIGNALS")); err == nil && n > 0 {
		total = n
	}
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatalf("chaos is not on $PATH (TestMain puts it there): %v", err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		t.Fatal(err)
	}
	file, err := filepath.Abs(filepath.Join("testdata", "process", "sigint.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	// How long a run lasts from the moment it catches SIGINT, with as many
	// runs at once as the test makes: the window the moments are drawn
	// from, a little longer than the longest, so that the ends of runs
	// (checks, the verdict, the report) get signals too. A run that ends
	// before its moment is drawn again.
	const workers = 6
	var window time.Duration
	var cals []*signalRun
	for i := 0; i < workers; i++ {
		cal, err := startIgnoringSIGINT(t, bin, file)
		if err != nil {
			t.Fatal(err)
		}
		cals = append(cals, cal)
	}
	calStart := time.Now()
	for _, cal := range cals {
		cal.wait(t)
		window = max(window, time.Since(calStart))
		if cal.code != 0 {
			t.Fatalf("a run without a signal exited %d, want 0 (PASS)\n%s", cal.code, cal.stderr.String())
		}
	}
	window += window / 10
	t.Logf("runs last up to %s after they catch SIGINT (%s after their start)", window.Round(time.Millisecond), cals[0].caught.Round(time.Microsecond))

	var (
		mu       sync.Mutex
		sent     int
		missed   int // the run had ended before the moment came
		phases   = map[string]int{}
		runIDs   []string
		catchMax time.Duration
	)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for {
				mu.Lock()
				if sent >= total || t.Failed() {
					mu.Unlock()
					return
				}
				sent++
				mu.Unlock()
				r, err := startIgnoringSIGINT(t, bin, file)
				if err != nil {
					t.Error(err)
					return
				}
				delay := time.Duration(rng.Int64N(int64(window)))
				time.Sleep(delay)
				// Past its last decision chaos ignores SIGINT (sigcatch.Finish)
				// while it exits: a moment after that is after the run. It is
				// stopped while the test looks and signals, so it cannot start
				// ignoring SIGINT between the look and the signal (a SIGINT
				// sent just as it did so was lost, and the run exited 0, once
				// in CI).
				// What is read of r.pid counts only if chaos was not reaped
				// after it was read (stopped, it cannot end meanwhile).
				stopped := stopProcess(r)
				st, err := procState(r.pid)
				ignores := sigMask(r.pid, "SigIgn", syscall.SIGINT)
				if err != nil || st == 'Z' || !stopped || ignores || r.reaped() {
					// It ended before the moment came: draw again.
					_ = r.cmd.Process.Signal(syscall.SIGCONT)
					r.wait(t)
					mu.Lock()
					sent--
					missed++
					mu.Unlock()
					continue
				}
				if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Errorf("kill: %v", err)
				}
				_ = r.cmd.Process.Signal(syscall.SIGCONT)
				r.wait(t)
				phase, id := checkSignalled(t, r, delay)
				mu.Lock()
				phases[phase]++
				if id != "" {
					runIDs = append(runIDs, id)
				}
				catchMax = max(catchMax, r.caught)
				mu.Unlock()
			}
		}(uint64(w))
	}
	wg.Wait()
	var hist []string
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range phases {
			if !yield(p) {
				return
			}
		}
	}) {
		hist = append(hist, fmt.Sprintf("%s %d", p, phases[p]))
	}
	t.Logf("%d SIGINTs (%d runs ended before their moment and were drawn again); where they landed: %s; SIGINT caught at most %s after a start",
		sent, missed, strings.Join(hist, ", "), catchMax.Round(time.Microsecond))

	// Nothing of any run is left.
	for _, id := range runIDs {
		if left := runProcesses(id); len(left) > 0 {
			t.Errorf("run %s left processes:\n%s", id, strings.Join(left, "\n"))
		}
	}
	if info := cgroup.Detect(); info.Usable {
		trees, err := cgroup.ListRuns(info)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trees {
			if slices.Contains(runIDs, tr.RunID) {
				t.Errorf("run %s left its cgroup tree %s", tr.RunID, tr.Path)
			}
		}
	}
}

// checkSignalled checks one signalled run from outside and returns where
// the signal landed and the run's id.
func checkSignalled(t *testing.T, r *signalRun, delay time.Duration) (phase, runID string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Errorf("SIGINT %s after catching: "+format+"\nstderr:\n%s", append(append([]any{delay.Round(time.Millisecond)}, args...), r.stderr.String())...)
	}
	if r.code != 2 {
		fail("chaos exited %d, want 2", r.code)
	}
	dirs, _ := filepath.Glob(filepath.Join(r.runsDir, "sigint", "*", "timeline.jsonl"))
	if len(dirs) != 1 {
		if !strings.Contains(r.stderr.String(), "interrupted") {
			fail("no run directory, and chaos did not say it was interrupted")
		}
		return "before the run", ""
	}
	dir := filepath.Dir(dirs[0])
	runID = filepath.Base(dir)
	v := readVerdict(t, dir)
	events := readEvents(t, dirs[0])
	aborted := -1
	for i, e := range events {
		if e.str("event") == "run.aborted" {
			aborted = i
		}
	}
	if aborted < 0 {
		// Only a signal after the verdict was decided may leave it.
		if !strings.Contains(r.stderr.String(), "after the run had finished") && !strings.Contains(r.stderr.String(), "as it finished") {
			fail("no run.aborted, verdict %s, and chaos did not say the signal came after the run", v.Verdict)
		}
		return "after the verdict", runID
	}
	if v.Verdict != "ERROR" || !v.Aborted || v.ExitCode != 2 {
		fail("verdict %s, aborted %v, exit_code %d; want ERROR, true, 2", v.Verdict, v.Aborted, v.ExitCode)
	}
	// An outage is reverted once, with when: aborted exactly when the abort
	// cut it short, and then its node did not finish ok.
	var started, reverted int
	when, nodeOK := "", ""
	seen := map[string]bool{}
	for _, e := range events[:aborted] {
		seen[e.str("event")] = true
		switch e.str("event") {
		case "operation.started":
			started++
		case "operation.reverted":
			reverted++
			when = e.str("when")
		case "node.finished":
			if e.str("name") == "ticker-down" {
				nodeOK = e.str("ok")
			}
		}
	}
	if started != reverted {
		fail("the outage started %d times and was reverted %d times", started, reverted)
	}
	if started > 0 && (when == "aborted") != (nodeOK == "false") {
		fail("the outage was reverted with when %q, and its node finished ok %s", when, nodeOK)
	}
	switch {
	case when == "aborted":
		phase = "mid-outage"
	case !seen["node.started"]:
		phase = "before the flow"
	case seen["check.started"] && checksAfterFlow(events[:aborted]):
		phase = "while checks ran"
	case seen["run.finished"]:
		phase = "after the verdict"
	default:
		phase = "in the flow"
	}
	return phase, runID
}

// checksAfterFlow reports whether checks of the verdict (not preflight)
// started before the end of events.
func checksAfterFlow(events []event) bool {
	for _, e := range events {
		if e.str("event") == "check.started" && e.str("scope") != "preflight" {
			return true
		}
	}
	return false
}

// TestSignalWhileLoading sends SIGINT while `chaos run` is still reading
// its experiment (a named pipe the test writes only afterwards), before the
// command could subscribe to signals: with SIGINT ignored at exec (a
// background job of a script) and with the default disposition. The signal
// must abort the run it then starts: exit 2, verdict ERROR, run.aborted,
// the flow never started. Before signals were caught from the start, the
// first case went on to PASS with exit 0 and the second killed chaos by the
// signal, leaving no run directory.
func TestSignalWhileLoading(t *testing.T) {
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatalf("chaos is not on $PATH (TestMain puts it there): %v", err)
	}
	content, err := os.ReadFile(filepath.Join("testdata", "process", "sigint.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ignored := range []bool{true, false} {
		t.Run(fmt.Sprintf("SIGINT ignored at exec %v", ignored), func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "sigint.yaml")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			runsDir := filepath.Join(dir, "runs")
			var cmd *exec.Cmd
			if ignored {
				cmd = exec.Command("/bin/sh", "-c", `trap '' INT; exec "$0" "$@"`, bin, "run", fifo)
			} else {
				cmd = exec.Command(bin, "run", fifo)
			}
			cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+runsDir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Opening the pipe for writing returns once chaos has opened
			// it for reading: it is loading its experiment.
			opened := make(chan *os.File, 1)
			go func() {
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					t.Error(err)
					close(opened)
					return
				}
				opened <- w
			}()
			var w *os.File
			select {
			case w = <-opened:
			case err := <-exited:
				t.Fatalf("chaos exited (%v) before it read its experiment\n%s", err, stderr.String())
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("chaos never opened its experiment")
			}
			if w == nil {
				t.FailNow()
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // let it arrive before the experiment does
			if _, err := w.Write(content); err != nil {
				t.Logf("writing the experiment: %v", err)
			}
			w.Close()
			var code int
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				}
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("chaos did not exit within 60s")
			}
			if code != 2 {
				t.Errorf("chaos run exited %d after a SIGINT while loading, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			m, _ := filepath.Glob(filepath.Join(runsDir, "sigint", "*", "timeline.jsonl"))
			if len(m) != 1 {
				t.Fatalf("no run directory (%v)\nstderr:\n%s", m, stderr.String())
			}
			v := readVerdict(t, filepath.Dir(m[0]))
			if v.Verdict != "ERROR" || !v.Aborted {
				t.Errorf("verdict %s, aborted %v; want ERROR, true (errors %q)", v.Verdict, v.Aborted, v.Errors)
			}
			for _, e := range readEvents(t, m[0]) {
				if e.str("event") == "node.started" {
					t.Errorf("the flow started after a SIGINT that came before the run: %v", e)
					break
				}
			}
			assertNoProcessesLeft(t, filepath.Base(filepath.Dir(m[0])))
		})
	}
}

// TestSignalWhileChecksRun sends SIGINT while the verdict's checks run,
// after the flow and cleanup: the run is aborted all the same (exit 2,
// ERROR, run.aborted). Before, the engine no longer looked for signals
// then: the run went on to PASS with exit 0.
func TestSignalWhileChecksRun(t *testing.T) {
	t.Parallel()
	r := startChaos(t, "sigint-checks", filepath.Join("testdata", "process", "sigint-checks.yaml"))
	dir := r.dir()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "checking")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow check never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(30 * time.Second); code != 2 {
		t.Errorf("chaos run exited %d after SIGINT while its checks ran, want 2", code)
	}
	v := readVerdict(t, dir)
	if v.Verdict != "ERROR" || !v.Aborted || v.ExitCode != 2 {
		t.Errorf("verdict %s, aborted %v, exit_code %d; want ERROR, true, 2", v.Verdict, v.Aborted, v.ExitCode)
	}
	if !hasEvent(t, filepath.Join(dir, "timeline.jsonl"), "run.aborted") {
		t.Error("the timeline has no run.aborted")
	}
}
