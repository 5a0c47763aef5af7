package proc

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/ctxfd"
)

// ownPidfds holds the pidfds this package has open. The reaper treats any
// other pidfd in the process as a sign that somebody (an os/exec Cmd, whose
// os.Process holds a pidfd until Wait) may still collect that child's exit
// status, so it must not reap it; its own pidfds (Signal's, WaitGone's) mean
// no such thing.
var ownPidfds = struct {
	sync.Mutex
	m map[int]struct{}
}{m: map[int]struct{}{}}

// noPidfd forces the /proc fallbacks, as on kernels without pidfds (tests).
var noPidfd atomic.Bool

// openPidfd returns a pidfd for pid, registered as the package's own. The
// kernel always sets close-on-exec on pidfds, so a concurrent fork/exec
// elsewhere in the harness cannot leak it.
func openPidfd(pid int) (int, error) {
	if noPidfd.Load() {
		return -1, unix.ENOSYS
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, err
	}
	ownPidfds.Lock()
	ownPidfds.m[fd] = struct{}{}
	ownPidfds.Unlock()
	return fd, nil
}

// closePidfd unregisters fd before closing it, so the number, once reused
// by someone else, is never mistaken for ours.
func closePidfd(fd int) {
	ownPidfds.Lock()
	delete(ownPidfds.m, fd)
	ownPidfds.Unlock()
	unix.Close(fd)
}

// foreignPidfds returns the pids that pidfds in this process refer to,
// leaving out the package's own. fdinfo of a pidfd has a "Pid:" line.
func foreignPidfds() map[int]bool {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	out := map[int]bool{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || !strings.Contains(l, "pidfd") {
			continue
		}
		ownPidfds.Lock()
		_, own := ownPidfds.m[fd]
		ownPidfds.Unlock()
		if own {
			continue
		}
		if pid := pidfdPid(fd); pid > 0 {
			out[pid] = true
		}
	}
	return out
}

// heldSnapshot is what foreignPidfds found at one moment, by process (pid
// and start time, so a pid reused since is not taken for the one held).
type heldSnapshot struct {
	// tick is the boot-time clock tick at which the scan began.
	tick uint64
	held map[zkey]bool
}

var held struct {
	sync.Mutex
	snap *heldSnapshot
}

// heldElsewhere reports whether a pidfd elsewhere in the process refers
// to z: a child some other code started and may still Wait for. One scan
// of the process's files answers for every process that started before it
// began, since os/exec opens a child's pidfd in the clone that makes it
// (and this binary opens no other pidfds of others' children): a child
// started before the scan and still unreaped is in it. Only a process that
// started later needs a new scan, so reaping N orphans costs a few scans,
// not N (a scan reads every open file: thousands during a fault on
// thousands of instances).
func heldElsewhere(z zkey) bool {
	held.Lock()
	defer held.Unlock()
	if held.snap == nil || z.start+1 >= held.snap.tick {
		held.snap = scanHeld()
	}
	return held.snap.held[z]
}

// rescanHeld takes a new snapshot for heldElsewhere.
func rescanHeld() {
	held.Lock()
	defer held.Unlock()
	held.snap = scanHeld()
}

// scanHeld takes a new heldSnapshot.
func scanHeld() *heldSnapshot {
	s := &heldSnapshot{tick: bootTick(), held: map[zkey]bool{}}
	for pid := range foreignPidfds() {
		if st, err := readStat(pid); err == nil {
			s.held[zkey{pid, st.start}] = true
		}
	}
	return s
}

// userHZ is the unit of start times in /proc/PID/stat: USER_HZ, 100 on
// every Linux.
const userHZ = 100

// bootTick is the time since boot in the unit of start times, rounded down.
func bootTick() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0 // no snapshot is ever trusted
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}

// pidfdPid reads the pid a pidfd of ours refers to (0 when unknown).
func pidfdPid(fd int) int {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			return pid
		}
	}
	return 0
}

// WaitGone waits, bounded by ctx, until the process pid is truly gone: every
// thread of it has exited AND it has been reaped, so no zombie holds the pid
// (kill(pid, 0) fails, a pid file naming it is stale, and its pid cannot be
// confused with a live process). It never returns nil while /proc/PID still
// belongs to that process.
//
// With pidfds it sleeps in poll(2): a pidfd becomes readable only when the
// whole thread group has exited (a zombie leader whose other threads still
// run does not count), then hangs up when the process is reaped. If the
// process is the harness's own child that nobody waits for (an orphan the
// harness adopted as subreaper), WaitGone reaps it at once rather than
// waiting for the reaper's next sweep. Without pidfds it polls /proc.
//
// A pid that does not exist is gone. WaitGone identifies the process by pid
// and start time when it is called: pass a pid that is, or was very
// recently, the process you mean.
func WaitGone(ctx context.Context, pid int) error {
	if pid <= 0 {
		return fmt.Errorf("waiting for pid %d to be gone: invalid pid", pid)
	}
	st, err := readStat(pid)
	if err != nil {
		if isGone(err) {
			return nil
		}
		return fmt.Errorf("waiting for pid %d to be gone: %w", pid, err)
	}
	return waitGone(ctx, zkey{pid, st.start})
}

// waitGone is WaitGone of the process z names: a pid found in a listing
// may have been reaped and given to a new process since, which must not be
// waited for (with a pid_max of 32768 and thousands of instances, it is).
func waitGone(ctx context.Context, z zkey) error {
	pid := z.pid
	fd, err := openPidfd(pid)
	if err != nil {
		// ESRCH: reaped since the stat; EINVAL: pid is a thread, not a
		// process; ENOSYS and friends: no pidfds here.
		return waitGoneProc(ctx, z)
	}
	defer closePidfd(fd)
	if gone(z) {
		return nil // the pidfd may be of a newer process with this pid
	}
	theReaper.doom(z)
	defer theReaper.undoom(z)
	// 1. Every thread has exited: the pidfd is readable.
	if _, err := waitFD(ctx, fd, unix.POLLIN, -1); err != nil {
		return fmt.Errorf("waiting for pid %d to exit: %w", pid, err)
	}
	// 2. It has been reaped. Kernels since 6.9 hang the pidfd up at that
	// moment; the growing timeout covers older ones and parents that are
	// not us.
	delay := time.Millisecond
	for {
		theReaper.reapOrphan(z)
		if gone(z) {
			return nil
		}
		if _, err := waitFD(ctx, fd, unix.POLLHUP, delay); err != nil {
			return fmt.Errorf("waiting for pid %d to be reaped: %w", pid, err)
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// waitGoneProc is WaitGone without a pidfd: it polls /proc.
func waitGoneProc(ctx context.Context, z zkey) error {
	delay := time.Millisecond
	for {
		if gone(z) {
			return nil
		}
		theReaper.reapOrphan(z)
		if gone(z) {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for pid %d to be gone: %w", z.pid, ctx.Err())
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// gone reports whether the process z no longer exists, not even as a
// zombie: /proc/PID is missing or belongs to a newer process.
func gone(z zkey) bool {
	st, err := readStat(z.pid)
	if err != nil {
		return isGone(err)
	}
	return st.start != z.start
}

// waitFD waits, bounded by ctx and by timeout (negative: none), until fd
// reports one of events (POLLHUP and POLLERR are always reported), and
// returns the events seen (0 on timeout).
func waitFD(ctx context.Context, fd int, events int16, timeout time.Duration) (int16, error) {
	wake, stop, err := ctxfd.Waker(ctx)
	if err != nil {
		return 0, err
	}
	defer stop()
	ms := -1
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if timeout >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return 0, nil
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}, {Fd: int32(wake), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("polling: %w", err)
		}
		if n > 0 && fds[0].Revents != 0 {
			return fds[0].Revents, nil
		}
	}
}
