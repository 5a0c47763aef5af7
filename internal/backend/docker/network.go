package docker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
)

// The network faults act on a container's network namespace, found from
// the host through the container's process (docker inspect's State.Pid):
// /proc/<pid>/ns/net. Its addresses are the container's on each of its
// networks. Nothing is needed inside the image.

// containerNet is the network of container id, which must be running.
func (b *Backend) containerNet(ctx context.Context, id, name string) (backend.Net, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return backend.Net{}, fmt.Errorf("container %s: %w", name, err)
	}
	c := res.Container
	if c.State == nil || !c.State.Running || c.State.Pid <= 0 {
		return backend.Net{}, fmt.Errorf("container %s is not running, so it has no network namespace to change", name)
	}
	if c.HostConfig != nil && c.HostConfig.NetworkMode.IsHost() {
		return backend.Net{}, fmt.Errorf("container %s: %w: it uses the host's network, which the harness never changes", name, backend.ErrUnsupported)
	}
	var addrs []netip.Addr
	if c.NetworkSettings != nil {
		for _, n := range c.NetworkSettings.Networks {
			if n == nil {
				continue
			}
			for _, a := range []netip.Addr{n.IPAddress, n.GlobalIPv6Address} {
				if a.IsValid() && !slices.Contains(addrs, a) {
					addrs = append(addrs, a)
				}
			}
		}
	}
	return backend.Net{NS: fmt.Sprintf("/proc/%d/ns/net", c.State.Pid), Addrs: addrs, What: "container " + shortID(id), Pid: c.State.Pid}, nil
}

// Network is the instance's container's network.
func (in *instance) Network(ctx context.Context) (backend.Net, error) {
	return in.b.containerNet(ctx, in.containerID(), in.name)
}

// Network is a role's or a target's container's network.
func (h *containerHandle) Network(ctx context.Context) (backend.Net, error) {
	return h.b.containerNet(ctx, h.c.ID, h.c.Name)
}
