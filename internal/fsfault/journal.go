package fsfault

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/proc"
)

// The harness serves its layers itself: a harness killed with SIGKILL
// takes the server with it, the kernel aborts the connection (programs
// under the layer get ENOTCONN, never a hang), and the mount is left with
// no one behind it. So every mount is journalled before it is made, in
// StateDir, in a file whose name says which harness made it; chaos
// cleanup unmounts (lazily: a program may still hold it) every mount of a
// run whose harness is gone, and only a mount that mountinfo shows is
// the run's layer (type fuse.chaos, source the run's FsName).

// StateDir holds one journal per run with layers mounted and not yet
// unmounted, named <run id>.<harness pid>.<harness start time>.jsonl:
// /run/chaos/fs, or fs under $CHAOS_STATE_DIR.
func StateDir() string { return journalfile.Dir("fs") }

// MountEntry is a journal line.
type MountEntry struct {
	Event  string    `json:"event"` // "mount" (about to be made) or "unmounted"
	TS     time.Time `json:"ts"`
	RunID  string    `json:"run_id"`
	Dir    string    `json:"dir"`
	FsName string    `json:"fsname,omitempty"`
	// Remove: the harness made Dir for the layer (a container's volume),
	// and removes it with what it holds once the layer is unmounted.
	Remove bool `json:"remove,omitempty"`
}

// Journal is one run's journal of layers.
type Journal struct {
	runID, path string

	// mu guards f and open.
	mu   sync.Mutex
	f    *os.File
	open map[string]bool // directories mounted and not yet unmounted; true: remove it after
}

// NewJournal returns run runID's journal in stateDir ("" is
// StateDir); it writes nothing until the first mount.
func NewJournal(stateDir, runID string) *Journal {
	if stateDir == "" {
		stateDir = StateDir()
	}
	st, _ := proc.StartTime(os.Getpid())
	name := fmt.Sprintf("%s.%d.%d.jsonl", cgroup.SafeName(runID, 200), os.Getpid(), st)
	return &Journal{runID: runID, path: filepath.Join(stateDir, name), open: map[string]bool{}}
}

// FsName is the source the run's layers are mounted with.
func FsName(runID string) string { return "chaos-" + cgroup.SafeName(runID, 200) }

// Mount journals a layer over dir, then mounts it: served by a helper
// process when Helper is set, else by this one. With remove, dir is the
// harness's own, removed with what it holds once unmounted.
func (j *Journal) Mount(dir string, opts Options, remove bool) (Served, error) {
	opts.FsName = FsName(j.runID)
	if err := j.write(MountEntry{Event: "mount", Dir: dir, FsName: opts.FsName, Remove: remove}); err != nil {
		return nil, fmt.Errorf("the journal chaos cleanup reads: %w", err)
	}
	var l Served
	var err error
	if Helper != "" {
		l, err = MountRemote(Helper, dir, opts)
	} else {
		l, err = Mount(dir, opts)
	}
	if err != nil {
		_ = j.write(MountEntry{Event: "unmounted", Dir: dir})
		return nil, err
	}
	return l, nil
}

// Unmount unmounts l and journals it; the journal goes with the last
// layer.
func (j *Journal) Unmount(l Served) error {
	if err := l.Unmount(); err != nil {
		return err
	}
	j.mu.Lock()
	remove := j.open[l.Dir()]
	j.mu.Unlock()
	if remove {
		if err := os.RemoveAll(l.Dir()); err != nil {
			return fmt.Errorf("removing the layer's directory: %w", err)
		}
	}
	return j.write(MountEntry{Event: "unmounted", Dir: l.Dir()})
}

func (j *Journal) write(e MountEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		j.f = f
	}
	e.TS, e.RunID = time.Now().UTC(), j.runID
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	if e.Event == "mount" {
		j.open[e.Dir] = e.Remove
		return nil
	}
	delete(j.open, e.Dir)
	if len(j.open) == 0 {
		j.f.Close()
		j.f = nil
		return os.Remove(j.path)
	}
	return nil
}

// ReadJournal returns the directories a journal has mounted and not
// unmounted, with their entries. It is read as package journalfile reads
// every journal: a line that is not a journal line refuses it (cleanup
// then touches nothing it names), but for a last line cut short by a kill.
func ReadJournal(path string) (map[string]MountEntry, error) {
	left := map[string]MountEntry{}
	err := journalfile.Read(path, journalfile.DefaultLimits, func(_ int, e MountEntry) error {
		switch e.Event {
		case "mount":
			left[e.Dir] = e
		case "unmounted":
			delete(left, e.Dir)
		default:
			return fmt.Errorf("field \"event\": %q is neither mount nor unmounted; %s", e.Event, journalfile.Refused)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return left, nil
}

// Cleanup unmounts the layers of runID, or, without one, of every run
// whose harness is gone (a live run's are never touched), and removes
// their journals. found is told each mount removed (or, dryRun, that
// would be).
func Cleanup(stateDir, runID string, dryRun bool, found func(string)) error {
	if stateDir == "" {
		stateDir = StateDir()
	}
	run := ""
	if runID != "" {
		run = cgroup.SafeName(runID, 200)
	}
	paths, err := journalfile.Gone(stateDir, run)
	if err != nil {
		return err
	}
	var errs []error
	for _, path := range paths {
		left, err := ReadJournal(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		failed := false
		for dir, e := range left {
			fsName := e.FsName
			// A layer may be stacked on one of ours, or ours on
			// another's: each mount of the run's at dir goes.
			for mountedLayer(dir, fsName) {
				if dryRun {
					found(fmt.Sprintf("would unmount the file-system layer over %s (%s)", dir, fsName))
					break
				}
				if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
					errs = append(errs, fmt.Errorf("unmounting the file-system layer over %s: %w", dir, err))
					failed = true
					break
				}
				found(fmt.Sprintf("unmounted the file-system layer over %s (%s)", dir, fsName))
			}
			if e.Remove && !dryRun && !failed && !mountedLayer(dir, fsName) {
				if err := os.RemoveAll(dir); err != nil {
					errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
					failed = true
				} else {
					found("removed " + dir + ", the harness's directory under the layer")
				}
			}
		}
		if !dryRun && !failed {
			os.Remove(path)
		}
	}
	return errors.Join(errs...)
}

// mountedLayer reports whether the top mount at dir is a layer named
// fsName, as this process's mountinfo says.
func mountedLayer(dir, fsName string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	top := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(pf) < 5 || len(qf) < 2 || unescape(pf[4]) != dir {
			continue
		}
		// Later lines are mounted on top of earlier ones.
		top = qf[0] == "fuse."+TypeName && unescape(qf[1]) == fsName
	}
	return top
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Detach unmounts lazily (a program may still hold it) every layer named
// fsName stacked at dir, as this process's mountinfo shows them, and
// says how many it unmounted: what a node agent does with a layer of a
// run that is over, whose server may be gone.
func Detach(dir, fsName string) (int, error) {
	n := 0
	for mountedLayer(dir, fsName) {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return n, fmt.Errorf("unmounting the file-system layer over %s: %w", dir, err)
		}
		n++
	}
	return n, nil
}
