// Package netfault is the network faults, written once over a network
// namespace: latency, loss, bandwidth, reset, blackhole and partition are
// rules the harness puts into the namespace of what a fault targets (a
// process in a namespace the run made, a container, a pod's sandbox), from
// the host, with the host's own tools (nsenter, nft, tc, iptables), so
// nothing is needed inside an image.
//
// Every rule is written to the run's journal before it is applied (so
// chaos cleanup can remove what a killed harness left), recorded in the
// timeline as the kernel reports it once applied, removed when the fault
// is reverted, and what is left at the end is listed in
// system/network.json.
package netfault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// NS is an open network namespace.
type NS struct {
	f *os.File
	// Dev and Ino identify the namespace (its nsfs inode).
	Dev, Ino uint64
}

// Key identifies a namespace across opens.
type Key struct{ Dev, Ino uint64 }

func (k Key) String() string { return fmt.Sprintf("net:[%d]", k.Ino) }

// Open opens the network namespace at path (/proc/<pid>/ns/net, or a file
// descriptor of one under /proc/<pid>/fd).
func Open(path string) (*NS, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	ns, err := fromFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ns, nil
}

func fromFile(f *os.File) (*NS, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	// A network namespace file is an nsfs inode; ioctl NS_GET_NSTYPE says
	// which kind.
	t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil {
		return nil, fmt.Errorf("not a namespace: %w", err)
	}
	if t != unix.CLONE_NEWNET {
		return nil, errors.New("not a network namespace")
	}
	return &NS{f: f, Dev: st.Dev, Ino: st.Ino}, nil
}

// Key returns the namespace's identity.
func (n *NS) Key() Key { return Key{n.Dev, n.Ino} }

// Close closes the namespace's file.
func (n *NS) Close() error {
	if n == nil || n.f == nil {
		return nil
	}
	return n.f.Close()
}

// Path is a path to the namespace that stays valid while n is open.
func (n *NS) Path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), n.f.Fd()) }

// hostNS is the namespace the harness started in, opened once before any
// thread could have changed its own.
var hostNS = func() *os.File {
	f, _ := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	return f
}()

// Host opens the namespace the harness runs in.
func Host() (*NS, error) {
	if hostNS == nil {
		return nil, errors.New("the harness's own network namespace could not be opened")
	}
	return Open(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), hostNS.Fd()))
}

// onThread runs fn on a thread of its own that fn may move to another
// network namespace; the thread is moved back to where it was before it
// serves other goroutines, or, if that fails, thrown away.
func onThread(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- err
			return // the thread is thrown away, locked
		}
		defer orig.Close()
		err = fn()
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			ch <- errors.Join(err, fmt.Errorf("setns back: %w", serr))
			return // thrown away
		}
		runtime.UnlockOSThread()
		ch <- err
	}()
	return <-ch
}

// NewNS makes a new, empty network namespace (only a loopback device, down)
// that lives while the returned NS is open or a process is in it. The
// harness stays where it is: the namespace is made on a thread that then
// goes back.
func NewNS() (*NS, error) {
	var ns *NS
	err := onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			return err
		}
		if ns, err = fromFile(f); err != nil {
			f.Close()
		}
		return err
	})
	return ns, err
}

// inNS runs fn on a thread that has entered ns. What fn opens (a socket)
// stays in ns.
func inNS(ns *NS, fn func() error) error {
	return onThread(func() error {
		if err := unix.Setns(int(ns.f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		return fn()
	})
}

// tool finds a command on the PATH or in the usual system directories
// (the harness may run with a PATH without /usr/sbin).
func tool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed (it is on the host, not in the image, that the network faults need it)", name)
}

// commandTimeout bounds one tool run in a namespace.
const commandTimeout = 20 * time.Second

// Run runs argv inside ns (nsenter --net), with stdin when given, and
// returns its standard output; a failure carries what it printed.
func (n *NS) Run(ctx context.Context, stdin string, argv ...string) (string, error) {
	nsenter, err := tool("nsenter")
	if err != nil {
		return "", err
	}
	bin, err := tool(argv[0])
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	args := append([]string{"--net=/proc/self/fd/3", "--", bin}, argv[1:]...)
	cmd := exec.CommandContext(ctx, nsenter, args...)
	cmd.ExtraFiles = []*os.File{n.f}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return out.String(), nil
}

// Links lists the namespace's network devices but loopback.
func (n *NS) Links(ctx context.Context) ([]string, error) {
	out, err := n.Run(ctx, "", "ip", "-j", "link", "show")
	if err != nil {
		return nil, err
	}
	var links []struct {
		IfName string   `json:"ifname"`
		Flags  []string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return nil, fmt.Errorf("reading ip -j link: %w", err)
	}
	var names []string
	for _, l := range links {
		loop := false
		for _, f := range l.Flags {
			loop = loop || f == "LOOPBACK"
		}
		if !loop {
			names = append(names, l.IfName)
		}
	}
	return names, nil
}

// Addrs lists the addresses the namespace holds, loopback's but for.
func (n *NS) Addrs(ctx context.Context) ([]netip.Addr, error) {
	out, err := n.Run(ctx, "", "ip", "-j", "addr", "show")
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return nil, fmt.Errorf("reading ip -j addr: %w", err)
	}
	var addrs []netip.Addr
	for _, l := range links {
		for _, ai := range l.AddrInfo {
			if a, err := netip.ParseAddr(ai.Local); err == nil && !a.IsLoopback() {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs, nil
}
