package netfault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The journal: one JSON line per rule before it is applied ("apply") and
// one once it is removed ("removed"). It is written to the run's
// system/network-rules.jsonl, and to a file under the state directory
// whose name says which harness wrote it, which chaos cleanup reads once
// that harness is gone.

// JournalFile is the journal's name in the run's system directory.
const JournalFile = "network-rules.jsonl"

// Entry is one journal line.
type Entry struct {
	Event     string    `json:"event"`
	Rule      int       `json:"rule"`
	TS        time.Time `json:"ts"`
	RunID     string    `json:"run_id,omitempty"`
	Operation string    `json:"operation,omitempty"`
	Fault     string    `json:"fault,omitempty"`
	Target    string    `json:"target,omitempty"`
	What      string    `json:"what,omitempty"`
	// Pid is a process in the namespace when the rule was applied; NSDev
	// and NSIno identify the namespace.
	Pid       int      `json:"pid,omitempty"`
	NSDev     uint64   `json:"ns_dev,omitempty"`
	NSIno     uint64   `json:"ns_ino,omitempty"`
	Mechanism string   `json:"mechanism,omitempty"`
	Table     string   `json:"table,omitempty"`
	Devices   []string `json:"devices,omitempty"`
	Note      string   `json:"note,omitempty"`
}

type journal struct {
	files []*os.File
	state string
}

func (m *Manager) openJournal() (*journal, error) {
	if m.journal != nil {
		return m.journal, nil
	}
	j := &journal{}
	if m.cfg.SystemDir != "" {
		if err := os.MkdirAll(m.cfg.SystemDir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(m.cfg.SystemDir, JournalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		j.files = append(j.files, f)
	}
	p, err := m.statePath()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o700)
	}
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err != nil {
		for _, f := range j.files {
			f.Close()
		}
		return nil, fmt.Errorf("the journal chaos cleanup reads: %w", err)
	}
	j.files, j.state = append(j.files, f), p
	m.journal = j
	return j, nil
}

func (j *journal) write(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	var errs []error
	for _, f := range j.files {
		if _, err := f.Write(b); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, f.Sync())
	}
	return errors.Join(errs...)
}

// close closes the files and, when nothing is left applied, removes the
// state directory's copy.
func (j *journal) close(allRemoved bool) {
	for _, f := range j.files {
		f.Close()
	}
	if allRemoved && j.state != "" {
		os.Remove(j.state)
	}
}

// journalApply writes r to the journal before it is applied.
func (m *Manager) journalApply(r *Rule) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.openJournal()
	if err != nil {
		return err
	}
	return j.write(Entry{Event: "apply", Rule: r.ID, TS: time.Now().UTC(), RunID: m.cfg.RunID, Operation: r.Op.Operation, Fault: r.Spec.Fault,
		Target: r.Target.Name, What: r.Target.What, Pid: r.Target.Pid, NSDev: r.ns.Dev, NSIno: r.ns.Ino, Mechanism: r.Mechanism, Table: r.Table, Devices: r.Devs})
}

// journalRemoved notes that r is gone (or was never made).
func (m *Manager) journalRemoved(r *Rule, note string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.journal != nil {
		_ = m.journal.write(Entry{Event: "removed", Rule: r.ID, TS: time.Now().UTC(), Note: note})
	}
}

// ReadJournal reads a journal and returns the rules applied and not
// removed, in order.
func ReadJournal(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var applied []Entry
	removed := map[int]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e Entry
		if json.Unmarshal([]byte(line), &e) != nil {
			continue // a line cut short by a kill
		}
		switch e.Event {
		case "apply":
			applied = append(applied, e)
		case "removed":
			removed[e.Rule] = true
		}
	}
	var left []Entry
	for _, e := range applied {
		if !removed[e.Rule] {
			left = append(left, e)
		}
	}
	return left, nil
}

// procStart is a process's start time (clock ticks after boot, field 22 of
// /proc/PID/stat).
func procStart(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("short stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// stateFile is one journal under the state directory.
type stateFile struct {
	path, runID string
	pid         int
	start       uint64
}

func (s stateFile) harnessAlive() bool {
	st, err := procStart(s.pid)
	return err == nil && st == s.start
}

func listState(dir string) ([]stateFile, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []stateFile
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok {
			continue
		}
		parts := strings.Split(name, ".")
		if len(parts) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(parts[1])
		start, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, stateFile{path: filepath.Join(dir, e.Name()), runID: parts[0], pid: pid, start: start})
	}
	return out, nil
}

// Cleanup removes the rules that runs whose harness is gone left applied:
// those of runID, or, without one, of every run whose harness no longer
// runs (a live run's are never touched). Each rule's namespace is found
// again by its identity: through the process that was in it, else through
// any process now in it; a namespace no process is in is gone, and its
// rules with it. found is told each thing removed (or, dryRun, that would
// be).
func Cleanup(ctx context.Context, stateDir, runID string, dryRun bool, found func(string)) error {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	files, err := listState(stateDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, sf := range files {
		switch {
		case runID != "" && sf.runID != safeRunID(runID):
			continue
		case sf.harnessAlive():
			continue // a live run removes its own rules
		}
		left, err := ReadJournal(sf.path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		failed := false
		for _, e := range left {
			ns := findNS(e)
			if ns == nil {
				continue // the namespace is gone, and its rules with it
			}
			desc := fmt.Sprintf("%s rule %s (%s) of run %s on %s (%s, %s)", e.Fault, e.Table, e.Mechanism, e.RunID, e.Target, e.What, Key{e.NSDev, e.NSIno})
			if e.Table == "" {
				desc = fmt.Sprintf("%s rule (%s on %s) of run %s on %s (%s, %s)", e.Fault, e.Mechanism, strings.Join(e.Devices, ","), e.RunID, e.Target, e.What, Key{e.NSDev, e.NSIno})
			}
			if dryRun {
				found("would remove " + desc)
				ns.Close()
				continue
			}
			err := remove(ctx, ns, e.Mechanism, e.Table, e.Devices, false)
			ns.Close()
			if err != nil {
				failed = true
				errs = append(errs, fmt.Errorf("%s: %w", desc, err))
				continue
			}
			found("removed " + desc)
		}
		if !dryRun && !failed {
			os.Remove(sf.path)
		}
	}
	return errors.Join(errs...)
}

// findNS opens the namespace of a journal entry, if a process is still in
// it: the one recorded, else any.
func findNS(e Entry) *NS {
	match := func(pid int) *NS {
		ns, err := Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			return nil
		}
		if ns.Dev == e.NSDev && ns.Ino == e.NSIno {
			return ns
		}
		ns.Close()
		return nil
	}
	if e.Pid > 0 {
		if ns := match(e.Pid); ns != nil {
			return ns
		}
	}
	ents, _ := os.ReadDir("/proc")
	pids := make([]int, 0, len(ents))
	for _, d := range ents {
		if pid, err := strconv.Atoi(d.Name()); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	for _, pid := range pids {
		st, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Ino != e.NSIno {
			continue
		}
		if ns := match(pid); ns != nil {
			return ns
		}
	}
	return nil
}
