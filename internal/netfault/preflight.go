package netfault

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Preflight says whether this machine can apply faults: root, the host's
// tools, and, tried in a scratch namespace of its own, the kernel's
// nftables, tbf and netem (or else its netfilter queue, which latency then
// uses). The detail says what each fault will be.
func Preflight(ctx context.Context, faults []string) (bool, string) {
	if os.Geteuid() != 0 {
		return false, "network faults need root: they change network namespaces from the host"
	}
	need := []string{"nsenter", "ip"}
	uses := func(fs ...string) bool {
		for _, f := range fs {
			if slices.Contains(faults, f) {
				return true
			}
		}
		return false
	}
	if uses(Reset, Partition) {
		need = append(need, "nft")
	}
	if uses(Bandwidth, Latency) {
		need = append(need, "tc")
	}
	if uses(Latency, Loss, Blackhole) {
		need = append(need, "iptables-restore", "iptables-save")
	}
	if uses(Loss, Blackhole) {
		need = append(need, "ip6tables-restore", "ip6tables-save")
	}
	var missing []string
	for _, t := range need {
		if _, err := tool(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return false, "missing on the host: " + strings.Join(missing, ", ") + " (Debian: util-linux, iproute2, nftables, iptables)"
	}
	ns, err := NewNS()
	if err != nil {
		return false, "cannot make a network namespace: " + err.Error()
	}
	defer ns.Close()
	var lines []string
	if uses(Reset, Partition) {
		text, _ := nftRules("chaos_preflight", Spec{Fault: Reset}, uses(Partition))
		if _, err := ns.Run(ctx, text, "nft", "-f", "-"); err != nil {
			return false, "nftables does not take the rules: " + err.Error()
		}
		lines = append(lines, "reset, partition: nftables tables (inet chaos_<run>_<n>)")
	}
	if uses(Loss, Blackhole) {
		if err := applyChain(ctx, ns, MechDrop, dropRules("CHAOS_preflight", 30, true), "CHAOS_preflight", nil, Blackhole); err != nil {
			return false, "loss, blackhole: iptables and ip6tables do not take the rules (statistic, NFQUEUE): " + err.Error()
		}
		lines = append(lines, "loss, blackhole: iptables and ip6tables filter chains handing packets to a queue nobody reads (CHAOS_<run>_<n>)")
	}
	if uses(Bandwidth) {
		if _, err := ns.Run(ctx, "", append([]string{"tc", "qdisc", "add", "dev", "lo", "root", "handle", QdiscHandle}, tbfArgs(1e6)...)...); err != nil {
			return false, "the kernel has no tbf qdisc: " + err.Error()
		}
		_, _ = ns.Run(ctx, "", "tc", "qdisc", "del", "dev", "lo", "root", "handle", QdiscHandle)
		lines = append(lines, "bandwidth: tbf qdiscs")
	}
	if uses(Latency) {
		_, err := ns.Run(ctx, "", append([]string{"tc", "qdisc", "add", "dev", "lo", "root", "handle", QdiscHandle}, netemArgs(Spec{Delay: 1000})...)...)
		switch {
		case err == nil && os.Getenv("CHAOS_NETEM") != "off":
			lines = append(lines, "latency: netem qdiscs")
		case err != nil && !isNoNetem(err):
			return false, "tc: " + err.Error()
		default:
			q, qerr := openQueue(ctx, ns, 1, delayParams{Chain: "CHAOS_preflight"})
			how := ""
			if qerr == nil {
				how = q.sched
				qerr = applyChain(ctx, ns, MechQueue, queueRules("CHAOS_preflight", 1), "CHAOS_preflight", nil, Latency)
				q.Close()
			}
			if qerr != nil {
				return false, "latency: the kernel has no netem and its netfilter queue cannot be used: " + qerr.Error()
			}
			why := "the kernel has no netem"
			if err == nil {
				why = "CHAOS_NETEM=off"
			}
			lines = append(lines, fmt.Sprintf("latency: a delay queue (iptables NFQUEUE, %s; %s)", how, why))
		}
	}
	return true, strings.Join(lines, "; ")
}
