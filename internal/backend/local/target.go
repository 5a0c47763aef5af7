package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// defaultHealthTimeout bounds the wait for a target to become healthy.
const defaultHealthTimeout = 120 * time.Second

// target is a named process target: a pid file, and hooks that start, stop
// and check it. It is its own handle.
type target struct {
	b    *Backend
	name string
	spec *adapter.Target

	mu sync.Mutex
	// downPid is the pid Down took down, so Up can tell the replacement.
	downPid int
	// starting is the result of a start hook Up launched, until Ready.
	starting chan error
	// frozen is the pid a freeze stopped, for its thaw.
	frozen int
	// snap is the target's state taken before the run stopped it.
	snap *targetState
}

func (t *target) run() *backend.Run { return t.b.run }

// pidFile is the target's pid file, with $VARS expanded from the run's
// environment (so it can live under $CHAOS_RUN_DIR) and a relative path
// taken from where hooks run.
func (t *target) pidFile() string { return t.run().HostPath(t.spec.PidFile) }

// pid reads the target's pid file.
func (t *target) pid() (int, error) {
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
func (t *target) livePid() (int, error) {
	pid, err := t.pid()
	if err != nil {
		return 0, err
	}
	if !proc.Alive(pid) {
		return 0, fmt.Errorf("target %s: pid %d from %s is not running", t.name, pid, t.pidFile())
	}
	return pid, nil
}

func (t *target) owned() bool { return t.spec.Lifecycle == "run" }

func (t *target) env() []string {
	env := envvar.Set(t.run().Env, "CHAOS_TARGET", t.name, "CHAOS_PID_FILE", t.pidFile())
	if !t.owned() {
		env = envvar.Unset(env, "CHAOS_RUN_ID")
	}
	return env
}

func (t *target) logWriter() *os.File {
	f, err := os.OpenFile(t.run().Dir.LogFile(t.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return f
}

// runHook runs one of the target's hooks, logging to logs/<target>.log.
func (t *target) runHook(ctx context.Context, which, script string) (*shell.Result, error) {
	return t.run().RunHook(ctx, backend.TargetHook{Target: t.name, Owned: t.owned(), Which: which, Script: script, Env: []string{"CHAOS_PID_FILE=" + t.pidFile()}})
}

// healthy runs the health hook once; without one, a live pid is healthy.
func (t *target) healthy(ctx context.Context) bool {
	if t.spec.Health == "" {
		_, err := t.livePid()
		return err == nil
	}
	_, err := t.run().RunHook(ctx, backend.TargetHook{Target: t.name, Owned: t.owned(), Which: "health", Script: t.spec.Health, Env: []string{"CHAOS_PID_FILE=" + t.pidFile()}, Timeout: 10 * time.Second, Quiet: true})
	return err == nil
}

func (t *target) healthTimeout() time.Duration {
	if t.spec.HealthTimeout > 0 {
		return t.spec.HealthTimeout.D()
	}
	return defaultHealthTimeout
}

// waitHealthy polls the health hook with a short, growing interval: a
// health check is a question only the system can answer.
func (t *target) waitHealthy(ctx context.Context) error {
	limit := t.healthTimeout()
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

// Name is the target's name.
func (t *target) Name() string { return t.name }

// ID is the target's pid now, "" when its pid file cannot be read.
func (t *target) ID() string {
	if pid, err := t.pid(); err == nil {
		return strconv.Itoa(pid)
	}
	return ""
}

// Handles is the target itself: one process.
func (t *target) Handles(ctx context.Context) ([]backend.Handle, error) {
	return []backend.Handle{t}, nil
}

// Start runs the start hook of a target the run owns, waits until it is
// healthy and records target.started with its pid.
func (t *target) Start(ctx context.Context) error {
	if t.spec.Start == "" {
		return fmt.Errorf("target %s has no start hook, so it cannot be started", t.name)
	}
	if _, err := t.runHook(ctx, "start", t.spec.Start); err != nil {
		return err
	}
	if err := t.waitHealthy(ctx); err != nil {
		return err
	}
	pid, err := t.livePid()
	if err != nil {
		return err
	}
	t.run().Record("target.started", rundir.F("target", t.name), rundir.F("pid", pid))
	return nil
}

// Stop ends a target the run owns, after taking its end-of-run state for
// system/targets.json: with the stop hook when there is one, else SIGTERM
// and, after the default grace, SIGKILL.
func (t *target) Stop(ctx context.Context) error {
	t.mu.Lock()
	t.snap = ptr(t.state(ctx))
	t.mu.Unlock()
	if t.spec.Stop != "" {
		_, err := t.runHook(ctx, "stop", t.spec.Stop)
		return err
	}
	pid, err := t.livePid()
	if err != nil {
		return nil // already down
	}
	return t.terminate(ctx, pid, 10*time.Second)
}

func ptr[T any](v T) *T { return &v }

// Down takes the target's process down: SIGTERM and grace, or SIGKILL. It
// returns once the process (and the group it leads) is gone.
func (t *target) Down(ctx context.Context, d backend.Down) error {
	pid, err := t.livePid()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.downPid = pid
	t.mu.Unlock()
	if d.Grace > 0 {
		return t.terminate(ctx, pid, d.Grace)
	}
	return t.kill(ctx, pid)
}

// Up launches the start hook and returns once the pid file names a live
// process other than the one Down took down: started, not yet healthy. A
// start hook that itself waits for health goes on aside until Ready.
func (t *target) Up(ctx context.Context) error {
	if t.spec.Start == "" {
		return fmt.Errorf("target %s has no start hook, so it cannot be started again", t.name)
	}
	t.mu.Lock()
	old, prev := t.downPid, t.starting
	t.mu.Unlock()
	// A start hook an earlier Up launched (a crash loop killed what it
	// started) finishes first: two start hooks never race.
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan error, 1)
	t.mu.Lock()
	t.starting = done
	t.mu.Unlock()
	go func() {
		_, err := t.runHook(context.WithoutCancel(ctx), "start", t.spec.Start)
		done <- err
	}()
	deadline := time.Now().Add(t.healthTimeout())
	hookDone := false
	for {
		p, err := t.livePid()
		if err == nil && p != old {
			return nil
		}
		if !hookDone {
			select {
			case herr := <-done:
				done <- herr // for Ready
				if herr != nil {
					return herr
				}
				// A daemon writes its pid file a moment after the hook
				// that started it has returned.
				hookDone = true
			default:
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("its pid file still names pid %d, which was taken down", p)
			}
			return fmt.Errorf("target %s did not start within %s: %w", t.name, t.healthTimeout(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Ready waits for the start hook Up launched to finish, then until the
// target is healthy.
func (t *target) Ready(ctx context.Context) error {
	t.mu.Lock()
	starting := t.starting
	t.starting = nil
	t.mu.Unlock()
	if starting != nil {
		select {
		case err := <-starting:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return t.waitHealthy(ctx)
}

// Freeze stops the target's process (its whole group when it leads one)
// with SIGSTOP; Thaw sends SIGCONT.
func (t *target) Freeze(ctx context.Context) error {
	pid, err := t.livePid()
	if err != nil {
		return err
	}
	if err := t.signal(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("target %s: SIGSTOP to %d: %w", t.name, pid, err)
	}
	t.mu.Lock()
	t.frozen = pid
	t.mu.Unlock()
	return nil
}

func (t *target) Thaw(ctx context.Context) error {
	t.mu.Lock()
	pid := t.frozen
	t.frozen = 0
	t.mu.Unlock()
	if pid == 0 {
		return nil
	}
	if err := t.signal(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("target %s: SIGCONT to %d: %w", t.name, pid, err)
	}
	return nil
}

// signal sends sig to the target: to its whole process group when it leads
// one (a server started with setsid), so its children go with it, else to
// the process alone.
func (t *target) signal(pid int, sig syscall.Signal) error {
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid && pid > 1 {
		if err := syscall.Kill(-pid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return proc.SignalExternal(pid, sig)
}

func (t *target) terminate(ctx context.Context, pid int, grace time.Duration) error {
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
func (t *target) kill(ctx context.Context, pid int) error {
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

// copyLog copies the target's own log file, when it names one, to
// logs/<target>.log.
func (t *target) copyLog() {
	if t.spec.Log == "" {
		return
	}
	src := t.run().HostPath(t.spec.Log)
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
	_, _ = f.Write(t.run().Redact.Bytes(data))
}
