package cgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/ctxfd"
	"github.com/chaos-harness/chaos/internal/procstatus"
)

// ErrPopulated is returned by Remove for a group that still has live tasks.
var ErrPopulated = errors.New("cgroup still has live processes")

// eventsRecheck bounds one poll on cgroup.events. Changes wake the poll at
// once (POLLPRI); the timeout is only a safety net that re-reads the file.
const eventsRecheck = time.Second

// Group is one cgroup v2 directory. Every operation acts on the whole
// subtree below it.
type Group struct {
	// Path is the directory in the cgroup file system.
	Path string
	// rel is the group's path as /proc/PID/cgroup shows it ("/chaos/r/l").
	rel string
}

// Open returns the group at path, which must be a directory of the cgroup2
// mount found by FindMount.
func Open(path string) (*Group, error) {
	mnt, root, err := FindMount()
	if err != nil {
		return nil, err
	}
	path = filepath.Clean(path)
	rel, err := filepath.Rel(mnt, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("opening cgroup %s: not below the cgroup2 mount %s", path, mnt)
	}
	if _, err := os.Stat(filepath.Join(path, "cgroup.procs")); err != nil {
		return nil, fmt.Errorf("opening cgroup %s: %w", path, err)
	}
	return &Group{Path: path, rel: joinRel(root, rel)}, nil
}

func joinRel(root, rel string) string {
	if rel == "." {
		rel = ""
	}
	return filepath.Clean("/" + strings.TrimPrefix(root, "/") + "/" + rel)
}

// CgroupPath is the group's path as /proc/PID/cgroup shows it.
func (g *Group) CgroupPath() string { return g.rel }

func (g *Group) file(name string) string { return filepath.Join(g.Path, name) }

// write writes one value to an interface file in a single write(2), which
// is how cgroupfs expects them.
func (g *Group) write(name, value, doing string) error {
	f, err := os.OpenFile(g.file(name), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%s %s: %w", doing, g.Path, err)
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("%s %s: %w", doing, g.Path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("%s %s: %w", doing, g.Path, cerr)
	}
	return nil
}

// Kill SIGKILLs every process of the group and its subtree, by every means
// that works, and does not wait (use KillWait to kill until it is empty):
//
//   - cgroup.kill, which also reaches processes forked while the kill is in
//     progress;
//   - then a SIGKILL to each thread group the subtree lists in cgroup.procs
//     and cgroup.threads (a thread's group found by its Tgid), each through a
//     pidfd after checking that the process is still in the group, so a
//     recycled pid is never hit. cgroup.kill misses a process whose main
//     thread has exited while its other threads run on (a Go server or a JVM
//     can end its main thread; the leader is then a zombie): on Linux 6.18 such
//     a process survives cgroup.kill, while a signal to its thread group
//     ends it.
func (g *Group) Kill() error {
	kerr := g.write("cgroup.kill", "1", "killing cgroup")
	if kerr != nil && IsGone(kerr) {
		return kerr
	}
	return errors.Join(kerr, g.killListed())
}

// killRecheck is how long KillWait waits for the group to empty before it
// kills what is left again.
const killRecheck = 100 * time.Millisecond

// KillWait kills the subtree (Kill) and waits, bounded by ctx, until no live
// task is left in it, killing again whatever is still there every
// killRecheck: a thread of a process that survived one pass may have forked
// meanwhile. A group that no longer exists is empty.
func (g *Group) KillWait(ctx context.Context) error {
	for {
		if err := g.Kill(); err != nil {
			if IsGone(err) {
				return nil
			}
			return err
		}
		step, cancel := context.WithTimeout(ctx, killRecheck)
		err := g.waitEvents(step, func(e Events) bool { return !e.Populated })
		cancel()
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENODEV):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("killing cgroup %s: waiting for it to be empty: %w", g.Path, ctx.Err())
		case !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("killing cgroup %s: waiting for it to be empty: %w", g.Path, err)
		}
	}
}

// killListed SIGKILLs each thread group that has a process or a thread in
// the subtree. The harness itself and pid 1 are never signalled.
func (g *Group) killListed() error {
	procs, perr := g.Procs()
	threads, terr := g.Threads()
	if perr != nil && terr != nil {
		return errors.Join(perr, terr)
	}
	groups := map[int]bool{}
	for _, pid := range procs {
		groups[pid] = true
	}
	for _, tid := range threads {
		if tgid := Tgid(tid); tgid > 0 {
			groups[tgid] = true
		}
	}
	var errs []error
	for pid := range groups {
		if err := g.killIn(pid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killIn sends SIGKILL to the thread group pid if it is in g. The pidfd is
// opened before the check, so the process checked is the one signalled: if
// it died in between, the send fails with ESRCH instead of reaching whoever
// got its pid.
func (g *Group) killIn(pid int) error {
	if pid <= 1 || pid == os.Getpid() {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch err {
	case nil:
		defer unix.Close(fd)
	case unix.ESRCH:
		return nil
	case unix.ENOSYS, unix.EPERM:
		fd = -1
	default:
		return fmt.Errorf("killing cgroup %s: pidfd_open(%d): %w", g.Path, pid, err)
	}
	if in, err := g.Contains(pid); err != nil || !in {
		return err
	}
	if fd < 0 {
		err = unix.Kill(pid, unix.SIGKILL)
	} else {
		err = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
	if err != nil && err != unix.ESRCH {
		return fmt.Errorf("killing cgroup %s: SIGKILL to %d: %w", g.Path, pid, err)
	}
	return nil
}

// Tgid returns the thread-group id (the process) of thread tid, from
// /proc/TID/status, or 0 when tid no longer exists.
func Tgid(tid int) int {
	st, err := procstatus.Read(tid, "Tgid")
	if err != nil {
		return 0
	}
	n, err := st.Int("Tgid")
	if err != nil {
		return 0
	}
	return n
}

// Freeze freezes the whole subtree (cgroup.freeze) and waits, bounded by
// ctx, until cgroup.events says "frozen 1": every task in it is stopped,
// including ones forked meanwhile. If ctx ends first the freeze stays
// requested and an error is returned.
func (g *Group) Freeze(ctx context.Context) error {
	if err := g.write("cgroup.freeze", "1", "freezing cgroup"); err != nil {
		return err
	}
	if err := g.waitEvents(ctx, func(e Events) bool { return e.Frozen }); err != nil {
		return fmt.Errorf("freezing cgroup %s: waiting for frozen 1: %w", g.Path, err)
	}
	return nil
}

// Thaw undoes Freeze and waits, bounded by ctx, until cgroup.events says
// "frozen 0".
func (g *Group) Thaw(ctx context.Context) error {
	if err := g.write("cgroup.freeze", "0", "thawing cgroup"); err != nil {
		return err
	}
	if err := g.waitEvents(ctx, func(e Events) bool { return !e.Frozen }); err != nil {
		return fmt.Errorf("thawing cgroup %s: waiting for frozen 0: %w", g.Path, err)
	}
	return nil
}

// IsGone reports whether err says the group no longer exists: its
// directory is gone (ENOENT), or it is being removed and its files answer
// ENODEV.
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// Events is the content of cgroup.events.
type Events struct {
	// Populated: a live task is in the group or below it. Zombies do not
	// count.
	Populated bool
	// Frozen: the group is frozen, every task in its subtree stopped.
	Frozen bool
}

// Events reads cgroup.events.
func (g *Group) Events() (Events, error) {
	b, err := os.ReadFile(g.file("cgroup.events"))
	if err != nil {
		return Events{}, fmt.Errorf("reading %s: %w", g.file("cgroup.events"), err)
	}
	return parseEvents(b), nil
}

func parseEvents(b []byte) Events {
	var e Events
	for line := range bytes.Lines(b) {
		k, v, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
		switch k {
		case "populated":
			e.Populated = v == "1"
		case "frozen":
			e.Frozen = v == "1"
		}
	}
	return e
}

// Populated reports whether any live process is in the group's subtree.
func (g *Group) Populated() (bool, error) {
	e, err := g.Events()
	return e.Populated, err
}

// Frozen reports whether the group is frozen.
func (g *Group) Frozen() (bool, error) {
	e, err := g.Events()
	return e.Frozen, err
}

// WaitEmpty waits, bounded by ctx, until no live task is left in the subtree
// (cgroup.events "populated 0"). It is woken by the kernel's notification
// on cgroup.events, not by polling. A group that no longer exists is empty.
// Zombies do not keep a group populated; whoever reaps them is another
// matter (see package proc).
func (g *Group) WaitEmpty(ctx context.Context) error {
	err := g.waitEvents(ctx, func(e Events) bool { return !e.Populated })
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("waiting for cgroup %s to be empty: %w", g.Path, err)
	}
	return nil
}

// waitEvents re-reads cgroup.events until cond holds. Reading the file arms
// the kernel's notification: the next change makes poll report POLLPRI.
func (g *Group) waitEvents(ctx context.Context, cond func(Events) bool) error {
	fd, err := unix.Open(g.file("cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: g.file("cgroup.events"), Err: err}
	}
	defer unix.Close(fd)
	wake, stop, err := ctxfd.Waker(ctx)
	if err != nil {
		return err
	}
	defer stop()
	buf := make([]byte, 256)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil {
			// ENODEV: the group was removed while we waited.
			return &fs.PathError{Op: "read", Path: g.file("cgroup.events"), Err: err}
		}
		if cond(parseEvents(buf[:n])) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}, {Fd: int32(wake), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(eventsRecheck/time.Millisecond)); err != nil && err != unix.EINTR {
			return fmt.Errorf("polling %s: %w", g.file("cgroup.events"), err)
		}
	}
}

// Procs returns, sorted, every process (thread-group id) in the group and
// its subtree, from cgroup.procs. A group that no longer exists has none.
func (g *Group) Procs() ([]int, error) { return g.collect("cgroup.procs") }

// Threads returns, sorted, every thread id in the group and its subtree,
// from cgroup.threads.
func (g *Group) Threads() ([]int, error) { return g.collect("cgroup.threads") }

func (g *Group) collect(file string) ([]int, error) {
	seen := map[int]bool{}
	err := filepath.WalkDir(g.Path, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		ids, err := readInts(filepath.Join(path, file))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		for _, id := range ids {
			seen[id] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s of cgroup %s: %w", file, g.Path, err)
	}
	out := make([]int, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// Contains reports whether pid is in the group or below it, from
// /proc/PID/cgroup. That file still names the cgroup of a zombie, so a
// zombie of the group counts. A pid that does not exist is not contained.
func (g *Group) Contains(pid int) (bool, error) {
	p, err := CgroupOf(pid)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, err
	}
	return g.Holds(p), nil
}

// Holds reports whether the cgroup path p (as /proc/PID/cgroup shows it)
// is g or below it.
func (g *Group) Holds(p string) bool {
	return p != "" && (p == g.rel || strings.HasPrefix(p, g.rel+"/"))
}

// CgroupOf returns pid's cgroup v2 path as /proc/PID/cgroup shows it (the
// "0::" line).
func CgroupOf(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	for line := range bytes.Lines(b) {
		if p, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte("0::")); ok {
			return strings.TrimSuffix(string(p), " (deleted)"), nil
		}
	}
	return "", fmt.Errorf("reading /proc/%d/cgroup: no cgroup v2 entry", pid)
}

// OpenFD opens the group's directory for SysProcAttr.CgroupFD
// (clone3 with CLONE_INTO_CGROUP). The caller closes it.
func (g *Group) OpenFD() (int, error) {
	fd, err := unix.Open(g.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening cgroup %s: %w", g.Path, err)
	}
	return fd, nil
}

// Children returns the group's direct sub-groups.
func (g *Group) Children() ([]*Group, error) {
	ents, err := os.ReadDir(g.Path)
	if err != nil {
		return nil, err
	}
	var out []*Group
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, &Group{Path: filepath.Join(g.Path, e.Name()), rel: g.rel + "/" + e.Name()})
		}
	}
	return out, nil
}

// Mkdir creates the sub-group name, which must already be safe (see
// SafeName); it fails with fs.ErrExist if it exists.
func (g *Group) Mkdir(name string) (*Group, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n") {
		return nil, fmt.Errorf("creating cgroup %q in %s: invalid name", name, g.Path)
	}
	c := &Group{Path: filepath.Join(g.Path, name), rel: g.rel + "/" + name}
	if err := os.Mkdir(c.Path, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", c.Path, err)
	}
	return c, nil
}

// Remove removes the group and every sub-group (rmdir, deepest first). A
// group that still has live tasks is not removed (ErrPopulated): kill it and
// WaitEmpty first. Right after the last task exits the kernel can still
// refuse for a moment (EBUSY); Remove retries that a bounded number of times
// within ctx. A group that is already gone is not an error.
func (g *Group) Remove(ctx context.Context) error {
	kids, err := g.Children()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing cgroup %s: %w", g.Path, err)
	}
	var errs []error
	for _, k := range kids {
		if err := k.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	delay := time.Millisecond
	for attempt := 0; ; attempt++ {
		err := unix.Rmdir(g.Path)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err == unix.EBUSY {
			if pop, perr := g.Populated(); perr == nil && pop {
				return fmt.Errorf("removing cgroup %s: %w", g.Path, ErrPopulated)
			}
			if attempt < 40 && ctx.Err() == nil {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
				delay = min(2*delay, 50*time.Millisecond)
				continue
			}
		}
		return fmt.Errorf("removing cgroup %s: %w", g.Path, err)
	}
}
