package netfault

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The delay queue: where the kernel has no netem (sch_netem), latency is a
// rule that hands every packet the namespace receives to a netfilter queue
// (iptables NFQUEUE, with --queue-bypass), and a loop (serveQueue, in a
// helper process: queuehelper.go) gives each packet back (accepts it) once
// its delay has passed. The kernel holds the packets meanwhile; the loop
// sees only their ids. Packets keep their order: a packet is never given
// back before one that came earlier.

// nfnetlink_queue's protocol (linux/netfilter/nfnetlink_queue.h).
const (
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdictBatch = 3
	nfqnlMsgConfig       = 2

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaCfgMask     = 4
	nfqaCfgFlags    = 5

	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1

	nfqaCfgFFailOpen = 1
	nfqaCfgFGSO      = 4

	nfAccept = 1

	queueMaxLen = 16384
)

// delayParams are what a delay queue draws each packet's delay from.
type delayParams struct {
	Delay, Jitter time.Duration
	Corr          float64 // 0 to 1
	Seed          uint64
	// Chain is the rule's chain: the helper carries it in its
	// environment (queueMarker), so chaos cleanup can find it.
	Chain string
}

// sampler returns a function that draws each packet's delay: Delay, give
// or take Jitter, each draw following the previous one by Corr, as
// netem's correlated uniform jitter.
func (p delayParams) sampler() func() time.Duration {
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	last := rng.Float64()
	return func() time.Duration {
		if p.Jitter <= 0 {
			return p.Delay
		}
		u := (1-p.Corr)*rng.Float64() + p.Corr*last
		last = u
		return max(p.Delay+time.Duration((2*u-1)*float64(p.Jitter)), 0)
	}
}

// delayQueue gives back the packets of one netfilter queue after a delay,
// in a helper process (startQueueHelper) or, when there is no helper binary,
// on a goroutine of the harness.
type delayQueue struct {
	num uint16
	// stop is the write end of the queue loop's control pipe: closing it
	// tells the loop to give back what it holds and end.
	stop *os.File
	// done is closed when the loop has ended; delayed and err are set
	// before.
	done    chan struct{}
	delayed uint64
	err     error
	// proc is the helper process, if the loop runs in one.
	proc *os.Process
	// sched says where the loop runs and how it is scheduled.
	sched string
	once  sync.Once
}

// openQueue binds queue num in ns and starts giving its packets back after
// their delay; ctx bounds the start of its helper.
func openQueue(ctx context.Context, ns *NS, num uint16, p delayParams) (*delayQueue, error) {
	var fd int
	err := inNS(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netfilter queue socket: %w", err)
	}
	// Room for many packet notices; a notice the socket cannot take lets
	// its packet through at once (fail-open), it never holds it.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netfilter queue bind: %w", err)
	}
	// Configure while blocking, reading each acknowledgement.
	cmd := make([]byte, 4)
	cmd[0] = nfqnlCfgCmdBind
	binary.BigEndian.PutUint16(cmd[2:], unix.AF_UNSPEC)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0)
	params[4] = nfqnlCopyMeta
	maxlen := binary.BigEndian.AppendUint32(nil, queueMaxLen)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOpen|nfqaCfgFGSO)
	for i, attrs := range [][]nlattr{
		{{nfqaCfgCmd, cmd}},
		{{nfqaCfgParams, params}, {nfqaCfgQueueMax, maxlen}},
		{{nfqaCfgFlags, flags}, {nfqaCfgMask, flags}},
	} {
		msg := nfqMessage(nfqnlMsgConfig, num, uint32(i+1), unix.NLM_F_REQUEST|unix.NLM_F_ACK, attrs)
		if _, err := unix.Write(fd, msg); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("netfilter queue config: %w", err)
		}
		if err := readAck(fd); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("netfilter queue %d config: %w", num, err)
		}
	}
	if Helper != "" {
		return startQueueHelper(ctx, fd, num, p)
	}
	return startQueueHere(fd, num, p)
}

// startQueueHere runs the queue's loop on a goroutine of the harness.
func startQueueHere(fd int, num uint16, p delayParams) (*delayQueue, error) {
	ctl, stop, err := os.Pipe()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	q := &delayQueue{num: num, stop: stop, done: make(chan struct{}), sched: "a goroutine of the harness"}
	go func() {
		defer close(q.done)
		q.delayed, q.err = serveQueue(fd, int(ctl.Fd()), num, p.sampler(), plainSys)
		unix.Close(fd)
		ctl.Close()
	}()
	return q, nil
}

type nlattr struct {
	typ  uint16
	data []byte
}

// nfqMessage builds one nfnetlink_queue message.
func nfqMessage(msgType uint8, queue uint16, seq uint32, flags uint16, attrs []nlattr) []byte {
	return appendNfq(make([]byte, 0, 64), msgType, queue, seq, flags, attrs)
}

// appendNfq appends one nfnetlink_queue message to b.
func appendNfq(b []byte, msgType uint8, queue uint16, seq uint32, flags uint16, attrs []nlattr) []byte {
	return appendNfMessage(b, uint16(unix.NFNL_SUBSYS_QUEUE)<<8|uint16(msgType), unix.AF_UNSPEC, queue, seq, flags, attrs)
}

// readAck reads the kernel's answer to a request sent with NLM_F_ACK.
func readAck(fd int) error {
	buf := make([]byte, 8192)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return err
	}
	for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
		l := int(binary.NativeEndian.Uint32(b))
		typ := binary.NativeEndian.Uint16(b[4:])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return errors.New("short netlink message")
		}
		if typ == unix.NLMSG_ERROR && l >= unix.NLMSG_HDRLEN+4 {
			if code := int32(binary.NativeEndian.Uint32(b[unix.NLMSG_HDRLEN:])); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
		b = b[(l+3)&^3:]
	}
	return errors.New("no acknowledgement")
}

// packetID finds NFQA_PACKET_HDR's packet id among a notice's attributes.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
	return 0, false
}

// ring holds the packets a queue delays, oldest first, with the moment
// each is due (ns since the loop began). The kernel holds at most
// queueMaxLen packets in a queue, so the ring never grows: the loop
// allocates nothing once it runs.
type ring struct {
	ids       [queueMaxLen]uint32
	due       [queueMaxLen]int64
	head, len int
}

func (r *ring) push(id uint32, due int64) bool {
	if r.len == queueMaxLen {
		return false
	}
	i := (r.head + r.len) % queueMaxLen
	r.ids[i], r.due[i] = id, due
	r.len++
	return true
}

func (r *ring) pop() {
	r.head = (r.head + 1) % queueMaxLen
	r.len--
}

// queueSys are the system calls of a queue's loop. In the harness they
// are Go's usual ones; in the helper they are raw: a thread blocked in a
// raw call keeps the helper's one P, so it never waits for Go's
// scheduler to run again (and Go's monitor never starts another thread
// to take the P over). The two sets are written out in full: a pointer
// turned into a uintptr stays valid only within the very call to
// Syscall6 or RawSyscall6 it is written in.
type queueSys struct {
	recv func(fd int, b []byte) (int, unix.Errno)
	send func(fd int, b []byte) unix.Errno
	poll func(fds []unix.PollFd, timeout *unix.Timespec) unix.Errno
}

var plainSys = queueSys{
	recv: func(fd int, b []byte) (int, unix.Errno) {
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT, 0, 0)
		return int(n), e
	},
	send: func(fd int, b []byte) unix.Errno {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
		return e
	},
	poll: func(fds []unix.PollFd, ts *unix.Timespec) unix.Errno {
		_, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		return e
	},
}

var rawSys = queueSys{
	recv: func(fd int, b []byte) (int, unix.Errno) {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT, 0, 0)
		return int(n), e
	},
	send: func(fd int, b []byte) unix.Errno {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
		return e
	},
	poll: func(fds []unix.PollFd, ts *unix.Timespec) unix.Errno {
		_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		return e
	},
}

// stopDrain is how long a queue told to stop still takes packet notices
// already on their way before it gives back all it holds.
const stopDrain = 50 * time.Millisecond

// serveQueue is a delay queue's whole work, one loop on one thread: it
// waits for packet notices on fd (queue num) or for the moment the oldest
// packet held is due, and gives back every packet due, with one verdict.
// Packets keep their order: none is given back before one that came
// earlier. When ctl is readable or hung up it takes notices for
// stopDrain more, gives back everything at once and returns how many
// packets it delayed.
func serveQueue(fd, ctl int, num uint16, delay func() time.Duration, sys queueSys) (uint64, error) {
	r := new(ring)
	buf := make([]byte, 1<<16)
	verdict := make([]byte, 0, 64)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(ctl), Events: unix.POLLIN}}
	epoch := time.Now()
	var (
		lastDue, stopAt int64 = 0, -1
		maxID           uint32
		any             bool
		delayed         uint64
		ts              unix.Timespec
	)
	give := func(id uint32) error {
		verdict = acceptUpTo(verdict[:0], num, id)
		if e := sys.send(fd, verdict); e != 0 {
			return fmt.Errorf("netfilter queue %d verdict: %w", num, e)
		}
		return nil
	}
	for {
		now := int64(time.Since(epoch))
		n, last := 0, uint32(0)
		for r.len > 0 && r.due[r.head] <= now {
			last = r.ids[r.head]
			r.pop()
			n++
		}
		if n > 0 {
			if err := give(last); err != nil {
				return delayed, err
			}
		}
		if stopAt >= 0 && now >= stopAt {
			if any {
				return delayed, give(maxID)
			}
			return delayed, nil
		}
		wait := int64(-1)
		if r.len > 0 {
			wait = r.due[r.head] - now
		}
		if stopAt >= 0 && (wait < 0 || stopAt-now < wait) {
			wait = stopAt - now
		}
		tsp := (*unix.Timespec)(nil)
		if wait >= 0 {
			ts = unix.NsecToTimespec(wait)
			tsp = &ts
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		if e := sys.poll(fds, tsp); e != 0 && e != unix.EINTR {
			return delayed, fmt.Errorf("netfilter queue %d: poll: %w", num, e)
		}
		if fds[1].Revents != 0 {
			stopAt = int64(time.Since(epoch) + stopDrain)
			fds[1].Fd = -1 // asked once is enough
		}
		if fds[0].Revents == 0 {
			continue
		}
		for {
			k, e := sys.recv(fd, buf)
			if e == unix.EAGAIN || e == unix.EINTR {
				break
			}
			if e == unix.ENOBUFS {
				continue // notices lost; their packets went through (fail-open)
			}
			if e != 0 {
				return delayed, fmt.Errorf("netfilter queue %d: %w", num, e)
			}
			now := int64(time.Since(epoch))
			for b := buf[:k]; len(b) >= unix.NLMSG_HDRLEN; {
				l := int(binary.NativeEndian.Uint32(b))
				if l < unix.NLMSG_HDRLEN || l > len(b) {
					break
				}
				typ := binary.NativeEndian.Uint16(b[4:])
				if typ == uint16(unix.NFNL_SUBSYS_QUEUE)<<8|nfqnlMsgPacket {
					if id, ok := packetID(b[unix.NLMSG_HDRLEN+4 : l]); ok {
						due := max(now+int64(delay()), lastDue) // never before a packet that came earlier
						if !r.push(id, due) {
							// Full (the kernel let more through than its
							// queue holds): the oldest goes now.
							if err := give(r.ids[r.head]); err != nil {
								return delayed, err
							}
							r.pop()
							r.push(id, due)
						}
						lastDue, maxID, any = due, id, true
						delayed++
					}
				}
				b = b[min((l+3)&^3, len(b)):]
			}
		}
	}
}

// acceptUpTo appends the verdict that gives back every packet up to id
// (one verdict for them all) to buf.
func acceptUpTo(buf []byte, num uint16, id uint32) []byte {
	var v [8]byte
	binary.BigEndian.PutUint32(v[:], nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	return appendNfq(buf, nfqnlMsgVerdictBatch, num, 0, unix.NLM_F_REQUEST, []nlattr{{nfqaVerdictHdr, v[:]}})
}

// Close gives back every packet still held, at once, and unbinds the
// queue. The rule that fills the queue must be gone first.
func (q *delayQueue) Close() error {
	q.once.Do(func() { q.stop.Close() })
	select {
	case <-q.done:
	case <-time.After(helperStopTimeout):
		// A helper that does not end (stopped, frozen) would hold the
		// packets it has and keep its queue bound.
		if q.proc != nil {
			_ = q.proc.Kill()
		}
		<-q.done
		return errors.Join(q.err, fmt.Errorf("netfilter queue %d: its helper did not end within %v of being told to, so it was killed", q.num, helperStopTimeout))
	}
	return q.err
}

// helperStopTimeout is how long a queue told to stop may take: its drain
// (stopDrain) and its last verdict.
const helperStopTimeout = 5 * time.Second

// Count is how many packets the queue delayed; known once it is closed.
func (q *delayQueue) Count() uint64 {
	select {
	case <-q.done:
		return q.delayed
	default:
		return 0
	}
}
