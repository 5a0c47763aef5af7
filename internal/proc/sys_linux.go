//go:build linux

package proc

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setChildSubreaper marks this process as a child subreaper, so orphaned
// descendants are reparented to the harness (where the reaper collects them
// and Signal can still find them) instead of to PID 1, which on these
// machines never reaps. The flag is per process and setting it twice is
// harmless, which is what makes NewSupervisor safe to call repeatedly.
func setChildSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// isChildSubreaper reports the PR_GET_CHILD_SUBREAPER flag.
func isChildSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, err
	}
	return v != 0, nil
}

// si_code values of a SIGCHLD siginfo for a terminated child (<signal.h>).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// The kernel's siginfo_t is 128 bytes on every Linux port; unix.Siginfo
// mirrors that size but keeps the SIGCHLD fields opaque.
var (
	_ [128 - unsafe.Sizeof(unix.Siginfo{})]byte
	_ [unsafe.Sizeof(unix.Siginfo{}) - 128]byte
)

// childWaitStatus decodes the SIGCHLD part of a siginfo filled in by
// waitid(2). The union of siginfo_t follows si_signo, si_errno and si_code
// (their order differs on MIPS, which unix.Siginfo accounts for) at the
// next pointer-aligned offset, and starts with {si_pid, si_uid, si_status}.
func childWaitStatus(si *unix.Siginfo) syscall.WaitStatus {
	off := 3 * unsafe.Sizeof(int32(0))
	if a := unsafe.Alignof(uintptr(0)); off%a != 0 {
		off += a - off%a
	}
	status := *(*int32)(unsafe.Add(unsafe.Pointer(si), off+2*unsafe.Sizeof(int32(0))))
	switch si.Code {
	case cldExited:
		return syscall.WaitStatus(status << 8)
	case cldKilled:
		return syscall.WaitStatus(status)
	case cldDumped:
		return syscall.WaitStatus(status) | 0x80
	}
	return 0
}

// waitExitNoReap blocks until the child pid has terminated and returns its
// status WITHOUT reaping it (WNOWAIT). Leaving the zombie in place is the
// point: while it exists its pid, and therefore its process-group id, cannot
// be recycled, so Signal may still use kill(-pgid) safely until the
// Process has recorded that its leader is gone.
func waitExitNoReap(pid int) (syscall.WaitStatus, error) {
	var si unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &si, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return childWaitStatus(&si), nil
	}
}

// waitExitPolled is waitExitNoReap without a blocked thread: it waits for
// the child's pidfd to become readable (the child exited) in the Go
// runtime's poller, then collects the status with waitid(P_PIDFD, WNOWAIT).
// A harness with a thousand instances would otherwise hold a thousand OS
// threads in waitid, and every walk of /proc/self/task would grow with
// them. It falls back to waitExitNoReap where pidfds are not available or
// cannot be polled.
func waitExitPolled(pid int) (syscall.WaitStatus, error) {
	if noPidfd.Load() {
		return waitExitNoReap(pid)
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return waitExitNoReap(pid)
	}
	ownPidfds.Lock()
	ownPidfds.m[fd] = struct{}{}
	ownPidfds.Unlock()
	f := os.NewFile(uintptr(fd), "pidfd")
	defer func() {
		ownPidfds.Lock()
		delete(ownPidfds.m, fd)
		ownPidfds.Unlock()
		f.Close()
	}()
	rc, err := f.SyscallConn()
	if err != nil {
		return waitExitNoReap(pid)
	}
	var si unix.Siginfo
	var werr error
	got := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			si = unix.Siginfo{}
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &si, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			if werr == unix.EINTR {
				continue
			}
			break
		}
		if werr == unix.EAGAIN || (werr == nil && si.Signo == 0) {
			return false // not exited yet: wait for the pidfd to be readable
		}
		got = true
		return true
	})
	if err != nil || !got {
		// Not pollable after all (the poller refused the fd): block.
		return waitExitNoReap(pid)
	}
	if werr != nil {
		return 0, werr
	}
	return childWaitStatus(&si), nil
}

// pidfdSendSignal signals exactly the process the pidfd was opened for, or
// fails with ESRCH if that process is gone, even if its pid was reused.
func pidfdSendSignal(fd int, sig syscall.Signal) error {
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}
