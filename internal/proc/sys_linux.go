//go:build linux && (amd64 || arm64 || 386 || arm || riscv64 || ppc64 || ppc64le || s390x || loong64)

// The architecture list is deliberate: the raw syscall numbers and the
// siginfo layout below are the ones shared by these ports. MIPS numbers its
// syscalls differently and swaps two siginfo fields, so building there fails
// loudly instead of issuing the wrong system call from fleet-safety code.

package proc

import (
	"syscall"
	"unsafe"
)

const (
	prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER
	prGetChildSubreaper = 37 // PR_GET_CHILD_SUBREAPER

	pPID = 1 // P_PID for waitid(2)

	sysPidfdSendSignal = 424 // pidfd_send_signal(2), Linux 5.1
	sysPidfdOpen       = 434 // pidfd_open(2), Linux 5.3
)

// setChildSubreaper marks this process as a child subreaper, so orphaned
// descendants are reparented to the harness (where the reaper collects them
// and Signal can still find them) instead of to PID 1, which on these
// machines never reaps. The flag is per process and setting it twice is
// harmless, which is what makes NewSupervisor safe to call repeatedly.
func setChildSubreaper() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	return nil
}

// isChildSubreaper reports the PR_GET_CHILD_SUBREAPER flag.
func isChildSubreaper() (bool, error) {
	var v int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prGetChildSubreaper, uintptr(unsafe.Pointer(&v)), 0); e != 0 {
		return false, e
	}
	return v != 0, nil
}

const is64bit = ^uint(0) >> 63 // 1 on 64-bit hosts, 0 otherwise

// siginfoChild is the SIGCHLD view of the kernel's siginfo_t as filled in by
// waitid(2); it mirrors Go's internal/syscall/unix.SiginfoChild.
type siginfoChild struct {
	Signo  int32
	Errno  int32
	Code   int32
	_      [is64bit]int32
	Pid    int32
	UID    uint32
	Status int32
	_      [128 - (6+is64bit)*4]byte
}

// Values of siginfoChild.Code for a terminated child.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

func (si *siginfoChild) waitStatus() syscall.WaitStatus {
	switch si.Code {
	case cldExited:
		return syscall.WaitStatus(si.Status << 8)
	case cldKilled:
		return syscall.WaitStatus(si.Status)
	case cldDumped:
		return syscall.WaitStatus(si.Status) | 0x80
	}
	return 0
}

// waitExitNoReap blocks until the child pid has terminated and returns its
// status WITHOUT reaping it (WNOWAIT). Leaving the zombie in place is the
// point: while it exists its pid, and therefore its process-group id, cannot
// be recycled, so Signal may still use kill(-pgid) safely until the
// Process has recorded that its leader is gone.
func waitExitNoReap(pid int) (syscall.WaitStatus, error) {
	var si siginfoChild
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&si)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return si.waitStatus(), nil
	}
}

// pidfdOpen returns a pidfd for pid. The kernel always sets close-on-exec on
// pidfds, so a concurrent fork/exec elsewhere in the harness cannot leak it.
func pidfdOpen(pid int) (int, error) {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// pidfdSendSignal signals exactly the process the pidfd was opened for, or
// fails with ESRCH if that process is gone, even if its pid was reused.
func pidfdSendSignal(fd int, sig syscall.Signal) error {
	_, _, e := syscall.Syscall6(sysPidfdSendSignal, uintptr(fd), uintptr(sig), 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
