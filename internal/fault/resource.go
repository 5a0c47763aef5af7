package fault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/mountinfo"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// The resource faults act on a handle's cgroups and file system as the
// host sees them (backend.Resourced), the same way on every backend:
//
//	cpu-limit        the CPU quota of its cpu group.
//	cpu-stress       a helper that burns N CPUs, placed in its groups.
//	memory-pressure  the soft limit (v2 memory.high; v1 the hard limit
//	                 with the OOM killer off): reclaim, slowdown.
//	memory-limit     the hard limit: the OOM killer past it.
//	memory-stress    a helper that allocates and touches N bytes, placed
//	                 in its groups.
//	io-limit         bandwidth and IOPS of the device that holds a path.
//	task-limit       pids.max: fork fails with EAGAIN.
//	disk-fill        a file that fills the file system holding a path.
//
// Each is written to the run's resource journal before it is made, held
// for the duration (or to the flow's end) and then undone.

// resourceApp is one application being held.
type resourceApp struct {
	env Env
	op  Op
	h   backend.Handle
	a   *app
	res backend.Resources
	// undo are the writes that restore the limits, in order.
	undo   []cgroup.Write
	helper *helper
	file   string
	before cgroup.Usage
	// stop ends the OOM watch; watched is closed when it has ended.
	stop    context.CancelFunc
	watched chan struct{}
	// oomKills is the most the watch saw, for a group gone by the revert;
	// written by the watch alone, read once watched is closed.
	oomKills uint64
}

// applyResource applies op's resource fault to h and holds it.
func applyResource(ctx context.Context, env Env, op Op, h backend.Handle) error {
	if op.Journal == nil || op.Resource == nil {
		return fmt.Errorf("%s: this run applies no resource faults", op.Fault)
	}
	rh, ok := h.(backend.Resourced)
	if !ok {
		return fmt.Errorf("%s: %w: the harness cannot reach its cgroups from this machine", h.Name(), backend.ErrUnsupported)
	}
	// Like a Down, an application that has begun is seen through, then
	// reverted at once if the run was aborted meanwhile.
	bg := context.WithoutCancel(ctx)
	r := &resourceApp{env: env, op: op, h: h, a: op.Journal.begin(op, h.Name())}
	res, err := rh.Resources(bg, backend.ResourceNeed{Name: r.a.name(), Made: r.a.own})
	r.res = res
	if err != nil {
		return errors.Join(fmt.Errorf("%s: finding its cgroups: %w", h.Name(), err), r.revert(bg))
	}
	r.before, _ = cgroup.ReadUsage(res.Place)
	// Watched before the limit is set, so the first OOM it causes wakes
	// the watch.
	var oom *cgroup.OOMWatch
	if op.Fault == experiment.FaultMemoryLimit || op.Fault == experiment.FaultMemoryPressure || op.Fault == experiment.FaultMemoryStress {
		oom = cgroup.NewOOMWatch(res.Place, r.before.OOMKills)
	}
	fields, err := r.apply(bg)
	if err != nil {
		oom.Close()
		return errors.Join(fmt.Errorf("%s: %w", h.Name(), err), r.revert(bg))
	}
	env.Record("resource.applied", append([]rundir.Field{rundir.F("operation", op.Operation), rundir.F("uses", op.Fault), rundir.F("run", op.Run), rundir.F("target", h.Name()), rundir.F("what", res.What)}, fields...)...)
	if oom != nil {
		r.watchOOM(oom)
	}
	return hold(ctx, env, op, r.revert)
}

// apply makes the change; it returns what it did, for resource.applied.
func (r *resourceApp) apply(ctx context.Context) ([]rundir.Field, error) {
	spec := r.op.Resource
	var l cgroup.Limit
	var fields []rundir.Field
	switch r.op.Fault {
	case experiment.FaultCPULimit:
		cpu, err := experiment.ParseCPUShare(spec.CPU)
		if err != nil {
			return nil, err
		}
		l.CPU = cpu
	case experiment.FaultMemoryPressure, experiment.FaultMemoryLimit:
		n, err := experiment.ParseBytes(spec.Memory)
		if err != nil {
			return nil, err
		}
		if r.op.Fault == experiment.FaultMemoryPressure {
			l.MemoryPressure = n
		} else {
			l.MemoryMax = n
		}
	case experiment.FaultTaskLimit:
		l.Tasks = spec.Tasks
	case experiment.FaultIOLimit:
		dev, desc, err := BlockDevice(r.res.Root, spec.Path, r.res.Pid)
		if err != nil {
			return nil, err
		}
		io := &cgroup.IOLimit{Major: dev.Major, Minor: dev.Minor, ReadIOPS: uint64(max(spec.ReadIOPS, 0)), WriteIOPS: uint64(max(spec.WriteIOPS, 0))}
		for _, b := range []struct {
			s   string
			dst *uint64
		}{{spec.ReadBPS, &io.ReadBPS}, {spec.WriteBPS, &io.WriteBPS}} {
			if b.s == "" {
				continue
			}
			n, err := experiment.ParseBytes(b.s)
			if err != nil {
				return nil, err
			}
			*b.dst = uint64(n)
		}
		l.IO = io
		fields = append(fields, rundir.F("device", fmt.Sprintf("%d:%d", dev.Major, dev.Minor)), rundir.F("device_of", desc))
	case experiment.FaultCPUStress, experiment.FaultMemoryStress:
		return r.stress(ctx)
	case experiment.FaultDiskFill:
		return r.fill()
	default:
		return nil, fmt.Errorf("unknown resource fault %s", r.op.Fault)
	}
	ws, err := cgroup.Settings(l, r.res.Place)
	if err != nil {
		return nil, err
	}
	undo, err := cgroup.Apply(ws, r.a.undo)
	r.undo = undo
	if err != nil {
		return nil, err
	}
	var written []string
	for _, w := range ws {
		written = append(written, w.Path+"="+w.Value)
	}
	return append(fields, rundir.F("writes", written)), nil
}

// stress starts the helper, places it in the handle's groups and lets it
// work.
func (r *resourceApp) stress(ctx context.Context) ([]rundir.Field, error) {
	spec := r.op.Resource
	var mem int64
	if r.op.Fault == experiment.FaultMemoryStress {
		n, err := experiment.ParseBytes(spec.Memory)
		if err != nil {
			return nil, err
		}
		mem = n
	}
	// The run's marker, so chaos cleanup's sweep of marked processes
	// finds the helper too.
	env := []string{"CHAOS_RUN_ID=" + r.op.Journal.RunID(), "PATH=/usr/bin:/bin"}
	h, err := startHelper(spec.Cores, mem, env)
	if err != nil {
		return nil, err
	}
	r.helper = h
	if err := r.a.helper(h.cmd.Process.Pid, h.start); err != nil {
		return nil, err
	}
	if err := cgroup.PlacePid(r.res.Place, h.cmd.Process.Pid); err != nil {
		return nil, err
	}
	if err := h.run(); err != nil {
		return nil, fmt.Errorf("starting the stress helper's work: %w", err)
	}
	return []rundir.Field{rundir.F("helper_pid", h.cmd.Process.Pid)}, nil
}

// fill fills the file system that holds the handle's path until the
// bytes asked for are left.
func (r *resourceApp) fill() ([]rundir.Field, error) {
	spec := r.op.Resource
	var free int64
	if spec.Free != nil {
		n, err := experiment.ParseBytes(*spec.Free)
		if err != nil {
			return nil, err
		}
		free = n
	}
	dir := filepath.Join(r.res.Root, spec.Path)
	path := filepath.Join(dir, ".chaos-fill-"+r.a.name())
	if err := r.a.file(path); err != nil {
		return nil, err
	}
	r.file = path
	filled, left, err := Fill(path, free)
	if err != nil {
		return nil, err
	}
	return []rundir.Field{rundir.F("file", filepath.Join(spec.Path, filepath.Base(path))), rundir.F("filled", filled), rundir.F("free", left)}, nil
}

// watchOOM records resource.oom-kill each time the OOM killer kills in
// the handle's memory group while the fault holds. The kernel wakes the
// watch (cgroup.OOMWatch), so a kill is recorded even when its group is
// removed at once, as a runtime removes a container's.
func (r *resourceApp) watchOOM(w *cgroup.OOMWatch) {
	ctx, stop := context.WithCancel(context.Background())
	r.stop, r.watched = stop, make(chan struct{})
	go func() {
		defer close(r.watched)
		w.Run(ctx, func(kills uint64, from cgroup.OOMKillSource) {
			r.oomKills = kills
			r.env.Record("resource.oom-kill", rundir.F("operation", r.op.Operation), rundir.F("target", r.h.Name()), rundir.F("oom_kills", kills), rundir.F("counted_by", string(from)))
		})
	}()
}

// revert undoes what was made, last first, all of it whatever fails, and
// records what the group's counters said meanwhile.
func (r *resourceApp) revert(ctx context.Context) error {
	if r.stop != nil {
		r.stop()
		<-r.watched
	}
	after, _ := cgroup.ReadUsage(r.res.Place)
	var errs []error
	if r.helper != nil {
		if ended, how := r.helper.exited(); ended {
			r.env.Record("resource.helper-ended", rundir.F("operation", r.op.Operation), rundir.F("target", r.h.Name()), rundir.F("how", how))
		}
		r.helper.stop()
	}
	errs = append(errs, cgroup.Undo(r.undo))
	if r.res.Release != nil {
		errs = append(errs, r.res.Release(ctx))
	}
	if r.file != "" {
		if err := os.Remove(r.file); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the filler file: %w", err))
		}
	}
	err := errors.Join(errs...)
	if err == nil {
		r.a.reverted()
	}
	if r.res.What != "" {
		fields := []rundir.Field{rundir.F("operation", r.op.Operation), rundir.F("uses", r.op.Fault), rundir.F("run", r.op.Run), rundir.F("target", r.h.Name())}
		if after.CPUNanos >= r.before.CPUNanos && after.CPUNanos > 0 {
			fields = append(fields, rundir.F("cpu_seconds", float64(after.CPUNanos-r.before.CPUNanos)/1e9))
		}
		if after.LimitHits > r.before.LimitHits {
			fields = append(fields, rundir.F("limit_hits", after.LimitHits-r.before.LimitHits))
		}
		if after.Reclaim > r.before.Reclaim {
			fields = append(fields, rundir.F("reclaimed_pages", after.Reclaim-r.before.Reclaim))
		}
		kills := r.oomKills
		if after.OOMKills > r.before.OOMKills {
			kills = max(kills, after.OOMKills-r.before.OOMKills)
		}
		if kills > 0 {
			fields = append(fields, rundir.F("oom_kills", kills))
		}
		r.env.Record("resource.reverted", fields...)
	}
	return err
}

// Device is a block device's numbers.
type Device struct{ Major, Minor uint32 }

// BlockDevice finds the block device that holds path p of a handle whose
// file system the host sees at root: the device of the file system, or,
// for overlayfs (a container's root), of its upper directory; a partition
// is limited through its disk, which is where the kernel throttles. A
// file system with no block device (tmpfs, or a device the kernel does
// not throttle) is an error that says so. pid is a process of the handle,
// whose mounts say what p is on.
func BlockDevice(root, p string, pid int) (Device, string, error) {
	var st unix.Stat_t
	host := filepath.Join(root, p)
	if err := unix.Stat(host, &st); err != nil {
		return Device{}, "", fmt.Errorf("finding the device of %s: %w", p, err)
	}
	dev := Device{unix.Major(st.Dev), unix.Minor(st.Dev)}
	desc := p
	if dev.Major == 0 {
		fstype, upper := mountOf(pid, p)
		if fstype != "overlay" || upper == "" {
			return Device{}, "", fmt.Errorf("%s is on a %s file system, which has no block device to limit: point path at a directory on a disk (a volume)", p, nameOr(fstype, "virtual"))
		}
		if err := unix.Stat(upper, &st); err != nil {
			return Device{}, "", fmt.Errorf("finding the device under the overlay of %s (%s): %w", p, upper, err)
		}
		dev = Device{unix.Major(st.Dev), unix.Minor(st.Dev)}
		desc = p + " (overlay upper " + upper + ")"
		if dev.Major == 0 {
			return Device{}, "", fmt.Errorf("%s is on an overlay whose upper directory is on a virtual file system, which has no block device to limit", p)
		}
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", dev.Major, dev.Minor)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		b, err := os.ReadFile(filepath.Join(sys, "..", "dev"))
		if err == nil {
			var ma, mi uint32
			if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &ma, &mi); err == nil {
				dev = Device{ma, mi}
				desc += " (partition's disk)"
			}
		}
	}
	return dev, desc, nil
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// mountOf returns the type of the file system that holds p in pid's mount
// namespace and, for an overlay, its upperdir (a path of the host's, where
// the overlay was mounted from the host's namespace).
func mountOf(pid int, p string) (fstype, upper string) {
	best := -1
	_ = mountinfo.Read(pid, func(m mountinfo.Mount) {
		mp := m.Point
		if !(p == mp || mp == "/" || strings.HasPrefix(p, mp+"/")) || len(mp) < best {
			return
		}
		best, fstype, upper = len(mp), m.FSType, ""
		for _, o := range strings.Split(m.SuperOptions, ",") {
			if v, ok := strings.CutPrefix(o, "upperdir="); ok {
				upper = v
			}
		}
	})
	return fstype, upper
}

// fillChunk is the most a fill asks of the file system at once.
const fillChunk = 64 << 20

// Fill creates path and grows it until the file system that holds it has
// free bytes left (as root counts them: reserved blocks too), or as close
// as its block size allows. It returns how much it took and what is left.
// Space is reserved with fallocate; a file system without it gets zeros.
func Fill(path string, free int64) (filled, left int64, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, 0, fmt.Errorf("creating the filler file: %w", err)
	}
	defer f.Close()
	avail := func() (int64, error) {
		var s unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &s); err != nil {
			return 0, err
		}
		return int64(s.Bfree) * s.Bsize, nil
	}
	var off int64
	chunk := int64(fillChunk)
	zeros := false
	buf := make([]byte, 1<<20)
	for chunk >= 4096 {
		now, err := avail()
		if err != nil {
			return off, 0, fmt.Errorf("reading the free space: %w", err)
		}
		need := now - free
		if need < 4096 {
			return off, now, f.Sync()
		}
		n := min(chunk, need)
		if !zeros {
			err = unix.Fallocate(int(f.Fd()), 0, off, n)
			if errors.Is(err, unix.EOPNOTSUPP) {
				zeros = true
				continue
			}
			if err == nil {
				off += n
			}
		} else {
			// What a short write took before ENOSPC is kept.
			w, werr := f.WriteAt(buf[:min(n, int64(len(buf)))], off)
			off, err = off+int64(w), werr
		}
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOSPC):
			chunk /= 2
		default:
			return off, 0, fmt.Errorf("filling: %w", err)
		}
	}
	now, err := avail()
	return off, now, errors.Join(err, f.Sync())
}
