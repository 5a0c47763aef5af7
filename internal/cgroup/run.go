package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// Run is the cgroup tree of one run: the directory
//
//	<mount>/chaos/<run-id>.<harness-pid>.<harness-start>
//
// with one leaf per started process below it. Operations of the embedded
// Group act on the whole run.
//
// Who owns a tree is encoded in its name because cgroupfs cannot hold
// arbitrary files (only the kernel's interface files), and the name, unlike
// a note in the run directory, is created atomically with the tree, cannot
// get out of step with it, and is there for `chaos cleanup` to read even
// when the run directory is gone or was never known. The harness's start
// time (clock ticks after boot, field 22 of /proc/PID/stat) makes the pid
// unambiguous: a tree whose harness pid is dead, or now belongs to a process
// with another start time, is stale.
type Run struct {
	*Group
	// RunID is the run id as it appears in the name (see SafeName).
	RunID string
	// HarnessPid and HarnessStart identify the harness process that owns
	// the tree.
	HarnessPid   int
	HarnessStart uint64

	seq atomic.Uint64
}

// maxRunIDLen keeps the directory name within NAME_MAX with room for the
// owner fields.
const maxRunIDLen = 200

// NewRun creates (or, for the same harness process, reuses) the tree of run
// runID below info.Root, owned by the calling process.
func NewRun(info Info, runID string) (*Run, error) {
	if !info.Usable {
		return nil, fmt.Errorf("creating the cgroup tree of run %s: cgroup v2 is not usable: %s", runID, info.Reason)
	}
	pid := os.Getpid()
	start, err := procStart(pid)
	if err != nil {
		return nil, fmt.Errorf("creating the cgroup tree of run %s: reading our start time: %w", runID, err)
	}
	id := SafeName(runID, maxRunIDLen)
	root := &Group{Path: info.Root, rel: joinRel(info.MountRoot, RootName)}
	name := runDirName(id, pid, start)
	g, err := root.Mkdir(name)
	if errors.Is(err, fs.ErrExist) {
		g, err = &Group{Path: filepath.Join(root.Path, name), rel: root.rel + "/" + name}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Run{Group: g, RunID: id, HarnessPid: pid, HarnessStart: start}, nil
}

func runDirName(runID string, pid int, start uint64) string {
	return runID + "." + strconv.Itoa(pid) + "." + strconv.FormatUint(start, 10)
}

// parseRunDirName reads a name made by runDirName.
func parseRunDirName(name string) (runID string, pid int, start uint64, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 3 || parts[0] == "" || SafeName(parts[0], maxRunIDLen) != parts[0] {
		return "", 0, 0, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return "", 0, 0, false
	}
	start, err = strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return "", 0, 0, false
	}
	return parts[0], pid, start, true
}

// NewLeaf creates a new leaf for one process: <run>/<name>.<n>, where name
// is made safe (SafeName) and n counts up, so a leaf name is never reused
// within the run, even after the leaf is removed. Nothing that still holds
// an old leaf's path can therefore reach a newer process.
func (r *Run) NewLeaf(name string) (*Group, error) {
	base := SafeName(name, 64)
	for {
		g, err := r.Mkdir(base + "." + strconv.FormatUint(r.seq.Add(1), 10))
		if errors.Is(err, fs.ErrExist) {
			continue // a reused tree already has it
		}
		return g, err
	}
}

// HarnessAlive reports whether the harness that owns the tree still runs.
func (r *Run) HarnessAlive() bool {
	start, err := procStart(r.HarnessPid)
	return err == nil && start == r.HarnessStart
}

// ListRuns returns every run tree below info.Root, whichever harness owns
// it. Directories whose names were not made by NewRun are ignored.
func ListRuns(info Info) ([]*Run, error) {
	if info.Root == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(info.Root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing run cgroups in %s: %w", info.Root, err)
	}
	rootRel := joinRel(info.MountRoot, RootName)
	var out []*Run
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		id, pid, start, ok := parseRunDirName(e.Name())
		if !ok {
			continue
		}
		g := &Group{Path: filepath.Join(info.Root, e.Name()), rel: rootRel + "/" + e.Name()}
		out = append(out, &Run{Group: g, RunID: id, HarnessPid: pid, HarnessStart: start})
	}
	return out, nil
}

// SweepStale kills and removes the tree of every run whose harness is gone
// (what `chaos cleanup` needs), and returns those trees, each with the pids
// that were still in it before the kill in procs[i]. Trees of live harnesses
// are left alone. It waits, bounded by ctx, until each killed tree is empty.
func SweepStale(ctx context.Context, info Info) (swept []*Run, procs [][]int, err error) {
	runs, err := ListRuns(info)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, r := range runs {
		if r.HarnessAlive() {
			continue
		}
		pids, perr := r.Procs()
		if perr != nil {
			errs = append(errs, perr)
		}
		if len(pids) > 0 {
			if err := r.Thaw(ctx); err != nil {
				errs = append(errs, err)
			}
			if err := r.KillWait(ctx); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := r.Remove(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, r)
		procs = append(procs, pids)
	}
	return swept, procs, errors.Join(errs...)
}
