package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// The engine cannot kill a container whose main process's main thread has
// exited while its other threads run on (Go servers and JVMs can do this):
// runc finds the init process a zombie and refuses, the engine waits 12 s
// and fails with "PID … is zombie and can not be killed", and it can even
// mark the container exited while the process runs on. A signal to the
// process's thread group ends it. So before (or after) the engine's kill,
// the harness kills what the container's cgroup holds on this host itself,
// when it can see it: the cgroup is found from the container's init pid,
// and only a cgroup whose path names the container's full id is touched.

// hostKillLimit bounds how long a host kill waits for the container's
// cgroup to empty.
const hostKillLimit = 5 * time.Second

// engineSlow is how long the engine's kill may take before the harness
// kills on the host as well: the engine answers a kill it can do in well
// under a second, and one it cannot do only after 12 s.
const engineSlow = time.Second

// engineOrHost makes call, the engine's kill, stop or forced remove of the
// running container c, and kills on this host what the engine cannot
// (see above). The engine is asked first, so what it can do it does as
// always (its kill event, its exit code); whether its init is a zombie
// leader cannot be decided beforehand, since a process can end its main
// thread at any moment. While the call is out, the leader is watched:
// once it is a zombie, or the engine is slow, the harness acts itself.
// With grace (a stop), it sends SIGTERM to the process and gives it grace
// to end before it kills. At the end, whatever of the container the engine
// left is killed (it can call a container exited while a process of it
// runs on). The engine's error stands unless the container's cgroup is
// then empty and the engine says it stopped.
func (g guard) engineOrHost(ctx context.Context, c container.InspectResponse, grace time.Duration, call func() error) error {
	var host *hostCgroup
	if c.State != nil && c.State.Running {
		host = findHostCgroup(c.ID, c.State.Pid)
	}
	if host == nil {
		return call()
	}
	pid := c.State.Pid
	done := make(chan error, 1)
	go func() { done <- call() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	slow := time.NewTimer(grace + engineSlow)
	defer slow.Stop()
	var err error
	for answered := false; !answered; {
		select {
		case err = <-done:
			answered = true
			continue
		case <-tick.C:
			if !leaderIsZombie(pid) {
				continue
			}
		case <-slow.C:
		case <-ctx.Done():
			return fmt.Errorf("container %s: %w", shortID(c.ID), ctx.Err())
		}
		if grace > 0 && leaderIsZombie(pid) && host.signal(pid, unix.SIGTERM) == nil {
			gctx, cancel := context.WithTimeout(ctx, grace)
			_ = waitNotRunning(gctx, g.cli, c.ID)
			cancel()
		}
		kctx, cancel := context.WithTimeout(ctx, hostKillLimit)
		_ = host.killWait(kctx)
		cancel()
		// The engine returns once it sees the container stopped.
		err = <-done
		answered = true
	}
	kctx, cancel := context.WithTimeout(ctx, hostKillLimit)
	defer cancel()
	herr := host.killWait(kctx)
	if err == nil || isNotRunning(err) {
		if herr != nil {
			return fmt.Errorf("container %s: the engine's kill left processes running: %w", shortID(c.ID), herr)
		}
		return err
	}
	if herr == nil && waitNotRunning(kctx, g.cli, c.ID) == nil {
		return nil
	}
	return errors.Join(err, herr)
}

// hostCgroup is where a container's processes are on this host.
type hostCgroup struct {
	id string // the container's full id
	// v2 is the container's cgroup v2 group, when it has one naming id.
	v2 *cgroup.Group
	// v1Dir, v1Ctrl and v1Path are a v1 hierarchy's directory of the
	// container, its controller and its path as /proc/PID/cgroup shows it,
	// used when no v2 group names the container.
	v1Dir, v1Ctrl, v1Path string
}

// namesContainer reports whether the cgroup path p is the container's own:
// its last element holds the full id ("/docker/ID", "/system.slice/docker-ID.scope").
func namesContainer(p, id string) bool {
	return isFullID(id) && strings.Contains(filepath.Base(p), id)
}

// findHostCgroup finds the cgroup of container id from its init pid, or
// returns nil when this host shows none of it (a remote engine, another pid
// namespace, a pid that is no longer the container's, a process gone).
func findHostCgroup(id string, pid int) *hostCgroup {
	if pid <= 1 || pid == os.Getpid() || !isFullID(id) {
		return nil
	}
	cgs, err := cgroup.ProcCgroups(pid)
	if err != nil {
		return nil
	}
	// v2 keeps a zombie leader's cgroup.
	if p, ok := cgs[""]; ok && namesContainer(p, id) {
		if mnt, root, err := cgroup.FindMount(); err == nil {
			if dir, ok := under(mnt, root, p); ok {
				if g, err := cgroup.Open(dir); err == nil {
					return &hostCgroup{id: id, v2: g}
				}
			}
		}
	}
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return nil
	}
	// Any one v1 hierarchy lists every process of the container; the ones
	// the engine always places it in come first.
	ctrls := slices.Sorted(maps.Keys(h.V1))
	slices.SortStableFunc(ctrls, func(a, b string) int { return rank(a) - rank(b) })
	// v1 shows a zombie leader in the root cgroup: its live threads say
	// where the process is.
	for _, tcgs := range threadCgroups(pid) {
		for _, c := range ctrls {
			p, ok := tcgs[c]
			if !ok || !namesContainer(p, id) {
				continue
			}
			if dir, ok := under(h.V1[c].Mount, h.V1[c].Root, p); ok {
				if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
					return &hostCgroup{id: id, v1Dir: dir, v1Ctrl: c, v1Path: p}
				}
			}
		}
	}
	return nil
}

// threadCgroups reads the cgroups of each thread of process pid
// (/proc/PID/task/TID/cgroup).
func threadCgroups(pid int) []map[string]string {
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []map[string]string
	for _, t := range tasks {
		f, err := os.Open(filepath.Join(base, t.Name(), "cgroup"))
		if err != nil {
			continue
		}
		cgs, err := cgroup.ParseProcCgroup(f)
		f.Close()
		if err == nil {
			out = append(out, cgs)
		}
	}
	return out
}

func rank(c string) int {
	switch c {
	case "pids":
		return 0
	case "freezer":
		return 1
	case "memory":
		return 2
	}
	return 3
}

// under turns the cgroup path p into a directory of the hierarchy mounted
// at mnt whose top is the cgroup root; false when p is outside it.
func under(mnt, root, p string) (string, bool) {
	root = strings.TrimSuffix(root, "/")
	if root != "" && p != root && !strings.HasPrefix(p, root+"/") {
		return "", false
	}
	return filepath.Join(mnt, strings.TrimPrefix(p, root)), true
}

// killWait SIGKILLs every process of the container's cgroup and waits,
// bounded by ctx, until it is empty.
func (h *hostCgroup) killWait(ctx context.Context) error {
	if h.v2 != nil {
		return h.v2.KillWait(ctx)
	}
	for {
		left, err := h.killV1()
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("killing the processes of container %s (cgroup %s): %d still there: %w", shortID(h.id), h.v1Dir, left, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// killV1 SIGKILLs each thread group of the v1 cgroup's subtree (from its
// cgroup.procs and tasks) and returns how many it found alive.
func (h *hostCgroup) killV1() (int, error) {
	groups := map[int]bool{}
	err := filepath.WalkDir(h.v1Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		for _, f := range []string{"cgroup.procs", "tasks"} {
			b, err := os.ReadFile(filepath.Join(p, f))
			if err != nil {
				continue // removed while we walked
			}
			for _, s := range strings.Fields(string(b)) {
				n, err := strconv.Atoi(s)
				if err != nil {
					continue
				}
				if f == "tasks" {
					n = cgroup.Tgid(n)
				}
				if n > 0 {
					groups[n] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing the processes of container %s: %w", shortID(h.id), err)
	}
	var errs []error
	for pid := range groups {
		if err := h.killV1Pid(pid); err != nil {
			errs = append(errs, err)
		}
	}
	return len(groups), errors.Join(errs...)
}

// killV1Pid SIGKILLs pid's thread group if /proc/PID/cgroup puts it in the
// container's cgroup. The pidfd is opened before the check, so the process
// checked is the one signalled, never whoever got its pid since.
func (h *hostCgroup) killV1Pid(pid int) error {
	if pid <= 1 || pid == os.Getpid() {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch err {
	case nil:
		defer unix.Close(fd)
	case unix.ESRCH:
		return nil
	default:
		// Without a pidfd there is no way to signal this very process.
		return fmt.Errorf("killing pid %d of container %s: pidfd_open: %w", pid, shortID(h.id), err)
	}
	if !h.holds(pid) {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return fmt.Errorf("killing pid %d of container %s: %w", pid, shortID(h.id), err)
	}
	return nil
}

// holds reports whether process pid is in the container's cgroup: by its
// v2 cgroup (kept by a zombie leader), or by any of its threads' v1 one
// (v1 shows a zombie leader in the root cgroup).
func (h *hostCgroup) holds(pid int) bool {
	if h.v2 != nil {
		in, err := h.v2.Contains(pid)
		return err == nil && in
	}
	for _, cgs := range threadCgroups(pid) {
		if p := cgs[h.v1Ctrl]; p == h.v1Path || strings.HasPrefix(p, h.v1Path+"/") {
			return true
		}
	}
	return false
}

// signal sends sig to the thread group pid, through a pidfd opened before
// checking that it is in the container's cgroup.
func (h *hostCgroup) signal(pid int, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("signalling pid %d of container %s: pidfd_open: %w", pid, shortID(h.id), err)
	}
	defer unix.Close(fd)
	if !h.holds(pid) {
		return fmt.Errorf("signalling pid %d of container %s: it is no longer the container's", pid, shortID(h.id))
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		return fmt.Errorf("signalling pid %d of container %s: %w", pid, shortID(h.id), err)
	}
	return nil
}

// leaderIsZombie reports whether pid's thread-group leader has exited
// while the process lives on (state Z with more than its own task).
func leaderIsZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) || b[i+2] != 'Z' {
		return false
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return err == nil && len(tasks) > 1
}
