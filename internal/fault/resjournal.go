package fault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/clockpatch"
	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/proc"
)

// The resource journal: every change a resource fault makes is written
// here before it is made, with what undoes it (the value a cgroup file
// held, the group made and where its processes came from, the stress
// helper's pid and start time, the filler file), and "reverted" once the
// fault is reverted. It is kept in the run's
// system/resource-faults.jsonl, and under ResourceStateDir in a
// file whose name says which harness wrote it, which chaos cleanup reads
// once that harness is gone (CleanupResources).

// ResourceJournalFile is the journal's name in the run's system directory.
const ResourceJournalFile = "resource-faults.jsonl"

// ResourceStateDir holds one journal per run with resource faults applied
// and not yet reverted, named <run id>.<harness pid>.<harness start
// time>.jsonl: /run/chaos/resource, or resource under $CHAOS_STATE_DIR.
func ResourceStateDir() string { return journalfile.Dir("resource") }

// ResourceEntry is one journal line.
type ResourceEntry struct {
	// Event is "apply" (a change is about to be made; Undo, Own, Pid or
	// File say what undoes it) or "reverted" (application App is undone).
	Event     string    `json:"event"`
	App       int       `json:"app"`
	TS        time.Time `json:"ts"`
	RunID     string    `json:"run_id,omitempty"`
	Operation string    `json:"operation,omitempty"`
	Fault     string    `json:"fault,omitempty"`
	Target    string    `json:"target,omitempty"`
	// Undo is a cgroup write that restores a limit.
	Undo *cgroup.Write `json:"undo,omitempty"`
	// Own is a group the harness made: its processes go back to Parent and
	// it is removed.
	Own *cgroup.OwnDir `json:"own,omitempty"`
	// Pid and Start are a stress helper's.
	Pid   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
	// File is a filler file to remove.
	File string `json:"file,omitempty"`
	// Clock is a process whose vDSO a clock fault patches (clock.go).
	Clock *clockpatch.Patch `json:"clock,omitempty"`
}

// ResourceJournal is one run's journal of resource faults.
type ResourceJournal struct {
	runID, systemDir, stateDir string

	// mu guards the fields below it.
	mu    sync.Mutex
	files []*os.File
	state string
	seq   int
	open  map[int]bool // applications not yet reverted
}

// NewResourceJournal returns the journal of run runID; it writes nothing
// until the first change. stateDir "" is ResourceStateDir.
func NewResourceJournal(runID, systemDir, stateDir string) *ResourceJournal {
	if stateDir == "" {
		stateDir = ResourceStateDir()
	}
	return &ResourceJournal{runID: runID, systemDir: systemDir, stateDir: stateDir, open: map[int]bool{}}
}

// RunID is the run the journal belongs to.
func (j *ResourceJournal) RunID() string { return j.runID }

// Tag is the run's short name in what the faults create (group and file
// names), so a name never repeats across runs.
func (j *ResourceJournal) Tag() string { return shortTag(j.runID) }

func shortTag(runID string) string {
	s := cgroup.SafeName(runID, 64)
	if len(s) > 20 {
		s = s[len(s)-20:]
	}
	return s
}

// app is one application of a resource fault to one handle.
type app struct {
	j                   *ResourceJournal
	id                  int
	operation, fault, h string
}

func (j *ResourceJournal) begin(op Op, target string) *app {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	j.open[j.seq] = true
	return &app{j: j, id: j.seq, operation: op.Operation, fault: op.Fault, h: target}
}

// name is a unique name for what this application creates.
func (a *app) name() string {
	return fmt.Sprintf("chaos-%s-%d", a.j.Tag(), a.id)
}

func (a *app) write(e ResourceEntry) error {
	e.Event, e.App, e.TS, e.RunID, e.Operation, e.Fault, e.Target = "apply", a.id, time.Now().UTC(), a.j.runID, a.operation, a.fault, a.h
	return a.j.write(e)
}

func (a *app) undo(w cgroup.Write) error       { return a.write(ResourceEntry{Undo: &w}) }
func (a *app) own(d cgroup.OwnDir) error       { return a.write(ResourceEntry{Own: &d}) }
func (a *app) file(path string) error          { return a.write(ResourceEntry{File: path}) }
func (a *app) helper(pid int, st uint64) error { return a.write(ResourceEntry{Pid: pid, Start: st}) }

// reverted notes the application undone; when none is left, the copy
// chaos cleanup reads is removed (the run's own copy stays).
func (a *app) reverted() {
	j := a.j
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.open, a.id)
	if j.files == nil {
		return
	}
	_ = j.writeLocked(ResourceEntry{Event: "reverted", App: a.id, TS: time.Now().UTC()})
	if len(j.open) == 0 {
		for _, f := range j.files {
			f.Close()
		}
		j.files = nil
		os.Remove(j.state)
	}
}

func (j *ResourceJournal) write(e ResourceEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.writeLocked(e)
}

func (j *ResourceJournal) writeLocked(e ResourceEntry) error {
	if j.files == nil {
		if err := j.openLocked(); err != nil {
			return fmt.Errorf("the journal chaos cleanup reads: %w", err)
		}
	}
	return journalfile.Append(j.files, e)
}

func (j *ResourceJournal) openLocked() error {
	var files []*os.File
	if j.systemDir != "" {
		if err := os.MkdirAll(j.systemDir, 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(j.systemDir, ResourceJournalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	pid := os.Getpid()
	st, err := proc.StartTime(pid)
	if err == nil {
		err = os.MkdirAll(j.stateDir, 0o700)
	}
	var f *os.File
	p := filepath.Join(j.stateDir, fmt.Sprintf("%s.%d.%d.jsonl", cgroup.SafeName(j.runID, 200), pid, st))
	if err == nil {
		f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return err
	}
	j.files, j.state = append(files, f), p
	return nil
}

// ReadResourceJournal returns the entries of a journal whose application
// was not reverted, in the order they were written. It is read as package
// journalfile reads every journal: a line that is not a journal line
// refuses it (cleanup then touches nothing it names), but for a last line
// cut short by a kill.
func ReadResourceJournal(path string) ([]ResourceEntry, error) {
	var all []ResourceEntry
	reverted := map[int]bool{}
	err := journalfile.Read(path, journalfile.DefaultLimits, func(_ int, e ResourceEntry) error {
		switch e.Event {
		case "apply":
			all = append(all, e)
		case "reverted":
			reverted[e.App] = true
		default:
			return fmt.Errorf("field \"event\": %q is neither apply nor reverted; %s", e.Event, journalfile.Refused)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var left []ResourceEntry
	for _, e := range all {
		if !reverted[e.App] {
			left = append(left, e)
		}
	}
	return left, nil
}

// CleanupResources undoes what resource faults of runs whose harness is
// gone left applied: those of runID, or, without one, of every run whose
// harness no longer runs (a live run's are never touched). Each entry is
// undone, last first: helpers killed (when the pid is still the same
// process), limits written back, groups released, filler files removed.
// found is told each thing undone (or, dryRun, that would be).
func CleanupResources(ctx context.Context, stateDir, runID string, dryRun bool, found func(string)) error {
	if stateDir == "" {
		stateDir = ResourceStateDir()
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
		left, err := ReadResourceJournal(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		failed := false
		for _, e := range slices.Backward(left) {
			desc, err := undoEntry(ctx, e, dryRun)
			if desc == "" {
				continue
			}
			if err != nil {
				failed = true
				errs = append(errs, fmt.Errorf("%s: %w", desc, err))
				continue
			}
			verb := "undid "
			if dryRun {
				verb = "would undo "
			}
			found(verb + desc)
		}
		if !dryRun && !failed {
			os.Remove(path)
		}
	}
	return errors.Join(errs...)
}

// undoEntry undoes one entry; it returns "" for one with nothing left to
// undo.
func undoEntry(ctx context.Context, e ResourceEntry, dryRun bool) (string, error) {
	of := fmt.Sprintf("of %s on %s (operation %s, run %s)", e.Fault, e.Target, e.Operation, e.RunID)
	switch {
	case e.Pid > 0:
		if st, err := proc.StartTime(e.Pid); err != nil || st != e.Start {
			return "", nil // gone, or the pid is another process's now
		}
		desc := fmt.Sprintf("stress helper pid %d %s", e.Pid, of)
		if dryRun {
			return desc, nil
		}
		if err := syscall.Kill(e.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return desc, err
		}
		return desc, nil
	case e.Undo != nil:
		if _, err := os.Stat(e.Undo.Path); err != nil {
			return "", nil // the group is gone, and its limit with it
		}
		desc := fmt.Sprintf("limit %s (writing %q back) %s", e.Undo.Path, e.Undo.Value, of)
		if dryRun {
			return desc, nil
		}
		return desc, cgroup.Undo([]cgroup.Write{*e.Undo})
	case e.Own != nil:
		if _, err := os.Stat(e.Own.Dir); err != nil {
			return "", nil
		}
		desc := fmt.Sprintf("cgroup %s (its processes back to %s) %s", e.Own.Dir, e.Own.Parent, of)
		if dryRun {
			return desc, nil
		}
		return desc, cgroup.ReleaseDir(ctx, *e.Own)
	case e.Clock != nil:
		if patched, err := clockpatch.Patched(e.Clock.Pid); err != nil || !patched {
			return "", nil // gone, or its clock is true already
		}
		if st, err := proc.StartTime(e.Clock.Pid); err != nil || st != e.Clock.Start {
			return "", nil // the pid is another process's now
		}
		desc := fmt.Sprintf("fake clock of pid %d %s", e.Clock.Pid, of)
		if dryRun {
			return desc, nil
		}
		_, err := clockpatch.Restore(*e.Clock)
		return desc, err
	case e.File != "":
		if _, err := os.Lstat(e.File); err != nil {
			return "", nil
		}
		desc := fmt.Sprintf("filler file %s %s", e.File, of)
		if dryRun {
			return desc, nil
		}
		return desc, os.Remove(e.File)
	}
	return "", nil
}
