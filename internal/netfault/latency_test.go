package netfault

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 25 defect 4: the delay queue keeps up. A TCP stream of a message a
// millisecond through a 50 ms latency comes back 50 ms late, not later
// (p50 within 10%: held on its way out, a socket's packets stopped it from
// sending, TCP small queues, and the p50 was 65-69 ms), and a bulk
// transfer through a 1 ms latency runs at least half as fast as without
// it (it ran at 0.29 of it).
//
// Both ways the queue can run: in its helper process (what the chaos
// binary does) and on a goroutine of the harness (no helper binary).
func TestDelayQueueKeepsUp(t *testing.T) {
	for _, where := range []string{"helper", "harness"} {
		t.Run(where, func(t *testing.T) {
			if where == "harness" {
				defer func(h string) { Helper = h }(Helper)
				Helper = ""
			} else if Helper == "" {
				t.Fatal("no helper binary")
			}
			delayQueueKeepsUp(t, where)
		})
	}
}

func delayQueueKeepsUp(t *testing.T, where string) {
	lab := newLab(t)
	m := member(t, lab, "a")
	ctx := context.Background()
	mgr := NewManager(Config{RunID: "test-" + t.Name(), StateDir: t.TempDir(), NoNetem: true})
	defer mgr.Close()
	tg := Target{Name: "a", NS: m.NS.Path(), Addrs: []netip.Addr{m.Addr}}

	// A server in the member that sends bulk to whoever connects.
	var bl net.Listener
	if err := inNS(m.NS, func() (err error) {
		bl, err = net.Listen("tcp", netip.AddrPortFrom(m.Addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	go func() {
		buf := make([]byte, 128<<10)
		for {
			c, err := bl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for end := time.Now().Add(time.Second); time.Now().Before(end); {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	download := func() float64 {
		c, err := net.Dial("tcp", bl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 1<<20)
		var n int64
		start := time.Now()
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		return float64(n*8) / time.Since(start).Seconds() / 1e6
	}
	// Without and through the latency in turn, three times: the ratio
	// judged is the median of the three, so a spell of load from another
	// test (one in CI made a single pair 0.48) weighs on one pair only.
	var ratios []float64
	var r *Rule
	for range 3 {
		base := download()
		var err error
		r, err = mgr.Apply(ctx, tg, Spec{Fault: Latency, Delay: time.Millisecond}, Op{Operation: "slow"})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"helper": "a helper process at ", "harness": "a goroutine of the harness"}[where]; r.q == nil || !strings.HasPrefix(r.q.sched, want) {
			t.Fatalf("the delay queue runs %+v, want %q", r.q, want)
		}
		through := download()
		if err := mgr.Remove(ctx, r); err != nil {
			t.Fatal(err)
		}
		t.Logf("bulk %.0f Mbit/s, through 1ms of %s %.0f Mbit/s (%.2f)", base, r.Mechanism, through, through/base)
		ratios = append(ratios, through/base)
	}
	slices.Sort(ratios)
	if ratios[1] < 0.5 {
		t.Errorf("through a 1ms latency, bulk ran at %.2f of its rate without (median of %.2f), want at least half", ratios[1], ratios)
	}

	// A message a millisecond to an echo server in the member, through
	// 50 ms. The queue's tail is judged beyond the machine's: a 1 ms sleep
	// of this process, measured meanwhile, is as late as the scheduler
	// makes it (the machine is shared: a p99 of 94 ms was once all load).
	l := listenIn(t, m.NS, m.Addr)
	r, err := mgr.Apply(ctx, tg, Spec{Fault: Latency, Delay: 50 * time.Millisecond}, Op{Operation: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Remove(ctx, r)
	stop := make(chan struct{})
	late := make(chan time.Duration)
	go func() { late <- sleepLateness(stop) }()
	p50, p99 := roundTrips(t, l.Addr().String())
	close(stop)
	l99 := <-late
	t.Logf("round trips of a message a millisecond through 50ms: p50 %v, p99 %v; a 1ms sleep's lateness meanwhile, p99 %v", p50, p99, l99)
	if p50 < 50*time.Millisecond || p50 > 55*time.Millisecond {
		t.Errorf("p50 %v through a 50ms latency, want within 10%%", p50)
	}
	if p99 > 90*time.Millisecond+l99 {
		t.Errorf("p99 %v through a 50ms latency (a 1ms sleep was %v late, p99)", p99, l99)
	}
}

// sleepLateness sleeps 1 ms over and over until stop is closed and returns
// the p99 of how late it woke.
func sleepLateness(stop <-chan struct{}) time.Duration {
	var late []time.Duration
	for {
		select {
		case <-stop:
			if len(late) == 0 {
				return 0
			}
			slices.Sort(late)
			return late[len(late)*99/100]
		default:
		}
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		late = append(late, time.Since(t0)-time.Millisecond)
	}
}

// roundTrips sends a message a millisecond for 4 s over a new connection
// to the echo server at addr and returns the p50 and p99 of their round
// trips, the first second left out.
func roundTrips(t *testing.T, addr string) (p50, p99 time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rtts []time.Duration
	done := make(chan struct{})
	warm := time.Now().Add(time.Second)
	go func() {
		defer close(done)
		buf := make([]byte, 16)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if now := time.Now(); now.After(warm) {
				rtts = append(rtts, time.Duration(now.UnixNano()-int64(binary.BigEndian.Uint64(buf))))
			}
		}
	}()
	tick := time.NewTicker(time.Millisecond)
	buf := make([]byte, 16)
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		<-tick.C
		binary.BigEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	tick.Stop()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	<-done
	if len(rtts) < 1000 {
		t.Fatalf("%d round trips", len(rtts))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], rtts[len(rtts)*99/100]
}
