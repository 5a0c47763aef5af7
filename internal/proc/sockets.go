package proc

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Listener is one TCP socket in state LISTEN.
type Listener struct {
	Addr  netip.AddrPort
	Inode uint64
}

// tcpListen is the state column of /proc/net/tcp for LISTEN.
const tcpListen = "0A"

// Listeners returns the TCP sockets (IPv4 and IPv6) listening on port in the
// network namespace of pid: a target started in a namespace of its own
// listens there, not in the harness's. The namespace is read through a live
// thread of pid, so a process whose main thread has exited is seen too.
func Listeners(pid, port int) ([]Listener, error) {
	dir := taskDir(pid)
	var out []Listener
	var errs []error
	for _, f := range []string{"tcp", "tcp6"} {
		file, err := os.Open(dir + "/net/" + f)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		ls, err := parseNetTCP(file)
		file.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s/net/%s: %w", dir, f, err))
		}
		for _, l := range ls {
			if int(l.Addr.Port()) == port {
				out = append(out, l)
			}
		}
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parseNetTCP reads the listening sockets of /proc/net/tcp or tcp6:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	 0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 ...
//
// The address is the kernel's in-memory bytes, printed 32 bits at a time in
// host order; the port is big-endian hex. Lines that do not parse are an
// error; the header is skipped.
func parseNetTCP(r io.Reader) ([]Listener, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64*1024)
	var out []Listener
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if line == 1 && len(f) > 0 && f[0] == "sl" {
			continue
		}
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 {
			return out, fmt.Errorf("line %d: %d fields, want at least 10", line, len(f))
		}
		if f[3] != tcpListen {
			continue
		}
		addr, err := parseHexAddrPort(f[1])
		if err != nil {
			return out, fmt.Errorf("line %d: local address %q: %w", line, f[1], err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return out, fmt.Errorf("line %d: inode %q: %w", line, f[9], err)
		}
		out = append(out, Listener{Addr: addr, Inode: inode})
	}
	return out, sc.Err()
}

// parseHexAddrPort reads "0100007F:1F90" (IPv4) or a 32-digit IPv6 address
// with its port.
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, errors.New("no port")
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port: %w", err)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, errors.New("address is not 8 or 32 hex digits")
	}
	// Each 32-bit word is printed in host order (little-endian here).
	for i := 0; i < len(raw); i += 4 {
		w := binary.LittleEndian.Uint32(raw[i:])
		binary.BigEndian.PutUint32(raw[i:], w)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// taskDir is /proc/PID, or /proc/PID/task/TID of a live thread when the
// main thread has exited: a zombie leader has no files and no namespaces of
// its own any more, its live threads have the process's.
func taskDir(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid)
	if st, err := readStat(pid); err == nil && st.state == 'Z' {
		if tid := liveThread(pid); tid > 0 {
			return dir + "/task/" + strconv.Itoa(tid)
		}
	}
	return dir
}

// SocketHolders returns, sorted, the processes among pids that hold an open
// file descriptor on one of the sockets inodes.
func SocketHolders(pids []int, inodes []uint64) []int {
	var out []int
	for _, pid := range pids {
		if holdsSocket(pid, inodes) {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// FindSocketHolders returns, sorted, every process on the machine that
// holds one of the sockets inodes (for saying whose a port is).
func FindSocketHolders(inodes []uint64) []int {
	names, err := procNames()
	if err != nil {
		return nil
	}
	var pids []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return SocketHolders(pids, inodes)
}

func holdsSocket(pid int, inodes []uint64) bool {
	dir := taskDir(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		s, ok := strings.CutPrefix(l, "socket:[")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err == nil && slices.Contains(inodes, n) {
			return true
		}
	}
	return false
}

// Cmdline returns pid's command line with spaces between arguments, "" when
// it cannot be read.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(taskDir(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
