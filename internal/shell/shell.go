// Package shell runs the harness's shell scripts (hooks, checks, preflight)
// with a timeout, in their own process group, and keeps what they print;
// with a supervisor it starts them under it. The running itself is package
// script, which imports no supervisor.
package shell

import (
	"context"
	"io"
	"os/exec"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/script"
)

// DefaultTimeout bounds a script that sets no timeout.
const DefaultTimeout = script.DefaultTimeout

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
type Result = script.Result

// Runner starts scripts, through a process supervisor when one is given so
// the harness's orphan reaper never takes their exit status.
type Runner struct {
	Sup *proc.Supervisor
}

// Run runs spec.Script with /bin/sh -c. An error means the script could not
// be started; a script that fails or times out is reported in Result.
func (r Runner) Run(ctx context.Context, spec Spec) (*Result, error) {
	s := script.Spec{Name: spec.Name, Script: spec.Script, Dir: spec.Dir, Env: spec.Env,
		Timeout: spec.Timeout, Log: spec.Log, Stdin: spec.Stdin, SplitStdout: spec.SplitStdout, Prefix: spec.Prefix}
	return script.Run(ctx, s, r.start(spec))
}

// RunScript runs a script that needs no cgroup of its own, so a Runner is a
// script.Runner (what the verdict takes for shell checks).
func (r Runner) RunScript(ctx context.Context, s script.Spec) (*Result, error) {
	return script.Run(ctx, s, r.start(Spec{}))
}

// start is the supervisor's start, or nil (a plain process group) without one.
func (r Runner) start(spec Spec) script.StartFunc {
	if r.Sup == nil {
		return nil
	}
	return func(cmd *exec.Cmd) (script.Started, error) {
		var opts []proc.StartOption
		if spec.CgroupName != "" {
			opts = append(opts, proc.CgroupName(spec.CgroupName))
		}
		p, err := r.Sup.Start(cmd, opts...)
		if err != nil {
			return script.Started{}, err
		}
		if spec.OnStart != nil {
			spec.OnStart(p)
		}
		return script.Started{
			Done: p.Done(), Flushed: p.Waited(), Kill: func() { _ = p.Kill() },
			Status: func() int {
				code, signaled, sig := p.ExitStatus()
				if signaled {
					return 128 + int(sig)
				}
				return code
			},
		}, nil
	}
}
