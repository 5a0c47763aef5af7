package backend

import (
	"context"
	"net/netip"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/netfault"
)

// Remote is a handle whose node-level faults (freeze, the network,
// resource and clock faults) may have to be applied where it runs, by an
// agent on its node, rather than from this machine: a pod on a node with
// the kubernetes backend's node agent. The fault package asks it first.
type Remote interface {
	// ApplyRemote applies f where the handle runs and returns what reverts
	// it. remote is false, and nothing was done, when no agent serves the
	// handle: the fault is then applied from this machine as usual.
	ApplyRemote(ctx context.Context, f RemoteFault) (revert func(ctx context.Context) error, remote bool, err error)
}

// RemoteFault is one application of a fault as an agent is asked for it:
// everything of fault.Op that can cross a wire.
type RemoteFault struct {
	Fault     string `json:"fault"`
	Operation string `json:"operation"`
	Run       int    `json:"run"`
	// Network is a network fault's rule, or one partition member's (what
	// it must not take from the others).
	Network  *netfault.Spec       `json:"network,omitempty"`
	Resource *experiment.Resource `json:"resource,omitempty"`
	Clock    *experiment.Clock    `json:"clock,omitempty"`
}

// Addressed is a handle whose addresses are known without reaching its
// network namespace (a pod's IPs, from the API): a partition cuts a member
// whose namespace only its node's agent reaches off by them.
type Addressed interface {
	Addrs(ctx context.Context) ([]netip.Addr, error)
}
