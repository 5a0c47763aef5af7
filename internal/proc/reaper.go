package proc

import (
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"
)

const (
	// reaperIdleInterval is the safety-net rescan period. SIGCHLD is the
	// primary wake-up, but signals coalesce and a child can be reparented to
	// us while we are mid-scan, so an occasional unconditional sweep
	// guarantees no zombie survives indefinitely.
	reaperIdleInterval = time.Second

	// defaultOrphanGrace is how long an unregistered zombie child must have
	// been observed before the reaper collects it, on the rare systems where
	// the harness cannot tell an orphan from a child that other code in this
	// binary started with plain os/exec and is about to Wait for (no
	// pidfds, see reaper.execPidfd). Everywhere else orphans are reaped at
	// once and no status is ever stolen.
	defaultOrphanGrace = time.Second

	// heldRecheck is the first delay before looking again at a zombie child
	// that a pidfd elsewhere in the process refers to; it doubles up to
	// reaperIdleInterval.
	heldRecheck = 5 * time.Millisecond
)

// zkey identifies a zombie across pid reuse.
type zkey struct {
	pid   int
	start uint64
}

// registration is an exit status that belongs to somebody else.
type registration struct {
	start   uint64 // start time, 0 if unknown (matches any)
	tracked bool   // StartTracked: dropped by the sweep once reaped
}

// reaper is the process-wide orphan reaper. Being a child subreaper is a
// property of the whole process, and two reapers would only race each other,
// so there is exactly one (theReaper), shared by every Supervisor and
// reference-counted by NewSupervisor/Close.
//
// Which zombie children it reaps, and when:
//
//   - Never one registered by Start or StartTracked: its status belongs to
//     the Process or the StartTracked caller.
//   - Never one that a pidfd elsewhere in the process refers to. Go's
//     os/exec (1.23+) holds a pidfd for each child from the moment it is
//     forked until Wait has reaped it, so this is exactly "a child some
//     other code in the binary started and may still Wait for". An adopted
//     orphan has no such pidfd: nobody but us can reap it.
//   - Every other one at once, on the SIGCHLD its death sends us. A killed
//     daemon is therefore gone (not a zombie still holding its pid) within
//     milliseconds, and a replacement started right after does not find it
//     "alive".
//   - Until the first Start shows that os/exec holds pidfds, and wherever
//     it does not (old kernels; execPidfd), the reaper falls back to waiting
//     defaultOrphanGrace before reaping an unregistered zombie, except for
//     one that WaitGone waits for.
type reaper struct {
	// mu is held across exec.Cmd.Start plus registration, and across the
	// confirm-and-wait4 step of a sweep. That is what makes registration
	// race-free: a child that exits instantly is either registered before
	// the reaper looks at it under mu, or it does not exist yet.
	mu  sync.Mutex
	reg map[int]registration
	// seen records when each unregistered zombie child was first observed
	// (grace mode only).
	seen map[zkey]time.Time
	// held is the current recheck delay of zombies a foreign pidfd refers to.
	held map[zkey]time.Duration
	// doomed counts WaitGone calls waiting for each process.
	doomed map[zkey]int
	grace  time.Duration
	// execPidfd: 0 not known yet, 1 os/exec holds a pidfd per child,
	// -1 it does not. Learnt from the first child started through start.
	execPidfd int

	kick chan struct{}

	life  sync.Mutex // guards users/stop/done; never held together with mu
	users int
	stop  chan struct{}
	done  chan struct{}
}

var theReaper = &reaper{
	reg:    map[int]registration{},
	seen:   map[zkey]time.Time{},
	held:   map[zkey]time.Duration{},
	doomed: map[zkey]int{},
	grace:  defaultOrphanGrace,
	kick:   make(chan struct{}, 1),
}

// acquire starts the reaper goroutine if this is its first user.
func (r *reaper) acquire() {
	r.life.Lock()
	defer r.life.Unlock()
	if r.users == 0 {
		r.stop = make(chan struct{})
		r.done = make(chan struct{})
		sigc := make(chan os.Signal, 1)
		signal.Notify(sigc, syscall.SIGCHLD)
		go r.run(sigc, r.stop, r.done)
	}
	r.users++
}

// release stops the reaper goroutine when its last user goes away and waits
// for it to exit, so no sweep outlives the last Supervisor.
func (r *reaper) release() {
	r.life.Lock()
	defer r.life.Unlock()
	r.users--
	if r.users == 0 {
		close(r.stop)
		<-r.done
	}
}

func (r *reaper) run(sigc chan os.Signal, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer signal.Stop(sigc)
	t := time.NewTimer(0) // sweep once at start: orphans may already be waiting
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-sigc:
		case <-r.kick:
		case <-t.C:
		}
		t.Reset(r.sweep())
	}
}

// start runs cmd.Start and registers the child under r.mu, so the reaper can
// never observe the child unregistered once it could have exited. Holding the
// lock across Start also covers the failed-exec case, in which os/exec itself
// reaps the forked child.
func (r *reaper) start(cmd *exec.Cmd, tracked bool) (start uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// Our own unreaped child: its stat is always readable.
	if st, err := readStat(pid); err == nil {
		start = st.start
	}
	r.reg[pid] = registration{start: start, tracked: tracked}
	if r.execPidfd == 0 {
		// os/exec opened its pidfd in the clone itself, so it is there now.
		r.execPidfd = -1
		if foreignPidfds()[pid] {
			r.execPidfd = 1
		}
	}
	return start, nil
}

// unregister drops the registration of pid, but only if it is still the one
// made for this start time (a recycled pid may have been registered anew).
func (r *reaper) unregister(pid int, start uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.reg[pid]; ok && cur.start == start {
		delete(r.reg, pid)
	}
}

// registered reports whether the zombie z belongs to somebody. r.mu held.
func (r *reaper) registered(z zkey) bool {
	reg, ok := r.reg[z.pid]
	return ok && (reg.start == 0 || reg.start == z.start)
}

func (r *reaper) doom(z zkey) {
	r.mu.Lock()
	r.doomed[z]++
	r.mu.Unlock()
}

func (r *reaper) undoom(z zkey) {
	r.mu.Lock()
	if r.doomed[z]--; r.doomed[z] <= 0 {
		delete(r.doomed, z)
	}
	r.mu.Unlock()
}

// wake asks the reaper goroutine for a sweep now.
func (r *reaper) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// reapOrphan reaps z at once if it is our zombie child and the rules allow
// it (not registered, no foreign pidfd refers to it), and reports whether
// it did. It works whether or not the reaper goroutine runs.
func (r *reaper) reapOrphan(z zkey) bool {
	st, err := readStat(z.pid)
	if err != nil || st.state != 'Z' || st.ppid != os.Getpid() || st.start != z.start {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.registered(z) {
		return false
	}
	if r.execPidfd == 1 && heldElsewhere(z) {
		r.wake() // somebody may Wait for it; let the sweep keep an eye on it
		return false
	}
	return r.reapLocked(z)
}

// reapLocked re-validates z under r.mu (it must still be our zombie child
// with the same start time, so a recycled pid is never reaped) and reaps it.
func (r *reaper) reapLocked(z zkey) bool {
	st, err := readStat(z.pid)
	if err != nil || st.state != 'Z' || st.ppid != os.Getpid() || st.start != z.start {
		return false
	}
	var ws syscall.WaitStatus
	for {
		// A zombie leader whose other threads still run is not reapable
		// yet: wait4 then returns 0.
		wpid, err := syscall.Wait4(z.pid, &ws, syscall.WNOHANG, nil)
		if err != syscall.EINTR {
			return err == nil && wpid == z.pid
		}
	}
}

// unregisteredChildren returns the stat of each direct child of self that
// is not registered. Registered children (typically every instance's
// leader) are skipped before anything is read about them, so a sweep costs
// one read per orphan, not one per instance.
func (r *reaper) unregisteredChildren(self int) ([]procStat, error) {
	if !childrenFiles() {
		return childStats(self)
	}
	pids, err := childrenOf(self)
	if err != nil {
		return nil, err
	}
	pids = r.dropRegistered(pids)
	out := make([]procStat, 0, len(pids))
	for _, pid := range pids {
		if st, err := readStat(pid); err == nil && st.ppid == self {
			out = append(out, st)
		}
	}
	return out, nil
}

// dropRegistered removes from pids, in place, every pid whose exit status
// belongs to a Process or a StartTracked caller.
func (r *reaper) dropRegistered(pids []int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(pids, func(pid int) bool { _, ok := r.reg[pid]; return ok })
}

// sweep reaps the zombie children the rules above allow and returns how long
// to sleep before the next sweep. Only direct children are considered
// (wait4 cannot reap anything else anyway).
//
// The /proc scan runs without the lock, which keeps Start from stalling
// behind it; every decision is re-validated under the lock right before
// wait4, which is the step that has to be atomic with registration.
func (r *reaper) sweep() time.Duration {
	self := os.Getpid()
	kids, err := r.unregisteredChildren(self)
	if err != nil {
		return reaperIdleInterval
	}
	var zombies []zkey
	for _, st := range kids {
		if st.state == 'Z' {
			zombies = append(zombies, zkey{st.pid, st.start})
		}
	}

	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()

	// Drop registrations of StartTracked children that their owner has
	// reaped (Process registrations are dropped by Process itself).
	for pid, reg := range r.reg {
		if !reg.tracked {
			continue
		}
		st, err := readStat(pid)
		if (err != nil && isGone(err)) || (err == nil && reg.start != 0 && st.start != reg.start) {
			delete(r.reg, pid)
		}
	}

	next := reaperIdleInterval
	current := make(map[zkey]bool, len(zombies))
	rescanned := false
	for _, z := range zombies {
		if r.registered(z) {
			continue
		}
		current[z] = true
		if r.execPidfd != 1 && r.doomed[z] == 0 {
			// Cannot tell an orphan from another caller's os/exec child:
			// give that caller the grace period to Wait.
			first, ok := r.seen[z]
			if !ok {
				first = now
				r.seen[z] = now
			}
			if wait := r.grace - now.Sub(first); wait > 0 {
				next = min(next, wait)
				continue
			}
		}
		if r.execPidfd == 1 {
			if _, again := r.held[z]; again && !rescanned {
				// Its holder may have let go of it without reaping it
				// (os.Process.Release): look at the files again.
				rescanHeld()
				rescanned = true
			}
			if heldElsewhere(z) {
				d := r.held[z]
				if d == 0 {
					d = heldRecheck
				}
				next = min(next, d)
				r.held[z] = min(2*d, reaperIdleInterval)
				continue
			}
		}
		if r.reapLocked(z) {
			delete(current, z)
		}
	}
	for z := range r.seen {
		if !current[z] {
			delete(r.seen, z)
		}
	}
	for z := range r.held {
		if !current[z] {
			delete(r.held, z)
		}
	}
	return next
}

// StartTracked starts cmd exactly like cmd.Start (no marker, no process group)
// but registered with the orphan reaper, so the caller's later cmd.Wait is
// guaranteed to get the exit status no matter how long it waits to call it,
// also where os/exec does not hold pidfds. The registration is dropped
// automatically once the caller has reaped the child.
func StartTracked(cmd *exec.Cmd) error {
	_, err := theReaper.start(cmd, true)
	return err
}
