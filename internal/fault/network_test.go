package fault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func TestShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// isolate-one with a chosen member: it against the rest, both ways.
	l, err := Shape("isolate-one", 3, rng, 1)
	if err != nil || !slices.Equal(l.Groups[0], []int{1}) || !slices.Equal(l.Groups[1], []int{0, 2}) {
		t.Fatalf("isolate-one: %+v %v", l, err)
	}
	if !l.Cut(1, 0) || !l.Cut(0, 1) || l.Cut(0, 2) {
		t.Errorf("isolate-one cuts %+v", l)
	}
	l.OneWay = true
	if !l.Cut(1, 0) || l.Cut(0, 1) {
		t.Errorf("one-way: only what the first group sends is cut")
	}
	// halves of 5: 2 against 3, every member in one group.
	l, _ = Shape("halves", 5, rng, -1)
	if len(l.Groups) != 2 || len(l.Groups[0]) != 2 || len(l.Groups[1]) != 3 {
		t.Errorf("halves: %+v", l)
	}
	// majority of 5: 3 together, the 2 others alone.
	l, _ = Shape("majority", 5, rng, -1)
	if len(l.Groups) != 3 || len(l.Groups[0]) != 3 {
		t.Errorf("majority: %+v", l)
	}
	if a, b := l.Groups[1][0], l.Groups[2][0]; !l.Cut(a, b) || !l.Cut(b, a) {
		t.Errorf("majority: the minority members reach each other")
	}
	// ring of 5: each reaches its 2 neighbours, so sees 3 of 5 (a
	// majority), and is cut from 2.
	l, _ = Shape("ring", 5, rng, -1)
	for i := 0; i < 5; i++ {
		cut := 0
		for j := 0; j < 5; j++ {
			if l.Cut(i, j) {
				cut++
				if !l.Cut(j, i) {
					t.Errorf("ring: a one-way cut %d %d", i, j)
				}
			}
		}
		if cut != 2 {
			t.Errorf("ring: member %d is cut from %d, want 2", i, cut)
		}
	}
	if _, err := Shape("ring", 3, rng, -1); err == nil {
		t.Error("a ring of 3")
	}
	if _, err := Shape("halves", 1, rng, -1); err == nil {
		t.Error("a partition of 1")
	}
	// The same seed makes the same split.
	a, _ := Shape("halves", 7, rand.New(rand.NewPCG(9, 9)), -1)
	b, _ := Shape("halves", 7, rand.New(rand.NewPCG(9, 9)), -1)
	if !slices.Equal(a.Groups[0], b.Groups[0]) {
		t.Error("halves is not from the seed")
	}
}

// netHandle is a member of a test network.
type netHandle struct {
	script
	m *netfault.Member
}

func (h *netHandle) Name() string { return h.m.Name }
func (h *netHandle) Network(context.Context) (backend.Net, error) {
	return backend.Net{NS: h.m.NS.Path(), Addrs: []netip.Addr{h.m.Addr}, What: "test netns of " + h.m.Name}, nil
}

// inNS runs fn on a thread of its own in the namespace at path; what fn
// opens stays there. The thread is thrown away after.
func inNS(path string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open(path)
		if err != nil {
			ch <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- fn()
	}()
	return <-ch
}

// timedEnv records each event with its fields and the moment.
type timedEnv struct {
	env
	mu  sync.Mutex
	evs []timedEvent
}

type timedEvent struct {
	name   string
	at     time.Time
	fields map[string]any
}

func (e *timedEnv) Record(name string, fields ...rundir.Field) {
	m := map[string]any{}
	for _, f := range fields {
		m[f.Key] = f.Value
	}
	at := time.Now()
	if s, ok := m["at"].(string); ok {
		at, _ = time.Parse(time.RFC3339Nano, s)
	}
	e.mu.Lock()
	e.evs = append(e.evs, timedEvent{name, at, m})
	e.mu.Unlock()
}

func (e *timedEnv) edges(name string) map[string]time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]time.Time{}
	for _, ev := range e.evs {
		if ev.name == name {
			out[ev.fields["target"].(string)] = ev.at
		}
	}
	return out
}

func spread(ts map[string]time.Time) (first, last time.Time) {
	for _, t := range ts {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// Issue 25 defect 2: every member of a partition is cut at the same
// moment and healed at the same moment, the hold is timed from the last
// member's cut, the timeline has both edges of every member, and the cut
// holds, measured from inside the members.
func TestPartitionActsAtOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the network fault tests need root")
		}
		t.Skip("needs root")
	}
	ctx := context.Background()
	lab, err := netfault.NewLab(ctx, fmt.Sprintf("fault-%d-%s", os.Getpid(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	const n = 6
	var hs []backend.Handle
	var ms []*netfault.Member
	for i := 0; i < n; i++ {
		a, err := lab.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		m, err := lab.Member(ctx, fmt.Sprintf("m%d", i), a)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		hs = append(hs, &netHandle{m: m})
	}
	// A listener in the last member, which the first is cut from.
	var l net.Listener
	if err := inNS(ms[n-1].NS.Path(), func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(ms[n-1].Addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(from *netfault.Member) error {
		return inNS(from.NS.Path(), func() error {
			c, err := net.DialTimeout("tcp", l.Addr().String(), 300*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	// Reachable, once the new namespaces answer (a loaded machine takes
	// more than one dial's 300 ms at first).
	reach := func() (err error) {
		for deadline := time.Now().Add(10 * time.Second); ; {
			if err = dial(ms[0]); err == nil || time.Now().After(deadline) {
				return err
			}
		}
	}
	if err := reach(); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	e := &timedEnv{}
	mgr := netfault.NewManager(netfault.Config{RunID: "20260101T000000Z-" + fmt.Sprintf("%04x", os.Getpid()&0xffff), StateDir: t.TempDir(), Record: e.Record})
	defer mgr.Close()
	layout := Layout{Groups: [][]int{{0, 1, 2}, {3, 4, 5}}}
	const hold = 3 * time.Second
	op := Op{Operation: "split", Fault: experiment.FaultPartition, Duration: hold, Run: 1, Net: mgr}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- Partition(ctx, e, op, hs, layout.Cut) }()
	for len(e.edges("network.applied")) < n && time.Since(start) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if err := dial(ms[0]); err == nil {
		t.Error("m0 reached m5 across the partition")
	} else if errors.Is(err, syscall.EPERM) {
		t.Errorf("m0 was told of the partition: %v (a real one is silence)", err)
	}
	// A datagram across the partition is lost without a word.
	if err := inNS(ms[0].NS.Path(), func() error {
		c, err := net.Dial("udp", netip.AddrPortFrom(ms[n-1].Addr, 9).String())
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < 10; i++ {
			if _, err := c.Write([]byte("x")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Errorf("sending across the partition: %v, want no error", err)
	}
	checked := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := reach(); err != nil {
		t.Errorf("after the partition healed: %v", err)
	}
	on, off := e.edges("network.applied"), e.edges("network.removed")
	if len(on) != n || len(off) != n {
		t.Fatalf("edges: on %v, off %v, want %d each", on, off, n)
	}
	onFirst, onLast := spread(on)
	offFirst, offLast := spread(off)
	if checked.After(offFirst) {
		t.Fatalf("the machine is too slow: the partition was measured from inside after it had begun to heal")
	}
	t.Logf("cut edges spread %v, heal edges spread %v, held %v (asked %v)", onLast.Sub(onFirst), offLast.Sub(offFirst), offFirst.Sub(onLast), hold)
	// A correctness bound, generous for a loaded machine: the members are
	// cut together, not one after the other.
	const within = 100 * time.Millisecond
	if d := onLast.Sub(onFirst); d > within {
		t.Errorf("the members were cut %v apart (%v)", d, on)
	}
	if d := offLast.Sub(offFirst); d > within {
		t.Errorf("the members were healed %v apart (%v)", d, off)
	}
	// The hold is timed from the last member's cut.
	if d := offFirst.Sub(onLast); d < hold-5*time.Millisecond || d > hold+within {
		t.Errorf("the partition was whole for %v from the last cut to the first heal, asked %v", d, hold)
	}
	for name, t0 := range on {
		if d := off[name].Sub(t0); d > hold+2*within {
			t.Errorf("%s was cut for %v, asked %v", name, d, hold)
		}
	}
	var spreads int
	for _, ev := range e.evs {
		if ev.name == "network.partition" {
			spreads++
		}
	}
	if spreads != 2 {
		t.Errorf("%d network.partition events, want one per edge", spreads)
	}
}
