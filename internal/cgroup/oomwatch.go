package cgroup

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/ctxfd"
)

// The OOM killer's count of a memory group (v1 memory.oom_control
// oom_kill, v2 memory.events oom_kill) dies with the group, and a group
// whose only process was killed is removed by its runtime a few ms later:
// a read every 100 ms usually finds it gone. So an OOMWatch is woken by
// the kernel, and reads at once:
//
//   - v1: an eventfd registered in cgroup.event_control against
//     memory.oom_control fires when the group (or an ancestor) runs out of
//     memory, before the OOM killer picks its victim, and when the group
//     is removed. The kill is counted before the victim is sent SIGKILL,
//     so the group cannot be empty, let alone removed, before the count
//     rose: after a wake it is read every oomReread until it rose, the
//     group is gone or oomRereadFor passed. v1 counts kills per group
//     only, so a group gone before a read has no other witness.
//   - v2: inotify IN_MODIFY on memory.events (the kernel notifies it at
//     most every 10 ms, and drops a pending notification when the group
//     goes), and IN_CREATE/IN_DELETE on the parent directory, so the
//     group's removal wakes the watch too. The parent's memory.events
//     counts its whole subtree; a group gone before its count was read is
//     credited with the parent's rise less every sibling's rise (and the
//     parent's own, memory.events.local), each since the watch began, and
//     only when no sibling went away meanwhile: a sibling's kills would
//     otherwise hide in the parent's rise.
//
// A poll every oomPoll runs beside either (a kill by the machine-wide OOM
// killer is counted in the group but not notified), and alone when neither
// can be set up.
const (
	oomPoll      = 100 * time.Millisecond
	oomReread    = 200 * time.Microsecond
	oomRereadFor = time.Second
)

// OOMKillSource says which counter showed an OOM kill.
type OOMKillSource string

const (
	// FromGroup: the group's own count.
	FromGroup OOMKillSource = "group"
	// FromParent: the group was gone; its parent's count, less its
	// siblings', showed kills the group's count had not when last read.
	FromParent OOMKillSource = "parent"
)

// OOMWatch is one memory group's watch.
type OOMWatch struct {
	dir        string
	v          int
	base, seen uint64
	rose       func(uint64, OOMKillSource)
	n          *oomNotifier
	// The v2 parent's counts when the watch began, and the group's and
	// each sibling's then (a sibling made since has 0); tainted once a
	// sibling went away, or inotify lost events.
	parent                  string
	parentBase, parentLocal uint64
	groupBase               uint64
	siblings                map[string]uint64
	tainted                 bool
}

// NewOOMWatch watches the OOM kills in p's memory group, counted from
// base. It sets up the kernel's notifications at once, so that an OOM
// after it returns wakes Run. It is nil when p has no memory group.
func NewOOMWatch(p Place, base uint64) *OOMWatch {
	dir, v := p.Dir(Memory)
	if dir == "" {
		return nil
	}
	w := &OOMWatch{dir: dir, v: v, base: base, seen: base}
	if v == 1 {
		w.n, _ = notifyV1(dir)
	} else {
		w.n, _ = w.notifyV2()
	}
	return w
}

// Run calls rose with the number of OOM kills since base each time that
// number is seen to rise, until ctx ends or the group is gone (a group
// made again at the same path is a new group, without the limits set on
// the old one); then it releases what NewOOMWatch set up. Its first read
// is at once: a kill before the notifications were set up is seen there,
// unless the group is already gone.
func (w *OOMWatch) Run(ctx context.Context, rose func(kills uint64, from OOMKillSource)) {
	if w == nil {
		return
	}
	defer w.Close()
	w.rose = rose
	wake, stopWake, err := ctxfd.Waker(ctx)
	if err != nil {
		wake, stopWake = -1, func() {} // the poll's timeout still ends it
	}
	defer stopWake()
	for notified := false; w.check(ctx, notified); {
		fds := []unix.PollFd{{Fd: int32(wake), Events: unix.POLLIN}}
		if w.n != nil {
			fds = append(fds, unix.PollFd{Fd: int32(w.n.fd), Events: unix.POLLIN})
		}
		k, err := unix.Poll(fds, int(oomPoll/time.Millisecond))
		if ctx.Err() != nil {
			return
		}
		if err != nil && err != unix.EINTR {
			time.Sleep(oomPoll) // never a busy loop
		}
		notified = err == nil && k > 0 && len(fds) > 1 && fds[1].Revents != 0
		if notified {
			w.n.drain(w)
		}
	}
}

// Close releases what NewOOMWatch set up, for a watch that will not Run.
func (w *OOMWatch) Close() {
	if w != nil {
		w.n.close()
		w.n = nil
	}
}

// check reads the group's count, reports a rise, and returns false once
// the group is gone. After a v1 notification it reads again until the
// kill the notification announced is counted.
func (w *OOMWatch) check(ctx context.Context, notified bool) bool {
	var until time.Time
	for {
		kv, err := readKV(w.countFile())
		if err != nil {
			if IsGone(err) {
				w.gone()
				return false
			}
			return true
		}
		if n := kv["oom_kill"]; n > w.seen {
			w.seen = n
			w.rose(n-w.base, FromGroup)
			return true
		}
		// v2 notifies the kill itself; v1 only the OOM before it, and
		// none at all when the group's OOM killer is off.
		if !notified || w.v != 1 || kv["oom_kill_disable"] != 0 {
			return true
		}
		if until.IsZero() {
			until = time.Now().Add(oomRereadFor)
		} else if time.Now().After(until) || ctx.Err() != nil {
			return true
		}
		time.Sleep(oomReread)
	}
}

func (w *OOMWatch) countFile() string {
	if w.v == 1 {
		return filepath.Join(w.dir, "memory.oom_control")
	}
	return filepath.Join(w.dir, "memory.events")
}

// notifyV2 sets up the v2 notifications and, when the parent directory
// can be watched and counts, the baseline of the parent fallback. The
// counts of the group and its siblings are read before the parent's and,
// at the end, after it: a kill between two reads then makes the group's
// share smaller, never larger.
func (w *OOMWatch) notifyV2() (*oomNotifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	n := &oomNotifier{fd: fd, v: 2, self: filepath.Base(w.dir)}
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(w.dir, "memory.events"), unix.IN_MODIFY); err != nil {
		n.close()
		return nil, fmt.Errorf("watching %s/memory.events: %w", w.dir, err)
	}
	parent := filepath.Dir(w.dir)
	if pw, err := unix.InotifyAddWatch(fd, parent, unix.IN_CREATE|unix.IN_DELETE|unix.IN_ONLYDIR); err == nil {
		n.parentWd = pw
		w.baseline(parent)
	}
	return n, nil
}

// baseline reads the counts the parent fallback compares with; a parent
// without memory.events (the root) has no fallback.
func (w *OOMWatch) baseline(parent string) {
	self := filepath.Base(w.dir)
	g, err := readKV(filepath.Join(w.dir, "memory.events"))
	if err != nil {
		return
	}
	sib, err := childCounts(parent, self)
	if err != nil {
		return
	}
	local, _ := readKV(filepath.Join(parent, "memory.events.local"))
	pkv, err := readKV(filepath.Join(parent, "memory.events"))
	if err != nil {
		return
	}
	w.parent, w.parentBase, w.parentLocal, w.groupBase, w.siblings = parent, pkv["oom_kill"], local["oom_kill"], g["oom_kill"], sib
}

// childCounts reads memory.events oom_kill of every child group of dir
// but skip (the group itself, which may be going as it is listed).
func childCounts(dir, skip string) (map[string]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == skip {
			continue
		}
		kv, err := readKV(filepath.Join(dir, e.Name(), "memory.events"))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = kv["oom_kill"]
	}
	return out, nil
}

// gone credits the group, gone before its count was read, with the kills
// its v2 parent saw in the subtree that no sibling accounts for.
func (w *OOMWatch) gone() {
	if w.parent == "" || w.n == nil {
		return
	}
	// Siblings made or removed up to now are known before the counts
	// are read.
	w.n.drain(w)
	if w.tainted {
		return
	}
	pkv, err := readKV(filepath.Join(w.parent, "memory.events"))
	if err != nil {
		return
	}
	children, err := childCounts(w.parent, filepath.Base(w.dir))
	if err != nil {
		return // a sibling went as it was read
	}
	for name := range w.siblings {
		if _, ok := children[name]; !ok {
			return
		}
	}
	local, _ := readKV(filepath.Join(w.parent, "memory.events.local"))
	rise := int64(pkv["oom_kill"]) - int64(w.parentBase) - (int64(local["oom_kill"]) - int64(w.parentLocal))
	for name, c := range children {
		rise -= int64(c) - int64(w.siblings[name])
	}
	if total := int64(w.groupBase) + rise; total > int64(w.seen) {
		w.seen = uint64(total)
		w.rose(w.seen-w.base, FromParent)
	}
}

// oomNotifier is the fd the kernel wakes: v1's eventfd or v2's inotify.
type oomNotifier struct {
	fd int
	v  int
	// v2: the parent directory's watch, and the group's name in it.
	parentWd int
	self     string
}

// notifyV1 registers an eventfd for OOM in the v1 group dir.
func notifyV1(dir string) (*oomNotifier, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	cfd, err := unix.Open(filepath.Join(dir, "memory.oom_control"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("opening %s/memory.oom_control: %w", dir, err)
	}
	// The kernel holds the eventfd, not memory.oom_control; closing the
	// eventfd unregisters it.
	defer unix.Close(cfd)
	if err := writeOnce(Write{filepath.Join(dir, "cgroup.event_control"), fmt.Sprintf("%d %d", efd, cfd)}); err != nil {
		unix.Close(efd)
		return nil, err
	}
	return &oomNotifier{fd: efd, v: 1}, nil
}

// drain reads what woke the fd, so the next poll waits again. A v2
// sibling made since the baseline joins it with no kills; one that went
// away taints the parent fallback.
func (n *oomNotifier) drain(w *OOMWatch) {
	buf := make([]byte, 4096)
	for {
		k, err := unix.Read(n.fd, buf)
		if err != nil || k <= 0 || n.v == 1 {
			return
		}
		parseInotify(buf[:k], func(wd int32, mask uint32, name string) {
			switch {
			case mask&unix.IN_Q_OVERFLOW != 0:
				w.tainted = true
			case int(wd) != n.parentWd || mask&unix.IN_ISDIR == 0 || name == n.self:
			case mask&unix.IN_DELETE != 0:
				w.tainted = true
			case mask&unix.IN_CREATE != 0 && w.siblings != nil:
				if _, ok := w.siblings[name]; !ok {
					w.siblings[name] = 0
				}
			}
		})
	}
}

func (n *oomNotifier) close() {
	if n != nil {
		unix.Close(n.fd)
	}
}

// parseInotify calls fn for each event in b, as read(2) from an inotify
// fd returns them: a fixed header, then the name padded with NULs.
func parseInotify(b []byte, fn func(wd int32, mask uint32, name string)) {
	const hdr = unix.SizeofInotifyEvent
	for len(b) >= hdr {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		l := int(binary.NativeEndian.Uint32(b[12:16]))
		if l > len(b)-hdr {
			return
		}
		name := string(bytes.TrimRight(b[hdr:hdr+l], "\x00"))
		fn(wd, mask, name)
		b = b[hdr+l:]
	}
}
