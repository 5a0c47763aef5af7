package backend

import (
	"context"
	"net/netip"
)

// Networked is a handle whose network the harness can change from the
// host: it has a network namespace of its own (a process in one the run
// made, a container, a pod's sandbox) that the network faults (latency,
// loss, bandwidth, reset, blackhole, partition) act in, with the host's
// tools, so nothing is needed inside an image. Which handles can do it is
// said before the run by the registration's Support (and TargetSupport),
// so experiments that need it elsewhere are n/a; Network fails only when
// the namespace cannot be found now (the container is not running, the
// pod is on another node).
type Networked interface {
	Network(ctx context.Context) (Net, error)
}

// Net is where a handle's network is, as it is now.
type Net struct {
	// NS is a path that opens the network namespace: /proc/<pid>/ns/net,
	// or a file the backend holds open (/proc/<harness>/fd/<n>).
	NS string
	// Addrs are the addresses others reach the handle at; a partition cuts
	// them off. The namespace must hold each of them (it is checked).
	Addrs []netip.Addr
	// What says what the namespace is, for the timeline: "netns of
	// instance etcd-0 (198.18.7.4)", "container 3f2a1b0c9d8e", "pod
	// chaos-x-writer-0 (sandbox)".
	What string
	// Pid is a process in the namespace when there is one, so chaos
	// cleanup can find the namespace again after the harness was killed.
	Pid int
}
