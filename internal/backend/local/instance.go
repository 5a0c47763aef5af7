package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/proc"
)

// instance is one process group running the wrapper. Across a Down and Up
// it is the same instance in the same output directory with a new process.
type instance struct {
	sup  *proc.Supervisor
	spec backend.InstanceSpec
	// leaked is told what of an ended instance Delete found still running.
	leaked func(instance string, pids []int)

	mu   sync.Mutex
	p    *proc.Process
	pid  int
	down bool // taken down by Down; its exit is not its end
	// killed is set when Kill killed the running instance: what of it is
	// still there when it is deleted is dying, not left behind.
	killed bool
	// ended is set once, when Done is closed.
	ended bool
	done  chan struct{}
	// exited is closed when the current incarnation's process exits.
	exited chan struct{}
	// member is the instance's network namespace, when the adapter asks
	// for one (netns.go).
	member *netMember
	// res is what resource faults on it left to know (resource.go).
	res resState
}

func (in *instance) start() error {
	log, err := os.OpenFile(filepath.Join(in.spec.LogDir, "process.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := in.command()
	cmd.Dir = in.spec.OutputDir
	cmd.Env = in.spec.Env
	cmd.Stdout, cmd.Stderr = log, log
	// In cgroup mode the wrapper starts in a leaf of its own, named after
	// the instance: everything it forks stays there.
	p, err := in.sup.Start(cmd, proc.CgroupName(in.spec.Name))
	log.Close()
	if err != nil {
		return fmt.Errorf("starting instance %s: %w", in.spec.Name, err)
	}
	exited := make(chan struct{})
	in.mu.Lock()
	in.p, in.pid, in.exited, in.down = p, p.Pid, exited, false
	in.mu.Unlock()
	in.spec.OnState(backend.Running, "Started")
	go in.watch(p, exited)
	return nil
}

// watch turns the process's exit into a state the moment it happens.
func (in *instance) watch(p *proc.Process, exited chan struct{}) {
	<-p.Done()
	in.mu.Lock()
	down := in.down
	in.mu.Unlock()
	close(exited)
	if down {
		return
	}
	code, signaled, sig := p.ExitStatus()
	state, reason := backend.Succeeded, "ExitCode0"
	switch {
	case signaled:
		state, reason = backend.Failed, "Killed("+signalName(sig)+")"
	case code != 0:
		state, reason = backend.Failed, "ExitCode"+strconv.Itoa(code)
	}
	in.end(state, in.endReason(state, reason))
}

// end records how the instance ended and closes Done, once.
func (in *instance) end(state backend.State, reason string) {
	in.mu.Lock()
	if in.ended {
		in.mu.Unlock()
		return
	}
	in.ended = true
	in.mu.Unlock()
	in.spec.OnState(state, reason)
	close(in.done)
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return strconv.Itoa(int(s))
}

func (in *instance) Name() string { return in.spec.Name }

func (in *instance) ID() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strconv.Itoa(in.pid)
}

func (in *instance) Done() <-chan struct{} { return in.done }

func (in *instance) current() (p *proc.Process, exited chan struct{}, down, ended bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.p, in.exited, in.down, in.ended
}

// Kill ends the instance: all of it is killed (its cgroup, or its process
// group and marked descendants), or, while it is down, it is ended where it
// lies. It returns once nothing of it is left (see gone). An instance that
// ended by itself before the kill reached it (its wrapper exited rather
// than died of the SIGKILL) is ended all the same, but Kill says so
// (backend.ErrEnded): a kill fault that did not act must not pass for one
// that did.
func (in *instance) Kill(ctx context.Context) error {
	in.mu.Lock()
	p, down, ended, killed := in.p, in.down, in.ended, in.killed
	if !ended && !down {
		in.killed = true
	}
	in.mu.Unlock()
	switch {
	case ended && killed:
		return nil
	case ended:
		return fmt.Errorf("instance %s: %w", in.spec.Name, backend.ErrEnded)
	case down:
		in.end(backend.Failed, "Killed(SIGKILL)")
		return nil
	}
	// SIGKILL works on stopped and frozen processes too.
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-in.done:
	case <-ctx.Done():
		return fmt.Errorf("instance %s: waiting for it to end after SIGKILL: %w", in.spec.Name, ctx.Err())
	}
	if err := in.gone(ctx, p); err != nil {
		return err
	}
	if _, signaled, sig := p.ExitStatus(); !signaled || sig != syscall.SIGKILL {
		return fmt.Errorf("instance %s: %w", in.spec.Name, backend.ErrEnded)
	}
	return nil
}

// gone waits until nothing of the process p started is left, not even a
// zombie: in cgroup mode its leaf is empty and every process that was in it
// reaped; in process-group mode its group and its marked descendants are
// gone and reaped (Process.WaitGone). Something of it that outlives its
// kill by 30 s is an error.
func (in *instance) gone(ctx context.Context, p *proc.Process) error {
	ctx, cancel := context.WithTimeout(ctx, goneTimeout)
	defer cancel()
	if err := p.WaitGone(ctx); err != nil {
		return fmt.Errorf("instance %s: %w", in.spec.Name, err)
	}
	return nil
}

// goneTimeout bounds the wait for what was killed to be gone.
const goneTimeout = 30 * time.Second

// Down stops the instance (SIGTERM and grace, or SIGKILL; to its cgroup in
// cgroup mode) and waits until nothing of it is left, reaped included, so
// Up never starts the replacement beside anything of the old one; the
// instance is Pending until Up.
func (in *instance) Down(ctx context.Context, d backend.Down) error {
	// Checked and set at once: the process's own exit either came first
	// (the instance has ended) or is taken as this Down's.
	in.mu.Lock()
	p, exited, down, ended := in.p, in.exited, in.down, in.ended
	if !ended && !down {
		in.down = true
	}
	in.mu.Unlock()
	switch {
	case ended:
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	case down:
		return fmt.Errorf("instance %s is already down", in.spec.Name)
	}
	in.spec.OnState(backend.Pending, d.Reason)
	var err error
	if d.Grace > 0 {
		err = p.Terminate(d.Grace)
	} else {
		err = p.Kill()
	}
	// A process that ended by itself just before the signal is down, which
	// is what Down needs; any other failure leaves the instance as it was.
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		in.mu.Lock()
		in.down = false
		in.mu.Unlock()
		return err
	}
	select {
	case <-exited:
	case <-ctx.Done():
		return fmt.Errorf("instance %s: waiting for it to stop: %w", in.spec.Name, ctx.Err())
	}
	return in.gone(ctx, p)
}

// Up starts the wrapper again in the same output directory.
func (in *instance) Up(ctx context.Context) error {
	_, _, down, ended := in.current()
	switch {
	case ended:
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	case !down:
		return fmt.Errorf("instance %s is not down", in.spec.Name)
	}
	if err := in.start(); err != nil {
		in.end(backend.Failed, "RestartFailed")
		return err
	}
	return nil
}

// Ready holds once Up has returned: a process has no health of its own.
func (in *instance) Ready(ctx context.Context) error { return nil }

// Freeze stops all of the instance: cgroup.freeze on its leaf, returning
// once the kernel says it is frozen, or SIGSTOP to its process group and
// marked descendants.
func (in *instance) Freeze(ctx context.Context) error {
	p, _, down, ended := in.current()
	if ended || down {
		return fmt.Errorf("instance %s is not running", in.spec.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	defer cancel()
	return p.FreezeContext(ctx)
}

// Thaw undoes Freeze.
func (in *instance) Thaw(ctx context.Context) error {
	p, _, down, ended := in.current()
	if ended || down {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	defer cancel()
	if err := p.ThawContext(ctx); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// freezeTimeout bounds a freeze or a thaw: the kernel confirms either in
// milliseconds.
const freezeTimeout = 10 * time.Second

// Collect has nothing to do: the output directory is in the run directory.
func (in *instance) Collect(ctx context.Context) error { return nil }

// Delete kills what is left of the instance, including anything it left
// behind after its main process ended, and closes Done. Processes that
// outlived the end of the instance's script are leaks: they are reported
// (system/leaked-processes.txt) before they are killed.
func (in *instance) Delete(ctx context.Context) error {
	p, _, _, ended := in.current()
	if !ended {
		// It may end by itself meanwhile: either way it is ended now.
		if err := in.Kill(ctx); !errors.Is(err, backend.ErrEnded) {
			return err
		}
	}
	// What outlived the script: in its cgroup whatever it did, else in its
	// group or carrying its marker. After a kill it is dying, not left, and
	// so is what the script itself killed just before it ended.
	in.mu.Lock()
	killed := in.killed
	in.mu.Unlock()
	if left, err := p.Members(); err == nil && in.leaked != nil && !killed {
		if left = proc.Left(left); len(left) > 0 {
			in.leaked(in.spec.Name, left)
		}
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return in.gone(ctx, p)
}
