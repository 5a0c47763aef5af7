package netfault

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The delay queue: where the kernel has no netem (sch_netem), latency is a
// rule that hands every packet the namespace sends to a netfilter queue
// (iptables NFQUEUE, with --queue-bypass), and the harness gives each packet
// back (accepts it) once its delay has passed. The kernel holds the packets
// meanwhile; the harness sees only their ids. Packets keep their order: a
// packet is never given back before one sent earlier.

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

// delayQueue gives back the packets of one netfilter queue after a delay.
type delayQueue struct {
	f     *os.File
	num   uint16
	delay func() time.Duration

	mu      sync.Mutex
	pending []held
	lastDue time.Time
	maxID   uint32
	any     bool
	wake    chan struct{}
	done    chan struct{}
	stopped bool
	err     error
	// Counts, for the evidence.
	Delayed uint64
}

type held struct {
	id  uint32
	due time.Time
}

// delaySampler returns a function that draws each packet's delay: delay,
// give or take jitter, each draw following the previous one by corr (0 to
// 1), as netem's correlated uniform jitter.
func delaySampler(delay, jitter time.Duration, corr float64, seed uint64) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	last := rng.Float64()
	return func() time.Duration {
		if jitter <= 0 {
			return delay
		}
		u := (1-corr)*rng.Float64() + corr*last
		last = u
		d := delay + time.Duration((2*u-1)*float64(jitter))
		if d < 0 {
			d = 0
		}
		return d
	}
}

// openQueue binds queue num in ns and starts giving its packets back after
// delay().
func openQueue(ns *NS, num uint16, delay func() time.Duration) (*delayQueue, error) {
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
	q := &delayQueue{num: num, delay: delay, wake: make(chan struct{}, 1), done: make(chan struct{})}
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
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	q.f = os.NewFile(uintptr(fd), fmt.Sprintf("nfqueue-%d", num))
	go q.read()
	go q.give()
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

// read takes the kernel's packet notices and queues each packet's id with
// the moment it is due.
func (q *delayQueue) read() {
	buf := make([]byte, 1<<16)
	for {
		n, err := q.f.Read(buf)
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				continue // notices lost; their packets went through (fail-open)
			}
			if !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
				q.mu.Lock()
				if !q.stopped {
					q.err = err
				}
				q.mu.Unlock()
			}
			return
		}
		now := time.Now()
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			if typ == uint16(unix.NFNL_SUBSYS_QUEUE)<<8|nfqnlMsgPacket {
				if id, ok := packetID(b[unix.NLMSG_HDRLEN+4 : l]); ok {
					q.push(id, now)
				}
			}
			b = b[(l+3)&^3:]
		}
	}
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

func (q *delayQueue) push(id uint32, now time.Time) {
	due := now.Add(q.delay())
	q.mu.Lock()
	if due.Before(q.lastDue) {
		due = q.lastDue // never before a packet sent earlier
	}
	q.lastDue = due
	first := len(q.pending) == 0
	q.pending = append(q.pending, held{id, due})
	q.maxID, q.any = id, true
	q.Delayed++
	q.mu.Unlock()
	// Packets are due in the order they came, so only a packet that finds
	// the queue empty changes when the giver must wake next.
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// give accepts each packet once it is due, in batches.
func (q *delayQueue) give() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	verdict := make([]byte, 0, 64)
	for {
		q.mu.Lock()
		now := time.Now()
		var last uint32
		n := 0
		for n < len(q.pending) && !q.pending[n].due.After(now) {
			last = q.pending[n].id
			n++
		}
		q.pending = q.pending[n:]
		var next time.Duration = time.Hour
		if len(q.pending) > 0 {
			next = time.Until(q.pending[0].due)
		}
		q.mu.Unlock()
		if n > 0 {
			verdict = q.accept(verdict[:0], last)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(max(next, 0))
		select {
		case <-q.done:
			return
		case <-q.wake:
		case <-t.C:
		}
	}
}

// accept gives back every packet up to id (one verdict for them all),
// building the message in buf, which it returns for the next.
func (q *delayQueue) accept(buf []byte, id uint32) []byte {
	var v [8]byte
	binary.BigEndian.PutUint32(v[:], nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	buf = appendNfq(buf, nfqnlMsgVerdictBatch, q.num, 0, unix.NLM_F_REQUEST, []nlattr{{nfqaVerdictHdr, v[:]}})
	_, _ = q.f.Write(buf)
	return buf
}

// Close gives back every packet still held, at once, and unbinds the
// queue. The rule that fills the queue must be gone first.
func (q *delayQueue) Close() error {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return nil
	}
	q.stopped = true
	q.mu.Unlock()
	// Notices already on their way are taken for a moment, then all is
	// given back.
	time.Sleep(50 * time.Millisecond)
	close(q.done)
	q.mu.Lock()
	maxID, any := q.maxID, q.any
	q.pending = nil
	q.mu.Unlock()
	if any {
		q.accept(nil, maxID)
	}
	return q.f.Close()
}

// Count is how many packets the queue delayed.
func (q *delayQueue) Count() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.Delayed
}

// Err is what broke the queue's reading, if anything did.
func (q *delayQueue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}
