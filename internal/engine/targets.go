package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// defaultHealthTimeout bounds the wait for a target to become healthy.
const defaultHealthTimeout = 120 * time.Second

// targetHandle is a named process target of the adapter.
type targetHandle struct {
	e    *engine
	name string
	spec *adapter.Target
	// frozenPid is set while a freeze holds the target stopped.
	frozenPid int
}

// pidFile is the target's pid file, with $VARS expanded from the run's
// environment (so it can live under $CHAOS_RUN_DIR) and a relative path
// taken from where hooks run.
func (t *targetHandle) pidFile() string { return t.e.hostPath(t.spec.PidFile) }

// pid reads the target's pid file.
func (t *targetHandle) pid() (int, error) {
	data, err := os.ReadFile(t.pidFile())
	if err != nil {
		return 0, fmt.Errorf("target %s: reading pid file: %w", t.name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("target %s: pid file %s holds %q, not a pid", t.name, t.pidFile(), strings.TrimSpace(string(data)))
	}
	return pid, nil
}

// livePid returns the pid of the running target.
func (t *targetHandle) livePid() (int, error) {
	pid, err := t.pid()
	if err != nil {
		return 0, err
	}
	if !proc.Alive(pid) {
		return 0, fmt.Errorf("target %s: pid %d from %s is not running", t.name, pid, t.pidFile())
	}
	return pid, nil
}

func (t *targetHandle) env() []string {
	env := setEnv(t.e.hookEnv(), "CHAOS_TARGET", t.name, "CHAOS_PID_FILE", t.pidFile())
	if t.spec.Lifecycle != "run" {
		// What a hook of a target the run does not own starts outlives the
		// run; CHAOS_RUN_ID is the run's process marker, so it is left out.
		env = unsetEnv(env, "CHAOS_RUN_ID")
	}
	return env
}

func (t *targetHandle) logWriter() *os.File {
	f, err := os.OpenFile(t.e.dir.LogFile(t.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return f
}

// runHook runs one of the target's hooks, logging to logs/<target>.log.
func (t *targetHandle) runHook(ctx context.Context, which, script string) (*shell.Result, error) {
	log := t.logWriter()
	if log != nil {
		defer log.Close()
		fmt.Fprintf(log, "%s chaos: running %s hook\n", rundir.LogTime(time.Now()), which)
	}
	spec := shell.Spec{Name: fmt.Sprintf("target %s %s hook", t.name, which), Script: script, Dir: t.e.hookDir(), Env: t.env(), Timeout: t.e.hookTimeout()}
	if log != nil {
		spec.Log = log
	}
	// A target the run does not own outlives it: what its hooks start must
	// not carry the run's marker, or leak checks and chaos cleanup would
	// take the restarted system for the run's own leftovers.
	runner := t.e.runner
	if t.spec.Lifecycle != "run" {
		runner = shell.Runner{}
	}
	res, err := runner.Run(ctx, spec)
	if err != nil {
		return res, err
	}
	if !res.OK() {
		return res, fmt.Errorf("target %s %s hook %s: %s", t.name, which, res.Describe(spec.Timeout), lastLines(res.Output, 3))
	}
	return res, nil
}

// healthy runs the health hook once; without one, a live pid is healthy.
func (t *targetHandle) healthy(ctx context.Context) bool {
	if t.spec.Health == "" {
		_, err := t.livePid()
		return err == nil
	}
	res, err := t.e.runner.Run(ctx, shell.Spec{Name: "target " + t.name + " health hook", Script: t.spec.Health, Dir: t.e.hookDir(), Env: t.env(), Timeout: 10 * time.Second})
	return err == nil && res.OK()
}

// waitHealthy polls the health hook with a short, growing interval: a
// health check is a question only the system can answer.
func (t *targetHandle) waitHealthy(ctx context.Context) error {
	limit := defaultHealthTimeout
	if t.spec.HealthTimeout > 0 {
		limit = t.spec.HealthTimeout.D()
	}
	deadline := time.Now().Add(limit)
	interval := 20 * time.Millisecond
	for {
		if t.healthy(ctx) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("target %s did not become healthy within %s", t.name, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
		if interval < 500*time.Millisecond {
			interval *= 2
		}
	}
}

// start runs the start hook, waits until the target is healthy and returns
// its new pid.
func (t *targetHandle) start(ctx context.Context) (int, error) {
	if t.spec.Start == "" {
		return 0, fmt.Errorf("target %s has no start hook, so it cannot be started again", t.name)
	}
	if _, err := t.runHook(ctx, "start", t.spec.Start); err != nil {
		return 0, err
	}
	if err := t.waitHealthy(ctx); err != nil {
		return 0, err
	}
	return t.livePid()
}

// stop ends the target: the stop hook when there is one, else SIGTERM and,
// after grace, SIGKILL.
func (t *targetHandle) stop(ctx context.Context, grace time.Duration) error {
	if t.spec.Stop != "" {
		_, err := t.runHook(ctx, "stop", t.spec.Stop)
		return err
	}
	pid, err := t.livePid()
	if err != nil {
		return nil // already down
	}
	return t.terminate(ctx, pid, grace)
}

// signal sends sig to the target: to its whole process group when it leads
// one (a server started with setsid), so its children go with it, else to
// the process alone.
func (t *targetHandle) signal(pid int, sig syscall.Signal) error {
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid && pid > 1 {
		if err := syscall.Kill(-pid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return proc.SignalExternal(pid, sig)
}

func (t *targetHandle) terminate(ctx context.Context, pid int, grace time.Duration) error {
	leader := isGroupLeader(pid)
	_ = t.signal(pid, syscall.SIGCONT)
	if err := t.signal(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("target %s: SIGTERM to %d: %w", t.name, pid, err)
	}
	if !waitExit(ctx, pid, grace) {
		if err := t.kill(ctx, pid); err != nil {
			return err
		}
	}
	if leader {
		waitGroupGone(pid, grace)
	}
	return nil
}

func isGroupLeader(pid int) bool {
	pgid, err := syscall.Getpgid(pid)
	return err == nil && pgid == pid
}

// waitGroupGone waits until no process of the group led by pgid is left:
// the leader going first does not mean its children have handled the
// signal yet. Stragglers past the grace get SIGKILL.
func waitGroupGone(pgid int, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for {
		if len(proc.GroupMembers(pgid)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			for i := 0; i < 100 && len(proc.GroupMembers(pgid)) > 0; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (t *targetHandle) kill(ctx context.Context, pid int) error {
	if err := t.signal(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("target %s: SIGKILL to %d: %w", t.name, pid, err)
	}
	if !waitExit(ctx, pid, 30*time.Second) {
		return fmt.Errorf("target %s: pid %d still alive 30s after SIGKILL", t.name, pid)
	}
	waitGroupGone(pid, 5*time.Second)
	return nil
}

// waitExit waits until pid has exited, at most limit. It uses a pidfd, which
// becomes readable the moment the process exits, so no polling is needed;
// when pidfds are unavailable it falls back to checking /proc.
func waitExit(ctx context.Context, pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return !proc.Alive(pid) || pollExit(ctx, pid, deadline)
	}
	defer unix.Close(fd)
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return !proc.Alive(pid)
		}
		step := min(remaining, 100*time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(step.Milliseconds())+1)
		if err != nil && err != unix.EINTR {
			return pollExit(ctx, pid, deadline)
		}
		// A readable pidfd means exited; a zombie not yet reaped by the
		// reaper counts as gone too.
		if n > 0 || !proc.Alive(pid) {
			return true
		}
	}
}

func pollExit(ctx context.Context, pid int, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !proc.Alive(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return !proc.Alive(pid)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// copyTargetLog copies the target's own log file, when it names one, to
// logs/<target>.log.
func (t *targetHandle) copyLog() {
	if t.spec.Log == "" {
		return
	}
	src := t.e.hostPath(t.spec.Log)
	data, err := os.ReadFile(src)
	if err != nil {
		return
	}
	f := t.logWriter()
	if f == nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s chaos: contents of %s\n", rundir.LogTime(time.Now()), filepath.Clean(src))
	_, _ = f.Write(t.e.redact.RedactBytes(data))
}

// hostPath expands $VARS in a path from the run's environment and makes a
// relative path relative to the directory hooks run in.
func (e *engine) hostPath(p string) string {
	p = e.expand(p)
	if p != "" && !filepath.IsAbs(p) {
		p = filepath.Join(e.hookDir(), p)
	}
	return p
}
