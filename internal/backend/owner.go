package backend

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"github.com/chaos-harness/chaos/internal/proc"
)

// Owner identifies the harness process that made something on a system
// (a container, a pod), so chaos cleanup can tell what a dead run left from
// what a live run owns, even when pids are reused.
type Owner struct {
	Pid int
	// PidStart is the process's start time in clock ticks since boot.
	PidStart string
	// PidNS and Host say where Pid means something.
	PidNS, Host string
}

// CurrentOwner is this harness process.
func CurrentOwner() Owner {
	o := Owner{Pid: os.Getpid(), PidStart: pidStart(os.Getpid()), PidNS: pidNS()}
	o.Host, _ = os.Hostname()
	return o
}

// Alive says whether the owner still runs; known is false when this
// machine cannot tell (another host or pid namespace, or no pid), and what
// it made must then be left alone.
func (o Owner) Alive() (alive, known bool) {
	if h, err := os.Hostname(); err != nil || o.Host != h {
		return false, false
	}
	if o.PidNS == "" || o.PidNS != pidNS() {
		return false, false
	}
	if o.Pid <= 0 {
		return false, false
	}
	st := pidStart(o.Pid)
	if st == "" {
		if err := syscall.Kill(o.Pid, 0); err != nil && errors.Is(err, syscall.ESRCH) {
			return false, true
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(o.Pid)); err != nil {
			return false, true
		}
		return true, true
	}
	if o.PidStart != "" && o.PidStart != st {
		return false, true // the pid was reused
	}
	return true, true
}

// pidStart is the process's start time in clock ticks since boot, which
// tells a live harness from a reused pid; "" when it cannot be read.
func pidStart(pid int) string {
	start, err := proc.StartTime(pid)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(start, 10)
}

func pidNS() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}
