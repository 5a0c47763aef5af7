package engine

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/adapter"
)

// ports are the loopback ports a run allocated for its adapter's ports.
//
// Each is chosen by the kernel (bind to 127.0.0.1:0) and stays reserved
// until the run ends: the harness keeps a socket bound to it, with
// SO_REUSEADDR and never listening. While that socket exists the kernel
// hands the port to no other bind to port 0 and to no outgoing connection,
// so a concurrent run (or anything else asking for a free port) cannot get
// it; the system's server binds it with SO_REUSEADDR, as servers do (Go's
// net package, etcd, redis, PostgreSQL, nginx), which Linux allows beside a
// socket that does not listen.
type ports struct {
	byName map[string]int
	names  []string
	fds    []int
}

// reservePorts reserves one free loopback port per name.
func reservePorts(names []string) (*ports, error) {
	p := &ports{byName: map[string]int{}}
	for _, name := range names {
		port, fd, err := reservePort()
		if err != nil {
			p.release()
			return nil, fmt.Errorf("reserving a free loopback port for %s: %w", name, err)
		}
		p.byName[name], p.names, p.fds = port, append(p.names, name), append(p.fds, fd)
	}
	return p, nil
}

func reservePort() (port, fd int, err error) {
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return 0, -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return 0, -1, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return 0, -1, err
	}
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		unix.Close(fd)
		return 0, -1, fmt.Errorf("getsockname gave %T", sa)
	}
	return in.Port, fd, nil
}

// env is CHAOS_PORT_<NAME>=<port> for each port, in the adapter's order.
func (p *ports) env() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, n := range p.names {
		out = append(out, adapter.PortEnv(n), fmt.Sprint(p.byName[n]))
	}
	return out
}

// release gives the ports back to the kernel.
func (p *ports) release() {
	if p == nil {
		return
	}
	for _, fd := range p.fds {
		unix.Close(fd)
	}
	p.fds = nil
}
