package netfault

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"
	"github.com/chaos-harness/chaos/internal/proc"
)

const testRun = "20260101T000000Z-abcd"

// line is one journal line as a run writes it.
func line(e Entry) string {
	b, _ := json.Marshal(e)
	return string(b) + "\n"
}

func TestReadJournal(t *testing.T) {
	tag := Tag(testRun)
	nft := func(rule int) Entry {
		return Entry{Event: "apply", Rule: rule, RunID: testRun, NSIno: 7, Fault: Partition, Mechanism: MechNft, Table: fmt.Sprintf("chaos_%s_%d", tag, rule), Devices: []string{"eth0"}}
	}
	netem := Entry{Event: "apply", Rule: 3, RunID: testRun, NSIno: 7, Fault: Latency, Mechanism: MechNetem, Devices: []string{"eth0"}}
	queue := Entry{Event: "apply", Rule: 3, RunID: testRun, NSIno: 7, Fault: Latency, Mechanism: MechQueue, Table: "CHAOS_" + tag + "_3", Devices: []string{"eth0"}, MadeTables: []string{"ip mangle"}}
	bad := func(f func(e *Entry)) string { e := nft(1); f(&e); return line(e) }
	for _, c := range []struct {
		name string
		data string
		left []string // tables (or mechanisms) left, in order
		err  string   // part of the error; "" none
	}{
		{"applied and removed", line(nft(1)) + line(Entry{Event: "removed", Rule: 1, Mechanism: MechNft, Table: nft(1).Table}), nil, ""},
		{"applied, not removed", line(nft(1)) + line(nft(2)) + line(Entry{Event: "removed", Rule: 1, Mechanism: MechNft, Table: nft(1).Table}), []string{nft(2).Table}, ""},
		// Issue 25: the netem attempt's removed must not end the queue
		// that took its place under the same number.
		{"netem failed, queue applied", line(netem) + line(Entry{Event: "removed", Rule: 3, Mechanism: MechNetem, Note: "not applied"}) + line(queue), []string{queue.Table}, ""},
		{"queue applied and removed", line(netem) + line(Entry{Event: "removed", Rule: 3, Mechanism: MechNetem}) + line(queue) + line(Entry{Event: "removed", Rule: 3, Mechanism: MechQueue, Table: queue.Table}), nil, ""},
		{"old removed line ends the latest apply", line(netem) + line(Entry{Event: "removed", Rule: 3}) + line(queue) + line(Entry{Event: "removed", Rule: 3}), nil, ""},
		{"last line cut short", line(nft(1)) + `{"event":"remo`, []string{nft(1).Table}, ""},
		{"a middle line broken", `{"event":"remo` + "\n" + line(nft(1)), nil, "test.jsonl:1: not a journal line"},
		// Issue 23 item 11: a name that is not the run's own.
		{"table with a command", bad(func(e *Entry) { e.Table = "keepme ; add table inet x" }), nil, `test.jsonl:1: field "table": "keepme ; add table inet x" is not the name`},
		{"another run's table", bad(func(e *Entry) { e.Table = "chaos_" + Tag("other") + "_1" }), nil, `field "table"`},
		{"another rule's table", bad(func(e *Entry) { e.Table = "chaos_" + tag + "_2" }), nil, `field "table"`},
		{"a table with a newline", bad(func(e *Entry) { e.Table = nft(1).Table + "\n-F INPUT" }), nil, `field "table"`},
		{"queue chain lower case", line(Entry{Event: "apply", Rule: 3, RunID: testRun, NSIno: 7, Fault: Latency, Mechanism: MechQueue, Table: "chaos_" + tag + "_3"}), nil, `field "table"`},
		{"an old nftables loss", bad(func(e *Entry) { e.Fault = Loss }), []string{nft(1).Table}, ""},
		{"a fault its mechanism does not make", bad(func(e *Entry) { e.Fault = Latency }), nil, `field "fault"`},
		{"a target that steers the terminal", bad(func(e *Entry) { e.Target = "w-0\x1b[2J" }), nil, `field "target": a control character`},
		{"qdisc with a table", bad(func(e *Entry) { e.Mechanism, e.Fault = MechTbf, Bandwidth }), nil, `field "table"`},
		{"removed naming another table", line(nft(1)) + line(Entry{Event: "removed", Rule: 1, Mechanism: MechNft, Table: "keepme"}), nil, `test.jsonl:2: field "table"`},
		{"device with a space", bad(func(e *Entry) { e.Devices = []string{"eth0 root"} }), nil, `field "devices"`},
		{"device too long", bad(func(e *Entry) { e.Devices = []string{"abcdefghijklmnop"} }), nil, `field "devices"`},
		{"another run", bad(func(e *Entry) { e.RunID = "20260101T000000Z-ffff" }), nil, `field "run_id"`},
		{"unknown mechanism", bad(func(e *Entry) { e.Mechanism = "shell" }), nil, `field "mechanism"`},
		{"unknown event", bad(func(e *Entry) { e.Event = "exec" }), nil, `field "event"`},
		{"rule zero", bad(func(e *Entry) { e.Rule = 0 }), nil, `field "rule"`},
		{"no namespace", bad(func(e *Entry) { e.NSIno = 0 }), nil, `field "ns_ino"`},
		{"unknown field", `{"event":"apply","rule":1,"cmd":"x"}` + "\n", nil, "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			left, err := parseJournal("test.jsonl", testRun, []byte(c.data))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				if left != nil {
					t.Errorf("a refused journal still gave %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range left {
				got = append(got, e.Table)
			}
			if strings.Join(got, ",") != strings.Join(c.left, ",") {
				t.Errorf("left %v, want %v", got, c.left)
			}
		})
	}
}

func TestReadJournalFile(t *testing.T) {
	dir := t.TempDir()
	// A FIFO, a symlink and an oversized file are refused, not read.
	fifo := filepath.Join(dir, testRun+".1.1.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadJournal(fifo, ""); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	link := filepath.Join(dir, testRun+".2.2.jsonl")
	os.Symlink("/etc/passwd", link)
	if _, err := ReadJournal(link, ""); err == nil {
		t.Error("a symlink was read")
	}
	big := filepath.Join(dir, testRun+".3.3.jsonl")
	os.WriteFile(big, make([]byte, journalfile.DefaultLimits.File+1), 0o600)
	if _, err := ReadJournal(big, ""); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("oversized: %v", err)
	}
	// The run is the one the file is named after.
	other := filepath.Join(dir, "20260101T000000Z-ffff.4.4.jsonl")
	os.WriteFile(other, []byte(line(Entry{Event: "apply", Rule: 1, RunID: testRun, NSIno: 1, Fault: Reset, Mechanism: MechNft, Table: "chaos_" + Tag(testRun) + "_1"})), 0o600)
	if _, err := ReadJournal(other, ""); err == nil || !strings.Contains(err.Error(), `:1: field "run_id"`) {
		t.Errorf("a journal of another run than its name: %v", err)
	}
}

// FuzzReadJournal: whatever a journal holds, what is returned names only
// what the run made.
func FuzzReadJournal(f *testing.F) {
	tag := Tag(testRun)
	f.Add(line(Entry{Event: "apply", Rule: 1, RunID: testRun, NSIno: 1, Fault: Reset, Mechanism: MechNft, Table: "chaos_" + tag + "_1"}))
	f.Add(line(Entry{Event: "apply", Rule: 2, RunID: testRun, NSIno: 1, Fault: Latency, Mechanism: MechQueue, Table: "CHAOS_" + tag + "_2", Devices: []string{"eth0"}}) + `{"event":"removed","rule":2}`)
	f.Add(`{"event":"apply","rule":1,"run_id":"` + testRun + `","ns_ino":1,"mechanism":"nftables","table":"keepme ; add table inet x"}`)
	f.Fuzz(func(t *testing.T, data string) {
		left, err := parseJournal("f.jsonl", testRun, []byte(data))
		if err != nil {
			return
		}
		for _, e := range left {
			switch e.Mechanism {
			case MechNft:
				if e.Table != fmt.Sprintf("chaos_%s_%d", tag, e.Rule) {
					t.Fatalf("table %q", e.Table)
				}
			case MechQueue:
				if e.Table != fmt.Sprintf("CHAOS_%s_%d", tag, e.Rule) {
					t.Fatalf("chain %q", e.Table)
				}
			case MechTbf, MechNetem:
				if e.Table != "" || len(e.Devices) == 0 {
					t.Fatalf("qdisc %+v", e)
				}
			default:
				t.Fatalf("mechanism %q", e.Mechanism)
			}
			for _, d := range e.Devices {
				if !validDevice(d) {
					t.Fatalf("device %q", d)
				}
			}
		}
	})
}

// deadJournal writes lines as the state journal of run, by a harness that
// is gone.
func deadJournal(t *testing.T, dir, run, lines string) string {
	t.Helper()
	p := filepath.Join(dir, safeRunID(run)+".999999999.1.jsonl")
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 23 item 11: a journal naming a table the run never made, with an
// nft command after ";", is refused: the table stays, the command is not
// run, the journal is kept.
func TestCleanupRefusesForeignNames(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	ns, err := NewNS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if _, err := ns.Run(ctx, "", "nft", "add", "table", "inet", "keepme"); err != nil {
		t.Fatal(err)
	}
	_, stop := netfaulttest.HoldNetns(t, ns.Path())
	defer stop()
	state := t.TempDir()
	p := deadJournal(t, state, testRun, line(Entry{Event: "apply", Rule: 1, RunID: testRun, NSDev: ns.Dev, NSIno: ns.Ino, Fault: Reset, Mechanism: MechNft, Table: "keepme ; add table inet x"}))
	for _, dry := range []bool{true, false} {
		var found []string
		err = Cleanup(ctx, state, "", dry, func(s string) { found = append(found, s) })
		if err == nil || !strings.Contains(err.Error(), p+`:1: field "table": "keepme ; add table inet x" is not the name run `+testRun+" gave rule 1") {
			t.Errorf("dry run %v: error %v, want one naming the file, line and field", dry, err)
		}
		if len(found) != 0 {
			t.Errorf("dry run %v: %q", dry, found)
		}
	}
	out, err := ns.Run(ctx, "", "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "table inet keepme" {
		t.Errorf("tables after cleanup: %q, want only keepme", out)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the refused journal was removed: %v", err)
	}
}

// The SIGKILL test's harness: with CHAOS_NETFAULT_HARNESS set, applies
// one fault as a run would, says so and waits to be killed.
func TestKilledHarnessHelper(t *testing.T) {
	fault := os.Getenv("CHAOS_NETFAULT_HARNESS")
	if fault == "" {
		t.Skip("the harness of TestCleanupAfterKill, run by it")
	}
	addr := netip.MustParseAddr(os.Getenv("CHAOS_NETFAULT_ADDR"))
	peer := netip.MustParseAddr(os.Getenv("CHAOS_NETFAULT_PEER"))
	mgr := NewManager(Config{RunID: os.Getenv("CHAOS_NETFAULT_RUN"), StateDir: os.Getenv("CHAOS_NETFAULT_STATE"), SystemDir: os.Getenv("CHAOS_NETFAULT_SYSTEM")})
	pid, _ := strconv.Atoi(os.Getenv("CHAOS_NETFAULT_PID"))
	s := Spec{Fault: fault, Delay: 50 * time.Millisecond, Percent: 30, Rate: 1_000_000, DropTo: []netip.Addr{peer}, DropFrom: []netip.Addr{peer}}
	tg := Target{Name: "a", NS: fmt.Sprintf("/proc/%d/ns/net", pid), Addrs: []netip.Addr{addr}, Pid: pid, What: "test"}
	r, err := mgr.Apply(context.Background(), tg, s, Op{Operation: "op", Run: 1})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	fmt.Printf("applied %s %s\n", r.Mechanism, r.Table)
	time.Sleep(time.Minute)
	os.Exit(4)
}

// Issue 25 defect 1, for every fault: a harness SIGKILLed while its fault
// is applied leaves rules in a namespace that outlives it (held by a
// process, as a pod's is); chaos cleanup lists them in a dry run, then
// removes them, leaving no rule, chain, qdisc, queue or journal.
func TestCleanupAfterKill(t *testing.T) {
	lab := newLab(t)
	m := member(t, lab, "a")
	// "latency, helper stopped": the delay queue's helper cannot see the
	// harness die (SIGSTOP), so it would hold its packets and its queue
	// for good; cleanup must end it.
	for i, fault := range []string{Latency, Latency + ", helper stopped", Loss, Bandwidth, Reset, Blackhole, Partition} {
		fault, stopHelper := strings.CutSuffix(fault, ", helper stopped")
		name := fault
		if stopHelper {
			name += "-helper-stopped"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			holder, stop := netfaulttest.HoldNetns(t, m.NS.Path())
			defer stop()
			state, system := t.TempDir(), t.TempDir()
			run := fmt.Sprintf("20260101T0000%02dZ-%04x", i, os.Getpid()&0xffff)
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHarnessHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "CHAOS_NETFAULT_HARNESS="+fault, "CHAOS_NETFAULT_RUN="+run, "CHAOS_NETFAULT_STATE="+state, "CHAOS_NETFAULT_SYSTEM="+system,
				"CHAOS_NETFAULT_PID="+strconv.Itoa(holder), "CHAOS_NETFAULT_ADDR="+m.Addr.String(), "CHAOS_NETFAULT_PEER="+lab.Host.String())
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			applied := ""
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "applied ") || strings.HasPrefix(sc.Text(), "error:") {
					applied = sc.Text()
					break
				}
			}
			if !strings.HasPrefix(applied, "applied ") {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the harness did not apply %s: %q", fault, applied)
			}
			if len(harnessRules(ctx, m.NS)) == 0 {
				t.Fatalf("nothing of %s in the namespace while it is applied", fault)
			}
			var helpers []int
			if fault == Latency {
				f := strings.Fields(applied)
				helpers, _ = proc.FindByMarker(queueMarker + "=" + f[len(f)-1])
				if len(helpers) != 1 {
					t.Fatalf("delay queue helpers of %q: %v, want one", applied, helpers)
				}
			}
			if stopHelper {
				syscall.Kill(helpers[0], syscall.SIGSTOP)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if fault == Latency && !stopHelper {
				// A helper that can run sees the harness die (its standard
				// input closes) and ends by itself; cleanup, run before it
				// has, would end it too, and this would prove nothing.
				if waitGone(helpers[0], 5*time.Second) != nil {
					t.Fatalf("the delay queue helper %d still runs 5 s after its harness was SIGKILLed", helpers[0])
				}
			}
			var found []string
			if err := Cleanup(ctx, state, run, true, func(s string) { found = append(found, s) }); err != nil {
				t.Fatal(err)
			}
			name := strings.Fields(applied)
			if len(found) != 1 || !strings.HasPrefix(found[0], "would remove "+fault) || (len(name) > 2 && !strings.Contains(found[0], name[2])) {
				t.Errorf("dry run lists %q, want the %s rule (%s)", found, fault, applied)
			}
			if left := harnessRules(ctx, m.NS); len(left) == 0 {
				t.Errorf("the dry run removed %s", fault)
			}
			found = nil
			if err := Cleanup(ctx, state, run, false, func(s string) { found = append(found, s) }); err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || !strings.HasPrefix(found[0], "removed "+fault) || stopHelper != strings.Contains(found[0], "stopped its delay queue helper") {
				t.Errorf("cleanup says %q", found)
			}
			for _, pid := range helpers {
				if waitGone(pid, 5*time.Second) != nil {
					t.Errorf("the delay queue helper %d is still there after cleanup", pid)
				}
			}
			if left := harnessRules(ctx, m.NS); len(left) != 0 {
				t.Errorf("left after cleanup: %q", left)
			}
			if out, _ := m.NS.Run(ctx, "", "iptables-save", "-t", "mangle"); strings.Contains(out, "CHAOS") || strings.Contains(out, "NFQUEUE") {
				t.Errorf("iptables-save -t mangle after cleanup:\n%s", out)
			}
			if out, _ := m.NS.Run(ctx, "", "nft", "list", "tables"); strings.TrimSpace(out) != "" {
				t.Errorf("tables left after cleanup: %q", out)
			}
			if out, _ := m.NS.Run(ctx, "", "cat", "/proc/net/netfilter/nfnetlink_queue"); strings.TrimSpace(out) != "" {
				t.Errorf("queues bound after cleanup: %q", out)
			}
			if ents, _ := os.ReadDir(state); len(ents) != 0 {
				t.Errorf("journals left: %v", ents)
			}
		})
	}
}

// waitGone waits until pid is no longer a live process (gone, or a
// zombie whose files are closed).
func waitGone(pid int, within time.Duration) error {
	for end := time.Now().Add(within); proc.Alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			return fmt.Errorf("pid %d still alive after %v", pid, within)
		}
	}
	return nil
}
