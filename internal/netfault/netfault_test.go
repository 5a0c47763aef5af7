package netfault

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// TestMain lets the test binary be the delay queue's helper, as the chaos
// binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == QueueCommand {
		os.Exit(QueueMain(os.Args[2:]))
	}
	if exe, err := os.Executable(); err == nil {
		Helper = exe
	}
	os.Exit(m.Run())
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the network fault tests need root")
		}
		t.Skip("needs root")
	}
}

// listenIn opens a TCP listener in ns on addr:0 and echoes what it reads.
func listenIn(t *testing.T, ns *NS, addr netip.Addr) net.Listener {
	t.Helper()
	var l net.Listener
	err := inNS(ns, func() error {
		var err error
		l, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return l
}

// rtt is the median round trip of a byte over one connection.
func rtt(t *testing.T, addr string) time.Duration {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	var ds []time.Duration
	buf := make([]byte, 1)
	for i := 0; i < 7; i++ {
		start := time.Now()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	for i := range ds {
		for j := i + 1; j < len(ds); j++ {
			if ds[j] < ds[i] {
				ds[i], ds[j] = ds[j], ds[i]
			}
		}
	}
	return ds[len(ds)/2]
}

type events struct {
	names []string
	last  map[string]map[string]any
}

func (e *events) record(name string, fields ...rundir.Field) {
	e.names = append(e.names, name)
	if e.last == nil {
		e.last = map[string]map[string]any{}
	}
	m := map[string]any{}
	for _, f := range fields {
		m[f.Key] = f.Value
	}
	e.last[name] = m
}

func newLab(t *testing.T) *Lab {
	t.Helper()
	needRoot(t)
	ctx := context.Background()
	lab, err := NewLab(ctx, fmt.Sprintf("test-%d-%s", os.Getpid(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	return lab
}

func member(t *testing.T, lab *Lab, name string) *Member {
	t.Helper()
	a, err := lab.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	m, err := lab.Member(context.Background(), name, a)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLatencyFromOutside(t *testing.T) {
	lab := newLab(t)
	m := member(t, lab, "a")
	l := listenIn(t, m.NS, m.Addr)
	ev := &events{}
	dir := t.TempDir()
	mgr := NewManager(Config{RunID: "test-" + t.Name(), SystemDir: dir, StateDir: t.TempDir(), Record: ev.record})
	ctx := context.Background()
	before := rtt(t, l.Addr().String())
	r, err := mgr.Apply(ctx, Target{Name: "a", NS: m.NS.Path(), Addrs: []netip.Addr{m.Addr}, What: "test"}, Spec{Fault: Latency, Delay: 100 * time.Millisecond}, Op{Operation: "slow", Run: 1})
	if err != nil {
		t.Fatal(err)
	}
	during := rtt(t, l.Addr().String())
	if err := mgr.Remove(ctx, r); err != nil {
		t.Fatal(err)
	}
	after := rtt(t, l.Addr().String())
	t.Logf("round trip before %v, during %v (%s), after %v; kernel: %s", before, during, r.Mechanism, after, r.Kernel)
	if during < before+90*time.Millisecond || during > before+250*time.Millisecond {
		t.Errorf("round trip during a 100ms latency %v, before %v", during, before)
	}
	if after > before+50*time.Millisecond {
		t.Errorf("round trip after the latency %v, before %v", after, before)
	}
	c := mgr.Capture(ctx)
	if c.Left != 0 || len(c.Rules) != 1 || c.Rules[0].Removed == nil {
		t.Errorf("capture %+v", c)
	}
	mgr.Close()
}

func TestPartitionFromOutside(t *testing.T) {
	lab := newLab(t)
	a, b := member(t, lab, "a"), member(t, lab, "b")
	lb := listenIn(t, b.NS, b.Addr)
	// a dials b from inside a's namespace.
	dial := func() error {
		return inNS(a.NS, func() error {
			c, err := net.DialTimeout("tcp", lb.Addr().String(), 500*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	if err := dial(); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	mgr := NewManager(Config{RunID: "test-" + t.Name(), StateDir: t.TempDir()})
	ctx := context.Background()
	var rules []*Rule
	for _, x := range []struct {
		m     *Member
		other netip.Addr
	}{{a, b.Addr}, {b, a.Addr}} {
		r, err := mgr.Apply(ctx, Target{Name: x.m.Name, NS: x.m.NS.Path(), Addrs: []netip.Addr{x.m.Addr}}, Spec{Fault: Partition, DropTo: []netip.Addr{x.other}, DropFrom: []netip.Addr{x.other}}, Op{Operation: "split", Run: 1})
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	if err := dial(); err == nil {
		t.Fatal("a reached b across the partition")
	} else {
		t.Logf("across the partition: %v", err)
	}
	// The host still reaches both.
	if c, err := net.DialTimeout("tcp", lb.Addr().String(), time.Second); err != nil {
		t.Errorf("the host cannot reach b during the partition: %v", err)
	} else {
		c.Close()
	}
	for _, r := range rules {
		if err := mgr.Remove(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial(); err != nil {
		t.Fatalf("after the partition healed: %v", err)
	}
	mgr.Close()
}

func TestResetBlackholeLoss(t *testing.T) {
	lab := newLab(t)
	m := member(t, lab, "a")
	l := listenIn(t, m.NS, m.Addr)
	mgr := NewManager(Config{RunID: "test-" + t.Name(), StateDir: t.TempDir()})
	ctx := context.Background()
	tg := Target{Name: "a", NS: m.NS.Path(), Addrs: []netip.Addr{m.Addr}}

	r, err := mgr.Apply(ctx, tg, Spec{Fault: Reset}, Op{Operation: "reset"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = net.DialTimeout("tcp", l.Addr().String(), time.Second)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("connect during reset: %v, want connection refused", err)
	}
	mgr.Remove(ctx, r)

	r, err = mgr.Apply(ctx, tg, Spec{Fault: Blackhole}, Op{Operation: "hole"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = net.DialTimeout("tcp", l.Addr().String(), 500*time.Millisecond)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("connect during blackhole: %v, want a timeout", err)
	}
	mgr.Remove(ctx, r)

	r, err = mgr.Apply(ctx, tg, Spec{Fault: Loss, Percent: 100}, Op{Operation: "lossy"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = net.DialTimeout("tcp", l.Addr().String(), 500*time.Millisecond)
	if err == nil {
		t.Errorf("connect with 100%% loss succeeded")
	}
	mgr.Remove(ctx, r)

	r, err = mgr.Apply(ctx, tg, Spec{Fault: Bandwidth, Rate: 80_000}, Op{Operation: "thin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bandwidth: %s", r.Kernel)
	mgr.Remove(ctx, r)
	if c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err != nil {
		t.Errorf("after the faults: %v", err)
	} else {
		c.Close()
	}
	if c := mgr.Capture(ctx); c.Left != 0 {
		t.Errorf("left: %+v", c.Namespaces)
	}
	mgr.Close()
}

func TestCleanupOfAGoneHarness(t *testing.T) {
	lab := newLab(t)
	m := member(t, lab, "a")
	state := t.TempDir()
	mgr := NewManager(Config{RunID: "20260101T000000Z-abcd", StateDir: state})
	ctx := context.Background()
	// A process in the namespace, as an instance would be.
	if _, err := mgr.Apply(ctx, Target{Name: "a", NS: m.NS.Path(), Addrs: []netip.Addr{m.Addr}}, Spec{Fault: Blackhole}, Op{Operation: "hole"}); err != nil {
		t.Fatal(err)
	}
	mgr.journal.close(false)
	// Pretend its harness is gone: rename the journal to a dead pid.
	files, _ := filepath.Glob(filepath.Join(state, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("state files %v", files)
	}
	newPath := strings.Replace(files[0], fmt.Sprintf(".%d.", os.Getpid()), ".999999999.", 1)
	if err := os.Rename(files[0], newPath); err != nil {
		t.Fatal(err)
	}
	// The namespace is found through a process in it.
	_, stop := netfaulttest.HoldNetns(t, m.NS.Path())
	defer stop()
	var found []string
	if err := Cleanup(ctx, state, "", false, func(s string) { found = append(found, s) }); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.Contains(found[0], "removed blackhole rule CHAOS_") {
		t.Fatalf("found %q", found)
	}
	if left := harnessRules(ctx, m.NS); len(left) != 0 {
		t.Errorf("left after cleanup: %v", left)
	}
	if _, err := os.Stat(newPath); err == nil {
		t.Error("the journal is still there")
	}
}
