package netfault

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CaptureFile is what Capture writes in the run's system directory.
const CaptureFile = "network.json"

// Capture is system/network.json: every rule the run applied (when, what
// the kernel reported, when it was removed), and, for every namespace the
// run put rules in that still exists, what of the harness is in it now:
// nftables tables named chaos_*, qdiscs with the harness's handle and
// iptables chains named CHAOS_*. Left counts the run's own rules still in
// the kernel; an adapter check proves nothing was left with it (jq
// '.left == 0').
type Capture struct {
	Rules      []CapturedRule `json:"rules"`
	Namespaces []CapturedNS   `json:"namespaces"`
	Left       int            `json:"left"`
}

// CapturedRule is one rule of the run.
type CapturedRule struct {
	Rule      int            `json:"rule"`
	Operation string         `json:"operation"`
	Run       int            `json:"run"`
	Fault     string         `json:"fault"`
	Target    string         `json:"target"`
	Netns     string         `json:"netns"`
	Mechanism string         `json:"mechanism"`
	Name      string         `json:"name,omitempty"`
	Devices   []string       `json:"devices,omitempty"`
	Params    map[string]any `json:"params,omitempty"`
	Kernel    string         `json:"kernel"`
	Applied   time.Time      `json:"applied"`
	Removed   *time.Time     `json:"removed,omitempty"`
}

// CapturedNS is one namespace as it is at the end of the run.
type CapturedNS struct {
	Target string `json:"target"`
	Netns  string `json:"netns"`
	// Chaos lists what of the harness (any run's) is in it now, as the
	// kernel reports it.
	Chaos []string `json:"chaos"`
	// Left lists the run's own rules among them.
	Left []string `json:"left"`
}

// WriteCapture writes system/network.json into systemDir.
func (m *Manager) WriteCapture(ctx context.Context, systemDir string) error {
	c := m.Capture(ctx)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(systemDir, CaptureFile), append(b, '\n'), 0o644)
}

// Capture looks at every namespace the run touched.
func (m *Manager) Capture(ctx context.Context) Capture {
	c := Capture{Rules: []CapturedRule{}, Namespaces: []CapturedNS{}}
	for _, r := range m.Rules() {
		cr := CapturedRule{Rule: r.ID, Operation: r.Op.Operation, Run: r.Op.Run, Fault: r.Spec.Fault, Target: r.Target.Name,
			Netns: r.Target.What + " " + Key{r.ns.Dev, r.ns.Ino}.String(), Mechanism: r.Mechanism, Name: r.Table, Params: r.Spec.Params(),
			Kernel: r.Kernel, Applied: r.Applied.UTC()}
		if r.Mechanism != MechNft {
			cr.Devices = r.Devs
		}
		if !r.Removed.IsZero() {
			t := r.Removed.UTC()
			cr.Removed = &t
		}
		c.Rules = append(c.Rules, cr)
	}
	m.mu.Lock()
	infos := make([]*nsInfo, 0, len(m.nss))
	for _, n := range m.nss {
		infos = append(infos, n)
	}
	m.mu.Unlock()
	slices.SortFunc(infos, func(a, b *nsInfo) int { return strings.Compare(a.target.Name, b.target.Name) })
	own := "chaos_" + m.tag + "_"
	ownChain := "CHAOS_" + m.tag + "_"
	for _, n := range infos {
		cn := CapturedNS{Target: n.target.Name, Netns: n.target.What + " " + n.ns.Key().String(), Chaos: []string{}, Left: []string{}}
		for _, line := range harnessRules(ctx, n.ns) {
			cn.Chaos = append(cn.Chaos, line)
			if strings.Contains(line, own) || strings.Contains(line, ownChain) || (strings.Contains(line, " "+QdiscHandle+" ") && m.madeQdisc(n.ns.Key())) {
				cn.Left = append(cn.Left, line)
			}
		}
		c.Left += len(cn.Left)
		c.Namespaces = append(c.Namespaces, cn)
	}
	return c
}

// madeQdisc reports whether the run added a qdisc in that namespace.
func (m *Manager) madeQdisc(k Key) bool {
	for _, r := range m.Rules() {
		if (r.Mechanism == MechTbf || r.Mechanism == MechNetem) && (Key{r.ns.Dev, r.ns.Ino}) == k {
			return true
		}
	}
	return false
}

// harnessRules lists what of the harness is in ns: nftables tables named
// chaos_*, root qdiscs with the harness's handle, iptables chains named
// CHAOS_*, one line each.
func harnessRules(ctx context.Context, ns *NS) []string {
	var out []string
	if s, err := ns.Run(ctx, "", "nft", "list", "tables"); err == nil {
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[2], "chaos_") {
				out = append(out, strings.TrimSpace(l))
			}
		}
	}
	if s, err := ns.Run(ctx, "", "tc", "qdisc", "show"); err == nil {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, " "+QdiscHandle+" ") {
				out = append(out, strings.TrimSpace(l))
			}
		}
	}
	for _, c := range []struct{ save, table string }{{"iptables-save", "mangle"}, {"iptables-save", "filter"}, {"ip6tables-save", "filter"}} {
		if s, err := ns.Run(ctx, "", c.save, "-t", c.table); err == nil {
			for _, l := range strings.Split(s, "\n") {
				if strings.HasPrefix(l, ":CHAOS_") {
					out = append(out, strings.TrimSuffix(c.save, "-save")+" "+c.table+" chain "+strings.Fields(l[1:])[0])
				}
			}
		}
	}
	return out
}
