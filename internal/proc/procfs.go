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
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/procstatus"
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
	// flags is the kernel's PF_* word (field 9).
	flags uint64
	// envEnd is where the environment ends in the process's memory (field
	// 51, kernels 3.5 and later; 0 when not shown): 0 while an exec has
	// replaced the memory but not yet laid out the new environment.
	envEnd uint64
}

// pfKthread is the PF_KTHREAD bit of the stat flags: a kernel thread, which
// has no environment.
const pfKthread = 0x00200000

// pfExiting is the PF_EXITING bit: the process is exiting and has let go of
// its memory, environment included.
const pfExiting = 0x00000004

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
	st.flags, _ = strconv.ParseUint(f[6], 10, 64)
	if len(f) > 48 {
		st.envEnd, _ = strconv.ParseUint(f[48], 10, 64)
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
	names, err := procNames()
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

// procNames lists /proc: the pids, and other names.
func procNames() ([]string, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
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
// have an empty environ and therefore never match; a zombie leader whose
// other threads still run is read through one of those threads.
func hasEnvEntry(pid int, entry string) (bool, error) {
	b, err := readEnviron(pid)
	if err != nil {
		return false, err
	}
	return envContains(b, entry), nil
}

// readEnviron reads /proc/PID/environ. The environment belongs to the
// process's memory, which a leader that called pthread_exit no longer has,
// so for such a zombie leader it is read through a live thread instead.
func readEnviron(pid int) ([]byte, error) {
	b, err := os.ReadFile(environPath(pid))
	if len(b) == 0 && err == nil {
		b, err = environAfterExec(pid)
	}
	if len(b) > 0 || (err != nil && !isGone(err)) {
		return b, err
	}
	if tid := liveThread(pid); tid > 0 {
		if tb, terr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/environ"); terr == nil {
			return tb, nil
		}
	}
	return b, err
}

// midExecWait bounds how long readEnviron waits for an exec to lay out
// the new environment; it takes microseconds, milliseconds under load.
const midExecWait = 2 * time.Second

// midExec reports whether pid is a live user process whose memory has no
// environment yet: exec replaces the memory, renames the process, and only
// then copies the new environment in. Read in that window (measured: 40% of
// reads made as soon as the new name shows), a process of the instance
// would look unmarked and be spared by Kill.
func midExec(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.envEnd == 0 && st.flags&(pfKthread|pfExiting) == 0 && st.state != 'Z' && st.state != 'X'
}

// environAfterExec reads pid's environ again once no exec is midway (the
// one in progress at the first read may have ended before midExec looked),
// or once midExecWait has passed.
func environAfterExec(pid int) ([]byte, error) {
	AfterExec(pid)
	return os.ReadFile(environPath(pid))
}

// AfterExec waits until pid is not midway through an exec, or midExecWait
// has passed. What exec lays out in the new memory (the environment, the
// vDSO) is missing until then: a reader that finds it missing calls
// AfterExec and reads again.
func AfterExec(pid int) {
	deadline := time.Now().Add(midExecWait)
	for pause := 50 * time.Microsecond; midExec(pid) && time.Now().Before(deadline); pause = min(2*pause, 5*time.Millisecond) {
		time.Sleep(pause)
	}
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
	st, err := statOf(pid)
	return st.state, err
}

// StartTime returns pid's start time in clock ticks after boot (field 22
// of /proc/PID/stat): with the pid, it tells a process from a later one
// given the same pid.
func StartTime(pid int) (uint64, error) {
	st, err := statOf(pid)
	return st.start, err
}

// statOf is readStat of a pid given by a caller, which may be no pid.
func statOf(pid int) (procStat, error) {
	if pid <= 0 {
		return procStat{}, fmt.Errorf("proc: invalid pid %d", pid)
	}
	return readStat(pid)
}

// Parent returns the parent pid of pid, 0 when it cannot be read (the
// process is gone).
func Parent(pid int) int {
	if pid <= 0 {
		return 0
	}
	st, err := readStat(pid)
	if err != nil {
		return 0
	}
	return st.ppid
}

// Alive reports whether pid exists and has not finished: it is not a zombie,
// or it is a zombie thread-group leader (its main thread called
// pthread_exit) whose other threads still run. Such a process still holds
// its sockets, files and locks, so it must count as alive; an ordinary
// zombie does not, or leak checks would depend on how quickly somebody
// reaps it. Use WaitGone to wait until a process is also reaped.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := readStat(pid)
	return err == nil && isLive(st)
}

// isLive is Alive for a stat already read.
func isLive(st procStat) bool {
	switch st.state {
	case 'Z':
		return liveThread(st.pid) > 0
	case 'X':
		return false
	}
	return true
}

// Dying reports whether pid, though /proc still lists it, is on its way
// out: it is gone or a zombie already, it is exiting with no thread living
// on, or a signal that ends it is pending (the kernel marks every thread of
// a group sent a fatal signal with SIGKILL as it sends it, before the group
// has run to act on it). A script that kills its child and exits at once
// leaves that child listed for a moment (half of 300 tries here): dying,
// not left behind.
func Dying(pid int) bool {
	st, err := readStat(pid)
	if err != nil {
		return isGone(err)
	}
	if !isLive(st) || (st.flags&pfExiting != 0 && liveThread(pid) == 0) {
		return true
	}
	status, err := procstatus.Read(pid, signalFields...)
	if err != nil {
		return isGone(err)
	}
	return fatalPending(status)
}

// leftAgain is how long Left waits before it looks again at processes
// that seemed to live on.
const leftAgain = 50 * time.Millisecond

// Left returns those of pids that live on: not Dying, at a first look nor
// at a second one leftAgain later. One look can miss a dying process: the
// kernel takes the pending SIGKILL off a thread as it starts to act on it,
// before it marks the thread exiting, and a thread preempted in between
// reads as live with nothing pending (CI: TestKilledChildIsDyingNotLeft,
// once in 200 tries).
func Left(pids []int) []int {
	left := slices.DeleteFunc(slices.Clone(pids), Dying)
	if len(left) == 0 {
		return left
	}
	time.Sleep(leftAgain)
	return slices.DeleteFunc(left, Dying)
}

// signalFields are the masks of /proc/PID/status fatalPending reads.
var signalFields = []string{"SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"}

// fatalPending reports, from /proc/PID/status, whether a signal pending for
// the process (for its leader thread or its whole group) ends it: SIGKILL,
// or one whose default action ends a process, neither blocked, ignored nor
// caught.
func fatalPending(st procstatus.Status) bool {
	// A mask that is missing or not hex counts as empty.
	pnd, _ := st.Hex("SigPnd")
	shd, _ := st.Hex("ShdPnd")
	blk, _ := st.Hex("SigBlk")
	ign, _ := st.Hex("SigIgn")
	cgt, _ := st.Hex("SigCgt")
	pending := pnd | shd
	if pending&sigBit(syscall.SIGKILL) != 0 {
		return true
	}
	return pending&^(blk|ign|cgt)&terminating != 0
}

func sigBit(sig syscall.Signal) uint64 { return 1 << (uint(sig) - 1) }

// terminating is the set of signals whose default action ends the process
// (signal(7)): all but those that stop, continue, or are ignored by default.
var terminating = ^(sigBit(syscall.SIGCHLD) | sigBit(syscall.SIGCONT) | sigBit(syscall.SIGSTOP) |
	sigBit(syscall.SIGTSTP) | sigBit(syscall.SIGTTIN) | sigBit(syscall.SIGTTOU) |
	sigBit(syscall.SIGURG) | sigBit(syscall.SIGWINCH))

// liveThread returns a thread of pid other than the leader that has not
// exited, or 0. Threads other than the leader never linger as zombies, so
// any of them listed in /proc/PID/task and not in state Z or X runs.
func liveThread(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if st, err := parseStat(tid, b); err == nil && st.state != 'Z' && st.state != 'X' {
			return tid
		}
	}
	return 0
}

// FindByMarker returns, sorted, every live (see Alive) process whose
// /proc/PID/environ contains the exact entry marker (e.g.
// "CHAOS_RUN_ID=20261130T111200Z-ab12"). The environment is inherited across
// fork, exec, setsid and reparenting, so this finds a run's leftovers even
// after they have escaped their process group and their parent has died. The
// calling process is never included, so a harness that itself carries the
// marker cannot find (and later signal) itself.
func FindByMarker(marker string) ([]int, error) { return findByMarker(marker, 0, pidCursor{}) }

// findByMarker is FindByMarker among the processes that started no earlier
// than since (clock ticks after boot). A process older than the run cannot
// have been given its marker, which did not exist yet (exec keeps a
// process's start time, but only the run's own processes know the marker to
// exec with), so a harness looking for its own run's processes reads the
// environment of the few started since it began, not of every process on
// the machine.
//
// With a cursor read before any such process started (ok), it also skips,
// without reading them, the pids the allocator cannot have given out since.
func findByMarker(marker string, since uint64, then pidCursor) ([]int, error) {
	if err := validateMarker(marker); err != nil {
		return nil, err
	}
	names, err := procNames()
	if err != nil {
		return nil, err
	}
	// Read after the listing, the cursor bounds every pid in it.
	var in func(int) bool
	bounded := false
	if then.ok {
		in, bounded = readPidCursor().since(then)
	}
	self := os.Getpid()
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 || pid == self || bounded && !in(pid) {
			continue
		}
		st, err := readStat(pid)
		if err != nil || !isLive(st) || st.start < since {
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

// Descendants returns every live process (see Alive) below pid in the ppid
// tree.
func Descendants(pid int) []int {
	var out []int
	for _, st := range subtree(pid) {
		if isLive(st) {
			out = append(out, st.pid)
		}
	}
	return out
}

// GroupMembers returns the live processes (see Alive: a zombie leader whose
// threads still run counts) of the process group pgid, from one snapshot of
// /proc.
func GroupMembers(pgid int) []int {
	procs, err := listProcs()
	if err != nil {
		return nil
	}
	var out []int
	for pid, st := range procs {
		if st.pgrp == pgid && isLive(st) {
			out = append(out, pid)
		}
	}
	return out
}

// childrenFiles reports whether /proc/PID/task/TID/children exists
// (CONFIG_PROC_CHILDREN); without it the tree is found by a full scan.
var childrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
	return err == nil
})

// childrenOf returns the direct children of pid, from the children files of
// its threads (a child belongs to the thread that forked it, or to whichever
// thread the kernel picked when it reparented an orphan). That costs one
// read per thread instead of one per process on the machine.
func childrenOf(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/children")
		if err != nil {
			continue // thread exited meanwhile
		}
		for f := range strings.FieldsSeq(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// childStats returns the stat of each direct child of pid.
func childStats(pid int) ([]procStat, error) {
	if !childrenFiles() {
		procs, err := listProcs()
		if err != nil {
			return nil, err
		}
		var out []procStat
		for _, st := range procs {
			if st.ppid == pid {
				out = append(out, st)
			}
		}
		return out, nil
	}
	kids, err := childrenOf(pid)
	if err != nil {
		return nil, err
	}
	out := make([]procStat, 0, len(kids))
	for _, c := range kids {
		if st, err := readStat(c); err == nil && st.ppid == pid {
			out = append(out, st)
		}
	}
	return out, nil
}

// subtree returns the stat of every process below root in the ppid tree
// (root excluded), walking down from root: its cost grows with the size of
// the subtree, not with the number of processes on the machine. A visited
// set guards against cycles when pids are reused mid-walk.
func subtree(root int) []procStat {
	if !childrenFiles() {
		procs, err := listProcs()
		if err != nil {
			return nil
		}
		var out []procStat
		for _, pid := range descendants(childrenIndex(procs), root) {
			out = append(out, procs[pid])
		}
		return out
	}
	var out []procStat
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		kids, err := childrenOf(pid)
		if err != nil {
			continue
		}
		for _, c := range kids {
			if seen[c] {
				continue
			}
			seen[c] = true
			st, err := readStat(c)
			if err != nil || st.ppid != pid {
				continue
			}
			out = append(out, st)
			queue = append(queue, c)
		}
	}
	return out
}

// selfStart is this process's start time in clock ticks after boot, or 0
// (no process excluded) when it cannot be read.
var selfStart = sync.OnceValue(func() uint64 {
	start, _ := StartTime(os.Getpid())
	return start
})
