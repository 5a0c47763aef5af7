package netfault

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Faults, as the experiment names them.
const (
	Latency   = "latency"
	Loss      = "loss"
	Bandwidth = "bandwidth"
	Reset     = "reset"
	Blackhole = "blackhole"
	Partition = "partition"
)

// Mechanisms: what a rule is in the kernel.
const (
	// MechNft is an nftables table of the rule's own (reset, partition).
	MechNft = "nftables"
	// MechTbf is a tbf qdisc at the root of each device (bandwidth).
	MechTbf = "tc-tbf"
	// MechNetem is a netem qdisc at the root of each device (latency, where
	// the kernel has sch_netem).
	MechNetem = "tc-netem"
	// MechQueue is an iptables chain that hands every packet sent to a
	// netfilter queue the harness gives back after the delay (latency,
	// where the kernel has no netem).
	MechQueue = "nfqueue"
	// MechDrop is an iptables and ip6tables filter chain of the rule's own
	// that hands a share of the packets the namespace sends (loss), or
	// every packet it sends and gets (blackhole), to a netfilter queue
	// nobody listens on: the kernel frees them and tells the sender they
	// were sent, as real loss would, where a drop in the output path makes
	// the send fail (EPERM). (nftables' own queue statement is not in
	// every kernel; the iptables target is.)
	MechDrop = "nfqueue-drop"
)

// dropQueue is the queue MechDrop hands packets to: the harness never
// binds it (delay queues are 10000 to 59999); a program in the namespace
// that did would be handed the packets instead.
const dropQueue = 65535

// iptFamily is one of the iptables of a chain rule.
type iptFamily struct {
	restore, save string
	// nftTable is the nftables table iptables-nft keeps the rules' table in.
	nftTable string
}

// chainTable is the iptables table of a chain mechanism and the families
// its chain is made in.
func chainTable(mech string) (string, []iptFamily) {
	switch mech {
	case MechQueue:
		return "mangle", []iptFamily{{"iptables-restore", "iptables-save", "ip mangle"}}
	case MechDrop:
		return "filter", []iptFamily{{"iptables-restore", "iptables-save", "ip filter"}, {"ip6tables-restore", "ip6tables-save", "ip6 filter"}}
	}
	return "", nil
}

// dropRules is the iptables-restore input of a loss or a blackhole: a
// chain of the rule's own, jumped to first from OUTPUT for what is not
// sent on loopback (and, for a blackhole, from INPUT for what does not
// come from it), that hands percent of the packets to dropQueue. OUTPUT
// comes before the delay queue's POSTROUTING, so a packet lost is never
// delayed first.
func dropRules(chain string, percent float64, blackhole bool) string {
	match := ""
	if percent < 100 {
		match = "-m statistic --mode random --probability " + strconv.FormatFloat(percent/100, 'f', 6, 64) + " "
	}
	in := ""
	if blackhole {
		in = fmt.Sprintf("-I INPUT 1 ! -i lo -j %s\n", chain)
	}
	return fmt.Sprintf("*filter\n:%s - [0:0]\n-A %s %s-j NFQUEUE --queue-num %d\n-I OUTPUT 1 ! -o lo -j %s\n%sCOMMIT\n", chain, chain, match, dropQueue, chain, in)
}

// dropUnrules removes what dropRules added.
func dropUnrules(chain string, blackhole bool) string {
	in := ""
	if blackhole {
		in = fmt.Sprintf("-D INPUT ! -i lo -j %s\n", chain)
	}
	return fmt.Sprintf("*filter\n-D OUTPUT ! -o lo -j %s\n%s-F %s\n-X %s\nCOMMIT\n", chain, in, chain, chain)
}

// QdiscHandle is the handle of every qdisc the harness adds: a qdisc with
// it is the harness's, and only such a qdisc is ever deleted.
const QdiscHandle = "c4a5:"

// Spec is one network fault to put into one namespace.
type Spec struct {
	Fault string
	// latency
	Delay, Jitter time.Duration
	// Correlation of each packet's jitter with the previous one, 0 to 100.
	Correlation float64
	// Seed draws the jitter.
	Seed uint64
	// loss
	Percent float64
	// bandwidth, bits per second
	Rate uint64
	// partition: what the namespace must not send to (DropTo) and not
	// take from (DropFrom).
	DropTo, DropFrom []netip.Addr
}

// Params are the spec's parameters as the timeline shows them.
func (s Spec) Params() map[string]any {
	p := map[string]any{}
	switch s.Fault {
	case Latency:
		p["delay"] = s.Delay.String()
		if s.Jitter > 0 {
			p["jitter"] = s.Jitter.String()
		}
		if s.Correlation > 0 {
			p["correlation"] = s.Correlation
		}
	case Loss:
		p["percent"] = s.Percent
	case Bandwidth:
		p["rate"] = strconv.FormatUint(s.Rate, 10) + "bit"
	case Partition:
		if len(s.DropTo) > 0 {
			p["drop_to"] = addrStrings(s.DropTo)
		}
		if len(s.DropFrom) > 0 {
			p["drop_from"] = addrStrings(s.DropFrom)
		}
	}
	return p
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// nftRules is the nftables table of a reset or a partition;
// dormant, its chains are not hooked until the table is woken.
func nftRules(table string, s Spec, dormant bool) (string, error) {
	var in, out []string
	switch s.Fault {
	case Reset:
		// The resets the rules send go out through the output hook too:
		// they must pass.
		in = append(in, "tcp flags rst accept", "meta l4proto tcp reject with tcp reset")
		out = append(out, "tcp flags rst accept", "meta l4proto tcp reject with tcp reset")
	case Partition:
		in = append(in, addrRules("saddr", s.DropFrom, "drop")...)
		out = append(out, addrRules("daddr", s.DropTo, "drop")...)
		if len(in)+len(out) == 0 {
			return "", errors.New("a partition rule with nothing to cut")
		}
	default:
		return "", fmt.Errorf("%s is not an nftables fault", s.Fault)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", table)
	if dormant {
		b.WriteString("\tflags dormant\n")
	}
	if len(in) > 0 {
		b.WriteString("\tchain in {\n\t\ttype filter hook input priority filter - 5; policy accept;\n\t\tiifname \"lo\" accept\n")
		for _, r := range in {
			b.WriteString("\t\t" + r + "\n")
		}
		b.WriteString("\t}\n")
	}
	if len(out) > 0 {
		b.WriteString("\tchain out {\n\t\ttype filter hook output priority filter - 5; policy accept;\n\t\toifname \"lo\" accept\n")
		for _, r := range out {
			b.WriteString("\t\t" + r + "\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// addrRules drops packets whose dir (saddr, daddr) is one of addrs, IPv4
// and IPv6 apart, with verdict.
func addrRules(dir string, addrs []netip.Addr, verdict string) []string {
	var v4, v6 []string
	for _, a := range addrs {
		if a.Is4() || a.Is4In6() {
			v4 = append(v4, a.Unmap().String())
		} else {
			v6 = append(v6, a.String())
		}
	}
	slices.Sort(v4)
	slices.Sort(v6)
	var out []string
	if len(v4) > 0 {
		out = append(out, fmt.Sprintf("ip %s { %s } %s", dir, strings.Join(slices.Compact(v4), ", "), verdict))
	}
	if len(v6) > 0 {
		out = append(out, fmt.Sprintf("ip6 %s { %s } %s", dir, strings.Join(slices.Compact(v6), ", "), verdict))
	}
	return out
}

// tbfArgs is the tc qdisc arguments of a bandwidth limit: the rate, a
// burst of 20 ms of it (at least two full frames) and at most 500 ms of
// queue.
func tbfArgs(rate uint64) []string {
	burst := max(rate/8/50, 3200)
	return []string{"tbf", "rate", strconv.FormatUint(rate, 10) + "bit", "burst", strconv.FormatUint(burst, 10), "latency", "500ms"}
}

// netemArgs is the tc qdisc arguments of a latency.
func netemArgs(s Spec) []string {
	args := []string{"netem", "delay", usec(s.Delay)}
	if s.Jitter > 0 {
		args = append(args, usec(s.Jitter))
		if s.Correlation > 0 {
			args = append(args, strconv.FormatFloat(s.Correlation, 'f', -1, 64)+"%")
		}
	}
	return args
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }

// queueRules is the iptables-restore input of a latency by queue: a chain
// of the rule's own that hands every packet the namespace receives on a
// device other than loopback to queue num, in PREROUTING, before any of
// its sockets sees it; --queue-bypass lets packets through when nothing
// listens (the harness was killed).
//
// Why what it receives, where netem delays what it sends: a packet held
// on its way out still belongs to the socket that sent it, and TCP's small
// queues stop a socket that has about a millisecond of its data below it
// until some is freed, so a TCP sender held 50 ms sends a couple of
// segments per 50 ms (its requests were 69 ms late at p50, a bulk transfer
// through 1 ms ran at 0.5 Gbit/s). netem lets the packets go from their
// socket (skb_orphan_partial) and has no such limit; nothing outside the
// kernel can. A packet received has left its sender's socket (ip_rcv
// orphans it before PREROUTING), so holding it slows nothing but itself.
// A round trip through the target grows by the delay either way.
func queueRules(chain string, num uint16) string {
	return fmt.Sprintf("*mangle\n:%s - [0:0]\n-A %s -j NFQUEUE --queue-num %d --queue-bypass\n-I PREROUTING 1 ! -i lo -j %s\nCOMMIT\n", chain, chain, num, chain)
}

// queueUnrules removes what queueRules added; egress, what a harness
// before the delay moved to PREROUTING added (POSTROUTING ! -o lo).
func queueUnrules(chain string, egress bool) string {
	if egress {
		return fmt.Sprintf("*mangle\n-D POSTROUTING ! -o lo -j %s\n-F %s\n-X %s\nCOMMIT\n", chain, chain, chain)
	}
	return fmt.Sprintf("*mangle\n-D PREROUTING ! -i lo -j %s\n-F %s\n-X %s\nCOMMIT\n", chain, chain, chain)
}

// errNoNetem says the kernel has no netem qdisc.
var errNoNetem = errors.New("the kernel has no netem (sch_netem)")

func isNoNetem(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "Specified qdisc kind is unknown") || strings.Contains(err.Error(), "Unknown qdisc \"netem\""))
}

// applyQdisc adds a qdisc (tbf or netem args) at the root of each device,
// all or none.
func applyQdisc(ctx context.Context, ns *NS, devs []string, args []string) error {
	var done []string
	for _, dev := range devs {
		a := append([]string{"tc", "qdisc", "add", "dev", dev, "root", "handle", QdiscHandle}, args...)
		if _, err := ns.Run(ctx, "", a...); err != nil {
			for _, d := range done {
				_, _ = ns.Run(ctx, "", "tc", "qdisc", "del", "dev", d, "root", "handle", QdiscHandle)
			}
			if isNoNetem(err) {
				return errNoNetem
			}
			if strings.Contains(err.Error(), "Exclusivity flag on") || strings.Contains(err.Error(), "File exists") {
				return fmt.Errorf("device %s already has a root qdisc (one qdisc fault at a time: latency and bandwidth on the same target do not combine): %w", dev, err)
			}
			return err
		}
		done = append(done, dev)
	}
	return nil
}

// removeQdisc deletes the harness's qdisc from each device; a device or
// qdisc that is no longer there is not an error.
func removeQdisc(ctx context.Context, ns *NS, devs []string) error {
	var errs []error
	for _, dev := range devs {
		if _, err := ns.Run(ctx, "", "tc", "qdisc", "del", "dev", dev, "root", "handle", QdiscHandle); err != nil && !goneErr(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// goneErr says a removal found nothing to remove.
func goneErr(err error) bool {
	s := err.Error()
	for _, m := range []string{"Cannot find device", "No such file or directory", "Invalid handle", "Cannot delete qdisc with handle of zero", "does not exist", "No chain/target/match by that name", "Bad rule", "No such device"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Report is what the kernel says of a rule now: the qdiscs of its devices,
// its nftables table, or its iptables chain.
func report(ctx context.Context, ns *NS, mech, table string, devs []string) (string, error) {
	switch mech {
	case MechNft:
		return ns.Run(ctx, "", "nft", "list", "table", "inet", table)
	case MechTbf, MechNetem:
		var b strings.Builder
		for _, dev := range devs {
			out, err := ns.Run(ctx, "", "tc", "qdisc", "show", "dev", dev, "root")
			if err != nil {
				return b.String(), err
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.Contains(l, " "+QdiscHandle+" ") {
					b.WriteString(l + "\n")
				}
			}
		}
		return b.String(), nil
	case MechQueue, MechDrop:
		t, fams := chainTable(mech)
		var b strings.Builder
		for _, f := range fams {
			out, err := ns.Run(ctx, "", f.save, "-t", t)
			if err != nil {
				return b.String(), err
			}
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, table) {
					b.WriteString(l + "\n")
				}
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unknown mechanism %s", mech)
}
