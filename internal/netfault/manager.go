package netfault

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Config is what a run's Manager needs.
type Config struct {
	RunID string
	// SystemDir is the run's system directory: the journal is kept there
	// too, and network.json is written there at the end.
	SystemDir string
	// StateDir holds the journals chaos cleanup reads (StateDir
	// when empty).
	StateDir string
	// Record writes a timeline event.
	Record func(name string, fields ...rundir.Field)
	// NoNetem makes latency use the delay queue even where the kernel has
	// netem (CHAOS_NETEM=off).
	NoNetem bool
}

// StateDir holds one journal per run that applied network rules, named
// <run id>.<harness pid>.<harness start time>.jsonl, so chaos cleanup can
// tell the runs whose harness is gone: /run/chaos/net, or net under
// $CHAOS_STATE_DIR.
func StateDir() string { return journalfile.Dir("net") }

// Target is what a fault acts on: a handle's name and its network.
type Target struct {
	Name string
	// NS opens the namespace; Addrs must be in it.
	NS    string
	Addrs []netip.Addr
	What  string
	Pid   int
}

// Op says which operation a rule belongs to.
type Op struct {
	Operation string
	Run       int
}

// Rule is one network fault applied to one namespace.
type Rule struct {
	ID        int
	Op        Op
	Spec      Spec
	Target    Target
	Mechanism string
	// Table is the nftables table, or the iptables chain of a queue.
	Table string
	Devs  []string
	Queue uint16
	// Kernel is what the kernel reported once the rule was applied.
	Kernel  string
	Applied time.Time
	Removed time.Time

	ns *NS
	q  *delayQueue
	// made are the nftables tables (ip mangle, ip filter, ip6 filter) a
	// chain rule made, removed with it when they hold nothing else.
	made    []string
	aborted int // connections a reset aborted when it was applied
	removed bool
}

// Manager applies and removes a run's network rules and keeps their
// journal.
type Manager struct {
	cfg     Config
	tag     string
	journal *journal

	mu    sync.Mutex
	seq   int
	rules []*Rule
	// nss are the namespaces the run put rules in, held open until Close
	// so the capture sees them.
	nss   map[Key]*nsInfo
	netem int // 0 unknown, 1 yes, -1 no
}

type nsInfo struct {
	ns     *NS
	target Target
}

// NewManager returns the network rule keeper of one run. It writes nothing
// until the first rule.
func NewManager(cfg Config) *Manager {
	if cfg.StateDir == "" {
		cfg.StateDir = StateDir()
	}
	if cfg.Record == nil {
		cfg.Record = func(string, ...rundir.Field) {}
	}
	return &Manager{cfg: cfg, tag: Tag(cfg.RunID), nss: map[Key]*nsInfo{}}
}

// Tag is a run's short name in the names of its rules: eight hex digits of
// the run id's hash. nftables tables are chaos_<tag>_<n>, iptables chains
// CHAOS_<tag>_<n>.
func Tag(runID string) string {
	h := sha256.Sum256([]byte(runID))
	return hex.EncodeToString(h[:4])
}

// Used reports whether any rule was applied.
func (m *Manager) Used() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rules) > 0
}

// Apply puts the fault s into t's namespace: it checks that the namespace
// holds t's addresses, writes the rule to the journal, applies it, reads
// back what the kernel made of it and records network.applied.
func (m *Manager) Apply(ctx context.Context, t Target, s Spec, op Op) (*Rule, error) {
	r, useNetem, err := m.newRule(ctx, t, s, op)
	if err != nil {
		return nil, err
	}
	if !useNetem && r.Mechanism == MechNetem {
		r.Mechanism = MechQueue
	}
	err = m.apply(ctx, r)
	if errors.Is(err, errNoNetem) {
		m.mu.Lock()
		m.netem = -1
		m.mu.Unlock()
		r.Mechanism = MechQueue
		err = m.apply(ctx, r)
	} else if err == nil && r.Mechanism == MechNetem {
		m.mu.Lock()
		m.netem = 1
		m.mu.Unlock()
	}
	if err != nil {
		r.ns.Close()
		return nil, fmt.Errorf("%s on %s (%s): %w", s.Fault, t.Name, t.What, err)
	}
	r.Applied = time.Now()
	m.applied(ctx, r)
	return r, nil
}

// newRule opens t's namespace, checks it is t's and not the harness's, and
// numbers the rule and chooses its mechanism (netem, where latency may
// use it).
func (m *Manager) newRule(ctx context.Context, t Target, s Spec, op Op) (*Rule, bool, error) {
	ns, err := Open(t.NS)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", t.Name, err)
	}
	if host, err := Host(); err == nil {
		same := host.Key() == ns.Key()
		host.Close()
		if same {
			ns.Close()
			return nil, false, fmt.Errorf("%s (%s) is in the harness's own network namespace, which the harness never changes", t.Name, t.What)
		}
	}
	if err := checkAddrs(ctx, ns, t); err != nil {
		ns.Close()
		return nil, false, err
	}
	devs, err := ns.Links(ctx)
	if err != nil {
		ns.Close()
		return nil, false, fmt.Errorf("%s: %w", t.Name, err)
	}
	m.mu.Lock()
	m.seq++
	r := &Rule{ID: m.seq, Op: op, Spec: s, Target: t, Devs: devs, ns: ns}
	useNetem := m.netem >= 0 && !m.cfg.NoNetem
	m.mu.Unlock()
	switch s.Fault {
	case Reset, Partition:
		r.Mechanism, r.Table = MechNft, fmt.Sprintf("chaos_%s_%d", m.tag, r.ID)
	case Loss, Blackhole:
		r.Mechanism, r.Table = MechDrop, fmt.Sprintf("CHAOS_%s_%d", m.tag, r.ID)
	case Bandwidth:
		r.Mechanism = MechTbf
	case Latency:
		r.Mechanism = MechNetem
	default:
		ns.Close()
		return nil, false, fmt.Errorf("%s is not a network fault", s.Fault)
	}
	if len(devs) == 0 && (r.Mechanism == MechTbf || (r.Mechanism == MechNetem && useNetem)) {
		ns.Close()
		return nil, false, fmt.Errorf("%s: its network namespace has no device but loopback", t.Name)
	}
	return r, useNetem, nil
}

// applied reads back what the kernel made of r, keeps r and records
// network.applied, with the moment it took effect (at).
func (m *Manager) applied(ctx context.Context, r *Rule) {
	t, s, op, ns := r.Target, r.Spec, r.Op, r.ns
	var err error
	r.Kernel, err = report(ctx, ns, r.Mechanism, r.Table, r.Devs)
	if err != nil {
		r.Kernel = "(could not be read: " + err.Error() + ")"
	}
	m.mu.Lock()
	m.rules = append(m.rules, r)
	if _, ok := m.nss[ns.Key()]; !ok {
		if held, err := Open(r.ns.Path()); err == nil {
			m.nss[ns.Key()] = &nsInfo{ns: held, target: t}
		}
	}
	m.mu.Unlock()
	fields := []rundir.Field{rundir.F("operation", op.Operation), rundir.F("run", op.Run), rundir.F("uses", s.Fault), rundir.F("target", t.Name),
		rundir.F("rule", r.ID), rundir.F("netns", t.What+" "+ns.Key().String()), rundir.F("mechanism", r.Mechanism)}
	if r.Table != "" {
		fields = append(fields, rundir.F("name", r.Table))
	}
	if len(r.Devs) > 0 && r.Mechanism != MechNft {
		fields = append(fields, rundir.F("devices", r.Devs))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Params())) {
		fields = append(fields, rundir.F(k, s.Params()[k]))
	}
	if s.Fault == Reset {
		fields = append(fields, rundir.F("connections_aborted", r.aborted))
	}
	if r.q != nil {
		fields = append(fields, rundir.F("delay_queue", r.q.sched))
	}
	fields = append(fields, rundir.F("at", r.Applied.UTC().Format(time.RFC3339Nano)), rundir.F("kernel", strings.TrimSpace(r.Kernel)))
	m.cfg.Record("network.applied", fields...)
}

// Pending is a change to one namespace made ready to happen at a moment
// of the caller's choosing: the rule's table is in the namespace, dormant,
// and a netlink socket is open there, so Switch is one message the kernel
// acts on at once. A partition prepares every member's change, then
// switches them all together, then finishes each.
type Pending struct {
	m        *Manager
	r        *Rule
	sw       *tableSwitch
	remove   bool
	switched bool
	err      error
}

// Prepare makes the rule of an nftables fault (a partition, loss, reset,
// blackhole) ready to apply: checked, numbered and journaled as Apply
// does, its table made, dormant.
func (m *Manager) Prepare(ctx context.Context, t Target, s Spec, op Op) (*Pending, error) {
	r, _, err := m.newRule(ctx, t, s, op)
	if err != nil {
		return nil, err
	}
	if r.Mechanism != MechNft {
		r.ns.Close()
		return nil, fmt.Errorf("%s cannot be prepared, only applied", s.Fault)
	}
	fail := func(err error) (*Pending, error) {
		m.journalRemoved(r, "not applied: "+err.Error())
		_, _ = r.ns.Run(ctx, "", "nft", "delete", "table", "inet", r.Table)
		r.ns.Close()
		return nil, fmt.Errorf("%s on %s (%s): %w", s.Fault, t.Name, t.What, err)
	}
	text, err := nftRules(r.Table, s, true)
	if err == nil {
		err = m.journalApply(r)
	}
	if err != nil {
		r.ns.Close()
		return nil, fmt.Errorf("%s on %s (%s): %w", s.Fault, t.Name, t.What, err)
	}
	if _, err := r.ns.Run(ctx, text, "nft", "-f", "-"); err != nil {
		return fail(err)
	}
	sw, err := openSwitch(r.ns, r.Table)
	if err != nil {
		return fail(err)
	}
	return &Pending{m: m, r: r, sw: sw}, nil
}

// PrepareRemove makes the removal of r (an nftables rule) ready.
func (m *Manager) PrepareRemove(ctx context.Context, r *Rule) (*Pending, error) {
	if r.Mechanism != MechNft {
		return nil, fmt.Errorf("rule %d (%s) cannot be prepared for removal, only removed", r.ID, r.Mechanism)
	}
	sw, err := openSwitch(r.ns, r.Table)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	done := r.removed
	r.removed = true
	m.mu.Unlock()
	if done {
		sw.Close()
		return &Pending{m: m, r: r, remove: true}, nil // nothing to do
	}
	return &Pending{m: m, r: r, sw: sw, remove: true}, nil
}

// Rule is the rule the change applies or removes.
func (p *Pending) Rule() *Rule { return p.r }

// Switch makes the change, and returns once it is in effect (the moment
// is the rule's Applied or Removed): the table is woken, or put to sleep.
// Nothing else is done, so many switches made together land together.
func (p *Pending) Switch() error {
	if p.sw == nil || p.switched {
		return p.err
	}
	p.switched = true
	at, err := p.sw.set(!p.remove)
	p.sw.Close()
	if p.remove {
		p.r.Removed = at
		if err != nil && errors.Is(err, unix.ENOENT) {
			err = nil // gone already
		}
	} else {
		p.r.Applied = at
	}
	p.err = err
	return err
}

// Finish completes what Switch began and records it as Apply and Remove
// do: a rule that took effect is read back from the kernel; one put to
// sleep is deleted.
func (p *Pending) Finish(ctx context.Context) error {
	r, m := p.r, p.m
	if p.sw == nil {
		return nil
	}
	if !p.switched {
		p.Switch()
	}
	if p.remove {
		if p.err != nil {
			return m.removed(r, r.Removed, p.err)
		}
		return m.removed(r, r.Removed, remove(ctx, r.ns, r.Spec.Fault, r.Mechanism, r.Table, nil, nil))
	}
	if p.err != nil {
		m.journalRemoved(r, "not applied: "+p.err.Error())
		_, _ = r.ns.Run(ctx, "", "nft", "delete", "table", "inet", r.Table)
		r.ns.Close()
		return fmt.Errorf("%s on %s (%s): %w", r.Spec.Fault, r.Target.Name, r.Target.What, p.err)
	}
	if r.Spec.Fault == Reset {
		out, _ := r.ns.Run(ctx, "", "ss", "-K", "-t", "-n", "state", "established", "not dst 127.0.0.0/8 and not dst [::1]")
		r.aborted = max(0, len(strings.Split(strings.TrimSpace(out), "\n"))-1)
	}
	m.applied(ctx, r)
	return nil
}

// Abort gives up a change that was prepared and not committed: a dormant
// table is deleted, a rule to remove stays.
func (p *Pending) Abort() {
	if p.sw == nil || p.switched {
		return
	}
	p.sw.Close()
	if p.remove {
		p.m.mu.Lock()
		p.r.removed = false
		p.m.mu.Unlock()
		return
	}
	_, _ = p.r.ns.Run(context.Background(), "", "nft", "delete", "table", "inet", p.r.Table)
	p.m.journalRemoved(p.r, "not applied: aborted")
	p.r.ns.Close()
}

// apply journals r, then makes it.
func (m *Manager) apply(ctx context.Context, r *Rule) error {
	if r.Mechanism == MechQueue {
		r.Queue = uint16(10000 + r.ID%50000)
		r.Table = fmt.Sprintf("CHAOS_%s_%d", m.tag, r.ID)
	}
	if _, fams := chainTable(r.Mechanism); len(fams) > 0 {
		// The tables the rule makes are journaled with it, so cleanup
		// after a kill leaves no empty table behind either.
		r.made = nil
		for _, f := range fams {
			if _, err := r.ns.Run(ctx, "", append([]string{"nft", "list", "table"}, strings.Fields(f.nftTable)...)...); err != nil {
				r.made = append(r.made, f.nftTable)
			}
		}
	}
	if err := m.journalApply(r); err != nil {
		return err
	}
	var err error
	switch r.Mechanism {
	case MechNft:
		var text string
		if text, err = nftRules(r.Table, r.Spec, false); err == nil {
			_, err = r.ns.Run(ctx, text, "nft", "-f", "-")
		}
		if err == nil && r.Spec.Fault == Reset {
			// The rules reset what comes and goes from now on; connections
			// that are quiet are reset now, at both ends (the kernel aborts
			// them, sending the peer a reset): every established TCP
			// connection of the namespace but its loopback ones.
			var out string
			out, err = r.ns.Run(ctx, "", "ss", "-K", "-t", "-n", "state", "established", "not dst 127.0.0.0/8 and not dst [::1]")
			r.aborted = max(0, len(strings.Split(strings.TrimSpace(out), "\n"))-1)
		}
	case MechTbf:
		err = applyQdisc(ctx, r.ns, r.Devs, tbfArgs(r.Spec.Rate))
	case MechNetem:
		err = applyQdisc(ctx, r.ns, r.Devs, netemArgs(r.Spec))
	case MechQueue:
		err = m.applyQueue(ctx, r)
	case MechDrop:
		percent := r.Spec.Percent
		if r.Spec.Fault == Blackhole {
			percent = 100
		}
		err = applyChain(ctx, r.ns, MechDrop, dropRules(r.Table, percent, r.Spec.Fault == Blackhole), r.Table, r.made, r.Spec.Fault)
	}
	if err != nil {
		m.journalRemoved(r, "not applied: "+err.Error())
	}
	return err
}

func (m *Manager) applyQueue(ctx context.Context, r *Rule) error {
	s := r.Spec
	q, err := openQueue(ctx, r.ns, r.Queue, delayParams{Delay: s.Delay, Jitter: s.Jitter, Corr: s.Correlation / 100, Seed: s.Seed, Chain: r.Table})
	if err != nil {
		return err
	}
	if err := applyChain(ctx, r.ns, MechQueue, queueRules(r.Table, r.Queue), r.Table, r.made, r.Spec.Fault); err != nil {
		q.Close()
		return err
	}
	r.q = q
	return nil
}

// Remove takes r out of its namespace (once; later calls do nothing) and
// records network.removed.
func (m *Manager) Remove(ctx context.Context, r *Rule) error {
	m.mu.Lock()
	if r.removed {
		m.mu.Unlock()
		return nil
	}
	r.removed = true
	m.mu.Unlock()
	err := remove(ctx, r.ns, r.Spec.Fault, r.Mechanism, r.Table, r.Devs, r.made)
	if r.q != nil {
		err = errors.Join(err, r.q.Close())
	}
	return m.removed(r, time.Now(), err)
}

// removed notes that r was taken out (or could not be, err), and records
// network.removed with the moment (at).
func (m *Manager) removed(r *Rule, at time.Time, err error) error {
	m.mu.Lock()
	r.removed = true
	m.mu.Unlock()
	r.Removed = at
	fields := []rundir.Field{rundir.F("operation", r.Op.Operation), rundir.F("run", r.Op.Run), rundir.F("uses", r.Spec.Fault), rundir.F("target", r.Target.Name), rundir.F("rule", r.ID),
		rundir.F("at", r.Removed.UTC().Format(time.RFC3339Nano))}
	if r.q != nil {
		fields = append(fields, rundir.F("packets_delayed", r.q.Count()))
	}
	if err != nil {
		fields = append(fields, rundir.F("error", err.Error()))
	} else {
		m.journalRemoved(r, "")
	}
	r.ns.Close()
	m.cfg.Record("network.removed", fields...)
	if err != nil {
		return fmt.Errorf("removing %s from %s: %w", r.Spec.Fault, r.Target.Name, err)
	}
	return nil
}

// applyChain makes a chain rule in each of its families (iptables,
// ip6tables), all or none.
func applyChain(ctx context.Context, ns *NS, mech, rules, chain string, made []string, fault string) error {
	_, fams := chainTable(mech)
	for i, f := range fams {
		if _, err := ns.Run(ctx, rules, f.restore, "--noflush"); err != nil {
			if i > 0 {
				_ = removeChain(ctx, ns, mech, chain, made, fault)
			}
			return err
		}
	}
	return nil
}

// removeChain takes a chain rule out of each of its families and deletes
// the tables it made (made) that hold nothing else now.
func removeChain(ctx context.Context, ns *NS, mech, chain string, made []string, fault string) error {
	table, fams := chainTable(mech)
	unrules := []string{queueUnrules(chain, false), queueUnrules(chain, true)}
	if mech == MechDrop {
		unrules = []string{dropUnrules(chain, fault == Blackhole)}
	}
	var errs []error
	for _, f := range fams {
		var err error
		for _, u := range unrules {
			if _, err = ns.Run(ctx, u, f.restore, "--noflush"); err == nil {
				break
			}
		}
		if err != nil && !goneErr(err) {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(made, f.nftTable) {
			continue
		}
		if out, err := ns.Run(ctx, "", f.save, "-t", table); err == nil && !strings.Contains(out, "\n-A ") && !strings.Contains(out, "\n:CHAOS") {
			_, _ = ns.Run(ctx, "", append([]string{"nft", "delete", "table"}, strings.Fields(f.nftTable)...)...)
		}
	}
	return errors.Join(errs...)
}

// remove takes a rule out of ns by its mechanism and names, and the
// iptables tables a chain rule made (made) once empty. What is no longer
// there is not an error.
func remove(ctx context.Context, ns *NS, fault, mech, table string, devs []string, made []string) error {
	switch mech {
	case MechNft:
		if _, err := ns.Run(ctx, "", "nft", "delete", "table", "inet", table); err != nil && !goneErr(err) {
			return err
		}
	case MechTbf, MechNetem:
		return removeQdisc(ctx, ns, devs)
	case MechQueue, MechDrop:
		return removeChain(ctx, ns, mech, table, made, fault)
	}
	return nil
}

// checkAddrs makes sure the namespace is t's: it holds t's addresses.
func checkAddrs(ctx context.Context, ns *NS, t Target) error {
	if len(t.Addrs) == 0 {
		return nil
	}
	have, err := ns.Addrs(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	for _, a := range t.Addrs {
		if !slices.Contains(have, a.Unmap()) && !slices.Contains(have, a) {
			return fmt.Errorf("%s: the network namespace found (%s) does not hold its address %s (it holds %v), so it is not its namespace", t.Name, t.What, a, have)
		}
	}
	return nil
}

// Rules returns every rule applied so far.
func (m *Manager) Rules() []*Rule {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.rules)
}

// Sweep removes what is still applied (a revert that failed), recording
// each, and returns an error naming them.
func (m *Manager) Sweep(ctx context.Context) error {
	var left []string
	var errs []error
	for _, r := range m.Rules() {
		m.mu.Lock()
		removed := r.removed
		m.mu.Unlock()
		if removed {
			continue
		}
		left = append(left, fmt.Sprintf("%s on %s (rule %d)", r.Spec.Fault, r.Target.Name, r.ID))
		errs = append(errs, m.Remove(ctx, r))
	}
	if len(left) == 0 {
		return nil
	}
	return errors.Join(append([]error{fmt.Errorf("network rules still applied after the reverts, removed now: %s", strings.Join(left, ", "))}, errs...)...)
}

// Close releases the namespaces and, when every rule is gone, the run's
// journal under the state directory (the one in the run directory stays).
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, n := range m.nss {
		n.ns.Close()
		delete(m.nss, k)
	}
	all := true
	for _, r := range m.rules {
		all = all && r.removed
	}
	if m.journal != nil {
		m.journal.close(all)
	}
}

// statePath is the run's journal under the state directory.
func (m *Manager) statePath() (string, error) {
	pid := os.Getpid()
	start, err := proc.StartTime(pid)
	if err != nil {
		return "", err
	}
	return filepath.Join(m.cfg.StateDir, fmt.Sprintf("%s.%d.%d.jsonl", safeRunID(m.cfg.RunID), pid, start)), nil
}

// safeRunID keeps a run id usable in a file name.
func safeRunID(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '.' || r == 0 {
			return '_'
		}
		return r
	}, id)
}
