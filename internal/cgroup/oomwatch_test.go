package cgroup

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// oomTree is a fake v2 tree in a temp dir (tmpfs or a disk: inotify
// works the same there as on cgroupfs, which this machine has no v2
// memory controller in): parent/ with memory.events and
// memory.events.local, the watched group parent/g and a sibling
// parent/sib. Counters are written in place, fixed width, so a read
// never sees a half-written file.
type oomTree struct {
	t      *testing.T
	parent string
}

func newOOMTree(t *testing.T, parentKills, siblingKills int) *oomTree {
	tr := &oomTree{t: t, parent: filepath.Join(t.TempDir(), "parent")}
	for _, d := range []string{tr.parent, tr.dir("g"), tr.dir("sib")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tr.set("", parentKills)
	tr.setFile(filepath.Join(tr.parent, "memory.events.local"), 0)
	tr.set("g", 0)
	tr.set("sib", siblingKills)
	return tr
}

func (tr *oomTree) dir(child string) string { return filepath.Join(tr.parent, child) }

// set writes oom_kill n to child's memory.events ("" is the parent).
func (tr *oomTree) set(child string, n int) {
	tr.setFile(filepath.Join(tr.dir(child), "memory.events"), n)
}

func (tr *oomTree) setFile(path string, n int) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		tr.t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "low 0\nhigh 0\nmax 0\noom %06d\noom_kill %06d\n", n, n); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *oomTree) remove(child string) {
	if err := os.RemoveAll(tr.dir(child)); err != nil {
		tr.t.Fatal(err)
	}
}

type oomSeen struct {
	kills uint64
	from  OOMKillSource
}

// watch runs an OOMWatch on g; wait returns what it reported once it has
// ended by itself (the group gone), or fails after a second.
func (tr *oomTree) watch() (seen func() []oomSeen, wait func() []oomSeen) {
	var mu sync.Mutex
	var got []oomSeen
	w := NewOOMWatch(Place{Dirs: map[string]string{Memory: tr.dir("g")}, Versions: map[string]int{Memory: 2}}, 0)
	if w.n == nil {
		tr.t.Fatal("no inotify watch on the fake tree")
	}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(done)
		w.Run(ctx, func(k uint64, from OOMKillSource) {
			mu.Lock()
			got = append(got, oomSeen{k, from})
			mu.Unlock()
		})
	}()
	tr.t.Cleanup(func() { cancel(); <-done })
	seen = func() []oomSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]oomSeen(nil), got...)
	}
	return seen, func() []oomSeen {
		select {
		case <-done:
		case <-time.After(time.Second):
			tr.t.Fatal("the watch did not end when its group went")
		}
		return seen()
	}
}

func waitSeen(t *testing.T, seen func() []oomSeen, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); len(seen()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("saw %v, want %d reports", seen(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The v2 watch: the group's own count is read when memory.events
// changes; a group gone before its count was read is credited with the
// parent's rise less its siblings', and with nothing when a sibling went
// away meanwhile, whose kills could hide in the parent's rise.
func TestOOMWatchV2(t *testing.T) {
	cases := []struct {
		name string
		// act changes the tree after the watch began, then removes g.
		act  func(tr *oomTree)
		want []oomSeen
	}{
		{"gone, the parent counts its kill", func(tr *oomTree) {
			tr.set("", 11)
			tr.remove("g")
		}, []oomSeen{{1, FromParent}}},
		{"gone, the kill was a sibling's", func(tr *oomTree) {
			tr.set("sib", 4)
			tr.set("", 11)
			tr.remove("g")
		}, nil},
		{"gone, a sibling made since killed", func(tr *oomTree) {
			if err := os.Mkdir(tr.dir("new"), 0o755); err != nil {
				t.Fatal(err)
			}
			tr.set("new", 2)
			tr.set("", 12)
			tr.remove("g")
		}, nil},
		{"gone, a sibling made since killed and went", func(tr *oomTree) {
			if err := os.Mkdir(tr.dir("new"), 0o755); err != nil {
				t.Fatal(err)
			}
			tr.set("new", 2)
			tr.set("", 12)
			tr.remove("new")
			tr.remove("g")
		}, nil},
		{"gone, and a sibling went too", func(tr *oomTree) {
			tr.set("", 11)
			tr.remove("sib")
			tr.remove("g")
		}, nil},
		{"gone, the parent's own kill", func(tr *oomTree) {
			tr.setFile(filepath.Join(tr.parent, "memory.events.local"), 1)
			tr.set("", 11)
			tr.remove("g")
		}, nil},
		{"gone, no kill", func(tr *oomTree) {
			tr.remove("g")
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newOOMTree(t, 10, 3)
			_, wait := tr.watch()
			c.act(tr)
			if got := wait(); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("reported %v, want %v", got, c.want)
			}
		})
	}
}

// A kill the group's count shows is reported from it at once, and one
// it had not shown when the group went is still found in the parent's.
func TestOOMWatchV2SeenThenGone(t *testing.T) {
	tr := newOOMTree(t, 10, 3)
	seen, wait := tr.watch()
	tr.set("g", 1)
	tr.set("", 11)
	waitSeen(t, seen, 1)
	tr.set("", 12)
	tr.remove("g")
	want := []oomSeen{{1, FromGroup}, {2, FromParent}}
	if got := wait(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reported %v, want %v", got, want)
	}
}

// A watch that ends, by its context or by its group going, leaves no fd
// open; one that never runs is closed.
func TestOOMWatchClosesItsFds(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for range 3 {
		tr := newOOMTree(t, 0, 0)
		_, wait := tr.watch()
		tr.remove("g")
		wait()
	}
	p := Place{Dirs: map[string]string{Memory: t.TempDir()}, Versions: map[string]int{Memory: 2}}
	if err := os.WriteFile(filepath.Join(p.Dirs[Memory], "memory.events"), []byte("oom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := NewOOMWatch(p, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, func(uint64, OOMKillSource) {}) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-done
	NewOOMWatch(p, 0).Close()
	if after := fds(); after != before {
		t.Errorf("%d fds open before, %d after", before, after)
	}
}

// parseInotify reads events back to back, names padded with NULs, and
// stops at a truncated one.
func TestParseInotify(t *testing.T) {
	ev := func(wd int32, mask uint32, name string, pad int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent+len(name)+pad)
		binary.NativeEndian.PutUint32(b[0:], uint32(wd))
		binary.NativeEndian.PutUint32(b[4:], mask)
		binary.NativeEndian.PutUint32(b[12:], uint32(len(name)+pad))
		copy(b[unix.SizeofInotifyEvent:], name)
		return b
	}
	var b []byte
	b = append(b, ev(1, unix.IN_MODIFY, "", 0)...)
	b = append(b, ev(2, unix.IN_DELETE|unix.IN_ISDIR, "sib", 13)...)
	b = append(b, ev(2, unix.IN_CREATE|unix.IN_ISDIR, "a-longer-name", 3)...)
	b = append(b, ev(3, unix.IN_MODIFY, "cut", 0)[:unix.SizeofInotifyEvent+1]...)
	var got []string
	parseInotify(b, func(wd int32, mask uint32, name string) {
		got = append(got, fmt.Sprintf("%d %#x %q", wd, mask, name))
	})
	want := []string{
		fmt.Sprintf("1 %#x %q", unix.IN_MODIFY, ""),
		fmt.Sprintf("2 %#x %q", unix.IN_DELETE|unix.IN_ISDIR, "sib"),
		fmt.Sprintf("2 %#x %q", unix.IN_CREATE|unix.IN_ISDIR, "a-longer-name"),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
