package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/mountinfo"
)

// The resource faults need the controllers the rest of this package never
// touches (cpu, memory, io/blkio, pids). Where they are differs from one
// machine to the next: on cgroup v2 alone every controller is in the
// unified hierarchy (if the parent enabled it); on a v1 or hybrid machine
// each has a hierarchy of its own, and the unified one may have none. So
// the hierarchies are found at run time, from /proc/self/mountinfo, and
// each controller is looked up in v1 first (a controller bound to a v1
// hierarchy cannot be enabled in v2 at the same time).

// Controllers the resource faults use, by their v2 names. On v1, io is
// blkio and CPU time is read from cpuacct.
const (
	CPU    = "cpu"
	Memory = "memory"
	IO     = "io"
	Pids   = "pids"
	// CPUAcct is v1's accounting hierarchy (cpu.stat's usage on v2).
	CPUAcct = "cpuacct"
)

// v1Name is a controller's name on v1.
func v1Name(c string) string {
	if c == IO {
		return "blkio"
	}
	return c
}

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	// Mount is where it is mounted; Root is the cgroup path of Mount's top
	// directory ("/" unless a subtree is bind-mounted, as in a container).
	Mount, Root string
	// Version is 1 or 2.
	Version int
	// Controllers are the v1 controllers bound to it (empty for v2).
	Controllers []string
}

// Hierarchies are the machine's cgroup mounts, as this process sees them.
type Hierarchies struct {
	// V1 maps a v1 controller name (cpu, cpuacct, memory, blkio, pids) to
	// its hierarchy.
	V1 map[string]Hierarchy
	// V2 is the unified hierarchy, nil when it is not mounted.
	V2 *Hierarchy
}

// FindHierarchies reads /proc/self/mountinfo.
func FindHierarchies() (Hierarchies, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Hierarchies{}, fmt.Errorf("finding the cgroup mounts: %w", err)
	}
	defer f.Close()
	return ParseHierarchies(f)
}

// ParseHierarchies picks the cgroup and cgroup2 mounts out of mountinfo(5)
// lines. A v1 controller mounted twice keeps its first mount of the whole
// hierarchy (root "/"), else its first.
func ParseHierarchies(r io.Reader) (Hierarchies, error) {
	h := Hierarchies{V1: map[string]Hierarchy{}}
	err := mountinfo.Parse(r, func(m mountinfo.Mount) {
		mp, rt := m.Point, m.Root
		switch m.FSType {
		case "cgroup2":
			if h.V2 == nil || (h.V2.Root != "/" && rt == "/") {
				h.V2 = &Hierarchy{Mount: mp, Root: rt, Version: 2}
			}
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(m.SuperOptions, ",") {
				switch o {
				case "cpu", "cpuacct", "memory", "blkio", "pids", "freezer", "cpuset", "devices", "hugetlb", "net_cls", "net_prio", "perf_event", "rdma", "misc":
					ctrls = append(ctrls, o)
				}
			}
			for _, c := range ctrls {
				if old, ok := h.V1[c]; ok && (old.Root == "/" || rt != "/") {
					continue
				}
				h.V1[c] = Hierarchy{Mount: mp, Root: rt, Version: 1, Controllers: ctrls}
			}
		}
	})
	if err != nil {
		return Hierarchies{}, err
	}
	return h, nil
}

// ParseProcCgroup reads /proc/PID/cgroup: each v1 controller's cgroup path,
// and the unified one under the key "".
//
//	4:memory:/docker/3f2a
//	0::/system.slice/docker-3f2a.scope
func ParseProcCgroup(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		p := strings.TrimSuffix(parts[2], " (deleted)")
		if parts[1] == "" {
			out[""] = p
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = p
		}
	}
	return out, sc.Err()
}

// ProcCgroups reads /proc/PID/cgroup.
func ProcCgroups(pid int) (map[string]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProcCgroup(f)
}

// Place is where a set of processes is accounted, per controller: the
// cgroup directory (in the host's file system) whose interface files
// limit and count them.
type Place struct {
	// Dirs maps a controller (CPU, CPUAcct, Memory, IO, Pids) to its
	// directory; a controller the machine does not have is absent.
	Dirs map[string]string
	// Versions says which version each directory is of.
	Versions map[string]int
}

// Dir returns the directory of controller c and its version, or "" and 0.
func (p Place) Dir(c string) (string, int) { return p.Dirs[c], p.Versions[c] }

// hostDir turns a cgroup path as /proc/PID/cgroup shows it into a
// directory of hierarchy h, or "" when the path is outside what h shows.
func (h Hierarchy) hostDir(cg string) string {
	root := strings.TrimSuffix(h.Root, "/")
	if root != "" && cg != root && !strings.HasPrefix(cg, root+"/") {
		return ""
	}
	return filepath.Join(h.Mount, strings.TrimPrefix(cg, root))
}

// PlaceOf finds where the cgroup paths of one process (ParseProcCgroup)
// are, controller by controller: in a v1 hierarchy when one has the
// controller, else in the unified hierarchy when its cgroup.controllers
// lists it. CPUAcct is the cpu directory on v2 (cpu.stat).
func (h Hierarchies) PlaceOf(cgs map[string]string) Place {
	p := Place{Dirs: map[string]string{}, Versions: map[string]int{}}
	for _, c := range []string{CPU, CPUAcct, Memory, IO, Pids} {
		if hv, ok := h.V1[v1Name(c)]; ok {
			if cg, ok := cgs[v1Name(c)]; ok {
				if d := hv.hostDir(cg); d != "" {
					p.Dirs[c], p.Versions[c] = d, 1
				}
			}
			continue
		}
		if h.V2 == nil {
			continue
		}
		cg, ok := cgs[""]
		if !ok {
			continue
		}
		d := h.V2.hostDir(cg)
		want := c
		if c == CPUAcct {
			want = CPU
		}
		if d != "" && hasController(d, want) {
			p.Dirs[c], p.Versions[c] = d, 2
		}
	}
	return p
}

// hasController reports whether v2 directory d has controller c: its
// parent enabled it (d's cgroup.controllers lists it).
func hasController(d, c string) bool {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
	return err == nil && slices.Contains(strings.Fields(string(b)), c)
}

// PlaceOfPid is PlaceOf for a live process.
func PlaceOfPid(h Hierarchies, pid int) (Place, error) {
	cgs, err := ProcCgroups(pid)
	if err != nil {
		return Place{}, fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	return h.PlaceOf(cgs), nil
}

// ErrNoController says a controller a fault needs is nowhere this process
// can write it.
var ErrNoController = errors.New("controller not available")
