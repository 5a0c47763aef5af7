package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/rundir"
	"golang.org/x/sys/unix"
)

// TestReservedPortsAreNobodyElses: a reserved port is never handed out
// again while it is reserved, and a server that binds it with SO_REUSEADDR
// (as Go's net package does) can listen on it.
func TestReservedPortsAreNobodyElses(t *testing.T) {
	// 400 reservations out of the ~28000 ports the kernel hands out: if it
	// handed reserved ports out again, some would repeat (the chance that
	// none does is below 0.1%).
	names := make([]string, 400)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	p, err := reservePorts(names)
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	seen := map[int]string{}
	for _, n := range names {
		port := p.byName[n]
		if other, dup := seen[port]; dup {
			t.Fatalf("port %d reserved for %s and %s", port, other, n)
		}
		seen[port] = n
	}
	// Others asking the kernel for a free port get none of them.
	for i := 0; i < 200; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if n, ok := seen[port]; ok {
			t.Fatalf("a listener on port 0 got %d, reserved for %s", port, n)
		}
	}
	// The system's server binds its port while it is reserved.
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.byName["p0"]))
	if err != nil {
		t.Fatalf("a server cannot listen on its reserved port: %v", err)
	}
	l.Close()
}

// TestPortsReachHooksInstancesAndTheManifest: each port of the adapter is
// $CHAOS_PORT_<NAME> in hooks and instances, adapter env values naming it
// are expanded, and manifest.json and run.started record the ports.
func TestPortsReachHooksInstancesAndTheManifest(t *testing.T) {
	out, events := runWith(t, `apiVersion: chaos/v1alpha1
id: ported
backend: process
ports: [client, peer-http]
env:
  ENDPOINT: http://127.0.0.1:$CHAOS_PORT_CLIENT
preflight:
  - {name: sees-ports, run: 'echo "$CHAOS_PORT_CLIENT $CHAOS_PORT_PEER_HTTP $ENDPOINT" > "$CHAOS_RUN_DIR/preflight-ports"'}
`, `apiVersion: chaos/v1alpha1
id: ports
workloads:
  - {name: w, run: 'echo "$CHAOS_PORT_CLIENT $CHAOS_PORT_PEER_HTTP $ENDPOINT" > ports'}
flow: w
`)
	if out.Verdict.Verdict != rundir.VerdictPass {
		t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
	}
	var m rundir.Manifest
	if err := rundir.ReadJSON(out.Dir.ManifestFile(), &m); err != nil {
		t.Fatal(err)
	}
	client, peer := m.Ports["client"], m.Ports["peer-http"]
	if client <= 0 || peer <= 0 || client == peer {
		t.Fatalf("manifest ports %v", m.Ports)
	}
	want := fmt.Sprintf("%d %d http://127.0.0.1:%d\n", client, peer, client)
	for _, f := range []string{out.Dir.Path("preflight-ports"), out.Dir.Path("workloads", "w", "instances", "w-0", "output", "ports")} {
		if got, _ := readFile(f); got != want {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
	started := find(events, "run.started")
	if len(started) != 1 {
		t.Fatal("no run.started")
	}
	b, _ := json.Marshal(started[0].Get("ports"))
	if string(b) != fmt.Sprintf(`{"client":%d,"peer-http":%d}`, client, peer) {
		t.Errorf("run.started ports %s", b)
	}
}

// TestLockedRunsTakeTurns: two runs whose adapter declares the same lock
// do not overlap: the second waits (lock.waiting names the first), then
// runs; a run that cannot get its lock within lock-timeout ends ERROR
// without starting its flow.
func TestLockedRunsTakeTurns(t *testing.T) {
	lockDir := t.TempDir()
	marks := filepath.Join(t.TempDir(), "marks")
	src := `apiVersion: chaos/v1alpha1
id: locked
backend: process
locks: [fixed-port]
lock-timeout: %s
`
	x := `apiVersion: chaos/v1alpha1
id: turns
workloads:
  - {name: w, run: 'echo "start $CHAOS_RUN_ID" >> ` + marks + `; sleep 0.5; echo "end $CHAOS_RUN_ID" >> ` + marks + `'}
flow: w
`
	run := func(timeout string) *Outcome {
		a, ps := adapter.Parse("locked.yaml", []byte(fmt.Sprintf(src, timeout)))
		if err := ps.Err(); err != nil {
			t.Error(err)
			return nil
		}
		zero := time.Duration(0)
		out, err := Run(context.Background(), Config{Experiment: parse(t, x), Adapter: a, RunsDir: t.TempDir(), Settle: &zero,
			Env: append(os.Environ(), LockDirEnv+"="+lockDir)})
		if err != nil {
			t.Error(err)
			return nil
		}
		return out
	}
	var wg sync.WaitGroup
	outs := make([]*Outcome, 2)
	for i := range outs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = run("1m") }()
	}
	wg.Wait()
	waited := 0
	for _, out := range outs {
		if out == nil {
			t.FailNow()
		}
		if out.Verdict.Verdict != rundir.VerdictPass {
			t.Fatalf("verdict %s: %v", out.Verdict.Verdict, out.Verdict.Errors)
		}
		events, _ := rundir.ReadTimeline(out.Dir.TimelineFile())
		if w := find(events, "lock.waiting"); len(w) == 1 {
			waited++
			if h := w[0].String("holder"); !strings.Contains(h, "run ") {
				t.Errorf("lock.waiting holder %q does not name the run holding it", h)
			}
		}
		if len(find(events, "lock.acquired")) != 1 {
			t.Error("no lock.acquired")
		}
	}
	if waited != 1 {
		t.Errorf("%d runs waited for the lock, want 1", waited)
	}
	got, _ := readFile(marks)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "start ") || !strings.HasPrefix(lines[1], "end ") ||
		strings.TrimPrefix(lines[0], "start ") != strings.TrimPrefix(lines[1], "end ") {
		t.Errorf("the runs overlapped:\n%s", got)
	}

	// Held by another process: a run gives up after its lock-timeout.
	holder := make(chan struct{})
	release := make(chan struct{})
	go func() {
		e := &engine{a: &adapter.Adapter{Locks: []string{"fixed-port"}}, cfg: Config{Env: []string{LockDirEnv + "=" + lockDir}}, runID: "holder"}
		dir, err := rundir.Create(t.TempDir(), "holder", rundir.NewRunID(time.Now()))
		if err == nil {
			e.rec, err = rundir.NewRecorder(dir, time.Now())
		}
		if err != nil {
			t.Error(err)
			close(holder)
			return
		}
		defer e.rec.Close()
		if err := e.acquireLocks(context.Background()); err != nil {
			t.Error(err)
		}
		close(holder)
		<-release
		e.releaseLocks()
	}()
	<-holder
	out := run("300ms")
	close(release)
	if out == nil {
		t.FailNow()
	}
	if out.Verdict.Verdict != rundir.VerdictError || !strings.Contains(strings.Join(out.Verdict.Errors, "\n"), "lock fixed-port: held by run holder") {
		t.Errorf("verdict %s, errors %v; want ERROR naming the holder", out.Verdict.Verdict, out.Verdict.Errors)
	}
	events, _ := rundir.ReadTimeline(out.Dir.TimelineFile())
	if len(find(events, "node.started")) != 0 {
		t.Error("the flow ran without its lock")
	}
}

// TestHealthAnsweredByAnotherProcess: a target whose health check passes
// while the process its start hook started has exited (another copy
// answered on its port) is not the run's: the run is ERROR, saying the
// target exited before it was ready, and the flow does not start.
func TestHealthAnsweredByAnotherProcess(t *testing.T) {
	out, events := runWith(t, `apiVersion: chaos/v1alpha1
id: impostor
backend: process
targets:
  server:
    type: process
    lifecycle: run
    pid-file: $CHAOS_RUN_DIR/server.pid
    # The server exits at once (its port is taken); the health check is
    # answered anyway, as another copy on the same port would answer it.
    start: |
      sh -c 'exit 1' & echo $! > "$CHAOS_RUN_DIR/server.pid"; wait
    health: "true"
`, `apiVersion: chaos/v1alpha1
id: impostor
workloads:
  - {name: w, run: "true"}
flow: w
`)
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Fatalf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
	if msg := strings.Join(out.Verdict.Errors, "\n"); !strings.Contains(msg, "target server exited before it was ready") {
		t.Errorf("errors %q do not say the health check was answered by another process", msg)
	}
	if len(find(events, "node.started")) != 0 {
		t.Error("the flow started with a target that is not the run's")
	}
}

// TestLockHolderWaitsForANewHoldersName: a waiting run that looks between
// the holder's flock and its writing of its name still names it (CI once
// recorded "another process" in TestLockedRunsTakeTurns).
func TestLockHolderWaitsForANewHoldersName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = f.WriteAt([]byte("run r1 (chaos pid 1) since now\nstale tail of a longer name"), 0)
	}()
	if h := lockHolder(context.Background(), path); h != "run r1 (chaos pid 1) since now" {
		t.Errorf("holder %q", h)
	}
	empty := filepath.Join(t.TempDir(), "empty.lock")
	if err := os.WriteFile(empty, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if h := lockHolder(context.Background(), empty); !strings.Contains(h, "has not written its name") {
		t.Errorf("holder of a lock nobody names: %q", h)
	}
}
