package engine

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/mountinfo"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/procstatus"
)

// A run needs, for every instance its flow can run at once, what one
// instance of its backend costs this machine (backend.Cost: local
// processes cost the most), plus a base for the harness itself (its
// threads, files, preflight and hook shells), its watchers, metrics and
// targets, and a quarter more to spare.
const (
	baseTasks   = 32
	baseFDs     = 32
	perObserver = 6 // a watcher: its files, pipe, pidfd and shell; a scrape's connection
)

// demand is what a run asks of the machine at most, with the margin.
type demand struct {
	instances int
	// tasks count against the machine's limits, ownTasks against the
	// harness's own (its user's, its cgroups').
	tasks, ownTasks, fds int64
}

// need is what a run of x on a asks of the machine at most.
func need(x *experiment.Experiment, a *adapter.Adapter) demand {
	cost := backend.LocalCost
	if r, err := backend.ForInstances(a); err == nil {
		cost = r.InstanceCost()
	}
	n := binding.MaxConcurrentInstances(x)
	observers := int64(len(a.Watch) + len(a.Metrics) + len(a.Targets.Named))
	base := baseTasks + observers*perObserver
	spare := func(v int64) int64 { return v + v/4 }
	return demand{
		instances: n,
		tasks:     spare(base + int64(n)*int64(cost.Tasks)),
		ownTasks:  spare(base + int64(n)*int64(cost.OwnTasks)),
		fds:       spare(baseFDs + int64(cost.BaseFDs) + observers*perObserver + int64(n)*int64(cost.FDs)),
	}
}

// checkCapacity refuses, before anything starts, a run the machine cannot
// take: more processes and threads than the pid limits leave room for
// (the kernel's pid_max and threads-max; for the harness's own, its
// user's RLIMIT_NPROC and the pids cgroups it is in, v1 and v2, up to
// their roots), or more file descriptors than RLIMIT_NOFILE leaves. The
// error says which limit, what the run needs and what is left.
func checkCapacity(x *experiment.Experiment, a *adapter.Adapter) error {
	raiseNoFile()
	d := need(x, a)
	if d.instances == 0 {
		return nil
	}
	what := fmt.Sprintf("its flow runs up to %d instance(s) at once", d.instances)
	for _, l := range taskLimits() {
		want := d.tasks
		if l.own {
			want = d.ownTasks
		}
		if l.left < want {
			return fmt.Errorf("this machine cannot take the run: %s, about %d processes and threads with room to spare, and %s leaves room for %d; run fewer instances at once, or raise the limit", what, want, l.name, max(l.left, 0))
		}
	}
	if l, ok := fdLimit(); ok && l.left < d.fds {
		return fmt.Errorf("this machine cannot take the run: %s, about %d open files with room to spare, and %s leaves room for %d; run fewer instances at once, or raise the limit (ulimit -n)", what, d.fds, l.name, max(l.left, 0))
	}
	return nil
}

// limit is room left under one limit.
type limit struct {
	name string
	left int64
	// own is a limit on the harness's own tasks, not the machine's.
	own bool
}

// raiseNoFile raises RLIMIT_NOFILE's soft limit to the hard one where
// that helps. Go's runtime already does so when the harness starts (to
// one below the hard limit, and gives the processes it starts their
// original limit back), so this acts only where it did not.
func raiseNoFile() {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) == nil && l.Cur+1 < l.Max {
		l.Cur = l.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &l)
	}
}

// fdLimit is the room RLIMIT_NOFILE's soft limit leaves the harness.
func fdLimit() (limit, bool) {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil || l.Cur == unix.RLIM_INFINITY {
		return limit{}, false
	}
	open := int64(0)
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		open = int64(len(ents))
	}
	return limit{fmt.Sprintf("the open files limit (RLIMIT_NOFILE %d, %d open)", l.Cur, open), int64(l.Cur) - open, true}, true
}

// taskLimits are the room each limit on processes and threads leaves.
func taskLimits() []limit {
	var out []limit
	total, terr := proc.SystemTasks()
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		if n, err := proc.ReadInt(f); err == nil && terr == nil {
			out = append(out, limit{fmt.Sprintf("%s (%d, %d tasks running)", f, n, total), n - total, false})
		}
	}
	var l unix.Rlimit
	// RLIMIT_NPROC counts the user's tasks; root is not held to it.
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &l) == nil && l.Cur != unix.RLIM_INFINITY {
		used := userTasks(os.Getuid())
		out = append(out, limit{fmt.Sprintf("the user's process limit (RLIMIT_NPROC %d, %d in use)", l.Cur, used), int64(l.Cur) - used, true})
	}
	return append(out, pidsCgroupLimits()...)
}

// userTasks counts the threads of uid's processes.
func userTasks(uid int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstatus.Read(pid, "Uid", "Threads")
		if err != nil {
			continue
		}
		var id, threads int64 = -1, 1
		if u := st.First("Uid"); u != "" {
			id, _ = strconv.ParseInt(u, 10, 64)
		}
		if v, ok := st["Threads"]; ok {
			threads, _ = strconv.ParseInt(v, 10, 64)
		}
		if id == int64(uid) {
			n += threads
		}
	}
	return n
}

// pidsCgroupLimits are the room the pids cgroups of the harness leave:
// each of its cgroups (v1 pids hierarchy, v2 unified) and their ancestors
// up to the mount, pids.max less pids.current.
func pidsCgroupLimits() []limit {
	mounts := cgroupMounts()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []limit
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		key := ""
		switch {
		case parts[0] == "0" && parts[1] == "":
			key = "cgroup2"
		case mountinfo.HasOption(parts[1], "pids"):
			key = "pids"
		default:
			continue
		}
		m, ok := mounts[key]
		if !ok {
			continue
		}
		rel, err := filepath.Rel(m.root, parts[2])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for dir := filepath.Join(m.point, rel); strings.HasPrefix(dir, m.point); dir = filepath.Dir(dir) {
			if mx, err := proc.ReadInt(filepath.Join(dir, "pids.max")); err == nil {
				cur, _ := proc.ReadInt(filepath.Join(dir, "pids.current"))
				out = append(out, limit{fmt.Sprintf("the pids cgroup %s (pids.max %d, %d in use)", dir, mx, cur), mx - cur, true})
			}
			if dir == m.point {
				break
			}
		}
	}
	return out
}

type mount struct{ point, root string }

// cgroupMounts finds the unified hierarchy ("cgroup2") and the v1 pids
// hierarchy ("pids") in /proc/self/mountinfo.
func cgroupMounts() map[string]mount {
	out := map[string]mount{}
	_ = mountinfo.Read(0, func(m mountinfo.Mount) {
		var key string
		switch {
		case m.FSType == "cgroup2":
			key = "cgroup2"
		case m.FSType == "cgroup" && mountinfo.HasOption(m.SuperOptions, "pids"):
			key = "pids"
		default:
			return
		}
		if _, seen := out[key]; !seen {
			out[key] = mount{point: m.Point, root: m.Root}
		}
	})
	return out
}
