package backend

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// TargetHook is one hook of a named target.
type TargetHook struct {
	Target string
	// Owned is a target the run starts and stops (lifecycle: run).
	Owned  bool
	Which  string // start, stop, health
	Script string
	// Env is added to the run's environment (CHAOS_TARGET is set).
	Env     []string
	Timeout time.Duration
	// Quiet leaves the hook out of the target's log (health polls).
	Quiet bool
	// OnStart is told the hook's process the moment it has started, when
	// the hook runs under the run's supervisor (a target the run owns): in
	// cgroup mode, what it starts stays in that process's cgroup.
	OnStart func(p *proc.Process)
	// Prefix is a command the hook's shell runs under (shell.Spec.Prefix).
	Prefix []string
}

// RunHook runs a target's hook in the hook directory with the run's
// environment, logging to logs/<target>.log. What a hook of a target the
// run does not own starts outlives the run: it runs without the run's
// CHAOS_RUN_ID marker, or leak checks and chaos cleanup would take the
// restarted system for the run's own leftovers. A hook that fails is an
// error naming the target, the hook and its last lines of output.
func (r *Run) RunHook(ctx context.Context, h TargetHook) (*shell.Result, error) {
	env := envvar.Set(r.Env, "CHAOS_TARGET", h.Target)
	for _, kv := range h.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = envvar.Set(env, k, v)
	}
	runner := r.Runner
	if !h.Owned {
		env = envvar.Unset(env, "CHAOS_RUN_ID")
		runner = shell.Runner{}
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = r.HookTimeout
	}
	spec := shell.Spec{Name: fmt.Sprintf("target %s %s hook", h.Target, h.Which), Script: h.Script, Dir: r.HookDir, Env: env, Timeout: timeout,
		CgroupName: "target-" + h.Target + "-" + h.Which, OnStart: h.OnStart, Prefix: h.Prefix}
	if !h.Quiet {
		if log, err := os.OpenFile(r.Dir.LogFile(h.Target), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			defer log.Close()
			fmt.Fprintf(log, "%s chaos: running %s hook\n", rundir.LogTime(time.Now()), h.Which)
			spec.Log = log
		}
	}
	res, err := runner.Run(ctx, spec)
	if err != nil {
		return res, err
	}
	if !res.OK() {
		return res, fmt.Errorf("target %s %s hook %s: %s", h.Target, h.Which, res.Describe(timeout), LastLines(res.Output, 3))
	}
	return res, nil
}

// LastLines joins the last n lines of s with " | ", for one-line errors.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
