package netfault

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A table made dormant (flags dormant: its chains are not hooked) and a
// netlink socket opened in its namespace beforehand let the harness wake
// or put to sleep many namespaces' tables at one moment: each is one
// netlink message, sent from a goroutine per namespace, where running nft
// costs a process and its cache (tens to hundreds of milliseconds on a
// loaded machine).

// nf_tables' protocol (linux/netfilter/nf_tables.h, nfnetlink.h).
const (
	nfnlSubsysNftables = 10
	nfnlMsgBatchBegin  = 0x10
	nfnlMsgBatchEnd    = 0x11
	nftMsgNewTable     = 0
	nftaTableName      = 1
	nftaTableFlags     = 2
	nftTableFDormant   = 1
	nfprotoInet        = 1
)

// tableSwitch wakes or puts to sleep one inet table of one namespace.
type tableSwitch struct {
	f     *os.File
	table string
}

// openSwitch opens a netfilter netlink socket in ns for table.
func openSwitch(ns *NS, table string) (*tableSwitch, error) {
	var fd int
	err := inNS(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nftables netlink bind: %w", err)
	}
	return &tableSwitch{f: os.NewFile(uintptr(fd), "nftables-"+table), table: table}, nil
}

// set makes the table active (its chains hooked) or dormant, in one
// transaction, and returns once the kernel has acknowledged it, with the
// moment the write returned: the kernel commits the batch within the
// write, so that is when the change took effect.
func (s *tableSwitch) set(active bool) (time.Time, error) {
	var flags uint32
	if !active {
		flags = nftTableFDormant
	}
	name := append([]byte(s.table), 0)
	batch := nfMessage(nfnlMsgBatchBegin, unix.AF_UNSPEC, nfnlSubsysNftables, 1, unix.NLM_F_REQUEST, nil)
	batch = append(batch, nfMessage(nfnlSubsysNftables<<8|nftMsgNewTable, nfprotoInet, 0, 2, unix.NLM_F_REQUEST|unix.NLM_F_ACK,
		[]nlattr{{nftaTableName, name}, {nftaTableFlags, binary.BigEndian.AppendUint32(nil, flags)}})...)
	batch = append(batch, nfMessage(nfnlMsgBatchEnd, unix.AF_UNSPEC, nfnlSubsysNftables, 3, unix.NLM_F_REQUEST, nil)...)
	fd := int(s.f.Fd())
	if _, err := unix.Write(fd, batch); err != nil {
		return time.Now(), fmt.Errorf("table %s: %w", s.table, err)
	}
	at := time.Now()
	if err := readAck(fd); err != nil {
		return at, fmt.Errorf("table %s: %w", s.table, err)
	}
	return at, nil
}

func (s *tableSwitch) Close() error { return s.f.Close() }

// nfMessage builds one nfnetlink message of type typ with its nfgenmsg
// (family, version 0, res_id).
func nfMessage(typ uint16, family uint8, resID uint16, seq uint32, flags uint16, attrs []nlattr) []byte {
	return appendNfMessage(make([]byte, 0, 64), typ, family, resID, seq, flags, attrs)
}

// appendNfMessage appends nfMessage's message to b: the nftables batches
// and the delay queue's verdicts are written the same way.
func appendNfMessage(b []byte, typ uint16, family uint8, resID uint16, seq uint32, flags uint16, attrs []nlattr) []byte {
	start := len(b)
	b = append(b, make([]byte, unix.NLMSG_HDRLEN)...)
	b = append(b, family, unix.NFNETLINK_V0, byte(resID>>8), byte(resID))
	for _, a := range attrs {
		n := 4 + len(a.data)
		b = binary.NativeEndian.AppendUint16(b, uint16(n))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for (len(b)-start)%4 != 0 {
			b = append(b, 0)
		}
	}
	h := b[start:]
	binary.NativeEndian.PutUint32(h[0:], uint32(len(h)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], seq)
	return b
}
