package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// pidCursor is where the kernel's pid allocator stood at one moment: the
// last pid it gave out in this pid namespace, the forks since boot, the
// threads alive and pid_max. Two cursors bound the pids a process started
// between them can have, so a scan for a run's own processes reads the stat
// of those few instead of every process on the machine.
type pidCursor struct {
	ok      bool
	last    int
	forks   uint64
	threads int
	max     int
}

// reservedPids is where the allocator starts again after pid_max
// (RESERVED_PIDS in the kernel).
const reservedPids = 300

// readPidCursor reads the cursor; ok is false when any part cannot be read
// (an older kernel, a /proc without sysctls), and then nothing is bounded.
func readPidCursor() pidCursor {
	var c pidCursor
	last, err1 := ReadInt("/proc/sys/kernel/ns_last_pid")
	max, err2 := ReadInt("/proc/sys/kernel/pid_max")
	forks, ok1 := statField("/proc/stat", "processes ")
	threads, err3 := SystemTasks()
	if err1 != nil || err2 != nil || !ok1 || err3 != nil || max <= reservedPids {
		return c
	}
	return pidCursor{ok: true, last: int(last), forks: forks, threads: int(threads), max: int(max)}
}

// since returns whether a pid can have been given to a process started
// between then and c, and false for ok when that cannot be bounded. The
// allocator hands out pids upward from then.last, skipping those in use and
// wrapping after pid_max, so the new pids lie between then.last and c.last
// unless it went all the way round: each pid it moved past was either given
// out (a fork, counted) or in use, by a thread alive at then (counted) or
// one forked since (counted again), so it went round only if twice the
// forks plus then's threads reach the cycle.
func (c pidCursor) since(then pidCursor) (in func(pid int) bool, ok bool) {
	if !c.ok || !then.ok || c.max != then.max || c.forks < then.forks {
		return nil, false
	}
	if 2*(c.forks-then.forks)+uint64(then.threads)+cursorSlack >= uint64(c.max-reservedPids) {
		return nil, false
	}
	lo, hi := then.last, c.last
	switch {
	case lo == hi:
		return func(int) bool { return false }, true
	case lo < hi:
		return func(pid int) bool { return pid > lo && pid <= hi }, true
	}
	return func(pid int) bool { return pid > lo || pid <= hi }, true
}

// cursorSlack covers the forks between the reads of one cursor's files.
const cursorSlack = 1024

// ReadInt reads a file holding one number (a sysctl, a cgroup's
// pids.max); "max" is an error (no limit).
func ReadInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
}

// statField reads the number after prefix at the start of a line of path.
func statField(path, prefix string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// SystemTasks is the number of tasks (threads) alive on the machine: the
// number after the slash in /proc/loadavg's fourth field.
func SystemTasks() (int64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0, fmt.Errorf("proc: /proc/loadavg has no task counts: %q", b)
	}
	_, total, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0, fmt.Errorf("proc: /proc/loadavg has no task counts: %q", b)
	}
	return strconv.ParseInt(string(total), 10, 64)
}
