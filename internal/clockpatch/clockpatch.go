//go:build linux && amd64

// Package clockpatch fakes the wall clock of running, unmodified processes
// on amd64 without changing the machine's clock: it makes the vDSO's
// clock_gettime, gettimeofday and time of each process jump to a small
// piece of code (fake.S) written into that process, which asks the kernel
// for the true time and adds an offset and a drift.
//
// This is how Chaos Mesh's TimeChaos works (pkg/time: it ptrace-attaches,
// maps a page in the target and rewrites the vDSO entry), and it is the
// one method that reaches static and dynamic programs alike: Go programs
// (static, no libc) and glibc programs both call the vDSO, and LD_PRELOAD
// reaches neither static programs nor ones already running. Unlike Chaos
// Mesh, the variables are rewritten through /proc/PID/mem while the fault
// holds, so changing the offset (a jump, a strobe) needs no ptrace stop,
// and the page is mapped read and execute only (written by the kernel's
// forced access, as a debugger writes breakpoints).
//
// What it cannot reach: a process that makes the clock_gettime system call
// itself rather than through the vDSO, CLOCK_MONOTONIC and other clocks
// (only those in the mask are shifted; monotonic offsets need a time
// namespace, set before the process starts), and the kernel's own idea of
// time (file times, timers, timeouts of system calls).
package clockpatch

import (
	"bytes"
	"debug/elf"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/proc"
)

//go:embed fake.bin
var payload []byte

// pageSize is the size of the page mapped for the fake in the target.
const pageSize = 4096

// stopWait is how long a thread is given to stop under ptrace.
const stopWait = 5 * time.Second

// funcs maps each vDSO symbol patched to its replacement's offset.
var funcs = []struct {
	sym string
	off uint64
}{
	{"__vdso_clock_gettime", 0x40},
	{"__vdso_gettimeofday", 0xa0},
	{"__vdso_time", 0xf0},
}

// patchLen is the length of the jump written over a vDSO entry:
// movabs rax, imm64; jmp rax.
const patchLen = 12

func jump(to uint64) []byte {
	b := []byte{0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0}
	binary.LittleEndian.PutUint64(b[2:], to)
	return b
}

// jumpTarget returns where b (a vDSO entry's first bytes) jumps to, when it
// is a jump this package wrote.
func jumpTarget(b []byte) (uint64, bool) {
	if len(b) < patchLen || b[0] != 0x48 || b[1] != 0xb8 || b[10] != 0xff || b[11] != 0xe0 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[2:]), true
}

// Plan reads pid's vDSO and returns the patch Apply would make, page
// unknown, or, when pid already runs the fake (a child forked from a
// patched process inherits it), that patch with its page. Journal the
// plan before calling Apply.
func Plan(pid int) (Patch, bool, error) {
	start, err := proc.StartTime(pid)
	if err != nil {
		return Patch{}, false, err
	}
	lo, hi, err := vdsoRange(pid)
	if err != nil {
		return Patch{}, false, err
	}
	img := make([]byte, hi-lo)
	if err := readMem(pid, lo, img); err != nil {
		return Patch{}, false, fmt.Errorf("reading the vDSO: %w", err)
	}
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return Patch{}, false, fmt.Errorf("the vDSO is not an ELF image: %w", err)
	}
	base := uint64(0)
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			base = p.Vaddr
			break
		}
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return Patch{}, false, fmt.Errorf("the vDSO's symbols: %w", err)
	}
	p := Patch{Pid: pid, Start: start}
	patched := 0
	for _, fn := range funcs {
		for _, s := range syms {
			if s.Name != fn.sym {
				continue
			}
			off := s.Value - base
			if off+patchLen > uint64(len(img)) {
				return Patch{}, false, fmt.Errorf("vDSO symbol %s is outside the image", s.Name)
			}
			cur := img[off : off+patchLen]
			e := Entry{Symbol: s.Name, Fake: fn.off, Addr: lo + off, Orig: bytes.Clone(cur)}
			if to, ok := jumpTarget(cur); ok {
				patched++
				p.Page = to - fn.off
			}
			p.Entries = append(p.Entries, e)
			break
		}
	}
	if len(p.Entries) == 0 || p.Entries[0].Symbol != funcs[0].sym {
		return Patch{}, false, errors.New("the vDSO has no __vdso_clock_gettime")
	}
	if patched > 0 && patched != len(p.Entries) {
		return Patch{}, false, errors.New("the vDSO is partly patched")
	}
	return p, patched > 0, nil
}

// ErrStale is Apply's answer for a process whose vDSO is not the one its
// patch was planned on: it ran a new program (exec) between Plan and
// Apply, and the new program has a vDSO of its own. Plan it again.
var ErrStale = errors.New("the process ran a new program since its patch was planned")

// Apply patches p.Pid's vDSO with the fake set to s, filling in p.Page.
// Every thread is stopped while its code changes, and detached after.
func Apply(p *Patch, s Shift) error {
	return withStopped(p.Pid, p.Start, p.ranges(), func(t *tracee) error {
		// Stopped, it can no longer exec: the plan holds from here on, or
		// it never will.
		if err := p.current(); err != nil {
			return err
		}
		page, err := t.syscall(p.Entries[0].Addr, unix.SYS_MMAP, 0, pageSize, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
		if err != nil {
			return fmt.Errorf("mapping a page in the process: %w", err)
		}
		p.Page = page
		code := bytes.Clone(payload)
		copy(code, s.bytes())
		if err := writeMem(p.Pid, page, code); err != nil {
			return fmt.Errorf("writing the fake clock: %w", err)
		}
		for _, e := range p.Entries {
			if err := writeMem(p.Pid, e.Addr, jump(page+e.Fake)); err != nil {
				return fmt.Errorf("patching %s: %w", e.Symbol, err)
			}
		}
		return nil
	})
}

// ErrNotPatched is Set's answer for a process that does not run this
// patch's fake (any more): it ran a new program since, or was restored.
var ErrNotPatched = errors.New("the process does not run this fake clock")

// Set changes the shift of a patched process; the process is not stopped.
// The process's vDSO must still jump to p.Page: after an exec that
// address may hold anything of the new program's.
func Set(p Patch, s Shift) error {
	if err := same(p); err != nil {
		return err
	}
	cur, patched, err := Plan(p.Pid)
	if err != nil {
		return err
	}
	if !patched || cur.Page != p.Page {
		return ErrNotPatched
	}
	return writeMem(p.Pid, p.Page, s.bytes())
}

// Restore gives p.Pid its true clock back: the vDSO entries get their
// bytes back and the page is unmapped. A process that has exited, or whose
// pid is another process's now, is left alone (gone is true).
func Restore(p Patch) (gone bool, err error) {
	if err := same(p); err != nil {
		return true, nil
	}
	cur, patched, err := Plan(p.Pid)
	if err != nil {
		if _, serr := proc.StartTime(p.Pid); serr != nil {
			return true, nil
		}
		return false, err
	}
	if !patched {
		return false, nil // already restored
	}
	// The page is the one the jumps lead to: a journal written before
	// the page was mapped does not know it.
	p.Page = cur.Page
	// First the entries, so no thread enters the page any more; then the
	// page, once no thread is still inside it.
	err = withStopped(p.Pid, p.Start, p.ranges(), func(t *tracee) error {
		for _, e := range p.Entries {
			if err := writeMem(p.Pid, e.Addr, e.Orig); err != nil {
				return fmt.Errorf("restoring %s: %w", e.Symbol, err)
			}
		}
		return nil
	})
	if err == nil {
		err = withStopped(p.Pid, p.Start, [][2]uint64{{p.Page, p.Page + pageSize}}, func(t *tracee) error {
			if _, err := t.syscall(p.Entries[0].Addr, unix.SYS_MUNMAP, p.Page, pageSize, 0, 0, 0, 0); err != nil {
				return fmt.Errorf("unmapping the fake clock's page: %w", err)
			}
			return nil
		})
	}
	if err != nil {
		if _, serr := proc.StartTime(p.Pid); serr != nil {
			return true, nil
		}
	}
	return false, err
}

// current returns ErrStale unless p.Pid's vDSO is still the one p was
// planned on: each entry inside it, with the bytes Plan read there.
func (p Patch) current() error {
	lo, hi, err := vdsoRange(p.Pid)
	if errors.Is(err, ErrNoVDSO) {
		return ErrStale
	}
	if err != nil {
		return err
	}
	b := make([]byte, patchLen)
	for _, e := range p.Entries {
		if e.Addr < lo || e.Addr+patchLen > hi {
			return ErrStale
		}
		if err := readMem(p.Pid, e.Addr, b); err != nil || !bytes.Equal(b, e.Orig) {
			return ErrStale
		}
	}
	return nil
}

// ranges are the patched entries, which no thread may be executing while
// they change.
func (p Patch) ranges() [][2]uint64 {
	var r [][2]uint64
	for _, e := range p.Entries {
		r = append(r, [2]uint64{e.Addr, e.Addr + patchLen})
	}
	return r
}

func same(p Patch) error {
	st, err := proc.StartTime(p.Pid)
	if err != nil {
		return err
	}
	if st != p.Start {
		return fmt.Errorf("pid %d is another process now", p.Pid)
	}
	return nil
}

// Patched reports whether pid's vDSO jumps to the fake now.
func Patched(pid int) (bool, error) {
	_, patched, err := Plan(pid)
	return patched, err
}

// tracee is a process whose threads are all stopped under ptrace.
type tracee struct {
	pid  int
	tids []int
	// sig is a signal a thread stopped with, to give back at detach.
	sig map[int]int
}

// withStopped stops every thread of pid, waits until none executes inside
// busy, runs fn and detaches. ptrace requests must come from the thread
// that attached, so all of it runs on one locked OS thread.
func withStopped(pid int, start uint64, busy [][2]uint64, fn func(t *tracee) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: a thread that was a tracer is
		// discarded with its goroutine rather than reused.
		done <- stopped(pid, start, busy, fn)
	}()
	return <-done
}

func stopped(pid int, start uint64, busy [][2]uint64, fn func(t *tracee) error) error {
	for try := 0; ; try++ {
		t, err := attach(pid)
		if err != nil {
			t.detach()
			return err
		}
		if st, err := proc.StartTime(pid); err != nil || st != start {
			t.detach()
			return fmt.Errorf("pid %d has exited", pid)
		}
		inside, err := t.inside(busy)
		if err != nil {
			t.detach()
			return err
		}
		if inside && try < 200 {
			// A thread is running the code about to change: let it
			// leave it.
			t.detach()
			time.Sleep(time.Millisecond)
			continue
		}
		if inside {
			t.detach()
			return errors.New("a thread stayed inside the vDSO's clock functions")
		}
		err = fn(t)
		return errors.Join(err, t.detach())
	}
}

// attach seizes and stops every thread of pid, again until no new thread
// appears (a thread not yet stopped may start another).
func attach(pid int) (*tracee, error) {
	t := &tracee{pid: pid, sig: map[int]int{}}
	seen := map[int]bool{}
	for {
		tids, err := threads(pid)
		if err != nil {
			return t, err
		}
		fresh := 0
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			seen[tid] = true
			fresh++
			if err := unix.PtraceSeize(tid); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // exited meanwhile
				}
				return t, fmt.Errorf("ptrace seize of thread %d: %w", tid, err)
			}
			t.tids = append(t.tids, tid)
			if err := unix.PtraceInterrupt(tid); err != nil {
				return t, fmt.Errorf("ptrace interrupt of thread %d: %w", tid, err)
			}
			if err := t.wait(tid); err != nil {
				return t, err
			}
		}
		if fresh == 0 {
			return t, nil
		}
	}
}

// wait waits for tid to stop; a signal it stopped with is kept to be given
// back at detach. A thread that does not stop within stopWait (one in a
// frozen cgroup) fails the patch rather than hang the harness; the tracer
// thread then exits, which detaches it.
func (t *tracee) wait(tid int) error {
	deadline := time.Now().Add(stopWait)
	for {
		var ws unix.WaitStatus
		n, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for thread %d: %w", tid, err)
		}
		if n == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("thread %d did not stop within %s (is it frozen?)", tid, stopWait)
			}
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if ws.Exited() || ws.Signaled() {
			return fmt.Errorf("thread %d ended", tid)
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		if ws.TrapCause() == unix.PTRACE_EVENT_STOP || sig == unix.SIGTRAP {
			return nil
		}
		// A signal-delivery stop: the thread is stopped all the same.
		t.sig[tid] = int(sig)
		return nil
	}
}

// inside reports whether a thread's instruction pointer is in one of rs.
func (t *tracee) inside(rs [][2]uint64) (bool, error) {
	for _, tid := range t.tids {
		var r unix.PtraceRegs
		if err := unix.PtraceGetRegs(tid, &r); err != nil {
			return false, fmt.Errorf("registers of thread %d: %w", tid, err)
		}
		for _, x := range rs {
			if r.Rip >= x[0] && r.Rip < x[1] {
				return true, nil
			}
		}
	}
	return false, nil
}

// syscall makes the process's first thread run one system call, by
// writing a syscall instruction at at (code no thread is executing) and
// single-stepping over it; at's bytes and the thread's registers are put
// back. orig_rax -1 keeps the kernel from restarting a system call the
// thread was stopped in with our registers; the saved ones restart it.
func (t *tracee) syscall(at uint64, nr uintptr, a ...uint64) (uint64, error) {
	tid := t.pid
	var saved unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &saved); err != nil {
		return 0, err
	}
	old := make([]byte, 2)
	if err := readMem(t.pid, at, old); err != nil {
		return 0, err
	}
	if err := writeMem(t.pid, at, []byte{0x0f, 0x05}); err != nil {
		return 0, err
	}
	r := saved
	r.Rax, r.Orig_rax, r.Rip = uint64(nr), ^uint64(0), at
	r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9 = a[0], a[1], a[2], a[3], a[4], a[5]
	ret, err := func() (uint64, error) {
		if err := unix.PtraceSetRegs(tid, &r); err != nil {
			return 0, err
		}
		for range 10 {
			if err := unix.PtraceSingleStep(tid); err != nil {
				return 0, err
			}
			if err := t.wait(tid); err != nil {
				return 0, err
			}
			var got unix.PtraceRegs
			if err := unix.PtraceGetRegs(tid, &got); err != nil {
				return 0, err
			}
			if got.Rip == at+2 {
				if int64(got.Rax) < 0 && int64(got.Rax) > -4096 {
					return 0, unix.Errno(-int64(got.Rax))
				}
				return got.Rax, nil
			}
		}
		return 0, errors.New("the injected system call did not complete")
	}()
	return ret, errors.Join(err, writeMem(t.pid, at, old), unix.PtraceSetRegs(tid, &saved))
}

// detach lets every thread go, with the signal it stopped with.
func (t *tracee) detach() error {
	var errs []error
	for _, tid := range t.tids {
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(tid), 0, uintptr(t.sig[tid]), 0, 0)
		if e != 0 && e != unix.ESRCH {
			errs = append(errs, fmt.Errorf("detaching thread %d: %w", tid, e))
		}
	}
	t.tids = nil
	return errors.Join(errs...)
}

func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	// The leader first: it runs the injected system calls.
	for i, n := range tids {
		if n == pid {
			tids[0], tids[i] = tids[i], tids[0]
		}
	}
	return tids, nil
}

// vdsoRange is where pid's vDSO is mapped. A process midway through an
// exec has no vDSO yet (the kernel maps it after the program's segments,
// and a child's start returns before): it is read again once the exec is
// through.
func vdsoRange(pid int) (uint64, uint64, error) {
	lo, hi, err := readVDSORange(pid)
	if errors.Is(err, ErrNoVDSO) {
		proc.AfterExec(pid)
		lo, hi, err = readVDSORange(pid)
	}
	return lo, hi, err
}

func readVDSORange(pid int) (uint64, uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasSuffix(line, "[vdso]") {
			continue
		}
		span, _, _ := strings.Cut(line, " ")
		a, b, _ := strings.Cut(span, "-")
		lo, err1 := strconv.ParseUint(a, 16, 64)
		hi, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			return 0, 0, fmt.Errorf("unreadable maps line %q", line)
		}
		return lo, hi, nil
	}
	return 0, 0, ErrNoVDSO
}

// readMem and writeMem go through /proc/PID/mem, whose writes reach
// read-only mappings (a debugger's access), copying the page for the
// process alone.
func readMem(pid int, addr uint64, b []byte) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(b, int64(addr))
	return err
}

func writeMem(pid int, addr uint64, b []byte) error {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(b, int64(addr))
	return err
}
