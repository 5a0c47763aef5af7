// Package local runs instances as process groups on this machine. Each
// instance is the harness's wrapper script running the workload's script in
// the instance's own output directory, which lives in the run directory, so
// collecting it costs nothing and it survives restarts.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/proc"
)

// Backend starts instances through a process supervisor.
type Backend struct {
	Sup *proc.Supervisor
}

// New returns a local backend.
func New(sup *proc.Supervisor) *Backend { return &Backend{Sup: sup} }

// Create starts the instance's wrapper. The Created and Running states are
// reported around the start, so even an instance that lives 20 ms shows all
// of its states.
func (b *Backend) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	for _, d := range []string{spec.OutputDir, spec.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	in := &instance{b: b, spec: spec, done: make(chan struct{})}
	spec.OnState(backend.Created, "")
	if err := in.start(); err != nil {
		spec.OnState(backend.Failed, "StartFailed")
		close(in.done)
		return nil, err
	}
	return in, nil
}

// Capture has nothing to add: process captures are the engine's, since
// named process targets exist on every backend.
func (b *Backend) Capture(ctx context.Context, systemDir string) error { return nil }

// Close does nothing; the supervisor is the engine's.
func (b *Backend) Close() error { return nil }

type instance struct {
	b    *Backend
	spec backend.InstanceSpec

	mu         sync.Mutex
	p          *proc.Process
	pid        int
	restarting bool
	ended      bool
	done       chan struct{}
	// exited is closed when the current incarnation's process exits.
	exited chan struct{}
}

func (in *instance) start() error {
	log, err := os.OpenFile(filepath.Join(in.spec.LogDir, "process.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", in.spec.Wrapper)
	cmd.Dir = in.spec.OutputDir
	cmd.Env = in.spec.Env
	cmd.Stdout, cmd.Stderr = log, log
	p, err := in.b.Sup.Start(cmd)
	log.Close()
	if err != nil {
		return fmt.Errorf("starting instance %s: %w", in.spec.Name, err)
	}
	exited := make(chan struct{})
	in.mu.Lock()
	in.p, in.pid, in.exited = p, p.Pid, exited
	in.mu.Unlock()
	in.spec.OnState(backend.Running, "Started")
	go in.watch(p, exited)
	return nil
}

// watch turns the process's exit into a state the moment it happens.
func (in *instance) watch(p *proc.Process, exited chan struct{}) {
	<-p.Done()
	in.mu.Lock()
	restarting := in.restarting
	in.mu.Unlock()
	close(exited)
	if restarting {
		return
	}
	in.end(p)
}

// end records how the instance ended and closes Done, once.
func (in *instance) end(p *proc.Process) {
	in.mu.Lock()
	if in.ended {
		in.mu.Unlock()
		return
	}
	in.ended = true
	in.mu.Unlock()
	code, signaled, sig := p.ExitStatus()
	state, reason := backend.Succeeded, "ExitCode0"
	switch {
	case signaled:
		state, reason = backend.Failed, "Killed("+signalName(sig)+")"
	case code != 0:
		state, reason = backend.Failed, "ExitCode"+strconv.Itoa(code)
	}
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

func (in *instance) SystemID() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strconv.Itoa(in.pid)
}

func (in *instance) Done() <-chan struct{} { return in.done }

func (in *instance) current() (*proc.Process, chan struct{}, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.p, in.exited, in.ended
}

func (in *instance) Kill(ctx context.Context) error {
	p, _, ended := in.current()
	if ended {
		return nil
	}
	// A frozen process must be thawed for SIGKILL to take effect promptly
	// in all of its children; SIGKILL itself works on stopped processes.
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-in.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (in *instance) Restart(ctx context.Context, r backend.Restart) error {
	p, exited, ended := in.current()
	if ended {
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	}
	in.mu.Lock()
	in.restarting = true
	in.mu.Unlock()
	reason := "Restarting"
	if r.Hold > 0 {
		reason = "Outage"
	}
	in.spec.OnState(backend.Pending, reason)
	var err error
	if r.Graceful {
		err = p.Terminate(r.Grace)
	} else {
		err = p.Kill()
	}
	// A process that ended by itself just before the signal is already
	// down, which is what a restart needs; any other failure leaves the
	// instance as it was.
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		in.mu.Lock()
		in.restarting = false
		in.mu.Unlock()
		select {
		case <-exited:
			in.end(p)
		default:
		}
		return err
	}
	select {
	case <-exited:
	case <-ctx.Done():
	}
	if r.Hold > 0 {
		t := time.NewTimer(r.Hold)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	in.mu.Lock()
	in.restarting = false
	in.mu.Unlock()
	if err := in.start(); err != nil {
		in.mu.Lock()
		in.ended = true
		in.mu.Unlock()
		in.spec.OnState(backend.Failed, "RestartFailed")
		close(in.done)
		return err
	}
	return nil
}

func (in *instance) Freeze(ctx context.Context) error {
	p, _, ended := in.current()
	if ended {
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	}
	return p.Freeze()
}

func (in *instance) Thaw(ctx context.Context) error {
	p, _, ended := in.current()
	if ended {
		return nil
	}
	return p.Thaw()
}

// Collect has nothing to do: the output directory is in the run directory.
func (in *instance) Collect(ctx context.Context) error { return nil }

// Delete kills what is left of the instance, including anything it left
// behind after its main process ended.
func (in *instance) Delete(ctx context.Context) error {
	p, _, ended := in.current()
	if !ended {
		if err := in.Kill(ctx); err != nil {
			return err
		}
		return nil
	}
	// Children of the instance that outlived it still carry its marker.
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
