// Package proc runs and faults the harness's workload processes with provable
// hygiene.
//
// Guarantees, and why each matters to a chaos harness:
//
//   - Every instance runs in its own process group and, when the Supervisor
//     uses cgroups (EnableCgroups, cgroup v2), in its own cgroup leaf that it
//     is placed in before it runs (clone3 CLONE_INTO_CGROUP). Nothing it
//     forks can leave that leaf, whatever it does with sessions, process
//     groups or its environment, so Kill (cgroup.kill), Freeze
//     (cgroup.freeze) and "gone" (cgroup empty) cover all of it atomically.
//     Without cgroups, one kill(-pgid) stops or kills the process group
//     atomically and descendants outside it are found as described below.
//   - The harness is a child subreaper (PR_SET_CHILD_SUBREAPER). Descendants
//     whose parent dies (double forks, daemons, killed shells) are reparented
//     to the harness instead of PID 1, so they stay visible in our /proc
//     subtree and, because PID 1 on these machines does not reap, the
//     harness reaps them: at once when they die (see reaper).
//   - Fleet safety: a process is only ever signalled if it is provably the
//     run's: in the instance's cgroup, in the instance's own process group
//     while its leader is unreaped, or carrying the run's marker in
//     /proc/PID/environ. The check and the signal go through one pidfd so a
//     recycled pid can never receive it. Processes the harness did not start
//     are only signalled through the explicit SignalExternal.
//   - Exit statuses are never lost: children started by Start are registered
//     under the same mutex the reaper holds while reaping, so the reaper
//     never consumes a status that belongs to a Process.
package proc

import (
	"context"
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

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// InstanceEnv is the environment variable Start adds, next to the run marker,
// to tag every process of one instance: HARNESSPID-SEQ-HARNESSSTART, the
// harness's pid and start time (clock ticks after boot) telling whether
// the harness still runs even once its pid went to another process. It is how Signal still finds a
// descendant that left the instance's process group (setsid) after the
// process that forked it died and it was reparented to the harness, at which
// point the ppid tree below the instance no longer leads to it.
const InstanceEnv = "CHAOS_PROC_INSTANCE"

// maxSignalPasses bounds Signal's rescans. Each pass picks up descendants
// forked or reparented since the previous one; a workload that forks faster
// than we can signal would otherwise keep Signal looping forever.
const maxSignalPasses = 8

// freezeTimeout bounds Freeze and Thaw, which take no context, in cgroup
// mode: how long to wait for cgroup.events to confirm.
const freezeTimeout = 10 * time.Second

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("proc: supervisor closed")

var instanceSeq atomic.Uint64

// Supervisor owns every child process the harness starts. Several
// Supervisors may coexist in one process (for example in tests); they share
// the single process-wide orphan reaper.
type Supervisor struct {
	marker string
	// cursor is the pid allocator's before any child carried the marker.
	cursor pidCursor

	mu        sync.RWMutex
	closed    bool
	closeOnce sync.Once
	// cg is the run's cgroup tree; nil in process-group mode.
	cg       *cgroup.Run
	cgReason string // why not cgroups, once EnableCgroups failed
}

// NewSupervisor returns a Supervisor whose children all carry marker (a
// "KEY=value" environment entry unique to this run, e.g.
// "CHAOS_RUN_ID=20261130T111200Z-ab12"). It makes the harness a child
// subreaper and starts the orphan reaper if it is not already running; both
// are idempotent, so it may be called more than once. It starts in
// process-group mode; see EnableCgroups.
func NewSupervisor(marker string) (*Supervisor, error) {
	if err := validateMarker(marker); err != nil {
		return nil, err
	}
	if err := setChildSubreaper(); err != nil {
		return nil, fmt.Errorf("proc: prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	theReaper.acquire()
	return &Supervisor{marker: marker, cursor: readPidCursor()}, nil
}

// Marker returns the environment entry every child of s carries.
func (s *Supervisor) Marker() string { return s.marker }

// Close stops the orphan reaper once no other Supervisor uses it and
// removes the run's empty cgroups. It does not touch running processes: stop
// them first, otherwise their orphans will not be reaped until another
// Supervisor is created, and cgroups that still hold processes stay for
// `chaos cleanup` (cgroup.SweepStale). Close is idempotent.
func (s *Supervisor) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		run := s.cg
		s.mu.Unlock()
		if run != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = run.Remove(ctx) // leaves with processes in them stay
			cancel()
		}
		theReaper.release()
	})
	return nil
}

// StartOption adjusts one Start.
type StartOption func(*startConfig)

type startConfig struct {
	cgroupName string
}

// CgroupName names the instance's cgroup leaf (made safe, and numbered so a
// name is never reused within the run); without it the leaf is named
// "proc". It has no effect in process-group mode.
func CgroupName(name string) StartOption {
	return func(c *startConfig) { c.cgroupName = name }
}

// Start starts cmd as a new instance: in its own process group, with the run
// marker and a per-instance InstanceEnv tag appended to its environment
// (os.Environ() if cmd.Env is nil; appended entries win over duplicates), and
// registered so that the orphan reaper never steals its exit status. In
// cgroup mode it also starts in a new cgroup leaf of the run (see
// CgroupName) before it executes anything; a caller that sets
// SysProcAttr.UseCgroupFD itself keeps its own cgroup and gets
// process-group semantics for that instance.
//
// After Start the Supervisor owns cmd: do not call cmd.Wait or read
// cmd.ProcessState; use Done and ExitStatus. If cmd has stdout/stderr
// writers that are not *os.File, the copying goroutines are released when the
// last descendant holding the pipes exits, independently of Done.
func (s *Supervisor) Start(cmd *exec.Cmd, opts ...StartOption) (*Process, error) {
	if cmd == nil || cmd.Process != nil {
		return nil, errors.New("proc: Start needs an unstarted *exec.Cmd")
	}
	var cfg startConfig
	for _, o := range opts {
		o(&cfg)
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

	var leaf *cgroup.Group
	if s.cg != nil && !attr.UseCgroupFD {
		name := cfg.cgroupName
		if name == "" {
			name = "proc"
		}
		var err error
		if leaf, err = s.cg.NewLeaf(name); err != nil {
			return nil, fmt.Errorf("proc: starting in a cgroup: %w", err)
		}
		fd, err := leaf.OpenFD()
		if err != nil {
			_ = leaf.Remove(context.Background())
			return nil, fmt.Errorf("proc: starting in a cgroup: %w", err)
		}
		defer syscall.Close(fd) // the child has its own reference once started
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
	cmd.SysProcAttr = &attr

	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	tag := InstanceEnv + "=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(instanceSeq.Add(1), 10) + "-" + strconv.FormatUint(selfStart(), 10)
	cmd.Env = append(slices.Clip(env), s.marker, tag)

	start, err := theReaper.start(cmd, false)
	if err != nil {
		if leaf != nil {
			_ = leaf.Remove(context.Background())
		}
		return nil, err
	}
	p := &Process{
		Pid:     cmd.Process.Pid,
		Started: time.Now(),
		sup:     s,
		cmd:     cmd,
		tag:     tag,
		start:   start,
		cg:      leaf,
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
	tag   string        // InstanceEnv entry of this instance
	start uint64        // start time of Pid, for registration bookkeeping
	cg    *cgroup.Group // the instance's leaf; nil in process-group mode
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

	// killed are the pids a SIGKILL reached outside the process group (in
	// process-group mode), so WaitGone can wait for them too: once killed
	// they carry no marker a walk could find them by.
	killedMu sync.Mutex
	killed   []int
	// cgKilled is set once a SIGKILL went to the leaf (cgroup mode), so
	// WaitGone kills again whatever a first pass missed instead of only
	// waiting for it.
	cgKilled atomic.Bool
}

// wait is the event-driven exit watcher: it sleeps in the runtime's poller
// on the leader's pidfd (or, without pidfds, in waitid), which wakes the
// instant the leader terminates, rather than polling.
func (p *Process) wait() {
	ws, err := waitExitPolled(p.Pid)
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
	// An instance that left nothing behind does not need its leaf any more.
	// Leaf names are never reused, so a stale path can reach nobody.
	if p.cg != nil {
		if pop, err := p.cg.Populated(); err == nil && !pop {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = p.cg.Remove(ctx)
			cancel()
		}
	}
	close(p.waited)
}

// Cgroup returns the instance's cgroup leaf, or nil in process-group mode.
func (p *Process) Cgroup() *cgroup.Group { return p.cg }

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

// Kill sends SIGKILL to the whole instance and does not wait. In cgroup
// mode it kills the leaf (cgroup.Group.Kill: cgroup.kill, which reaches
// every process in the leaf, including ones forked during the kill,
// setsid'd ones and ones that cleared their environment, then a SIGKILL to
// each thread group the leaf lists, which reaches a process whose main
// thread has exited, which cgroup.kill misses); WaitGone then kills again
// whatever is left until the leaf is empty. Otherwise it is
// Signal(SIGKILL). It returns os.ErrProcessDone when nothing of the
// instance was left.
func (p *Process) Kill() error {
	if p.cg != nil {
		return p.killCgroup()
	}
	return p.Signal(syscall.SIGKILL)
}

func (p *Process) killCgroup() error {
	ev, err := p.cg.Events()
	if err != nil {
		if cgroup.IsGone(err) {
			return os.ErrProcessDone // leaf removed: empty and leader reaped
		}
		return fmt.Errorf("proc: %w", err)
	}
	if !ev.Populated {
		return os.ErrProcessDone
	}
	p.cgKilled.Store(true)
	if err := p.cg.Kill(); err != nil {
		if cgroup.IsGone(err) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("proc: %w", err)
	}
	return nil
}

// Freeze stops the instance; see FreezeContext. In cgroup mode it waits at
// most 10 s for the kernel to confirm.
func (p *Process) Freeze() error {
	ctx, cancel := context.WithTimeout(context.Background(), freezeTimeout)
	defer cancel()
	return p.FreezeContext(ctx)
}

// Thaw resumes a frozen instance; see ThawContext.
func (p *Process) Thaw() error {
	ctx, cancel := context.WithTimeout(context.Background(), freezeTimeout)
	defer cancel()
	return p.ThawContext(ctx)
}

// FreezeContext stops the whole instance. In cgroup mode it writes
// cgroup.freeze and returns once cgroup.events says "frozen 1": every process
// of the leaf is stopped, with no window in which a child forked meanwhile
// keeps running, and without job-control signals the workload could see or
// undo (frozen tasks show state S, not T). Otherwise it is Signal(SIGSTOP)
// (state T), which returns as soon as the signals are sent. It returns
// os.ErrProcessDone when nothing of the instance was left.
func (p *Process) FreezeContext(ctx context.Context) error {
	if p.cg == nil {
		return p.Signal(syscall.SIGSTOP)
	}
	ev, err := p.cg.Events()
	if err != nil {
		if cgroup.IsGone(err) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("proc: %w", err)
	}
	if !ev.Populated {
		return os.ErrProcessDone
	}
	if err := p.cg.Freeze(ctx); err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	return nil
}

// ThawContext undoes FreezeContext: cgroup.freeze 0, returning once
// cgroup.events says "frozen 0", or SIGCONT in process-group mode.
func (p *Process) ThawContext(ctx context.Context) error {
	if p.cg == nil {
		return p.Signal(syscall.SIGCONT)
	}
	if err := p.cg.Thaw(ctx); err != nil {
		if cgroup.IsGone(err) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("proc: %w", err)
	}
	if pop, err := p.cg.Populated(); err == nil && !pop {
		return os.ErrProcessDone
	}
	return nil
}

// Signal sends sig to the whole instance.
//
// In cgroup mode: every process in the instance's leaf (cgroup.procs), each
// through a pidfd after checking that it is still in the leaf, so a recycled
// pid is never hit; passes repeat until one finds nobody new, so children
// forked meanwhile are caught. SIGKILL uses cgroup.kill instead.
//
// In process-group mode:
//
//   - its process group, with one kill(-pgid), while the leader is unreaped
//     (a zombie leader still pins the group id, so it cannot name a stranger's
//     group);
//   - every descendant outside that group (setsid'd or setpgid'd children),
//     found by walking the ppid tree down from Pid, and the harness's own
//     children (orphans it adopted) that carry the instance's InstanceEnv
//     tag, with their subtrees;
//   - after the leader has exited, those tagged processes individually.
//
// Individually signalled processes must carry the run marker in
// /proc/PID/environ; a descendant that cleared its environment and left the
// group is therefore left alone, because nothing proves it is ours (cgroup
// mode has no such gap). The marker check and the signal share one pidfd, so
// a pid that is recycled in between is never signalled. The tree is
// walked before the group is signalled (killing a shell reparents its
// children, hiding them from the tree), and rescans repeat until a pass finds
// nobody new, so descendants forked meanwhile are caught too. The cost is
// proportional to the instance's own processes and the harness's direct
// children, not to every process on the machine.
//
// Signal returns os.ErrProcessDone if the leader has exited and no process
// was left to signal.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.cg != nil {
		if sig == syscall.SIGKILL {
			return p.killCgroup()
		}
		return p.signalCgroup(sig)
	}
	self := os.Getpid()
	handled := map[int]bool{}
	delivered := false
	var errs []error
	for pass := 0; pass < maxSignalPasses; pass++ {
		cands, exited := p.candidates(self)
		retry := false
		if pass == 0 {
			covered, err := p.signalGroup(sig)
			if err != nil {
				errs = append(errs, err)
			}
			// If the leader exited between the walk and the group signal,
			// the group members were neither in cands nor signalled as a
			// group: rescan, now treating them individually.
			retry = !covered && !exited
			if covered {
				delivered = true
				// Members at walk time received the group signal; do not
				// signal them again even if they leave the group later.
				for _, st := range cands {
					if st.pgrp == p.Pid {
						handled[st.pid] = true
					}
				}
			}
		}
		fresh := 0
		for _, st := range cands {
			pid := st.pid
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
				if sig == syscall.SIGKILL {
					p.killedMu.Lock()
					p.killed = append(p.killed, pid)
					p.killedMu.Unlock()
				}
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

// signalCgroup is Signal in cgroup mode, for signals other than SIGKILL.
func (p *Process) signalCgroup(sig syscall.Signal) error {
	handled := map[int]bool{}
	delivered := false
	var errs []error
	for pass := 0; pass < maxSignalPasses; pass++ {
		pids, err := p.cg.Procs()
		if err != nil {
			errs = append(errs, fmt.Errorf("proc: %w", err))
			break
		}
		fresh := 0
		for _, pid := range pids {
			if handled[pid] {
				continue
			}
			handled[pid] = true
			ok, err := signalInCgroup(pid, sig, p.cg)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok {
				delivered = true
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	if !delivered && len(errs) == 0 && p.hasExited() {
		return os.ErrProcessDone
	}
	return errors.Join(errs...)
}

// signalInCgroup sends sig to pid only if it is in g, checked after its
// pidfd is open (see signalIf).
func signalInCgroup(pid int, sig syscall.Signal, g *cgroup.Group) (bool, error) {
	return signalIf(pid, sig, g.Contains)
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

// candidates lists the live processes Signal should consider individually
// in process-group mode: the ppid-tree descendants of Pid, the harness's
// children tagged with this instance's InstanceEnv entry (orphans it
// adopted) with their descendants, and the leader if it moved out of its own
// group. Every one of them is still marker-checked before signalling.
//
// exited is read after the walk: if the leader had not exited then, it was
// not reaped during the walk either (Process.wait records the exit before
// reaping), so the tree below Pid really was the instance's.
func (p *Process) candidates(self int) (cands []procStat, exited bool) {
	set := map[int]procStat{}
	leader, lerr := readStat(p.Pid)
	for _, st := range subtree(p.Pid) {
		set[st.pid] = st
	}
	for _, k := range p.adoptedOrphans(self) {
		if _, ok := set[k.pid]; ok {
			continue
		}
		set[k.pid] = k
		for _, st := range subtree(k.pid) {
			set[st.pid] = st
		}
	}
	exited = p.hasExited()
	if lerr == nil && !exited && leader.pgrp != p.Pid {
		set[p.Pid] = leader
	}
	for pid, st := range set {
		if pid == self || pid <= 1 || !isLive(st) {
			continue
		}
		cands = append(cands, st)
	}
	slices.SortFunc(cands, func(a, b procStat) int { return a.pid - b.pid })
	return cands, exited
}

// adoptedOrphans returns the harness's children that carry this instance's
// tag. Registered children (instance leaders, StartTracked commands) are
// skipped without reading anything, so the cost is one read per orphan,
// not per instance.
func (p *Process) adoptedOrphans(self int) []procStat {
	var kids []procStat
	if childrenFiles() {
		pids, err := childrenOf(self)
		if err != nil {
			return nil
		}
		for _, c := range theReaper.dropRegistered(pids) {
			if st, err := readStat(c); err == nil && st.ppid == self && c != p.Pid {
				kids = append(kids, st)
			}
		}
	} else {
		all, _ := childStats(self)
		for _, st := range all {
			if st.pid != p.Pid && len(theReaper.dropRegistered([]int{st.pid})) == 1 {
				kids = append(kids, st)
			}
		}
	}
	var out []procStat
	for _, k := range kids {
		if !isLive(k) {
			continue
		}
		if ok, _ := hasEnvEntry(k.pid, p.tag); ok {
			out = append(out, k)
		}
	}
	return out
}

// Members returns, sorted, the live processes that belong to the instance.
// In cgroup mode: every process in its leaf. Otherwise: the leader, its
// group, and its marker-carrying descendants found as Signal finds them.
// Leak checks and Terminate use it to see whether anything of the instance
// is left.
func (p *Process) Members() ([]int, error) {
	self := os.Getpid()
	if p.cg != nil {
		pids, err := p.cg.Procs()
		if err != nil {
			return nil, fmt.Errorf("proc: %w", err)
		}
		return slices.DeleteFunc(pids, func(pid int) bool { return pid == self }), nil
	}
	sts, err := p.memberStats()
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(sts))
	for _, st := range sts {
		out = append(out, st.pid)
	}
	return out, nil
}

// memberStats is Members in process-group mode, sorted by pid, with each
// member's stat: its start time tells it from a later process given its
// pid.
func (p *Process) memberStats() ([]procStat, error) {
	self := os.Getpid()
	cands, _ := p.candidates(self)
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	set := map[int]procStat{}
	for _, st := range cands {
		set[st.pid] = st
	}
	for pid, st := range procs {
		if st.pgrp == p.Pid {
			set[pid] = st
		}
	}
	var out []procStat
	for pid, st := range set {
		if pid == self || !isLive(st) {
			continue
		}
		if pid != p.Pid && st.pgrp != p.Pid {
			if ok, _ := hasEnvEntry(pid, p.sup.marker); !ok {
				continue
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b procStat) int { return a.pid - b.pid })
	return out, nil
}

// Terminate stops the instance gracefully: SIGTERM (then a thaw and SIGCONT,
// so a frozen instance can act on it), then up to grace for the leader and
// its descendants to exit, then SIGKILL for whatever is left (cgroup.kill
// in cgroup mode). It returns once the leader has exited. Descendants get
// the same deadline as the leader, so a "SIGTERM + restart" fault never
// leaves the old generation running beside the new one. In cgroup mode the
// wait for descendants is event-driven (cgroup.events); use WaitGone to wait
// until everything is also reaped.
func (p *Process) Terminate(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	err := p.Signal(syscall.SIGTERM)
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	if p.cg != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		_ = p.cg.Thaw(ctx)
		_ = p.signalCgroup(syscall.SIGCONT)
		select {
		case <-p.done:
			_ = p.cg.WaitEmpty(ctx)
		case <-ctx.Done():
		}
		kerr := p.killCgroup()
		if errors.Is(kerr, os.ErrProcessDone) {
			kerr = nil
		}
		<-p.done
		return errors.Join(err, kerr)
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

// WaitGone waits, bounded by ctx, until nothing of the instance exists any
// more, not even as a zombie: the leader has exited and been reaped, and
//
//   - in cgroup mode, the leaf is empty (cgroup.events "populated 0", waited
//     for without polling) and every zombie that was in it has been reaped;
//     the leaf is then removed. After Kill, whatever is still in the leaf is
//     killed again while it waits (cgroup.Group.KillWait);
//   - in process-group mode, Members is empty and each member it listed on
//     the way, and each zombie left in the instance's process group, has been
//     reaped. A descendant that left the group and cleared its environment
//     cannot be attributed to the instance here, and is not waited for.
//
// It does not signal anything but what a Kill already began: Kill or
// Terminate first.
func (p *Process) WaitGone(ctx context.Context) error {
	fail := func(err error) error {
		return fmt.Errorf("proc: waiting for instance %d to be gone: %w", p.Pid, err)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if p.cg != nil {
		empty := p.cg.WaitEmpty
		if p.cgKilled.Load() {
			empty = p.cg.KillWait
		}
		if err := empty(ctx); err != nil {
			return fail(err)
		}
	}
	select {
	case <-p.waited:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	self := os.Getpid()
	if p.cg != nil {
		for {
			zs := zombieChildrenWhere(func(d deadChild) bool { return p.cg.Holds(d.cgroup()) })
			if len(zs) == 0 {
				break
			}
			for _, z := range zs {
				if err := waitGone(ctx, z); err != nil {
					return fail(err)
				}
			}
		}
		if err := p.cg.Remove(ctx); err != nil {
			return fail(err)
		}
		return nil
	}
	for {
		m, err := p.memberStats()
		if err != nil {
			return fail(err)
		}
		if len(m) == 0 {
			break
		}
		for _, st := range m {
			if err := waitGone(ctx, zkey{st.pid, st.start}); err != nil {
				return fail(err)
			}
		}
	}
	for _, z := range zombieChildrenWhere(func(d deadChild) bool { return d.pgrp == p.Pid }) {
		if err := waitGone(ctx, z); err != nil {
			return fail(err)
		}
	}
	// Processes a kill reached outside the group (after setsid) are the
	// harness's to reap once they are orphans: gone means reaped.
	p.killedMu.Lock()
	killed := slices.Clone(p.killed)
	p.killedMu.Unlock()
	for _, pid := range killed {
		for {
			st, err := readStat(pid)
			if err != nil || st.ppid != self {
				break // gone, or not ours to wait for (a reused pid)
			}
			if err := waitGone(ctx, zkey{pid, st.start}); err != nil {
				return fail(err)
			}
		}
	}
	return nil
}

// zombieChildrenWhere lists the harness's dead unregistered children for
// which keep holds, from a scan shared with every other caller
// (deadScans). Registered children (other instances' leaders, whose
// statuses are theirs) are not among them.
func zombieChildrenWhere(keep func(deadChild) bool) []zkey {
	var out []zkey
	for _, d := range deadScans.scan() {
		if keep(d) {
			out = append(out, d.z)
		}
	}
	return out
}

// signalMarked sends sig to pid only if the process carries marker in its
// environment, and reports whether it did (see signalIf for why the check
// cannot be about another process).
func signalMarked(pid int, sig syscall.Signal, marker string) (bool, error) {
	return signalIf(pid, sig, func(pid int) (bool, error) {
		ok, err := hasEnvEntry(pid, marker)
		if err != nil {
			if isGone(err) {
				return false, nil
			}
			return false, fmt.Errorf("proc: read environ of %d: %w", pid, err)
		}
		return ok, nil
	})
}

// signalIf sends sig to pid only if check(pid) holds, and reports whether it
// did. The pidfd is opened before the check: if the process that owned pid
// at open time is still alive when the signal is sent through the pidfd,
// what check read was about it; if it died in between, the kernel fails the
// send with ESRCH instead of hitting whoever recycled the pid. Without
// pidfds (kernels before 5.3, or a seccomp filter) it falls back to kill(2),
// which has a theoretical pid-reuse window between the check and the kill.
func signalIf(pid int, sig syscall.Signal, check func(pid int) (bool, error)) (bool, error) {
	if pid <= 1 || pid == os.Getpid() {
		return false, nil
	}
	fd, err := openPidfd(pid)
	switch err {
	case nil:
		defer closePidfd(fd)
	case syscall.ESRCH:
		return false, nil
	case syscall.ENOSYS, syscall.EPERM:
		fd = -1
	default:
		return false, fmt.Errorf("proc: pidfd_open(%d): %w", pid, err)
	}
	ok, err := check(pid)
	if err != nil || !ok {
		return false, err
	}
	if fd < 0 {
		err = syscall.Kill(pid, sig)
	} else {
		err = pidfdSendSignal(fd, sig)
	}
	switch err {
	case nil:
		return true, nil
	case syscall.ESRCH:
		return false, nil
	default:
		return false, fmt.Errorf("proc: signal %v to %d: %w", sig, pid, err)
	}
}
