package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Own is a group per hierarchy that the harness made for one handle whose
// processes share their cgroups with the harness's (a local instance is
// in a v2 leaf of its own, but, on v1, in the harness's cpu, memory, blkio
// and pids groups): its processes are moved into it, so a limit holds them
// and no one else, and everything they fork stays there.
type Own struct {
	Place Place
	// Dirs are the v1 directories made, each with the directory its
	// processes came from (where Release puts them back).
	Dirs []OwnDir
}

// OwnDir is one directory an Own made.
type OwnDir struct {
	Dir    string `json:"dir"`
	Parent string `json:"parent"`
}

// MakeOwn makes, for the v1 hierarchies of the resource controllers, a
// directory name below where pid is now (v1 children take their parent's
// limits on top of their own), and, where a controller is in the unified
// hierarchy, uses leaf (the handle's own v2 group, "" if none) after
// enabling the controller on each of its ancestors. made is told each
// directory before it is created, for the journal. Processes are moved in
// by Move.
func MakeOwn(h Hierarchies, pid int, leaf, name string, made func(OwnDir) error) (*Own, error) {
	cgs, err := ProcCgroups(pid)
	if err != nil {
		return nil, fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	name = SafeName(name, 100)
	o := &Own{Place: Place{Dirs: map[string]string{}, Versions: map[string]int{}}}
	byMount := map[string]string{}
	for _, c := range []string{CPU, CPUAcct, Memory, IO, Pids} {
		hv, ok := h.V1[v1Name(c)]
		if !ok {
			continue
		}
		if d, ok := byMount[hv.Mount]; ok {
			o.Place.Dirs[c], o.Place.Versions[c] = d, 1
			continue
		}
		parent := hv.hostDir(cgs[v1Name(c)])
		if parent == "" {
			continue
		}
		d := OwnDir{Dir: filepath.Join(parent, name), Parent: parent}
		if made != nil {
			if err := made(d); err != nil {
				return o, err
			}
		}
		if err := os.Mkdir(d.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return o, fmt.Errorf("creating cgroup %s: %w", d.Dir, err)
		}
		o.Dirs = append(o.Dirs, d)
		byMount[hv.Mount] = d.Dir
		o.Place.Dirs[c], o.Place.Versions[c] = d.Dir, 1
		if c == Memory {
			// Charge what the processes already use to the new group,
			// where the kernel still can (it is deprecated on v1).
			_ = WriteFile(Write{filepath.Join(d.Dir, "memory.move_charge_at_immigrate"), "3"})
		}
	}
	if h.V2 != nil && leaf != "" {
		for _, c := range []string{CPU, CPUAcct, Memory, IO, Pids} {
			if _, ok := o.Place.Dirs[c]; ok {
				continue
			}
			want := c
			if c == CPUAcct {
				want = CPU
			}
			if enableUpTo(h.V2.Mount, leaf, want) == nil {
				o.Place.Dirs[c], o.Place.Versions[c] = leaf, 2
			}
		}
	}
	return o, nil
}

// enableUpTo enables controller c in cgroup.subtree_control of every
// directory from mount down to leaf's parent, so leaf has c's files. The
// harness's own directories hold no processes, so v2's rule against
// controllers beside processes does not stop it; the mount's top is
// exempt from that rule.
func enableUpTo(mount, leaf, c string) error {
	rel, err := filepath.Rel(mount, leaf)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not below %s", leaf, mount)
	}
	dir := mount
	for _, part := range strings.Split(rel, "/") {
		if !hasController(filepath.Join(dir), c) && dir != mount {
			return fmt.Errorf("%s: controller %s not available", dir, c)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if !slices.Contains(strings.Fields(string(b)), c) {
			if err := WriteFile(Write{filepath.Join(dir, "cgroup.subtree_control"), "+" + c}); err != nil {
				return err
			}
		}
		dir = filepath.Join(dir, part)
	}
	if !hasController(leaf, c) {
		return fmt.Errorf("%s: controller %s not available", leaf, c)
	}
	return nil
}

// Move moves the processes list returns into every directory of o, until
// a pass finds none left outside (a process forked while the others moved
// is still where its parent was). It gives up after ctx ends.
func (o *Own) Move(ctx context.Context, list func() ([]int, error)) error {
	for pass := 0; ; pass++ {
		pids, err := list()
		if err != nil {
			return err
		}
		moved := 0
		for _, d := range o.Dirs {
			in, _ := readInts(filepath.Join(d.Dir, "cgroup.procs"))
			for _, pid := range pids {
				if slices.Contains(in, pid) {
					continue
				}
				err := WriteFile(Write{filepath.Join(d.Dir, "cgroup.procs"), strconv.Itoa(pid)})
				if err != nil && !errors.Is(err, errNoProcess) && !strings.Contains(err.Error(), "no such process") {
					return fmt.Errorf("moving pid %d into %s: %w", pid, d.Dir, err)
				}
				moved++
			}
		}
		if moved == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if pass > 50 {
			return fmt.Errorf("moving processes into %s: they keep forking faster than they can be moved", o.Dirs[0].Dir)
		}
		time.Sleep(time.Millisecond)
	}
}

var errNoProcess = errors.New("no such process")

// Release puts every process of o's directories back where they came from
// and removes the directories; a directory already gone is released.
func (o *Own) Release(ctx context.Context) error {
	var errs []error
	for _, d := range o.Dirs {
		errs = append(errs, ReleaseDir(ctx, d))
	}
	return errors.Join(errs...)
}

// ReleaseDir moves what is in d.Dir to d.Parent and removes d.Dir (what
// chaos cleanup does for a journal's entry too).
func ReleaseDir(ctx context.Context, d OwnDir) error {
	for attempt := 0; ; attempt++ {
		pids, err := readInts(filepath.Join(d.Dir, "cgroup.procs"))
		if err != nil {
			if IsGone(err) {
				return nil
			}
			return err
		}
		for _, pid := range pids {
			_ = WriteFile(Write{filepath.Join(d.Parent, "cgroup.procs"), strconv.Itoa(pid)})
		}
		err = os.Remove(d.Dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if attempt > 100 || ctx.Err() != nil {
			return fmt.Errorf("removing cgroup %s: %w", d.Dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Place moves one process (a stress helper) into every directory of p
// that is a v1 group, and into the unified group of p: what it uses is
// then counted and limited with the handle's.
func PlacePid(p Place, pid int) error {
	seen := map[string]bool{}
	var errs []error
	for _, c := range []string{CPU, CPUAcct, Memory, IO, Pids} {
		d := p.Dirs[c]
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		if err := WriteFile(Write{filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)}); err != nil {
			errs = append(errs, fmt.Errorf("placing pid %d in %s: %w", pid, d, err))
		}
	}
	return errors.Join(errs...)
}
