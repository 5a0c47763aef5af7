// Package script runs a shell script with a timeout, in its own process
// group, and keeps what it prints. It imports no process supervisor, so what
// reads a run (shell checks in chaos evaluate) can run scripts without
// linking the harness's process management; package shell starts the same
// scripts under the supervisor during a run.
package script

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DefaultTimeout bounds a script that sets no timeout.
const DefaultTimeout = 60 * time.Second

// maxOutput is how much of a script's output is kept in memory; the log
// sink still sees all of it.
const maxOutput = 256 << 10

// Spec is one script to run.
type Spec struct {
	// Name says what the script is in errors, e.g. "hook instance.create".
	Name    string
	Script  string
	Dir     string
	Env     []string
	Timeout time.Duration
	// Log, when set, receives everything the script prints as it prints it.
	Log io.Writer
	// Stdin, when set, is the script's standard input.
	Stdin io.Reader
	// SplitStdout keeps standard output apart from standard error, for hooks
	// whose output is data (a system id, a state).
	SplitStdout bool
	// Prefix, when set, is a command the script's /bin/sh runs under (it
	// must exec what follows it): nsenter --net=NS -- for a hook that
	// starts a target in a network namespace of its own.
	Prefix []string
}

// Result is what a script did.
type Result struct {
	ExitCode int
	// Output is what the script printed (stdout and stderr together, or
	// stderr only with SplitStdout), at most the last 256 KiB.
	Output string
	// Stdout is standard output when SplitStdout was set.
	Stdout   string
	TimedOut bool
	Duration time.Duration
}

// OK reports whether the script exited 0 in time.
func (r *Result) OK() bool { return r.ExitCode == 0 && !r.TimedOut }

// Describe says how a script ended, for details and errors.
func (r *Result) Describe(timeout time.Duration) string {
	if r.TimedOut {
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		return fmt.Sprintf("timed out after %s", timeout)
	}
	return fmt.Sprintf("exited %d", r.ExitCode)
}

// Started is a started script as its starter sees it.
type Started struct {
	// Done is closed when the script has exited.
	Done <-chan struct{}
	// Flushed, when not nil, is closed once its output has been copied.
	Flushed <-chan struct{}
	// Kill kills the script and what it started.
	Kill func()
	// Status is the exit code once Done is closed (128+n for signal n).
	Status func() int
}

// StartFunc starts cmd; package shell passes one that starts it under the
// process supervisor.
type StartFunc func(cmd *exec.Cmd) (Started, error)

// Runner runs scripts; Plain is the one without a supervisor.
type Runner interface {
	RunScript(ctx context.Context, spec Spec) (*Result, error)
}

// Plain runs scripts as plain child processes in their own process group.
type Plain struct{}

// RunScript runs spec with Run and no supervisor.
func (Plain) RunScript(ctx context.Context, spec Spec) (*Result, error) {
	return Run(ctx, spec, nil)
}

// Run runs spec.Script with /bin/sh -c, started by start (own process group
// when nil). An error means the script could not be started or ctx ended; a
// script that fails or times out is reported in Result.
func Run(ctx context.Context, spec Spec, start StartFunc) (*Result, error) {
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	argv := append(append([]string{}, spec.Prefix...), "/bin/sh", "-c", spec.Script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdin = spec.Stdin
	out := &tail{max: maxOutput}
	var stdout *tail
	var w io.Writer = out
	if spec.Log != nil {
		w = io.MultiWriter(out, spec.Log)
	}
	cmd.Stderr = w
	if spec.SplitStdout {
		stdout = &tail{max: maxOutput}
		cmd.Stdout = stdout
		if spec.Log != nil {
			cmd.Stdout = io.MultiWriter(stdout, spec.Log)
		}
	} else {
		cmd.Stdout = w
	}
	if start == nil {
		start = startGroup
	}
	begin := time.Now()
	p, err := start(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot start: %w", spec.Name, err)
	}
	res := &Result{}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var ctxErr error
	select {
	case <-p.Done:
	case <-timer.C:
		res.TimedOut = true
		p.Kill()
		<-p.Done
	case <-ctx.Done():
		ctxErr = ctx.Err()
		p.Kill()
		<-p.Done
	}
	res.Duration = time.Since(begin)
	res.ExitCode = p.Status()
	waitFlushed(p.Flushed)
	res.Output = out.String()
	if ctxErr != nil {
		return res, fmt.Errorf("%s: %w", spec.Name, ctxErr)
	}
	if stdout != nil {
		res.Stdout = stdout.String()
	}
	return res, nil
}

// startGroup starts cmd in a process group of its own, so a kill reaches
// what the script started.
func startGroup(cmd *exec.Cmd) (Started, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Started{}, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return Started{
		Done: done,
		Kill: func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) },
		Status: func() int {
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return cmd.ProcessState.ExitCode()
		},
	}, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// outputGrace bounds the wait for a script's output after it exited: a
// background child that keeps the output open must not hold the harness.
const outputGrace = 2 * time.Second

// waitFlushed waits until everything the script printed has been copied.
func waitFlushed(flushed <-chan struct{}) {
	if flushed == nil {
		return
	}
	select {
	case <-flushed:
	case <-time.After(outputGrace):
	}
}
