// Package shell runs the harness's shell scripts (hooks, checks, preflight)
// with a timeout, in their own process group, and keeps what they print.
package shell

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
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
	// CgroupName names the cgroup leaf the script starts in when the
	// runner's supervisor uses cgroups (see proc.CgroupName).
	CgroupName string
	// Prefix, when set, is a command the script's /bin/sh runs under (it
	// must exec what follows it): nsenter --net=NS -- for a hook that
	// starts a target in a network namespace of its own.
	Prefix []string
	// OnStart, when set and the runner has a supervisor, is called with
	// the script's process the moment it has started: what the script
	// starts in the background stays in that process's cgroup
	// (Process.Cgroup) after the script has exited.
	OnStart func(p *proc.Process)
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

// Runner starts scripts, through a process supervisor when one is given so
// the harness's orphan reaper never takes their exit status.
type Runner struct {
	Sup *proc.Supervisor
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

// Run runs spec.Script with /bin/sh -c. An error means the script could not
// be started; a script that fails or times out is reported in Result.
func (r Runner) Run(ctx context.Context, spec Spec) (*Result, error) {
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
	start := time.Now()
	var done <-chan struct{}
	var flushed <-chan struct{}
	var kill func()
	var status func() int
	if r.Sup != nil {
		var opts []proc.StartOption
		if spec.CgroupName != "" {
			opts = append(opts, proc.CgroupName(spec.CgroupName))
		}
		p, err := r.Sup.Start(cmd, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot start: %w", spec.Name, err)
		}
		if spec.OnStart != nil {
			spec.OnStart(p)
		}
		done, flushed, kill = p.Done(), p.Waited(), func() { _ = p.Kill() }
		status = func() int {
			code, signaled, sig := p.ExitStatus()
			if signaled {
				return 128 + int(sig)
			}
			return code
		}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("%s: cannot start: %w", spec.Name, err)
		}
		ch := make(chan struct{})
		go func() { _ = cmd.Wait(); close(ch) }()
		done = ch
		kill = func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		status = func() int {
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return cmd.ProcessState.ExitCode()
		}
	}
	res := &Result{}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		res.TimedOut = true
		kill()
		<-done
	case <-ctx.Done():
		kill()
		<-done
		res.Duration = time.Since(start)
		res.ExitCode = status()
		waitFlushed(flushed)
		res.Output = out.String()
		return res, fmt.Errorf("%s: %w", spec.Name, ctx.Err())
	}
	res.Duration = time.Since(start)
	res.ExitCode = status()
	waitFlushed(flushed)
	res.Output = out.String()
	if stdout != nil {
		res.Stdout = stdout.String()
	}
	return res, nil
}

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
