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

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
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
	// downPid is the pid Down took down and downStart its start time, so
	// Up can tell the replacement, even one the kernel gave the same pid.
	downPid   int
	downStart uint64
	// starting is the result of a start hook Up launched, until Ready.
	starting chan error
	// frozen is the pid a freeze stopped, for its thaw; frozenIn the start
	// hook whose cgroup a freeze froze.
	frozen   int
	frozenIn *proc.Process
	// snap is the target's state taken before the run stopped it.
	snap *targetState
	// starter is the start hook that started what runs now, for a target
	// the run owns: in cgroup mode its cgroup holds the target's
	// processes, whatever they fork (see contained).
	starter *proc.Process
	// startedAt is when the last start hook began: a pid file written
	// before it names an older process.
	startedAt time.Time
}

// contained returns the start hook whose cgroup holds the target, when the
// run owns the target and contains its processes in cgroups; nil when the
// target is signalled by its pid (an external target, process-group mode).
func (t *target) contained() *proc.Process {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.starter == nil || t.starter.Cgroup() == nil {
		return nil
	}
	return t.starter
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

func (t *target) logWriter() *os.File {
	f, err := os.OpenFile(t.run().Dir.LogFile(t.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return f
}

// runHook runs one of the target's hooks, logging to logs/<target>.log. A
// start hook of a target the run owns runs in a cgroup of its own (in
// cgroup mode), which becomes the target's: the daemon it starts and
// everything that forks stay in it.
func (t *target) runHook(ctx context.Context, which, script string) (*shell.Result, error) {
	h := backend.TargetHook{Target: t.name, Owned: t.owned(), Which: which, Script: script, Env: []string{"CHAOS_PID_FILE=" + t.pidFile()}}
	if which == "start" {
		t.mu.Lock()
		// A second's slack: file systems keep mtimes at coarser grain.
		t.startedAt = time.Now().Add(-time.Second)
		t.mu.Unlock()
	}
	if which == "start" && t.owned() {
		h.Prefix = t.b.netPrefix(t.name)
		h.OnStart = func(p *proc.Process) {
			t.mu.Lock()
			t.starter = p
			t.mu.Unlock()
		}
	}
	return t.run().RunHook(ctx, h)
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

// notYet is a readiness check that may still pass: the target is alive
// but does not serve yet.
type notYet struct{ error }

func (n notYet) Unwrap() error { return n.error }

// waitReady waits until the target is ready, and returns its pid: its
// health check passes (polled with a short, growing interval: a question
// only the system can answer) and it is proven to be what the run started
// (see proven). A target that exits meanwhile is an error at once, saying
// why where it can (the port it could not bind), instead of a health check
// another server answers.
func (t *target) waitReady(ctx context.Context) (int, error) {
	limit := t.healthTimeout()
	deadline := time.Now().Add(limit)
	interval := 20 * time.Millisecond
	var last error
	for {
		if err := t.exited(); err != nil {
			return 0, err
		}
		if t.healthy(ctx) {
			pid, err := t.proven()
			if err == nil {
				return pid, nil
			}
			if !errors.As(err, new(notYet)) {
				return 0, err
			}
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return 0, fmt.Errorf("target %s was not ready within %s: %w", t.name, limit, last)
			}
			return 0, fmt.Errorf("target %s did not become healthy within %s", t.name, limit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(interval):
		}
		if interval < 500*time.Millisecond {
			interval *= 2
		}
	}
}

// exited returns an error when the process the last start hook started
// has exited: in cgroup mode the start hook's cgroup is empty; otherwise
// the pid file, written since that start, names a process that is gone.
// A pid file not yet written (or older than the start) says nothing.
func (t *target) exited() error {
	if p := t.contained(); p != nil {
		if pop, err := p.Cgroup().Populated(); err == nil && !pop {
			pid, _ := t.pid()
			return t.exitError(pid)
		}
		return nil
	}
	t.mu.Lock()
	since := t.startedAt
	t.mu.Unlock()
	fi, err := os.Stat(t.pidFile())
	if err != nil || fi.ModTime().Before(since) {
		return nil
	}
	pid, err := t.pid()
	if err != nil || proc.Alive(pid) {
		return nil
	}
	return t.exitError(pid)
}

// exitError says that the target exited before it was ready, with the
// port it could not serve on when it declares one (and who holds it), and
// the line of its log that says why.
func (t *target) exitError(pid int) error {
	msg := fmt.Sprintf("target %s exited before it was ready", t.name)
	if pid > 0 {
		msg += fmt.Sprintf(" (pid %d from %s is not running)", pid, t.pidFile())
	}
	if port, err := t.listenPort(); err == nil && port > 0 {
		msg += fmt.Sprintf(": it could not serve on port %d (listen: %s)", port, t.spec.Listen)
		if holders := t.portHolders(port); holders != "" {
			msg += ", which is held by " + holders
		}
	}
	if line := t.logReason(); line != "" {
		msg += "; its log says: " + line
	}
	return errors.New(msg)
}

// listenPort is the port of the target's listen field, 0 without one.
func (t *target) listenPort() (int, error) {
	if t.spec.Listen == "" {
		return 0, nil
	}
	v := strings.TrimSpace(t.run().Expand(t.spec.Listen))
	p := v
	if _, after, ok := strings.Cut(v, "]:"); ok { // [::1]:8080
		p = after
	} else if i := strings.LastIndexByte(v, ':'); i >= 0 {
		p = v[i+1:]
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("target %s: listen %q (%q after expanding $VARS) is not a port or host:port (adapter field targets.%s.listen)", t.name, t.spec.Listen, v, t.name)
	}
	return port, nil
}

// portHolders describes the processes listening on port in the harness's
// network namespace, "" when there are none.
func (t *target) portHolders(port int) string {
	ls, err := proc.Listeners(os.Getpid(), port)
	if err != nil || len(ls) == 0 {
		return ""
	}
	return describePids(proc.FindSocketHolders(inodes(ls)))
}

func inodes(ls []proc.Listener) []uint64 {
	out := make([]uint64, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Inode)
	}
	return out
}

func describePids(pids []int) string {
	var parts []string
	for _, p := range pids {
		parts = append(parts, fmt.Sprintf("pid %d (%s)", p, proc.Cmdline(p)))
	}
	return strings.Join(parts, ", ")
}

// logReason is the line of the target's log (logs/<target>.log, where its
// start hook's output goes, and its own log file) that most likely says
// why it ended: the last one about an address or port in use or a failed
// bind, else the last line.
func (t *target) logReason() string {
	var last string
	for _, f := range []string{t.run().Dir.LogFile(t.name), t.logPath()} {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(data) > 64*1024 {
			data = data[len(data)-64*1024:]
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			l := strings.ToLower(lines[i])
			if strings.Contains(l, "in use") || strings.Contains(l, "bind") || strings.Contains(l, "eaddrinuse") {
				return strings.TrimSpace(string(t.run().Redact.Bytes([]byte(lines[i]))))
			}
		}
		if n := len(lines); n > 0 && strings.TrimSpace(lines[n-1]) != "" {
			last = strings.TrimSpace(string(t.run().Redact.Bytes([]byte(lines[n-1]))))
		}
	}
	return last
}

func (t *target) logPath() string {
	if t.spec.Log == "" {
		return ""
	}
	return t.run().HostPath(t.spec.Log)
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
	pid, err := t.waitReady(ctx)
	if err != nil {
		return err
	}
	t.run().Record("target.started", rundir.F("target", t.name), rundir.F("pid", pid))
	return nil
}

// proven returns the target's pid once it is proven to be what the run
// started and the one serving: the pid file names a live process; for a
// target the run owns in cgroup mode, one in the target's cgroup; and, for
// a target that declares where it listens, the socket listening there is
// held by the target's own processes. It is asked once the health check
// has passed, so a failure means the health check was answered by
// something else than the target. A port nobody listens on yet, or someone
// else does, may still change (notYet).
func (t *target) proven() (int, error) {
	pid, err := t.pid()
	if err != nil {
		return 0, err
	}
	if !proc.Alive(pid) {
		return 0, t.exitError(pid)
	}
	p := t.contained()
	if p != nil {
		if in, err := p.Cgroup().Contains(pid); err != nil || !in {
			return 0, fmt.Errorf("target %s: health answered, but pid %d from %s is not in the target's cgroup %s, so the start hook did not start it: is another copy running, or was the target handed to another supervisor?", t.name, pid, t.pidFile(), p.Cgroup().Path)
		}
	}
	port, err := t.listenPort()
	if err != nil || port == 0 {
		return pid, err
	}
	ls, err := proc.Listeners(pid, port)
	if err != nil {
		return 0, fmt.Errorf("target %s: finding what listens on port %d: %w", t.name, port, err)
	}
	if len(ls) == 0 {
		return 0, notYet{fmt.Errorf("target %s: health answered, but nothing listens on port %d (listen: %s) in the target's network namespace", t.name, port, t.spec.Listen)}
	}
	var tree []int
	if p != nil {
		tree, _ = p.Cgroup().Procs()
	} else {
		tree = append(append([]int{pid}, proc.Descendants(pid)...), proc.GroupMembers(pid)...)
	}
	if len(proc.SocketHolders(tree, inodes(ls))) > 0 {
		return pid, nil
	}
	holders := describePids(proc.FindSocketHolders(inodes(ls)))
	if holders == "" {
		holders = "a process the harness cannot see"
	}
	return 0, notYet{fmt.Errorf("target %s: health answered, but port %d (listen: %s) is held by %s, not by the target (pid %d) or its children: another server answers for it", t.name, port, t.spec.Listen, holders, pid)}
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
		if p := t.contained(); p != nil && err == nil {
			// What the hook stopped is gone before the run looks for
			// leftovers; what it did not stop is a leak.
			gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = p.WaitGone(gctx)
			cancel()
		}
		return err
	}
	pid, err := t.livePid()
	if err != nil {
		return nil // already down
	}
	if p := t.contained(); p != nil {
		return t.downCgroup(ctx, p, pid, 10*time.Second)
	}
	return t.terminate(ctx, pid, 10*time.Second)
}

func ptr[T any](v T) *T { return &v }

// Down takes the target down: SIGTERM and grace, or SIGKILL. For a target
// the run owns in cgroup mode that is its whole cgroup (the daemon and all
// it forked, whatever it did to its session or environment), and Down
// returns once the cgroup is empty and everything that was in it reaped.
// Otherwise the signals go to its pid (and the group it leads), and Down
// returns once the process has exited and been reaped (a zombie still
// answers kill -0, so a replacement would take it for the old server) and
// its group is gone.
func (t *target) Down(ctx context.Context, d backend.Down) error {
	pid, err := t.livePid()
	if err != nil {
		return err
	}
	start, _ := proc.StartTime(pid)
	t.mu.Lock()
	t.downPid, t.downStart = pid, start
	t.mu.Unlock()
	if p := t.contained(); p != nil {
		return t.downCgroup(ctx, p, pid, d.Grace)
	}
	if d.Grace > 0 {
		return t.terminate(ctx, pid, d.Grace)
	}
	return t.kill(ctx, pid)
}

// downCgroup stops everything in the cgroup of the start hook p (SIGTERM
// to each, grace, then cgroup.kill; or cgroup.kill at once) and waits until
// it is empty and every process that was in it is reaped.
func (t *target) downCgroup(ctx context.Context, p *proc.Process, pid int, grace time.Duration) error {
	if in, err := p.Cgroup().Contains(pid); err != nil || !in {
		return fmt.Errorf("target %s: pid %d from %s is not in the target's cgroup %s", t.name, pid, t.pidFile(), p.Cgroup().Path)
	}
	var err error
	if grace > 0 {
		err = p.Terminate(grace)
	} else {
		err = p.Kill()
	}
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("target %s: %w", t.name, err)
	}
	gctx, cancel := context.WithTimeout(ctx, goneTimeout)
	defer cancel()
	if err := p.WaitGone(gctx); err != nil {
		return fmt.Errorf("target %s: %w", t.name, err)
	}
	return nil
}

// Up launches the start hook and returns once the pid file names a live
// process other than the one Down took down: started, not yet healthy. A
// start hook that itself waits for health goes on aside until Ready.
func (t *target) Up(ctx context.Context) error {
	if t.spec.Start == "" {
		return fmt.Errorf("target %s has no start hook, so it cannot be started again", t.name)
	}
	t.mu.Lock()
	old, oldStart, prev, before := t.downPid, t.downStart, t.starting, t.starter
	t.mu.Unlock()
	// A start hook an earlier Up launched (a crash loop killed what it
	// started) finishes first: two start hooks never race. Its result is
	// put back, for a Ready that still waits for it.
	if prev != nil {
		select {
		case err := <-prev:
			prev <- err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan error, 1)
	t.mu.Lock()
	t.starting = done
	t.mu.Unlock()
	// The hook outlives Up (Ready waits for it) but not ctx: a fault's
	// context outlives the run's end only by a few seconds, so an
	// aborted run never waits for a start that does not come.
	go func() {
		_, err := t.runHook(ctx, "start", t.spec.Start)
		done <- err
	}()
	deadline := time.Now().Add(t.healthTimeout())
	hookDone := false
	// The new start hook's process, once the runner has it: in cgroup
	// mode its cgroup is the target's, so a Down right after this Up (a
	// crash loop's) must find it there.
	started := func() bool {
		if !t.owned() {
			return true
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.starter != before
	}
	for {
		p, err := t.livePid()
		if err == nil && t.replaced(p, old, oldStart) && started() {
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

// replaced says whether pid, which the pid file names, is a replacement
// for the process Down took down (old, started at oldStart). Pids wrap: the
// kernel may give the replacement the very pid it took down, and a
// replacement then differs by its start time, and by a pid file written
// since the start hook began (not an old file naming a pid someone else
// got).
func (t *target) replaced(pid, old int, oldStart uint64) bool {
	if pid != old {
		return true
	}
	start, err := proc.StartTime(pid)
	if err != nil || start == oldStart {
		return false
	}
	t.mu.Lock()
	since := t.startedAt
	t.mu.Unlock()
	fi, err := os.Stat(t.pidFile())
	return err == nil && !fi.ModTime().Before(since)
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
	_, err := t.waitReady(ctx)
	return err
}

// Freeze stops the target: for a target the run owns in cgroup mode its
// whole cgroup (cgroup.freeze), else its process (its whole group when it
// leads one) with SIGSTOP; Thaw undoes it.
func (t *target) Freeze(ctx context.Context) error {
	pid, err := t.livePid()
	if err != nil {
		return err
	}
	if p := t.contained(); p != nil {
		// Noted before the freeze: one that fails may stay asked for,
		// and Thaw must still undo it.
		t.mu.Lock()
		t.frozenIn = p
		t.mu.Unlock()
		fctx, cancel := context.WithTimeout(ctx, freezeTimeout)
		defer cancel()
		if err := p.FreezeContext(fctx); err != nil {
			return fmt.Errorf("target %s: %w", t.name, err)
		}
		return nil
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
	pid, p := t.frozen, t.frozenIn
	t.frozen, t.frozenIn = 0, nil
	t.mu.Unlock()
	if p != nil {
		tctx, cancel := context.WithTimeout(ctx, freezeTimeout)
		defer cancel()
		if err := p.ThawContext(tctx); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("target %s: %w", t.name, err)
		}
		return nil
	}
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
	if waitGone(ctx, pid, grace) != nil {
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
	if err := waitGone(ctx, pid, goneTimeout); err != nil {
		return fmt.Errorf("target %s: pid %d still there %s after SIGKILL: %w", t.name, pid, goneTimeout, err)
	}
	waitGroupGone(pid, 5*time.Second)
	return nil
}

// foreignReap is how long waitGone gives the parent of an exited process
// that is not the harness's child to reap it.
const foreignReap = 2 * time.Second

// waitGone waits, at most limit, until pid is gone: every thread of it has
// exited (a main thread that called pthread_exit leaves a zombie leader
// while the others still run) and it has been reaped, so kill -0 fails and
// a pid file naming it is stale. The harness reaps its own children and
// the orphans it adopted as subreaper at once (proc.WaitGone). A process
// with another parent is that parent's to reap: if it has not within
// foreignReap of its exit, its zombie, which holds no port or file, is
// taken as gone.
func waitGone(ctx context.Context, pid int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var exited time.Time
	for {
		step, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		err := proc.WaitGone(step, pid)
		stop()
		if err == nil {
			return nil
		}
		if !proc.Alive(pid) && proc.Parent(pid) != os.Getpid() {
			if exited.IsZero() {
				exited = time.Now()
			} else if time.Since(exited) >= foreignReap {
				return nil
			}
		}
		if ctx.Err() != nil {
			return err
		}
	}
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
