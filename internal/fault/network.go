package fault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// The network faults act on a handle's network namespace from the host
// (backend.Networked): latency, loss, bandwidth, reset and blackhole on
// each handle on its own, a partition on all its members at once. Each is
// held like a freeze: for the duration, or to the end of the flow.

// netTarget finds h's network.
func netTarget(ctx context.Context, h backend.Handle) (netfault.Target, error) {
	nh, ok := h.(backend.Networked)
	if !ok {
		return netfault.Target{}, fmt.Errorf("%s: %w: it has no network namespace the harness can change", h.Name(), backend.ErrUnsupported)
	}
	n, err := nh.Network(ctx)
	if err != nil {
		return netfault.Target{}, fmt.Errorf("%s: finding its network namespace: %w", h.Name(), err)
	}
	return netfault.Target{Name: h.Name(), NS: n.NS, Addrs: n.Addrs, What: n.What, Pid: n.Pid}, nil
}

// applyNetwork puts op's network fault into h's namespace and holds it.
func applyNetwork(ctx context.Context, env Env, op Op, h backend.Handle) error {
	if op.Net == nil || op.Network == nil {
		return fmt.Errorf("%s: this run applies no network faults", op.Fault)
	}
	// Like a Down, an application that has begun is seen through, and then
	// reverted at once if the run was aborted meanwhile.
	bg := context.WithoutCancel(ctx)
	t, err := netTarget(bg, h)
	if err != nil {
		return err
	}
	r, err := op.Net.Apply(bg, t, *op.Network, netfault.Op{Operation: op.Operation, Run: op.Run})
	if err != nil {
		return err
	}
	return hold(ctx, env, op, func(ctx context.Context) error { return op.Net.Remove(ctx, r) })
}

// Partition cuts members off from each other: cut(i, j) says that what
// member i sends must not reach member j. Each member's namespace gets one
// rule: drop what it gets from those who must not reach it, so the sender
// sees nothing but silence, as in a real partition.
//
// Every member is cut at the same moment: all rules are prepared first
// (namespaces found and checked, rules journaled, nft started in each
// namespace with its rules), then committed together, one goroutine per
// member released at once, and the hold is timed from the last member's
// rule taking effect. The heal is made the same way. A member an agent
// of its node serves (backend.Remote: a pod with the node agent) gets its
// rule from that agent, all agents asked at once just before the members
// of this machine are committed; its addresses come from the backend
// (backend.Addressed) when its namespace is not on this machine. If a
// rule cannot be prepared or applied, those that were are removed and the
// partition fails. The timeline has network.applied and network.removed
// per member with the moment of each edge (at), and network.partition
// with the spread of each edge across the members.
func Partition(ctx context.Context, env Env, op Op, members []backend.Handle, cut func(i, j int) bool) error {
	if op.Net == nil {
		return errors.New("partition: this run applies no network faults")
	}
	bg := context.WithoutCancel(ctx)
	local := make([]*netfault.Target, len(members))
	addrs := make([][]netip.Addr, len(members))
	for i, h := range members {
		t, err := netTarget(bg, h)
		_, remote := h.(backend.Remote)
		ah, addressed := h.(backend.Addressed)
		switch {
		case err == nil:
			local[i], addrs[i] = &t, t.Addrs
		case remote && addressed:
			a, aerr := ah.Addrs(bg)
			if aerr != nil {
				return errors.Join(err, aerr)
			}
			addrs[i] = a
		default:
			return err
		}
		if len(addrs[i]) == 0 {
			return fmt.Errorf("%s: no address to cut off", h.Name())
		}
	}
	specs := make([]netfault.Spec, len(members))
	for i := range members {
		specs[i] = netfault.Spec{Fault: netfault.Partition}
		for j := range members {
			// Each cut is made where the packet arrives: dropped on its way
			// in, it is lost to the sender without a word, where one dropped
			// on its way out makes the send fail (EPERM).
			if i != j && cut(j, i) {
				specs[i].DropFrom = append(specs[i].DropFrom, addrs[j]...)
			}
		}
	}
	far := applyThroughAgents(bg, op, members, specs)
	var errs []error
	for _, a := range far {
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	if len(errs) > 0 {
		_, uerr := revertThroughAgents(bg, far)
		return errors.Join(append(errs, uerr)...)
	}
	var pending []*netfault.Pending
	abort := func() {
		for _, p := range pending {
			p.Abort()
		}
	}
	for i, h := range members {
		if far[i].served || len(specs[i].DropTo)+len(specs[i].DropFrom) == 0 {
			continue
		}
		if local[i] == nil {
			abort()
			_, uerr := revertThroughAgents(bg, far)
			return errors.Join(fmt.Errorf("%s: no node agent serves it, and its network namespace is not on this machine", h.Name()), uerr)
		}
		p, err := op.Net.Prepare(bg, *local[i], specs[i], netfault.Op{Operation: op.Operation, Run: op.Run})
		if err != nil {
			abort()
			_, uerr := revertThroughAgents(bg, far)
			return errors.Join(err, uerr)
		}
		pending = append(pending, p)
	}
	var rules []*netfault.Rule
	errs = commitAll(bg, pending)
	for i, p := range pending {
		if errs[i] == nil {
			rules = append(rules, p.Rule())
		}
	}
	edges := func(at func(*netfault.Rule) time.Time, agents []time.Time) []time.Time {
		var ts []time.Time
		for _, r := range rules {
			ts = append(ts, at(r))
		}
		return append(ts, agents...)
	}
	var agentsOn []time.Time
	for _, a := range far {
		if a.served {
			agentsOn = append(agentsOn, a.at)
		}
	}
	undo := func(ctx context.Context) error {
		var ps []*netfault.Pending
		var errs []error
		for _, r := range rules {
			p, err := op.Net.PrepareRemove(ctx, r)
			if err != nil {
				// Removed on its own, later than the others.
				errs = append(errs, op.Net.Remove(ctx, r))
				continue
			}
			ps = append(ps, p)
		}
		var off []time.Time
		var aerr error
		done := make(chan struct{})
		go func() { off, aerr = revertThroughAgents(ctx, far); close(done) }()
		errs = append(errs, commitAll(ctx, ps)...)
		<-done
		errs = append(errs, aerr)
		recordSpread(env, op, "off", edges(func(r *netfault.Rule) time.Time { return r.Removed }, off))
		return errors.Join(errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return errors.Join(err, undo(bg))
	}
	on := recordSpread(env, op, "on", edges(func(r *netfault.Rule) time.Time { return r.Applied }, agentsOn))
	// The hold runs from the last member's cut, not from when this
	// goroutine got round to it.
	if op.Duration > 0 && !on.IsZero() {
		op.Duration = max(op.Duration-time.Since(on), time.Nanosecond)
	}
	return hold(ctx, env, op, undo)
}

// farMember is a partition member's rule as the agent of its node applied
// it: served when one did, at when it answered.
type farMember struct {
	served bool
	undo   func(ctx context.Context) error
	at     time.Time
	err    error
}

// applyThroughAgents asks, all at once, the agent of each member that has
// one (backend.Remote) for its rule.
func applyThroughAgents(ctx context.Context, op Op, members []backend.Handle, specs []netfault.Spec) []farMember {
	out := make([]farMember, len(members))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, h := range members {
		r, ok := h.(backend.Remote)
		if !ok || len(specs[i].DropTo)+len(specs[i].DropFrom) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := specs[i]
			undo, served, err := r.ApplyRemote(ctx, backend.RemoteFault{Fault: op.Fault, Operation: op.Operation, Run: op.Run, Network: &s})
			out[i] = farMember{served: served && err == nil, undo: undo, at: time.Now(), err: err}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// revertThroughAgents reverts, all at once, what the agents applied, and
// says when each answered.
func revertThroughAgents(ctx context.Context, far []farMember) ([]time.Time, error) {
	var mu sync.Mutex // guards at and errs
	var at []time.Time
	var errs []error
	var wg sync.WaitGroup
	for _, a := range far {
		if !a.served {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := a.undo(ctx)
			mu.Lock()
			at = append(at, time.Now())
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return at, errors.Join(errs...)
}

// commitAll makes every pending change at once, one goroutine each, all
// released together, and only then does what follows each (reading the
// rule back, deleting a table), so nothing slow sits between the edges.
func commitAll(ctx context.Context, ps []*netfault.Pending) []error {
	errs := make([]error, len(ps))
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for _, p := range ps {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			_ = p.Switch() // Finish reports it
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for i, p := range ps {
		errs[i] = p.Finish(ctx)
	}
	return errs
}

// recordSpread records network.partition for one edge (on, off): when the
// last member's rule changed and how far apart the members' changes were.
// It returns the last.
func recordSpread(env Env, op Op, edge string, times []time.Time) time.Time {
	var first, last time.Time
	for _, t := range times {
		if t.IsZero() {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	if !last.IsZero() {
		env.Record("network.partition", rundir.F("operation", op.Operation), rundir.F("run", op.Run), rundir.F("edge", edge), rundir.F("members", len(times)),
			rundir.F("at", last.UTC().Format(time.RFC3339Nano)), rundir.F("spread_ms", float64(last.Sub(first).Microseconds())/1000))
	}
	return last
}

// Layout is a partition's members split as its shape says.
type Layout struct {
	// Groups are the members' indexes by group: members of different
	// groups cannot reach each other. Nil for a ring.
	Groups [][]int
	// Ring is the members' order around the ring, for shape ring: each
	// reaches only its two neighbours.
	Ring []int
	// OneWay cuts only what the first group sends to the others.
	OneWay bool
}

// Cut says whether what member i sends must not reach member j.
func (l Layout) Cut(i, j int) bool {
	if l.Ring != nil {
		n := len(l.Ring)
		pi, pj := slices.Index(l.Ring, i), slices.Index(l.Ring, j)
		d := (pi - pj + n) % n
		return d != 0 && d != 1 && d != n-1
	}
	gi, gj := -1, -1
	for g, ms := range l.Groups {
		if slices.Contains(ms, i) {
			gi = g
		}
		if slices.Contains(ms, j) {
			gj = g
		}
	}
	if gi < 0 || gj < 0 || gi == gj {
		return false
	}
	return !l.OneWay || gi == 0
}

// Shape splits n members as shape says, drawing from rng: halves (a random
// ⌊n/2⌋ against the rest), majority (a random majority stays together,
// each of the others is alone), isolate-one (member isolate, or a random
// one when isolate < 0, against the rest), ring (a random order; each
// reaches only its two neighbours; needs 4 or more). Explicit groups are
// the caller's.
func Shape(shape string, n int, rng *rand.Rand, isolate int) (Layout, error) {
	if n < 2 {
		return Layout{}, fmt.Errorf("a partition needs at least 2 members, it has %d", n)
	}
	perm := rng.Perm(n)
	switch shape {
	case experiment.ShapeHalves:
		a := slices.Clone(perm[:n/2])
		b := slices.Clone(perm[n/2:])
		slices.Sort(a)
		slices.Sort(b)
		return Layout{Groups: [][]int{a, b}}, nil
	case experiment.ShapeMajority:
		k := n/2 + 1
		maj := slices.Clone(perm[:k])
		slices.Sort(maj)
		groups := [][]int{maj}
		rest := slices.Clone(perm[k:])
		slices.Sort(rest)
		for _, i := range rest {
			groups = append(groups, []int{i})
		}
		return Layout{Groups: groups}, nil
	case experiment.ShapeIsolateOne:
		one := perm[0]
		if isolate >= 0 {
			one = isolate
		}
		var rest []int
		for i := 0; i < n; i++ {
			if i != one {
				rest = append(rest, i)
			}
		}
		return Layout{Groups: [][]int{{one}, rest}}, nil
	case experiment.ShapeRing:
		if n < 4 {
			return Layout{}, fmt.Errorf("a ring needs at least 4 members (each reaches only its two neighbours), it has %d", n)
		}
		return Layout{Ring: perm}, nil
	}
	return Layout{}, fmt.Errorf("unknown partition shape %q", shape)
}

// NetworkSpec is the netfault spec of an operation's network fault (not a
// partition), with its jitter drawn from seed.
func NetworkSpec(o *experiment.Operation, seed uint64) (*netfault.Spec, error) {
	s := &netfault.Spec{Fault: o.Uses, Seed: seed}
	n := o.Network
	if n == nil {
		n = &experiment.Network{}
	}
	switch o.Uses {
	case experiment.FaultLatency:
		s.Delay, s.Jitter = n.Delay.D(), n.Jitter.D()
		if n.Correlation != nil {
			s.Correlation = *n.Correlation
		}
	case experiment.FaultLoss:
		s.Percent = n.Percent
	case experiment.FaultBandwidth:
		rate, err := experiment.ParseRate(n.Rate)
		if err != nil {
			return nil, err
		}
		s.Rate = rate
	}
	return s, nil
}
