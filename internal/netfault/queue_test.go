package netfault

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
	"golang.org/x/sys/unix"
)

// packetNotice is the kernel's notice of packet id on queue num, as
// nfnetlink_queue sends it (NFQA_PACKET_HDR first).
func packetNotice(num uint16, id uint32) []byte {
	hdr := make([]byte, 7)
	binary.BigEndian.PutUint32(hdr, id)
	return appendNfq(nil, nfqnlMsgPacket, num, 0, 0, []nlattr{{nfqaPacketHdr, hdr}})
}

// verdictID reads the packet id of an accept-up-to verdict.
func verdictID(t *testing.T, b []byte) uint32 {
	t.Helper()
	if len(b) < unix.NLMSG_HDRLEN+4+12 || binary.NativeEndian.Uint16(b[4:]) != uint16(unix.NFNL_SUBSYS_QUEUE)<<8|nfqnlMsgVerdictBatch {
		t.Fatalf("not a verdict batch: %x", b)
	}
	a := b[unix.NLMSG_HDRLEN+4:]
	if binary.BigEndian.Uint32(a[4:]) != nfAccept {
		t.Fatalf("verdict %x is not accept", a)
	}
	return binary.BigEndian.Uint32(a[8:])
}

// The queue's loop, over a socket pair standing in for the kernel: each
// packet is given back no sooner than its delay and in the order it came
// (a verdict accepts every packet up to its id), even when a later packet
// draws a shorter delay; told to stop, it gives back all it holds at once;
// and it allocates nothing per packet (in the helper, Go's collector is
// off).
func TestServeQueue(t *testing.T) {
	for _, sys := range []struct {
		name string
		sys  queueSys
	}{{"plain", plainSys}, {"raw", rawSys}} {
		t.Run(sys.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			kernel, loop := fds[0], fds[1]
			defer unix.Close(kernel)
			ctl, stop, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer ctl.Close()
			// Delays of 30 ms, then one of 5 ms that must still wait for
			// the packet before it.
			delays := []time.Duration{30 * time.Millisecond, 5 * time.Millisecond}
			k := 0
			delay := func() time.Duration { d := delays[min(k, len(delays)-1)]; k++; return d }
			type result struct {
				n   uint64
				err error
			}
			done := make(chan result, 1)
			ctlFd := int(ctl.Fd())
			if sys.name == "raw" {
				// A raw call holds its P while it blocks: give it a thread
				// and a P of its own, as the helper has.
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
			}
			go func() {
				n, err := serveQueue(loop, ctlFd, 7, delay, sys.sys)
				unix.Close(loop)
				done <- result{n, err}
			}()
			sent := map[uint32]time.Time{}
			send := func(id uint32) {
				sent[id] = time.Now()
				if _, err := unix.Write(kernel, packetNotice(7, id)); err != nil {
					t.Fatal(err)
				}
			}
			read := func(within time.Duration) (uint32, time.Time) {
				unix.SetsockoptTimeval(kernel, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: int64(within / time.Second), Usec: int64(within%time.Second) / 1000})
				b := make([]byte, 256)
				n, err := readIntr(kernel, b)
				if err != nil {
					t.Fatalf("no verdict within %v: %v", within, err)
				}
				return verdictID(t, b[:n]), time.Now()
			}
			send(1)
			send(2)
			id, at := read(2 * time.Second)
			if id != 2 || at.Sub(sent[1]) < 30*time.Millisecond {
				t.Errorf("first verdict up to %d after %v, want up to 2 (packet 2's 5 ms waits for packet 1's 30 ms) no sooner than 30ms", id, at.Sub(sent[1]))
			}

			// Many packets, one at a time: counted, none early, and no
			// allocation per packet.
			delays = []time.Duration{time.Millisecond}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			const many = 500
			notice := packetNotice(7, 0)
			b := make([]byte, 256)
			for id := uint32(3); id < 3+many; id++ {
				binary.BigEndian.PutUint32(notice[unix.NLMSG_HDRLEN+4+4:], id)
				t0 := time.Now()
				if _, err := unix.Write(kernel, notice); err != nil {
					t.Fatal(err)
				}
				n, err := readIntr(kernel, b)
				if err != nil {
					t.Fatal(err)
				}
				if got := binary.BigEndian.Uint32(b[unix.NLMSG_HDRLEN+4+8 : n]); got != id || time.Since(t0) < time.Millisecond {
					t.Fatalf("verdict up to %d after %v, want %d after 1ms", got, time.Since(t0), id)
				}
			}
			runtime.ReadMemStats(&after)
			t.Logf("%d allocations for %d packets", after.Mallocs-before.Mallocs, many)
			if allocs := after.Mallocs - before.Mallocs; allocs > many/10 {
				t.Errorf("%d allocations for %d packets", allocs, many)
			}

			// Held when told to stop: given back at once, after the drain.
			delays = []time.Duration{time.Hour}
			send(1000)
			time.Sleep(10 * time.Millisecond)
			t0 := time.Now()
			stop.Close()
			if id, at := read(2 * time.Second); id != 1000 || at.Sub(t0) < stopDrain || at.Sub(t0) > stopDrain+time.Second {
				t.Errorf("told to stop, gave back up to %d after %v, want 1000 after %v", id, at.Sub(t0), stopDrain)
			}
			r := <-done
			if r.err != nil || r.n != 3+many {
				t.Errorf("loop ended with %d delayed, %v; want %d, nil", r.n, r.err, 3+many)
			}
		})
	}
}

func TestParseQueueArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"10001", "50ms", "0s", "0.25", "7"}, ""},
		{[]string{"10001", "50ms", "0s", "0.25"}, "want NUM DELAY JITTER CORRELATION SEED, got 4 arguments"},
		{[]string{"70000", "50ms", "0s", "0", "7"}, "queue number"},
		{[]string{"1", "-5ms", "0s", "0", "7"}, `delay "-5ms"`},
		{[]string{"1", "5ms", "x", "0", "7"}, `jitter "x"`},
		{[]string{"1", "5ms", "0s", "1.5", "7"}, `correlation "1.5"`},
		{[]string{"1", "5ms", "0s", "0", "-1"}, "seed"},
	} {
		p, num, err := parseQueueArgs(c.args)
		if c.err == "" {
			if err != nil || num != 10001 || p.Delay != 50*time.Millisecond || p.Corr != 0.25 || p.Seed != 7 {
				t.Errorf("%q: %+v %d %v", c.args, p, num, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.err)
		}
	}
}

// readIntr reads fd, again when a signal (Go's preemption) interrupts it.
func readIntr(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// TestQueueHelperThatNeverStarts: a helper that never says it runs (a
// binary that is not chaos, as the test stand-in named /proc/self/exe
// was) no longer holds the fault's apply for good: the start ends with
// the caller's context, or after queueHelperStart, and the helper is
// killed. Before, apply and preflight waited for its line forever.
func TestQueueHelperThatNeverStarts(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"silent", "exec sleep 60"},
		{"says something else", "echo hello; exec sleep 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "helper")
			if err := os.WriteFile(script, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			defer func(h string) { Helper = h }(Helper)
			Helper = script
			r, w, err := os.Pipe() // stands in for the queue's socket
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			chain := "CHAOS_test_" + strconv.Itoa(os.Getpid()) + "_" + strings.ReplaceAll(tc.name, " ", "-")
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				q, err := startQueueHelper(ctx, int(r.Fd()), 7, delayParams{Delay: time.Millisecond, Chain: chain})
				if q != nil {
					q.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a helper that never said it runs was taken for started")
				}
				t.Log(err)
			case <-time.After(5 * time.Second):
				t.Fatal("the helper's start still waits 5 s after its context ended")
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				pids, _ := proc.FindByMarker(queueMarker + "=" + chain)
				if len(pids) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the helper that never started still runs: %v", pids)
				}
			}
		})
	}
}
