package proc

import (
	"os"
	"os/exec"
	"os/signal"
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
	// been observed before the reaper collects it. Orphans reparented to us
	// (we are a subreaper) have nobody else waiting for them, but a child
	// started by other code in this binary with plain os/exec does: its
	// cmd.Wait is usually already blocked, or about to be called, when it
	// exits. Waiting a moment means such a status is practically never stolen
	// (cmd.Wait would otherwise fail with ECHILD), at the cost of an orphan
	// zombie lingering for about a second. Code that calls Wait late should
	// use StartTracked, which is exact.
	defaultOrphanGrace = time.Second
)

// zkey identifies a zombie across pid reuse.
type zkey struct {
	pid   int
	start uint64
}

// reaper is the process-wide orphan reaper. Being a child subreaper is a
// property of the whole process, and two reapers would only race each other,
// so there is exactly one (theReaper), shared by every Supervisor and
// reference-counted by NewSupervisor/Close.
type reaper struct {
	// mu is held across exec.Cmd.Start plus registration, and across the
	// confirm-and-wait4 step of a sweep. That is what makes registration
	// race-free: a child that exits instantly is either registered before
	// the reaper looks at it under mu, or it does not exist yet.
	mu sync.Mutex
	// reg maps the pid of every child whose exit status belongs to someone
	// else (a Process, or a StartTracked caller) to its start time (0 if it
	// could not be read, which matches any start time).
	reg map[int]uint64
	// seen records when each unregistered zombie child was first observed.
	seen  map[zkey]time.Time
	grace time.Duration

	life  sync.Mutex // guards users/stop/done; never held together with mu
	users int
	stop  chan struct{}
	done  chan struct{}
}

var theReaper = &reaper{
	reg:   map[int]uint64{},
	seen:  map[zkey]time.Time{},
	grace: defaultOrphanGrace,
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
		case <-t.C:
		}
		t.Reset(r.sweep())
	}
}

// start runs cmd.Start and registers the child under r.mu, so the reaper can
// never observe the child unregistered once it could have exited. Holding the
// lock across Start also covers the failed-exec case, in which os/exec itself
// reaps the forked child.
func (r *reaper) start(cmd *exec.Cmd) (start uint64, err error) {
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
	r.reg[pid] = start
	return start, nil
}

// unregister drops the registration of pid, but only if it is still the one
// made for this start time (a recycled pid may have been registered anew).
func (r *reaper) unregister(pid int, start uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.reg[pid]; ok && cur == start {
		delete(r.reg, pid)
	}
}

// registered reports whether the zombie z belongs to somebody. r.mu held.
func (r *reaper) registered(z zkey) bool {
	start, ok := r.reg[z.pid]
	return ok && (start == 0 || start == z.start)
}

// sweep reaps unregistered zombie children that have been zombies for at
// least the grace period and returns how long to sleep before the next
// sweep. Only direct children are considered (wait4 cannot reap anything
// else anyway) and only registered-free ones, so a Process's or
// StartTracked caller's exit status is never consumed here.
//
// The /proc scan runs without the lock, which keeps Start from stalling
// behind it; every decision is re-validated under the lock right before
// wait4, which is the step that has to be atomic with registration.
func (r *reaper) sweep() time.Duration {
	self := os.Getpid()
	procs, err := listProcs()
	if err != nil {
		return reaperIdleInterval
	}
	var zombies []zkey
	for pid, st := range procs {
		if st.ppid == self && st.state == 'Z' {
			zombies = append(zombies, zkey{pid, st.start})
		}
	}

	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()

	// Drop registrations of StartTracked children that their owner has
	// reaped (Process registrations are dropped by Process itself).
	for pid, start := range r.reg {
		st, err := readStat(pid)
		if (err != nil && isGone(err)) || (err == nil && start != 0 && st.start != start) {
			delete(r.reg, pid)
		}
	}

	next := reaperIdleInterval
	current := make(map[zkey]bool, len(zombies))
	for _, z := range zombies {
		if r.registered(z) {
			continue
		}
		current[z] = true
		first, ok := r.seen[z]
		if !ok {
			first = now
			r.seen[z] = now
		}
		if wait := r.grace - now.Sub(first); wait > 0 {
			next = min(next, wait)
			continue
		}
		// Re-validate under the lock: the pid must still be our zombie child
		// with the same start time, so we never reap a recycled pid.
		st, err := readStat(z.pid)
		if err != nil || st.state != 'Z' || st.ppid != self || st.start != z.start {
			continue
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(z.pid, &ws, syscall.WNOHANG, nil)
			if err != syscall.EINTR {
				break
			}
		}
		delete(current, z)
	}
	for z := range r.seen {
		if !current[z] {
			delete(r.seen, z)
		}
	}
	return next
}

// StartTracked starts cmd exactly like cmd.Start (no marker, no process group)
// but registered with the orphan reaper, so the caller's later cmd.Wait is
// guaranteed to get the exit status no matter how long it waits to call it.
// Code elsewhere in the harness that runs helper commands with os/exec while a
// Supervisor is open should use it: the reaper only spares unregistered
// children for a short grace period. The registration is dropped
// automatically once the caller has reaped the child.
func StartTracked(cmd *exec.Cmd) error {
	_, err := theReaper.start(cmd)
	return err
}
