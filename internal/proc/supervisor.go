// Package proc runs and faults the harness's workload processes with provable
// hygiene.
//
// Guarantees, and why each matters to a chaos harness:
//
//   - Every instance runs in its own process group, so one kill(-pgid) stops
//     or kills the whole instance atomically, including children forked while
//     the signal is being delivered.
//   - The harness is a child subreaper (PR_SET_CHILD_SUBREAPER). Descendants
//     whose parent dies (double forks, daemons, killed shells) are reparented
//     to the harness instead of PID 1, so they stay visible in our /proc
//     subtree and, because PID 1 on these machines does not reap, a single
//     reaper goroutine collects their zombies.
//   - Fleet safety: apart from an instance's own process group while its
//     leader is unreaped, a process is only ever signalled if its
//     /proc/PID/environ carries the run's marker entry, and the check and the
//     signal go through one pidfd so a recycled pid can never receive it.
//     Processes the harness did not start are only signalled through the
//     explicit SignalExternal.
//   - Exit statuses are never lost: children started by Start are registered
//     under the same mutex the reaper holds while reaping, so the reaper
//     never consumes a status that belongs to a Process.
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// InstanceEnv is the environment variable Start adds, next to the run marker,
// to tag every process of one instance. It is how Signal still finds a
// descendant that left the instance's process group (setsid) after the
// process that forked it died and it was reparented to the harness, at which
// point the ppid tree below the instance no longer leads to it.
const InstanceEnv = "CHAOS_PROC_INSTANCE"

// maxSignalPasses bounds Signal's rescans. Each pass picks up descendants
// forked or reparented since the previous one; a workload that forks faster
// than we can signal would otherwise keep Signal looping forever.
const maxSignalPasses = 8

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("proc: supervisor closed")

var instanceSeq atomic.Uint64

// Supervisor owns every child process the harness starts. Several
// Supervisors may coexist in one process (for example in tests); they share
// the single process-wide orphan reaper.
type Supervisor struct {
	marker string

	mu        sync.RWMutex
	closed    bool
	closeOnce sync.Once
}

// NewSupervisor returns a Supervisor whose children all carry marker (a
// "KEY=value" environment entry unique to this run, e.g.
// "CHAOS_RUN_ID=20261130T111200Z-ab12"). It makes the harness a child
// subreaper and starts the orphan reaper if it is not already running; both
// are idempotent, so it may be called more than once.
func NewSupervisor(marker string) (*Supervisor, error) {
	if err := validateMarker(marker); err != nil {
		return nil, err
	}
	if err := setChildSubreaper(); err != nil {
		return nil, fmt.Errorf("proc: prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	theReaper.acquire()
	return &Supervisor{marker: marker}, nil
}

// Marker returns the environment entry every child of s carries.
func (s *Supervisor) Marker() string { return s.marker }

// Close stops the orphan reaper once no other Supervisor uses it. It does not
// touch running processes: stop them first, otherwise their orphans will not
// be reaped until another Supervisor is created. Close is idempotent.
func (s *Supervisor) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		theReaper.release()
	})
	return nil
}

// Start starts cmd as a new instance: in its own process group, with the run
// marker and a per-instance InstanceEnv tag appended to its environment
// (os.Environ() if cmd.Env is nil; appended entries win over duplicates), and
// registered so that the orphan reaper never steals its exit status.
//
// After Start the Supervisor owns cmd: do not call cmd.Wait or read
// cmd.ProcessState; use Done and ExitStatus. If cmd has stdout/stderr
// writers that are not *os.File, the copying goroutines are released when the
// last descendant holding the pipes exits, independently of Done.
func (s *Supervisor) Start(cmd *exec.Cmd) (*Process, error) {
	if cmd == nil || cmd.Process != nil {
		return nil, errors.New("proc: Start needs an unstarted *exec.Cmd")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}

	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr // copy: never mutate the caller's struct
	}
	switch {
	case attr.Setsid:
		// A new session is also a new process group led by the child.
	case attr.Setpgid && attr.Pgid != 0:
		return nil, fmt.Errorf("proc: Start refuses to join existing process group %d", attr.Pgid)
	default:
		attr.Setpgid, attr.Pgid = true, 0
	}
	cmd.SysProcAttr = &attr

	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	tag := InstanceEnv + "=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(instanceSeq.Add(1), 10)
	cmd.Env = append(slices.Clip(env), s.marker, tag)

	start, err := theReaper.start(cmd)
	if err != nil {
		return nil, err
	}
	p := &Process{
		Pid:     cmd.Process.Pid,
		Started: time.Now(),
		sup:     s,
		cmd:     cmd,
		tag:     tag,
		start:   start,
		done:    make(chan struct{}),
		waited:  make(chan struct{}),
	}
	go p.wait()
	return p, nil
}

// Process is one instance started by a Supervisor. Pid is also the id of the
// instance's process group.
type Process struct {
	Pid     int
	Started time.Time

	sup   *Supervisor
	cmd   *exec.Cmd
	tag   string // InstanceEnv entry of this instance
	start uint64 // start time of Pid, for registration bookkeeping
	done  chan struct{}
	// waited is closed once cmd.Wait has returned: the zombie is reaped and
	// everything the process wrote to non-file writers has been copied.
	waited chan struct{}

	// mu guards the fields below. Signal holds it for reading while it
	// sends kill(-pgid): the wait goroutine must take it for writing to set
	// exited before the leader is reaped, so the group id cannot be
	// recycled under Signal's feet.
	mu       sync.RWMutex
	exited   bool
	exitedAt time.Time
	status   syscall.WaitStatus
	waitErr  error
}

// wait is the event-driven exit watcher: it blocks in waitid, which returns
// the instant the leader terminates, rather than polling.
func (p *Process) wait() {
	ws, err := waitExitNoReap(p.Pid)
	now := time.Now()
	p.mu.Lock()
	p.exited, p.exitedAt, p.status, p.waitErr = true, now, ws, err
	p.mu.Unlock()
	close(p.done)
	// Reap the zombie and release the exec.Cmd's pipes. This may block until
	// descendants that inherited non-*os.File stdout/stderr close them, which
	// is why Done does not wait for it.
	_ = p.cmd.Wait()
	theReaper.unregister(p.Pid, p.start)
	close(p.waited)
}

// Waited returns a channel closed once the process is reaped and its output
// fully copied to the exec.Cmd's writers. It can lag Done while descendants
// still hold the output open.
func (p *Process) Waited() <-chan struct{} { return p.waited }

// Done returns a channel that is closed the moment the leader process exits.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitStatus returns how the leader ended: its exit code, or signaled=true and
// the signal (code is then -1, as with os.ProcessState.ExitCode). It is valid
// after Done; before that, or if the status could not be collected, it
// returns code -1 and signaled=false.
func (p *Process) ExitStatus() (code int, signaled bool, sig syscall.Signal) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.exited || p.waitErr != nil {
		return -1, false, 0
	}
	if p.status.Signaled() {
		return -1, true, p.status.Signal()
	}
	return p.status.ExitStatus(), false, 0
}

// Exited returns when the leader exited (zero before Done).
func (p *Process) Exited() time.Time {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.exitedAt
}

func (p *Process) hasExited() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.exited
}

// Kill sends SIGKILL to the instance (see Signal). It does not wait.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Freeze stops the instance with SIGSTOP (see Signal).
func (p *Process) Freeze() error { return p.Signal(syscall.SIGSTOP) }

// Thaw resumes a frozen instance with SIGCONT (see Signal).
func (p *Process) Thaw() error { return p.Signal(syscall.SIGCONT) }

// Signal sends sig to the whole instance:
//
//   - its process group, with one kill(-pgid), while the leader is unreaped
//     (a zombie leader still pins the group id, so it cannot name a stranger's
//     group);
//   - every descendant outside that group (setsid'd or setpgid'd children),
//     found through the /proc ppid tree below Pid and through the InstanceEnv
//     tag among the harness's own descendants (which catches ones already
//     reparented to the harness);
//   - after the leader has exited, the remaining group members individually.
//
// Individually signalled processes must carry the run marker in
// /proc/PID/environ; a descendant that cleared its environment and left the
// group is therefore left alone, because nothing proves it is ours. The
// marker check and the signal share one pidfd, so a pid that is recycled in
// between is never signalled. The tree is snapshotted before the group is
// signalled (killing a shell reparents its children, hiding them from the
// tree), and rescans repeat until a pass finds nobody new, so descendants
// forked meanwhile are caught too.
//
// Signal returns os.ErrProcessDone if the leader has exited and no process
// was left to signal.
func (p *Process) Signal(sig syscall.Signal) error {
	self := os.Getpid()
	handled := map[int]bool{}
	delivered := false
	var errs []error
	for pass := 0; pass < maxSignalPasses; pass++ {
		procs, err := listProcs()
		if err != nil {
			errs = append(errs, err)
			break
		}
		exited := p.hasExited()
		cands := p.candidates(procs, self, exited)
		retry := false
		if pass == 0 {
			covered, err := p.signalGroup(sig)
			if err != nil {
				errs = append(errs, err)
			}
			// If the leader exited between the snapshot and the group
			// signal, the group members were neither in cands nor
			// signalled as a group: rescan, now treating them individually.
			retry = !covered && !exited
			if covered {
				delivered = true
				// Members at snapshot time received the group signal; do not
				// signal them again even if they leave the group later.
				for pid, st := range procs {
					if st.pgrp == p.Pid {
						handled[pid] = true
					}
				}
			}
		}
		fresh := 0
		for _, pid := range cands {
			if handled[pid] {
				continue
			}
			handled[pid] = true
			// Once the leader is gone its pid may be reused, even by another
			// instance of this run: then only this instance's own tag
			// proves a process belongs to it.
			marker := p.sup.marker
			if exited {
				marker = p.tag
			}
			ok, err := signalMarked(pid, sig, marker)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok {
				delivered = true
				fresh++
			}
		}
		if fresh == 0 && !retry {
			break
		}
	}
	if !delivered && len(errs) == 0 && p.hasExited() {
		return os.ErrProcessDone
	}
	return errors.Join(errs...)
}

// signalGroup sends sig to the process group while the leader is known not to
// be reaped, and reports whether it did.
func (p *Process) signalGroup(sig syscall.Signal) (bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.exited || p.Pid <= 1 {
		return false, nil
	}
	switch err := syscall.Kill(-p.Pid, sig); err {
	case nil:
		return true, nil
	case syscall.ESRCH:
		return false, nil
	default:
		return false, fmt.Errorf("proc: kill(-%d, %v): %w", p.Pid, sig, err)
	}
}

// candidates lists, from one snapshot, the live processes Signal should
// consider individually: the ppid-tree descendants of Pid, the harness's
// descendants tagged with this instance's InstanceEnv entry, the leader if it
// moved out of its own group, and—once the leader has exited—the remaining
// group members. Every one of them is still marker-checked before signalling.
func (p *Process) candidates(procs map[int]procStat, self int, exited bool) []int {
	children := childrenIndex(procs)
	set := map[int]bool{}
	for _, pid := range descendants(children, p.Pid) {
		set[pid] = true
	}
	for _, pid := range descendants(children, self) {
		if set[pid] || pid == p.Pid {
			continue
		}
		if ok, _ := hasEnvEntry(pid, p.tag); ok {
			set[pid] = true
		}
	}
	if leader, ok := procs[p.Pid]; ok && !exited && leader.pgrp != p.Pid {
		set[p.Pid] = true
	}
	if exited {
		for pid, st := range procs {
			if st.pgrp == p.Pid {
				set[pid] = true
			}
		}
	}
	out := make([]int, 0, len(set))
	for pid := range set {
		st, ok := procs[pid]
		if !ok || pid == self || pid <= 1 || st.state == 'Z' || st.state == 'X' {
			continue
		}
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Members returns, sorted, the live processes that belong to the instance:
// the leader, its group, and its marker-carrying descendants found as Signal
// finds them. Leak checks and Terminate use it to see whether anything of
// the instance is left.
func (p *Process) Members() ([]int, error) {
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	set := map[int]bool{}
	for _, pid := range p.candidates(procs, self, p.hasExited()) {
		set[pid] = true
	}
	for pid, st := range procs {
		if st.pgrp == p.Pid {
			set[pid] = true
		}
	}
	var out []int
	for pid := range set {
		st := procs[pid]
		if pid == self || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if pid != p.Pid && st.pgrp != p.Pid {
			if ok, _ := hasEnvEntry(pid, p.sup.marker); !ok {
				continue
			}
		}
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

// Terminate stops the instance gracefully: SIGTERM (followed by SIGCONT, so a
// frozen instance can act on it), then up to grace for the leader and its
// descendants to exit, then SIGKILL for whatever is left. It returns once the
// leader has exited. Descendants get the same deadline as the leader, so a
// "SIGTERM + restart" fault never leaves the old generation running beside
// the new one.
func (p *Process) Terminate(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	err := p.Signal(syscall.SIGTERM)
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	_ = p.Signal(syscall.SIGCONT)

	t := time.NewTimer(time.Until(deadline))
	select {
	case <-p.done:
	case <-t.C:
	}
	t.Stop()

	if p.hasExited() {
		// Only non-children may remain; they cannot be waited on, so poll
		// briefly for them within what is left of the grace period.
		for {
			m, merr := p.Members()
			if merr == nil && len(m) == 0 {
				return err
			}
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			time.Sleep(min(left, 10*time.Millisecond))
		}
	}
	kerr := p.Kill()
	if errors.Is(kerr, os.ErrProcessDone) {
		kerr = nil
	}
	<-p.done
	return errors.Join(err, kerr)
}

// signalMarked sends sig to pid only if the process carries marker in its
// environment, and reports whether it did. The pidfd is opened before the
// environment is read: if the process that owned pid at open time is still
// alive when the signal is sent through the pidfd, the environment we read
// was its own; if it died in between, the kernel fails the send with ESRCH
// instead of hitting whoever recycled the pid.
func signalMarked(pid int, sig syscall.Signal, marker string) (bool, error) {
	if pid <= 1 || pid == os.Getpid() {
		return false, nil
	}
	fd, err := pidfdOpen(pid)
	switch err {
	case nil:
		defer syscall.Close(fd)
	case syscall.ESRCH:
		return false, nil
	case syscall.ENOSYS:
		return signalMarkedNoPidfd(pid, sig, marker)
	default:
		return false, fmt.Errorf("proc: pidfd_open(%d): %w", pid, err)
	}
	ok, err := hasEnvEntry(pid, marker)
	if err != nil {
		if isGone(err) {
			return false, nil
		}
		return false, fmt.Errorf("proc: read environ of %d: %w", pid, err)
	}
	if !ok {
		return false, nil
	}
	switch err := pidfdSendSignal(fd, sig); err {
	case nil:
		return true, nil
	case syscall.ESRCH:
		return false, nil
	default:
		return false, fmt.Errorf("proc: signal %v to %d: %w", sig, pid, err)
	}
}

// signalMarkedNoPidfd is the pre-5.3-kernel fallback. It has a theoretical
// pid-reuse window between the environ check and kill(2).
func signalMarkedNoPidfd(pid int, sig syscall.Signal, marker string) (bool, error) {
	ok, err := hasEnvEntry(pid, marker)
	if err != nil {
		if isGone(err) {
			return false, nil
		}
		return false, fmt.Errorf("proc: read environ of %d: %w", pid, err)
	}
	if !ok {
		return false, nil
	}
	switch err := syscall.Kill(pid, sig); err {
	case nil:
		return true, nil
	case syscall.ESRCH:
		return false, nil
	default:
		return false, fmt.Errorf("proc: kill(%d, %v): %w", pid, sig, err)
	}
}
