package netfault

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 25 defect 3: loss is silent to the sender. A UDP sender under 30%
// loss has every sendto succeed, and the receiver gets about 30% fewer
// datagrams; the same for a blackhole, which drops everything, and for a
// partition, whose rule is in the receiving member.
func TestLossIsSilent(t *testing.T) {
	lab := newLab(t)
	m, b := member(t, lab, "a"), member(t, lab, "b")
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		spec     Spec
		on       *Member    // where the rule is
		to       netip.Addr // where the receiver is
		min, max float64    // share received
	}{
		{"loss 30%", Spec{Fault: Loss, Percent: 30}, m, lab.Host, 0.62, 0.78},
		{"blackhole", Spec{Fault: Blackhole}, m, lab.Host, 0, 0},
		{"partition", Spec{Fault: Partition, DropFrom: []netip.Addr{m.Addr}}, b, b.Addr, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The receiver is outside the sender's namespace.
			var rc *net.UDPConn
			listen := func() (err error) {
				rc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(c.to, 0)))
				return err
			}
			var err error
			if c.to == lab.Host {
				err = listen()
			} else {
				err = inNS(b.NS, listen)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			rc.SetReadBuffer(4 << 20)
			var got atomic.Int64
			go func() {
				buf := make([]byte, 2048)
				for {
					if _, err := rc.Read(buf); err != nil {
						return
					}
					got.Add(1)
				}
			}()
			mgr := NewManager(Config{RunID: "test-" + t.Name(), StateDir: t.TempDir()})
			defer mgr.Close()
			r, err := mgr.Apply(ctx, Target{Name: c.on.Name, NS: c.on.NS.Path(), Addrs: []netip.Addr{c.on.Addr}}, c.spec, Op{Operation: "drop"})
			if err != nil {
				t.Fatal(err)
			}
			const n = 3000
			var sendErrs int
			var firstErr error
			err = inNS(m.NS, func() error {
				s, err := net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
				if err != nil {
					return err
				}
				defer s.Close()
				payload := make([]byte, 200)
				for i := 0; i < n; i++ {
					if _, err := s.Write(payload); err != nil {
						sendErrs++
						if firstErr == nil {
							firstErr = err
						}
					}
					if i%50 == 49 {
						time.Sleep(time.Millisecond)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if err := mgr.Remove(ctx, r); err != nil {
				t.Fatal(err)
			}
			share := float64(got.Load()) / n
			t.Logf("%d of %d received (%.1f%%), %d send errors (%v)", got.Load(), n, 100*share, sendErrs, firstErr)
			if sendErrs != 0 {
				t.Errorf("%d of %d sends failed (first: %v): the sender saw the drop", sendErrs, n, firstErr)
			}
			if share < c.min || share > c.max {
				t.Errorf("received %.1f%%, want %.0f%% to %.0f%%", 100*share, 100*c.min, 100*c.max)
			}
		})
	}
}
