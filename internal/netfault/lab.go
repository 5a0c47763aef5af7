package netfault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Lab is a run's own network on this machine, for processes: a hub
// namespace holding a bridge, one namespace per member (an instance, a
// target the run owns) with an address on the bridge, and a link from the
// host to the bridge, so the host reaches every member and the members
// reach each other and the host, and nothing else. The addresses are a /24
// of 198.18.0.0/15 (RFC 2544's range for tests) that no address or route
// of this machine uses.
//
// The bridge is in a namespace of the run's own, not the host's, so the
// host's firewall (br_netfilter with Docker's FORWARD policy DROP) never
// sees the members' traffic. Every namespace lives while the Lab holds it
// open or a process is in it: when the harness is killed and the run's
// processes are gone, the whole network is gone too, the host's end of the
// link included.
type Lab struct {
	Prefix netip.Prefix
	// Host is the host's address on the run's network.
	Host netip.Addr
	// HostLink is the host's end of the link to the bridge.
	HostLink string

	hub *NS

	mu      sync.Mutex
	members map[string]*Member
	next    int
	links   int
	closed  bool
}

// Member is one namespace on the run's network.
type Member struct {
	Name string
	Addr netip.Addr
	NS   *NS
}

// labRange is where run networks come from: 198.18.0.0/15, 512 /24s.
var labRange = netip.MustParsePrefix("198.18.0.0/15")

// LabLock serializes the choice of a run network's /24 on this machine.
const LabLock = "/run/chaos/net.lock"

// NewLab makes a run's network: it picks a /24 no address or route of the
// machine overlaps (the pick and the host's address are made under a
// lock), makes the hub with its bridge and links the host to it.
func NewLab(ctx context.Context, runID string) (*Lab, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a run network needs root (namespaces, links and addresses of the run's own)")
	}
	if err := os.MkdirAll(filepath.Dir(LabLock), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(LabLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	prefix, err := freePrefix(ctx, runID)
	if err != nil {
		return nil, err
	}
	hub, err := NewNS()
	if err != nil {
		return nil, err
	}
	l := &Lab{Prefix: prefix, Host: prefix.Addr().Next(), HostLink: "chx" + Tag(runID), hub: hub, members: map[string]*Member{}, next: 2}
	host, err := Host()
	if err != nil {
		hub.Close()
		return nil, err
	}
	defer host.Close()
	steps := []struct {
		ns   *NS
		argv []string
	}{
		{hub, []string{"ip", "link", "set", "lo", "up"}},
		{hub, []string{"ip", "link", "add", "br0", "type", "bridge"}},
		{hub, []string{"ip", "link", "set", "br0", "up"}},
		{hub, []string{"ip", "link", "add", "h0", "type", "veth", "peer", "name", l.HostLink, "netns", host.Path()}},
		{hub, []string{"ip", "link", "set", "h0", "master", "br0", "up"}},
		{host, []string{"ip", "addr", "add", netip.PrefixFrom(l.Host, prefix.Bits()).String(), "dev", l.HostLink}},
		{host, []string{"ip", "link", "set", l.HostLink, "up"}},
	}
	for _, s := range steps {
		if _, err := s.ns.Run(ctx, "", s.argv...); err != nil {
			l.Close()
			return nil, fmt.Errorf("making the run's network: %w", err)
		}
	}
	return l, nil
}

// freePrefix picks the run's /24: the first, from a place the run id
// chooses, that no address or route of the machine overlaps.
func freePrefix(ctx context.Context, runID string) (netip.Prefix, error) {
	var used []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			used = append(used, p.Masked())
		}
	}
	host, err := Host()
	if err != nil {
		return netip.Prefix{}, err
	}
	defer host.Close()
	if out, err := host.Run(ctx, "", "ip", "-j", "-4", "route", "show", "table", "all"); err == nil {
		var routes []struct {
			Dst string `json:"dst"`
		}
		if json.Unmarshal([]byte(out), &routes) == nil {
			for _, r := range routes {
				if p, err := netip.ParsePrefix(r.Dst); err == nil && p.Bits() > 0 {
					used = append(used, p)
				} else if a, err := netip.ParseAddr(r.Dst); err == nil {
					used = append(used, netip.PrefixFrom(a, a.BitLen()))
				}
			}
		}
	}
	h := fnv.New32a()
	h.Write([]byte(runID))
	n := 1 << (24 - labRange.Bits())
	start := int(h.Sum32() % uint32(n))
	base := labRange.Addr().As4()
	for i := 0; i < n; i++ {
		k := (start + i) % n
		a := base
		a[2] += byte(k % 256)
		a[1] += byte(k / 256)
		p := netip.PrefixFrom(netip.AddrFrom4(a), 24)
		free := true
		for _, u := range used {
			if u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("every /24 of %s is in use on this machine", labRange)
}

// Reserve returns the address of the next member to be made.
func (l *Lab) Reserve() (netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next > 254 {
		return netip.Addr{}, fmt.Errorf("the run's network %s is full (253 members)", l.Prefix)
	}
	a := l.Prefix.Addr().As4()
	a[3] = byte(l.next)
	l.next++
	return netip.AddrFrom4(a), nil
}

// Member returns the member name, making its namespace on first use with
// address addr (from Reserve): a device eth0 on the bridge, a default
// route through the host, loopback up.
func (l *Lab) Member(ctx context.Context, name string, addr netip.Addr) (*Member, error) {
	l.mu.Lock()
	if m, ok := l.members[name]; ok {
		l.mu.Unlock()
		return m, nil
	}
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("the run's network is closed")
	}
	link := fmt.Sprintf("m%d", l.links)
	l.links++
	l.mu.Unlock()
	ns, err := NewNS()
	if err != nil {
		return nil, err
	}
	steps := []struct {
		ns   *NS
		argv []string
	}{
		{ns, []string{"ip", "link", "set", "lo", "up"}},
		{l.hub, []string{"ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns.Path()}},
		{l.hub, []string{"ip", "link", "set", link, "master", "br0", "up"}},
		{ns, []string{"ip", "addr", "add", netip.PrefixFrom(addr, l.Prefix.Bits()).String(), "dev", "eth0"}},
		{ns, []string{"ip", "link", "set", "eth0", "up"}},
		{ns, []string{"ip", "route", "add", "default", "via", l.Host.String()}},
	}
	for _, s := range steps {
		if _, err := s.ns.Run(ctx, "", s.argv...); err != nil {
			ns.Close()
			_, _ = l.hub.Run(ctx, "", "ip", "link", "del", link)
			return nil, fmt.Errorf("making the network namespace of %s: %w", name, err)
		}
	}
	m := &Member{Name: name, Addr: addr, NS: ns}
	l.mu.Lock()
	l.members[name] = m
	l.mu.Unlock()
	return m, nil
}

// Members returns the members made so far.
func (l *Lab) Members() map[string]*Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]*Member, len(l.members))
	for k, v := range l.members {
		out[k] = v
	}
	return out
}

// Close lets go of the run's network: the host's link is deleted (which
// takes the hub's end with it) and the namespaces are closed, so each goes
// once no process is in it.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	members := l.members
	l.mu.Unlock()
	var err error
	if host, herr := Host(); herr == nil {
		if _, derr := host.Run(context.Background(), "", "ip", "link", "del", l.HostLink); derr != nil && !goneErr(derr) {
			err = derr
		}
		host.Close()
	}
	for _, m := range members {
		m.NS.Close()
	}
	l.hub.Close()
	return err
}
