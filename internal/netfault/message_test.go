package netfault

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNfMessages: an nftables message and a queue verdict are laid out
// alike (netlink header, nfgenmsg, attributes padded to 4 bytes), and a
// message appended after another has a header of its own.
func TestNfMessages(t *testing.T) {
	m := nfMessage(7, nfprotoInet, 0x0102, 9, unix.NLM_F_REQUEST, []nlattr{{1, []byte("abc")}, {2, []byte{0xff}}})
	ne := binary.NativeEndian
	want := ne.AppendUint32(nil, 36) // nlmsghdr: length, type, flags, seq, pid
	want = ne.AppendUint16(want, 7)
	want = ne.AppendUint16(want, unix.NLM_F_REQUEST)
	want = ne.AppendUint32(want, 9)
	want = ne.AppendUint32(want, 0)
	want = append(want, nfprotoInet, unix.NFNETLINK_V0, 0x01, 0x02) // nfgenmsg, res_id big-endian
	want = append(ne.AppendUint16(ne.AppendUint16(want, 7), 1), 'a', 'b', 'c', 0)
	want = append(ne.AppendUint16(ne.AppendUint16(want, 5), 2), 0xff, 0, 0, 0)
	if !bytes.Equal(m, want) {
		t.Fatalf("nfMessage:\n got  % x\n want % x", m, want)
	}
	first := append([]byte(nil), m...)
	both := appendNfq(m, nfqnlMsgVerdictBatch, 3, 0, unix.NLM_F_REQUEST, []nlattr{{nfqaVerdictHdr, make([]byte, 8)}})
	if !bytes.Equal(both[:len(first)], first) {
		t.Fatal("appending a message changed the one before it")
	}
	v := both[len(first):]
	if n := binary.NativeEndian.Uint32(v[0:]); int(n) != len(v) || n != 16+4+12 {
		t.Errorf("the verdict's length field is %d, the verdict %d bytes", n, len(v))
	}
	if typ := binary.NativeEndian.Uint16(v[4:]); typ != uint16(unix.NFNL_SUBSYS_QUEUE)<<8|nfqnlMsgVerdictBatch {
		t.Errorf("the verdict's type is %#x", typ)
	}
	if !bytes.Equal(v[16:20], []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 3}) {
		t.Errorf("the verdict's nfgenmsg is % x", v[16:20])
	}
}
