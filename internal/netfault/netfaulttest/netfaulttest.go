// Package netfaulttest proves the six network faults from outside, the
// same way on every backend: a test runs the experiment Experiment (two web
// servers, the faults one after the other with quiet gaps between) with
// chaos run, and Prove measures each fault from the host or from inside a
// member's network namespace, never through the harness: round trips
// before, during and after a 100ms latency; a download's rate under a
// 1mbit limit; the share of connections lost at 50% loss; connections
// refused and reset; connections that hang in a blackhole; a connection
// that cannot be made across a partition and can once it heals.
package netfaulttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Experiment is the experiment Prove measures, for a backend whose
// instances run busybox's httpd as the command server (httpd, or busybox
// httpd) listening on listen (8080, or $CHAOS_NET_ADDR:8080). id names it.
func Experiment(id, adapter, server, listen string) string {
	return fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: %s
title: The six network faults, one after the other, measured from outside
default-adapter: %s
timeout: 3m
workloads:
  - name: web
    instances: 2
    timeout: 150s
    run: |
      mkdir -p www && echo hello > www/index.html
      dd if=/dev/zero of=www/big bs=1024 count=256 2>/dev/null
      %s -f -p "%s" -h www & pid=$!
      while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.1; done
      kill $pid; wait
operations:
  - {name: slow, uses: latency, target: {workload: web}, select: {instances: [web-0]}, duration: 4s, network: {delay: 100ms}}
  - {name: thin, uses: bandwidth, target: {workload: web}, select: {instances: [web-0]}, duration: 5s, network: {rate: 1mbit}}
  - {name: lossy, uses: loss, target: {workload: web}, select: {instances: [web-0]}, duration: 5s, network: {percent: 50}}
  - {name: rst, uses: reset, target: {workload: web}, select: {instances: [web-0]}, duration: 3s}
  - {name: hole, uses: blackhole, target: {workload: web}, select: {instances: [web-0]}, duration: 3s}
  - {name: split, uses: partition, target: {workload: web}, duration: 4s, network: {shape: isolate-one, isolate: web-1}}
flow:
  parallel:
    - web
    - serial:
        - {wait: {workload: web, condition: running}}
        - {delay: 4s}
        - slow
        - {delay: 3s}
        - thin
        - {delay: 3s}
        - lossy
        - {delay: 3s}
        - rst
        - {delay: 3s}
        - hole
        - {delay: 3s}
        - split
        - {delay: 3s}
        - {stop: web}
`, id, adapter, server, listen)
}

// Run is a chaos run of Experiment, as the test sees it.
type Run interface {
	// Await returns once the run's timeline has an event named name with
	// these fields.
	Await(name string, want map[string]string) map[string]any
	// Addr is an instance's address, Pid a process in its network
	// namespace.
	Addr(instance string) string
	Pid(instance string) int
}

// Prove measures each fault of Experiment as the run applies it. It
// returns the figures it measured, for the log.
func Prove(t *testing.T, r Run) []string {
	t.Helper()
	var figs []string
	logf := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		figs = append(figs, s)
		t.Log(s)
	}
	a0 := net.JoinHostPort(r.Addr("web-0"), "8080")
	a1 := net.JoinHostPort(r.Addr("web-1"), "8080")
	pid0 := r.Pid("web-0")
	AwaitConnect(t, a0)
	AwaitConnect(t, a1)
	if err := ReachFrom(pid0, a1); err != nil {
		t.Fatalf("web-0 cannot reach web-1 before the faults: %v", err)
	}
	fastRate := Download(t, a0)

	// latency
	before := ConnectTime(t, a0, 9)
	applied := r.Await("network.applied", map[string]string{"operation": "slow"})
	during := ConnectTime(t, a0, 9)
	r.Await("network.removed", map[string]string{"operation": "slow"})
	after := ConnectTime(t, a0, 9)
	logf("latency 100ms (%v, %v): round trip before %v, during %v, after %v", applied["mechanism"], applied["delay_queue"], before, during, after)
	// The chaos binary runs a delay queue in its helper process, on every
	// backend (on Kubernetes, the node agent's).
	if applied["mechanism"] == "nfqueue" && !strings.HasPrefix(fmt.Sprint(applied["delay_queue"]), "a helper process at ") {
		t.Errorf("the delay queue runs in %q, want a helper process", applied["delay_queue"])
	}
	if d := during - before; d < 95*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("the latency added %v to a round trip, want about 100ms", d)
	}
	if after > before+20*time.Millisecond {
		t.Errorf("round trip after the latency %v, before %v", after, before)
	}

	// bandwidth
	r.Await("network.applied", map[string]string{"operation": "thin"})
	thin := Download(t, a0)
	r.Await("network.removed", map[string]string{"operation": "thin"})
	again := Download(t, a0)
	logf("bandwidth 1mbit: a 256 KiB download at %.2f Mbit/s before, %.3f during, %.2f after", fastRate/1e6, thin/1e6, again/1e6)
	// The limit is the ceiling; the floor only says the link still carries
	// about the rate: a loaded machine's client reads late, and 0.693 and
	// 0.698 Mbit/s were measured under 1mbit in CI-like runs.
	if thin < 0.6e6 || thin > 1.3e6 {
		t.Errorf("a download under a 1mbit limit ran at %.3f Mbit/s", thin/1e6)
	}
	if again < 5e6 {
		t.Errorf("a download after the limit ran at %.3f Mbit/s", again/1e6)
	}

	// loss
	r.Await("network.applied", map[string]string{"operation": "lossy"})
	lost := Lost(a0, 24, 200*time.Millisecond)
	r.Await("network.removed", map[string]string{"operation": "lossy"})
	// A connection may take one SYN retransmit (1s) after the loss: its
	// port may still be half-open on the server from a lost handshake.
	lostAfter := Lost(a0, 24, 3*time.Second)
	logf("loss 50%%: %d of 24 connections not made within 200ms during, %d of 24 within 3s after", lost, lostAfter)
	if lost < 5 || lost > 19 {
		t.Errorf("%d of 24 connections lost at 50%% loss", lost)
	}
	if lostAfter != 0 {
		t.Errorf("%d of 24 connections lost after the loss", lostAfter)
	}

	// reset: a connection made before is reset, a new one refused.
	// As after the loss: the first SYN may meet a half-open port and be
	// retransmitted after 1s; the reset comes 3s after the loss ended.
	held, err := net.DialTimeout("tcp", a0, 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write([]byte("GET / HTTP/1.0\r\n")); err != nil {
		t.Fatal(err)
	}
	r.Await("network.applied", map[string]string{"operation": "rst"})
	_, refused := net.DialTimeout("tcp", a0, time.Second)
	held.SetDeadline(time.Now().Add(2 * time.Second))
	_, werr := held.Write([]byte("Host: x\r\n\r\n"))
	_, rerr := io.ReadAll(held)
	reset := errors.Join(werr, rerr)
	r.Await("network.removed", map[string]string{"operation": "rst"})
	logf("reset: a new connection: %v; a connection made before: %v", refused, reset)
	if !errors.Is(refused, syscall.ECONNREFUSED) {
		t.Errorf("a connection during reset: %v, want refused", refused)
	}
	if !errors.Is(reset, syscall.ECONNRESET) {
		t.Errorf("a connection made before the reset: %v, want reset by peer", reset)
	}
	AwaitConnect(t, a0)

	// blackhole
	r.Await("network.applied", map[string]string{"operation": "hole"})
	start := time.Now()
	_, hung := net.DialTimeout("tcp", a0, 500*time.Millisecond)
	waited := time.Since(start)
	r.Await("network.removed", map[string]string{"operation": "hole"})
	logf("blackhole: a connection %v after %v", hung, waited.Round(time.Millisecond))
	var ne net.Error
	if !errors.As(hung, &ne) || !ne.Timeout() {
		t.Errorf("a connection into the blackhole: %v, want a timeout", hung)
	}
	AwaitConnect(t, a0)

	// partition
	r.Await("network.applied", map[string]string{"operation": "split", "target": "web-0"})
	r.Await("network.applied", map[string]string{"operation": "split", "target": "web-1"})
	across := ReachFrom(pid0, a1)
	hc, host := net.DialTimeout("tcp", a1, time.Second)
	if host == nil {
		hc.Close()
	}
	r.Await("operation.reverted", map[string]string{"operation": "split"})
	healed := ReachFrom(pid0, a1)
	logf("partition isolate-one web-1: web-0 to web-1 %v; the host to web-1 %v; after it healed %v", across, host, healed)
	if across == nil {
		t.Error("web-0 reached web-1 across the partition")
	}
	if host != nil {
		t.Errorf("the host, in no group, could not reach web-1: %v", host)
	}
	if healed != nil {
		t.Errorf("web-0 cannot reach web-1 after the partition healed: %v", healed)
	}
	return figs
}

// ConnectTime is the median time of n TCP connects to addr: one round
// trip (SYN, SYN-ACK) each.
func ConnectTime(t *testing.T, addr string, n int) time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatalf("connecting to %s: %v", addr, err)
		}
		ds = append(ds, time.Since(start))
		c.Close()
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// AwaitConnect waits until addr takes connections.
func AwaitConnect(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s takes no connections: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Download fetches /big (256 KiB) from the server at addr and returns the
// rate, in bits per second, at which the body came: from its first bytes
// to its last. The time to the first byte (a connect, and a busybox httpd
// that forks a child for the request) is no part of a bandwidth, and on a
// loaded machine it was half a second more of a 2 s download under a
// 1mbit limit (0.70 Mbit/s measured).
func Download(t *testing.T, addr string) float64 {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/big")
	if err != nil {
		t.Fatalf("downloading from %s: %v", addr, err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64<<10)
	first, err := resp.Body.Read(buf)
	for first == 0 && err == nil {
		first, err = resp.Body.Read(buf)
	}
	start := time.Now()
	rest, err2 := io.CopyBuffer(io.Discard, resp.Body, buf)
	if err == io.EOF {
		err = nil
	}
	if n := int64(first) + rest; errors.Join(err, err2) != nil || n != 256*1024 {
		t.Fatalf("downloaded %d bytes from %s: %v", n, addr, errors.Join(err, err2))
	}
	// The first read's bytes came before start: they are not counted.
	return float64(rest*8) / time.Since(start).Seconds()
}

// Lost counts how many of n connects to addr are not made within limit
// (below the 1s after which a lost SYN is sent again).
func Lost(addr string, n int, limit time.Duration) int {
	lost := 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, limit)
		if err != nil {
			lost++
			continue
		}
		c.Close()
	}
	return lost
}

// ReachFrom connects to addr from inside the network namespace of process
// pid, as the process itself would: on a thread that enters the namespace
// and is then thrown away.
func ReachFrom(pid int, addr string) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		ch <- err
	}()
	return <-ch
}

// FindEvent returns the first event of the run directory's timeline named
// name whose fields print as want, or nil: what an end-to-end test polls
// for while a run goes on.
func FindEvent(dir, name string, want map[string]string) map[string]any {
	data, _ := os.ReadFile(filepath.Join(dir, "timeline.jsonl"))
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) != nil || e["event"] != name {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && fmt.Sprint(e[k]) == v
		}
		if ok {
			return e
		}
	}
	return nil
}

// NamespaceState is what the network namespace of process pid holds that
// a fault could have left: the nftables ruleset, the iptables rules
// (iptables-save, both legacy and nft back ends print theirs) and the
// qdiscs.
func NamespaceState(t *testing.T, pid int) string {
	t.Helper()
	var b strings.Builder
	for _, c := range [][]string{{"nft", "list", "ruleset"}, {"iptables-save"}, {"tc", "qdisc", "show"}} {
		out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "--"}, c...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s in the namespace of %d: %v\n%s", strings.Join(c, " "), pid, err, out)
		}
		b.Write(out)
	}
	return b.String()
}

// HeldFaultsExperiment is experiment id holding all six network faults on
// target until the run ends: a latency (the delay queue), a bandwidth
// limit (tbf), loss, a blackhole, a reset, and last a partition of target
// from the workload w, whose "on" edge says that all six hold. The SIGKILL
// cleanup tests kill its harness then.
func HeldFaultsExperiment(id, target string) string {
	return strings.ReplaceAll(`apiVersion: chaos/v1alpha1
id: `+id+`
workloads:
  - {name: w, run: "sleep 120"}
operations:
  - {name: slow, uses: latency, target: TARGET, network: {delay: 50ms}}
  - {name: thin, uses: bandwidth, target: TARGET, network: {rate: 1mbit}}
  - {name: lossy, uses: loss, target: TARGET, network: {percent: 30}}
  - {name: hole, uses: blackhole, target: TARGET}
  - {name: refuse, uses: reset, target: TARGET}
  - {name: split, uses: partition, network: {groups: [[TARGET], [w]]}}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, slow, thin, lossy, hole, refuse, split]}]
`, "TARGET", target)
}

// HoldNetns starts a process that sleeps in the network namespace at
// nsPath (a /proc/PID/ns/net or a bind mount of one), as a pod's sandbox
// holds its namespace beyond its containers, and returns its pid once it
// is in that namespace: nsenter is a process of this namespace until its
// setns, and a test that reads "the held namespace" through it before
// then reads this one's. stop kills and reaps it; the test's cleanup
// calls it too.
func HoldNetns(t testing.TB, nsPath string) (pid int, stop func()) {
	t.Helper()
	var want syscall.Stat_t
	if err := syscall.Stat(nsPath, &want); err != nil {
		t.Fatalf("the namespace to hold: %v", err)
	}
	cmd := exec.Command("nsenter", "--net="+nsPath, "--", "sleep", "600")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	t.Cleanup(stop)
	pid = cmd.Process.Pid
	in := filepath.Join("/proc", strconv.Itoa(pid), "ns", "net")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var st syscall.Stat_t
		if err := syscall.Stat(in, &st); err == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			return pid, stop
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("nsenter --net=%s was not in that namespace within 10 s", nsPath)
		}
	}
}
