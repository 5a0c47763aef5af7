package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"
)

// The network faults on local processes in namespaces of their own,
// proven from outside: the test, not the harness, makes the connections.

// needNetwork skips a test of the network faults where they cannot run:
// they need root and busybox (its httpd is the server); under CI their
// absence fails.
func needNetwork(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "the network faults need root"
	} else if _, err := exec.LookPath("busybox"); err != nil {
		why = "busybox is not installed (Debian: busybox-static)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

func isolatedAdapter(t *testing.T) string {
	return filepath.Join(examplesDir(t), "adapters", "local-isolated.yaml")
}

// memberAddr is a member's address from the run's network.created event.
func memberAddr(t *testing.T, e event, name string) string {
	t.Helper()
	m, ok := e["members"].(map[string]any)
	if !ok {
		t.Fatalf("network.created has no members: %v", e)
	}
	a, _ := m[name].(string)
	if a == "" {
		t.Fatalf("no address for %s in %v", name, m)
	}
	return a
}

// readNetworkCapture reads system/network.json.
func readNetworkCapture(t *testing.T, dir string) (left int, rules []map[string]any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "system", "network.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Left  int              `json:"left"`
		Rules []map[string]any `json:"rules"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.Left, c.Rules
}

// localRun is a chaos run on local-isolated, for netfaulttest.
type localRun struct {
	r       *chaosRun
	dir     string
	created event
}

func (l *localRun) Await(name string, want map[string]string) map[string]any {
	return l.r.awaitEvent(l.dir, name, want, time.Minute)
}

func (l *localRun) Addr(instance string) string { return memberAddr(l.r.t, l.created, instance) }

func (l *localRun) Pid(instance string) int {
	e := l.r.awaitEvent(l.dir, "instance.created", map[string]string{"instance": instance}, 30*time.Second)
	pid, _ := strconv.Atoi(e.str("system_id"))
	return pid
}

// TestNetworkFaultsOnLocal: the six network faults on processes in
// network namespaces of their own, each measured from outside
// (netfaulttest.Prove).
func TestNetworkFaultsOnLocal(t *testing.T) {
	needNetwork(t)
	x := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(x, []byte(netfaulttest.Experiment("net-faults-local", "local-isolated", "busybox httpd", "$CHAOS_NET_ADDR:8080")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startChaos(t, "net-faults-local", "--adapter", isolatedAdapter(t), x)
	dir := r.dir()
	l := &localRun{r: r, dir: dir, created: r.awaitEvent(dir, "network.created", nil, 20*time.Second)}
	netfaulttest.Prove(t, l)
	if code := r.wait(time.Minute); code != 0 {
		t.Fatalf("chaos run exited %d", code)
	}
	if left, rules := readNetworkCapture(t, dir); left != 0 || len(rules) != 7 {
		t.Errorf("system/network.json: left %d, rules %v", left, rules)
	}
}

// nftTables lists the nftables ruleset (iptables-nft's chains too) in the
// network namespace of pid.
func nftTables(t *testing.T, pid int) string {
	t.Helper()
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "--", "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables in the namespace of %d: %v\n%s", pid, err, out)
	}
	return string(out)
}

// TestNetworkCleanupAfterAKilledRun: a run SIGKILLed while a blackhole
// holds leaves its rule in the instance's namespace (the instance's
// process keeps it); chaos cleanup finds it from the run's journal,
// removes it, then kills the process.
func TestNetworkCleanupAfterAKilledRun(t *testing.T) {
	needNetwork(t)
	r := startChaos(t, "net-killed-run", "--adapter", isolatedAdapter(t), filepath.Join("testdata", "network", "killed.yaml"))
	dir := r.dir()
	runID := filepath.Base(dir)
	e := r.awaitEvent(dir, "instance.created", map[string]string{"instance": "w-0"}, 20*time.Second)
	pid, _ := strconv.Atoi(e.str("system_id"))
	applied := r.awaitEvent(dir, "network.applied", map[string]string{"operation": "hole"}, 20*time.Second)
	table := applied.str("name")
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	if tables := nftTables(t, pid); !strings.Contains(tables, table) {
		t.Fatalf("the killed run left no rule %s to clean up: %s", table, tables)
	}
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "cleanup", "--backend", "process", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("chaos cleanup: %v\n%s", err, out)
	}
	t.Logf("chaos cleanup:\n%s", out)
	if !strings.Contains(string(out), "removed blackhole rule "+table+" (nfqueue-drop) of run "+runID+" on w-0") {
		t.Errorf("chaos cleanup did not say it removed %s:\n%s", table, out)
	}
	if st, err := procState(pid); err == nil && st != 'Z' {
		t.Errorf("the instance %d is alive (state %c) after chaos cleanup", pid, st)
	}
	if m, _ := filepath.Glob("/run/chaos/net/" + runID + ".*"); len(m) > 0 {
		t.Errorf("the run's journal is still there: %v", m)
	}
	// The run's network went with the harness: the host's end of its link
	// is gone (the hub namespace was held only by the harness).
	link := r.awaitEvent(dir, "network.created", nil, time.Second).str("link")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := net.InterfaceByName(link); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the host's link %s of the killed run is still there", link)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Its journal in the run directory says what was applied.
	if data, err := os.ReadFile(filepath.Join(dir, "system", "network-rules.jsonl")); err != nil || !strings.Contains(string(data), `"event":"apply"`) {
		t.Errorf("system/network-rules.jsonl: %v %s", err, data)
	}
}

// TestNetworkFaultRevertedOnAbort: Ctrl-C while a blackhole holds removes
// it before the run ends (ERROR, exit 2), and system/network.json shows
// nothing left.
func TestNetworkFaultRevertedOnAbort(t *testing.T) {
	needNetwork(t)
	r := startChaos(t, "net-killed-run", "--adapter", isolatedAdapter(t), filepath.Join("testdata", "network", "killed.yaml"))
	dir := r.dir()
	e := r.awaitEvent(dir, "instance.created", map[string]string{"instance": "w-0"}, 20*time.Second)
	pid, _ := strconv.Atoi(e.str("system_id"))
	applied := r.awaitEvent(dir, "network.applied", map[string]string{"operation": "hole"}, 20*time.Second)
	if tables := nftTables(t, pid); !strings.Contains(tables, applied.str("name")) {
		t.Fatalf("the rule %s is not in the instance's namespace: %s", applied.str("name"), tables)
	}
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(30 * time.Second); code != 2 {
		t.Fatalf("chaos run exited %d after SIGINT, want 2", code)
	}
	removed := false
	for _, ev := range readEvents(t, filepath.Join(dir, "timeline.jsonl")) {
		removed = removed || (ev.str("event") == "network.removed" && ev.str("operation") == "hole" && ev.str("error") == "")
	}
	if !removed {
		t.Error("no network.removed for the blackhole")
	}
	if left, rules := readNetworkCapture(t, dir); left != 0 || len(rules) != 1 || rules[0]["removed"] == nil {
		t.Errorf("system/network.json: left %d, rules %v", left, rules)
	}
	if m, _ := filepath.Glob("/run/chaos/net/" + filepath.Base(dir) + ".*"); len(m) > 0 {
		t.Errorf("the run's journal for chaos cleanup is still there: %v", m)
	}
}
