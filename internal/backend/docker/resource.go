package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/proc"
)

// The resource faults act on a container's own cgroups, found from the
// host through its first process (/proc/<pid>/cgroup, which names them
// with the cgroupfs and systemd drivers alike, on v1 and v2), and on its
// file system through /proc/<pid>/root. A limit is written to the
// container's group and the value it held is written back on revert; a
// stress helper is a process of this machine placed in the container's
// groups, so it competes inside the container's own limits and nothing is
// needed in the image. The engine's own view (docker inspect's
// HostConfig) is not changed: the limits are the fault's, held and
// reverted by the harness, and docker update would make them the
// container's. The engine reports an OOM kill itself (OOMKilled).

// containerResources are the groups and root of container id.
func (b *Backend) containerResources(ctx context.Context, id, name string) (backend.Resources, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return backend.Resources{}, fmt.Errorf("container %s: %w", name, err)
	}
	c := res.Container
	if c.State == nil || !c.State.Running || c.State.Pid <= 0 {
		return backend.Resources{}, fmt.Errorf("container %s is not running, so it has no cgroups to limit", name)
	}
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return backend.Resources{}, err
	}
	pid := c.State.Pid
	p, err := cgroup.PlaceOfPid(h, pid)
	if err != nil {
		return backend.Resources{}, fmt.Errorf("container %s: %w", name, err)
	}
	if len(p.Dirs) == 0 {
		return backend.Resources{}, fmt.Errorf("container %s: %w: none of its cgroups is where this machine has the cpu, memory, io or pids controller", name, cgroup.ErrNoController)
	}
	return backend.Resources{What: "container " + shortID(id), Pid: pid, Root: fmt.Sprintf("/proc/%d/root", pid), Place: p}, nil
}

// Resources are the instance's container's groups.
func (in *instance) Resources(ctx context.Context, need backend.ResourceNeed) (backend.Resources, error) {
	return in.b.containerResources(ctx, in.containerID(), in.name)
}

// Resources are a role's or a target's container's groups.
func (h *containerHandle) Resources(ctx context.Context, need backend.ResourceNeed) (backend.Resources, error) {
	return h.b.containerResources(ctx, h.c.ID, h.c.Name)
}

// Processes are the instance's container's processes, for the clock
// faults.
func (in *instance) Processes(ctx context.Context) (string, []int, error) {
	return in.b.containerProcesses(ctx, in.containerID(), in.name)
}

// Processes are a role's or a target's container's processes.
func (h *containerHandle) Processes(ctx context.Context) (string, []int, error) {
	return h.b.containerProcesses(ctx, h.c.ID, h.c.Name)
}

// containerProcesses are the host pids of every process in container id:
// those of its cgroup (docker exec's included), else its first process and
// its descendants.
func (b *Backend) containerProcesses(ctx context.Context, id, name string) (string, []int, error) {
	res, err := b.containerResources(ctx, id, name)
	if err != nil {
		return "", nil, err
	}
	for _, dir := range res.Place.Dirs {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		if slices.Contains(pids, res.Pid) {
			return res.What, pids, nil
		}
	}
	return res.What, append([]int{res.Pid}, proc.Descendants(res.Pid)...), nil
}
