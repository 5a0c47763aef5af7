package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// procStat is the part of /proc/PID/stat the harness needs. Everything here
// is read straight from procfs rather than by running ps(1), both to avoid a
// fork per query and because ps output is not a stable interface.
type procStat struct {
	pid   int
	state byte
	ppid  int
	pgrp  int
	sid   int
	// start is the start time in clock ticks after boot (field 22). Together
	// with pid it identifies a process across pid reuse.
	start uint64
}

func statPath(pid int) string    { return "/proc/" + strconv.Itoa(pid) + "/stat" }
func environPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/environ" }

// readStat reads and parses /proc/PID/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(statPath(pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(pid, b)
}

// parseStat parses the contents of /proc/PID/stat. The command name (field 2)
// is in parentheses and may itself contain spaces and ')', so the remaining
// fields are located from the LAST ')' rather than by naive splitting.
func parseStat(pid int, b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open || end+2 > len(b) {
		return procStat{}, fmt.Errorf("proc: malformed stat for pid %d", pid)
	}
	f := strings.Fields(string(b[end+2:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("proc: short stat for pid %d", pid)
	}
	st := procStat{pid: pid, state: f[0][0]}
	var err error
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("proc: stat ppid for pid %d: %w", pid, err)
	}
	if st.pgrp, err = strconv.Atoi(f[2]); err != nil {
		return procStat{}, fmt.Errorf("proc: stat pgrp for pid %d: %w", pid, err)
	}
	if st.sid, err = strconv.Atoi(f[3]); err != nil {
		return procStat{}, fmt.Errorf("proc: stat session for pid %d: %w", pid, err)
	}
	if st.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("proc: stat starttime for pid %d: %w", pid, err)
	}
	return st, nil
}

// isGone reports whether err means the process no longer exists. Reading a
// /proc entry of a process that dies mid-read yields ESRCH rather than ENOENT.
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// isDenied reports whether err is a permission error from procfs.
func isDenied(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// listProcs snapshots every process (thread-group leader) in /proc. Processes
// that vanish while the snapshot is taken are silently skipped: that race is
// inherent to procfs and every caller re-validates before acting.
func listProcs() (map[int]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	procs := make(map[int]procStat, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		procs[pid] = st
	}
	return procs, nil
}

// childrenIndex maps each ppid to its children in a snapshot.
func childrenIndex(procs map[int]procStat) map[int][]int {
	idx := make(map[int][]int, len(procs))
	for pid, st := range procs {
		idx[st.ppid] = append(idx[st.ppid], pid)
	}
	return idx
}

// descendants returns every process below root in the ppid tree (root
// excluded). A visited set guards against the cycles a torn snapshot can
// contain when pids are reused mid-scan.
func descendants(children map[int][]int, root int) []int {
	var out []int
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// hasEnvEntry reports whether /proc/PID/environ contains entry exactly, as a
// whole NUL-terminated "KEY=value" item (a prefix or substring match would let
// run "abc" claim the processes of run "abc2"). Zombies and kernel threads
// have an empty environ and therefore never match.
func hasEnvEntry(pid int, entry string) (bool, error) {
	b, err := os.ReadFile(environPath(pid))
	if err != nil {
		return false, err
	}
	return envContains(b, entry), nil
}

func envContains(environ []byte, entry string) bool {
	for len(environ) > 0 {
		item := environ
		if i := bytes.IndexByte(environ, 0); i >= 0 {
			item, environ = environ[:i], environ[i+1:]
		} else {
			environ = nil
		}
		if string(item) == entry {
			return true
		}
	}
	return false
}

// State returns the one-letter state from /proc/PID/stat: 'R' running,
// 'S' sleeping, 'D' disk sleep, 'T' stopped, 't' tracing stop, 'Z' zombie,
// 'X' dead, 'I' idle. Tests use it to observe faults from the outside.
func State(pid int) (byte, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("proc: invalid pid %d", pid)
	}
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return st.state, nil
}

// Alive reports whether pid exists and is not a zombie. A zombie has already
// finished executing; counting it as alive would make leak checks depend on
// how quickly somebody reaps it.
func Alive(pid int) bool {
	s, err := State(pid)
	return err == nil && s != 'Z' && s != 'X'
}

// FindByMarker returns, sorted, every live (non-zombie) process whose
// /proc/PID/environ contains the exact entry marker (e.g.
// "CHAOS_RUN_ID=20261130T111200Z-ab12"). The environment is inherited across
// fork, exec, setsid and reparenting, so this finds a run's leftovers even
// after they have escaped their process group and their parent has died. The
// calling process is never included, so a harness that itself carries the
// marker cannot find (and later signal) itself.
func FindByMarker(marker string) ([]int, error) {
	if err := validateMarker(marker); err != nil {
		return nil, err
	}
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for pid, st := range procs {
		if pid == self || st.state == 'Z' || st.state == 'X' {
			continue
		}
		ok, err := hasEnvEntry(pid, marker)
		if err != nil {
			// Gone, or unreadable (kernel threads, processes in other user
			// namespaces): either way nothing proves it carries the marker.
			if isGone(err) || isDenied(err) {
				continue
			}
			return nil, fmt.Errorf("proc: read environ of %d: %w", pid, err)
		}
		if ok {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out, nil
}

// validateMarker insists on a "KEY=value" entry: the marker is matched as a
// whole environment entry, and an empty key or value could match entries the
// harness never set.
func validateMarker(marker string) error {
	k, v, ok := strings.Cut(marker, "=")
	if !ok || k == "" || v == "" || strings.ContainsRune(marker, 0) {
		return fmt.Errorf("proc: marker %q must have the form KEY=value", marker)
	}
	return nil
}

// SignalExternal sends sig to pid with a plain kill(2). It exists for targets
// the harness did not start (a named daemon whose pid comes from a pid file),
// where no marker can be checked and the operator vouches for the pid. It
// refuses pid <= 1 and the harness itself: kill(0) and kill(-1) would signal
// whole groups or every process on the host, and a bad pid file must not be
// able to turn into that.
func SignalExternal(pid int, sig syscall.Signal) error {
	if pid <= 1 || pid == os.Getpid() {
		return fmt.Errorf("proc: refusing to signal pid %d", pid)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("proc: kill(%d, %v): %w", pid, sig, err)
	}
	return nil
}

// Descendants returns every live process below pid in the ppid tree, from
// one snapshot of /proc.
func Descendants(pid int) []int {
	procs, err := listProcs()
	if err != nil {
		return nil
	}
	var out []int
	for _, d := range descendants(childrenIndex(procs), pid) {
		if st := procs[d].state; st != 'Z' && st != 'X' {
			out = append(out, d)
		}
	}
	return out
}

// GroupMembers returns the live (not zombie) processes of the process group
// pgid, from one snapshot of /proc.
func GroupMembers(pgid int) []int {
	procs, err := listProcs()
	if err != nil {
		return nil
	}
	var out []int
	for pid, st := range procs {
		if st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}
