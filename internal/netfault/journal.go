package netfault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/chaos-harness/chaos/internal/journalfile"
)

// The journal: one JSON line per attempt to apply a rule, written before
// it is made ("apply"), and one once that attempt is undone or failed
// ("removed"). A rule is keyed by its number and its mechanism: a latency
// that netem could not make is retried as a delay queue under the same
// number, so its netem attempt's "removed" must not end the queue's
// "apply". The last line of a key wins. The journal is written to the
// run's system/network-rules.jsonl, and to a file under the state
// directory whose name says which harness wrote it, which chaos cleanup
// reads once that harness is gone.
//
// The state directory's copy is read back as untrusted input: every name
// in it is held to the exact form of what the run made (chaos_<tag>_<n>,
// CHAOS_<tag>_<n>, with <tag> the run's and <n> the line's rule), since nft
// joins its arguments into one command and iptables-restore reads a
// script; a journal with a line that is not so is refused whole, and
// nothing it names is touched.

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
	// MadeTables are the nftables tables of iptables (ip mangle, ip
	// filter, ip6 filter) a chain rule made, so cleanup removes them too
	// once they hold nothing else.
	MadeTables []string `json:"made_tables,omitempty"`
	Note       string   `json:"note,omitempty"`
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
	return journalfile.Append(j.files, e)
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
		Target: r.Target.Name, What: r.Target.What, Pid: r.Target.Pid, NSDev: r.ns.Dev, NSIno: r.ns.Ino, Mechanism: r.Mechanism, Table: r.Table, Devices: r.Devs, MadeTables: r.made})
}

// journalRemoved notes that r is gone (or was never made).
func (m *Manager) journalRemoved(r *Rule, note string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.journal != nil {
		_ = m.journal.write(Entry{Event: "removed", Rule: r.ID, TS: time.Now().UTC(), Mechanism: r.Mechanism, Table: r.Table, Note: note})
	}
}

// ReadJournal reads a journal of run runID and returns the rules applied
// and not removed, in the order they were applied. With runID empty, the
// run is the one the file's name says (<run id>.<pid>.<start>.jsonl), as
// its first line names it. Every line is checked (see validEntry); one
// that is not as the run would have written it makes the whole journal
// refused, with an error naming the file, the line and the field. The file
// is read as package journal reads every journal: only a last line cut
// short (a kill in the middle of a write) is passed over.
func ReadJournal(path, runID string) ([]Entry, error) {
	f := &journalFold{path: path, runID: runID, states: map[ruleKey]*ruleState{}, lastMech: map[int]string{}}
	if err := journalfile.Read(path, journalfile.DefaultLimits, f.add); err != nil {
		return nil, err
	}
	return f.left(), nil
}

// parseJournal is ReadJournal of a journal's bytes.
func parseJournal(path, runID string, data []byte) ([]Entry, error) {
	f := &journalFold{path: path, runID: runID, states: map[ruleKey]*ruleState{}, lastMech: map[int]string{}}
	if err := journalfile.Parse(path, data, journalfile.DefaultLimits, f.add); err != nil {
		return nil, err
	}
	return f.left(), nil
}

// ruleKey is one attempt at a rule.
type ruleKey struct {
	rule int
	mech string
}

type ruleState struct {
	e       Entry
	applied bool
	order   int
}

// journalFold folds a journal's lines into the rules left applied.
type journalFold struct {
	path, runID string
	seen        bool
	states      map[ruleKey]*ruleState
	// lastMech is the mechanism of each rule's latest apply: a "removed"
	// line of a journal written before lines said their mechanism ends it.
	lastMech map[int]string
}

func (f *journalFold) add(i int, e Entry) error {
	if !f.seen && f.runID == "" {
		// The run is the one the file is named after.
		named, _, _ := strings.Cut(filepath.Base(f.path), ".")
		if e.RunID == "" {
			return fmt.Errorf("field \"run_id\": the first line does not name the run; %s", journalfile.Refused)
		}
		if safeRunID(e.RunID) != named {
			return fmt.Errorf("field \"run_id\": %q is not the run the file is named after (%s); %s", e.RunID, named, journalfile.Refused)
		}
		f.runID = e.RunID
	}
	f.seen = true
	if field, err := validEntry(e, f.runID); err != nil {
		return fmt.Errorf("field %q: %v; %s", field, err, journalfile.Refused)
	}
	mech := e.Mechanism
	if e.Event == "removed" && mech == "" {
		mech = f.lastMech[e.Rule]
	}
	k := ruleKey{e.Rule, mech}
	switch e.Event {
	case "apply":
		f.lastMech[e.Rule] = mech
		f.states[k] = &ruleState{e: e, applied: true, order: i}
	case "removed":
		if s, ok := f.states[k]; ok {
			s.applied = false
		}
	}
	return nil
}

// left are the rules applied and not removed, in the order applied.
func (f *journalFold) left() []Entry {
	var left []*ruleState
	for _, s := range f.states {
		if s.applied {
			left = append(left, s)
		}
	}
	slices.SortFunc(left, func(a, b *ruleState) int { return a.order - b.order })
	out := make([]Entry, 0, len(left))
	for _, s := range left {
		out = append(out, s.e)
	}
	return out
}

// validEntry checks one line against what run runID writes, and says
// which field is wrong.
func validEntry(e Entry, runID string) (string, error) {
	switch e.Event {
	case "apply", "removed":
	default:
		return "event", fmt.Errorf("%q is neither apply nor removed", e.Event)
	}
	// What cleanup prints must not steer the terminal.
	for _, f := range []struct{ name, v string }{{"run_id", e.RunID}, {"operation", e.Operation}, {"target", e.Target}, {"what", e.What}, {"note", e.Note}} {
		if i := strings.IndexFunc(f.v, unicode.IsControl); i >= 0 {
			return f.name, fmt.Errorf("a control character (%q)", f.v[i:i+1])
		}
	}
	if e.Rule < 1 || e.Rule > 1<<30 {
		return "rule", fmt.Errorf("%d is not a rule number", e.Rule)
	}
	switch e.Mechanism {
	case MechNft, MechTbf, MechNetem, MechQueue, MechDrop:
	case "":
		if e.Event == "apply" {
			return "mechanism", errors.New("missing")
		}
		if e.Table != "" || len(e.Devices) > 0 {
			return "mechanism", errors.New("missing")
		}
		return "", nil
	default:
		return "mechanism", fmt.Errorf("%q is not one the harness uses", e.Mechanism)
	}
	if e.Event == "apply" {
		// The fault decides how a chain is removed; what a mechanism can
		// carry includes what earlier harnesses made with it (loss and
		// blackhole were nftables tables).
		faults := map[string][]string{MechNft: {Loss, Reset, Blackhole, Partition}, MechDrop: {Loss, Blackhole}, MechTbf: {Bandwidth}, MechNetem: {Latency}, MechQueue: {Latency}}
		if !slices.Contains(faults[e.Mechanism], e.Fault) {
			return "fault", fmt.Errorf("%q is not a fault a %s rule is made for", e.Fault, e.Mechanism)
		}
		if e.RunID != runID {
			return "run_id", fmt.Errorf("%q is not this journal's run (%s)", e.RunID, runID)
		}
		if e.NSIno == 0 {
			return "ns_ino", errors.New("missing: the rule's namespace cannot be found again")
		}
		if e.Pid < 0 {
			return "pid", fmt.Errorf("%d", e.Pid)
		}
	}
	want := ""
	switch e.Mechanism {
	case MechNft:
		want = fmt.Sprintf("chaos_%s_%d", Tag(runID), e.Rule)
	case MechQueue, MechDrop:
		want = fmt.Sprintf("CHAOS_%s_%d", Tag(runID), e.Rule)
	}
	if e.Table != want && (e.Event == "apply" || e.Table != "") {
		if want == "" {
			return "table", fmt.Errorf("%q where a %s rule has no table", e.Table, e.Mechanism)
		}
		return "table", fmt.Errorf("%q is not the name run %s gave rule %d (%s): only what the run made is touched", e.Table, runID, e.Rule, want)
	}
	if e.Mechanism == MechTbf || e.Mechanism == MechNetem {
		if e.Event == "apply" && len(e.Devices) == 0 {
			return "devices", errors.New("missing")
		}
	}
	for _, d := range e.Devices {
		if !validDevice(d) {
			return "devices", fmt.Errorf("%q is not a network device's name", d)
		}
	}
	_, fams := chainTable(e.Mechanism)
	for _, t := range e.MadeTables {
		if !slices.ContainsFunc(fams, func(f iptFamily) bool { return f.nftTable == t }) {
			return "made_tables", fmt.Errorf("%q is not a table a %s rule makes", t, e.Mechanism)
		}
	}
	return "", nil
}

// validDevice says whether s can be a network device's name as the kernel
// takes it (dev_valid_name), printable and with no shell or nft meaning.
func validDevice(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '@'
		if !ok {
			return false
		}
	}
	return true
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
		stateDir = StateDir()
	}
	run := ""
	if runID != "" {
		run = safeRunID(runID)
	}
	// A live run removes its own rules.
	paths, err := journalfile.Gone(stateDir, run)
	if err != nil {
		return err
	}
	var errs []error
	for _, path := range paths {
		left, err := ReadJournal(path, runID)
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
				found("would remove " + desc + helpersNote(e, true))
				ns.Close()
				continue
			}
			err := remove(ctx, ns, e.Fault, e.Mechanism, e.Table, e.Devices, e.MadeTables)
			ns.Close()
			if err != nil {
				failed = true
				errs = append(errs, fmt.Errorf("%s: %w", desc, err))
				continue
			}
			found("removed " + desc + helpersNote(e, false))
		}
		if !dryRun && !failed {
			os.Remove(path)
		}
	}
	return errors.Join(errs...)
}

// helpersNote stops (or, in a dry run, names) the delay queue helpers of
// a latency rule that are still running and says so.
func helpersNote(e Entry, dryRun bool) string {
	if e.Mechanism != MechQueue || e.Table == "" {
		return ""
	}
	pids := stopHelpers(e.Table, dryRun)
	if len(pids) == 0 {
		return ""
	}
	list := make([]string, len(pids))
	for i, pid := range pids {
		list[i] = strconv.Itoa(pid)
	}
	if dryRun {
		return ", and would stop its delay queue helper (pid " + strings.Join(list, ", ") + ")"
	}
	return ", and stopped its delay queue helper (pid " + strings.Join(list, ", ") + ")"
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
