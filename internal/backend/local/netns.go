package local

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Isolated networks. An adapter of this backend that sets
//
//	options:
//	  network: isolated
//
// gets a network of the run's own (netfault.Lab): every instance and every
// target the run owns runs in a network namespace of its own, with an
// address on a bridge the run made, which the host reaches at
// $CHAOS_NET_HOST. Addresses are given out when the run starts, in a fixed
// order (the run-owned process targets by name, then each workload's
// instances in order), so every hook and instance knows each one's address
// from the start: $CHAOS_NET_ADDR_<NAME> (the name in capitals, - and . as
// _), and an instance its own as $CHAOS_NET_ADDR. A namespace lives as long
// as the run (a restart keeps it, and its rules); the network faults act in
// it. Hooks, checks and watchers run on the host, which reaches every
// member. Without the option (network: host, the default) processes share
// the host's network and the network faults are n/a.

// Option values of options.network.
const (
	NetworkHost     = "host"
	NetworkIsolated = "isolated"
)

// networkOption reads options.network.
func networkOption(a *adapter.Adapter) (string, error) {
	for k := range a.Options {
		if k != "network" {
			return "", fmt.Errorf("options.%s: the process backend has no option %q (it has network: host or isolated)", k, k)
		}
	}
	switch v := a.Options["network"]; v {
	case "", NetworkHost:
		return NetworkHost, nil
	case NetworkIsolated:
		return NetworkIsolated, nil
	default:
		return "", fmt.Errorf("options.network: %q is not host or isolated", v)
	}
}

// check reports options this backend cannot read.
func check(a *adapter.Adapter) []adapter.BackendProblem {
	if _, err := networkOption(a); err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		return []adapter.BackendProblem{{Field: field, Msg: msg}}
	}
	return nil
}

// isolated reports whether a's processes get namespaces of their own.
func isolated(a *adapter.Adapter) bool {
	if a == nil || a.Backend != Name {
		return false
	}
	v, err := networkOption(a)
	return err == nil && v == NetworkIsolated
}

// support makes the network faults n/a where processes share the host's
// network.
func support(a *adapter.Adapter, on backend.On, k backend.Kind, fault string) string {
	if !experiment.IsNetworkFault(fault) {
		return ""
	}
	switch {
	case a.Backend != Name:
		return fmt.Sprintf("a process target of a %s adapter runs in the host's network namespace, which the harness never changes", a.Backend)
	case !isolated(a):
		return "processes share the host's network namespace, which the harness never changes; set options: {network: isolated} on the adapter to give each instance and run-owned target one of its own"
	}
	return ""
}

// targetSupport makes them n/a on targets the run does not own.
func targetSupport(a *adapter.Adapter, name string, t *adapter.Target, fault string) string {
	if why := resourceTargetSupport(name, t, fault); why != "" {
		return why
	}
	if experiment.IsFSFault(fault) && t.Lifecycle != "run" {
		return fmt.Sprintf("target %s is external: it was started before the run, so it already holds the directory the file-system layer would be mounted over (a target the run owns, lifecycle: run, starts after the layer)", name)
	}
	if experiment.IsNetworkFault(fault) && t.Lifecycle != "run" {
		return fmt.Sprintf("target %s is external: it runs in the host's network namespace, which the harness never changes (a target the run owns, lifecycle: run, gets a namespace of its own)", name)
	}
	return ""
}

// localNet is the run's network and its members' addresses.
type localNet struct {
	lab   *netfault.Lab
	err   error
	addrs map[string]netip.Addr
}

// netMember is an instance's or a target's namespace.
type netMember = netfault.Member

// open opens the backend for a run: with an isolated network, it makes the
// run's network and gives out the addresses. A network that cannot be
// made is a failed preflight check, not an error here.
func open(ctx context.Context, run *backend.Run) (backend.Backend, error) {
	b := New(run)
	if !isolated(run.Adapter) {
		return b, nil
	}
	n := &localNet{addrs: map[string]netip.Addr{}}
	b.net = n
	n.lab, n.err = netfault.NewLab(ctx, run.ID)
	if n.err != nil {
		return b, nil
	}
	var names []string
	for _, name := range run.Adapter.TargetNames() {
		if t := run.Adapter.Target(name); t.Type == adapter.TypeProcess && t.Lifecycle == "run" {
			names = append(names, name)
		}
	}
	for _, w := range run.Experiment.Workloads {
		for i := 0; i < w.InstanceCount(); i++ {
			names = append(names, fmt.Sprintf("%s-%d", w.Name, i))
		}
	}
	envs := map[string]string{}
	for _, name := range names {
		if other, dup := envs[addrEnv(name)]; dup {
			n.err = fmt.Errorf("%s and %s would both be $%s", other, name, addrEnv(name))
			return b, nil
		}
		envs[addrEnv(name)] = name
		a, err := n.lab.Reserve()
		if err != nil {
			n.err = err
			return b, nil
		}
		n.addrs[name] = a
	}
	members := map[string]string{}
	for name, a := range n.addrs {
		members[name] = a.String()
	}
	run.Record("network.created", rundir.F("subnet", n.lab.Prefix.String()), rundir.F("host", n.lab.Host.String()), rundir.F("link", n.lab.HostLink), rundir.F("members", members))
	return b, nil
}

// addrEnv is the variable that holds a member's address.
func addrEnv(name string) string {
	return "CHAOS_NET_ADDR_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// Env gives every hook and instance the run's network: the host's address
// on it, its subnet, and each member's address.
func (b *Backend) Env() []string {
	n := b.net
	if n == nil || n.lab == nil || n.err != nil {
		return nil
	}
	env := []string{"CHAOS_NET_HOST=" + n.lab.Host.String(), "CHAOS_NET_SUBNET=" + n.lab.Prefix.String()}
	for _, name := range slices.Sorted(maps.Keys(n.addrs)) {
		env = append(env, addrEnv(name)+"="+n.addrs[name].String())
	}
	return env
}

// networkChecks is the preflight check of an isolated network.
func (b *Backend) networkChecks() []backend.Check {
	n := b.net
	if n == nil {
		return nil
	}
	if n.err != nil {
		return []backend.Check{{Name: "network", OK: false, Detail: "the run's isolated network could not be made: " + n.err.Error()}}
	}
	return []backend.Check{{Name: "network", OK: true, Detail: fmt.Sprintf("isolated: %d members on %s, the host at %s (link %s)", len(n.addrs), n.lab.Prefix, n.lab.Host, n.lab.HostLink)}}
}

// member returns name's namespace, making it on first use.
func (n *localNet) member(ctx context.Context, name string) (*netfault.Member, error) {
	if n.err != nil {
		return nil, n.err
	}
	a, ok := n.addrs[name]
	if !ok {
		return nil, fmt.Errorf("%s has no address on the run's network", name)
	}
	return n.lab.Member(ctx, name, a)
}

// joinNetwork gives an instance its namespace, when the run has a network.
func (b *Backend) joinNetwork(ctx context.Context, in *instance) error {
	if b.net == nil {
		return nil
	}
	m, err := b.net.member(ctx, in.spec.Name)
	if err != nil {
		return fmt.Errorf("instance %s: %w", in.spec.Name, err)
	}
	in.member = m
	in.spec.Env = append(in.spec.Env, "CHAOS_NET_ADDR="+m.Addr.String())
	return nil
}

// command is the instance's wrapper, run in its namespace when it has one.
func (in *instance) command() *exec.Cmd {
	// The wrapper's $1 is the time of this start, which it would otherwise
	// fork date for.
	started := time.Now().UTC().Format("2006-01-02T15:04:05Z")
	argv := append(timePrefix(in.spec.TimeOffsets), "/bin/sh", in.spec.Wrapper, started)
	if in.member != nil {
		argv = append([]string{nsenterPath(), "--net=" + in.member.NS.Path(), "--"}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

// timePrefix starts a command in a time namespace of its own with the
// offsets (unshare --time: the namespace is made before the command
// starts, the only moment its offsets can be set, and ends with the last
// process in it).
func timePrefix(o *backend.TimeOffsets) []string {
	if o == nil {
		return nil
	}
	return []string{unsharePath(), "--time",
		"--monotonic=" + strconv.FormatInt(int64(o.Monotonic/time.Second), 10),
		"--boottime=" + strconv.FormatInt(int64(o.Boottime/time.Second), 10), "--"}
}

func unsharePath() string {
	for _, p := range []string{"/usr/bin/unshare", "/bin/unshare"} {
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	return "unshare"
}

// netPrefix is what a run-owned target's start hook runs under: nsenter
// into the target's namespace, when the run has a network.
func (b *Backend) netPrefix(target string) []string {
	if b.net == nil {
		return nil
	}
	m, err := b.net.member(context.Background(), target)
	if err != nil {
		// The hook then fails to start, saying why.
		return []string{"/bin/sh", "-c", "echo " + strconv.Quote(err.Error()) + " >&2; exit 1", "--"}
	}
	return []string{nsenterPath(), "--net=" + m.NS.Path(), "--"}
}

func nsenterPath() string {
	for _, p := range []string{"/usr/bin/nsenter", "/bin/nsenter"} {
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	return "nsenter"
}

// closeNetwork lets go of the run's network.
func (b *Backend) closeNetwork() error {
	if b.net == nil || b.net.lab == nil {
		return nil
	}
	return b.net.lab.Close()
}

// Network is the instance's namespace and address.
func (in *instance) Network(ctx context.Context) (backend.Net, error) {
	if in.member == nil {
		return backend.Net{}, fmt.Errorf("instance %s: %w: it shares the host's network (options.network: isolated gives it a namespace)", in.spec.Name, backend.ErrUnsupported)
	}
	pid, _ := strconv.Atoi(in.ID())
	return backend.Net{NS: in.member.NS.Path(), Addrs: []netip.Addr{in.member.Addr}, What: "netns of instance " + in.spec.Name, Pid: pid}, nil
}

// Network is a run-owned target's namespace and address.
func (t *target) Network(ctx context.Context) (backend.Net, error) {
	n := t.b.net
	if n == nil || !t.owned() {
		return backend.Net{}, fmt.Errorf("target %s: %w: it runs in the host's network namespace", t.name, backend.ErrUnsupported)
	}
	m, err := n.member(ctx, t.name)
	if err != nil {
		return backend.Net{}, err
	}
	pid, _ := t.pid()
	return backend.Net{NS: m.NS.Path(), Addrs: []netip.Addr{m.Addr}, What: "netns of target " + t.name, Pid: pid}, nil
}
