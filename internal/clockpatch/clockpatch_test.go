//go:build linux && amd64

package clockpatch

import (
	"bufio"
	"bytes"
	"errors"
	"math"
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

// need fails (CI) or skips the test when a tool is missing.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is needed: %v", tool, err)
		}
		t.Skipf("%s is needed: %v", tool, err)
	}
	return p
}

func root(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("ptrace of other processes needs root")
		}
		t.Skip("ptrace of other processes needs root")
	}
}

func TestPayloadIsAssembled(t *testing.T) {
	as, objcopy := need(t, "as"), need(t, "objcopy")
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "fake.o"), filepath.Join(dir, "fake.bin")
	for _, c := range [][]string{{as, "--64", "-o", obj, "fake.S"}, {objcopy, "-O", "binary", "-j", ".text", obj, bin}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	got, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("fake.bin is not fake.S assembled: run the commands in fake.S")
	}
	out, err := exec.Command(need(t, "nm"), obj).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"off_ns": varOffset, "t0": varT0, "rate": varRate, "mask": varMask, "clock_gettime_fake": funcs[0].off, "gettimeofday_fake": funcs[1].off, "time_fake": funcs[2].off}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if w, ok := want[f[2]]; ok {
			if v, _ := strconv.ParseUint(f[0], 16, 64); v != w {
				t.Errorf("%s is at %#x in fake.S, %#x in the Go constants", f[2], v, w)
			}
			delete(want, f[2])
		}
	}
	if len(want) > 0 {
		t.Errorf("symbols missing from fake.S: %v", want)
	}
}

// sample is one line a clock printer wrote, and when the test read it.
type sample struct {
	seen                time.Time
	rt, tod, secs, mono float64
}

// printer is a running clock printer.
type printer struct {
	cmd  *exec.Cmd
	mu   sync.Mutex // guards last
	last []sample
}

func start(t *testing.T, prog string) *printer {
	t.Helper()
	p := &printer{cmd: exec.Command(prog)}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				continue
			}
			var v [4]float64
			for i := range f {
				v[i], _ = strconv.ParseFloat(f[i], 64)
			}
			p.mu.Lock()
			p.last = append(p.last, sample{time.Now(), v[0], v[1], v[2], v[3]})
			p.mu.Unlock()
		}
	}()
	p.next(t)
	return p
}

// next waits for a line written after now.
func (p *printer) next(t *testing.T) sample {
	t.Helper()
	from := time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		n := len(p.last)
		var s sample
		if n > 0 {
			s = p.last[n-1]
		}
		p.mu.Unlock()
		// Two lines after from: the first may have been read from the
		// clock before it.
		if n > 0 && s.seen.After(from) && p.count(from) >= 2 {
			return s
		}
	}
	t.Fatal("the clock printer wrote nothing")
	return sample{}
}

func (p *printer) count(from time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.last {
		if s.seen.After(from) {
			n++
		}
	}
	return n
}

// skew is how far ahead of the true time a sample's clocks read: the wall
// clock, gettimeofday and time (whole seconds).
func skew(s sample) (rt, tod, secs float64) {
	now := float64(s.seen.UnixNano()) / 1e9
	return s.rt - now, s.tod - now, s.secs - now
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// programs builds the clock printers: C through glibc, dynamic and
// static, and Go (static, the vDSO without libc).
func programs(t *testing.T) map[string]string {
	t.Helper()
	gcc, gobin := need(t, "gcc"), need(t, "go")
	dir := t.TempDir()
	progs := map[string]string{"c-dynamic": filepath.Join(dir, "dyn"), "c-static": filepath.Join(dir, "static"), "go": filepath.Join(dir, "goclock")}
	src := filepath.Join("testdata", "clockprint", "clockprint.c")
	cmds := [][]string{{gcc, "-O2", "-o", progs["c-dynamic"], src}, {gcc, "-O2", "-static", "-o", progs["c-static"], src}, {gobin, "build", "-o", progs["go"], "./testdata/goclock"}}
	for _, c := range cmds {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	out, _ := exec.Command("file", progs["c-static"], progs["go"]).Output()
	if len(out) > 0 && strings.Count(string(out), "statically linked") != 2 {
		t.Fatalf("the static printers are not static:\n%s", out)
	}
	return progs
}

func TestOffsetStaticAndDynamic(t *testing.T) {
	root(t)
	for name, prog := range programs(t) {
		t.Run(name, func(t *testing.T) {
			p := start(t, prog)
			pid := p.cmd.Process.Pid
			before := p.next(t)
			if rt, _, _ := skew(before); !near(rt, 0, 1) {
				t.Fatalf("before the fault the clock is %.3fs off", rt)
			}
			patch, already, err := Plan(pid)
			if err != nil || already {
				t.Fatalf("plan: %v (already patched %v)", err, already)
			}
			if err := Apply(&patch, Shift{Offset: time.Hour}); err != nil {
				t.Fatal(err)
			}
			held := p.next(t)
			rt, tod, secs := skew(held)
			t.Logf("held: realtime %+.3fs, gettimeofday %+.3fs, time %+.3fs, monotonic %.3f (before %.3f)", rt, tod, secs, held.mono, before.mono)
			if !near(rt, 3600, 1) {
				t.Errorf("held: realtime is %+.3fs off, want +3600s", rt)
			}
			if name != "go" && (!near(tod, 3600, 1) || !near(secs, 3600, 2)) {
				t.Errorf("held: gettimeofday %+.3fs, time %+.3fs, want +3600s", tod, secs)
			}
			if d := held.mono - before.mono; d < 0 || d > 60 {
				t.Errorf("the monotonic clock moved %.3fs, want it untouched", d)
			}
			if tp, _ := TracerPid(pid); tp != 0 {
				t.Errorf("while held, TracerPid is %d", tp)
			}
			// A jump: the offset changes without stopping the process.
			if err := Set(patch, Shift{Offset: -2 * time.Hour}); err != nil {
				t.Fatal(err)
			}
			if rt, _, _ := skew(p.next(t)); !near(rt, -7200, 1) {
				t.Errorf("after Set: realtime is %+.3fs off, want -7200s", rt)
			}
			if gone, err := Restore(patch); err != nil || gone {
				t.Fatalf("restore: %v (gone %v)", err, gone)
			}
			after := p.next(t)
			if rt, tod, secs := skew(after); !near(rt, 0, 1) || !near(tod, 0, 1) || !near(secs, 0, 2) {
				t.Errorf("after: realtime %+.3fs, gettimeofday %+.3fs, time %+.3fs off, want 0", rt, tod, secs)
			}
			if ok, err := Patched(pid); ok || err != nil {
				t.Errorf("after restore, patched %v (%v)", ok, err)
			}
			maps, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
			if strings.Contains(string(maps), strconv.FormatUint(patch.Page, 16)+"-") {
				t.Errorf("the fake's page %#x is still mapped", patch.Page)
			}
			if tp, _ := TracerPid(pid); tp != 0 {
				t.Errorf("after, TracerPid is %d", tp)
			}
			if p.cmd.ProcessState != nil {
				t.Fatal("the printer died")
			}
		})
	}
}

// Drift and strobe as the process sees them: its wall clock against its
// monotonic clock, which the fake leaves alone.
func TestDriftAndStrobe(t *testing.T) {
	root(t)
	prog := programs(t)["c-static"]
	p := start(t, prog)
	pid := p.cmd.Process.Pid
	patch, _, err := Plan(pid)
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	if err := Apply(&patch, Shift{Rate: 3, Since: since}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Restore(patch) })
	// wall - monotonic grows 2 s a second at rate 3.
	a := p.next(t)
	time.Sleep(500 * time.Millisecond)
	b := p.next(t)
	gain := ((b.rt - b.mono) - (a.rt - a.mono)) / (b.mono - a.mono)
	t.Logf("drift at rate 3: the wall clock gained %.3f s per second over %.3fs", gain, b.mono-a.mono)
	if !near(gain, 2, 0.05) {
		t.Errorf("drift: the wall clock gained %.3f s a second, want 2", gain)
	}
	// A strobe is the harness flipping the offset: each state is seen.
	seen := map[int]int{}
	for i := range 6 {
		off := time.Duration(0)
		if i%2 == 0 {
			off = -30 * time.Minute
		}
		if err := Set(patch, Shift{Offset: off}); err != nil {
			t.Fatal(err)
		}
		rt, _, _ := skew(p.next(t))
		seen[int(math.Round(rt/60))]++
	}
	if seen[-30] != 3 || seen[0] != 3 {
		t.Errorf("strobe: minutes off seen %v, want -30 and 0 three times each", seen)
	}
	if _, err := Restore(patch); err != nil {
		t.Fatal(err)
	}
	if rt, _, _ := skew(p.next(t)); !near(rt, 0, 1) {
		t.Errorf("after: %+.3fs off", rt)
	}
}

// Patching and restoring again and again while four threads spin in the
// vDSO neither crashes the process nor leaves it traced or shifted.
func TestPatchWhileThreadsSpin(t *testing.T) {
	root(t)
	bin := filepath.Join(t.TempDir(), "spin")
	if out, err := exec.Command(need(t, "gcc"), "-O2", "-pthread", "-o", bin, filepath.Join("testdata", "spin", "spin.c")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	p := start(t, bin)
	pid := p.cmd.Process.Pid
	for i := range 20 {
		patch, already, err := Plan(pid)
		if err != nil || already {
			t.Fatalf("round %d: plan: %v (already %v)", i, err, already)
		}
		if err := Apply(&patch, Shift{Offset: time.Duration(i+1) * time.Minute}); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if rt, _, _ := skew(p.next(t)); !near(rt, float64(60*(i+1)), 1) {
			t.Errorf("round %d: %+.3fs off, want %ds", i, rt, 60*(i+1))
		}
		if _, err := Restore(patch); err != nil {
			t.Fatalf("round %d: restore: %v", i, err)
		}
	}
	if rt, _, _ := skew(p.next(t)); !near(rt, 0, 1) {
		t.Errorf("after: %+.3fs off", rt)
	}
	if tp, _ := TracerPid(pid); tp != 0 {
		t.Errorf("TracerPid %d", tp)
	}
}

// A process stopped by SIGSTOP (a freeze on a process) is patched and
// stays stopped; once continued it reads the shifted clock.
func TestPatchAStoppedProcess(t *testing.T) {
	root(t)
	p := start(t, programs(t)["c-dynamic"])
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState := func(want byte) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			s := string(data)
			if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && s[i+2] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d is not in state %c: %s", pid, want, s)
			}
		}
	}
	waitState('T')
	patch, _, err := Plan(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(&patch, Shift{Offset: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	waitState('T')
	p.cmd.Process.Signal(syscall.SIGCONT)
	if rt, _, _ := skew(p.next(t)); !near(rt, 86400, 1) {
		t.Errorf("continued: %+.3fs off, want a day", rt)
	}
	if _, err := Restore(patch); err != nil {
		t.Fatal(err)
	}
	if rt, _, _ := skew(p.next(t)); !near(rt, 0, 1) {
		t.Errorf("after: %+.3fs off", rt)
	}
}

// `date +%s` from busybox-static (static glibc), in a busybox shell loop:
// ash runs its applets in its own process or a fork of it, which keeps
// the patched vDSO, so each date reads the shifted clock.
func TestBusyboxDate(t *testing.T) {
	root(t)
	bb := need(t, "busybox")
	if out, _ := exec.Command("file", "-L", bb).Output(); !strings.Contains(string(out), "statically linked") {
		t.Fatalf("%s is not static (install busybox-static):\n%s", bb, out)
	}
	cmd := exec.Command(bb, "sh", "-c", "while :; do date +%s; sleep 0.1; done")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan int64, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n, _ := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
			lines <- n
		}
	}()
	// skewOf is what a date printed after now reads, against now.
	skewOf := func() int64 {
		t.Helper()
		from := time.Now()
		for {
			select {
			case n := <-lines:
				if time.Since(from) > 150*time.Millisecond {
					return n - time.Now().Unix()
				}
			case <-time.After(10 * time.Second):
				t.Fatal("busybox date printed nothing")
			}
		}
	}
	if s := skewOf(); s < -1 || s > 1 {
		t.Fatalf("before: %+ds off", s)
	}
	patch, _, err := Plan(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(&patch, Shift{Offset: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if s := skewOf(); s < 3599 || s > 3601 {
		t.Errorf("held: busybox date is %+ds off, want +3600", s)
	}
	if _, err := Restore(patch); err != nil {
		t.Fatal(err)
	}
	if s := skewOf(); s < -1 || s > 1 {
		t.Errorf("after: busybox date is %+ds off", s)
	}
}

// Set refuses a process that no longer runs the patch: restored, it must
// not write at the page's old address.
func TestSetRefusesAnUnpatchedProcess(t *testing.T) {
	root(t)
	p := start(t, programs(t)["go"])
	pid := p.cmd.Process.Pid
	patch, _, err := Plan(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(&patch, Shift{Offset: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(patch); err != nil {
		t.Fatal(err)
	}
	if err := Set(patch, Shift{Offset: time.Hour}); !errors.Is(err, ErrNotPatched) {
		t.Errorf("Set after Restore: %v, want ErrNotPatched", err)
	}
	if rt, _, _ := skew(p.next(t)); !near(rt, 0, 1) {
		t.Errorf("%+.3fs off", rt)
	}
}

// TestApplyAfterAnExec: a process planned, then running a new program
// before it is patched (a shell's child about to exec the program, as a
// run's wrapper starts its command), is refused with ErrStale, never
// written at its old vDSO's addresses (that was "read /proc/PID/mem:
// input/output error", failing the fault); planned again, it is patched.
func TestApplyAfterAnExec(t *testing.T) {
	root(t)
	sleep := need(t, "sleep")
	cmd := exec.Command("sh", "-c", "read x; exec "+sleep+" 30")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	stale, _, err := Plan(pid)
	if err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("\n"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); filepath.Base(exe) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell did not exec sleep")
		}
	}
	if err := Apply(&stale, Shift{Offset: time.Hour}); !errors.Is(err, ErrStale) || stale.Page != 0 {
		t.Fatalf("Apply of the plan made before the exec: %v (page %#x), want ErrStale and no page", err, stale.Page)
	}
	fresh, _, err := Plan(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(&fresh, Shift{Offset: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if ok, err := Patched(pid); err != nil || !ok {
		t.Fatalf("after the second plan: patched %v, %v", ok, err)
	}
	if _, err := Restore(fresh); err != nil {
		t.Fatal(err)
	}
}

// TestPlanRightAfterStart: a process planned as soon as its start
// returns may still be inside its exec, its new memory without a vDSO
// yet (the kernel maps it after the program's segments); Plan waits for
// the exec to finish, never answering ErrNoVDSO for a program that will
// have one (TestApplyAfterAnExec's first Plan failed so in CI).
func TestPlanRightAfterStart(t *testing.T) {
	root(t)
	sleep := need(t, "sleep")
	for i := 0; i < 300; i++ {
		cmd := exec.Command(sleep, "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_, _, err := Plan(cmd.Process.Pid)
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			t.Fatalf("start %d: Plan right after the start: %v", i, err)
		}
	}
}
